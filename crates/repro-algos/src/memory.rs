//! What a simulated run holds in memory, known before anything is built: the
//! driver refuses a run that does not fit at plan time, and writes this
//! estimate beside the peak it measured (`repro run sim-scale`).
//!
//! The parts, per worker: the model, the algorithm's state beyond it
//! (replicas, estimates, error memory, buffers a worker keeps between
//! calls), its frames (the one sent and, where the simulator encodes the
//! next one early, that one), and the simulator's optimizer buffers; per
//! thread, the scratch vectors a call borrows (`scratch.rs`); once, the
//! objective. Each algorithm's count of vectors mirrors its file in
//! `algos/`; `cli::a_simulator_run_measures_its_peak_memory` holds the sum
//! against the resident memory a real run reaches.

use crate::algos::AlgorithmSpec;
use crate::compress::{Compressor, CompressorSpec};
use repro_codec::frame::{HEADER_LEN, Kind, raw_body_len};

/// Bytes a simulated run holds, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footprint {
    pub workers: u64,
    pub threads: u64,
    /// Per worker: the model.
    pub model: u64,
    /// Per worker: state beyond the model (replicas, estimates, ...).
    pub state: u64,
    /// Per worker: frame buffers.
    pub frames: u64,
    /// Per worker: momentum, and the step where `send` reads it.
    pub optimizer: u64,
    /// Per thread: scratch vectors.
    pub scratch: u64,
    /// Once: the objective (targets, data).
    pub objective: u64,
}

impl Footprint {
    /// Bytes per worker: model, state, frames and optimizer buffers.
    pub fn per_worker(&self) -> u64 {
        self.model + self.state + self.frames + self.optimizer
    }

    /// Bytes of the whole run.
    pub fn total(&self) -> u64 {
        self.workers * self.per_worker() + self.threads * self.scratch + self.objective
    }
}

/// The run's shape: what the footprint depends on besides the algorithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub workers: usize,
    pub dim: usize,
    /// The most neighbours any worker has.
    pub degree: usize,
    pub threads: usize,
    pub momentum: bool,
    /// The objective is separable (the quadratics): the workers that can
    /// (D-PSGD at full precision, Moniqua without a hash) run a block at a
    /// time and borrow no model-long scratch.
    pub separable: bool,
    /// Bytes the objective holds.
    pub objective: u64,
}

/// Bytes of a frame of `d` values through `c`, as its codec sizes it
/// (uncompressed: zstd, where a frame asks for it, only shrinks it). A spec
/// `from_name` returned always builds (it built it); one that does not
/// sends nothing.
fn compressor_frame(c: &CompressorSpec, d: usize) -> u64 {
    Compressor::new(c, 0).map_or(0, |c| c.frame_len(d) as u64)
}

impl AlgorithmSpec {
    /// Vectors of the model's length a worker keeps beyond its model, and
    /// those it borrows per call from its thread's scratch, for a worker
    /// with `degree` neighbours.
    fn vectors(&self, degree: usize) -> (usize, usize) {
        match self {
            // own step, sum, decode buffer
            AlgorithmSpec::AllReduce | AlgorithmSpec::QuantizedGradient(_) => (3, 0),
            // accumulator and decode buffer, borrowed
            AlgorithmSpec::DPsgd | AlgorithmSpec::Naive(_) => (0, 2),
            // the update out of place when hashed, else in place
            AlgorithmSpec::Moniqua { codec, .. } => (0, usize::from(codec.hash)),
            // a replica per neighbour, accumulator, decode buffer
            AlgorithmSpec::Dcd(_) => (degree + 2, 0),
            // its own estimate and one per neighbour, each in f64 (two
            // vectors' bytes), the extrapolation and the decode buffer
            AlgorithmSpec::Ecd(_) => (2 * (degree + 1) + 2, 0),
            // x^_i and s_i; the difference and decode buffer borrowed
            AlgorithmSpec::Choco { .. } => (2, 2),
            // error memory, accumulator, decode buffer
            AlgorithmSpec::DeepSqueeze { .. } => (3, 0),
            // previous model, previous step, half step, accumulator, decode buffer
            AlgorithmSpec::D2 { .. } | AlgorithmSpec::MoniquaD2 { .. } => (5, 0),
            // synchronized model, accumulator, decode buffer, own change
            AlgorithmSpec::Periodic { .. } => (4, 0),
            AlgorithmSpec::Rotating { .. } => (0, 0),
        }
    }

    /// Bytes of one frame of a model of `d` coordinates.
    pub fn frame_bytes(&self, d: usize) -> u64 {
        match self {
            AlgorithmSpec::Moniqua { codec, .. } | AlgorithmSpec::MoniquaD2 { codec, .. } => {
                // the packed codes (the hash is in the header)
                (HEADER_LEN + raw_body_len(Kind::Moniqua, codec.bits, d, 0)) as u64
            }
            // the rest send f32 values or through their compressor
            spec => compressor_frame(spec.compressor().unwrap_or(&CompressorSpec::Full), d),
        }
    }

    /// What the footprint takes from the worker, one arm per algorithm:
    /// whether `send` leaves the local step alone, so the simulator sends
    /// first and keeps the next frame early (the worker's
    /// `!send_reads_delta()`), and whether it runs a block of coordinates
    /// at a time on a separable objective (its `blockwise()` begins).
    /// `workers_are_what_the_footprint_counts` holds both to the worker.
    fn worker_facts(&self) -> (bool, bool) {
        match self {
            // full-precision frames only run in blocks: D-PSGD, and naive
            // gossip without compression (the same algorithm)
            AlgorithmSpec::DPsgd | AlgorithmSpec::Naive(CompressorSpec::Full) => (true, true),
            AlgorithmSpec::Naive(_) => (true, false),
            AlgorithmSpec::Moniqua { codec, .. } => (true, !codec.hash),
            AlgorithmSpec::AllReduce
            | AlgorithmSpec::Dcd(_)
            | AlgorithmSpec::Ecd(_)
            | AlgorithmSpec::Choco { .. }
            | AlgorithmSpec::DeepSqueeze { .. }
            | AlgorithmSpec::D2 { .. }
            | AlgorithmSpec::MoniquaD2 { .. }
            | AlgorithmSpec::Periodic { .. }
            | AlgorithmSpec::Rotating { .. }
            | AlgorithmSpec::QuantizedGradient(_) => (false, false),
        }
    }

    fn sends_without_step(&self) -> bool {
        self.worker_facts().0
    }

    fn runs_in_blocks(&self) -> bool {
        self.worker_facts().1
    }

    /// What a simulated run of this algorithm holds, by part.
    pub fn footprint(&self, shape: &Shape) -> Footprint {
        let vector = 4 * shape.dim as u64;
        let (kept, borrowed) = self.vectors(shape.degree);
        let fused = self.sends_without_step();
        let blockwise = shape.separable && self.runs_in_blocks();
        let borrowed = if blockwise { 0 } else { borrowed };
        // fused: the frame sent and the next one, encoded early; else the
        // frame and the step, which `send` reads
        let frames = self.frame_bytes(shape.dim) * if fused { 2 } else { 1 };
        let optimizer = vector * (u64::from(shape.momentum) + u64::from(!fused));
        // a fused worker that is not a block at a time takes its step from
        // the thread's scratch
        let whole_step = fused && !blockwise;
        Footprint {
            workers: shape.workers as u64,
            threads: shape.threads.max(1) as u64,
            model: vector,
            state: vector * kept as u64,
            frames,
            optimizer,
            scratch: vector * (borrowed + usize::from(whole_step)) as u64,
            objective: shape.objective,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ALGORITHM_NAMES, Knobs, Quadratic, SimConfig, Simulator, Topology};
    use repro_codec::{MoniquaConfig, StochasticConfig};
    use repro_runlog::HashMode;

    /// Moniqua at `bits`, Table 2's way at 1 bit (an explicit modulus, no hash).
    fn moniqua(bits: u32) -> AlgorithmSpec {
        let codec = if bits == 1 {
            MoniquaConfig {
                bits,
                modulus: Some(0.5),
                hash: false,
                ..MoniquaConfig::default()
            }
        } else {
            MoniquaConfig {
                bits,
                ..MoniquaConfig::default()
            }
        };
        AlgorithmSpec::Moniqua { codec, gamma: 1.0 }
    }

    /// The frame size the footprint counts is the size the codecs write.
    #[test]
    fn frame_bytes_are_the_frames_sent() {
        let (n, d) = (4, 5000);
        let objective = Quadratic::homogeneous(n, vec![0.1; d], 0.0);
        let q = CompressorSpec::Stochastic(StochasticConfig {
            bits: 2,
            ..StochasticConfig::default()
        });
        for spec in [
            AlgorithmSpec::DPsgd,
            moniqua(1),
            moniqua(8),
            AlgorithmSpec::Choco {
                compressor: q.clone(),
                gamma: 0.5,
            },
            AlgorithmSpec::Dcd(q),
        ] {
            let mut sim = Simulator::new(
                &objective,
                Topology::ring(n).unwrap(),
                &spec,
                SimConfig::default(),
                &vec![0.0; d],
            )
            .unwrap();
            let r = sim.step().unwrap();
            assert!(
                r.frame_bytes
                    .iter()
                    .all(|&b| b as u64 == spec.frame_bytes(d)),
                "{}: {:?} against {}",
                spec.name(),
                r.frame_bytes,
                spec.frame_bytes(d)
            );
        }
    }

    /// Every registered algorithm, with the default knobs and with a
    /// full-precision compressor and no hash: the facts the footprint takes
    /// from the spec are its worker's (whether `send` reads the step,
    /// whether it runs a block at a time), and its frames are the size
    /// counted (RSGD's a slice of the model, at most that). An algorithm
    /// whose arms here do not say what its worker does fails this test.
    #[test]
    fn workers_are_what_the_footprint_counts() {
        let (n, d) = (4, 3000);
        let objective = Quadratic::homogeneous(n, vec![0.1; d], 0.0);
        let full = Knobs {
            compressor: repro_runlog::CompressorKind::Full,
            hash: HashMode::Off,
            bits: 2,
            ..Knobs::default()
        };
        for (name, knobs) in ALGORITHM_NAMES
            .iter()
            .flat_map(|n| [(*n, Knobs::default()), (*n, full.clone())])
        {
            let spec = AlgorithmSpec::from_name(name, &knobs).unwrap();
            let ring = Topology::ring(n).unwrap();
            let mut worker = spec.build(0, &ring, 1, &vec![0.0; d]).unwrap();
            let what = format!("{name} with {} compression", knobs.compressor);
            assert_eq!(
                spec.sends_without_step(),
                !worker.send_reads_delta(),
                "{what}: sends without its step"
            );
            let in_blocks = match worker.blockwise() {
                Some(b) => b.begin(0, &[], Some(&mut Vec::new())).unwrap(),
                None => false,
            };
            assert_eq!(spec.runs_in_blocks(), in_blocks, "{what}: in blocks");
            let mut sim =
                Simulator::new(&objective, ring, &spec, SimConfig::default(), &vec![0.0; d])
                    .unwrap();
            let mut sent = Vec::new();
            for _ in 0..8 {
                sent.extend(
                    sim.step()
                        .unwrap()
                        .frame_bytes
                        .into_iter()
                        .filter(|&b| b > 0),
                );
            }
            assert!(!sent.is_empty(), "{what} sent nothing");
            let counted = spec.frame_bytes(d);
            for b in sent {
                match spec {
                    AlgorithmSpec::Rotating { .. } => assert!(b as u64 <= counted, "{what}"),
                    _ => assert_eq!(b as u64, counted, "{what}: frame bytes"),
                }
            }
        }
    }

    /// The parts add up, and the algorithms order as Table 1 of the paper
    /// has them: Moniqua holds no more than D-PSGD, CHOCO two vectors more.
    #[test]
    fn footprints_add_up_and_order_as_table_1() {
        let shape = Shape {
            workers: 1024,
            dim: 1_000_000,
            degree: 2,
            threads: 2,
            momentum: false,
            separable: true,
            objective: 14 * 4_000_000,
        };
        let moniqua = moniqua(1);
        let choco = AlgorithmSpec::Choco {
            compressor: CompressorSpec::Full,
            gamma: 0.5,
        };
        let [m, p, c] = [&moniqua, &AlgorithmSpec::DPsgd, &choco].map(|s| s.footprint(&shape));
        assert_eq!(
            m.total(),
            1024 * (4_000_000 + 2 * (44 + 125_000)) + 14 * 4_000_000
        );
        assert_eq!(m.state, 0);
        assert!(m.per_worker() < p.per_worker());
        assert_eq!(c.state, 2 * 4_000_000);
        // D-PSGD: the model and two full-precision frames
        assert_eq!(p.per_worker(), 4_000_000 + 2 * (44 + 4_000_000));
    }
}
