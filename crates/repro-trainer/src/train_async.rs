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
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use repro_algos::rng::Rng;
use repro_algos::{AsyncExchange, Folded, PairSide};
use repro_runlog::{End, Eval, Record, Status, Step, TrainConfig, write_record};

use crate::train::{Setup, TrainError, average, evaluate, knobs, peak_rss_bytes, setup};
use crate::transport::{Tag, Transport};

/// What the two threads share.
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

/// The gossip side's answer to the compute thread at the end.
struct Final {
    avg: Vec<f32>,
    consensus: repro_algos::Consensus,
    transport_bytes_sent: u64,
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

/// Trains one rank of AD-PSGD or Moniqua on AD-PSGD.
// Long on purpose: builds the state both threads share, runs them, joins them and
// reports; each step needs the others' values.
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
    let (rank, n) = (s.rank, s.n);
    let active = rank % 2 == 0;
    let neighbours: Vec<usize> = s
        .topology
        .neighbours(rank)
        .iter()
        .map(|&(j, _)| j)
        .collect();
    // an active rank pairs with passive (odd) neighbours; a passive rank
    // serves active (even) ones
    let peers: Vec<usize> = neighbours
        .iter()
        .copied()
        .filter(|j| (j % 2 == 0) != active)
        .collect();
    if active && peers.is_empty() && n > 1 {
        return Err(TrainError::Config(format!(
            "AD-PSGD pairs even (active) ranks with odd (passive) neighbours, and rank {rank} \
             has no odd neighbour on the {} of {n}; use a ring with an even number of workers",
            cfg.topology
        )));
    }
    let shared = Shared {
        x: Mutex::new(s.x0.clone()),
        steps: Mutex::new((0, false)),
        stepped: Condvar::new(),
        bytes_sent: AtomicU64::new(0),
        bytes_received: AtomicU64::new(0),
        mismatches: AtomicU64::new(0),
        verified: AtomicU64::new(0),
    };
    let d = s.x0.len();
    let mut side = PairSide::new(&exchange, cfg.seed, d)?;
    let (finished_tx, finished_rx) = mpsc::channel::<Result<Status, TrainError>>();
    let (final_tx, final_rx) = mpsc::channel::<Option<Final>>();
    std::thread::scope(|scope| {
        let shared = &shared;
        let compute = scope.spawn(move || compute(cfg, s, shared, log, &finished_tx, &final_rx));
        let gossiped = if active {
            gossip_active(t, cfg, rank, &peers, shared, &mut side)
        } else {
            gossip_passive(t, rank, &peers, shared, &mut side, &finished_rx)
        };
        let outcome = gossiped.and_then(|early| match early {
            // the compute thread stopped (diverged or failed) while serving
            Some(status) => Ok(status),
            None => finished_rx
                .recv()
                .unwrap_or_else(|_| Err(TrainError::Config("the compute thread died".into()))),
        });
        let result = match outcome {
            Ok(Status::Completed) => {
                // every rank gets here: the collective for the averaged model
                let x = shared.x.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match average(t, &x) {
                    Ok((avg, consensus)) => {
                        let _ = final_tx.send(Some(Final {
                            avg,
                            consensus,
                            transport_bytes_sent: t.bytes_sent(),
                        }));
                        Ok(Status::Completed)
                    }
                    Err(e) => Err(e),
                }
            }
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
    loop {
        {
            let mut g = shared.steps.lock().unwrap_or_else(|p| p.into_inner());
            while g.0 <= averaged && !g.1 {
                g = shared.stepped.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            if g.1 {
                break;
            }
        }
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
    let x = shared.x.lock().unwrap_or_else(|p| p.into_inner());
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
        let mut x = shared.x.lock().unwrap_or_else(|p| p.into_inner());
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

/// The compute thread: steps, local evaluations, the log.
// Long on purpose: the compute thread's loop and its shutdown handshake share the
// locks and counters of the state both threads hold; apart, each piece
// would take that state as half a dozen parameters.
fn compute(
    cfg: &TrainConfig,
    s: Setup,
    shared: &Shared,
    mut log: impl Write,
    finished: &mpsc::Sender<Result<Status, TrainError>>,
    final_rx: &mpsc::Receiver<Option<Final>>,
) -> Result<Status, TrainError> {
    let looping = Instant::now();
    let mut run = || -> Result<(Status, u64, f64), TrainError> {
        write_record(&mut log, &Record::Header(s.header.clone()))?;
        log.flush()?;
        let mut rng = Rng::new(cfg.seed, 100 + s.rank as u64);
        let d = s.x0.len();
        let (mut snapshot, mut grad) = (vec![0f32; d], vec![0f32; d]);
        let (mut momentum, mut delta) = (vec![0f32; d], vec![0f32; d]);
        let mut last_flush = Instant::now();
        let (mut sent0, mut recv0, mut mism0, mut ver0) = (0, 0, 0, 0);
        let mut epoch = 0.0;
        for k in 0..cfg.iterations {
            epoch = (k as f64 * cfg.batch as f64) / s.shard.len() as f64;
            let lr = s.schedule.at(epoch, k) as f32;
            let t0 = Instant::now();
            snapshot.copy_from_slice(&shared.x.lock().unwrap_or_else(|p| p.into_inner()));
            let waited = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            s.flat.scatter(&snapshot)?;
            s.vs.trainable_variables()
                .iter_mut()
                .for_each(|v| v.zero_grad());
            let batch: Vec<usize> = (0..cfg.batch)
                .map(|_| s.shard[rng.below(s.shard.len())])
                .collect();
            let (xb, yb) = s
                .data
                .train_tf
                .batch(&s.data.train, &batch, &mut rng, s.device);
            let loss_t = s.model.forward_t(&xb, true).cross_entropy_for_logits(&yb);
            let loss = loss_t.double_value(&[]);
            if !loss.is_finite() {
                return Ok((Status::Diverged { iteration: k }, k, epoch));
            }
            loss_t.backward();
            s.flat.gather_grad(&mut grad)?;
            s.sgd.step(lr, &snapshot, &grad, &mut momentum, &mut delta);
            let compute_s = t1.elapsed().as_secs_f64();
            let t2 = Instant::now();
            {
                let mut x = shared.x.lock().unwrap_or_else(|p| p.into_inner());
                for (x, d) in x.iter_mut().zip(&delta) {
                    *x -= d;
                }
            }
            let comm_s = waited + t2.elapsed().as_secs_f64();
            {
                let mut g = shared.steps.lock().unwrap_or_else(|p| p.into_inner());
                g.0 += 1;
                shared.stepped.notify_all();
            }
            let sent = shared.bytes_sent.load(Ordering::Relaxed);
            let recv = shared.bytes_received.load(Ordering::Relaxed);
            let mism = shared.mismatches.load(Ordering::Relaxed);
            let ver = shared.verified.load(Ordering::Relaxed);
            write_record(
                &mut log,
                &Record::Step(Step {
                    iteration: k,
                    epoch,
                    wall_s: s.started.elapsed().as_secs_f64(),
                    compute_s,
                    comm_s,
                    train_loss: loss,
                    bytes_sent: sent - sent0,
                    bytes_received: recv - recv0,
                    hash_failures: mism - mism0,
                    hash_verified: ver - ver0,
                    phases: None,
                }),
            )?;
            (sent0, recv0, mism0, ver0) = (sent, recv, mism, ver);
            if last_flush.elapsed() >= Duration::from_secs(1) {
                log.flush()?;
                last_flush = Instant::now();
            }
            let done = k + 1;
            if cfg.eval_every > 0 && done % cfg.eval_every == 0 && done < cfg.iterations {
                let x = shared.x.lock().unwrap_or_else(|p| p.into_inner()).clone();
                s.flat.scatter(&x)?;
                let (test_loss, test_accuracy) =
                    evaluate(&*s.model, &s.data, cfg.eval_samples, &mut rng, s.device);
                write_record(
                    &mut log,
                    &Record::Eval(Eval {
                        iteration: done,
                        epoch,
                        wall_s: s.started.elapsed().as_secs_f64(),
                        test_loss: Some(test_loss),
                        test_accuracy: Some(test_accuracy),
                        avg_test_loss: None,
                        avg_test_accuracy: None,
                        consensus_distance: None,
                        max_deviation: None,
                        model_norm: None,
                        recovered: None,
                        wrapped: None,
                        val_loss: None,
                        val_accuracy: None,
                        objective: None,
                        subopt: None,
                    }),
                )?;
            }
        }
        Ok((Status::Completed, cfg.iterations, epoch))
    };
    let outcome = run();
    // stop the gossip side (an active rank sends Done, a passive one keeps
    // serving its neighbours until they are done)
    {
        let mut g = shared.steps.lock().unwrap_or_else(|p| p.into_inner());
        g.1 = true;
        shared.stepped.notify_all();
    }
    let (status, done, epoch) = match outcome {
        Ok(o) => o,
        Err(e) => {
            let _ = finished.send(Err(TrainError::Config(format!("rank failed: {e}"))));
            return Err(e);
        }
    };
    let _ = finished.send(Ok(status.clone()));
    let mut status = status;
    let fin = if status == Status::Completed {
        final_rx.recv().ok().flatten()
    } else {
        None
    };
    if let Some(f) = &fin {
        let x = shared.x.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut rng = Rng::new(cfg.seed, 900 + s.rank as u64);
        s.flat.scatter(&x)?;
        let (test_loss, test_accuracy) =
            evaluate(&*s.model, &s.data, cfg.eval_samples, &mut rng, s.device);
        s.flat.scatter(&f.avg)?;
        let (avg_loss, avg_accuracy) =
            evaluate(&*s.model, &s.data, cfg.eval_samples, &mut rng, s.device);
        let valid = crate::train::validate(&*s.model, &s.data, &mut rng, s.device);
        status = status.after_final([test_loss, avg_loss], done);
        if cfg.eval_every > 0 {
            write_record(
                &mut log,
                &Record::Eval(Eval {
                    iteration: done,
                    epoch,
                    wall_s: s.started.elapsed().as_secs_f64(),
                    test_loss: Some(test_loss),
                    test_accuracy: Some(test_accuracy),
                    avg_test_loss: Some(avg_loss),
                    avg_test_accuracy: Some(avg_accuracy),
                    consensus_distance: repro_runlog::finite(f.consensus.distance),
                    max_deviation: repro_runlog::finite(f.consensus.max_deviation),
                    model_norm: repro_runlog::finite(crate::train::norm(&f.avg)),
                    recovered: None,
                    wrapped: None,
                    val_loss: valid.map(|v| v.0),
                    val_accuracy: valid.map(|v| v.1),
                    objective: None,
                    subopt: None,
                }),
            )?;
        }
    }
    write_record(
        &mut log,
        &Record::End(End {
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
            metrics: None,
        }),
    )?;
    log.flush()?;
    Ok(status)
}
