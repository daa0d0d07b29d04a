//! Error types of the algorithms crate.

use thiserror::Error;

/// A topology that cannot be built.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum TopologyError {
    #[error(
        "a {kind} needs at least {min} workers, got {n}; set `workers` or pick another `topology`"
    )]
    TooFewWorkers {
        kind: &'static str,
        n: usize,
        min: usize,
    },
    #[error(
        "a square torus needs a square number of workers, got {n}; give `torus: {{rows, cols}}`"
    )]
    NotSquare { n: usize },
    #[error("edge ({a}, {b}) names a worker outside 0..{n}")]
    EdgeOutOfRange { a: usize, b: usize, n: usize },
    #[error("edge ({a}, {a}) is a self-loop; self weights are implied")]
    SelfLoop { a: usize },
    #[error(
        "the graph is not connected (worker {unreached} cannot be reached from worker 0), so W has no spectral gap"
    )]
    Disconnected { unreached: usize },
    #[error("unknown topology `{name}`; use ring, torus, complete, star or exponential")]
    UnknownName { name: String },
    #[error("gamma must be in (0, 1], got {gamma}; fix `gamma`")]
    InvalidGamma { gamma: f64 },
}

/// An algorithm that cannot be built or cannot step.
#[derive(Debug, Error)]
pub enum AlgoError {
    #[error(transparent)]
    Config(#[from] repro_codec::ConfigError),
    #[error("codec failed")]
    Codec(#[from] repro_codec::CodecError),
    #[error("invalid topology: {0}")]
    Topology(#[from] TopologyError),
    #[error("{what} has {got} values, expected {expected}")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("worker {worker} received a frame from {from}, which is not its neighbour")]
    NotNeighbour { worker: usize, from: usize },
    #[error("invalid setting: {0}")]
    Invalid(String),
}

/// The one divergence rule for a step's outcome: `Ok(None)` when its error
/// means the run diverged ([`AlgoError::is_divergence`]), the value or any
/// other error as they are. The simulator's loop and the trainer's sends
/// and receives all go through it; a non-finite training loss is the other
/// sign, checked where the loss is computed.
pub fn unless_diverged<T>(outcome: Result<T, AlgoError>) -> Result<Option<T>, AlgoError> {
    match outcome {
        Err(e) if e.is_divergence() => Ok(None),
        other => other.map(Some),
    }
}

impl AlgoError {
    /// Whether this error means the run diverged (a model became non-finite
    /// or left the range a codec can represent), rather than a bug or a
    /// misconfiguration.
    pub fn is_divergence(&self) -> bool {
        matches!(
            self,
            AlgoError::Codec(
                repro_codec::CodecError::NonFinite { .. }
                    | repro_codec::CodecError::OutOfRange { .. }
                    | repro_codec::CodecError::Overflow { .. }
            )
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_rejected_model_is_divergence() {
        let nan = AlgoError::Codec(repro_codec::CodecError::NonFinite { count: 1, first: 0 });
        assert_eq!(unless_diverged::<u8>(Err(nan)).unwrap(), None);
        let overflow = AlgoError::Codec(repro_codec::CodecError::Overflow {
            what: "a bucket's norm",
            at: 0,
        });
        assert_eq!(unless_diverged::<u8>(Err(overflow)).unwrap(), None);
        assert_eq!(unless_diverged(Ok(3)).unwrap(), Some(3));
        let bug = AlgoError::Invalid("x".into());
        assert!(unless_diverged::<u8>(Err(bug)).is_err());
    }
}
