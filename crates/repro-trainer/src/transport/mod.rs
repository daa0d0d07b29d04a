//! How frames travel between workers. The MPI implementation is the only
//! code in the suite that calls MPI.

#[cfg(feature = "mpi")]
mod mpi_transport;

#[cfg(feature = "mpi")]
pub use mpi_transport::{MpiTransport, abort_job, abort_on_panic};

use thiserror::Error;

/// A transport failure.
#[derive(Debug, Error)]
pub enum TransportError {
    #[error("MPI was already initialized in this process")]
    AlreadyInitialized,
    #[error("rank {rank} is outside the world of {size}")]
    BadRank { rank: usize, size: usize },
    #[error("{what}: got {got} values, expected {expected}")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
}

/// Point-to-point exchange of frames and the collectives the algorithms need.
pub trait Transport {
    /// This worker's rank.
    fn rank(&self) -> usize;
    /// Number of workers.
    fn size(&self) -> usize;
    /// Sends `frame` to every rank in `to` and receives one frame from every
    /// rank in `from`, returned in the order of `from`. Sends are
    /// non-blocking, so any pattern of neighbours completes.
    fn exchange(
        &mut self,
        to: &[usize],
        frame: &[u8],
        from: &[usize],
    ) -> Result<Vec<Vec<u8>>, TransportError>;
    /// `buf <- sum over ranks of buf`, the same bits on every rank.
    fn all_reduce_sum(&mut self, buf: &mut [f32]) -> Result<(), TransportError>;
    /// Every rank's frame (lengths may differ), in rank order.
    fn all_gather(&mut self, frame: &[u8]) -> Result<Vec<Vec<u8>>, TransportError>;
    /// Delays every outgoing message by `latency` (for kernels without
    /// netem); `None` switches it off.
    fn set_injected_latency(&mut self, latency: Option<std::time::Duration>);
}
