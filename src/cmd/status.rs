//! `repro status`: every planned run of an experiment as current, stale or
//! missing (`records::freshness` says which), or each experiment's counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;

use crate::experiment::manifest::{self, Backend};
use crate::experiment::plan::{self, PlannedRun};
use crate::records::freshness::{self, Freshness};
use crate::records::results::{self, RunRecord};
use crate::records::results_dir::{Provenance, ResultsDir};
use crate::report::recorded::PlanChoice;

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

impl PlanArgs {
    /// The plan these arguments choose.
    pub(crate) fn choice(&self) -> PlanChoice {
        PlanChoice {
            scale: self.scale.clone(),
            overrides: self.overrides.clone(),
            backend: self.backend,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub(crate) struct StatusArgs {
    /// Experiment name, path to a manifest, or a results directory such as
    /// runs/<experiment>/<scale>/latest (every experiment if left out)
    pub experiment: Option<String>,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// Where its results are (default: the record results/<experiment> at
    /// its scale, the newest run directory at another)
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// One JSON document instead of text: the build, and each run's id,
    /// grid point, state and reason (or each experiment's counts).
    #[arg(long)]
    pub json: bool,
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
    /// The results directory read.
    out: PathBuf,
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
    let scale = match args
        .plan
        .scale
        .clone()
        .or_else(|| ResultsDir::new(&out).recorded_scale())
    {
        Some(s) => s,
        None => likely_scale(&m, backend, &recorded),
    };
    if !m.scales.contains_key(&scale) {
        return Err(crate::experiment::errors::DriverError::UnknownScale {
            experiment: m.name.clone(),
            scale,
            available: m.scales.keys().cloned().collect::<Vec<_>>().join(", "),
        }
        .into());
    }
    // a tuned experiment's runs follow from its recorded tuning
    let runs = crate::report::tune::recorded_plan(&m, &scale, backend, &out)?;
    let now = freshness::invocation(&m, &scale, backend);
    let extra = recorded
        .iter()
        .filter(|r| !runs.iter().any(|p| p.id == r.run_id || p.point == r.point))
        .count();
    let states = runs
        .into_iter()
        .map(|r| {
            let f = freshness::freshness(&r, &recorded, &now);
            (r, f)
        })
        .collect();
    Ok(Checked {
        manifest: m,
        scale,
        states,
        extra,
        out,
    })
}

/// What a record needs, from its runs' states and who judged them: a
/// rerun (stale or missing runs, by the code that computes a run or the
/// manifest), a re-judging only (current runs judged by other judging
/// code), or nothing ("current"; "re-judged, current" where `repro table`
/// re-judged them with this build's judging code after they ran).
pub(crate) fn needs(c: &BTreeMap<&str, usize>, p: Option<&Provenance>, name: &str) -> String {
    let rerun = c["stale"] + c["missing"];
    if rerun > 0 {
        return format!("{rerun} runs to rerun (`repro run {name} --resume` runs them)");
    }
    let here = repro_build::BUILD.judge;
    let Some(p) = p else {
        return "current".into();
    };
    let judged = p.judged_by.as_ref().unwrap_or(&p.build);
    if judged.judge != here || here == "unknown" {
        return format!(
            "current runs, judged by other judging code ({}): `repro table {name}` re-judges them, \
             no rerun",
            if judged.judge.is_empty() {
                "unrecorded"
            } else {
                &judged.judge
            }
        );
    }
    if p.build.judge != here {
        "re-judged, current".into()
    } else {
        "current".into()
    }
}

/// `repro status EXPERIMENT`: each planned run's state.
fn status_of(name: &str, args: &StatusArgs, build: serde_json::Value) -> Result<()> {
    let path = manifest::locate(name)?;
    let Checked {
        manifest: m,
        scale,
        states,
        extra,
        out,
    } = check(&path, args)?;
    // the Slurm job that writes the directory, where `repro submit` made one
    let job = crate::launch::slurm::state(&out);
    let array = crate::launch::slurm::array_state(&out);
    let words: Vec<Freshness> = states.iter().map(|(_, f)| f.clone()).collect();
    let c = freshness::counts(&words);
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
            "needs": needs(&c, ResultsDir::new(&out).provenance_or_none().as_ref(), &m.name),
            "recorded_not_planned": extra,
            "job": job.as_ref().map(|j| serde_json::json!({
                "id": j.id,
                "state": j.state,
                "from": j.from,
                "log": j.log.display().to_string(),
            })),
            "array": array.as_ref().map(|(id, n, states)| serde_json::json!({
                "id": id,
                "chunks": n,
                "states": states,
            })),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    for (r, f) in &states {
        println!("  {}  {:<40}  {f}", r.id, plan::describe(r));
    }
    println!(
        "{} at scale `{scale}`: {} current, {} stale, {} missing{}; {}",
        m.name,
        c["current"],
        c["stale"],
        c["missing"],
        if extra > 0 {
            format!("; {extra} recorded runs are not in this plan")
        } else {
            String::new()
        },
        needs(
            &c,
            ResultsDir::new(&out).provenance_or_none().as_ref(),
            &m.name
        )
    );
    print_jobs(&out, array.as_ref(), job.as_ref());
    Ok(())
}

/// The Slurm job array and job that write `out`, where `repro submit`
/// made them: their states, and for a job that did not complete, its log
/// and how to resume.
fn print_jobs(
    out: &std::path::Path,
    array: Option<&(String, usize, String)>,
    job: Option<&crate::launch::slurm::JobState>,
) {
    if let Some((id, n, states)) = array {
        println!(
            "Slurm job array {id} ({n} chunks into {}): {states}",
            out.join(crate::records::results_dir::Entry::Chunks.name())
                .display()
        );
    }
    if let Some(j) = job {
        let mut line = format!("Slurm job {}: {}", j.id, j.state);
        if let Some(note) = j.note() {
            line.push_str(&format!(" ({note})"));
        }
        if j.failed() {
            line.push_str(&format!(
                "; its log: {}; `repro submit --resume {}` runs what is missing",
                j.log.display(),
                out.display()
            ));
        }
        println!("{line}");
    }
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
                out,
                ..
            }) => {
                let words: Vec<Freshness> = states.into_iter().map(|(_, f)| f).collect();
                let c = freshness::counts(&words);
                let needs = needs(
                    &c,
                    ResultsDir::new(&out).provenance_or_none().as_ref(),
                    &m.name,
                );
                if args.json {
                    experiments.push(serde_json::json!({
                        "experiment": m.name,
                        "scale": scale,
                        "counts": c,
                        "needs": needs,
                    }));
                } else {
                    println!(
                        "{:<24} {:<6} {:>4} current {:>4} stale {:>4} missing  {needs}",
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

/// A results directory named for the experiment: the experiment its
/// provenance.json names, read there, with the overrides it ran with
/// where the command line gives none.
fn given_dir(name: &str, args: &StatusArgs) -> Result<Option<(String, StatusArgs)>> {
    let dir = Path::new(name);
    let Some((experiment, plan)) =
        crate::report::recorded::results_dir_plan(dir, &args.plan.choice())?
    else {
        return Ok(None);
    };
    let mut args = args.clone();
    args.out = Some(dir.to_path_buf());
    args.plan.overrides = plan.overrides;
    Ok(Some((experiment, args)))
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
        return match given_dir(name, args)? {
            Some((name, args)) => status_of(&name, &args, build),
            None => status_of(name, args, build),
        };
    }
    if args.out.is_some() {
        anyhow::bail!("--out needs an experiment: `repro status <EXPERIMENT> --out DIR`");
    }
    status_of_all(args, build)
}
