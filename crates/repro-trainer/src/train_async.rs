//! AD-PSGD (Lian et al. 2017b) and Moniqua on AD-PSGD (Lu & De Sa 2020,
//! Section 5) over a real transport: each rank runs two threads of control.
//!
//! - The **compute thread** loops: snapshot the model, compute a minibatch
//!   gradient on it, apply the step to the (meanwhile possibly averaged)
//!   model, tell the gossip side a step is done. It writes the log.
//! - The **gossip side** (the thread that owns the transport: MPI is only
//!   ever called from it) averages the model with a neighbour while the next
//!   gradient is computed.
//!
//! Pairing cannot deadlock: ranks are split into active (even) and passive
//! (odd) ones, as in Lian et al. and SGP's `ad_psgd.py`. After each of its
//! steps an active rank picks one of its passive neighbours at random, sends
//! its model (tag `Request`) and waits for the reply (tag `Reply`); a passive
//! rank only answers, whichever active neighbour asks, and never initiates.
//! Every wait is on a rank that is guaranteed to answer. An active rank that
//! has finished its steps says so (tag `Done`); a passive rank stops serving
//! when all its active neighbours have. Both sides of a pair fold in the
//! other's frame with [`repro_algos::PairSide`], the same code as the
//! simulator's.
//!
//! Logged per step: `compute_s` is the gradient, `comm_s` the time the
//! compute thread waited for the model (held by an average in progress),
//! bytes and hash failures are the gossip side's since the previous step.
//! Intermediate evaluations are local (no collective: ranks are not in
//! step); the final one, after every rank has finished, also evaluates the
//! averaged model.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use repro_algos::rng::Rng;
use repro_algos::{AsyncExchange, Folded, Knobs, PairSide, Topology};
use repro_runlog::{End, Eval, Record, Status, Step, TrainConfig, finite};

use crate::local::{RunLog, average, norm, peak_rss_bytes};
use crate::setup::{Setup, TrainError, setup};
use crate::transport::{Tag, Transport};

/// What the two threads share.
#[derive(Default)]
struct Shared {
    x: Mutex<Vec<f32>>,
    /// (steps taken, compute finished), with a condvar the active gossip
    /// side waits on.
    steps: Mutex<(u64, bool)>,
    stepped: Condvar,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    mismatches: AtomicU64,
    verified: AtomicU64,
}

/// The gossip side's counters at one moment.
#[derive(Clone, Copy, Default)]
struct Counts {
    sent: u64,
    received: u64,
    mismatches: u64,
    verified: u64,
}

impl Shared {
    /// The model, locked (a poisoned lock still holds it).
    fn x(&self) -> MutexGuard<'_, Vec<f32>> {
        self.x.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn steps(&self) -> MutexGuard<'_, (u64, bool)> {
        self.steps.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The compute thread took one more step.
    fn stepped(&self) {
        self.steps().0 += 1;
        self.stepped.notify_all();
    }

    /// The compute thread stopped: the gossip side stops too (an active
    /// rank sends Done, a passive one keeps serving its neighbours until
    /// they are done).
    fn finished(&self) {
        self.steps().1 = true;
        self.stepped.notify_all();
    }

    /// Waits until the compute thread has taken more than `averaged`
    /// steps (true) or stopped (false).
    fn wait_for_step(&self, averaged: u64) -> bool {
        let mut g = self.steps();
        while g.0 <= averaged && !g.1 {
            g = self.stepped.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        !g.1
    }

    fn counts(&self) -> Counts {
        Counts {
            sent: self.bytes_sent.load(Ordering::Relaxed),
            received: self.bytes_received.load(Ordering::Relaxed),
            mismatches: self.mismatches.load(Ordering::Relaxed),
            verified: self.verified.load(Ordering::Relaxed),
        }
    }
}

/// The gossip side's answer to the compute thread at the end.
struct Final {
    avg: Vec<f32>,
    consensus: repro_algos::Consensus,
    transport_bytes_sent: u64,
}

/// The knobs of an asynchronous algorithm (ad-psgd, moniqua-ad-psgd),
/// which has no warm-up to pick a theta.
fn knobs(cfg: &TrainConfig) -> Result<Knobs, TrainError> {
    if cfg.knobs.theta.warms_up() {
        return Err(TrainError::Config(format!(
            "`theta: theorem3-step` and `theta: theorem2` need a synchronous algorithm's warm-up; {} is asynchronous: give theta a number",
            cfg.algorithm
        )));
    }
    Ok(cfg.knobs.clone())
}

fn exchange_of(cfg: &TrainConfig) -> Result<AsyncExchange, TrainError> {
    let k = knobs(cfg)?;
    Ok(match cfg.algorithm.as_str() {
        "ad-psgd" => AsyncExchange::Full,
        "moniqua-ad-psgd" => AsyncExchange::Moniqua(
            repro_algos::moniqua_config(&k).map_err(|e| TrainError::Config(e.to_string()))?,
        ),
        other => {
            return Err(TrainError::Config(format!(
                "`{other}` is not an asynchronous algorithm"
            )));
        }
    })
}

/// The neighbours a rank gossips with: an active (even) rank pairs with
/// its passive (odd) neighbours, a passive rank serves its active ones.
fn peers(
    cfg: &TrainConfig,
    topology: &Topology,
    rank: usize,
    n: usize,
) -> Result<Vec<usize>, TrainError> {
    let active = rank.is_multiple_of(2);
    let peers: Vec<usize> = topology
        .neighbours(rank)
        .iter()
        .map(|&(j, _)| j)
        .filter(|j| (j % 2 == 0) != active)
        .collect();
    if active && peers.is_empty() && n > 1 {
        return Err(TrainError::Config(format!(
            "AD-PSGD pairs even (active) ranks with odd (passive) neighbours, and rank {rank} \
             has no odd neighbour on the {} of {n}; use a ring with an even number of workers",
            cfg.topology
        )));
    }
    Ok(peers)
}

/// Trains one rank of AD-PSGD or Moniqua on AD-PSGD: the compute thread
/// spawned, the gossip side run on this one, and both joined.
pub fn train_async<T: Transport>(
    cfg: &TrainConfig,
    t: &mut T,
    log: impl Write + Send,
) -> Result<Status, TrainError> {
    if t.virtual_time().is_some() {
        return Err(TrainError::Config(format!(
            "`{}` computes gradients and gossips in two threads per worker, which a virtual clock \
             cannot time; run it on the mpi backend (real time) or the sim backend (the event-driven \
             simulator)",
            cfg.algorithm
        )));
    }
    let exchange = exchange_of(cfg)?;
    let s = setup(cfg, t)?;
    let rank = s.rank;
    let peers = peers(cfg, &s.topology, rank, s.n)?;
    let shared = Shared {
        x: Mutex::new(s.x0.clone()),
        ..Shared::default()
    };
    let mut side = PairSide::new(&exchange, cfg.seed, s.x0.len())?;
    let (finished_tx, finished_rx) = mpsc::channel::<Result<Status, TrainError>>();
    let (final_tx, final_rx) = mpsc::channel::<Option<Final>>();
    std::thread::scope(|scope| {
        let shared = &shared;
        let compute = scope.spawn(move || compute(cfg, s, shared, log, &finished_tx, &final_rx));
        let gossiped = if rank.is_multiple_of(2) {
            gossip_active(t, cfg, rank, &peers, shared, &mut side)
        } else {
            gossip_passive(t, rank, &peers, shared, &mut side, &finished_rx)
        };
        let outcome = gossiped.and_then(|early| match early {
            // the compute thread stopped (diverged or failed) while serving
            Some(status) => Ok(status),
            None => finished_rx.recv().unwrap_or(Err(TrainError::ComputeThread)),
        });
        let result = match outcome {
            // every rank gets here: the collective for the averaged model
            Ok(Status::Completed) => average_for_final(t, shared, &final_tx),
            other => other,
        };
        // unblock the compute thread whatever happened
        let _ = final_tx.send(None);
        match compute.join() {
            Ok(Ok(status)) => result.map(|_| status),
            Ok(Err(e)) => Err(e),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// The collective every rank joins once all have finished: the averaged
/// model and the consensus, sent to the compute thread for its final
/// evaluation.
fn average_for_final<T: Transport>(
    t: &mut T,
    shared: &Shared,
    final_tx: &mpsc::Sender<Option<Final>>,
) -> Result<Status, TrainError> {
    let x = shared.x().clone();
    let (avg, consensus) = average(t, &x)?;
    let _ = final_tx.send(Some(Final {
        avg,
        consensus,
        transport_bytes_sent: t.bytes_sent(),
    }));
    Ok(Status::Completed)
}

/// An active rank: one average per local step, with a random passive neighbour.
fn gossip_active<T: Transport>(
    t: &mut T,
    cfg: &TrainConfig,
    rank: usize,
    peers: &[usize],
    shared: &Shared,
    side: &mut PairSide,
) -> Result<Option<Status>, TrainError> {
    let mut rng = Rng::new(cfg.seed, 300 + rank as u64);
    let mut frame = Vec::new();
    let mut averaged = 0u64;
    while shared.wait_for_step(averaged) {
        if peers.is_empty() {
            averaged += 1;
            continue;
        }
        let j = peers[rng.below(peers.len())];
        encode(side, shared, averaged, rank, &mut frame)?;
        t.send_tagged(j, Tag::Request, &frame)?;
        let reply = t.receive_tagged(j, Tag::Reply)?;
        fold(side, &frame, &reply, shared)?;
        averaged += 1;
    }
    for &j in peers {
        t.send_tagged(j, Tag::Done, &[])?;
    }
    Ok(None)
}

/// A passive rank: answers requests until every active neighbour is done.
/// Returns early with the compute thread's status if it stopped first with
/// anything but completion (then no one will finish this run normally).
fn gossip_passive<T: Transport>(
    t: &mut T,
    rank: usize,
    peers: &[usize],
    shared: &Shared,
    side: &mut PairSide,
    finished: &mpsc::Receiver<Result<Status, TrainError>>,
) -> Result<Option<Status>, TrainError> {
    let mut frame = Vec::new();
    let mut served = 0u64;
    let mut done = 0;
    let mut finished_early: Option<Result<Status, TrainError>> = None;
    while done < peers.len() {
        if let Some((j, request)) = t.poll_tagged(Tag::Request)? {
            encode(side, shared, served, rank, &mut frame)?;
            t.send_tagged(j, Tag::Reply, &frame)?;
            fold(side, &frame, &request, shared)?;
            served += 1;
            continue;
        }
        if t.poll_tagged(Tag::Done)?.is_some() {
            done += 1;
            continue;
        }
        if finished_early.is_none()
            && let Ok(r) = finished.try_recv()
        {
            match r {
                Ok(Status::Completed) => finished_early = Some(Ok(Status::Completed)),
                other => return other.map(Some),
            }
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    // a completion already taken from the channel is reported here
    finished_early.transpose()
}

/// Encodes a snapshot of the shared model into `frame`.
fn encode(
    side: &mut PairSide,
    shared: &Shared,
    k: u64,
    rank: usize,
    frame: &mut Vec<u8>,
) -> Result<(), TrainError> {
    let x = shared.x();
    side.encode(&x, k, rank as u32, frame)?;
    Ok(())
}

/// Folds the partner's frame `theirs` into the shared model and counts the
/// pair's bytes (`sent` went the other way).
fn fold(
    side: &mut PairSide,
    sent: &[u8],
    theirs: &[u8],
    shared: &Shared,
) -> Result<(), TrainError> {
    {
        let mut x = shared.x();
        match side.fold(theirs, &mut x)? {
            Folded::Mismatch => shared.mismatches.fetch_add(1, Ordering::Relaxed),
            Folded::Verified => shared.verified.fetch_add(1, Ordering::Relaxed),
            Folded::Averaged => 0,
        };
    }
    shared
        .bytes_sent
        .fetch_add(sent.len() as u64, Ordering::Relaxed);
    shared
        .bytes_received
        .fetch_add(theirs.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// The compute thread: its steps and local evaluations; then it stops
/// the gossip side, tells it how the steps ended, and ends the log with
/// the final evaluation.
fn compute(
    cfg: &TrainConfig,
    s: Setup,
    shared: &Shared,
    log: impl Write,
    finished: &mpsc::Sender<Result<Status, TrainError>>,
    final_rx: &mpsc::Receiver<Option<Final>>,
) -> Result<Status, TrainError> {
    let looping = Instant::now();
    let mut log = RunLog::new(log);
    let outcome = ComputeThread::new(cfg, &s, shared).run(&mut log);
    shared.finished();
    let (mut status, done, epoch) = match outcome {
        Ok(o) => o,
        Err(e) => {
            let _ = finished.send(Err(TrainError::Config(format!("rank failed: {e}"))));
            return Err(e);
        }
    };
    let _ = finished.send(Ok(status.clone()));
    let fin = if status == Status::Completed {
        final_rx.recv().ok().flatten()
    } else {
        None
    };
    if let Some(f) = &fin {
        let e = final_eval(cfg, &s, shared, f, done, epoch)?;
        status = status.after_final(e.test_loss.into_iter().chain(e.avg_test_loss), done);
        if cfg.eval_every > 0 {
            log.write(&Record::Eval(e))?;
        }
    }
    log.write(&Record::End(End {
        status: status.clone(),
        wall_s: s.started.elapsed().as_secs_f64(),
        iterations: done,
        transport_bytes_sent: fin.as_ref().map(|f| f.transport_bytes_sent),
        // not accounted for the asynchronous loop (its buffers are scratch
        // space of the two threads, not algorithm state)
        extra_memory_bytes: None,
        peak_rss_bytes: peak_rss_bytes("mpi"),
        real_s: Some(looping.elapsed().as_secs_f64()),
        theta: None,
        modulus: None,
        metrics: None,
    }))?;
    log.flush()?;
    Ok(status)
}

/// The final evaluation, once every rank has finished: this rank's model
/// on the test images, the consensus, and on rank 0 the averaged model on
/// the test images and the validation split.
fn final_eval(
    cfg: &TrainConfig,
    s: &Setup,
    shared: &Shared,
    f: &Final,
    done: u64,
    epoch: f64,
) -> Result<Eval, TrainError> {
    let x = shared.x().clone();
    let mut rng = Rng::new(cfg.seed, 900 + s.rank as u64);
    let (test_loss, test_accuracy) = s.evaluate(&x, cfg.eval_samples, &mut rng)?;
    let scores = s.evaluate_average(&f.avg, cfg.eval_samples, &mut rng)?;
    Ok(Eval {
        iteration: done,
        epoch,
        wall_s: s.started.elapsed().as_secs_f64(),
        test_loss: Some(test_loss),
        test_accuracy: Some(test_accuracy),
        avg_test_loss: scores.test.map(|v| v.0),
        avg_test_accuracy: scores.test.map(|v| v.1),
        consensus_distance: finite(f.consensus.distance),
        max_deviation: finite(f.consensus.max_deviation),
        model_norm: finite(norm(&f.avg)),
        val_loss: scores.valid.map(|v| v.0),
        val_accuracy: scores.valid.map(|v| v.1),
        ..Eval::default()
    })
}

/// The compute thread's loop and its buffers.
struct ComputeThread<'a> {
    cfg: &'a TrainConfig,
    s: &'a Setup,
    shared: &'a Shared,
    rng: Rng,
    snapshot: Vec<f32>,
    grad: Vec<f32>,
    momentum: Vec<f32>,
    delta: Vec<f32>,
    /// The gossip side's counters at the previous step.
    counted: Counts,
}

impl<'a> ComputeThread<'a> {
    fn new(cfg: &'a TrainConfig, s: &'a Setup, shared: &'a Shared) -> Self {
        let d = s.x0.len();
        ComputeThread {
            cfg,
            s,
            shared,
            rng: Rng::new(cfg.seed, 100 + s.rank as u64),
            snapshot: vec![0f32; d],
            grad: vec![0f32; d],
            momentum: vec![0f32; d],
            delta: vec![0f32; d],
            counted: Counts::default(),
        }
    }

    /// The header, then every step with its local evaluations. How the
    /// steps ended, the steps done and the last epoch.
    fn run(mut self, log: &mut RunLog<impl Write>) -> Result<(Status, u64, f64), TrainError> {
        log.write(&Record::Header(self.s.header.clone()))?;
        log.flush()?;
        let cfg = self.cfg;
        let mut epoch = 0.0;
        for k in 0..cfg.iterations {
            epoch = self.s.epoch(k, cfg.batch);
            let Some(step) = self.step(k, epoch)? else {
                return Ok((Status::Diverged { iteration: k }, k, epoch));
            };
            log.write(&Record::Step(step))?;
            log.flush_if_due()?;
            let done = k + 1;
            if cfg.eval_every > 0 && done % cfg.eval_every == 0 && done < cfg.iterations {
                let e = self.local_eval(done, epoch)?;
                log.write(&Record::Eval(e))?;
            }
        }
        Ok((Status::Completed, cfg.iterations, epoch))
    }

    /// Iteration `k`: a snapshot of the shared model (`comm_s` is the wait
    /// for it), its minibatch gradient and SGD step (`compute_s`), the
    /// step applied to the shared model, meanwhile perhaps averaged. Its
    /// log record, or `None` when the loss diverged.
    fn step(&mut self, k: u64, epoch: f64) -> Result<Option<Step>, TrainError> {
        let (s, shared) = (self.s, self.shared);
        let lr = s.schedule.at(epoch, k) as f32;
        let t0 = Instant::now();
        self.snapshot.copy_from_slice(&shared.x());
        let waited = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        s.scatter(&self.snapshot)?;
        let Some(loss) = s.forward_backward(self.cfg.batch, &mut self.rng) else {
            return Ok(None);
        };
        s.gather_grad(&mut self.grad)?;
        (s.sgd).step(
            lr,
            &self.snapshot,
            &self.grad,
            &mut self.momentum,
            &mut self.delta,
        );
        let compute_s = t1.elapsed().as_secs_f64();
        let t2 = Instant::now();
        for (x, d) in shared.x().iter_mut().zip(&self.delta) {
            *x -= d;
        }
        let comm_s = waited + t2.elapsed().as_secs_f64();
        shared.stepped();
        let (now, before) = (shared.counts(), self.counted);
        self.counted = now;
        Ok(Some(Step {
            iteration: k,
            epoch,
            wall_s: s.started.elapsed().as_secs_f64(),
            compute_s,
            comm_s,
            train_loss: loss,
            bytes_sent: now.sent - before.sent,
            bytes_received: now.received - before.received,
            hash_failures: now.mismatches - before.mismatches,
            hash_verified: now.verified - before.verified,
            phases: None,
        }))
    }

    /// An intermediate evaluation: this rank's model alone (no collective:
    /// the ranks are not in step).
    fn local_eval(&mut self, done: u64, epoch: f64) -> Result<Eval, TrainError> {
        let x = self.shared.x().clone();
        let (test_loss, test_accuracy) =
            self.s.evaluate(&x, self.cfg.eval_samples, &mut self.rng)?;
        Ok(Eval {
            iteration: done,
            epoch,
            wall_s: self.s.started.elapsed().as_secs_f64(),
            test_loss: Some(test_loss),
            test_accuracy: Some(test_accuracy),
            avg_test_loss: None,
            avg_test_accuracy: None,
            consensus_distance: None,
            ..Eval::default()
        })
    }
}
