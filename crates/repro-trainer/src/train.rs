//! One rank's synchronous training run: its [`Setup`], an algorithm's
//! worker, a transport, and a run log.
//!
//! Each iteration runs the phases `profile_phases` times, one method each
//! on [`SyncRank`]: scatter the worker's flat model into the model,
//! forward-backward on a minibatch, gather the gradient, the shared SGD
//! step (momentum, weight decay), encode the frame, exchange it, decode
//! what came back. Bytes are counted from the frames handed to the
//! transport. Evaluation traffic (the all-reduce for the averaged model)
//! is not counted. What the asynchronous loop shares with this one lives
//! in [`crate::setup`] and [`crate::local`].

use std::io::Write;
use std::time::Instant;

use repro_algos::rng::Rng;
use repro_algos::{AlgorithmSpec, Pattern, Received, Recovery, Worker};
pub use repro_runlog::TrainConfig;
use repro_runlog::{End, Eval, Phases, Record, Status, Step, finite};

use crate::local::{RunLog, average, norm, now, peak_rss_bytes};
use crate::setup::{Setup, setup};
pub use crate::setup::{TrainError, synthetic};
use crate::transport::Transport;

/// Trains one rank of a synchronous algorithm; writes its log to `log`.
/// Returns how the run ended. `run::run` is the entry point: it sends the
/// asynchronous algorithms (`ad-psgd`, `moniqua-ad-psgd`) to
/// `train_async` instead.
pub fn train<T: Transport>(
    cfg: &TrainConfig,
    t: &mut T,
    log: impl Write + Send,
) -> Result<Status, TrainError> {
    let s = setup(cfg, t)?;
    let mut rank = SyncRank::new(cfg, s, log)?;
    let looping = Instant::now();
    let mut status = Status::Completed;
    let mut done = 0;
    for k in 0..cfg.iterations {
        let epoch = rank.s.epoch(k, cfg.batch);
        let Some(step) = rank.step(t, k, epoch)? else {
            status = Status::Diverged { iteration: k };
            break;
        };
        rank.log.write(&Record::Step(step))?;
        rank.log.flush_if_due()?;
        done = k + 1;
        if cfg.eval_every > 0 && (done % cfg.eval_every == 0 || done == cfg.iterations) {
            let e = rank.eval(t, done, epoch)?;
            if done == cfg.iterations {
                status = status.after_final(e.test_loss.into_iter().chain(e.avg_test_loss), done);
            }
            rank.log.write(&Record::Eval(e))?;
        }
    }
    rank.end(t, status, done, looping)
}

/// One rank of a synchronous algorithm between its set-up and its end:
/// the worker, the step's buffers, the phase marks and the log.
struct SyncRank<'c, W: Write> {
    cfg: &'c TrainConfig,
    s: Setup,
    worker: Box<dyn Worker>,
    neighbours: Vec<usize>,
    /// The iterations of `theta: theorem3-step`'s or `theorem2`'s warm-up, when it
    /// has one.
    warmup: Option<u64>,
    /// `theta: theorem2`'s warm-up: the largest `|g|_inf` of this rank's
    /// stochastic gradients so far, and the step size of the last step.
    grad_inf: Option<(f32, f32)>,
    log: RunLog<W>,
    rng: Rng,
    grad: Vec<f32>,
    momentum: Vec<f32>,
    delta: Vec<f32>,
    frame: Vec<u8>,
    marks: Marks,
}

/// What the exchange brought: the neighbours' frames, or the sum of every
/// rank's frame (an all-reduce), and the bytes this rank sent.
struct Inbox {
    frames: Vec<(usize, Vec<u8>)>,
    summed: Option<Vec<f32>>,
    sent: u64,
}

impl Inbox {
    /// Bytes received: a ring all-reduce receives what it sends.
    fn received(&self) -> u64 {
        if self.summed.is_some() {
            self.sent
        } else {
            self.frames.iter().map(|(_, f)| f.len() as u64).sum()
        }
    }
}

impl<'c, W: Write> SyncRank<'c, W> {
    /// The worker from the set-up's model, and the log's header written.
    fn new(cfg: &'c TrainConfig, s: Setup, log: W) -> Result<Self, TrainError> {
        let spec = AlgorithmSpec::from_name(&cfg.algorithm, &cfg.knobs)?;
        let mut worker = spec.build(s.rank, &s.topology, cfg.seed, &s.x0)?;
        let warmup = theta_warmup(cfg);
        if warmup.is_some() {
            worker.start_theta_warmup();
        }
        let neighbours: Vec<usize> = s
            .topology
            .neighbours(s.rank)
            .iter()
            .map(|&(j, _)| j)
            .collect();
        let mut log = RunLog::new(log);
        log.write(&Record::Header(s.header.clone()))?;
        // a rank killed early (another one diverged) still leaves a readable log
        log.flush()?;
        let d = s.flat.len();
        Ok(SyncRank {
            cfg,
            rng: Rng::new(cfg.seed, 100 + s.rank as u64),
            marks: Marks::new(cfg.profile_phases, s.device),
            s,
            worker,
            neighbours,
            grad_inf: (warmup.is_some() && cfg.knobs.theta == repro_algos::Theta::Theorem2)
                .then_some((0.0, 0.0)),
            warmup,
            log,
            grad: vec![0f32; d],
            momentum: vec![0f32; d],
            delta: vec![0f32; d],
            frame: Vec::new(),
        })
    }

    /// Iteration `k`, phase by phase: scatter, forward-backward, gather,
    /// SGD, encode, exchange, decode. Its log record, or `None` when the
    /// model diverged.
    fn step<T: Transport>(
        &mut self,
        t: &mut T,
        k: u64,
        epoch: f64,
    ) -> Result<Option<Step>, TrainError> {
        let started = self.s.started;
        let lr = self.s.schedule.at(epoch, k) as f32;
        let t0 = now(t, &started);
        self.marks.start(t0);
        self.s.scatter(self.worker.model())?;
        self.marks.at(t, &started);
        let Some(loss) = self.s.forward_backward(self.cfg.batch, &mut self.rng) else {
            return Ok(None);
        };
        self.marks.at(t, &started);
        self.s.gather_grad(&mut self.grad)?;
        if let Some((g, step)) = self.grad_inf.as_mut() {
            *g = self.grad.iter().fold(*g, |m, v| m.max(v.abs()));
            *step = lr;
        }
        self.marks.at(t, &started);
        let x = self.worker.model();
        (self.s.sgd).step(lr, x, &self.grad, &mut self.momentum, &mut self.delta);
        let t1 = self.marks.at(t, &started);
        let encoded = self.worker.send(k, &self.delta, &mut self.frame);
        if repro_algos::unless_diverged(encoded)?.is_none() {
            return Ok(None);
        }
        self.marks.at(t, &started);
        let inbox = self.exchange(t)?;
        self.marks.at(t, &started);
        let (sent, received) = (inbox.sent, inbox.received());
        let Some(r) = self.decode(t, k, inbox)? else {
            return Ok(None);
        };
        let comm_s = self.marks.at(t, &started) - t1;
        Ok(Some(Step {
            iteration: k,
            epoch,
            wall_s: now(t, &started),
            compute_s: t1 - t0,
            comm_s,
            train_loss: loss,
            bytes_sent: sent,
            bytes_received: received,
            hash_failures: r.mismatched,
            hash_verified: r.verified,
            phases: self.marks.phases(),
        }))
    }

    /// Exchange: this rank's frame out by the worker's pattern, the
    /// others' in.
    fn exchange<T: Transport>(&self, t: &mut T) -> Result<Inbox, TrainError> {
        let (frame, rank, n) = (&self.frame, self.s.rank, self.s.n);
        Ok(match self.worker.pattern() {
            Pattern::Gossip => {
                let frames = t.exchange(&self.neighbours, frame, &self.neighbours)?;
                Inbox {
                    frames: self.neighbours.iter().copied().zip(frames).collect(),
                    summed: None,
                    sent: (frame.len() * self.neighbours.len()) as u64,
                }
            }
            Pattern::AllReduce | Pattern::AllGather if frame.is_empty() => Inbox {
                frames: (0..n)
                    .filter(|&j| j != rank)
                    .map(|j| (j, Vec::new()))
                    .collect(),
                summed: None,
                sent: 0,
            },
            Pattern::AllReduce => {
                let before = t.bytes_sent();
                let sum = all_reduce(&self.cfg.algorithm, t, frame)?;
                Inbox {
                    frames: Vec::new(),
                    summed: Some(sum),
                    sent: t.bytes_sent() - before,
                }
            }
            Pattern::AllGather => Inbox {
                frames: t
                    .all_gather(frame)?
                    .into_iter()
                    .enumerate()
                    .filter(|(j, _)| *j != rank)
                    .collect(),
                summed: None,
                sent: (frame.len() * (n - 1)) as u64,
            },
        })
    }

    /// Decode: what came in, into the worker's model; then the end of
    /// `theta: theorem3-step`'s warm-up when it is due. `None` when the model
    /// diverged, by the same rule as for sending (and as the simulator's):
    /// a model the codec rejects as non-finite or out of range has.
    fn decode<T: Transport>(
        &mut self,
        t: &mut T,
        k: u64,
        inbox: Inbox,
    ) -> Result<Option<Received>, TrainError> {
        let received = match inbox.summed {
            Some(sum) => self.worker.receive_sum(k, &sum),
            None => {
                let borrowed: Vec<(usize, &[u8])> = inbox
                    .frames
                    .iter()
                    .map(|(j, f)| (*j, f.as_slice()))
                    .collect();
                self.worker.receive(k, &self.delta, &borrowed)
            }
        };
        let Some(r) = repro_algos::unless_diverged(received)? else {
            return Ok(None);
        };
        if self.warmup == Some(k + 1) {
            let rho = self.s.topology.spectrum().rho;
            match self.grad_inf.take() {
                Some(g) => end_theorem2_warmup(t, &mut *self.worker, &self.s, g, rho)?,
                None => end_theta_warmup(t, &mut *self.worker, self.s.rank, self.s.n, rho)?,
            };
        }
        Ok(Some(r))
    }

    /// The evaluation after `iteration` steps: this rank's model on the
    /// test images, the consensus, Moniqua's recovery, and on rank 0 the
    /// averaged model on the test images and the validation split.
    fn eval<T: Transport>(
        &mut self,
        t: &mut T,
        iteration: u64,
        epoch: f64,
    ) -> Result<Eval, TrainError> {
        let (s, samples) = (&self.s, self.cfg.eval_samples);
        let x = self.worker.model();
        let (test_loss, test_accuracy) = s.evaluate(x, samples, &mut self.rng)?;
        let recovery = check_recovery(t, &*self.worker, &self.neighbours, iteration)?;
        let (avg, consensus) = average(t, x)?;
        let scores = s.evaluate_average(&avg, samples, &mut self.rng)?;
        s.scatter(x)?;
        Ok(Eval {
            iteration,
            epoch,
            wall_s: now(t, &s.started),
            test_loss: Some(test_loss),
            test_accuracy: Some(test_accuracy),
            avg_test_loss: scores.test.map(|v| v.0),
            avg_test_accuracy: scores.test.map(|v| v.1),
            consensus_distance: finite(consensus.distance),
            max_deviation: finite(consensus.max_deviation),
            model_norm: finite(norm(&avg)),
            recovered: recovery.map(|r| r.coordinates),
            wrapped: recovery.map(|r| r.beyond_bound),
            val_loss: scores.valid.map(|v| v.0),
            val_accuracy: scores.valid.map(|v| v.1),
            objective: None,
            subopt: None,
        })
    }

    /// The log's last record: how the run ended, and what it cost.
    fn end<T: Transport>(
        mut self,
        t: &mut T,
        status: Status,
        done: u64,
        looping: Instant,
    ) -> Result<Status, TrainError> {
        self.log.write(&Record::End(End {
            status: status.clone(),
            wall_s: now(t, &self.s.started),
            iterations: done,
            transport_bytes_sent: Some(t.bytes_sent()),
            extra_memory_bytes: Some(self.worker.extra_memory() as u64),
            peak_rss_bytes: peak_rss_bytes(t.backend()),
            real_s: Some(looping.elapsed().as_secs_f64()),
            theta: self.worker.theta(),
            modulus: self.worker.modulus(),
            metrics: None,
        }))?;
        self.log.flush()?;
        Ok(status)
    }
}

/// The sum over every rank of the f32 vector a summable frame carries: a
/// ring all-reduce of its payload, 2 (n - 1) / n of it on the wire instead
/// of n - 1 frames (MPI's own for `allreduce-mpi`, recursive halving and
/// doubling for `allreduce-rhd`).
fn all_reduce<T: Transport>(
    algorithm: &str,
    t: &mut T,
    frame: &[u8],
) -> Result<Vec<f32>, TrainError> {
    let header = repro_codec::FrameHeader::parse(frame, u32::MAX)
        .map_err(|e| repro_algos::AlgoError::from(repro_codec::CodecError::from(e)))?;
    let mut sum = vec![0f32; header.len as usize];
    repro_codec::FullPrecision::default()
        .decode(frame, &mut sum)
        .map_err(repro_algos::AlgoError::from)?;
    match algorithm {
        "allreduce-mpi" => t.all_reduce_library(&mut sum)?,
        "allreduce-rhd" => crate::transport::halving_doubling_all_reduce(t, &mut sum)?,
        _ => t.all_reduce_sum(&mut sum)?,
    }
    Ok(sum)
}

/// The warm-up of `theta: theorem3-step` (as the simulator runs it) and `theta:
/// theorem2`: `theta_warmup` iterations of full-precision exchange, then
/// theta from what they saw. `None` for a given theta.
fn theta_warmup(cfg: &TrainConfig) -> Option<u64> {
    (cfg.knobs.theta.warms_up() && cfg.knobs.theta_warmup > 0).then_some(cfg.knobs.theta_warmup)
}

/// Theorem 2's theta for a constant step size (its `C_alpha = eta = 1`):
/// `2 alpha G_inf log(16 n) / (1 - rho)`.
pub(crate) fn theorem2_theta(alpha: f64, g_inf: f64, n: usize, rho: f64) -> f64 {
    2.0 * alpha * g_inf * (16.0 * n as f64).ln() / (1.0 - rho)
}

/// Ends the warm-up of `theta: theorem2` on every rank alike: `G_inf`, the
/// largest gradient infinity norm any rank saw (an all-reduce of one slot
/// each), then Theorem 2's theta at the last warm-up step's size.
fn end_theorem2_warmup<T: Transport>(
    t: &mut T,
    worker: &mut dyn Worker,
    s: &Setup,
    (g_inf, alpha): (f32, f32),
    rho: f64,
) -> Result<Option<f64>, TrainError> {
    let mut slots = vec![0f32; s.n];
    slots[s.rank] = g_inf;
    t.all_reduce_sum(&mut slots)?;
    let g = slots.iter().copied().fold(0.0f32, f32::max);
    let theta = theorem2_theta(f64::from(alpha), f64::from(g), s.n, rho);
    Ok(worker.end_warmup_with(theta)?)
}

/// Ends the warm-up of `theta: theorem3-step` on every rank alike: the largest step
/// of all ranks (an all-reduce of one slot each), then the worker's theta
/// from it. Returns the theta chosen.
fn end_theta_warmup<T: Transport>(
    t: &mut T,
    worker: &mut dyn Worker,
    rank: usize,
    n: usize,
    rho: f64,
) -> Result<Option<f64>, TrainError> {
    let mut steps = vec![0f32; n];
    steps[rank] = worker.max_step().unwrap_or(0.0);
    t.all_reduce_sum(&mut steps)?;
    let largest = steps.iter().copied().fold(0.0f32, f32::max);
    Ok(worker.set_auto_theta(largest, n, rho)?)
}

/// Moniqua's recovery checked on the models themselves: every rank sends
/// its model to its neighbours (full precision, outside the step's
/// frames and timing) and recovers each one's frame as the neighbour's
/// next `send` would encode it, against its own model. `None` for
/// algorithms without modulo recovery. What is counted is
/// [`Recovery::add_pair`]'s, the simulator's count.
fn check_recovery<T: Transport>(
    t: &mut T,
    worker: &dyn Worker,
    neighbours: &[usize],
    k: u64,
) -> Result<Option<Recovery>, TrainError> {
    let x = worker.model();
    let (mut frame, mut out) = (Vec::new(), vec![0.0f32; x.len()]);
    // whether the worker recovers at all (not during a warm-up): the same
    // on every rank, so every rank takes part in the exchange or none does
    if worker.recover(k, 0, x, &mut frame, &mut out).is_none() {
        return Ok(None);
    }
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let models = t.exchange(neighbours, &bytes, neighbours)?;
    let mut r = Recovery::default();
    for (&j, m) in neighbours.iter().zip(&models) {
        let truth: Vec<f32> = m
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if let Some(bound) = worker.recover(k, j, &truth, &mut frame, &mut out) {
            r.add_pair(bound?, &out, &truth, x);
        }
    }
    Ok(Some(r))
}

/// The ends of a step's phases on the run's clock (`profile_phases`),
/// the device waited for at each; nothing when not profiling.
struct Marks {
    on: bool,
    cuda: Option<i64>,
    at: Vec<f64>,
}

impl Marks {
    fn new(on: bool, device: tch::Device) -> Self {
        let cuda = match device {
            tch::Device::Cuda(i) => Some(i as i64),
            _ => None,
        };
        Marks {
            on,
            cuda,
            at: Vec::new(),
        }
    }

    /// A new step, begun at `time`: its buffer reused, nothing allocated
    /// per step.
    fn start(&mut self, time: f64) {
        self.at.clear();
        if self.on {
            self.at.push(time);
        }
    }

    /// The end of the next phase: the time now (after the device's work
    /// when profiling).
    fn at<T: Transport + ?Sized>(&mut self, t: &T, started: &Instant) -> f64 {
        if self.on
            && let Some(i) = self.cuda
        {
            tch::Cuda::synchronize(i);
        }
        let time = now(t, started);
        if self.on {
            self.at.push(time);
        }
        time
    }

    /// The step's [`Phases`], when every phase was marked.
    fn phases(&self) -> Option<Phases> {
        let d: Vec<f64> = self.at.windows(2).map(|w| w[1] - w[0]).collect();
        match d[..] {
            [
                scatter_s,
                forward_backward_s,
                gather_s,
                sgd_s,
                encode_s,
                exchange_s,
                decode_s,
            ] => Some(Phases {
                scatter_s,
                forward_backward_s,
                gather_s,
                sgd_s,
                encode_s,
                exchange_s,
                decode_s,
            }),
            _ => None,
        }
    }
}
