//! What a rank sets up before its first step, whatever the algorithm: its
//! data and shard, its model (seeded with the run seed, so all ranks start
//! from the same point: assumption A4 of the papers), the schedule and the
//! log's header. The synchronous and the asynchronous loop both start here.

use std::time::Instant;

use repro_algos::rng::Rng;
use repro_algos::{LrSchedule, Schedule, Sgd, Topology};
use repro_runlog::{Header, Provenance, SCHEMA_VERSION, TrainConfig};
use tch::Device;
use tch::nn::{ModuleT, VarStore};
use thiserror::Error;

use crate::data::{Cifar10, FashionMnist, ImageSet, Partition, Transform, partition};
use crate::models::{ImageShape, ModelSpec};
use crate::transport::{Transport, TransportError};
use crate::{FlatParams, TrainerError};

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
    /// The asynchronous loop's compute thread ended by a panic (its message
    /// is on standard error): a bug, not a bad config.
    #[error("the compute thread panicked (its message is above): a bug in the trainer")]
    ComputeThread,
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

/// Checks the config against the launched world and builds a rank's
/// [`Setup`]: its core and device, the injected latency, the data and its
/// shard, the model, the schedule and the log's header, in that order.
pub(crate) fn setup<T: Transport>(cfg: &TrainConfig, t: &mut T) -> Result<Setup, TrainError> {
    let started = Instant::now();
    let (rank, n) = (t.rank(), t.size());
    if cfg.pin_cores {
        let cpu = crate::device::pin_to_core(rank)
            .map_err(|e| TrainError::Config(format!("pin_cores: {e}")))?;
        eprintln!("repro-train: rank {rank} pinned to CPU {cpu}");
    }
    check_world(cfg, t, n)?;
    let device = choose_device(cfg, t, rank)?;
    inject_latency(cfg, t)?;
    let data = load(cfg)?;
    let shard = shard(cfg, &data, n, rank)?;
    let (vs, model, flat) = build_model(cfg, device, data.shape)?;
    let mut x0 = vec![0f32; flat.len()];
    flat.gather(&mut x0)?;
    let topology = Topology::by_name(&cfg.topology, n)?;
    let schedule = schedule(cfg, shard.len())?;
    let sgd = Sgd {
        momentum: cfg.momentum,
        weight_decay: cfg.weight_decay,
    };
    // from here on the worker's computation is charged (virtual clocks)
    t.compute_on(device);
    let header = header(cfg, t, rank, n, device);
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

/// The config's worker count against the ranks the launcher started.
fn check_world<T: Transport>(cfg: &TrainConfig, t: &T, n: usize) -> Result<(), TrainError> {
    if cfg.workers == 0 || cfg.workers == n {
        return Ok(());
    }
    Err(TrainError::Config(if t.backend() == "mpi" {
        format!(
            "the config asks for {} workers but MPI started {n} ranks; pass `-np {}` to mpirun",
            cfg.workers, cfg.workers
        )
    } else {
        format!(
            "the config asks for {} workers but {n} were started; pass `--in-process {}`",
            cfg.workers, cfg.workers
        )
    }))
}

/// The device: a GPU (the worker's local rank modulo the GPUs) unless the
/// config pins the CPU or libtorch sees none; libtorch's threads set for it.
fn choose_device<T: Transport>(
    cfg: &TrainConfig,
    t: &T,
    rank: usize,
) -> Result<Device, TrainError> {
    let gpus = usize::try_from(tch::Cuda::device_count()).unwrap_or(0);
    let plan = crate::plan_device(t.local_rank(), gpus, cfg.device)
        .map_err(|e| TrainError::Config(format!("rank {rank}: {e}")))?;
    tch::set_num_threads(plan.threads);
    Ok(plan.device)
}

/// The transport's injected latency per message (`latency_ms`), checked.
fn inject_latency<T: Transport>(cfg: &TrainConfig, t: &mut T) -> Result<(), TrainError> {
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
    Ok(())
}

/// This rank's training images (indices into `data.train`), by the
/// config's partition.
fn shard(cfg: &TrainConfig, data: &Data, n: usize, rank: usize) -> Result<Vec<usize>, TrainError> {
    let how = match cfg.partition.as_str() {
        "iid" => Partition::Iid,
        "by-label" => Partition::ByLabel,
        "dirichlet" => Partition::Dirichlet {
            alpha: cfg.dirichlet_alpha,
        },
        other => return Err(TrainError::Config(format!("unknown partition `{other}`"))),
    };
    Ok(partition(&data.train.labels, n, how, cfg.seed)?.swap_remove(rank))
}

/// The model, seeded with the run seed so that every rank starts from the
/// same point, and its flat view.
fn build_model(
    cfg: &TrainConfig,
    device: Device,
    shape: ImageShape,
) -> Result<(VarStore, Box<dyn ModuleT>, FlatParams), TrainError> {
    // libtorch's generator is global: workers that are threads of one
    // process (the in-process transport) seed and build one at a time, so
    // every one starts from the same point
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = BUILD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    tch::manual_seed(cfg.seed as i64);
    let vs = VarStore::new(device);
    let model = ModelSpec::parse(&cfg.model)?.build(&vs.root(), shape);
    let flat = FlatParams::new(&vs)?;
    Ok((vs, model, flat))
}

/// The learning rate's schedule over the run's epochs of this shard.
fn schedule(cfg: &TrainConfig, shard_len: usize) -> Result<LrSchedule, TrainError> {
    Ok(LrSchedule {
        base: cfg.lr,
        warmup_epochs: cfg.warmup_epochs,
        schedule: Schedule::parse(
            &cfg.schedule,
            cfg.iterations as f64 * cfg.batch as f64 / shard_len as f64,
            &cfg.milestones,
            0.0,
            0.0,
            f64::from(cfg.weight_decay),
        )
        .map_err(TrainError::Config)?,
    })
}

/// The run log's header: the config and where the run ran.
fn header<T: Transport>(cfg: &TrainConfig, t: &T, rank: usize, n: usize, device: Device) -> Header {
    let network = if cfg.latency_ms > 0.0 && t.virtual_time().is_none() {
        format!(
            "{}; latency injected per message by the transport: {} ms",
            t.network(),
            cfg.latency_ms
        )
    } else {
        t.network()
    };
    Header {
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
                network,
            )
        },
    }
}
