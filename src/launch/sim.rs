//! Runs a planned run in the in-process simulator and writes its log.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use repro_algos::data::{self, Dataset, LinearModel, Loss, Split};
use repro_algos::{
    AlgorithmSpec, Consensus, Network, Objective, Quadratic, Sgd, SimConfig, Simulator, StepReport,
    Topology,
};
use repro_runlog::{
    End, Header, Invocation, Metrics, Provenance, Record, SCHEMA_VERSION, Status, Step, Theta,
    finite, write_record,
};

use crate::launch::summary::{RunStatus, Summary};
use crate::spec::plan::{Params, PlannedRun, SimParams};

fn topology(p: &SimParams) -> Result<Topology> {
    Ok(Topology::by_name(&p.topology, p.workers)?)
}

/// [`read_data`], parsed once per process: a grid's runs on one file (the
/// same path, size and modification time) share the parse, each run a
/// copy.
fn read_data_once(path: &Path, classification: bool) -> Result<Dataset> {
    static LAST: Last<(FileKey, bool), Dataset> = std::sync::Mutex::new(None);
    once(&LAST, (file_key(path)?, classification), || {
        read_data(path, classification)
    })
}

/// The xxh3 of a data file's bytes (f*'s cache key), read once per process
/// as [`read_data_once`] parses it once.
fn file_hash_once(path: &Path) -> Result<u64> {
    static LAST: Last<FileKey, u64> = std::sync::Mutex::new(None);
    once(&LAST, file_key(path)?, || {
        let bytes =
            std::fs::read(path).with_context(|| format!("could not read {}", path.display()))?;
        Ok(xxhash_rust::xxh3::xxh3_64(&bytes))
    })
}

/// A data file as the per-process caches know it: the same path, size and
/// modification time are the same bytes.
type FileKey = (std::path::PathBuf, u64, Option<std::time::SystemTime>);

fn file_key(path: &Path) -> Result<FileKey> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("could not open the data file {}", path.display()))?;
    Ok((path.to_path_buf(), meta.len(), meta.modified().ok()))
}

/// A per-process cache of the last value made, under its key.
type Last<K, V> = std::sync::Mutex<Option<(K, V)>>;

/// `last`'s value when its key is `key`, else `make()`, kept for next time.
fn once<K: PartialEq, V: Clone>(
    last: &Last<K, V>,
    key: K,
    make: impl FnOnce() -> Result<V>,
) -> Result<V> {
    let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, v)) = last.as_ref()
        && *k == key
    {
        return Ok(v.clone());
    }
    let v = make()?;
    *last = Some((key, v.clone()));
    Ok(v)
}

/// A LIBSVM file, plain or compressed (by its extension: `.gz`, `.bz2`);
/// for classification its two labels mapped onto -1 and +1.
fn read_data(path: &Path, classification: bool) -> Result<Dataset> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("could not open the data file {}", path.display()))?;
    let reader: Box<dyn std::io::Read> = match path.extension().and_then(|e| e.to_str()) {
        Some("gz") => Box::new(flate2::read::MultiGzDecoder::new(file)),
        Some("bz2") => Box::new(bzip2::read::MultiBzDecoder::new(file)),
        _ => Box::new(file),
    };
    let mut ds = Dataset::read_libsvm(std::io::BufReader::new(reader))
        .with_context(|| format!("{} is not a LIBSVM file", path.display()))?;
    if classification {
        ds.binary_labels()
            .with_context(|| format!("{}", path.display()))?;
    }
    Ok(ds)
}

/// `f*` of a data objective, computed by L-BFGS in f64 (to a gradient of
/// 1e-10, or as far as f64 resolves; more than 1e-6 is an error). For a
/// data file it is cached in `cache_dir` (the results' raw/: nothing is
/// written beside the data), `fstar-<key hash>.json`, under the hash of
/// the file's bytes, the objective and the regularizer, so a grid computes
/// it once; generated data is computed afresh. `None` for analytic
/// objectives.
fn optimum(p: &SimParams, objective: &dyn Objective, cache_dir: &Path) -> Result<Option<f64>> {
    if objective.samples().is_none() {
        return Ok(None);
    }
    let key = match &p.data {
        Some(path) => {
            let hash = file_hash_once(Path::new(path))?;
            let k = format!("{hash:016x}:{}:{}:{}", p.objective, p.weight_decay, p.split);
            let name = format!(
                "fstar-{:016x}.json",
                xxhash_rust::xxh3::xxh3_64(k.as_bytes())
            );
            Some((cache_dir.join(name), k))
        }
        None => None,
    };
    if let Some((cache, k)) = &key
        && let Ok(text) = std::fs::read_to_string(cache)
        && let Ok(json) = serde_json::from_str::<serde_json::Value>(&text)
        && json.get("key").and_then(|v| v.as_str()) == Some(k.as_str())
        && let Some(f) = json.get("fstar").and_then(serde_json::Value::as_f64)
    {
        return Ok(Some(f));
    }
    // generated data: the same set (its parameters and seed) is solved once
    // per process
    static SOLVED: std::sync::Mutex<std::collections::BTreeMap<String, f64>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let generated = key.is_none().then(|| {
        format!(
            "{}:{}:{}:{}:{}:{}",
            p.objective, p.samples, p.dim, p.noise, p.seed, p.weight_decay
        )
    });
    if let Some(g) = &generated
        && let Some(f) = SOLVED.lock().unwrap_or_else(|e| e.into_inner()).get(g)
    {
        return Ok(Some(*f));
    }
    let Some(m) = objective.optimum() else {
        return Ok(None);
    };
    // f(x_bar) - f* is then exact to about grad^2 / (2 lambda)
    if m.grad_inf > 1e-6 {
        bail!(
            "f* did not converge: gradient {:.3e} after {} L-BFGS iterations",
            m.grad_inf,
            m.iterations
        );
    }
    if let Some(g) = generated {
        SOLVED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(g, m.value);
    }
    if let Some((cache, k)) = &key {
        let json = serde_json::json!({
            "key": k,
            "fstar": m.value,
            "grad_inf": m.grad_inf,
            "iterations": m.iterations,
            "method": "L-BFGS (10 pairs) in f64, Armijo backtracking",
        });
        // a cache that cannot be written is computed again next time
        let _ = crate::util::atomic::write(cache, serde_json::to_string_pretty(&json)? + "\n");
    }
    Ok(Some(m.value))
}

/// Worker `i`'s start: zeros or Gaussian coordinates every worker shares
/// (`zero`, `gaussian`), or Gaussian coordinates of its own
/// (`gaussian-each`, stream `i + 1` of `x0_seed`).
fn start(p: &SimParams, dim: usize, i: usize) -> Vec<f32> {
    let gaussian = |stream: u64| {
        let mut rng = repro_algos::rng::Rng::new(p.x0_seed, stream);
        (0..dim)
            .map(|_| (rng.normal() * p.x0_scale) as f32)
            .collect()
    };
    match p.x0.as_str() {
        "gaussian" => gaussian(0x5eed),
        "gaussian-each" => gaussian(0x5eed + 1 + i as u64),
        _ => vec![0.0; dim],
    }
}

fn objective(p: &SimParams) -> Result<Box<dyn Objective>> {
    let n = p.workers;
    Ok(match p.objective.as_str() {
        "theorem1" => Box::new(Quadratic::homogeneous(
            n,
            vec![p.knobs.grid_step as f32 / 2.0; p.dim],
            p.noise,
        )),
        "quadratic" => {
            // worker i's target depends on (7 i + 3 j) mod 11, so on i mod
            // 11 only: at most 11 distinct targets, each stored once
            // and coordinate j on j mod 11: one period, tiled
            let targets = (0..n.min(11))
                .map(|t| {
                    let period: Vec<f32> = (0..11)
                        .map(|j| {
                            p.heterogeneity * (2.0 * ((t * 7 + j * 3) % 11) as f32 / 10.0 - 1.0)
                        })
                        .collect();
                    tile(&period, p.dim)
                })
                .collect();
            Box::new(Quadratic::shared(
                targets,
                (0..n).map(|i| i % 11).collect(),
                p.noise,
            ))
        }
        "logistic" | "least-squares" => {
            let classification = p.objective == "logistic";
            let ds = match &p.data {
                Some(path) => read_data_once(Path::new(path), classification)?,
                None => Dataset::generate(p.samples, p.dim, p.noise, classification, p.seed),
            };
            let split = match p.split.as_str() {
                "iid" => Split::Iid,
                "by-label" => Split::SortedByLabel,
                "file-order" => Split::FileOrder,
                other => bail!(
                    "unknown split `{other}`; use one of {}",
                    crate::spec::plan::SPLITS.join(", ")
                ),
            };
            let shards = data::split(&ds, n, split, p.seed)?;
            let loss = if classification {
                Loss::Logistic
            } else {
                Loss::Squares
            };
            Box::new(LinearModel::new(ds, shards, loss, p.batch, p.weight_decay))
        }
        other => bail!(
            "unknown objective `{other}`; use one of {}",
            crate::spec::plan::OBJECTIVES.join(", ")
        ),
    })
}

/// `len` values repeating `period` (not empty): `period[j % period.len()]`
/// at `j`, copied in doubling runs.
fn tile(period: &[f32], len: usize) -> Vec<f32> {
    let mut v = repro_algos::flat::with_huge_pages(len);
    v.extend(period.iter().take(len));
    while v.len() < len {
        let more = v.len().min(len - v.len());
        v.extend_from_within(..more);
    }
    v
}

/// The threads a run's simulator uses (`threads`: 0 is every core).
fn threads(p: &SimParams) -> usize {
    match p.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// What run `p` will hold in memory, by part, known before anything is
/// built: the plan refuses a run that does not fit. The objective's part
/// counts the quadratics' targets (at most 11 distinct, see [`objective`])
/// and their means, and generated data; a data file's set is not counted.
pub(crate) fn footprint(p: &SimParams) -> Result<repro_algos::Footprint> {
    let topology = topology(p)?;
    let degree = (0..p.workers)
        .map(|i| topology.neighbours(i).len())
        .max()
        .unwrap_or(0);
    // sizes saturate: a plan that would overflow needs more than any
    // machine has, and is refused as such
    let vector = 4u64.saturating_mul(p.dim as u64);
    let objective = match p.objective.as_str() {
        // the distinct targets, the mean in f32 and in f64
        "quadratic" => (p.workers.min(11) as u64 + 3).saturating_mul(vector),
        "theorem1" => 4u64.saturating_mul(vector),
        _ => match &p.data {
            // dense generated samples: an index and a value per coordinate,
            // a row pointer, a label and a shard index per sample
            None => (p.samples as u64)
                .saturating_mul(8u64.saturating_mul(p.dim as u64).saturating_add(20)),
            Some(path) => data_footprint(Path::new(path)),
        },
    };
    Ok(algorithm(p)?.footprint(&repro_algos::Shape {
        workers: p.workers,
        dim: p.dim,
        degree,
        threads: threads(p).min(p.workers.max(1)),
        momentum: p.momentum > 0.0,
        separable: matches!(p.objective.as_str(), "quadratic" | "theorem1"),
        objective,
    }))
}

/// The memory a LIBSVM file's set takes once read: at most twice its text
/// (a nonzero is at least 4 characters of text, `i:v `, and 8 bytes read).
/// The text's size is the file's; a gzip file's from its trailer (the size
/// modulo 4 GiB); a bzip2 file's is taken as 8 times the file. A file that
/// is not there yet (generated before the run) counts 0.
fn data_footprint(path: &Path) -> u64 {
    let Ok(meta) = std::fs::metadata(path) else {
        return 0;
    };
    let text = match path.extension().and_then(|e| e.to_str()) {
        Some("gz") => {
            use std::io::{Read, Seek, SeekFrom};
            let mut trailer = [0u8; 4];
            std::fs::File::open(path)
                .and_then(|mut f| {
                    f.seek(SeekFrom::End(-4))?;
                    f.read_exact(&mut trailer)
                })
                .map_or(meta.len().saturating_mul(8), |()| {
                    u64::from(u32::from_le_bytes(trailer)).max(meta.len())
                })
        }
        Some("bz2") => meta.len().saturating_mul(8),
        _ => meta.len(),
    };
    text.saturating_mul(2)
}

/// Runs measured for their peak memory at once in this process: a peak is
/// a run's own only when no other started or ran while it did.
static IN_FLIGHT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static STARTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A run's peak resident memory, measured from its start.
struct PeakMeter {
    /// The process's resident memory at the start; `None` where the peak
    /// could not be reset.
    base: Option<u64>,
    alone: bool,
    generation: u64,
}

impl PeakMeter {
    fn start() -> Self {
        use std::sync::atomic::Ordering::SeqCst;
        let alone = IN_FLIGHT.fetch_add(1, SeqCst) == 0;
        let generation = STARTED.fetch_add(1, SeqCst) + 1;
        // what earlier runs freed goes back to the kernel first, so the
        // base is this process's live memory and the run's peak its own;
        // and buffers of 1 MiB or more are mapped and unmapped whole
        // (glibc otherwise raises that threshold to the largest buffer
        // freed, and a run's models then stay resident after it, in heaps
        // the next run inherits)
        #[cfg(target_env = "gnu")]
        #[allow(unsafe_code)]
        // SAFETY: mallopt and malloc_trim change how the allocator gets and
        // returns pages, never what an allocation holds
        unsafe {
            static FIXED: std::sync::Once = std::sync::Once::new();
            FIXED.call_once(|| {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
            });
            libc::malloc_trim(0);
        }
        let base = repro_runlog::reset_peak_rss()
            .then(|| repro_runlog::resident_bytes("VmRSS"))
            .flatten();
        Self {
            base,
            alone,
            generation,
        }
    }

    /// The process's peak since the start, when this run was the only one
    /// running all along.
    fn peak(&self) -> Option<u64> {
        let alone =
            self.alone && STARTED.load(std::sync::atomic::Ordering::SeqCst) == self.generation;
        self.base.filter(|_| alone)?;
        repro_runlog::resident_bytes("VmHWM")
    }
}

impl Drop for PeakMeter {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn algorithm(p: &SimParams) -> Result<AlgorithmSpec> {
    Ok(AlgorithmSpec::from_name(&p.algorithm, &p.knobs)?)
}

/// The virtual clock's network: the run's condition (its `network` key).
fn network(run: &PlannedRun) -> Option<Network> {
    run.network.as_ref().map(|c| Network {
        bandwidth_bps: c.bandwidth_bps.unwrap_or(f64::INFINITY),
        latency_s: c.latency_s,
    })
}

/// Runs `run`, writing its JSON-lines log to `log_path`. The log is written
/// beside it under a temporary name and renamed into place when the run
/// ends, failed runs included; a run stopped by Ctrl-C / SIGTERM (or a
/// killed driver) leaves an earlier run's log as it was.
pub(crate) fn execute(
    run: &PlannedRun,
    experiment: &str,
    invocation: &Invocation,
    log_path: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<Summary> {
    let started = Instant::now();
    if let Some(dir) = log_path.parent() {
        crate::util::atomic::create_dir_all(dir)?;
    }
    let tmp = crate::util::atomic::temp_name(log_path);
    let ran = simulate(run, experiment, invocation, &tmp, progress);
    if ran.is_err() && crate::util::signals::interrupted() {
        let _ = crate::util::sudo::as_invoker(|| std::fs::remove_file(&tmp));
    } else if ran.is_err() && tmp.exists() && log_path.exists() {
        // a failure never replaces an earlier run's log: this attempt's
        // goes beside it
        let raw = log_path.parent().unwrap_or(Path::new("."));
        let aside = crate::util::atomic::attempt_path(raw, &run.id, "jsonl");
        if let Some(parent) = aside.parent() {
            crate::util::atomic::create_dir_all(parent)?;
        }
        crate::util::atomic::finish(&tmp, &aside, Ok(()))?;
    } else if tmp.exists() {
        crate::util::atomic::finish(&tmp, log_path, Ok(()))?;
    }
    let p = ran?;
    // every number of the summary comes from the log, read back
    let text = std::fs::read_to_string(log_path)
        .with_context(|| format!("could not read back {}", log_path.display()))?;
    let written = repro_runlog::read_log(text.as_bytes())
        .with_context(|| format!("{} is unreadable", log_path.display()))?;
    Ok(summarize(
        &written,
        p.workers,
        p.dim,
        started.elapsed().as_secs_f64(),
        if run.network.is_some() {
            "sim (virtual clock)".into()
        } else {
            "none".into()
        },
    ))
}

/// Simulates `run`, writing its whole log to `log_path`.
fn simulate<'r>(
    run: &'r PlannedRun,
    experiment: &str,
    invocation: &Invocation,
    log_path: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<&'r SimParams> {
    let Params::Sim(p) = &run.params else {
        bail!("run {} is not a simulator run", run.id);
    };
    // before the clock starts: returning what earlier runs freed is not
    // this run's set-up
    let meter = PeakMeter::start();
    let began = Instant::now();
    let memory = footprint(p)?;
    let objective = objective(p)?;
    let dir = log_path.parent().unwrap_or(Path::new("."));
    let fstar = optimum(p, objective.as_ref(), dir)?;
    let cfg = sim_config(p, network(run));
    let header = header(run, experiment, invocation, p, &cfg);
    let mut sim = simulator(p, objective.as_ref(), cfg)?;
    let mut log = create_log(log_path)?;
    write_record(&mut log, &Record::Header(header))?;
    // an epoch: a worker's pass over its shard (data), else an iteration
    let per_epoch = objective.samples().map_or(1.0, |n| {
        (n as f64 / p.workers as f64 / p.batch.max(1) as f64).max(1e-12)
    });
    let schedule = lr_schedule(p, per_epoch)?;
    sim.set_threads(threads(p))?;
    let initial_loss = objective.loss_f64(&sim.average_model());
    let setup_s = began.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut steps = iterate(&mut sim, p, &schedule, per_epoch, fstar, &mut log, progress)
        .map_err(|e| e.context(format!("run {} failed", run.id)))?;
    let iterations_s = started.elapsed().as_secs_f64() - steps.metrics_s;
    let summing = Instant::now();
    let (outcome, final_loss) = outcome(&sim, p, &mut steps, objective.as_ref(), fstar, &memory);
    let summary_s = summing.elapsed().as_secs_f64();
    let metrics = Metrics {
        initial_loss: finite(initial_loss),
        setup_s: Some(setup_s),
        iterations_s: Some(iterations_s),
        metrics_s: Some(steps.metrics_s + summary_s),
        summary_s: Some(summary_s),
        stream_s: Some(stream_median(&sim)),
        base_rss_bytes: meter.base,
        ..outcome
    };
    write_record(
        &mut log,
        &Record::End(End {
            status: steps.status.after_final([final_loss], p.iterations),
            wall_s: sim.clock(),
            iterations: p.iterations,
            transport_bytes_sent: None,
            // what the algorithms say they hold, per worker (the mean)
            extra_memory_bytes: Some(mean_extra_memory(&sim)),
            peak_rss_bytes: meter.peak(),
            real_s: None,
            theta: steps.theta,
            metrics: Some(metrics),
        }),
    )?;
    log.flush()?;
    Ok(p)
}

/// The run's outcome at the end of its iterations: the final metrics of
/// the averaged model, the workers and the wire, with the planned memory,
/// and the final loss.
fn outcome(
    sim: &Simulator<'_>,
    p: &SimParams,
    steps: &mut Steps,
    objective: &dyn Objective,
    fstar: Option<f64>,
    memory: &repro_algos::Footprint,
) -> (Metrics, f64) {
    let (avg, consensus) = steps.averaged(sim);
    let final_loss = objective.loss(&avg);
    let subopt = fstar.map(|f| objective.loss_f64(&avg) - f);
    let local_loss = sim.worker_losses().iter().sum::<f64>() / p.workers as f64;
    let metrics = Metrics {
        final_loss: finite(final_loss),
        local_loss: finite(local_loss),
        grad_norm_sq: steps.grad_norm_sq.and_then(finite),
        exchanges: Some(steps.exchanges),
        consensus: finite(consensus.distance),
        max_deviation: finite(consensus.max_deviation),
        bytes_sent: sim.total_bytes(),
        hash_failures: steps.hash_failures,
        hash_verified: steps.hash_verified,
        recovery_over_bound: steps.recovery.map(|r| r.0),
        wrap_rate: steps.recovery.map(|r| r.1 as f64 / r.2.max(1) as f64),
        subopt: subopt.and_then(finite),
        ..planned(memory)
    };
    (metrics, final_loss)
}

/// A run log's file, buffered.
fn create_log(path: &Path) -> Result<std::io::BufWriter<std::fs::File>> {
    Ok(std::io::BufWriter::new(crate::util::atomic::create_new(
        path,
    )?))
}

/// The run's simulator: its workers on its topology, each from its start.
fn simulator<'o>(
    p: &SimParams,
    objective: &'o dyn Objective,
    cfg: SimConfig,
) -> Result<Simulator<'o>> {
    let spec = algorithm(p)?;
    let dim = objective.dim();
    let shared = (p.x0 != "gaussian-each").then(|| start(p, dim, 0));
    Ok(Simulator::with_starts(
        objective,
        topology(p)?,
        &spec,
        cfg,
        &|i| match &shared {
            Some(x0) => Cow::Borrowed(x0.as_slice()),
            None => Cow::Owned(start(p, dim, i)),
        },
    )?)
}

/// The plan's memory, as a run's end metrics record it.
fn planned(memory: &repro_algos::Footprint) -> Metrics {
    Metrics {
        memory_bytes: Some(memory.total()),
        model_bytes: Some(memory.model),
        state_bytes: Some(memory.state),
        frames_bytes: Some(memory.frames),
        optimizer_bytes: Some(memory.optimizer),
        shared_bytes: Some(memory.objective + memory.threads * memory.scratch),
        ..Metrics::default()
    }
}

/// What the algorithms say they hold beyond the model, bytes per worker
/// (the mean).
fn mean_extra_memory(sim: &Simulator<'_>) -> u64 {
    let extra = sim.extra_memory();
    extra.iter().sum::<usize>() as u64 / extra.len().max(1) as u64
}

/// The learning rate along the run (`per_epoch`: iterations per epoch).
fn lr_schedule(p: &SimParams, per_epoch: f64) -> Result<repro_algos::LrSchedule> {
    Ok(repro_algos::LrSchedule {
        base: f64::from(p.lr),
        warmup_epochs: p.warmup_epochs,
        schedule: repro_algos::Schedule::parse(
            &p.schedule,
            p.iterations as f64 / per_epoch,
            &p.milestones,
            p.decay_a,
            p.decay_tau,
            f64::from(p.weight_decay),
        )
        .map_err(anyhow::Error::msg)?,
    })
}

/// Seconds to read every worker's model once: the median of three reads,
/// after the metrics.
fn stream_median(sim: &Simulator<'_>) -> f64 {
    let mut t: Vec<f64> = (0..3).map(|_| sim.stream_time()).collect();
    t.sort_by(f64::total_cmp);
    t[1]
}

/// The simulator's configuration for the run's parameters.
fn sim_config(p: &SimParams, network: Option<Network>) -> SimConfig {
    SimConfig {
        seed: p.seed,
        lr: p.lr,
        sgd: Sgd {
            momentum: p.momentum,
            weight_decay: if p.objective == "logistic" || p.objective == "least-squares" {
                0.0 // applied by the objective
            } else {
                p.weight_decay
            },
        },
        compute_s: p.compute_ms * 1e-3,
        network,
        theta_warmup: (p.knobs.theta == Theta::Auto).then_some(p.knobs.theta_warmup),
        ..SimConfig::default()
    }
}

/// The log's header: the run, its parameters and where it ran.
fn header(
    run: &PlannedRun,
    experiment: &str,
    invocation: &Invocation,
    p: &SimParams,
    cfg: &SimConfig,
) -> Header {
    let network = match cfg.network {
        Some(n) => format!(
            "virtual clock: {} bit/s, {} s latency per message",
            n.bandwidth_bps, n.latency_s
        ),
        None => "virtual clock: communication free".into(),
    };
    Header {
        schema: SCHEMA_VERSION,
        run_id: run.id.clone(),
        rank: 0,
        world: p.workers as u32,
        config: serde_json::json!({ "experiment": experiment, "params": p }),
        provenance: Provenance {
            command: Some(invocation.command.clone()),
            manifest_hash: Some(invocation.manifest_hash.clone()),
            ..repro_build::BUILD.provenance("cpu", "sim", network)
        },
    }
}

/// What the iterations left: how they ended, the workers' mean squared
/// gradient norm over the last fifth, and the hash mismatches.
struct Steps {
    status: Status,
    grad_norm_sq: Option<f64>,
    hash_failures: u64,
    hash_verified: u64,
    /// `measure_recovery`: the largest error over the bound, coordinates
    /// beyond it, coordinates checked.
    recovery: Option<(f64, u64, u64)>,
    /// Host seconds spent computing metrics between iterations.
    metrics_s: f64,
    /// Iterations in which frames went on the wire.
    exchanges: u64,
    /// The evaluation after the last iteration: the averaged model and
    /// the consensus distance, which the summary reuses.
    last_eval: Option<(Vec<f32>, Consensus)>,
    /// Moniqua's theta after the last iteration (what `theta: auto` picked).
    theta: Option<f64>,
    /// The tail's sum of the mean worker's squared gradient norm, and
    /// the iterations summed.
    grad_acc: f64,
    grad_count: u64,
    /// The mean worker's bytes up to the last step record.
    logged_bytes: u64,
}

impl Steps {
    fn new() -> Self {
        Steps {
            status: Status::Completed,
            grad_norm_sq: None,
            hash_failures: 0,
            hash_verified: 0,
            recovery: None,
            metrics_s: 0.0,
            exchanges: 0,
            last_eval: None,
            theta: None,
            grad_acc: 0.0,
            grad_count: 0,
            logged_bytes: 0,
        }
    }

    /// Lemma 2 on the frames iteration `k` sends, on the iterations that
    /// log (`measure_recovery`).
    fn measure_recovery(&mut self, sim: &Simulator<'_>, p: &SimParams, k: u64) -> Result<()> {
        let measuring = Instant::now();
        if p.measure_recovery
            && logs(p, k)
            && let Some(r) = sim.recovery().map_err(anyhow::Error::new)?
        {
            self.add_recovery(&r);
        }
        self.metrics_s += measuring.elapsed().as_secs_f64();
        Ok(())
    }

    /// Counts what a step reported.
    fn count(&mut self, r: &StepReport) {
        self.hash_failures += r.mismatched;
        self.hash_verified += r.verified;
        self.theta = r.theta;
    }

    /// Adds the mean worker's squared gradient norm after iteration `k`
    /// when it is in the tail (the last fifth). A full gradient of a data
    /// objective is a pass over every sample: every iteration of the tail
    /// would cost iterations x workers x samples x dim (minutes per run at
    /// the convex cpu scale), so a data objective adds the last one only.
    fn add_tail_gradient(&mut self, sim: &Simulator<'_>, p: &SimParams, k: u64) {
        let tail_start = p.iterations - p.iterations / 5;
        let data_objective = sim.objective().samples().is_some();
        if k >= tail_start && (!data_objective || k + 1 == p.iterations) {
            self.grad_acc += sim.grad_norms_sq().iter().sum::<f64>() / p.workers as f64;
            self.grad_count += 1;
        }
    }

    /// The mean worker's bytes since the previous step record, so that the
    /// records add up to what each worker sent, as a rank's do.
    fn bytes_since_record(&mut self, sim: &Simulator<'_>, p: &SimParams) -> u64 {
        let through = (sim.total_bytes() as f64 / p.workers.max(1) as f64).round() as u64;
        let bytes = through - self.logged_bytes;
        self.logged_bytes = through;
        bytes
    }

    /// The averaged model and the consensus distance at the end: the last
    /// evaluation's, which already averaged the models, else computed.
    fn averaged(&mut self, sim: &Simulator<'_>) -> (Vec<f32>, Consensus) {
        self.last_eval.take().unwrap_or_else(|| {
            let avg = sim.average_model();
            let consensus = sim.consensus_to(&avg);
            (avg, consensus)
        })
    }

    /// Adds one iteration's check of Lemma 2.
    fn add_recovery(&mut self, r: &repro_algos::Recovery) {
        let (over, beyond, checked) = self.recovery.unwrap_or((0.0, 0, 0));
        let ratio = if r.bound > 0.0 {
            r.max_error / r.bound
        } else {
            0.0
        };
        self.recovery = Some((
            over.max(ratio),
            beyond + r.beyond_bound,
            checked + r.coordinates,
        ));
    }
}

/// The step record of iteration `k` (`bytes`: the mean worker's since the
/// previous record).
fn step_record(k: u64, epoch: f64, r: &StepReport, p: &SimParams, bytes: u64) -> Step {
    Step {
        iteration: k,
        epoch,
        wall_s: r.time_s,
        compute_s: p.compute_ms * 1e-3,
        comm_s: 0.0,
        train_loss: r.train_loss,
        bytes_sent: bytes,
        bytes_received: bytes,
        hash_failures: r.mismatched,
        hash_verified: r.verified,
        phases: None,
    }
}

/// The evaluation after `done` iterations: its record, the averaged model
/// and the consensus distance.
fn evaluate(
    sim: &Simulator<'_>,
    done: u64,
    per_epoch: f64,
    fstar: Option<f64>,
) -> (repro_runlog::Eval, Vec<f32>, Consensus) {
    let avg = sim.average_model();
    let consensus = sim.consensus_to(&avg);
    let objective = sim.objective().loss_f64(&avg);
    let eval = repro_runlog::Eval {
        iteration: done,
        epoch: done as f64 / per_epoch,
        wall_s: sim.clock(),
        test_loss: None,
        test_accuracy: None,
        avg_test_loss: None,
        avg_test_accuracy: None,
        consensus_distance: finite(consensus.distance),
        max_deviation: finite(consensus.max_deviation),
        model_norm: None,
        recovered: None,
        wrapped: None,
        val_loss: None,
        val_accuracy: None,
        objective: finite(objective),
        subopt: fstar.and_then(|f| finite(objective - f)),
    };
    (eval, avg, consensus)
}

/// Whether iteration `k` writes a step record: every `log_every`, and the last.
fn logs(p: &SimParams, k: u64) -> bool {
    k.is_multiple_of(p.log_every.max(1)) || k + 1 == p.iterations
}

/// Runs the iterations, logging a step record every `log_every` and
/// reporting the iterations done to `progress` (at most ten times a
/// second, and at the end); stops at the first divergence.
fn iterate(
    sim: &mut Simulator<'_>,
    p: &SimParams,
    schedule: &repro_algos::LrSchedule,
    per_epoch: f64,
    fstar: Option<f64>,
    log: &mut impl Write,
    progress: &mut dyn FnMut(u64),
) -> Result<Steps> {
    let mut reported = Instant::now();
    // iterations between evaluations (none: at the end only)
    let eval_gap = (p.eval_every > 0.0).then(|| (p.eval_every * per_epoch).round().max(1.0) as u64);
    let mut out = Steps::new();
    for k in 0..p.iterations {
        // Ctrl-C and SIGTERM stop a run between iterations
        if crate::util::signals::interrupted() {
            bail!("run interrupted at iteration {k}");
        }
        let epoch = k as f64 / per_epoch;
        sim.set_lr(schedule.at(epoch, k) as f32);
        out.measure_recovery(sim, p, k)?;
        let sent_before = sim.total_bytes();
        let step = repro_algos::unless_diverged(sim.step()).map_err(anyhow::Error::new)?;
        out.exchanges += u64::from(sim.total_bytes() > sent_before);
        let Some(r) = step else {
            out.status = Status::Diverged { iteration: k };
            break;
        };
        out.count(&r);
        if !r.train_loss.is_finite() {
            out.status = Status::Diverged { iteration: k };
            break;
        }
        let measuring = Instant::now();
        out.add_tail_gradient(sim, p, k);
        if logs(p, k) {
            let bytes = out.bytes_since_record(sim, p);
            write_record(
                &mut *log,
                &Record::Step(step_record(k, epoch, &r, p, bytes)),
            )?;
        }
        let done = k + 1;
        if eval_gap.is_some_and(|g| done % g == 0) || done == p.iterations {
            let (eval, avg, consensus) = evaluate(sim, done, per_epoch, fstar);
            write_record(&mut *log, &Record::Eval(eval))?;
            if done == p.iterations {
                out.last_eval = Some((avg, consensus));
            }
        }
        out.metrics_s += measuring.elapsed().as_secs_f64();
        if done == p.iterations || reported.elapsed().as_secs_f64() >= 0.1 {
            progress(done);
            reported = Instant::now();
        }
    }
    out.grad_norm_sq = (out.grad_count > 0).then(|| out.grad_acc / out.grad_count as f64);
    Ok(out)
}

/// A simulator run's summary from its log (`wall_s`: seconds it took on
/// this host). A log without final metrics (a run cut short) has none.
pub(crate) fn summarize(
    log: &repro_runlog::Log,
    workers: usize,
    dim: usize,
    wall_s: f64,
    shaping: String,
) -> Summary {
    let end = log.end.as_ref();
    let m = end.and_then(|e| e.metrics.clone()).unwrap_or_default();
    // iterations run: a diverged run stopped after its last
    let ran = end.map(|e| match e.status {
        Status::Diverged { iteration } => iteration + 1,
        _ => e.iterations,
    });
    Summary {
        // (the simulator records a non-finite final loss as diverged)
        status: RunStatus::of_logs([log]),
        final_loss: m.final_loss,
        local_loss: m.local_loss,
        grad_norm_sq: m.grad_norm_sq,
        consensus: m.consensus,
        max_deviation: m.max_deviation,
        first_loss: m.initial_loss,
        exchange_share: m
            .exchanges
            .zip(ran)
            .map(|(e, k)| e as f64 / k.max(1) as f64),
        bytes: m.bytes_sent,
        virtual_s: end.and_then(|e| finite(e.wall_s)),
        hash_failures: m.hash_failures,
        hash_verified: m.hash_verified,
        recovery_over_bound: m.recovery_over_bound,
        wrap_rate: m.wrap_rate,
        subopt: m.subopt,
        counted_bytes_per_worker: Some(m.bytes_sent as f64 / workers.max(1) as f64),
        // the simulator sends nothing but the algorithm's frames
        gossip_bytes_per_worker: Some(m.bytes_sent as f64 / workers.max(1) as f64),
        wall_s,
        setup_s: m.setup_s,
        metrics_s: m.metrics_s,
        summary_s: m.summary_s,
        iteration_s: m
            .iterations_s
            .zip(ran)
            .filter(|(_, k)| *k > 0)
            .map(|(s, k)| s / k as f64),
        stream_s: m.stream_s,
        memory_mb: m.memory_bytes.map(|b| b as f64 / 1e6),
        base_rss_mb: m.base_rss_bytes.map(|b| b as f64 / 1e6),
        model_mb: m.model_bytes.map(|b| b as f64 / 1e6),
        state_mb: m.state_bytes.map(|b| b as f64 / 1e6),
        frames_mb: m.frames_bytes.map(|b| b as f64 / 1e6),
        optimizer_mb: m.optimizer_bytes.map(|b| b as f64 / 1e6),
        shared_mb: m.shared_bytes.map(|b| b as f64 / 1e6),
        workers: Some(workers),
        coordinates: Some(workers as f64 * dim as f64),
        extra_memory_mb: end
            .and_then(|e| e.extra_memory_bytes)
            .map(|b| b as f64 / 1e6),
        peak_rss_mb: end.and_then(|e| e.peak_rss_bytes).map(|b| b as f64 / 1e6),
        theta: end.and_then(|e| e.theta),
        shaping,
        provenance: Some(log.header.provenance.clone()),
        ..Summary::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(algorithm: &str, lr: f32) -> PlannedRun {
        PlannedRun {
            id: "t".into(),
            point: Default::default(),
            params: Params::Sim(SimParams {
                algorithm: algorithm.into(),
                workers: 4,
                dim: 20,
                iterations: 30,
                lr,
                ..SimParams::default()
            }),
            network: None,
        }
    }

    /// The theta a run ends with reaches its summary (runs.csv's `theta_used`):
    /// the one given, or the one `theta: auto` picked after its warm-up.
    #[test]
    fn the_theta_a_run_used_is_recorded() {
        let dir = std::env::temp_dir().join(format!("repro-sim-theta-{}", std::process::id()));
        let given = execute(
            &planned("moniqua", 0.05),
            "x",
            &Invocation::default(),
            &dir.join("given.jsonl"),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(given.theta, Some(2.0));
        let mut auto = planned("moniqua", 0.05);
        if let Params::Sim(p) = &mut auto.params {
            p.knobs.theta = repro_algos::Theta::Auto;
            p.knobs.theta_warmup = 5;
        }
        let picked = execute(
            &auto,
            "x",
            &Invocation::default(),
            &dir.join("auto.jsonl"),
            &mut |_| {},
        )
        .unwrap();
        assert!(
            picked.theta.is_some_and(|t| t > 0.0 && t != 2.0),
            "{:?}",
            picked.theta
        );
        let dpsgd = execute(
            &planned("d-psgd", 0.05),
            "x",
            &Invocation::default(),
            &dir.join("dpsgd.jsonl"),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(dpsgd.theta, None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn gaussian_each_starts_every_worker_apart_and_theorem1_takes_noise() {
        let p = SimParams {
            workers: 3,
            dim: 50,
            x0: "gaussian-each".into(),
            x0_scale: 0.5,
            ..SimParams::default()
        };
        let starts: Vec<Vec<f32>> = (0..3).map(|i| start(&p, 50, i)).collect();
        assert_ne!(starts[0], starts[1]);
        assert_ne!(starts[1], starts[2]);
        // drawn from x0_seed: the same again
        assert_eq!(starts[2], start(&p, 50, 2));
        let shared = SimParams {
            x0: "gaussian".into(),
            ..p.clone()
        };
        assert_eq!(start(&shared, 50, 0), start(&shared, 50, 2));
        // the simulator builds each worker from its own start
        let quadratic = objective(&p).unwrap();
        let sim = Simulator::with_starts(
            quadratic.as_ref(),
            topology(&p).unwrap(),
            &algorithm(&p).unwrap(),
            sim_config(&p, None),
            &|i| Cow::Owned(start(&p, 50, i)),
        )
        .unwrap();
        for (i, s) in starts.iter().enumerate() {
            assert_eq!(sim.model(i), s.as_slice(), "worker {i}");
        }
        // theorem1's gradients carry the run's noise: two draws differ,
        // and without noise they do not
        let gradient = |noise: f32, draw: u64| {
            let q = SimParams {
                objective: "theorem1".into(),
                noise,
                ..p.clone()
            };
            let o = objective(&q).unwrap();
            let mut g = vec![0.0f32; 50];
            o.gradient(
                0,
                &starts[0],
                &mut repro_algos::rng::Rng::new(1, draw),
                &mut g,
            );
            g
        };
        assert_eq!(gradient(0.0, 1), gradient(0.0, 2));
        assert_ne!(gradient(0.1, 1), gradient(0.1, 2));
    }

    #[test]
    fn tiling_repeats_the_period_at_every_length() {
        let period = [1.0, 2.0, 3.0];
        for len in [0, 1, 2, 3, 4, 6, 7, 23, 100] {
            let v = tile(&period, len);
            let want: Vec<f32> = (0..len).map(|j| period[j % 3]).collect();
            assert_eq!(v, want, "length {len}");
        }
    }

    /// The summary's numbers are the ones the log's end record carries:
    /// change the log and the summary follows.
    #[test]
    fn a_summary_is_read_from_the_log() {
        let dir = std::env::temp_dir().join(format!("repro-sim-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.jsonl");
        let mut reported = Vec::new();
        let run = planned("moniqua", 0.05);
        let s = execute(&run, "x", &Invocation::default(), &path, &mut |k| {
            reported.push(k)
        })
        .unwrap();
        // the progress bar follows the iterations, and ends at the last
        let Params::Sim(p) = &run.params else {
            unreachable!()
        };
        assert_eq!(reported.last(), Some(&p.iterations), "{reported:?}");
        assert!(reported.windows(2).all(|w| w[0] < w[1]), "{reported:?}");
        let text = std::fs::read_to_string(&path).unwrap();
        let log = repro_runlog::read_log(text.as_bytes()).unwrap();
        let m = log.end.as_ref().unwrap().metrics.clone().unwrap();
        assert_eq!(s.status, RunStatus::Completed);
        assert_eq!(s.final_loss, m.final_loss);
        assert_eq!(s.consensus, m.consensus);
        assert_eq!(s.bytes, m.bytes_sent);
        assert!(m.bytes_sent > 0);
        // the run's host time, split: iterations and metrics, both
        // measured, together within the run's wall time
        let (setup_s, iterations_s, metrics_s) = (
            m.setup_s.unwrap(),
            m.iterations_s.unwrap(),
            m.metrics_s.unwrap(),
        );
        assert!(setup_s > 0.0 && iterations_s > 0.0 && metrics_s > 0.0);
        assert!(
            setup_s + iterations_s + metrics_s <= s.wall_s,
            "{m:?} {}",
            s.wall_s
        );
        assert_eq!((s.setup_s, s.metrics_s), (m.setup_s, m.metrics_s));
        let mut edited = log.clone();
        if let Some(e) = edited.end.as_mut() {
            e.metrics.as_mut().unwrap().final_loss = Some(42.0);
        }
        assert_eq!(
            summarize(&edited, 4, 20, 0.0, "none".into()).final_loss,
            Some(42.0)
        );
        // a diverged run: no final loss, status diverged
        let s = execute(
            &planned("d-psgd", 1e6),
            "x",
            &Invocation::default(),
            &path,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(s.status, RunStatus::Diverged);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `threads` sizes the simulator's pool and changes no number.
    #[test]
    fn the_thread_count_changes_no_number() {
        let dir = std::env::temp_dir().join(format!("repro-sim-threads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut two = planned("moniqua", 0.05);
        if let Params::Sim(p) = &mut two.params {
            p.threads = 2;
        }
        let run = |r: &PlannedRun, name: &str| {
            let s = execute(r, "x", &Invocation::default(), &dir.join(name), &mut |_| {}).unwrap();
            (
                s.status,
                s.final_loss,
                s.local_loss,
                s.grad_norm_sq,
                s.consensus,
                s.bytes,
            )
        };
        assert_eq!(
            run(&planned("moniqua", 0.05), "a.jsonl"),
            run(&two, "b.jsonl")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A `network` condition reaches the virtual clock typed: the same
    /// run is slower on a 1 Mbit/s, 5 ms network than on none, and its
    /// id differs.
    #[test]
    fn a_network_condition_slows_the_virtual_clock() {
        let dir = std::env::temp_dir().join(format!("repro-sim-net-{}", std::process::id()));
        let free = execute(
            &planned("moniqua", 0.05),
            "x",
            &Invocation::default(),
            &dir.join("a.jsonl"),
            &mut |_| {},
        )
        .unwrap();
        let mut slow = planned("moniqua", 0.05);
        let yaml = yaml_serde::from_str("{bandwidth: 1mbit, latency: 5ms}").unwrap();
        slow.network = crate::spec::condition::Condition::from_yaml(&yaml, None).unwrap();
        let shaped = execute(
            &slow,
            "x",
            &Invocation::default(),
            &dir.join("b.jsonl"),
            &mut |_| {},
        )
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(free.shaping, "none");
        assert_eq!(shaped.shaping, "sim (virtual clock)");
        let (t0, t1) = (free.virtual_s.unwrap(), shaped.virtual_s.unwrap());
        // 30 iterations, each at least one 5 ms latency
        assert!(t1 >= t0 + 30.0 * 5e-3, "{t0} -> {t1}");
        let Params::Sim(p) = &slow.params else {
            unreachable!()
        };
        assert_ne!(
            crate::spec::plan::run_id("sim", p, None),
            crate::spec::plan::run_id("sim", p, slow.network.as_ref())
        );
    }

    /// A version-1 log (no metrics in its end record) still reads: its
    /// metrics are missing, not zero.
    #[test]
    fn a_version_1_log_still_reads() {
        let v1 = r#"{"type":"header","schema":1,"run_id":"a","rank":0,"world":4,"config":{},"provenance":{"git_commit":"x","version":"0","host":"h","device":"cpu","backend":"sim","network":"none"}}
{"type":"end","status":"completed","wall_s":1.5,"iterations":10}
"#;
        let log = repro_runlog::read_log(v1.as_bytes()).unwrap();
        let s = summarize(&log, 4, 20, 0.0, "none".into());
        assert_eq!(s.final_loss, None, "missing, not zero");
        assert_eq!(s.virtual_s, Some(1.5));
        assert_eq!(s.status, RunStatus::Completed);
    }
}
