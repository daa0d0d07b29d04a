//! The interface every decentralized algorithm implements.
//!
//! One synchronous iteration `k` of worker `i`:
//! 1. the caller computes a stochastic gradient at the current model and
//!    turns it into the local step `delta = lr * direction` (momentum and
//!    weight decay are the optimizer's, identical for every algorithm, see
//!    [`crate::optim`]); algorithms use `delta` wherever their paper writes
//!    `alpha g`;
//! 2. [`Worker::send`] writes the one frame the worker broadcasts to all its
//!    neighbours this iteration;
//! 3. the transport delivers the neighbours' frames and
//!    [`Worker::receive`] finishes the iteration.
//!
//! Workers never call MPI or torch: they see bytes in and bytes out, and every
//! byte counted is a byte of a frame they produced.
//!
//! D-PSGD step order (used by every gossip algorithm here): the gradient is
//! taken at `x_k`, and `x_{k+1} = sum_j W_ij x_{k,j} - delta_k`, i.e. mixing of
//! the models as they were when the gradient was computed (Lian et al. 2017,
//! Moniqua's Algorithm 1; powergossip and Bagua do the same).

use repro_codec::{DitherTable, Prefetch};

use crate::{AlgoError, Topology};

/// How a worker's frames travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// One frame to each neighbour in the topology.
    Gossip,
    /// A collective over all workers (ring all-reduce) of summable f32
    /// frames; the inbox holds every other worker's frame.
    AllReduce,
    /// A gather of every worker's (compressed, not summable) frame by every
    /// worker (ring all-gather); the inbox holds every other worker's frame.
    AllGather,
}

/// Counts from one `receive`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Frames whose hash verified the recovered model.
    pub verified: u64,
    /// Frames whose recovered model failed the hash (theta too small).
    pub mismatched: u64,
}

impl Received {
    /// Counts one frame's verification.
    pub fn record(&mut self, v: repro_codec::Verification) {
        match v {
            repro_codec::Verification::Verified => self.verified += 1,
            repro_codec::Verification::Mismatch => self.mismatched += 1,
            repro_codec::Verification::Unchecked => {}
        }
    }
}

/// One worker of a decentralized algorithm.
pub trait Worker: Send {
    /// The local model `x_i`.
    fn model(&self) -> &[f32];
    /// Writes this iteration's frame into `out` (replacing its contents); an
    /// empty frame means the worker sends nothing this iteration.
    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError>;
    /// Whether [`send`](Self::send) reads the local step. Where it does not,
    /// `send` gets an empty `delta` from callers that have not computed the
    /// step yet (the simulator then computes each worker's gradient right
    /// before its `receive`, while its model is in cache).
    fn send_reads_delta(&self) -> bool {
        true
    }
    /// A hint for the next [`receive`](Self::receive) only: memory the caller
    /// reads right after it (the simulator: the next worker's model), which a
    /// worker may ask the CPU to bring into cache while it works. Never
    /// changes a result; the default ignores it.
    fn prefetch_next(&mut self, next: repro_codec::Prefetch) {
        let _ = next;
    }
    /// Consumes the neighbours' frames `(sender, bytes)`, sorted by sender,
    /// and finishes iteration `k`.
    fn receive(
        &mut self,
        k: u64,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError>;
    /// The worker's iteration a block of coordinates at a time, where it
    /// can run one (see [`Blockwise`]); `None` (the default) where not.
    fn blockwise(&mut self) -> Option<&mut dyn Blockwise> {
        None
    }

    /// Bytes of state this worker keeps beyond D-PSGD's (the model, one
    /// accumulator, one decode buffer and the frames of one iteration).
    fn extra_memory(&self) -> usize;
    /// How the frames travel.
    fn pattern(&self) -> Pattern {
        Pattern::Gossip
    }

    /// Finishes iteration `k` of a [`Pattern::AllReduce`] worker from the
    /// sum, over every worker (this one included), of the f32 vectors their
    /// frames of this iteration carry, computed by a collective (the
    /// trainer's ring all-reduce) instead of from the frames themselves.
    /// Equivalent to [`receive`](Self::receive) with every frame, up to the
    /// order of the additions.
    fn receive_sum(&mut self, k: u64, sum: &[f32]) -> Result<Received, AlgoError> {
        let _ = (k, sum);
        Err(AlgoError::Invalid(
            "this algorithm does not average through an all-reduce".into(),
        ))
    }

    /// For algorithms with an a priori bound theta (Moniqua): exchange full
    /// precision and track the largest local step until
    /// [`set_auto_theta`](Self::set_auto_theta). Returns whether the worker
    /// has a theta at all.
    fn start_theta_warmup(&mut self) -> bool {
        false
    }

    /// The largest `|delta|_inf` seen during the warm-up, if warming up.
    fn max_step(&self) -> Option<f32> {
        None
    }

    /// Ends the warm-up: theta from Theorem 2 (or 3, with gamma) given the
    /// largest step over all workers, `n` and `rho`. Returns the theta chosen.
    fn set_auto_theta(
        &mut self,
        _max_step: f32,
        _n: usize,
        _rho: f64,
    ) -> Result<Option<f64>, AlgoError> {
        Ok(None)
    }

    /// Ends the warm-up with `theta` chosen by the caller (`theta:
    /// theorem2`, from the gradients the worker does not see). Returns the
    /// theta set, `None` for algorithms without one.
    fn end_warmup_with(&mut self, _theta: f64) -> Result<Option<f64>, AlgoError> {
        Ok(None)
    }

    /// The current theta, for algorithms that have one.
    fn theta(&self) -> Option<f64> {
        None
    }

    /// The current modulus B, for algorithms that have one.
    fn modulus(&self) -> Option<f64> {
        None
    }

    /// Replaces theta (all workers must agree on it: the modulus is checked
    /// on every frame).
    fn set_theta(&mut self, _theta: f64) -> Result<(), AlgoError> {
        Ok(())
    }

    /// Moniqua: the frame worker `sender` sends at iteration `k` when its
    /// model is `model` (the codec is the same on every worker), written to
    /// `frame`, then recovered against this worker's model into `out`
    /// (Algorithm 1, line 5); returns Lemma 2's bound on the recovery's
    /// error, `delta B`, which holds while the two models are closer than
    /// theta. None for algorithms without modulo recovery (and during
    /// Moniqua's full-precision warm-up).
    fn recover(
        &self,
        _k: u64,
        _sender: usize,
        _model: &[f32],
        _frame: &mut Vec<u8>,
        _out: &mut [f32],
    ) -> Option<Result<f64, AlgoError>> {
        None
    }
}

pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), AlgoError> {
    if expected == got {
        Ok(())
    } else {
        Err(AlgoError::Length {
            what,
            expected,
            got,
        })
    }
}

/// A [`Blockwise::block`]'s model block `at..at + len` of `x`, and its
/// local step's room, the first `len` values of `scratch`.
pub(crate) fn block_views<'a>(
    x: &'a mut [f32],
    scratch: &'a mut [f32],
    at: usize,
    len: usize,
) -> Result<(&'a mut [f32], &'a mut [f32]), AlgoError> {
    let x = x
        .get_mut(at..at + len)
        .ok_or_else(|| AlgoError::Invalid(format!("block {at}..{} past the model", at + len)))?;
    let have = scratch.len();
    let delta = scratch.get_mut(..len).ok_or_else(|| {
        AlgoError::Invalid(format!("scratch of {have} values for a block of {len}"))
    })?;
    Ok((x, delta))
}

/// `W_ij` of `i`'s neighbour `j`, or an error if `j` is not one.
fn weight_of(weights: &[(usize, f64)], worker: usize, from: usize) -> Result<f32, AlgoError> {
    weights
        .binary_search_by_key(&from, |&(j, _)| j)
        .map(|at| weights[at].1 as f32)
        .map_err(|_| AlgoError::NotNeighbour { worker, from })
}

/// What a compressing gossip worker starts from: its row of the mixing
/// matrix, its own copy of the model and its compressor. D-PSGD's (naive),
/// DCD's, ECD's, CHOCO's and DeepSqueeze's constructors each take these
/// from [`Gossip::new`] and add their own state.
#[derive(Debug)]
pub(crate) struct Gossip {
    pub row: Row,
    pub x: Vec<f32>,
    pub compressor: crate::compress::Compressor,
}

impl Gossip {
    pub(crate) fn new(
        rank: usize,
        topology: &Topology,
        compressor: crate::compress::Compressor,
        x0: &[f32],
    ) -> Self {
        Self {
            row: Row::of(topology, rank),
            x: crate::flat::model_copy(x0),
            compressor,
        }
    }
}

/// A gossip worker's row of the mixing matrix: its rank, `W_ii`, and
/// `(j, W_ij)` for its neighbours in rank order (the order of their frames,
/// and of what a worker keeps per neighbour). Every gossip worker but
/// Moniqua's (which scales its row by gamma) holds one.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub rank: usize,
    pub self_weight: f32,
    pub weights: Vec<(usize, f64)>,
}

impl Row {
    /// Worker `rank`'s row of `topology`'s mixing matrix.
    pub(crate) fn of(topology: &Topology, rank: usize) -> Self {
        Row {
            rank,
            self_weight: topology.self_weight(rank) as f32,
            weights: topology.neighbours(rank).to_vec(),
        }
    }

    /// `W_ij` of sender `from`, or an error if it is no neighbour.
    pub(crate) fn weight(&self, from: usize) -> Result<f32, AlgoError> {
        weight_of(&self.weights, self.rank, from)
    }

    /// Where neighbour `from` sits in [`weights`](Self::weights), or an
    /// error if it is no neighbour.
    pub(crate) fn slot(&self, from: usize) -> Result<usize, AlgoError> {
        self.weights
            .binary_search_by_key(&from, |&(j, _)| j)
            .map_err(|_| AlgoError::NotNeighbour {
                worker: self.rank,
                from,
            })
    }
}

/// `acc += w * v`.
pub(crate) fn axpy(acc: &mut [f32], w: f32, v: &[f32]) {
    for (a, &x) in acc.iter_mut().zip(v) {
        *a += w * x;
    }
}

/// A worker's place in a collective (all-reduce, all-gather): its rank
/// among `n`. What the centralized algorithms (all-reduce SGD, QSGD,
/// TernGrad, PSGD, PQASGD, RSGD) hold in place of a [`Row`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Group {
    pub rank: usize,
    pub n: usize,
}

impl Group {
    /// `1 / n`, what a sum is scaled by to average.
    pub(crate) fn inv(&self) -> f32 {
        1.0 / self.n as f32
    }

    /// `sum_j v_j` over all workers in rank order (so that every worker
    /// computes the same bits, as a deterministic collective does), `own`
    /// at this rank, the others decoded from `inbox` (sorted by sender,
    /// one frame from each other worker) with `decode`.
    pub(crate) fn sum_in_rank_order(
        &self,
        own: &[f32],
        inbox: &[(usize, &[u8])],
        sum: &mut [f32],
        scratch: &mut [f32],
        mut decode: impl FnMut(&[u8], &mut [f32]) -> Result<(), AlgoError>,
    ) -> Result<(), AlgoError> {
        check_len("collective inbox", self.n - 1, inbox.len())?;
        sum.fill(0.0);
        let mut own_added = false;
        for &(from, bytes) in inbox {
            if from > self.rank && !own_added {
                axpy(sum, 1.0, own);
                own_added = true;
            }
            decode(bytes, scratch)?;
            axpy(sum, 1.0, scratch);
        }
        if !own_added {
            axpy(sum, 1.0, own);
        }
        Ok(())
    }
}

/// A worker whose iteration can run a block of coordinates at a time, for
/// a caller that knows the local step a block at a time (a separable
/// objective) and interleaves many workers block by block (the simulator:
/// every worker's block `b`, then every worker's block `b + 1`, so what the
/// workers share per block, the dither of shared randomness, is computed
/// once and stays in cache with the block).
///
/// An iteration is [`begin`](Self::begin), [`block`](Self::block) for
/// every block of the model, [`finish`](Self::finish): bit for bit the
/// model and frame of computing the whole local step, then
/// [`Worker::receive`], then [`Worker::send`] at `k + 1`. The worker's
/// `send` must not read the local step.
pub trait Blockwise {
    /// Starts iteration `k` with the neighbours' frames, and with `next` the
    /// frame of `k + 1`. `Ok(false)`, with nothing changed, where the
    /// worker cannot this iteration (the caller then uses `receive`).
    fn begin(
        &mut self,
        k: u64,
        inbox: &[(usize, &[u8])],
        next: Option<&mut Vec<u8>>,
    ) -> Result<bool, AlgoError>;
    /// What the blocks of coordinates `at..at + len` at `k` may share
    /// across workers: the dither at `k` and `k + 1`
    /// ([`repro_codec::DitherTable::fill`]). A worker given tables
    /// that are not its own ignores them.
    fn fill_dither(&self, k: u64, at: usize, len: usize, tables: &mut [DitherTable; 2]);
    /// Block `at..at + len` (`at` a multiple of 64; blocks of one
    /// iteration in order): `local_step(model block, delta)` writes the
    /// block's local step into `delta` (the first `len` values of
    /// `scratch`) given the model there, then the worker updates the block
    /// and writes its part of `next`. `prefetch`: what the caller reads
    /// next (a hint).
    #[allow(clippy::too_many_arguments)]
    fn block(
        &mut self,
        k: u64,
        inbox: &[(usize, &[u8])],
        at: usize,
        len: usize,
        local_step: &mut dyn FnMut(&[f32], &mut [f32]),
        scratch: &mut [f32],
        tables: &[DitherTable; 2],
        next: Option<&mut Vec<u8>>,
        prefetch: Prefetch,
    ) -> Result<(), AlgoError>;
    /// Ends iteration `k`: the counts, and whether `next` holds the frame
    /// of `k + 1` (an updated model the encoder rejects leaves it unsent,
    /// the update standing).
    fn finish(&mut self, k: u64, next: Option<&mut Vec<u8>>)
    -> Result<(Received, bool), AlgoError>;
}
