//! Whether recorded runs are current: produced by this build (the same
//! source, see `repro_build`) from the same resolved manifest. `repro
//! status` lists each planned run as current, stale or missing; `repro run
//! --resume` keeps only current runs; each `repro run` writes
//! `provenance.json` beside runs.csv.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use repro_runlog::Invocation;

use crate::launch::summary::RunStatus;
use crate::records::metrics::Cell;
use crate::records::results::{self, RunRecord};
use crate::spec::manifest::{self, Backend};
use crate::spec::plan::{self, PlannedRun};

/// Which plan recorded runs are held against, in `repro status`, `repro
/// table` and `repro plot`: the manifest at a scale, with overrides, for
/// a backend (as `repro run` planned them). Recorded runs the plan does
/// not contain are left out of tables and figures.
#[derive(Debug, Clone, Args)]
pub(crate) struct PlanArgs {
    /// The scale (default: the one the results directory's provenance.json
    /// records, else the manifest's committed scale).
    #[arg(long)]
    pub scale: Option<String>,
    /// Override manifest keys, as `repro run --set` does.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Override the manifest's backend.
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
}

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Experiment name or path to a manifest (every experiment if left out)
    pub experiment: Option<String>,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Where its results are (default: results/<experiment>)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// One JSON document instead of text: the build, and each run's id,
    /// grid point, state and reason (or each experiment's counts).
    #[arg(long)]
    pub json: bool,
}

/// A planned run's state in the results directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Recorded by this build from this manifest.
    Current,
    /// Recorded, by another build or from another manifest (why).
    Stale(String),
    /// Not recorded, failed or interrupted (why).
    Missing(String),
}

impl Freshness {
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Freshness::Current => "current",
            Freshness::Stale(_) => "stale",
            Freshness::Missing(_) => "missing",
        }
    }
}

impl Freshness {
    /// Why a run is stale or missing (empty when current).
    pub(crate) fn reason(&self) -> &str {
        match self {
            Freshness::Current => "",
            Freshness::Stale(why) | Freshness::Missing(why) => why,
        }
    }
}

impl std::fmt::Display for Freshness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Freshness::Current => write!(f, "current"),
            Freshness::Stale(why) => write!(f, "stale: {why}"),
            Freshness::Missing(why) => write!(f, "missing: {why}"),
        }
    }
}

/// This invocation as a run's provenance records it: the command line
/// (arguments quoted where a shell would need it) and the resolved
/// manifest's hash at `scale` for `backend`.
pub(crate) fn invocation(m: &manifest::Manifest, scale: &str, backend: Backend) -> Invocation {
    let quote = |a: String| {
        let plain = !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_=./:,@+[]".contains(c));
        if plain {
            a
        } else {
            format!("'{}'", a.replace('\'', "'\\''"))
        }
    };
    Invocation {
        command: std::env::args().map(quote).collect::<Vec<_>>().join(" "),
        manifest_hash: m.hash(scale, backend),
    }
}

/// The first 12 characters of a source id or hash, for messages.
fn short(id: &str) -> String {
    match id.split_once('+') {
        Some((commit, dirty)) => format!("{}+{dirty}", commit.get(..12).unwrap_or(commit)),
        None => id.get(..12).unwrap_or(id).to_string(),
    }
}

/// Whether a run produced by the build `source` from the manifest `hash`
/// is current for `now` (this build and this invocation's manifest). The
/// one rule of staleness.
pub(crate) fn judge(source: &str, hash: &str, now: &Invocation) -> Freshness {
    let build = repro_build::BUILD.source;
    if source.is_empty() {
        Freshness::Stale("recorded without provenance (before it existed)".into())
    } else if build == "unknown" || source == "unknown" {
        Freshness::Stale("the source of this build or of the run is unknown (no git)".into())
    } else if source != build {
        Freshness::Stale(format!(
            "built from {}, this build is {}",
            short(source),
            short(build)
        ))
    } else if hash != now.manifest_hash {
        Freshness::Stale(format!(
            "planned from manifest {}, now {}",
            short(hash),
            short(&now.manifest_hash)
        ))
    } else {
        Freshness::Current
    }
}

/// The state of planned run `run` given the recorded runs.
pub(crate) fn freshness(run: &PlannedRun, recorded: &[RunRecord], now: &Invocation) -> Freshness {
    let text = |r: &RunRecord, k: &str| r.metrics.get(k).map_or("", Cell::text).to_string();
    let Some(r) = recorded.iter().find(|r| r.run_id == run.id) else {
        return match recorded.iter().find(|r| r.point == run.point) {
            Some(r) => Freshness::Stale(format!(
                "recorded with another configuration (run {})",
                r.run_id
            )),
            None => Freshness::Missing("never run".into()),
        };
    };
    match r.status() {
        Some(RunStatus::Failed) => Freshness::Missing("failed".into()),
        Some(RunStatus::NotRun) => Freshness::Missing("interrupted before it ran".into()),
        Some(RunStatus::Refused) => Freshness::Missing(format!(
            "refused: it needs {:.1} GB",
            r.metrics
                .get("memory_mb")
                .and_then(Cell::number)
                .unwrap_or(f64::NAN)
                / 1e3
        )),
        _ => judge(&text(r, "source"), &text(r, "manifest_hash"), now),
    }
}

/// Counts of each state.
fn counts(states: &[Freshness]) -> BTreeMap<&'static str, usize> {
    let mut c = BTreeMap::from([("current", 0), ("stale", 0), ("missing", 0)]);
    for s in states {
        *c.entry(s.word()).or_default() += 1;
    }
    c
}

/// Writes `out/provenance.json`: what produced the experiment's results
/// this time (build, host, command line, resolved manifest), and how many
/// of its recorded runs are current.
pub(crate) fn write_provenance(
    out: &Path,
    m: &manifest::Manifest,
    scale: &str,
    backend: Backend,
    now: &Invocation,
    runs: &[PlannedRun],
    recorded: &[RunRecord],
) -> Result<()> {
    let b = repro_build::BUILD;
    let states: Vec<Freshness> = runs.iter().map(|r| freshness(r, recorded, now)).collect();
    let mut sources: BTreeMap<String, usize> = BTreeMap::new();
    for r in recorded {
        let s = r.metrics.get("source").map_or("", Cell::text);
        *sources
            .entry(if s.is_empty() { "unrecorded" } else { s }.to_string())
            .or_default() += 1;
    }
    let written = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let json = serde_json::json!({
        "experiment": m.name,
        "scale": scale,
        "backend": backend.name(),
        "manifest_hash": now.manifest_hash,
        "command": now.command,
        "build": {
            "git_commit": b.commit,
            "git_dirty": b.dirty,
            "source": b.source,
            "rustc": b.rustc,
            "version": b.version,
        },
        "host": repro_runlog::host_name(),
        "written_unix_s": written,
        "planned_runs": counts(&states),
        "recorded_runs_by_source": sources,
    });
    crate::util::atomic::write(
        &out.join("provenance.json"),
        serde_json::to_string_pretty(&json)? + "\n",
    )
}

/// Text field `key` of `out/provenance.json`, if the file has it.
fn provenance_field(out: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(out.join("provenance.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json.get(key)?.as_str().map(str::to_string)
}

/// The scale `out/provenance.json` records, if any.
pub(crate) fn recorded_scale(out: &Path) -> Option<String> {
    provenance_field(out, "scale")
}

/// For results written before provenance.json existed: the scale whose
/// planned grid points most of the recorded runs match (smoke on a tie).
fn likely_scale(m: &manifest::Manifest, backend: Backend, recorded: &[RunRecord]) -> String {
    let matching = |scale: &str| {
        plan::expand(m, scale, backend).map_or(0, |runs| {
            recorded
                .iter()
                .filter(|r| runs.iter().any(|p| p.point == r.point))
                .count()
        })
    };
    let mut best = ("smoke".to_string(), matching("smoke"));
    for scale in m.scales.keys() {
        let n = matching(scale);
        if n > best.1 {
            best = (scale.clone(), n);
        }
    }
    best.0
}

/// One experiment's planned runs and their states.
struct Checked {
    manifest: manifest::Manifest,
    scale: String,
    states: Vec<(PlannedRun, Freshness)>,
    /// Recorded runs that are not in the plan.
    extra: usize,
}

/// One experiment's planned runs and their states, and how many recorded
/// runs are not in the plan.
fn check(path: &Path, args: &StatusArgs) -> Result<Checked> {
    let m = manifest::load(path, &args.plan.overrides)?;
    let backend = args.plan.backend.unwrap_or(m.backend);
    let committed = m.committed_scale().map(str::to_string);
    let out = match (&args.out, &args.plan.scale, &committed) {
        (Some(o), _, _) => o.clone(),
        (None, Some(s), _) => m.default_out(s),
        (None, None, Some(s)) => m.default_out(s),
        (None, None, None) => m.default_out(m.default_scale.as_deref().unwrap_or("smoke")),
    };
    let csv = out.join("runs.csv");
    let recorded = if csv.is_file() {
        results::read_csv(&csv)?
    } else {
        Vec::new()
    };
    let scale = match args.plan.scale.clone().or_else(|| recorded_scale(&out)) {
        Some(s) => s,
        None => likely_scale(&m, backend, &recorded),
    };
    if !m.scales.contains_key(&scale) {
        return Err(crate::spec::errors::DriverError::UnknownScale {
            experiment: m.name.clone(),
            scale,
            available: m.scales.keys().cloned().collect::<Vec<_>>().join(", "),
        }
        .into());
    }
    // a tuned experiment's runs follow from its recorded tuning
    let runs = crate::report::tune::recorded_plan(&m, &scale, backend, &out)?;
    let now = invocation(&m, &scale, backend);
    let extra = recorded
        .iter()
        .filter(|r| !runs.iter().any(|p| p.id == r.run_id || p.point == r.point))
        .count();
    let states = runs
        .into_iter()
        .map(|r| {
            let f = freshness(&r, &recorded, &now);
            (r, f)
        })
        .collect();
    Ok(Checked {
        manifest: m,
        scale,
        states,
        extra,
    })
}

/// `repro status EXPERIMENT`: each planned run's state.
fn status_of(name: &str, args: &StatusArgs, build: serde_json::Value) -> Result<()> {
    let path = manifest::locate(name)?;
    let Checked {
        manifest: m,
        scale,
        states,
        extra,
    } = check(&path, args)?;
    let words: Vec<Freshness> = states.iter().map(|(_, f)| f.clone()).collect();
    let c = counts(&words);
    if args.json {
        let runs: Vec<serde_json::Value> = states
            .iter()
            .map(|(r, f)| {
                serde_json::json!({
                    "id": r.id,
                    "point": r.point,
                    "state": f.word(),
                    "reason": f.reason(),
                })
            })
            .collect();
        let json = serde_json::json!({
            "build": build,
            "experiment": m.name,
            "scale": scale,
            "runs": runs,
            "counts": c,
            "recorded_not_planned": extra,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    for (r, f) in &states {
        println!("  {}  {:<40}  {f}", r.id, plan::describe(r));
    }
    println!(
        "{} at scale `{scale}`: {} current, {} stale, {} missing{}",
        m.name,
        c["current"],
        c["stale"],
        c["missing"],
        if extra > 0 {
            format!("; {extra} recorded runs are not in this plan")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// `repro status`: each experiment's counts of current, stale and missing
/// runs.
fn status_of_all(args: &StatusArgs, build: serde_json::Value) -> Result<()> {
    let mut experiments = Vec::new();
    let mut errors = 0;
    for path in manifest::all_manifests()? {
        match check(&path, args) {
            Ok(Checked {
                manifest: m,
                scale,
                states,
                ..
            }) => {
                let words: Vec<Freshness> = states.into_iter().map(|(_, f)| f).collect();
                let c = counts(&words);
                if args.json {
                    experiments.push(serde_json::json!({
                        "experiment": m.name,
                        "scale": scale,
                        "counts": c,
                    }));
                } else {
                    println!(
                        "{:<24} {:<6} {:>4} current {:>4} stale {:>4} missing",
                        m.name, scale, c["current"], c["stale"], c["missing"]
                    );
                }
            }
            Err(e) if args.json => {
                errors += 1;
                experiments.push(serde_json::json!({
                    "path": path.display().to_string(),
                    "error": format!("{e:#}"),
                }));
            }
            Err(e) => {
                errors += 1;
                eprintln!("{:<24} error: {e:#}", path.display());
            }
        }
    }
    if args.json {
        let json = serde_json::json!({ "build": build, "experiments": experiments });
        println!("{}", serde_json::to_string_pretty(&json)?);
    }
    if errors > 0 {
        anyhow::bail!("{errors} experiments could not be checked (above)");
    }
    Ok(())
}

/// `repro status`: every planned run of one experiment, or a line per
/// experiment; `--json` says the same as one document.
pub(crate) fn status(args: &StatusArgs) -> Result<()> {
    let build = serde_json::json!({
        "version": repro_build::VERSION,
        "source": repro_build::BUILD.source,
        "git_commit": repro_build::BUILD.commit,
        "git_dirty": repro_build::BUILD.dirty,
    });
    if !args.json {
        println!("build: {}", repro_build::VERSION);
    }
    if let Some(name) = &args.experiment {
        return status_of(name, args, build);
    }
    if args.out.is_some() {
        anyhow::bail!("--out needs an experiment: `repro status <EXPERIMENT> --out DIR`");
    }
    status_of_all(args, build)
}

/// The manifest `experiment` with `plan`'s overrides, its results
/// directory and the recorded runs its plan contains.
pub(crate) fn planned_results(
    experiment: &str,
    out: &Option<PathBuf>,
    plan: &PlanArgs,
) -> Result<(manifest::Manifest, PathBuf, Vec<RunRecord>)> {
    let r = recorded(experiment, out, plan)?;
    Ok((r.manifest, r.out, r.rows))
}

/// An experiment's recorded results as [`planned_results`] reads them,
/// with the scale read and the plan.
pub(crate) struct Recorded {
    pub manifest: manifest::Manifest,
    pub out: PathBuf,
    /// The recorded runs of the plan, health judged.
    pub rows: Vec<RunRecord>,
    pub scale: String,
    /// The backend the runs ran on: `--backend`, else the one
    /// provenance.json records, else the manifest's.
    pub backend: Backend,
    /// Each planned run, with its parameters.
    pub plan: Vec<crate::spec::plan::PlannedRun>,
}

/// The backend a results directory's provenance.json records.
pub(crate) fn recorded_backend(out: &Path) -> Option<Backend> {
    let name = provenance_field(out, "backend")?;
    [Backend::Sim, Backend::Mpi, Backend::InProcess]
        .into_iter()
        .find(|b| b.name() == name)
}

/// [`planned_results`], with the scale read and the plan.
pub(crate) fn recorded(
    experiment: &str,
    out: &Option<PathBuf>,
    plan: &PlanArgs,
) -> Result<Recorded> {
    let m = manifest::load(&manifest::locate(experiment)?, &plan.overrides)?;
    let (scale, out) = match (&plan.scale, out) {
        (_, Some(o)) => (
            plan.scale
                .clone()
                .or_else(|| recorded_scale(o))
                .unwrap_or_else(|| read_scale(&m, &None)),
            o.clone(),
        ),
        (Some(asked), None) => (asked.clone(), m.default_out(asked)),
        // the committed directory, at the scale it records
        (None, None) => {
            let out = m.default_out(&read_scale(&m, &None));
            let scale = recorded_scale(&out).unwrap_or_else(|| read_scale(&m, &None));
            (scale, out)
        }
    };
    // the runs' ids depend on the backend they ran on
    let backend = plan
        .backend
        .or_else(|| recorded_backend(&out))
        .unwrap_or(m.backend);
    let rows = results::read_csv(&out.join("runs.csv"))?;
    let rows = results::with_first_losses(rows, &out.join("curves.csv"))?;
    let runs = crate::report::tune::recorded_plan(&m, &scale, backend, &out)?;
    let planned = results::planned(&rows, &runs, &m.health);
    let left_out = rows.len() - planned.len();
    if left_out > 0 {
        crate::util::progress::note(&format!(
            "note: {left_out} of {} recorded runs in {} are not in the plan of `{}` at scale `{scale}` and are left out (`repro status` lists the plan)",
            rows.len(),
            out.join("runs.csv").display(),
            m.name
        ));
    }
    Ok(Recorded {
        manifest: crate::spec::plan::titled(&m, &scale)?,
        out,
        rows: planned,
        scale,
        backend,
        plan: runs,
    })
}

/// The scale to read `m`'s results at: `asked`, else the committed
/// scale, else the default scale, else smoke.
pub(crate) fn read_scale(m: &manifest::Manifest, asked: &Option<String>) -> String {
    asked
        .clone()
        .or_else(|| m.committed_scale().map(str::to_string))
        .or_else(|| m.default_scale.clone())
        .unwrap_or_else(|| "smoke".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Invocation {
        Invocation {
            command: "repro run x".into(),
            manifest_hash: "m1".into(),
        }
    }

    #[test]
    fn a_run_is_current_only_from_this_build_and_manifest() {
        let here = repro_build::BUILD.source;
        let now = now();
        if here == "unknown" {
            // no git: nothing can be shown current
            assert!(matches!(judge(here, "m1", &now), Freshness::Stale(_)));
            return;
        }
        assert_eq!(judge(here, "m1", &now), Freshness::Current);
        let older = judge("0123456789abcdef0123", "m1", &now);
        assert!(
            matches!(&older, Freshness::Stale(why) if why.contains("built from 0123456789ab")),
            "{older}"
        );
        let other = judge(here, "m0", &now);
        assert!(
            matches!(&other, Freshness::Stale(why) if why.contains("manifest")),
            "{other}"
        );
        assert!(matches!(judge("", "m1", &now), Freshness::Stale(_)));
        // the same commit with other changes is another source
        let dirty = format!("{}+dirty.00000000", here.split('+').next().unwrap());
        if dirty != here {
            assert!(matches!(judge(&dirty, "m1", &now), Freshness::Stale(_)));
        }
    }
}
