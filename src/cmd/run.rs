//! `repro run`, `repro table`, `repro list`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;

use crate::experiment::condition::{Condition, ShapingMode};
use crate::experiment::manifest::{self, Backend};
use crate::experiment::plan::{self, PlannedRun};
use crate::launch::net::HostNet;
use crate::launch::summary::{RunStatus, Summary};
use crate::launch::train::{Launcher, Method, NetContext};
use crate::launch::{sim as sim_backend, train as train_backend};
use crate::records::frames::{self, RunsFrame};
use crate::records::freshness;
use crate::records::metrics;
use crate::records::results::{self, RunRecord};
use crate::records::results_dir::Entry;
use crate::records::results_dir::ResultsDir;
use crate::report::outputs::write_results;
use crate::report::{claims, plot, table, tune};
use crate::util::progress::Progress;
use repro_runlog::Invocation;

use crate::experiment::project::DEFAULT_EXPERIMENT;

/// Options of `repro run`.
#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// Experiment name (see `repro list`) or path to a manifest.
    #[arg(default_value = DEFAULT_EXPERIMENT)]
    pub experiment: String,
    /// Manifest overrides as Hydra writes them, `params.lr=0.05`: the same
    /// as `--set params.lr=0.05` (applied before the `--set` ones).
    #[arg(value_name = "KEY=VALUE")]
    pub assignments: Vec<String>,
    /// smoke (seconds), cpu (minutes on a laptop) or paper (default: the
    /// manifest's `default_scale`, else smoke).
    #[arg(long)]
    pub scale: Option<String>,
    /// Override any manifest key, e.g. `--set params.lr=0.05` or `--set grid.seed=[0,1]`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Where results go (default: a new directory of this run,
    /// runs/<experiment>/<scale>/<time>/, linked as `latest` beside it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write into the record, results/<experiment>/, which holds the
    /// committed scale only: what maintainers commit. Without it the
    /// record is read, never written (`repro verify` compares with it).
    #[arg(long, conflicts_with = "out")]
    pub record: bool,
    /// Print the runs the plan expands to, run nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Override the manifest's backend.
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    /// Runs at a time.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Keep MPI runs that already finished in the output directory (same
    /// run id, i.e. the same resolved config; every rank's log complete)
    /// and are current (this build, this manifest; see `repro status`):
    /// summarize their logs instead of running them again. Simulator runs
    /// are cheap and always run.
    #[arg(long)]
    pub resume: bool,
    /// With --resume, also keep finished runs that are stale (another
    /// build or manifest), e.g. to extend a grid without rerunning it.
    #[arg(long, requires = "resume")]
    pub resume_stale: bool,
    /// Run only the K-th of N shares of the plan (every N-th run from the
    /// K-th; a tuned experiment's tuning runs, its final runs wait for
    /// them all), and not the manifest's `then`: one task of a job array
    /// (`repro submit --array`). Each chunk writes a directory of its own;
    /// `--resume` in the directory above them adopts their runs.
    #[arg(long, value_name = "K/N", value_parser = parse_chunk)]
    pub chunk: Option<(usize, usize)>,
    /// How ranks start: mpirun on this host, or srun in a Slurm allocation
    /// (auto: srun when SLURM_JOB_ID is set, else mpirun).
    #[arg(long, value_enum, default_value = "auto")]
    pub launcher: LauncherArg,
    /// mpirun across the hosts of this hostfile (a cluster, or one line
    /// `localhost slots=8` for a multi-GPU box).
    #[arg(long, value_name = "FILE")]
    pub hostfile: Option<PathBuf>,
    /// The nodes' network interface, for `shaping: hosts` (cluster runs with
    /// network conditions: netem on this interface of every node).
    #[arg(long, value_name = "IFACE")]
    pub interface: Option<String>,
    /// Refuse a plan of more runs than this (the grid's size is checked
    /// before it is expanded).
    #[arg(long, value_name = "N", default_value_t = plan::Limits::default().max_runs)]
    pub max_runs: usize,
    /// Refuse a run with more workers than this.
    #[arg(long, value_name = "N", default_value_t = plan::Limits::default().max_workers)]
    pub max_workers: usize,
    /// Print a JSON summary on stdout at the end (runs by status, the
    /// files written) instead of the table and claims.
    #[arg(long)]
    pub json: bool,
    /// Memory the runs may hold, GB (default: what the kernel has
    /// available when the plan is made, MemAvailable). A simulator run
    /// whose plan needs more (models, replicas, frames, objective; shared
    /// by --jobs) is refused before anything runs and recorded as
    /// `refused` with what it needs.
    #[arg(long, value_name = "GB")]
    pub max_memory: Option<f64>,
    /// Let MPI ranks run as root where they cannot run as the invoking
    /// user: under sudo with --hostfile (remote ranks start as the user
    /// mpirun logs in as, root here). Without it such a launch is refused.
    #[arg(long)]
    pub allow_root_ranks: bool,
}

impl RunArgs {
    /// The experiment and every override: the `KEY=VALUE` arguments, then
    /// `--set`. `repro run lr=0.1` (no experiment named) is the default
    /// experiment with that override.
    pub(crate) fn experiment_and_overrides(&self) -> (String, Vec<String>) {
        let mut overrides = self.assignments.clone();
        let experiment =
            if self.experiment.contains('=') && !std::path::Path::new(&self.experiment).exists() {
                overrides.insert(0, self.experiment.clone());
                DEFAULT_EXPERIMENT.to_string()
            } else {
                self.experiment.clone()
            };
        overrides.extend(self.overrides.iter().cloned());
        (experiment, overrides)
    }
}

/// `--launcher`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LauncherArg {
    Auto,
    Mpirun,
    Srun,
}

/// `repro run`'s options resolved once, before the first experiment is
/// planned: what every step below [`run`] reads (none sees [`RunArgs`]).
#[derive(Debug)]
struct RunConfig {
    limits: plan::Limits,
    /// Runs at a time, as asked (see [`jobs`]).
    jobs: usize,
    dry_run: bool,
    json: bool,
    /// Keep finished MPI runs that are current; with `resume_stale`,
    /// stale ones too.
    resume: bool,
    resume_stale: bool,
    /// `--chunk K/N`: run only the K-th of N shares of the plan.
    chunk: Option<(usize, usize)>,
    /// The memory each run may hold, bytes, and where the figure came
    /// from ([`memory_budget`]).
    memory: Option<(u64, String)>,
    launcher: LauncherArg,
    hostfile: Option<PathBuf>,
    interface: Option<String>,
    allow_root_ranks: bool,
}

impl RunConfig {
    /// Checks and resolves the options (a bad `--max-memory` fails here).
    fn resolve(args: &RunArgs) -> Result<Self> {
        if let Some(gb) = args.max_memory
            && !(gb.is_finite() && gb >= 0.0)
        {
            anyhow::bail!("--max-memory {gb}: give the memory runs may hold in GB, 0 or more");
        }
        Ok(Self {
            limits: plan::Limits {
                max_runs: args.max_runs,
                max_workers: args.max_workers,
            },
            jobs: args.jobs,
            dry_run: args.dry_run,
            json: args.json,
            resume: args.resume,
            resume_stale: args.resume_stale,
            chunk: args.chunk,
            memory: memory_budget(args.max_memory, args.jobs),
            launcher: args.launcher,
            hostfile: args.hostfile.clone(),
            interface: args.interface.clone(),
            allow_root_ranks: args.allow_root_ranks,
        })
    }

    /// The launcher the options ask for, for `backend`.
    fn launcher(&self, backend: Backend) -> Result<Launcher> {
        if backend == Backend::InProcess {
            if self.hostfile.is_some() || self.launcher != LauncherArg::Auto {
                anyhow::bail!(
                    "--hostfile and --launcher start MPI ranks; the in-process backend runs every worker in one process"
                );
            }
            return Ok(Launcher::InProcess);
        }
        let in_slurm = std::env::var_os("SLURM_JOB_ID").is_some();
        Ok(match (self.launcher, &self.hostfile) {
            (LauncherArg::Srun, Some(_)) => anyhow::bail!(
                "--hostfile is for mpirun; srun takes its hosts from the Slurm allocation"
            ),
            (LauncherArg::Srun, None) => Launcher::Srun,
            (_, Some(h)) => {
                let h = std::fs::canonicalize(h)
                    .with_context(|| format!("hostfile {} not found", h.display()))?;
                Launcher::Hostfile(h)
            }
            (LauncherArg::Auto, None) if in_slurm => Launcher::Srun,
            _ => Launcher::Local,
        })
    }
}

/// Whether every run of an experiment succeeded (ordered: the worse of
/// two outcomes is the larger).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Outcome {
    AllSucceeded,
    SomeFailed,
    /// Stopped by Ctrl-C or SIGTERM, after cleaning up.
    Interrupted,
}

/// Where one `repro run` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Destination {
    /// `--out DIR`.
    Given(PathBuf),
    /// `--record`: results/<name>/.
    Record(PathBuf),
    /// A run directory under runs/<name>/<scale>/: a new one (claimed),
    /// or with `--resume` the newest.
    Run(PathBuf),
    /// A new run directory's name, not yet made ([`Destination::claim`];
    /// a dry run never makes it).
    Fresh(PathBuf),
}

impl Destination {
    /// Where `m`'s results at `scale` go: `--out`; `--record` (the
    /// committed scale only); with `--resume` the newest run directory;
    /// else a new one.
    fn of(args: &RunArgs, m: &manifest::Manifest, scale: &str) -> Result<Self> {
        use crate::experiment::project;
        if let Some(out) = &args.out {
            return Ok(Self::Given(out.clone()));
        }
        if args.record {
            return match m.committed_scale() {
                Some(c) if c == scale => Ok(Self::Record(project::record_dir(&m.name))),
                Some(c) => anyhow::bail!(
                    "--record writes results/{}/, the record of scale `{c}`; this is scale \
                     `{scale}`: run it without --record (into runs/) or with --scale {c}",
                    m.name
                ),
                None => anyhow::bail!(
                    "--record: `{}` has no committed scale (`committed_scale`, or a `cpu` \
                     scale), so it has no record; run it without --record",
                    m.name
                ),
            };
        }
        if args.resume
            && let Some(latest) = project::latest_run(&m.name, scale)
        {
            let dir = std::fs::canonicalize(&latest).unwrap_or(latest);
            return Ok(Self::Run(relative(&dir)));
        }
        Ok(Self::Fresh(project::new_run_dir(&m.name, scale)))
    }

    /// A fresh run directory made, once the plan holds: its own, even
    /// where another run started in the same second.
    fn claim(self, m: &manifest::Manifest, scale: &str) -> Result<Self> {
        match self {
            Self::Fresh(_) => Ok(Self::Run(crate::experiment::project::claim_run_dir(
                &m.name, scale,
            )?)),
            other => Ok(other),
        }
    }

    fn path(&self) -> &std::path::Path {
        match self {
            Self::Given(p) | Self::Record(p) | Self::Run(p) | Self::Fresh(p) => p,
        }
    }
}

/// `dir` relative to the working directory where it lies below it.
fn relative(dir: &std::path::Path) -> PathBuf {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| dir.strip_prefix(cwd).ok().map(std::path::Path::to_path_buf))
        .unwrap_or_else(|| dir.to_path_buf())
}

/// Creates `dir` and its missing parents; under sudo each one created
/// belongs to the invoking user.
fn create_dirs(dir: &std::path::Path) -> Result<()> {
    let missing: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(std::path::Path::to_path_buf)
        .collect();
    crate::util::atomic::create_dir_all(dir)?;
    for d in &missing {
        crate::util::sudo::give_one(d);
    }
    Ok(())
}

/// The distinct network conditions of the runs `net` shapes.
fn shaped_conditions<'r>(runs: &'r [PlannedRun], net: &NetContext) -> Vec<&'r Condition> {
    let mut out: Vec<&Condition> = Vec::new();
    for c in runs
        .iter()
        .filter(|r| net.shapes(r))
        .flat_map(|r| &r.network)
    {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// `repro run`: runs the experiment (see [`run_experiment`]), then the
/// experiments its manifest names in `then`, at the same scale, each into a
/// directory of the first one's results; then prints the manifest's `next`.
/// Every experiment is planned before the first run starts.
pub(crate) fn run(args: &RunArgs) -> Result<Outcome> {
    let cfg = RunConfig::resolve(args)?;
    let (experiment, overrides) = args.experiment_and_overrides();
    let path = manifest::locate(&experiment)?;
    let mut m = manifest::load(&path, &overrides)?;
    let scale = m.run_scale(&args.scale);
    let dest = Destination::of(args, &m, &scale)?;
    let backend = args.backend.unwrap_or(m.backend);
    let runs = plan::expand_within(&m, &scale, backend, cfg.limits)?;
    let points: Vec<_> = runs.iter().map(|r| r.point.clone()).collect();
    for n in crate::report::subset::narrow(&mut m, &overrides, &points) {
        crate::util::progress::note(&format!("note: {n}"));
    }
    let m = plan::titled(&m, &scale)?;
    // a chunk runs a share of this experiment only; `then` is the job's
    // that resumes the directory above the chunks
    let then = match cfg.chunk {
        Some(_) => Vec::new(),
        None => plan_then(&m, &path, &scale, cfg.limits)?,
    };
    warn_design(std::iter::once((&m.name, &runs)).chain(then.iter().map(|(_, c, r)| (&c.name, r))));
    // a new run directory is made once every experiment is planned
    let dest = if cfg.dry_run {
        dest
    } else {
        dest.claim(&m, &scale)?
    };
    let out = dest.path().to_path_buf();
    if let (Destination::Run(_), false) = (&dest, cfg.dry_run) {
        crate::util::progress::note(&format!(
            "writing to {} (the record, results/{}/, is only read: `--record` writes it)",
            out.display(),
            m.name
        ));
    }
    let ran = run_experiment(
        Job {
            cfg: &cfg,
            m: &m,
            scale: &scale,
            backend,
            out: &out,
            overrides: &overrides,
        },
        &path,
        runs,
    );
    if ran.is_err() && matches!(dest, Destination::Run(_)) {
        // a run directory claimed for runs that never started: gone again
        // (remove_dir leaves one that holds anything)
        let _ = crate::util::sudo::as_invoker(|| std::fs::remove_dir(&out));
    }
    crate::util::sudo::give(&out);
    if matches!(dest, Destination::Run(_)) && out.is_dir() {
        crate::experiment::project::link_latest(&out)
            .with_context(|| format!("could not link {} as the latest run", out.display()))?;
    }
    let (outcome, mut summary) = ran?;
    let (outcome, summaries) = run_then(&cfg, (&out, &scale), then, outcome)?;
    let quiet = crate::util::progress::verbosity() == crate::util::progress::Verbosity::Quiet;
    let said = !cfg.json && !cfg.dry_run && outcome != Outcome::Interrupted;
    if let Some(next) = &m.next
        && said
        && !quiet
    {
        println!("Next: {}", next.trim());
    }
    if matches!(dest, Destination::Run(_)) && said {
        crate::cmd::verify::after_run(&out, &m.name, &scale);
    }
    if let Some(s) = &mut summary {
        if !m.then.is_empty() {
            s["then"] = serde_json::Value::Array(summaries);
        }
        println!("{}", serde_json::to_string_pretty(s)?);
    }
    Ok(outcome)
}

/// The experiments of `then`, each into its directory below `out`, after
/// the first ended with `outcome`: the worst outcome, and their JSON
/// summaries with `--json`.
fn run_then(
    cfg: &RunConfig,
    (out, scale): (&std::path::Path, &str),
    then: Vec<(PathBuf, manifest::Manifest, Vec<PlannedRun>)>,
    mut outcome: Outcome,
) -> Result<(Outcome, Vec<serde_json::Value>)> {
    let mut summaries = Vec::new();
    for (p, c, runs) in then {
        if outcome == Outcome::Interrupted {
            break;
        }
        let out = out.join(&c.name);
        let c = plan::titled(&c, scale)?;
        let ran = run_experiment(
            Job {
                cfg,
                m: &c,
                scale,
                backend: c.backend,
                out: &out,
                overrides: &[],
            },
            &p,
            runs,
        );
        crate::util::sudo::give(&out);
        let (o, s) = ran?;
        outcome = outcome.max(o);
        summaries.extend(s);
    }
    Ok((outcome, summaries))
}

/// The experiments `m` names in `then`, each planned at `scale` before
/// the first run starts.
fn plan_then(
    m: &manifest::Manifest,
    path: &std::path::Path,
    scale: &str,
    limits: plan::Limits,
) -> Result<Vec<(PathBuf, manifest::Manifest, Vec<PlannedRun>)>> {
    let mut then = Vec::new();
    for name in &m.then {
        let p = manifest::locate(name)
            .with_context(|| format!("{}: `then` names `{name}`", path.display()))?;
        let c = manifest::load(&p, &[])?;
        let runs = plan::expand_within(&c, scale, c.backend, limits).with_context(|| {
            format!(
                "{}: `then` runs `{name}` at scale `{scale}`",
                path.display()
            )
        })?;
        then.push((p, c, runs));
    }
    Ok(then)
}

/// One experiment of a `repro run`: its manifest at a scale, for a
/// backend, into a directory, under the command's options.
#[derive(Clone, Copy)]
struct Job<'a> {
    cfg: &'a RunConfig,
    m: &'a manifest::Manifest,
    scale: &'a str,
    backend: Backend,
    out: &'a std::path::Path,
    /// The `--set` overrides of the manifest (none for `then`'s).
    overrides: &'a [String],
}

/// Runs one experiment's planned `runs` at `scale` into `out` (or prints
/// the plan with `--dry-run`), then writes its records, table and figure. With
/// a `tune` section, the tuning runs go first (into `tuning/`), and the
/// grid runs with each method's chosen configuration. With `--json`, the
/// run's summary (not printed).
fn run_experiment(
    x: Job<'_>,
    path: &std::path::Path,
    mut runs: Vec<PlannedRun>,
) -> Result<(Outcome, Option<serde_json::Value>)> {
    let Job {
        cfg,
        m,
        scale,
        backend,
        out,
        ..
    } = x;
    let limits = cfg.limits;
    check_specs(m, path, backend, &runs)?;
    let mut tuning = match &m.tune {
        Some(spec) => Some((spec, tune::tuning_runs(m, spec, scale, backend, limits)?)),
        None => None,
    };
    if let Some(chunk) = cfg.chunk {
        match &mut tuning {
            Some((_, t)) => *t = share(t, chunk),
            None => runs = share(&runs, chunk),
        }
    }
    let launcher = cfg.launcher(backend)?;
    check_root_ranks(cfg, backend, &launcher)?;
    // generated data sets the runs read, written before the first run
    crate::launch::data::prepare(
        runs.iter().chain(tuning.iter().flat_map(|(_, t)| t.iter())),
        cfg.dry_run,
    )?;
    check_inputs(runs.iter().chain(tuning.iter().flat_map(|(_, t)| t.iter())))?;
    if cfg.dry_run {
        let summary = plan_only(x, &runs, tuning.as_ref(), launcher)?;
        return Ok((Outcome::AllSucceeded, summary));
    }
    check_trainer(backend, &runs, &launcher, cfg.resume)?;
    crate::util::signals::install();
    crate::util::atomic::check_results_dir(out)?;
    create_dirs(out)?;
    // one writer per results directory, from here to the last file
    let _lock = crate::util::atomic::lock(out)?;
    let started = Instant::now();
    let mut failed = 0;
    if let (Some((_, tuning)), Some((k, n))) = (&tuning, cfg.chunk) {
        // the final runs need every chunk's tuning runs
        let dir = out.join(Entry::TuningDir.name());
        let done = execute(Job { out: &dir, ..x }, tuning, launcher, "tuning")?;
        crate::util::progress::note(&format!(
            "chunk {k}/{n}: {} tuning runs, {} failed; the final runs wait for every chunk \
             (`repro run --resume` in the directory above the chunks chooses and runs them)",
            done.ran, done.failed
        ));
        let outcome = match (crate::util::signals::interrupted(), done.failed) {
            (true, _) => Outcome::Interrupted,
            (false, 0) => Outcome::AllSucceeded,
            (false, _) => Outcome::SomeFailed,
        };
        return Ok((outcome, None));
    }
    if let Some((spec, tuning)) = &tuning {
        let Some((chosen, tuning_failed)) = tune_first(x, spec, tuning, &runs, &launcher)? else {
            return Ok((Outcome::Interrupted, None));
        };
        runs = chosen;
        failed += tuning_failed;
    }
    let done = execute(x, &runs, launcher, "")?;
    failed += done.failed;
    let figures = write_records(x, &done, &runs)?;
    Ok(conclude(x, &done, failed, started, &figures))
}

/// The outcome of one experiment's run, said on stderr, and its JSON
/// summary with `--json`.
fn conclude(
    x: Job<'_>,
    done: &Executed,
    failed: usize,
    started: Instant,
    figures: &[PathBuf],
) -> (Outcome, Option<serde_json::Value>) {
    let merged = &done.merged;
    let csv = x.out.join(Entry::Runs.name());
    if crate::util::signals::interrupted() {
        eprintln!(
            "interrupted: kept the {} runs that finished, and every earlier run, in {}",
            done.finished,
            csv.display()
        );
        return (Outcome::Interrupted, None);
    }
    let [kept, replaced, added] = done.counts;
    crate::util::progress::note(&format!(
        "{} runs in {:.1}s, {failed} failed; wrote {} ({kept} earlier rows kept, {replaced} replaced, {added} added), runs.parquet and table.md/.tex/.csv",
        done.ran,
        started.elapsed().as_secs_f64(),
        csv.display()
    ));
    let outcome = if failed == 0 {
        Outcome::AllSucceeded
    } else {
        Outcome::SomeFailed
    };
    if !x.cfg.json {
        return (outcome, None);
    }
    let ran = Ran {
        merged,
        ran: done.ran,
        failed,
        kept,
        wall_s: started.elapsed().as_secs_f64(),
        figures,
    };
    (outcome, Some(summary_json(x, &ran)))
}

/// Writes every run of the directory, `merged`, as runs.csv and
/// runs.parquet.
pub(crate) fn write_runs(out: &std::path::Path, merged: &[RunRecord]) -> Result<()> {
    results::write_csv(&out.join(Entry::Runs.name()), merged)?;
    frames::write_parquet(
        &out.join(Entry::RunsParquet.name()),
        RunsFrame::new(merged)?.export()?,
        frames::metadata(merged),
    )
}

/// Writes runs.csv and runs.parquet (every run of the directory), the
/// table, claims and figure (this plan's runs only) and provenance.json;
/// the figure's files.
fn write_records(x: Job<'_>, done: &Executed, runs: &[PlannedRun]) -> Result<Vec<PathBuf>> {
    let Job {
        cfg,
        m,
        scale,
        backend,
        out,
        ..
    } = x;
    let quiet = crate::util::progress::verbosity() == crate::util::progress::Verbosity::Quiet;
    let merged = results::judged(done.merged.clone(), runs, &m.health);
    write_runs(out, &merged)?;
    let tuning = crate::report::tune::recorded_tuning(m, scale, backend, out)?;
    let figures = write_results(
        m,
        out,
        (&results::planned(&merged, runs, &m.health), tuning.as_ref()),
        backend,
        !cfg.json && !quiet,
    )?;
    let launcher = match backend {
        Backend::Sim => "none (simulator)".to_string(),
        _ => cfg.launcher(backend)?.describe(),
    };
    freshness::write_provenance(
        out,
        (m, x.overrides),
        scale,
        (backend, &launcher),
        &done.invocation,
        runs,
        &done.merged,
    )?;
    Ok(figures)
}

/// What one experiment's `repro run` did, for its JSON summary.
struct Ran<'a> {
    /// Every run of the directory after this one.
    merged: &'a [RunRecord],
    ran: usize,
    failed: usize,
    kept: usize,
    wall_s: f64,
    figures: &'a [PathBuf],
}

/// `--json`'s summary of one experiment: runs by status and the files.
fn summary_json(x: Job<'_>, ran: &Ran<'_>) -> serde_json::Value {
    let Job {
        m,
        scale,
        backend,
        out,
        ..
    } = x;
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for r in ran.merged {
        let status = r.status().map_or("", RunStatus::text);
        *by_status.entry(status.to_string()).or_default() += 1;
    }
    let file = |name: &str| {
        let p = out.join(name);
        p.is_file().then(|| p.display().to_string())
    };
    let json = serde_json::json!({
        "experiment": m.name,
        "scale": scale,
        "backend": backend.name(),
        "out": out.display().to_string(),
        "ran": ran.ran,
        "failed": ran.failed,
        "kept_earlier": ran.kept,
        "wall_s": ran.wall_s,
        "runs_by_status": by_status,
        "files": {
            "runs_csv": file(Entry::Runs.name()),
            "runs_parquet": file(Entry::RunsParquet.name()),
            "table": file(Entry::Table.name()),
            "claims": file(Entry::Claims.name()),
            "tuning": file(Entry::Tuning.name()),
            "provenance": file(crate::records::results_dir::PROVENANCE),
            "figures": ran
                .figures
                .iter()
                .filter(|p| p.extension().is_none_or(|e| e != "py"))
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>(),
            "figure_py": file(Entry::FigurePy.name()),
        },
    });
    json
}

/// Runs the tuning into `out/tuning`, writes tuning.md and tuning.csv, and
/// plans the grid with each method's chosen configuration: the grid's runs
/// and the tuning runs that failed; `None` when interrupted.
fn tune_first(
    x: Job<'_>,
    spec: &manifest::TuneSpec,
    tuning: &[PlannedRun],
    grid: &[PlannedRun],
    launcher: &Launcher,
) -> Result<Option<(Vec<PlannedRun>, usize)>> {
    let Job {
        cfg,
        m,
        scale,
        backend,
        out,
        ..
    } = x;
    let dir = out.join(Entry::TuningDir.name());
    let done = execute(Job { out: &dir, ..x }, tuning, launcher.clone(), "tuning")?;
    if crate::util::signals::interrupted() {
        eprintln!(
            "interrupted while tuning: kept the finished tuning runs in {}",
            dir.join(Entry::Runs.name()).display()
        );
        return Ok(None);
    }
    let selection = tune::select_planned(spec, tuning, &done.merged, &m.health);
    let Some((selection, more_failed, refused, (all, merged))) =
        extend_tuning(x, spec, tuning, selection, launcher, done.merged.clone())?
    else {
        return Ok(None);
    };
    let failed = done.failed + more_failed;
    tune::write_outputs(
        m,
        spec,
        out,
        &tune::final_seeds(grid),
        &selection,
        &refused,
        &results::planned(&merged, &all, &m.health),
    )?;
    for t in selection.tried.iter().filter(|t| t.chosen) {
        crate::util::progress::note(&format!(
            "tuning chose {} for {}",
            t.config,
            tune::group_text(&t.group)
        ));
    }
    for g in selection.unviable() {
        crate::util::progress::note(&format!(
            "warning: tuning found no working configuration for {}: it gets no final runs (tuning.md)",
            tune::group_text(g)
        ));
    }
    let runs = plan::expand_configured(m, scale, backend, cfg.limits, None, &|p| {
        Some(selection.chosen_for(spec, p).unwrap_or_default())
    })?;
    Ok(Some((runs, failed)))
}

/// The design warnings of each experiment's plan (`experiment::design`), said
/// before anything runs.
fn warn_design<'a>(plans: impl Iterator<Item = (&'a String, &'a Vec<PlannedRun>)>) {
    for (name, planned) in plans {
        for w in crate::experiment::design::warnings(planned) {
            crate::util::progress::note(&format!("warning: {name}: {w}"));
        }
    }
}

/// The second wave of the tuning (`tune.confirm`'s finalists on their
/// seeds, `tune.extend`'s steps beyond an edge on every tuning seed) into
/// the tuning directory, and the choice made again over all the runs. The
/// new selection, the runs that failed, and the steps the plan refused;
/// `None` when interrupted.
fn extend_tuning(
    x: Job<'_>,
    spec: &manifest::TuneSpec,
    tuning: &[PlannedRun],
    first: tune::Selection,
    launcher: &Launcher,
    merged: Vec<RunRecord>,
) -> Result<Option<SecondLook>> {
    let (extra, refused) = tune::second_wave(x.m, spec, x.scale, x.backend, &first);
    if extra.is_empty() {
        return Ok(Some((first, 0, refused, (tuning.to_vec(), merged))));
    }
    crate::util::progress::note(&format!(
        "tuning: a second look at {} configurations ({} runs): {}",
        extra
            .iter()
            .filter_map(|r| {
                let mut g = r.point.clone();
                g.remove(plan::SEED_KEY);
                Some(g).filter(|g| g.contains_key(plan::CONFIG_KEY))
            })
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        extra.len(),
        match &spec.confirm {
            Some(c) => format!(
                "the best {} of each setting on more seeds{}",
                c.best,
                if spec.extend {
                    ", and the steps beyond an edge"
                } else {
                    ""
                }
            ),
            None => "the steps beyond an edge".into(),
        }
    ));
    let dir = x.out.join(Entry::TuningDir.name());
    let more = execute(
        Job { out: &dir, ..x },
        &extra,
        launcher.clone(),
        "tuning, second look",
    )?;
    if crate::util::signals::interrupted() {
        return Ok(None);
    }
    let all: Vec<PlannedRun> = tuning.iter().chain(&extra).cloned().collect();
    let selection = tune::select_planned(spec, &all, &more.merged, &x.m.health);
    Ok(Some((selection, more.failed, refused, (all, more.merged))))
}

/// The tuning after its second look: the choice, the runs that failed,
/// the steps the plan refused, and the whole search's plan and records.
type SecondLook = (
    tune::Selection,
    usize,
    Vec<String>,
    (Vec<PlannedRun>, Vec<RunRecord>),
);

/// Under sudo, ranks run as the invoking user; a launch whose ranks would
/// run as root instead is refused unless `--allow-root-ranks`.
fn check_root_ranks(cfg: &RunConfig, backend: Backend, launcher: &Launcher) -> Result<()> {
    if matches!(backend, Backend::Mpi | Backend::InProcess)
        && let Some(who) = crate::util::sudo::invoker()
        && train_backend::RankUser::for_launcher(launcher).is_none()
        && !cfg.allow_root_ranks
    {
        anyhow::bail!(
            "under sudo, the ranks of this launch ({}) would run as root, not as uid {}: \
             run without sudo, or pass --allow-root-ranks if you mean it",
            if launcher.is_local() {
                "this host"
            } else {
                "--hostfile"
            },
            who.uid
        );
    }
    Ok(())
}

/// The data files the runs read, judged before the first run where
/// reading them is cheap (each file once): a LIBSVM file parses and holds
/// a sample per worker, CIFAR-10's batches are whole and labelled 0 to 9.
/// The runs check again as they read.
fn check_inputs<'a>(runs: impl Iterator<Item = &'a PlannedRun>) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for r in runs {
        match &r.params {
            plan::Params::Sim(p) => {
                let key = (p.data.clone(), p.workers, p.objective.clone());
                if p.data.is_some() && seen.insert(format!("{key:?}")) {
                    sim_backend::check_data(p)
                        .with_context(|| format!("run {} ({})", r.id, plan::describe(r)))?;
                }
            }
            plan::Params::Train(c) if c.dataset == "cifar10" => {
                let dir = c.data_dir.as_ref().map_or_else(
                    || {
                        crate::experiment::data::default_dir(
                            crate::experiment::data::Dataset::Cifar10,
                        )
                    },
                    PathBuf::from,
                );
                if dir.is_dir() && seen.insert(dir.display().to_string()) {
                    crate::launch::data::check_cifar(&dir)
                        .with_context(|| format!("run {} ({})", r.id, plan::describe(r)))?;
                }
            }
            plan::Params::Train(_) => {}
        }
    }
    Ok(())
}

/// Every MPI or in-process run needs the trainer: checked once, up front,
/// with a note of the user its ranks run as.
fn check_trainer(
    backend: Backend,
    runs: &[PlannedRun],
    launcher: &Launcher,
    resume: bool,
) -> Result<()> {
    if matches!(backend, Backend::Mpi | Backend::InProcess)
        && runs
            .iter()
            .any(|r| matches!(r.params, plan::Params::Train(_)))
    {
        let user = train_backend::RankUser::for_launcher(launcher);
        train_backend::check_trainer_build(&train_backend::train_binary()?, user, resume)?;
        match user {
            Some(u) => crate::util::progress::note(&format!(
                "note: ranks run as uid {} gid {} (sudo's SUDO_UID); network setup and mpirun stay root",
                u.uid, u.gid
            )),
            None if crate::util::process::is_root() => crate::util::progress::note(&format!(
                "note: ranks run as root{}: the driver runs as root and SUDO_UID names no other user \
                 (run through sudo to have them run as you)",
                match launcher {
                    Launcher::Srun => " on every node of the allocation",
                    l if l.is_local() => "",
                    _ => " on every host of --hostfile",
                }
            )),
            None => {}
        }
    }
    Ok(())
}

/// A congestion control this kernel has not loaded fails the real run
/// before anything starts; a dry run says so too.
fn check_congestion(
    backend: Backend,
    runs: &[PlannedRun],
    net: &NetContext,
    dry_run: bool,
) -> Result<()> {
    if backend != Backend::Mpi
        || !runs.iter().any(|r| net.shapes(r))
        || net.method()? != Method::Netns
    {
        return Ok(());
    }
    if dry_run && !crate::util::process::is_root() {
        crate::util::progress::note(
            "note: a real run of this plan needs root: its shaped networks are network namespaces \
             and tc rules (run it with sudo)",
        );
    }
    // a shaped network holds so many ranks: refused before the first run,
    // by the dry run and the real one alike
    for r in runs.iter().filter(|r| net.shapes(r)) {
        if let plan::Params::Train(c) = &r.params {
            let ranks = train_backend::workers(c);
            if ranks > crate::launch::net::MAX_SHAPED_RANKS {
                anyhow::bail!(
                    "run {} ({}): {ranks} ranks do not fit one shaped network (at most {}); \
                     shape fewer workers, or run this condition across hosts (`shaping: hosts`)",
                    r.id,
                    plan::describe(r),
                    crate::launch::net::MAX_SHAPED_RANKS
                );
            }
        }
    }
    if let Some(tcp) = crate::launch::net::TcpSettings::read() {
        tcp.check_loaded(&shaped_conditions(runs, net))?;
    }
    Ok(())
}

/// `--dry-run` of one experiment: the plan (and the tuning's), the
/// commands each MPI run would execute, and the runs refused for memory;
/// the JSON summary with `--json`.
fn plan_only(
    x: Job<'_>,
    runs: &[PlannedRun],
    tuning: Option<&(&manifest::TuneSpec, Vec<PlannedRun>)>,
    launcher: Launcher,
) -> Result<Option<serde_json::Value>> {
    let Job {
        cfg,
        m,
        scale,
        backend,
        out,
        ..
    } = x;
    let recorder = std::sync::Arc::new(crate::launch::net::DryRun::planning());
    let net = net_context(cfg, m, launcher, Box::new(recorder.clone()));
    check_congestion(backend, runs, &net, true)?;
    let json = cfg.json;
    let say = |line: String| {
        if !json {
            println!("{line}");
        }
    };
    let (tuning_listed, refused) = if let Some((_, tuning)) = &tuning {
        say(format!(
            "tuning: {} runs into {}",
            tuning.len(),
            out.join(Entry::TuningDir.name()).display()
        ));
        let refused = refusals(cfg, tuning)?;
        let dir = out.join(Entry::TuningDir.name());
        let listed = dry_run(Job { out: &dir, ..x }, tuning, &net, &recorder, &refused)?;
        say_grid_after_tuning(cfg.chunk, runs, out, &say);
        (Some((listed, tuning.len())), refused.len())
    } else {
        (None, 0)
    };
    let (listed, refused) = match &tuning_listed {
        // the grid's runs are known only once the tuning has chosen
        Some(_) => (
            runs.iter()
                .map(|r| serde_json::json!({ "point": r.point }))
                .collect(),
            refused,
        ),
        None => {
            let refused = refusals(cfg, runs)?;
            let listed = dry_run(x, runs, &net, &recorder, &refused)?;
            (listed, refused.len())
        }
    };
    let planned = tuning_listed.as_ref().map_or(runs.len(), |(_, n)| *n);
    if refused > 0 && refused == planned {
        anyhow::bail!(
            "every one of the plan's {planned} runs is refused for memory (above); give fewer or smaller runs, or --max-memory"
        );
    }
    let summary = json.then(|| {
        serde_json::json!({
            "experiment": m.name,
            "scale": scale,
            "backend": backend.name(),
            "out": out.display().to_string(),
            "dry_run": true,
            "tuning_runs": tuning_listed.map(|(l, _)| l),
            "runs": listed,
            "refused": refused,
        })
    });
    Ok(summary)
}

/// The dry run's lines about a tuned experiment's grid: its runs, whose
/// ids follow from the configurations the tuning chooses; for a chunk,
/// that they wait for every chunk.
fn say_grid_after_tuning(
    chunk: Option<(usize, usize)>,
    runs: &[PlannedRun],
    out: &std::path::Path,
    say: &dyn Fn(String),
) {
    if let Some((k, n)) = chunk {
        say(format!(
            "chunk {k}/{n}: the grid's {} runs wait for every chunk's tuning runs \
             (`repro run --resume` in the directory above the chunks runs them)",
            runs.len()
        ));
        return;
    }
    say(format!(
        "then the grid's {} runs into {}, each method with the configuration the tuning chooses:",
        runs.len(),
        out.display()
    ));
    for r in runs {
        say(format!("  {}", plan::describe(r)));
    }
}

/// What [`execute`] did.
struct Executed {
    /// This invocation's runs merged with the earlier ones of the directory.
    merged: Vec<RunRecord>,
    /// Of runs.csv's rows: the earlier ones kept, those replaced, and
    /// those added.
    counts: [usize; 3],
    ran: usize,
    failed: usize,
    /// Runs that ended (completed or diverged).
    finished: usize,
    invocation: Invocation,
}

/// The runs an earlier invocation left in the directory (they stay
/// unless this one reruns their point), checked to be of this experiment
/// at this scale.
fn previous_runs(x: Job<'_>) -> Result<Vec<RunRecord>> {
    let runs_csv = x.out.join(Entry::Runs.name());
    let parquet = x.out.join(Entry::RunsParquet.name());
    let rows_there = std::fs::symlink_metadata(&parquet).is_ok_and(|m| m.is_file());
    if !runs_csv.exists() && rows_there {
        anyhow::bail!(
            "{} holds {} rows' runs.parquet but no runs.csv, the record this run would merge \
             into: writing would replace those rows. Restore runs.csv (`git checkout` where it \
             is committed), or move runs.parquet away to start the directory afresh",
            x.out.display(),
            crate::records::frames::read_parquet(&parquet)
                .map_or_else(|_| "some".into(), |df| df.height().to_string())
        );
    }
    let previous = if runs_csv.is_file() {
        results::read_csv(&runs_csv)
            .context("the results directory holds a runs.csv this run would merge into")?
    } else {
        Vec::new()
    };
    results::check_identity(
        x.out,
        &previous,
        ResultsDir::new(x.out).recorded_scale().as_deref(),
        &x.m.name,
        x.scale,
    )?;
    Ok(previous)
}

/// This invocation's `rows` merged with the `previous` ones; a failed
/// rerun of a finished run goes to attempts.csv, said on stderr.
fn merge(
    out: &std::path::Path,
    previous: Vec<RunRecord>,
    rows: Vec<RunRecord>,
    runs: &[PlannedRun],
) -> Result<results::Merged> {
    let merged = results::merge(previous, rows, runs);
    if merged.beside > 0 {
        crate::util::progress::note(&format!(
            "note: {} runs sit at grid points where runs.csv keeps a run of other parameters; \
             both rows stay (runs.csv is keyed by run id), and the table shows this plan's",
            merged.beside
        ));
    }
    for a in &merged.attempts {
        crate::util::progress::note(&format!(
            "  {} failed again; its earlier result stays in runs.csv (the attempt: attempts.csv, its logs: raw/attempts/)",
            a.run_id
        ));
    }
    results::record_attempts(out, &merged.attempts)?;
    Ok(merged)
}

/// `--chunk K/N`'s value: K of N, 1 <= K <= N.
fn parse_chunk(s: &str) -> std::result::Result<(usize, usize), String> {
    let bad = || format!("`{s}`: give K/N, the K-th of N chunks (1 <= K <= N), e.g. 2/4");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n) = (
        k.trim().parse::<usize>().map_err(|_| bad())?,
        n.trim().parse::<usize>().map_err(|_| bad())?,
    );
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

/// The K-th of N shares of `runs`: every N-th run from the K-th, so each
/// chunk gets runs of every grid point's kind.
pub(crate) fn share<T: Clone>(runs: &[T], (k, n): (usize, usize)) -> Vec<T> {
    runs.iter()
        .enumerate()
        .filter(|(i, _)| i % n == k - 1)
        .map(|(_, r)| r.clone())
        .collect()
}

/// The raw/ directories of a job array's chunks whose finished runs `out`
/// adopts with --resume: `out/chunks/*/raw`, and for a tuning directory
/// `chunks/*/tuning/raw` beside it.
fn chunk_raws(out: &std::path::Path) -> Vec<PathBuf> {
    let tuning = out.file_name() == Some(std::ffi::OsStr::new(Entry::TuningDir.name()));
    let (top, below): (&std::path::Path, &[&str]) = match (tuning, out.parent()) {
        (true, Some(p)) => (p, &[Entry::TuningDir.name(), Entry::Raw.name()]),
        _ => (out, &[Entry::Raw.name()]),
    };
    let Ok(entries) = std::fs::read_dir(top.join(Entry::Chunks.name())) else {
        return Vec::new();
    };
    let mut raws: Vec<PathBuf> = entries
        .flatten()
        .map(|e| below.iter().fold(e.path(), |p, b| p.join(b)))
        .filter(|p| p.is_dir())
        .collect();
    raws.sort();
    raws
}

/// Runs `runs` into `out` (runs.csv, runs.parquet and their logs in
/// raw/), merging with the runs an earlier invocation left there.
/// `phase` names them in messages ("tuning"; "" for the grid).
fn execute(x: Job<'_>, runs: &[PlannedRun], launcher: Launcher, phase: &str) -> Result<Executed> {
    let Job {
        cfg,
        m,
        scale,
        backend,
        out,
        ..
    } = x;
    let previous = previous_runs(x)?;
    let net = prepare_network(cfg, m, backend, runs, launcher)?;
    crate::util::atomic::create_dir_all(&out.join(Entry::Raw.name()))?;
    crate::util::progress::note(&format!(
        "{}{}: {} runs at scale `{}` -> {}",
        m.name,
        if phase.is_empty() {
            String::new()
        } else {
            format!(" ({phase})")
        },
        runs.len(),
        scale,
        out.display()
    ));
    let session = Session {
        cfg,
        backend,
        experiment: &m.name,
        scale,
        invocation: freshness::invocation(m, scale, backend),
        out,
        net: &net,
        progress: Progress::new(runs.len()),
        done: std::sync::atomic::AtomicUsize::new(0),
        total: runs.len(),
        refused: refusals(cfg, runs)?,
        previous: &previous,
    };
    let rows = in_parallel(runs, jobs(cfg.jobs, backend, runs, &net), &|r| {
        session.execute(r)
    });
    session.progress.finish();
    // this invocation's outcome is its own runs'; the files hold them merged
    // with the earlier runs at other grid points
    // a run refused for memory did not run either: the exit code says so
    let failed = rows
        .iter()
        .filter(|r| matches!(r.status(), Some(RunStatus::Failed | RunStatus::Refused)))
        .count();
    let finished = rows
        .iter()
        .filter(|r| !matches!(r.status(), Some(RunStatus::Failed | RunStatus::NotRun)))
        .count();
    let ran = rows.len();
    let invocation = session.invocation;
    let results::Merged {
        rows: merged,
        kept,
        replaced,
        added,
        ..
    } = merge(out, previous, rows, runs)?;
    if !phase.is_empty() {
        // tuning runs are judged as the grid's are
        write_runs(out, &results::judged(merged.clone(), runs, &m.health))?;
    }
    Ok(Executed {
        merged,
        counts: [kept, replaced, added],
        ran,
        failed,
        finished,
        invocation,
    })
}

/// A manifest's `tuned_in`: the name of an experiment of the project
/// with a `tune:` section; what is wrong, if anything.
fn check_tuned_in(name: &str) -> std::result::Result<(), String> {
    if !crate::experiment::manifest::plain_name(name) {
        return Err("not an experiment's name (letters, digits, - and _)".into());
    }
    let path = crate::experiment::manifest::locate(name).map_err(|e| e.to_string())?;
    let tuner = crate::experiment::manifest::load(&path, &[]).map_err(|e| e.to_string())?;
    match tuner.tune {
        Some(_) => Ok(()),
        None => Err(format!("{} has no `tune:` section", path.display())),
    }
}

/// The manifest's table and figure name metrics and grid keys that exist.
fn check_specs(
    m: &manifest::Manifest,
    path: &std::path::Path,
    backend: Backend,
    runs: &[PlannedRun],
) -> Result<()> {
    let points: Vec<_> = runs.iter().map(|r| r.point.clone()).collect();
    if let Some(spec) = &m.tune {
        tune::check(spec, backend, &points).map_err(|(key, message)| {
            crate::experiment::errors::DriverError::Manifest {
                path: path.to_path_buf(),
                key,
                message,
            }
        })?;
    }
    if let Some(name) = &m.tuned_in
        && let Err(e) = check_tuned_in(name)
    {
        return Err(crate::experiment::errors::DriverError::Manifest {
            path: path.to_path_buf(),
            key: "tuned_in".into(),
            message: format!("`{name}`: {e}"),
        }
        .into());
    }
    // a tuned experiment's runs carry their configuration as a grid key
    let mut keys: Vec<String> = runs
        .first()
        .map(|r| r.point.keys().cloned().collect())
        .unwrap_or_default();
    if m.tune.is_some() {
        keys.push(plan::CONFIG_KEY.to_string());
    }
    // a grid key names a runs.csv column of its own, so no key may be one
    // of the measured, provenance or identity columns
    if let Some(k) = keys
        .iter()
        .find(|k| k.as_str() == "run_id" || metrics::columns().any(|c| c == k.as_str()))
    {
        return Err(crate::experiment::errors::DriverError::Manifest {
            path: path.to_path_buf(),
            key: format!("grid.{k}"),
            message: format!("`{k}` is a column runs.csv already has; a grid key must not be one"),
        }
        .into());
    }
    // the paper's numbers are read at plan time, so a bad path fails now
    table::load_paper(&m.table).map_err(|e| crate::experiment::errors::DriverError::Manifest {
        path: path.to_path_buf(),
        key: "table.paper.file".into(),
        message: format!("{e:#}"),
    })?;
    let figure = m.figure.as_ref().map(|f| plot::check_spec(f, &keys));
    table::check_spec(&m.table, &keys)
        .and(figure.unwrap_or(Ok(())))
        .and(claims::check_specs(&m.claims, &m.table, &points))
        .map_err(|(key, message)| {
            crate::experiment::errors::DriverError::Manifest {
                path: path.to_path_buf(),
                key,
                message,
            }
            .into()
        })
}

/// The network context of a run of `m` whose commands go to `exec`.
fn net_context(
    cfg: &RunConfig,
    m: &manifest::Manifest,
    launcher: Launcher,
    exec: Box<dyn crate::launch::net::Exec>,
) -> NetContext {
    NetContext {
        mode: m.shaping,
        host: HostNet::assumed(),
        exec,
        launcher,
        interface: cfg.interface.clone(),
    }
}

/// The real network context: with MPI ranks to shape, the shaping method
/// checked against the options, and this host probed (never assumed) for
/// every condition's qdiscs and congestion control.
fn prepare_network(
    cfg: &RunConfig,
    m: &manifest::Manifest,
    backend: Backend,
    runs: &[PlannedRun],
    launcher: Launcher,
) -> Result<NetContext> {
    let mut net = net_context(cfg, m, launcher, Box::new(crate::launch::net::System));
    let shaped = backend == Backend::Mpi
        && m.shaping != ShapingMode::None
        && runs.iter().any(|r| r.network.is_some());
    if !shaped {
        return Ok(net);
    }
    check_congestion(backend, runs, &net, false)?;
    match net.method()? {
        Method::Hosts if cfg.jobs > 1 => anyhow::bail!(
            "--jobs {}: hosts shaping sets each node's interface for one run at a time (two runs \
             would shape, save and restore the same interfaces); pass --jobs 1",
            cfg.jobs
        ),
        Method::Netns => {
            if !crate::util::process::is_root() {
                return Err(crate::launch::net::NetError::NotRoot.into());
            }
            // what killed drivers left (never a live run's network)
            let gone = crate::launch::net::reclaim(&*net.exec)
                .context("could not remove the networks a killed run left")?;
            if !gone.is_empty() {
                crate::util::progress::note(&format!(
                    "note: removed {} namespaces and links whose run is gone",
                    gone.len()
                ));
            }
            // probe, don't assume: every condition's qdiscs and congestion
            // control are tried in a throwaway namespace before the first run
            let conditions = shaped_conditions(runs, &net);
            net.host = crate::launch::net::probe::preflight(&*net.exec, &conditions)
                .context("this host cannot shape the experiment's network conditions")?;
            if !net.host.netem && conditions.iter().any(|c| c.latency_s > 0.0) {
                eprintln!(
                    "note: this kernel has no netem; latency is injected per message by the transport (recorded in each run's shaping.json)"
                );
            }
        }
        _ => {}
    }
    Ok(net)
}

/// The memory each run may hold, bytes, and where the figure came from:
/// `--max-memory`, else the least of what the kernel has available now
/// (MemAvailable) and what this process's limits leave (RLIMIT_AS, its
/// memory cgroup), shared by `--jobs` runs at a time; `None` where none
/// is known.
fn memory_budget(max_memory: Option<f64>, jobs: usize) -> Option<(u64, String)> {
    let jobs = jobs.max(1) as u64;
    let (bytes, what) = match max_memory {
        Some(gb) => ((gb * 1e9) as u64, format!("--max-memory {gb}")),
        None => {
            let info = std::fs::read_to_string("/proc/meminfo").ok()?;
            let kb: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            // the least of what the machine has and this process may take
            std::iter::once((kb * 1024, "available (MemAvailable)".to_string()))
                .chain(crate::util::process::memory_limits())
                .min_by_key(|(b, _)| *b)?
        }
    };
    let per_job = if jobs > 1 {
        format!("{what}, shared by --jobs {jobs}")
    } else {
        what
    };
    Some((bytes / jobs, per_job))
}

/// The simulator runs whose planned memory exceeds [`memory_budget`]:
/// run id -> MB it would need. Each is named before anything runs.
fn refusals(cfg: &RunConfig, runs: &[PlannedRun]) -> Result<BTreeMap<String, f64>> {
    let mut out = BTreeMap::new();
    let Some((budget, what)) = cfg.memory.clone() else {
        return Ok(out);
    };
    for r in runs {
        let plan::Params::Sim(p) = &r.params else {
            continue;
        };
        let need = sim_backend::footprint(p)?;
        if need.total() > budget {
            crate::util::progress::note(&format!(
                "refused: {} {} would need {:.1} GB ({:.1} MB per worker: model {:.1}, state {:.1}, \
                 frames {:.1}, optimizer {:.1}; objective {:.1} MB); {:.1} GB {what}",
                r.id,
                plan::describe(r),
                need.total() as f64 / 1e9,
                need.per_worker() as f64 / 1e6,
                need.model as f64 / 1e6,
                need.state as f64 / 1e6,
                need.frames as f64 / 1e6,
                need.optimizer as f64 / 1e6,
                need.objective as f64 / 1e6,
                budget as f64 / 1e9,
            ));
            out.insert(r.id.clone(), need.total() as f64 / 1e6);
        }
    }
    Ok(out)
}

/// How many runs go at once. Shaped MPI runs go one at a time: each
/// builds a network of namespaces on one subnet, and concurrent jobs would
/// distort the times they measure. Other concurrent runs share the cores,
/// which is said.
fn jobs(asked: usize, backend: Backend, runs: &[PlannedRun], net: &NetContext) -> usize {
    if asked <= 1 {
        return 1;
    }
    if backend == Backend::Mpi && runs.iter().any(|r| net.shapes(r)) {
        eprintln!(
            "note: --jobs {asked}: shaped MPI runs go one at a time (one subnet, and measured times)"
        );
        return 1;
    }
    eprintln!(
        "note: --jobs {asked}: concurrent runs share this machine's {} cores; their wall-clock times include that",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    asked
}

/// Maps `f` over `runs` on `jobs` threads (in order; one thread for 1).
fn in_parallel(
    runs: &[PlannedRun],
    jobs: usize,
    f: &(dyn Fn(&PlannedRun) -> RunRecord + Sync),
) -> Vec<RunRecord> {
    let jobs = jobs.clamp(1, runs.len().max(1));
    if jobs == 1 {
        return runs.iter().map(f).collect();
    }
    let chunk = runs.len().div_ceil(jobs);
    std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(f).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// What every run of one `repro run` shares.
struct Session<'a> {
    cfg: &'a RunConfig,
    backend: Backend,
    experiment: &'a str,
    scale: &'a str,
    /// This command line and the resolved manifest's hash, for provenance.
    invocation: Invocation,
    out: &'a std::path::Path,
    net: &'a NetContext,
    progress: Progress,
    done: std::sync::atomic::AtomicUsize,
    total: usize,
    /// Runs refused at plan time, and the MB each would need.
    refused: BTreeMap<String, f64>,
    /// The runs runs.csv held before this invocation.
    previous: &'a [RunRecord],
}

impl Session<'_> {
    /// Runs `r` (or summarizes it from an earlier invocation's logs) and
    /// reports it: its record, `failed` if it produced no summary.
    fn execute(&self, r: &PlannedRun) -> RunRecord {
        self.attempt(r).identified(self.experiment, self.scale, r)
    }

    /// The summary of `r` from an earlier invocation's logs in `raw`, where
    /// one is kept: with --resume (current runs only, unless
    /// --resume-stale), and for every finished run once interrupted.
    fn earlier(&self, r: &PlannedRun, raw: &std::path::Path, interrupted: bool) -> Option<Summary> {
        let earlier = match self.backend {
            Backend::Mpi | Backend::InProcess if self.cfg.resume || interrupted => {
                train_backend::resume(r, &raw.join(&r.id), self.net)
                    .or_else(|| self.adopted(r, raw))
            }
            _ => None,
        };
        // --resume keeps a stale run only when told to
        earlier.filter(|s| {
            if interrupted || self.cfg.resume_stale {
                return true;
            }
            let p = s.provenance.clone().unwrap_or_default();
            let state = freshness::judge(
                &p.source,
                p.manifest_hash.as_deref().unwrap_or(""),
                &self.invocation,
            );
            if state != freshness::Freshness::Current {
                self.progress.line(&format!(
                    "  {} finished earlier but is {state}: running it again (--resume-stale keeps it)",
                    r.id
                ));
            }
            state == freshness::Freshness::Current
        })
    }

    /// With --resume, a run a job array's chunk finished (see
    /// [`chunk_raws`]): its logs move into `raw`, and its summary is read
    /// from there.
    fn adopted(&self, r: &PlannedRun, raw: &std::path::Path) -> Option<Summary> {
        if !self.cfg.resume {
            return None;
        }
        let from = chunk_raws(self.out)
            .into_iter()
            .map(|c| c.join(&r.id))
            .find(|d| train_backend::resume(r, d, self.net).is_some())?;
        let to = raw.join(&r.id);
        if let Err(e) = crate::util::atomic::replace_dir(&from, &to) {
            self.progress.line(&format!(
                "  {}: could not adopt {} ({e:#}): running it",
                r.id,
                from.display()
            ));
            return None;
        }
        self.progress
            .line(&format!("  {}: adopted from {}", r.id, from.display()));
        train_backend::resume(r, &to, self.net)
    }

    /// With --resume, the runs.csv row of a run that finished in an
    /// earlier invocation whose logs are gone (committed results keep no
    /// raw/), where the row is current (or stale, with --resume-stale): a
    /// long experiment resumes from what was committed.
    fn recorded(&self, r: &PlannedRun) -> Option<RunRecord> {
        if !self.cfg.resume || !matches!(self.backend, Backend::Mpi | Backend::InProcess) {
            return None;
        }
        let row = self
            .previous
            .iter()
            .find(|p| p.run_id == r.id && p.finished())?;
        let state = freshness::freshness(r, self.previous, &self.invocation);
        (state == freshness::Freshness::Current || self.cfg.resume_stale).then(|| row.clone())
    }

    /// [`Session::execute`] before the record gets its identity: refused,
    /// kept from runs.csv, summarized from earlier logs, or run.
    fn attempt(&self, r: &PlannedRun) -> RunRecord {
        if let Some(&mb) = self.refused.get(&r.id) {
            self.counted_line(r, &format!("refused (needs {:.1} GB)", mb / 1e3));
            return RunRecord::refused(r, mb);
        }
        // a run that finished in an earlier invocation (same id: the same
        // resolved config) is summarized from its logs with --resume, and
        // also once Ctrl-C / SIGTERM stops this invocation, so an
        // interrupted rerun never replaces finished results with "not run"
        let interrupted = crate::util::signals::interrupted();
        let raw = self.out.join(Entry::Raw.name());
        let earlier = self.earlier(r, &raw, interrupted);
        if interrupted && earlier.is_none() {
            return RunRecord::not_run(r);
        }
        if earlier.is_none()
            && !raw.join(&r.id).is_dir()
            && let Some(row) = self.recorded(r)
        {
            self.counted_line(
                r,
                "finished earlier: kept from runs.csv (--resume; its logs are not here)",
            );
            return row;
        }
        let t = Instant::now();
        let result = self.summary(r, &raw, earlier, interrupted);
        self.report(r, &result, t.elapsed().as_secs_f64());
        if result.is_err() && crate::util::signals::interrupted() {
            // stopped part-way: not a result, so it never replaces one
            return RunRecord::not_run(r);
        }
        RunRecord::of(r, result.as_ref().map_err(|e| format!("{e:#}")))
    }

    /// One counted line about a run that is not run: `[n/total] id what`.
    fn counted_line(&self, r: &PlannedRun, what: &str) {
        let n = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let total = self.total;
        let (id, run) = (&r.id, plan::describe(r));
        self.progress
            .line(&format!("[{n}/{total}] {id} {run}: {what}"));
    }

    /// The run's summary, under its progress bar: simulated, read from the
    /// logs an earlier invocation left (`earlier`), or trained.
    fn summary(
        &self,
        r: &PlannedRun,
        raw: &std::path::Path,
        earlier: Option<Summary>,
        interrupted: bool,
    ) -> Result<Summary> {
        let iterations = match &r.params {
            plan::Params::Train(c) => c.iterations,
            plan::Params::Sim(p) => p.iterations,
        };
        if crate::util::progress::verbosity() == crate::util::progress::Verbosity::Verbose {
            let params = match &r.params {
                plan::Params::Train(c) => serde_json::to_string(c),
                plan::Params::Sim(p) => serde_json::to_string(p),
            };
            self.progress
                .line(&format!("{}: {}", r.id, params.unwrap_or_default()));
        }
        let mut bar = self
            .progress
            .run(&format!("{} {}", r.id, plan::describe(r)), iterations);
        let result = match (self.backend, earlier) {
            (Backend::Sim, _) => {
                let log = raw.join(format!("{}.jsonl", r.id));
                sim_backend::execute(r, self.experiment, &self.invocation, &log, &mut |k| {
                    bar.update(k)
                })
            }
            (_, Some(s)) => {
                let why = if interrupted {
                    "interrupted, so not run again"
                } else {
                    "--resume"
                };
                let id = &r.id;
                self.progress.line(&format!(
                    "  {id} finished earlier: summarized from its logs ({why})"
                ));
                Ok(s)
            }
            (_, None) => {
                let dir = raw.join(&r.id);
                train_backend::execute(r, &dir, self.net, &self.invocation, &mut |k| bar.update(k))
            }
        };
        self.progress.run_done(bar);
        result
    }

    /// One line for a finished run (and a warning if its bytes look wrong).
    fn report(&self, r: &PlannedRun, result: &Result<Summary>, secs: f64) {
        let n = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let total = self.total;
        let s = match result {
            Ok(s) => s,
            Err(e) => {
                self.progress.line(&format!(
                    "[{n}/{total}] {} {}: FAILED: {e:#}",
                    r.id,
                    plan::describe(r)
                ));
                return;
            }
        };
        // a simulator run's cost: per iteration, against reading every
        // model once, and its peak memory against the plan's
        let cost = match (s.iteration_s, s.stream_ratio(), s.peak_rss_mb) {
            (Some(t), Some(ratio), peak) => format!(
                ", {:.3} ms/iteration ({ratio:.2}x reading every model once){}",
                t * 1e3,
                peak.map_or(String::new(), |p| format!(
                    ", peak {:.2} GB (plan {:.2} GB)",
                    p / 1e3,
                    s.memory_mb.unwrap_or(f64::NAN) / 1e3
                ))
            ),
            _ => String::new(),
        };
        self.progress.line(&format!(
            "[{n}/{total}] {} {}: {} in {secs:.1}s (final_loss {}, {} bytes{cost})",
            r.id,
            plan::describe(r),
            s.status,
            s.final_loss.map_or("none".into(), |l| format!("{l:.4e}")),
            s.bytes
        ));
        if s.bytes_flagged() {
            self.progress.line(&format!(
                "  warning: the kernel sent {:.0} bytes per worker, {:.3}x the {:.0} counted (expected 1.00-1.10x: TCP/IP overhead)",
                s.kernel_bytes_per_worker.unwrap_or(f64::NAN),
                s.kernel_over_counted().unwrap_or(f64::NAN),
                s.counted_bytes_per_worker.unwrap_or(f64::NAN)
            ));
        }
    }
}

/// A YAML scalar as a manifest would write it.
fn yaml_text(v: &yaml_serde::Value) -> String {
    yaml_serde::to_string(v)
        .map(|t| t.trim().to_string())
        .unwrap_or_default()
}

/// The dry run's header of one experiment: its title, the parameters
/// every run shares, and its cases at this scale.
fn plan_header(x: Job<'_>, runs: &[PlannedRun]) -> String {
    let Job {
        m, scale, backend, ..
    } = x;
    let mut text = String::new();
    macro_rules! outln {
        ($($arg:tt)*) => {{
            text.push_str(&format!($($arg)*));
            text.push('\n');
        }};
    }
    outln!(
        "{}: {} at scale `{scale}`, {} runs (backend {})",
        m.name,
        m.title,
        runs.len(),
        backend.name()
    );
    // the resolved parameters every run shares (the trainer's config of the
    // first run without its grid keys), so a cluster user sees what runs
    if let Some(plan::Params::Train(cfg)) = runs.first().map(|r| &r.params) {
        let first = &runs[0];
        if let Ok(serde_json::Value::Object(map)) = serde_json::to_value(cfg) {
            let common: Vec<String> = map
                .iter()
                .filter(|(k, _)| *k != "run_id" && !first.point.contains_key(*k))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            outln!("  parameters: {}", common.join(" "));
        }
    }
    for case in m
        .cases
        .iter()
        .filter(|c| c.scales.is_empty() || c.scales.iter().any(|s| s == scale))
    {
        let when: Vec<String> = case
            .when
            .iter()
            .map(|(k, v)| format!("{k}={}", yaml_text(v)))
            .collect();
        let set: Vec<String> = case
            .set
            .iter()
            .map(|(k, v)| format!("{}={}", yaml_text(k), yaml_text(v)))
            .collect();
        outln!("  where {}: {}", when.join(" "), set.join(" "));
    }
    text
}

/// The commands an MPI run would execute, network setup and teardown
/// included, from the real launch code with every command recorded;
/// each also goes to `text` as a line.
fn mpi_commands(
    x: Job<'_>,
    r: &PlannedRun,
    net: &NetContext,
    recorder: &crate::launch::net::DryRun,
    text: &mut String,
) -> Result<Vec<String>> {
    let invocation = freshness::invocation(x.m, x.scale, x.backend);
    let train =
        train_backend::train_binary().unwrap_or_else(|_| std::path::PathBuf::from("repro-train"));
    let repro = std::env::current_exe().unwrap_or_else(|_| "repro".into());
    macro_rules! outln {
        ($($arg:tt)*) => {{
            text.push_str(&format!($($arg)*));
            text.push('\n');
        }};
    }
    let mut commands = Vec::new();
    // the real run's code, with every command recorded instead of run
    recorder.take();
    // the job runs in a working directory that replaces raw/<id> at its end
    let dir = crate::util::atomic::working_dir(&x.out.join(Entry::Raw.name()).join(&r.id));
    let prepared = train_backend::prepare(r, &dir, net, &invocation, &train, &repro)?;
    if let Some(h) = &prepared.hosts {
        outln!("    # {} (if every node has netem)", h.describe());
    }
    if let Some(f) = &prepared.fabric {
        outln!("    # {}", f.describe());
    }
    for c in recorder.take() {
        outln!("    {c}");
        commands.push(c.to_string());
    }
    outln!("    {}", prepared.launch.display());
    commands.push(prepared.launch.display().to_string());
    drop(prepared);
    for c in recorder.take() {
        outln!("    {c}");
        commands.push(c.to_string());
    }
    Ok(commands)
}

/// `--dry-run`: the plan, and for MPI runs the exact commands (network
/// setup and mpirun) each run would execute.
fn dry_run(
    x: Job<'_>,
    runs: &[PlannedRun],
    net: &NetContext,
    recorder: &crate::launch::net::DryRun,
    refused: &BTreeMap<String, f64>,
) -> Result<Vec<serde_json::Value>> {
    let json = x.cfg.json;
    let mut listed = Vec::new();
    let entry = |r: &PlannedRun| {
        serde_json::json!({
            "id": r.id,
            "point": r.point,
            "params": serde_json::from_str::<serde_json::Value>(&plan::canonical_params(&r.params))
                .unwrap_or_default(),
            // a limit, not a parameter (left out of `params` and the id)
            "timeout_s": match &r.params {
                plan::Params::Train(c) => Some(c.timeout_s),
                plan::Params::Sim(_) => None,
            },
            "network": r.network.as_ref().map(|c| c.label.clone()),
            "refused": refused.contains_key(&r.id),
        })
    };
    let mut text = String::new();
    macro_rules! outln {
        ($($arg:tt)*) => {{
            text.push_str(&format!($($arg)*));
            text.push('\n');
        }};
    }
    text.push_str(&plan_header(x, runs));
    for r in runs {
        if let plan::Params::Sim(p) = &r.params {
            let need = sim_backend::footprint(p)?.total() as f64 / 1e9;
            let refused = if refused.contains_key(&r.id) {
                ": refused"
            } else {
                ""
            };
            outln!(
                "  {}  {}  (memory {need:.3} GB{refused})",
                r.id,
                plan::describe(r)
            );
            let mut e = entry(r);
            e["memory_gb"] = serde_json::json!(need);
            listed.push(e);
            continue;
        }
        outln!("  {}  {}", r.id, plan::describe(r));
        let commands = mpi_commands(x, r, net, recorder, &mut text)?;
        let mut e = entry(r);
        e["commands"] = serde_json::json!(commands);
        listed.push(e);
    }
    if !json {
        std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())
            .context("could not write to stdout")?;
    }
    Ok(listed)
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    /// `repro run` reports the worst outcome of an experiment and those
    /// its `then` runs: a failure outranks success, an interruption both.
    #[test]
    fn the_worse_outcome_wins() {
        use Outcome::*;
        assert_eq!(AllSucceeded.max(SomeFailed), SomeFailed);
        assert_eq!(SomeFailed.max(AllSucceeded), SomeFailed);
        assert_eq!(SomeFailed.max(Interrupted), Interrupted);
        assert_eq!(Interrupted.max(AllSucceeded), Interrupted);
    }

    /// The chunks of a job array share the plan: together every run, each
    /// once, and their sizes differ by one at most.
    #[test]
    fn chunks_share_the_plan_each_run_once() {
        use super::{parse_chunk, share};
        let runs: Vec<usize> = (0..11).collect();
        for n in 1..=11 {
            let mut all: Vec<usize> = (1..=n).flat_map(|k| share(&runs, (k, n))).collect();
            let sizes: Vec<usize> = (1..=n).map(|k| share(&runs, (k, n)).len()).collect();
            all.sort();
            assert_eq!(all, runs, "{n} chunks");
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }
        assert_eq!(share(&runs, (2, 4)), vec![1, 5, 9]);
        assert_eq!(parse_chunk("2/4"), Ok((2, 4)));
        for bad in ["0/4", "5/4", "4", "a/b", "1/0"] {
            assert!(parse_chunk(bad).is_err(), "{bad}");
        }
    }

    /// --resume adopts from the chunks below a directory, and a tuning
    /// directory from the chunks' tuning directories beside it.
    #[test]
    fn chunk_raws_are_found_below_and_beside_tuning() {
        let dir = std::env::temp_dir().join(format!("repro-chunk-raws-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for d in ["chunks/1/raw", "chunks/2/raw", "chunks/2/tuning/raw"] {
            std::fs::create_dir_all(dir.join(d)).unwrap();
        }
        assert_eq!(
            super::chunk_raws(&dir),
            vec![dir.join("chunks/1/raw"), dir.join("chunks/2/raw")]
        );
        assert_eq!(
            super::chunk_raws(&dir.join("tuning")),
            vec![dir.join("chunks/2/tuning/raw")]
        );
        assert!(super::chunk_raws(&dir.join("chunks/1")).is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
