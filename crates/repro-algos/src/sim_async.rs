//! AD-PSGD (Lian et al. 2017b) and Moniqua on AD-PSGD (Lu & De Sa 2020,
//! Section 5) in an event-driven simulator.
//!
//! Each worker loops: take a snapshot of its model, compute a stochastic
//! gradient on it (`compute_s * speed[i]` virtual seconds), average its model
//! atomically with one neighbour chosen uniformly at random
//! (`x_i, x_j <- (x_i + x_j) / 2`, or with Moniqua the recovered
//! `x_i <- x_i + (x^_j - x^_i) / 2` on both sides), then apply the gradient
//! (computed at the now stale snapshot) and start again once the exchange has
//! crossed the network. A worker never waits for a slower one; the staleness
//! of each applied gradient (how many times the model changed since its
//! snapshot) is recorded.
//!
//! In a real deployment the pairing needs care to avoid deadlock (workers
//! split into an active and a passive set; SGP's `ad_psgd.py`); here the
//! pairwise average is an atomic event, so every pairing is safe.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::objective::Objective;
use crate::optim::Sgd;
pub use crate::pairwise::AsyncExchange;
use crate::pairwise::{Folded, PairSide};
use crate::rng::Rng;
use crate::sim::Network;
use crate::{AlgoError, Topology};

/// Settings of an asynchronous run.
#[derive(Debug, Clone, PartialEq)]
pub struct AsyncConfig {
    pub seed: u64,
    pub lr: f32,
    pub sgd: Sgd,
    /// Virtual seconds per gradient on a worker of speed factor 1.
    pub compute_s: f64,
    /// Per-worker slowdown factors (empty: all 1).
    pub speeds: Vec<f64>,
    pub network: Option<Network>,
    pub exchange: AsyncExchange,
}

impl Default for AsyncConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            lr: 0.1,
            sgd: Sgd::default(),
            compute_s: 1.0,
            speeds: Vec::new(),
            network: None,
            exchange: AsyncExchange::Full,
        }
    }
}

/// What one gradient update did.
#[derive(Debug, Clone, PartialEq)]
pub struct AsyncReport {
    /// Global update counter.
    pub update: u64,
    /// Virtual time of the update, seconds.
    pub time_s: f64,
    pub worker: usize,
    pub neighbour: usize,
    /// Model changes between the gradient's snapshot and its application.
    pub staleness: u64,
    /// Bytes both sides put on the wire for the pairwise average.
    pub bytes: u64,
    pub mismatched: u64,
}

struct Node {
    x: Vec<f32>,
    /// The step computed from the last snapshot, applied at the next event.
    delta: Vec<f32>,
    momentum: Vec<f32>,
    grad: Vec<f32>,
    rng: Rng,
    /// How many times `x` has changed.
    version: u64,
    snapshot_version: u64,
}

#[derive(Debug, PartialEq)]
struct Event {
    time: f64,
    worker: usize,
}

impl Eq for Event {}

impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        // a min-heap on (time, worker)
        other
            .time
            .total_cmp(&self.time)
            .then_with(|| other.worker.cmp(&self.worker))
    }
}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// n asynchronous workers on one objective.
pub struct AsyncSimulator<'o> {
    objective: &'o dyn Objective,
    topology: Topology,
    cfg: AsyncConfig,
    side_a: PairSide,
    side_b: PairSide,
    nodes: Vec<Node>,
    queue: BinaryHeap<Event>,
    frame_i: Vec<u8>,
    frame_j: Vec<u8>,
    updates: u64,
    clock: f64,
    total_bytes: u64,
    mismatched: u64,
}

impl std::fmt::Debug for AsyncSimulator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSimulator")
            .field("topology", &self.topology.name())
            .field("updates", &self.updates)
            .field("clock", &self.clock)
            .finish()
    }
}

impl<'o> AsyncSimulator<'o> {
    /// All workers start from `x0` and start computing at time 0.
    pub fn new(
        objective: &'o dyn Objective,
        topology: Topology,
        cfg: AsyncConfig,
        x0: &[f32],
    ) -> Result<Self, AlgoError> {
        let n = topology.n();
        let d = objective.dim();
        crate::algorithm::check_len("x0", d, x0.len())?;
        if objective.workers() != n {
            return Err(AlgoError::Invalid(format!(
                "the objective is split across {} workers but the topology has {n}",
                objective.workers()
            )));
        }
        if !cfg.speeds.is_empty() && cfg.speeds.len() != n {
            return Err(AlgoError::Invalid(format!(
                "{} speed factors for {n} workers",
                cfg.speeds.len()
            )));
        }
        let positive = |v: f64| v > 0.0 && v.is_finite();
        if !cfg.speeds.iter().all(|&s| positive(s)) || !positive(cfg.compute_s) {
            return Err(AlgoError::Invalid(
                "compute time and speed factors must be positive".into(),
            ));
        }
        let mut sim = Self {
            objective,
            side_a: PairSide::new(&cfg.exchange, cfg.seed, d)?,
            side_b: PairSide::new(&cfg.exchange, cfg.seed, d)?,
            nodes: (0..n)
                .map(|i| Node {
                    x: x0.to_vec(),
                    delta: vec![0.0; d],
                    momentum: vec![0.0; d],
                    grad: vec![0.0; d],
                    rng: Rng::new(cfg.seed, 5000 + i as u64),
                    version: 0,
                    snapshot_version: 0,
                })
                .collect(),
            queue: BinaryHeap::new(),
            frame_i: Vec::new(),
            frame_j: Vec::new(),
            topology,
            cfg,
            updates: 0,
            clock: 0.0,
            total_bytes: 0,
            mismatched: 0,
        };
        for i in 0..n {
            sim.start_gradient(i, 0.0);
        }
        Ok(sim)
    }

    fn compute_time(&self, i: usize) -> f64 {
        self.cfg.compute_s * self.cfg.speeds.get(i).copied().unwrap_or(1.0)
    }

    /// Snapshot worker `i`'s model, compute its step, schedule its completion.
    fn start_gradient(&mut self, i: usize, now: f64) {
        let node = &mut self.nodes[i];
        self.objective
            .gradient(i, &node.x, &mut node.rng, &mut node.grad);
        self.cfg.sgd.step(
            self.cfg.lr,
            &node.x,
            &node.grad,
            &mut node.momentum,
            &mut node.delta,
        );
        node.snapshot_version = node.version;
        let done = now + self.compute_time(i);
        self.queue.push(Event {
            time: done,
            worker: i,
        });
    }

    /// Processes the next gradient completion: pairwise average, apply the step.
    pub fn step(&mut self) -> Result<AsyncReport, AlgoError> {
        let Some(Event { time, worker: i }) = self.queue.pop() else {
            return Err(AlgoError::Invalid("no workers".into()));
        };
        self.clock = time;
        let neighbours = self.topology.neighbours(i);
        let j = neighbours[self.nodes[i].rng.below(neighbours.len())].0;
        let k = self.updates;
        let (bytes, mismatched) = self.average_pair(i, j, k)?;
        let node = &mut self.nodes[i];
        for (x, &d) in node.x.iter_mut().zip(&node.delta) {
            *x -= d;
        }
        node.version += 1;
        let staleness = node.version - 1 - node.snapshot_version;
        let comm = match self.cfg.network {
            Some(net) => (bytes / 2) as f64 * 8.0 / net.bandwidth_bps + net.latency_s,
            None => 0.0,
        };
        self.start_gradient(i, time + comm);
        self.updates += 1;
        self.total_bytes += bytes;
        self.mismatched += mismatched;
        Ok(AsyncReport {
            update: k,
            time_s: time,
            worker: i,
            neighbour: j,
            staleness,
            bytes,
            mismatched,
        })
    }

    /// Averages `x_i` and `x_j` through real frames, one [`PairSide`] each
    /// (the same code as the trainer's asynchronous loop); returns (bytes,
    /// mismatches). The pair is atomic here: nothing changes either model
    /// while the frames travel.
    fn average_pair(&mut self, i: usize, j: usize, k: u64) -> Result<(u64, u64), AlgoError> {
        let (a, b) = if i < j { (i, j) } else { (j, i) };
        let (left, right) = self.nodes.split_at_mut(b);
        let (na, nb) = (&mut left[a], &mut right[0]);
        self.side_a.encode(&na.x, k, a as u32, &mut self.frame_i)?;
        self.side_b.encode(&nb.x, k, b as u32, &mut self.frame_j)?;
        let mut mismatched = 0;
        // a side whose recovery fails the hash keeps its model
        if self.side_a.fold(&self.frame_j, &mut na.x)? == Folded::Mismatch {
            mismatched += 1;
        }
        if self.side_b.fold(&self.frame_i, &mut nb.x)? == Folded::Mismatch {
            mismatched += 1;
        }
        na.version += 1;
        nb.version += 1;
        Ok(((self.frame_i.len() + self.frame_j.len()) as u64, mismatched))
    }

    /// Processes updates until the virtual clock passes `t` seconds.
    pub fn run_until(&mut self, t: f64) -> Result<Vec<AsyncReport>, AlgoError> {
        let mut reports = Vec::new();
        while self.queue.peek().is_some_and(|e| e.time <= t) {
            reports.push(self.step()?);
        }
        Ok(reports)
    }

    /// Worker `i`'s model.
    pub fn model(&self, i: usize) -> &[f32] {
        &self.nodes[i].x
    }

    /// `x_bar`.
    pub fn average_model(&self) -> Vec<f32> {
        let models: Vec<&[f32]> = self.nodes.iter().map(|n| n.x.as_slice()).collect();
        crate::sim::average(&models, self.objective.dim(), None)
    }

    /// Gradient updates so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Virtual seconds so far.
    pub fn clock(&self) -> f64 {
        self.clock
    }

    /// Bytes put on the wire so far.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Recoveries that failed verification so far.
    pub fn mismatched(&self) -> u64 {
        self.mismatched
    }
}
