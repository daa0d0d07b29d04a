//! One rank's training run: its shard of the data, its model, an algorithm's
//! worker, a transport, and a run log.
//!
//! Every rank builds its model after seeding libtorch with the run seed, so
//! all ranks start from the same point (assumption A4 of the papers). The
//! flat parameters live in the algorithm's worker; each iteration scatters
//! them into the model, takes a minibatch gradient, turns it into the local
//! step with the shared SGD (momentum, weight decay), and lets the worker
//! send and receive frames through the transport. Bytes are counted from the
//! frames handed to the transport. Evaluation traffic (the all-reduce for the
//! averaged model) is not counted.

use std::io::Write;
use std::time::Instant;

use repro_algos::rng::Rng;
use repro_algos::{AlgorithmSpec, Consensus, Deviation, Knobs, Pattern, Recovery, Sgd, Topology};
pub use repro_runlog::TrainConfig;
use repro_runlog::{
    End, Eval, Header, Phases, Provenance, Record, SCHEMA_VERSION, Status, Step, finite,
    write_record,
};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind};
use thiserror::Error;

use crate::data::{Cifar10, FashionMnist, ImageSet, Partition, Transform, partition};
use crate::models::{ImageShape, ModelSpec};
use crate::transport::{Transport, TransportError};
use crate::{FlatParams, TrainerError};
use repro_algos::{LrSchedule, Schedule};

/// A training run that could not start or failed.
#[derive(Debug, Error)]
pub enum TrainError {
    #[error("invalid config: {0}")]
    Config(String),
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
    #[error(transparent)]
    Trainer(#[from] TrainerError),
    #[error(transparent)]
    Algo(#[from] repro_algos::AlgoError),
    #[error(transparent)]
    Topology(#[from] repro_algos::TopologyError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("libtorch failed")]
    Torch(#[from] tch::TchError),
    #[error("could not write the run log")]
    Log(#[from] std::io::Error),
}

/// Deterministic synthetic images (1x28x28, 10 classes): a per-class pattern
/// plus noise, learnable in a few hundred steps. For smoke runs and tests.
pub fn synthetic(samples: usize, seed: u64) -> ImageSet {
    let mut rng = Rng::new(seed, 0x5EED);
    let templates: Vec<Vec<u8>> = (0..10)
        .map(|c| {
            (0..784)
                .map(|p| if (p * 7 + c * 13) % 10 < 3 { 200 } else { 30 })
                .collect()
        })
        .collect();
    let mut pixels = Vec::with_capacity(samples * 784);
    let mut labels = Vec::with_capacity(samples);
    for s in 0..samples {
        let c = s % 10;
        labels.push(c as u8);
        pixels.extend(
            templates[c]
                .iter()
                .map(|&t| (f64::from(t) + 40.0 * rng.normal()).clamp(0.0, 255.0) as u8),
        );
    }
    ImageSet {
        pixels,
        labels,
        channels: 1,
        height: 28,
        width: 28,
    }
}

pub(crate) struct Data {
    pub train: ImageSet,
    pub test: ImageSet,
    /// Training images held out (`validation` > 0), never trained on.
    pub valid: Option<ImageSet>,
    pub shape: ImageShape,
    pub train_tf: Transform,
    pub test_tf: Transform,
}

fn load(cfg: &TrainConfig) -> Result<Data, TrainError> {
    let mut data = load_all(cfg)?;
    if cfg.validation > 0.0 {
        if cfg.validation >= 1.0 || cfg.validation.is_nan() {
            return Err(TrainError::Config(format!(
                "validation {} is not a fraction in (0, 1)",
                cfg.validation
            )));
        }
        data.valid = Some(data.train.hold_out(cfg.validation));
    }
    Ok(data)
}

fn load_all(cfg: &TrainConfig) -> Result<Data, TrainError> {
    Ok(match cfg.dataset.as_str() {
        "fashion-mnist" => {
            let d = FashionMnist::load(
                cfg.data_dir
                    .as_deref()
                    .unwrap_or(crate::data::FASHION_MNIST_DIR),
            )?;
            Data {
                train: d.train,
                test: d.test,
                valid: None,
                shape: ImageShape::FASHION_MNIST,
                train_tf: Transform::fashion_mnist(),
                test_tf: Transform::fashion_mnist(),
            }
        }
        "cifar10" => {
            let dir = cfg
                .data_dir
                .as_deref()
                .ok_or_else(|| TrainError::Config("cifar10 needs `data_dir`".into()))?;
            let d = Cifar10::load(dir)?;
            Data {
                train: d.train,
                test: d.test,
                valid: None,
                shape: ImageShape::CIFAR10,
                train_tf: Transform::cifar10_train(),
                test_tf: Transform::cifar10_test(),
            }
        }
        "synthetic" => Data {
            train: synthetic(cfg.synthetic_samples, cfg.seed),
            test: synthetic(cfg.synthetic_samples / 4 + 10, cfg.seed + 1),
            valid: None,
            shape: ImageShape::FASHION_MNIST,
            train_tf: Transform::fashion_mnist(),
            test_tf: Transform::fashion_mnist(),
        },
        other => {
            return Err(TrainError::Config(format!(
                "unknown dataset `{other}`; use fashion-mnist, cifar10 or synthetic"
            )));
        }
    })
}

/// The knobs of an asynchronous algorithm (ad-psgd, moniqua-ad-psgd),
/// which has no warm-up to pick a theta.
pub(crate) fn knobs(cfg: &TrainConfig) -> Result<Knobs, TrainError> {
    if cfg.knobs.theta == repro_algos::Theta::Auto {
        return Err(TrainError::Config(format!(
            "`theta: auto` needs a synchronous algorithm's warm-up; {} is asynchronous: give theta a number",
            cfg.algorithm
        )));
    }
    Ok(cfg.knobs.clone())
}

/// The warm-up of `theta: auto`, as the simulator runs it: `theta_warmup`
/// iterations of full-precision exchange tracking each worker's largest
/// step, then theta from Theorem 2's expression (Theorem 3's with gamma)
/// on the largest step of every rank. `None` for a given theta.
fn theta_warmup(cfg: &TrainConfig) -> Option<u64> {
    (cfg.knobs.theta == repro_algos::Theta::Auto && cfg.knobs.theta_warmup > 0)
        .then_some(cfg.knobs.theta_warmup)
}

/// Ends the warm-up of `theta: auto` on every rank alike: the largest step
/// of all ranks (an all-reduce of one slot each), then the worker's theta
/// from it. Returns the theta chosen.
fn end_theta_warmup<T: Transport>(
    t: &mut T,
    worker: &mut dyn repro_algos::Worker,
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

/// Test loss and accuracy of the model now in `vs` on the first `samples` test images.
pub(crate) fn evaluate(
    model: &dyn ModuleT,
    data: &Data,
    samples: usize,
    rng: &mut Rng,
    device: Device,
) -> (f64, f64) {
    score(model, &data.test, &data.test_tf, samples, rng, device)
}

/// Loss and accuracy of the model now in `vs` on every held-out validation
/// image (seen as test images are: no augmentation); None without them.
pub(crate) fn validate(
    model: &dyn ModuleT,
    data: &Data,
    rng: &mut Rng,
    device: Device,
) -> Option<(f64, f64)> {
    let valid = data.valid.as_ref()?;
    Some(score(model, valid, &data.test_tf, 0, rng, device))
}

/// Loss and accuracy on the first `samples` images of `set` (0: all).
fn score(
    model: &dyn ModuleT,
    set: &ImageSet,
    tf: &crate::data::Transform,
    samples: usize,
    rng: &mut Rng,
    device: Device,
) -> (f64, f64) {
    let n = if samples == 0 {
        set.len()
    } else {
        samples.min(set.len())
    };
    let idx: Vec<usize> = (0..n).collect();
    let (mut loss, mut correct) = (0.0, 0.0);
    tch::no_grad(|| {
        for chunk in idx.chunks(500) {
            let (x, y) = tf.batch(set, chunk, rng, device);
            let logits = model.forward_t(&x, false);
            loss += logits.cross_entropy_for_logits(&y).double_value(&[]) * chunk.len() as f64;
            correct += logits
                .argmax(-1, false)
                .eq_tensor(&y)
                .to_kind(Kind::Float)
                .sum(Kind::Float)
                .double_value(&[]);
        }
    });
    (loss / n as f64, correct / n as f64)
}

/// What every rank sets up before its first step, whatever the algorithm:
/// data shard, model, flat parameters, schedule, the log's header.
pub(crate) struct Setup {
    pub started: Instant,
    pub rank: usize,
    pub n: usize,
    pub device: Device,
    pub data: Data,
    pub shard: Vec<usize>,
    /// Owns the model's tensors.
    pub vs: VarStore,
    pub model: Box<dyn ModuleT>,
    pub flat: FlatParams,
    pub x0: Vec<f32>,
    pub topology: Topology,
    pub schedule: LrSchedule,
    pub sgd: Sgd,
    pub header: Header,
}

/// Checks the config against the launched world and builds a rank's [`Setup`].
// Long on purpose: a list of the config's checks against the launched world, each
// with its own error, then the rank's parts in the order they need each
// other; it reads as one list.
pub(crate) fn setup<T: Transport>(cfg: &TrainConfig, t: &mut T) -> Result<Setup, TrainError> {
    let started = Instant::now();
    let (rank, n) = (t.rank(), t.size());
    if cfg.pin_cores {
        let cpu = crate::device::pin_to_core(rank)
            .map_err(|e| TrainError::Config(format!("pin_cores: {e}")))?;
        eprintln!("repro-train: rank {rank} pinned to CPU {cpu}");
    }
    if cfg.workers != 0 && cfg.workers != n {
        return Err(TrainError::Config(if t.backend() == "mpi" {
            format!(
                "the config asks for {} workers but MPI started {n} ranks; pass `-np {}` to mpirun",
                cfg.workers, cfg.workers
            )
        } else {
            format!(
                "the config asks for {} workers but {n} were started; pass `--in-process {}`",
                cfg.workers, cfg.workers
            )
        }));
    }
    // the device: a GPU (the worker's local rank modulo the GPUs) unless
    // the config pins the CPU or libtorch sees none
    let gpus = usize::try_from(tch::Cuda::device_count()).unwrap_or(0);
    let plan = crate::plan_device(t.local_rank(), gpus, cfg.device)
        .map_err(|e| TrainError::Config(format!("rank {rank}: {e}")))?;
    tch::set_num_threads(plan.threads);
    if !(cfg.latency_ms >= 0.0 && cfg.latency_ms.is_finite()) {
        return Err(TrainError::Config(format!(
            "latency_ms must be >= 0, got {}",
            cfg.latency_ms
        )));
    }
    if cfg.latency_ms > 0.0 && cfg.algorithm == "allreduce-mpi" {
        return Err(TrainError::Config(
            "allreduce-mpi: MPI_Allreduce's messages bypass the transport's injected latency; \
             run it where netem adds the latency, or at 0 ms"
                .into(),
        ));
    }
    if cfg.latency_ms > 0.0 {
        t.set_injected_latency(Some(std::time::Duration::from_secs_f64(
            cfg.latency_ms / 1e3,
        )));
    }
    let device = plan.device;
    let data = load(cfg)?;
    let how = match cfg.partition.as_str() {
        "iid" => Partition::Iid,
        "by-label" => Partition::ByLabel,
        "dirichlet" => Partition::Dirichlet {
            alpha: cfg.dirichlet_alpha,
        },
        other => return Err(TrainError::Config(format!("unknown partition `{other}`"))),
    };
    let shard = partition(&data.train.labels, n, how, cfg.seed)?.swap_remove(rank);
    // libtorch's generator is global: workers that are threads of one
    // process (the in-process transport) seed and build one at a time, so
    // every one starts from the same point
    let (vs, model, flat) = {
        static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _guard = BUILD
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tch::manual_seed(cfg.seed as i64);
        let vs = VarStore::new(device);
        let model = ModelSpec::parse(&cfg.model)?.build(&vs.root(), data.shape);
        let flat = FlatParams::new(&vs)?;
        (vs, model, flat)
    };
    let mut x0 = vec![0f32; flat.len()];
    flat.gather(&mut x0)?;
    let topology = Topology::by_name(&cfg.topology, n)?;
    let schedule = LrSchedule {
        base: cfg.lr,
        warmup_epochs: cfg.warmup_epochs,
        schedule: Schedule::parse(
            &cfg.schedule,
            cfg.iterations as f64 * cfg.batch as f64 / shard.len() as f64,
            &cfg.milestones,
            0.0,
            0.0,
            f64::from(cfg.weight_decay),
        )
        .map_err(TrainError::Config)?,
    };
    let sgd = Sgd {
        momentum: cfg.momentum,
        weight_decay: cfg.weight_decay,
    };
    // from here on the worker's computation is charged (virtual clocks)
    t.compute_on(device);
    let header = Header {
        schema: SCHEMA_VERSION,
        run_id: cfg.run_id.clone(),
        rank: rank as u32,
        world: n as u32,
        config: serde_json::to_value(cfg).unwrap_or_default(),
        provenance: Provenance {
            libtorch: crate::device::loaded_libtorch(),
            mpi: t.library(),
            command: cfg.invocation.as_ref().map(|i| i.command.clone()),
            manifest_hash: cfg.invocation.as_ref().map(|i| i.manifest_hash.clone()),
            ..repro_build::BUILD.provenance(
                &crate::device::device_name(device),
                t.backend(),
                if cfg.latency_ms > 0.0 && t.virtual_time().is_none() {
                    format!(
                        "{}; latency injected per message by the transport: {} ms",
                        t.network(),
                        cfg.latency_ms
                    )
                } else {
                    t.network()
                },
            )
        },
    };
    Ok(Setup {
        started,
        rank,
        n,
        device,
        data,
        shard,
        vs,
        model,
        flat,
        x0,
        topology,
        schedule,
        sgd,
        header,
    })
}

/// Trains one rank of a synchronous algorithm; writes its log to `log`.
/// Returns how the run ended. `run::run` is the entry point: it sends the
/// asynchronous algorithms (`ad-psgd`, `moniqua-ad-psgd`) to
/// `train_async` instead.
// Long on purpose: one rank's iteration loop; its parts (the step, the exchange,
// the evaluations, the log records) read and update the loop's clocks
// and counters, which split functions would pass back and forth.
pub fn train<T: Transport>(
    cfg: &TrainConfig,
    t: &mut T,
    mut log: impl Write + Send,
) -> Result<Status, TrainError> {
    let Setup {
        started,
        rank,
        n,
        data,
        shard,
        vs,
        model,
        flat,
        x0,
        topology,
        schedule,
        sgd,
        header,
        device,
    } = setup(cfg, t)?;
    let spec = AlgorithmSpec::from_name(&cfg.algorithm, &cfg.knobs)?;
    let mut worker = spec.build(rank, &topology, cfg.seed, &x0)?;
    let warmup = theta_warmup(cfg);
    if warmup.is_some() {
        worker.start_theta_warmup();
    }
    let neighbours: Vec<usize> = topology.neighbours(rank).iter().map(|&(j, _)| j).collect();
    write_record(&mut log, &Record::Header(header))?;
    // a rank killed early (another one diverged) still leaves a readable log
    log.flush()?;
    let mut last_flush = Instant::now();
    let mut rng = Rng::new(cfg.seed, 100 + rank as u64);
    let d = flat.len();
    let (mut grad, mut momentum, mut delta) = (vec![0f32; d], vec![0f32; d], vec![0f32; d]);
    let mut frame = Vec::new();
    let mut status = Status::Completed;
    let mut done = 0;
    let looping = Instant::now();
    let mut marks = Marks::new(cfg.profile_phases, device);
    for k in 0..cfg.iterations {
        let epoch = (k as f64 * cfg.batch as f64) / shard.len() as f64;
        let lr = schedule.at(epoch, k) as f32;
        let t0 = now(t, &started);
        marks.start(t0);
        flat.scatter(worker.model())?;
        marks.at(t, &started);
        vs.trainable_variables()
            .iter_mut()
            .for_each(|v| v.zero_grad());
        let batch: Vec<usize> = (0..cfg.batch)
            .map(|_| shard[rng.below(shard.len())])
            .collect();
        let (xb, yb) = data.train_tf.batch(&data.train, &batch, &mut rng, device);
        let loss_t = model.forward_t(&xb, true).cross_entropy_for_logits(&yb);
        let loss = loss_t.double_value(&[]);
        if !loss.is_finite() {
            status = Status::Diverged { iteration: k };
            break;
        }
        loss_t.backward();
        marks.at(t, &started);
        flat.gather_grad(&mut grad)?;
        marks.at(t, &started);
        sgd.step(lr, worker.model(), &grad, &mut momentum, &mut delta);
        let t1 = marks.at(t, &started);
        let compute_s = t1 - t0;
        if repro_algos::unless_diverged(worker.send(k, &delta, &mut frame))?.is_none() {
            status = Status::Diverged { iteration: k };
            break;
        }
        marks.at(t, &started);
        let mut summed: Option<Vec<f32>> = None;
        let (inbox, sent): (Vec<(usize, Vec<u8>)>, u64) = match worker.pattern() {
            Pattern::Gossip => {
                let frames = t.exchange(&neighbours, &frame, &neighbours)?;
                (
                    neighbours.iter().copied().zip(frames).collect(),
                    (frame.len() * neighbours.len()) as u64,
                )
            }
            Pattern::AllReduce | Pattern::AllGather if frame.is_empty() => (
                (0..n)
                    .filter(|&j| j != rank)
                    .map(|j| (j, Vec::new()))
                    .collect(),
                0,
            ),
            Pattern::AllReduce => {
                // summable f32 frames: a ring all-reduce of their payload,
                // 2 (n - 1) / n of it on the wire instead of n - 1 frames
                let before = t.bytes_sent();
                let header = repro_codec::FrameHeader::parse(&frame, u32::MAX)
                    .map_err(|e| repro_algos::AlgoError::from(repro_codec::CodecError::from(e)))?;
                let mut sum = vec![0f32; header.len as usize];
                repro_codec::FullPrecision::default()
                    .decode(&frame, &mut sum)
                    .map_err(repro_algos::AlgoError::from)?;
                match cfg.algorithm.as_str() {
                    "allreduce-mpi" => t.all_reduce_library(&mut sum)?,
                    "allreduce-rhd" => crate::transport::halving_doubling_all_reduce(t, &mut sum)?,
                    _ => t.all_reduce_sum(&mut sum)?,
                }
                summed = Some(sum);
                (Vec::new(), t.bytes_sent() - before)
            }
            Pattern::AllGather => {
                let all = t.all_gather(&frame)?;
                (
                    all.into_iter()
                        .enumerate()
                        .filter(|(j, _)| *j != rank)
                        .collect(),
                    (frame.len() * (n - 1)) as u64,
                )
            }
        };
        marks.at(t, &started);
        // a ring receives what it sends
        let received_bytes: u64 = if summed.is_some() {
            sent
        } else {
            inbox.iter().map(|(_, f)| f.len() as u64).sum()
        };
        let borrowed: Vec<(usize, &[u8])> = inbox.iter().map(|(j, f)| (*j, f.as_slice())).collect();
        // the same rule as for sending (and as the simulator's): a model
        // the codec rejects as non-finite or out of range has diverged
        let received = match summed.take() {
            Some(sum) => worker.receive_sum(k, &sum),
            None => worker.receive(k, &delta, &borrowed),
        };
        let Some(r) = repro_algos::unless_diverged(received)? else {
            status = Status::Diverged { iteration: k };
            break;
        };
        if warmup == Some(k + 1) {
            end_theta_warmup(t, &mut *worker, rank, n, topology.spectrum().rho)?;
        }
        let comm_s = marks.at(t, &started) - t1;
        write_record(
            &mut log,
            &Record::Step(Step {
                iteration: k,
                epoch,
                wall_s: now(t, &started),
                compute_s,
                comm_s,
                train_loss: loss,
                bytes_sent: sent,
                bytes_received: received_bytes,
                hash_failures: r.mismatched,
                hash_verified: r.verified,
                phases: marks.phases(),
            }),
        )?;
        // at least once a second: the driver's progress reads this log, and
        // a killed rank leaves what it did
        if last_flush.elapsed() >= std::time::Duration::from_secs(1) {
            log.flush()?;
            last_flush = Instant::now();
        }
        done = k + 1;
        if cfg.eval_every > 0 && (done % cfg.eval_every == 0 || done == cfg.iterations) {
            let e = eval(
                cfg,
                &*model,
                &flat,
                &*worker,
                &neighbours,
                &data,
                t,
                &mut rng,
                done,
                epoch,
                &started,
            )?;
            if done == cfg.iterations {
                status = status.after_final(e.test_loss.into_iter().chain(e.avg_test_loss), done);
            }
            write_record(&mut log, &Record::Eval(e))?;
        }
    }
    write_record(
        &mut log,
        &Record::End(End {
            status: status.clone(),
            wall_s: now(t, &started),
            iterations: done,
            transport_bytes_sent: Some(t.bytes_sent()),
            extra_memory_bytes: Some(worker.extra_memory() as u64),
            peak_rss_bytes: peak_rss_bytes(t.backend()),
            real_s: Some(looping.elapsed().as_secs_f64()),
            theta: worker.theta(),
            metrics: None,
        }),
    )?;
    log.flush()?;
    Ok(status)
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

/// Seconds since the run started: the transport's virtual clock when it
/// has one, else the wall clock.
pub(crate) fn now<T: Transport + ?Sized>(t: &T, started: &Instant) -> f64 {
    t.virtual_time()
        .unwrap_or_else(|| started.elapsed().as_secs_f64())
}

/// This rank's peak resident set (the process's VmHWM), bytes; `None` off
/// Linux, and when workers share one process (in-process transport), where
/// no per-worker figure exists.
pub(crate) fn peak_rss_bytes(backend: &str) -> Option<u64> {
    if backend != "mpi" {
        return None;
    }
    repro_runlog::resident_bytes("VmHWM")
}

/// The averaged model and the workers' consensus around it
/// ([`Consensus`]), through the transport's all-reduce and an all-gather
/// of every rank's deviation.
pub(crate) fn average<T: Transport>(
    t: &mut T,
    x: &[f32],
) -> Result<(Vec<f32>, Consensus), TrainError> {
    let n = t.size() as f32;
    let mut avg = x.to_vec();
    t.all_reduce_sum(&mut avg)?;
    avg.iter_mut().for_each(|v| *v /= n);
    let mine = Deviation::of(x, &avg);
    let frame: Vec<u8> = [mine.sq, mine.max]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let all = t.all_gather(&frame)?;
    let each = all.iter().map(|f| {
        let at = |i: usize| {
            f.get(8 * i..8 * i + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(f64::NAN, f64::from_le_bytes)
        };
        Deviation {
            sq: at(0),
            max: at(1),
        }
    });
    Ok((avg, Consensus::of(each)))
}

/// `|x|_2`, in f64.
pub(crate) fn norm(x: &[f32]) -> f64 {
    x.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt()
}

/// Moniqua's recovery checked on the models themselves: every rank sends
/// its model to its neighbours (full precision, outside the step's
/// frames and timing) and recovers each one's frame as the neighbour's
/// next `send` would encode it, against its own model. `None` for
/// algorithms without modulo recovery. What is counted is
/// [`Recovery::add_pair`]'s, the simulator's count.
fn check_recovery<T: Transport>(
    t: &mut T,
    worker: &dyn repro_algos::Worker,
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

#[allow(clippy::too_many_arguments)]
fn eval<T: Transport>(
    cfg: &TrainConfig,
    model: &dyn ModuleT,
    flat: &FlatParams,
    worker: &dyn repro_algos::Worker,
    neighbours: &[usize],
    data: &Data,
    t: &mut T,
    rng: &mut Rng,
    iteration: u64,
    epoch: f64,
    started: &Instant,
) -> Result<Eval, TrainError> {
    let x = worker.model();
    flat.scatter(x)?;
    let device = flat.device();
    let (test_loss, test_accuracy) = evaluate(model, data, cfg.eval_samples, rng, device);
    let recovery = check_recovery(t, worker, neighbours, iteration)?;
    let (avg, consensus) = average(t, x)?;
    flat.scatter(&avg)?;
    let (avg_loss, avg_accuracy) = evaluate(model, data, cfg.eval_samples, rng, device);
    let valid = validate(model, data, rng, device);
    flat.scatter(x)?;
    Ok(Eval {
        iteration,
        epoch,
        wall_s: now(t, started),
        test_loss: Some(test_loss),
        test_accuracy: Some(test_accuracy),
        avg_test_loss: Some(avg_loss),
        avg_test_accuracy: Some(avg_accuracy),
        consensus_distance: finite(consensus.distance),
        max_deviation: finite(consensus.max_deviation),
        model_norm: finite(norm(&avg)),
        recovered: recovery.map(|r| r.coordinates),
        wrapped: recovery.map(|r| r.beyond_bound),
        val_loss: valid.map(|v| v.0),
        val_accuracy: valid.map(|v| v.1),
        objective: None,
        subopt: None,
    })
}
