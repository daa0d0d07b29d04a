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
use crate::records::frames;
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

mod checks;
mod config;
mod dry_run;
mod execute;
mod session;
mod tuning;
mod write;
use checks::*;
pub(crate) use config::*;
use dry_run::*;
pub(crate) use execute::*;
use session::*;
use tuning::*;
use write::*;

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

impl<'a> Job<'a> {
    /// The same job into another directory (its tuning runs' `tuning/`).
    fn into_dir(self, out: &'a std::path::Path) -> Self {
        Job { out, ..self }
    }

    /// The directory's tuning runs: `out/tuning/`.
    fn tuning_dir(self) -> PathBuf {
        self.out.join(Entry::TuningDir.name())
    }
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
    let limits = x.cfg.limits;
    check_specs(x.m, path, x.backend, &runs)?;
    let mut tuning = match &x.m.tune {
        Some(spec) => Some((
            spec,
            tune::tuning_runs(x.m, spec, x.scale, x.backend, limits)?,
        )),
        None => None,
    };
    if let Some(chunk) = x.cfg.chunk {
        match &mut tuning {
            Some((_, t)) => *t = share(t, chunk),
            None => runs = share(&runs, chunk),
        }
    }
    let launcher = x.cfg.launcher(x.backend)?;
    check_root_ranks(x.cfg, x.backend, &launcher)?;
    // generated data sets the runs read, written before the first run
    crate::launch::data::prepare(
        runs.iter().chain(tuning.iter().flat_map(|(_, t)| t.iter())),
        x.cfg.dry_run,
    )?;
    check_inputs(runs.iter().chain(tuning.iter().flat_map(|(_, t)| t.iter())))?;
    if x.cfg.dry_run {
        let summary = plan_only(x, &runs, tuning.as_ref(), launcher)?;
        return Ok((Outcome::AllSucceeded, summary));
    }
    check_trainer(x.backend, &runs, &launcher, x.cfg.resume)?;
    crate::util::signals::install();
    crate::util::atomic::check_results_dir(x.out)?;
    create_dirs(x.out)?;
    // one writer per results directory, from here to the last file
    let _lock = crate::util::atomic::lock(x.out)?;
    let started = Instant::now();
    let mut failed = 0;
    if let (Some((_, tuning)), Some((k, n))) = (&tuning, x.cfg.chunk) {
        // the final runs need every chunk's tuning runs
        let dir = x.tuning_dir();
        let done = execute(x.into_dir(&dir), tuning, launcher, "tuning")?;
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
