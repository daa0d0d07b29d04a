//! The simulator: n workers in one process, exchanging real frames through
//! memory, with a virtual clock that charges each iteration what a network
//! of the given bandwidth and latency would.
//!
//! Per iteration the clock advances by the slowest worker's
//! `max(compute, egress_bytes * 8 / bandwidth + latency * hops)`: egress is
//! per host (like `tc` shaping a NIC), a gossip worker sends its frame once
//! to each neighbour (one hop), and a ring all-reduce sends `2 (n - 1) / n`
//! of a frame in `2 (n - 1)` hops. Deterministic for a given seed.

use crate::algorithm::{Pattern, Worker};
use crate::algos::AlgorithmSpec;
use crate::objective::Objective;
use crate::optim::Sgd;
use crate::rng::Rng;
use crate::{AlgoError, Topology};

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
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            lr: 0.1,
            sgd: Sgd::default(),
            compute_s: 0.0,
            network: None,
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
}

/// n workers of one algorithm on one objective.
pub struct Simulator<'o> {
    objective: &'o dyn Objective,
    topology: Topology,
    workers: Vec<Box<dyn Worker>>,
    cfg: SimConfig,
    rngs: Vec<Rng>,
    momentum: Vec<Vec<f32>>,
    deltas: Vec<Vec<f32>>,
    frames: Vec<Vec<u8>>,
    grad: Vec<f32>,
    k: u64,
    clock: f64,
    total_bytes: u64,
    mismatched: u64,
}

impl std::fmt::Debug for Simulator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("topology", &self.topology.name())
            .field("workers", &self.workers.len())
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
        let n = topology.n();
        let d = objective.dim();
        crate::algorithm::check_len("x0", d, x0.len())?;
        if objective.workers() != n {
            return Err(AlgoError::Invalid(format!(
                "the objective is split across {} workers but the topology has {n}",
                objective.workers()
            )));
        }
        let workers = (0..n)
            .map(|i| spec.build(i, &topology, cfg.seed, x0))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            objective,
            workers,
            rngs: (0..n)
                .map(|i| Rng::new(cfg.seed, 1000 + i as u64))
                .collect(),
            momentum: vec![vec![0.0; d]; n],
            deltas: vec![vec![0.0; d]; n],
            frames: vec![Vec::new(); n],
            grad: vec![0.0; d],
            topology,
            cfg,
            k: 0,
            clock: 0.0,
            total_bytes: 0,
            mismatched: 0,
        })
    }

    /// Runs one synchronous iteration.
    pub fn step(&mut self) -> Result<StepReport, AlgoError> {
        let n = self.workers.len();
        let k = self.k;
        let mut loss = 0.0;
        for i in 0..n {
            let x = self.workers[i].model();
            loss += self
                .objective
                .gradient(i, x, &mut self.rngs[i], &mut self.grad);
            self.cfg.sgd.step(
                self.cfg.lr,
                x,
                &self.grad,
                &mut self.momentum[i],
                &mut self.deltas[i],
            );
        }
        for i in 0..n {
            self.workers[i].send(k, &self.deltas[i], &mut self.frames[i])?;
        }
        let mut verified = 0;
        let mut mismatched = 0;
        let mut egress = vec![0u64; n];
        let mut slowest = self.cfg.compute_s;
        for (i, out) in egress.iter_mut().enumerate() {
            let pattern = self.workers[i].pattern();
            let inbox: Vec<(usize, &[u8])> = match pattern {
                Pattern::Gossip => self
                    .topology
                    .neighbours(i)
                    .iter()
                    .map(|&(j, _)| (j, self.frames[j].as_slice()))
                    .collect(),
                Pattern::AllReduce => (0..n)
                    .filter(|&j| j != i)
                    .map(|j| (j, self.frames[j].as_slice()))
                    .collect(),
            };
            let r = self.workers[i].receive(k, &self.deltas[i], &inbox)?;
            verified += r.verified;
            mismatched += r.mismatched;
            let frame = self.frames[i].len() as u64;
            let (bytes, hops) = match pattern {
                Pattern::Gossip => (frame * self.topology.neighbours(i).len() as u64, 1.0),
                Pattern::AllReduce => (
                    (2 * (n as u64 - 1) * frame).div_ceil(n as u64),
                    2.0 * (n as f64 - 1.0),
                ),
            };
            *out = bytes;
            if let Some(net) = self.cfg.network {
                let t = bytes as f64 * 8.0 / net.bandwidth_bps + net.latency_s * hops;
                slowest = slowest.max(t.max(self.cfg.compute_s));
            }
        }
        self.clock += slowest;
        self.k += 1;
        self.total_bytes += egress.iter().sum::<u64>();
        self.mismatched += mismatched;
        Ok(StepReport {
            iteration: k,
            train_loss: loss / n as f64,
            frame_bytes: self.frames.iter().map(Vec::len).collect(),
            egress_bytes: egress,
            time_s: self.clock,
            verified,
            mismatched,
        })
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
        self.workers[i].model()
    }

    /// `x_bar = 1/n sum_i x_i`.
    pub fn average_model(&self) -> Vec<f32> {
        let n = self.workers.len() as f32;
        let mut avg = vec![0.0f32; self.objective.dim()];
        for w in &self.workers {
            for (a, &x) in avg.iter_mut().zip(w.model()) {
                *a += x / n;
            }
        }
        avg
    }

    /// `max_i |x_i - x_bar|_inf`.
    pub fn consensus_distance(&self) -> f64 {
        let avg = self.average_model();
        self.workers
            .iter()
            .flat_map(|w| {
                w.model()
                    .iter()
                    .zip(&avg)
                    .map(|(x, a)| f64::from((x - a).abs()))
            })
            .fold(0.0, f64::max)
    }

    /// `max over edges (i, j) of |x_i - x_j|_inf`: what Moniqua's theta bounds.
    pub fn neighbour_distance(&self) -> f64 {
        let mut worst = 0.0f64;
        for i in 0..self.workers.len() {
            for &(j, _) in self.topology.neighbours(i) {
                let d = self.workers[i]
                    .model()
                    .iter()
                    .zip(self.workers[j].model())
                    .map(|(a, b)| f64::from((a - b).abs()))
                    .fold(0.0, f64::max);
                worst = worst.max(d);
            }
        }
        worst
    }

    /// `|grad f(x_i)|^2` of worker `i`'s model (global objective, no noise).
    pub fn grad_norm_sq(&self, i: usize) -> f64 {
        let mut g = vec![0.0f32; self.objective.dim()];
        self.objective
            .full_gradient(self.workers[i].model(), &mut g);
        g.iter().map(|&v| f64::from(v) * f64::from(v)).sum()
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
        self.workers.iter().map(|w| w.extra_memory()).collect()
    }
}
