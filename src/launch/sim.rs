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

use crate::experiment::plan::{Params, PlannedRun, SimParams};
use crate::launch::summary::{RunStatus, Summary};

mod files;
mod steps;
pub(crate) use files::*;
use steps::*;

fn topology(p: &SimParams) -> Result<Topology> {
    Ok(Topology::by_name(&p.topology, p.workers)?)
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
                    crate::experiment::plan::SPLITS.join(", ")
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
            crate::experiment::plan::OBJECTIVES.join(", ")
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
            modulus: steps.modulus,
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
        theta_warmup: (p.knobs.theta == Theta::Theorem3Step).then_some(p.knobs.theta_warmup),
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
        modulus: end.and_then(|e| e.modulus),
        shaping,
        provenance: Some(log.header.provenance.clone()),
        ..Summary::default()
    }
}

#[cfg(test)]
mod tests;
