//! The simulator: n workers in one process, exchanging real frames through
//! memory, with a virtual clock that charges each iteration what a network
//! of the given bandwidth and latency would.
//!
//! Per iteration the clock advances by the slowest worker's
//! `max(compute, egress_bytes * 8 / bandwidth + latency * hops)`: egress is
//! per host (like `tc` shaping a NIC), a gossip worker sends its frame once
//! to each neighbour (one hop), and a ring all-reduce sends `2 (n - 1) / n`
//! of a frame in `2 (n - 1)` hops, a ring all-gather `(n - 1)` frames in
//! `n - 1` hops. Deterministic for a given seed.

use crate::algorithm::{Pattern, Received, Worker};
use crate::algos::AlgorithmSpec;
use crate::consensus::{Consensus, Deviation};
use crate::flat::LOSS_LANES;
use crate::objective::{Objective, Separable};
use crate::optim::Sgd;
use crate::rng::Rng;
use crate::{AlgoError, Topology, scratch};
use repro_codec::{DitherTable, Prefetch};
use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

mod pass;
use pass::*;

/// A network condition for the virtual clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Network {
    /// Egress bandwidth per worker, bits per second.
    pub bandwidth_bps: f64,
    /// One-way latency per message, seconds.
    pub latency_s: f64,
}

/// Settings of a simulated run.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    pub lr: f32,
    pub sgd: Sgd,
    /// Virtual seconds of computation per iteration.
    pub compute_s: f64,
    /// `None`: communication is free.
    pub network: Option<Network>,
    /// theta `theorem3-step`: run this many warm-up iterations at full precision,
    /// then set theta from Theorem 2/3 with the largest step seen.
    pub theta_warmup: Option<u64>,
    /// After an iteration with hash mismatches, multiply theta by this.
    pub theta_growth: Option<f64>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            lr: 0.1,
            sgd: Sgd::default(),
            compute_s: 0.0,
            network: None,
            theta_warmup: None,
            theta_growth: None,
        }
    }
}

/// What one iteration did.
#[derive(Debug, Clone, PartialEq)]
pub struct StepReport {
    pub iteration: u64,
    /// Mean over workers of the sampled local loss at the start of the iteration.
    pub train_loss: f64,
    /// Length of each worker's frame this iteration.
    pub frame_bytes: Vec<usize>,
    /// Bytes each worker put on its link this iteration.
    pub egress_bytes: Vec<u64>,
    /// Virtual clock at the end of the iteration, seconds.
    pub time_s: f64,
    pub verified: u64,
    pub mismatched: u64,
    /// theta after the iteration (algorithms that have one).
    pub theta: Option<f64>,
    /// The modulus B after the iteration (algorithms that have one).
    pub modulus: Option<f64>,
}

/// Lemma 2 measured on one iteration's frames ([`Simulator::recovery`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Recovery {
    /// The largest `|x^_j - x_j|` over every recovered coordinate.
    pub max_error: f64,
    /// Lemma 2's bound, `delta B`.
    pub bound: f64,
    /// Coordinates recovered, and those whose error exceeded the bound (a
    /// wrap-around: the models were farther apart than theta).
    pub coordinates: u64,
    pub beyond_bound: u64,
    /// The largest `|x_j - x_i|` between neighbours: Lemma 2 holds below
    /// theta.
    pub max_distance: f64,
}

impl Recovery {
    /// Adds one recovery: `recovered` is what a worker whose model is
    /// `local` recovered of a neighbour's `truth`, with Lemma 2's bound
    /// `bound` on its error. A coordinate off by more than the bound
    /// wrapped around the modulus. The one count of wrapped coordinates:
    /// the simulator's and the trainer's.
    pub fn add_pair(&mut self, bound: f64, recovered: &[f32], truth: &[f32], local: &[f32]) {
        self.bound = self.bound.max(bound);
        for ((x, t), local) in recovered.iter().zip(truth).zip(local) {
            let err = f64::from((x - t).abs());
            self.max_error = self.max_error.max(err);
            self.max_distance = self.max_distance.max(f64::from((t - local).abs()));
            self.coordinates += 1;
            if err > bound * (1.0 + 1e-6) + 1e-7 {
                self.beyond_bound += 1;
            }
        }
    }
}

/// n workers of one algorithm on one objective.
pub struct Simulator<'o> {
    objective: &'o dyn Objective,
    topology: Topology,
    lanes: Vec<Lane>,
    frames: Vec<Vec<u8>>,
    cfg: SimConfig,
    /// Persistent threads for the phases (`None`: the caller's thread), so
    /// per-thread scratch survives from one iteration to the next.
    pool: Option<Arc<rayon::ThreadPool>>,
    /// Every worker sends without reading its local step: send for all,
    /// then gradient and receive per worker in one pass (see [`Self::step`]).
    fused: bool,
    /// `frames` already hold this iteration's frames (sent at the end of
    /// the previous one).
    present: bool,
    /// Fused, on a separable objective: workers that can run their
    /// iteration a block of this many coordinates at a time do
    /// (`Worker::blockwise`); 0: none do (tests compare).
    block: usize,
    k: u64,
    clock: f64,
    total_bytes: u64,
    mismatched: u64,
}

impl std::fmt::Debug for Simulator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("topology", &self.topology.name())
            .field("workers", &self.lanes.len())
            .field("iteration", &self.k)
            .finish()
    }
}

impl<'o> Simulator<'o> {
    /// All workers start from `x0`.
    pub fn new(
        objective: &'o dyn Objective,
        topology: Topology,
        spec: &AlgorithmSpec,
        cfg: SimConfig,
        x0: &[f32],
    ) -> Result<Self, AlgoError> {
        Self::with_starts(objective, topology, spec, cfg, &|_| Cow::Borrowed(x0))
    }

    /// [`new`](Self::new) with worker `i` starting from `x0(i)` (distinct
    /// starts: the workers begin apart, so the consensus and the
    /// quantization error have work to do from the first iteration). A
    /// start made for one worker is dropped once its model is built.
    pub fn with_starts<'x>(
        objective: &'o dyn Objective,
        topology: Topology,
        spec: &AlgorithmSpec,
        cfg: SimConfig,
        x0: &(dyn Fn(usize) -> Cow<'x, [f32]> + Sync),
    ) -> Result<Self, AlgoError> {
        let n = topology.n();
        let d = objective.dim();

        if objective.workers() != n {
            return Err(AlgoError::Invalid(format!(
                "the objective is split across {} workers but the topology has {n}",
                objective.workers()
            )));
        }
        // threads only pay off when a phase has real work
        let threads = if n * d >= 1 << 16 {
            std::thread::available_parallelism()
                .map_or(1, |p| p.get())
                .min(n)
        } else {
            1
        };
        let pool = thread_pool(threads)?;
        // each worker's buffers are allocated and first touched on the
        // pool's threads
        let lane = |i: usize| {
            Ok(Lane {
                worker: {
                    let x0 = x0(i);
                    crate::algorithm::check_len("x0", d, x0.len())?;
                    spec.build(i, &topology, cfg.seed, &x0)?
                },
                rng: Rng::new(cfg.seed, 1000 + i as u64),
                momentum: Vec::new(),
                delta: Vec::new(),
                next: Vec::new(),
                next_sent: false,
            })
        };
        let mut lanes = match &pool {
            Some(pool) => {
                use rayon::prelude::*;
                pool.install(|| (0..n).into_par_iter().map(lane).collect())
            }
            None => (0..n).map(lane).collect::<Result<Vec<Lane>, AlgoError>>(),
        }?;
        let fused = lanes.iter().all(|l| !l.worker.send_reads_delta());
        for lane in &mut lanes {
            if cfg.sgd.momentum > 0.0 {
                lane.momentum = vec![0.0; d];
            }
            if !fused {
                lane.delta = vec![0.0; d];
            }
        }
        if cfg.theta_warmup.is_some_and(|w| w > 0) {
            for lane in &mut lanes {
                lane.worker.start_theta_warmup();
            }
        }
        Ok(Self {
            objective,
            lanes,
            frames: vec![Vec::new(); n],
            pool,
            fused,
            present: false,
            block: BLOCK,
            topology,
            cfg,
            k: 0,
            clock: 0.0,
            total_bytes: 0,
            mismatched: 0,
        })
    }

    /// Runs one synchronous iteration. Workers are independent within each
    /// phase (gradient, send, receive), which run on several threads when the
    /// problem is large; results do not depend on the thread count.
    ///
    /// When no worker's `send` reads its local step (D-PSGD, Moniqua), every
    /// worker sends first, then each computes its gradient and step and
    /// receives in one pass, while its model is in cache, with the gradient
    /// and step in per-thread scratch: the same arithmetic on the same
    /// values (each worker has its own random stream), fewer trips through
    /// memory. Each thread takes a contiguous group of workers. On a
    /// separable objective, the workers that can ([`crate::Blockwise`]:
    /// Moniqua without a hash) run their iteration a block of coordinates at
    /// a time, interleaved: every worker's block `b` (gradient, step,
    /// update, the next frame's codes), then every worker's block `b + 1`,
    /// so the block's dither tables, shared by all workers, are computed
    /// once per thread and stay in cache with the block's step.
    pub fn step(&mut self) -> Result<StepReport, AlgoError> {
        let n = self.lanes.len();
        let k = self.k;
        let (losses, received) = if self.fused {
            self.fused_pass()?
        } else {
            self.unfused_pass()?
        };
        let (egress, slowest) = self.egress();
        let verified = received.iter().map(|r| r.verified).sum();
        let mismatched: u64 = received.iter().map(|r| r.mismatched).sum();
        let theta_changed = self.adjust_theta(mismatched)?;
        self.present = self.fused && !theta_changed && self.lanes.iter().all(|l| l.next_sent);
        if self.present {
            for (lane, frame) in self.lanes.iter_mut().zip(&mut self.frames) {
                std::mem::swap(&mut lane.next, frame);
            }
        }
        self.clock += slowest;
        self.k += 1;
        self.total_bytes += egress.iter().sum::<u64>();
        self.mismatched += mismatched;
        Ok(StepReport {
            iteration: k,
            train_loss: losses.iter().sum::<f64>() / n as f64,
            frame_bytes: self.frames.iter().map(Vec::len).collect(),
            egress_bytes: egress,
            time_s: self.clock,
            verified,
            mismatched,
            theta: self.lanes.first().and_then(|l| l.worker.theta()),
            modulus: self.lanes.first().and_then(|l| l.worker.modulus()),
        })
    }

    /// The fused iteration: every worker sends (unless last iteration
    /// encoded its frame already), then each thread steps its contiguous
    /// group of workers, gradient, step and receive in one pass. Each
    /// worker's loss and what it received.
    fn fused_pass(&mut self) -> Result<(Vec<f64>, Vec<Received>), AlgoError> {
        let k = self.k;
        // consumed here: should this step fail, the next one sends afresh
        if !std::mem::replace(&mut self.present, false) {
            let mut pairs: Vec<(&mut Lane, &mut Vec<u8>)> =
                self.lanes.iter_mut().zip(self.frames.iter_mut()).collect();
            par_map(self.pool.as_deref(), &mut pairs, |_, (lane, frame)| {
                lane.worker.send(k, &[], frame)
            })?;
        }
        // a thread steps its workers in order: while one mixes (compute
        // bound), the next one's model, which its gradient would otherwise
        // wait for, comes in from memory
        let models: Vec<Prefetch> = self
            .lanes
            .iter()
            .map(|l| Prefetch::of(l.worker.model()))
            .collect();
        let pass = Pass {
            k,
            objective: self.objective,
            separable: self.objective.separable().filter(|_| self.block > 0),
            block: self.block,
            lr: self.cfg.lr,
            sgd: self.cfg.sgd,
            topology: &self.topology,
            frames: &self.frames,
            models: &models,
            // the next iteration's frames are encoded right after this
            // one, while the model is in cache, unless theta is about to
            // change
            presend: self.cfg.theta_warmup != Some(k + 1),
        };
        let threads = self
            .pool
            .as_deref()
            .map_or(1, rayon::ThreadPool::current_num_threads);
        let per = self.lanes.len().div_ceil(threads).max(1);
        let mut groups: Vec<&mut [Lane]> = self.lanes.chunks_mut(per).collect();
        let both = par_map(self.pool.as_deref(), &mut groups, |g, group| {
            pass.group(g * per, group)
        })?;
        Ok(both.into_iter().flatten().unzip())
    }

    /// The three phases one after another on every worker: gradient and
    /// step, send, receive. Each worker's loss and what it received.
    fn unfused_pass(&mut self) -> Result<(Vec<f64>, Vec<Received>), AlgoError> {
        let (k, objective) = (self.k, self.objective);
        let (lr, sgd) = (self.cfg.lr, self.cfg.sgd);
        let losses = par_map(self.pool.as_deref(), &mut self.lanes, |i, lane| {
            let x = lane.worker.model();
            let loss = objective.gradient(i, x, &mut lane.rng, &mut lane.delta);
            sgd.step_in_place(lr, x, &mut lane.delta, &mut lane.momentum);
            Ok(loss)
        })?;
        let mut pairs: Vec<(&mut Lane, &mut Vec<u8>)> =
            self.lanes.iter_mut().zip(self.frames.iter_mut()).collect();
        par_map(self.pool.as_deref(), &mut pairs, |_, (lane, frame)| {
            lane.worker.send(k, &lane.delta, frame)
        })?;
        drop(pairs);
        let (topology, frames) = (&self.topology, &self.frames);
        let received = par_map(self.pool.as_deref(), &mut self.lanes, |i, lane| {
            let inbox = inbox(lane.worker.pattern(), i, topology, frames);
            lane.worker.receive(k, &lane.delta, &inbox)
        })?;
        Ok((losses, received))
    }

    /// Each worker's bytes on the wire this iteration, by its pattern, and
    /// the iteration's time: the slowest worker's compute or network time.
    fn egress(&self) -> (Vec<u64>, f64) {
        let n = self.lanes.len();
        let mut egress = vec![0u64; n];
        let mut slowest = self.cfg.compute_s;
        for (i, out) in egress.iter_mut().enumerate() {
            let frame = self.frames[i].len() as u64;
            let (bytes, hops) = match self.lanes[i].worker.pattern() {
                Pattern::Gossip => (frame * self.topology.neighbours(i).len() as u64, 1.0),
                Pattern::AllReduce => (
                    (2 * (n as u64 - 1) * frame).div_ceil(n as u64),
                    2.0 * (n as f64 - 1.0),
                ),
                Pattern::AllGather => ((n as u64 - 1) * frame, n as f64 - 1.0),
            };
            // a worker that sent nothing this iteration spends no time on the network
            let hops = if bytes == 0 { 0.0 } else { hops };
            *out = bytes;
            if let Some(net) = self.cfg.network {
                let t = bytes as f64 * 8.0 / net.bandwidth_bps + net.latency_s * hops;
                slowest = slowest.max(t.max(self.cfg.compute_s));
            }
        }
        (egress, slowest)
    }

    /// Theta after this iteration: set from the gradient at the end of
    /// the warm-up, grown when a recovery failed (`theta_growth`).
    /// Whether it changed (the frames encoded ahead are then stale).
    fn adjust_theta(&mut self, mismatched: u64) -> Result<bool, AlgoError> {
        let k = self.k;
        let n = self.lanes.len();
        if self.cfg.theta_warmup == Some(k + 1) {
            let max_step = self
                .lanes
                .iter()
                .filter_map(|l| l.worker.max_step())
                .fold(0.0f32, f32::max);
            let rho = self.topology.spectrum().rho;
            for lane in &mut self.lanes {
                lane.worker.set_auto_theta(max_step, n, rho)?;
            }
        }
        if let Some(growth) = self.cfg.theta_growth
            && mismatched > 0
        {
            for lane in &mut self.lanes {
                if let Some(theta) = lane.worker.theta() {
                    lane.worker.set_theta(theta * growth)?;
                }
            }
        }
        Ok(self.cfg.theta_warmup == Some(k + 1)
            || (self.cfg.theta_growth.is_some() && mismatched > 0))
    }

    /// Sets how many threads the phases may use (at least 1). Results do not
    /// depend on it.
    pub fn set_threads(&mut self, threads: usize) -> Result<(), AlgoError> {
        // the pool it has, if it has as many threads (starting threads is
        // a fixed cost a short run notices)
        let now = self.pool.as_deref().map_or(1, |p| p.current_num_threads());
        if now != threads.max(1) {
            self.pool = thread_pool(threads)?;
        }
        Ok(())
    }

    /// Runs `iterations` steps, returning their reports.
    pub fn run(&mut self, iterations: u64) -> Result<Vec<StepReport>, AlgoError> {
        (0..iterations).map(|_| self.step()).collect()
    }

    /// The topology.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Worker `i`'s model.
    pub fn model(&self, i: usize) -> &[f32] {
        self.lanes[i].worker.model()
    }

    /// `x_bar = 1/n sum_i x_i`, on the simulator's threads.
    pub fn average_model(&self) -> Vec<f32> {
        let models: Vec<&[f32]> = self.lanes.iter().map(|l| l.worker.model()).collect();
        average(&models, self.objective.dim(), self.pool.as_deref())
    }

    /// The workers' consensus around their average (see [`Consensus`]).
    pub fn consensus(&self) -> Consensus {
        self.consensus_to(&self.average_model())
    }

    /// The workers' consensus around `avg`, already computed.
    pub fn consensus_to(&self, avg: &[f32]) -> Consensus {
        Consensus::of(self.per_worker(|x| Deviation::of(x, avg)))
    }

    /// `f(x_i)` of every worker's model, in worker order.
    pub fn worker_losses(&self) -> Vec<f64> {
        self.per_worker(|x| self.objective.loss(x))
    }

    /// `|grad f(x_i)|^2` of every worker's model, in worker order.
    pub fn grad_norms_sq(&self) -> Vec<f64> {
        self.per_worker(|x| self.objective.gradient_norm_sq(x))
    }

    /// Seconds to read every worker's model once on the simulator's
    /// threads: the reference an iteration is held against (an iteration
    /// reads and writes every model at least once).
    pub fn stream_time(&self) -> f64 {
        let t = std::time::Instant::now();
        let sums = self.per_worker(|x| {
            let mut lanes = [0.0f32; 16];
            for chunk in x.chunks_exact(16) {
                for (l, &v) in lanes.iter_mut().zip(chunk) {
                    *l += v;
                }
            }
            lanes
        });
        std::hint::black_box(sums);
        t.elapsed().as_secs_f64()
    }

    /// `f` of every worker's model, in worker order, on the simulator's
    /// threads (each model is one task: O(n d) work spread over them).
    fn per_worker<R: Send>(&self, f: impl Fn(&[f32]) -> R + Sync) -> Vec<R> {
        use rayon::prelude::*;
        let models: Vec<&[f32]> = self.lanes.iter().map(|l| l.worker.model()).collect();
        match &self.pool {
            Some(pool) if models.len() > 1 => {
                pool.install(|| models.par_iter().map(|x| f(x)).collect())
            }
            _ => models.iter().map(|x| f(x)).collect(),
        }
    }

    /// Lemma 2 on this iteration's frames: every worker recovers each
    /// neighbour's frame (encoded from the neighbour's model as its next
    /// `send` would) against its own model, and the recovery is compared
    /// with the neighbour's true model. None for algorithms without modulo
    /// recovery. On the caller's thread: a worker's `recover` borrows it,
    /// and workers are `Send`, not `Sync`.
    pub fn recovery(&self) -> Result<Option<Recovery>, AlgoError> {
        let d = self.objective.dim();
        let (mut frame, mut out) = (Vec::new(), vec![0.0f32; d]);
        let mut r = Recovery::default();
        for i in 0..self.lanes.len() {
            for &(j, _) in self.topology.neighbours(i) {
                let truth = self.lanes[j].worker.model();
                let bound = match self.lanes[i]
                    .worker
                    .recover(self.k, j, truth, &mut frame, &mut out)
                {
                    None => return Ok(None),
                    Some(b) => b?,
                };
                r.add_pair(bound, &out, truth, self.lanes[i].worker.model());
            }
        }
        Ok(Some(r))
    }

    /// The objective the workers minimize.
    pub fn objective(&self) -> &'o dyn Objective {
        self.objective
    }

    /// Sets the step size of the coming iterations (a schedule's).
    pub fn set_lr(&mut self, lr: f32) {
        self.cfg.lr = lr;
    }

    /// `max over edges (i, j) of |x_i - x_j|_inf`: what Moniqua's theta bounds.
    pub fn neighbour_distance(&self) -> f64 {
        let mut worst = 0.0f64;
        for i in 0..self.lanes.len() {
            for &(j, _) in self.topology.neighbours(i) {
                let d = self.lanes[i]
                    .worker
                    .model()
                    .iter()
                    .zip(self.lanes[j].worker.model())
                    .map(|(a, b)| f64::from((a - b).abs()))
                    .fold(0.0, f64::max);
                worst = worst.max(d);
            }
        }
        worst
    }

    /// Bytes put on links so far, all workers.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Frames whose recovered model failed verification so far.
    pub fn mismatched(&self) -> u64 {
        self.mismatched
    }

    /// Virtual seconds so far.
    pub fn clock(&self) -> f64 {
        self.clock
    }

    /// Bytes of state each worker keeps beyond D-PSGD's.
    pub fn extra_memory(&self) -> Vec<usize> {
        self.lanes.iter().map(|l| l.worker.extra_memory()).collect()
    }
}

/// `1/n sum_i x_i` of `n` models of dimension `d`: every coordinate adds
/// `x_i / n` over the models in order, a chunk of coordinates per task on
/// `pool`'s threads where there is one (the same values on any number).
pub(crate) fn average(models: &[&[f32]], d: usize, pool: Option<&rayon::ThreadPool>) -> Vec<f32> {
    use rayon::prelude::*;
    const CHUNK: usize = 4096;
    let n = models.len() as f32;
    let mut avg = vec![0.0f32; d];
    let fill = |(c, chunk): (usize, &mut [f32])| {
        let at = c * CHUNK;
        // written before it is read: a fresh page read first maps the
        // shared zero page, and the write after it costs a copy-on-write
        // fault and a TLB shootdown on every core
        chunk.fill(0.0);
        for model in models {
            for (a, &x) in chunk.iter_mut().zip(&model[at..]) {
                *a += x / n;
            }
        }
    };
    match pool {
        Some(pool) => pool.install(|| avg.par_chunks_mut(CHUNK).enumerate().for_each(fill)),
        None => avg.chunks_mut(CHUNK).enumerate().for_each(fill),
    }
    avg
}

#[cfg(test)]
mod tests;
