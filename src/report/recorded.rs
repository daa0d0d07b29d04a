//! An experiment's recorded results, read for a table, a figure, a report
//! or an export: the manifest with its overrides, the results directory,
//! the scale and backend the runs were recorded at (provenance.json), and
//! the recorded runs its plan contains, health judged.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::experiment::manifest::{self, Backend};
use crate::records::results::{self, RunRecord};
use crate::records::results_dir::ResultsDir;

/// Which plan recorded runs are held against: the manifest at a scale,
/// with overrides, for a backend (as `repro run` planned them). Recorded
/// runs the plan does not contain are left out of tables and figures.
#[derive(Debug, Clone, Default)]
pub(crate) struct PlanChoice {
    /// The scale (None: the one the results directory's provenance.json
    /// records, else the manifest's committed scale).
    pub scale: Option<String>,
    /// Manifest keys overridden, as `repro run --set` does.
    pub overrides: Vec<String>,
    /// The backend (None: the recorded one, else the manifest's).
    pub backend: Option<Backend>,
}

/// The manifest `experiment` with `plan`'s overrides, its results
/// directory and the recorded runs its plan contains.
pub(crate) fn planned_results(
    experiment: &str,
    out: &Option<PathBuf>,
    plan: &PlanChoice,
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
    pub plan: Vec<crate::experiment::plan::PlannedRun>,
}

/// [`planned_results`], with the scale read and the plan.
pub(crate) fn recorded(
    experiment: &str,
    out: &Option<PathBuf>,
    plan: &PlanChoice,
) -> Result<Recorded> {
    let (experiment, out, plan) = &given_dir(experiment, out, plan)?;
    let mut m = manifest::load(&manifest::locate(experiment)?, &plan.overrides)?;
    let (scale, out) = match (&plan.scale, out) {
        (_, Some(o)) => (
            plan.scale
                .clone()
                .or_else(|| ResultsDir::new(o).recorded_scale())
                .unwrap_or_else(|| read_scale(&m, &None)),
            o.clone(),
        ),
        (Some(asked), None) => (asked.clone(), m.default_out(asked)),
        // the committed directory, at the scale it records
        (None, None) => {
            let out = m.default_out(&read_scale(&m, &None));
            let scale = ResultsDir::new(&out)
                .recorded_scale()
                .unwrap_or_else(|| read_scale(&m, &None));
            (scale, out)
        }
    };
    crate::util::atomic::check_not_written(&out, "read it")?;
    let dir = ResultsDir::new(&out);
    // the runs' ids depend on the backend they ran on
    let backend = plan
        .backend
        .or_else(|| dir.recorded_backend())
        .unwrap_or(m.backend);
    if crate::report::subset::restricts(&plan.overrides) {
        let points: Vec<_> = crate::experiment::plan::expand(&m, &scale, backend)?
            .into_iter()
            .map(|r| r.point)
            .collect();
        for n in crate::report::subset::narrow(&mut m, &plan.overrides, &points) {
            crate::util::progress::note(&format!("note: {n}"));
        }
    }
    let rows = results::read_csv(&dir.runs_csv())?;
    check_columns(&m, &dir.runs_csv(), &rows)?;
    let rows = results::with_first_losses(rows, &dir.curves_csv())?;
    let runs = crate::report::tune::recorded_plan(&m, &scale, backend, &out)?;
    let planned = results::planned(&rows, &runs, &m.health);
    let left_out = rows.len() - planned.len();
    if left_out > 0 {
        crate::util::progress::note(&format!(
            "note: {left_out} of {} recorded runs in {} are not in the plan of `{}` at scale `{scale}` and are left out (`repro status` lists the plan)",
            rows.len(),
            dir.runs_csv().display(),
            m.name
        ));
    }
    Ok(Recorded {
        manifest: crate::experiment::plan::titled(&m, &scale)?,
        out,
        rows: planned,
        scale,
        backend,
        plan: runs,
    })
}

/// Refuses a runs.csv without the column of the table's metric or of one
/// of its grouping keys: a column removed is named, never read as values
/// missing ("not run").
fn check_columns(m: &manifest::Manifest, csv: &Path, rows: &[RunRecord]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let t = &m.table;
    let needed: Vec<&str> = std::iter::once(t.value.as_str())
        .chain(t.rows.iter().map(String::as_str))
        .chain(t.cols.as_deref())
        .collect();
    let missing = results::missing_columns(csv, &needed)?;
    if !missing.is_empty() {
        anyhow::bail!(
            "{} has no column {}, which the table of `{}` reads: it is not the runs.csv this \
             experiment wrote (restore it, or rerun)",
            csv.display(),
            missing
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", "),
            m.name
        );
    }
    Ok(())
}

/// A results directory named where an experiment is expected (`repro
/// table runs/quickstart/cpu/latest`): the experiment its provenance.json
/// names, and `plan` with the overrides it ran with where `plan` gives
/// none, so the plan is the one that ran. None where `dir` is not one.
pub(crate) fn results_dir_plan(
    dir: &Path,
    plan: &PlanChoice,
) -> Result<Option<(String, PlanChoice)>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let Some(p) = ResultsDir::new(dir).provenance()? else {
        if manifest::plain_name(&dir.to_string_lossy()) {
            // a folder here named as an experiment is: the experiment
            return Ok(None);
        }
        crate::util::atomic::check_not_written(dir, "read it")?;
        anyhow::bail!(
            "{} is a directory without a provenance.json: not a results directory `repro run` \
             wrote (name a run directory, e.g. runs/quickstart/cpu/latest, or an experiment)",
            dir.display()
        );
    };
    let file = ResultsDir::new(dir).provenance_path();
    // a record names its experiment; it never brings a manifest of its own
    if p.experiment.is_empty() {
        anyhow::bail!(
            "{} names no experiment: it is not a provenance record repro wrote (rewrite it with \
             `repro table EXPERIMENT --out {}`)",
            file.display(),
            dir.display()
        );
    }
    if !manifest::plain_name(&p.experiment) {
        anyhow::bail!(
            "{} names the experiment `{}`, which is not an experiment's name (letters, digits, \
             `-`, `_`): a record names one of the project's manifests, never a path",
            file.display(),
            crate::util::text::shown(&p.experiment)
        );
    }
    if let Some(o) = p.overrides.iter().find(|o| judges(o)) {
        anyhow::bail!(
            "{} records the override `{}`, which changes how results are judged: verify and \
             the claims judge by the manifest's own margins and levels (remove it, or write the \
             margin into the manifest)",
            file.display(),
            crate::util::text::shown(o)
        );
    }
    let mut plan = plan.clone();
    if plan.overrides.is_empty() {
        plan.overrides = p.overrides;
    }
    Ok(Some((p.experiment, plan)))
}

/// Whether an override `KEY=VALUE` changes how results are judged
/// (`verify.margin`, anything under `verify`): a record's overrides
/// choose what ran, never the bar it is held to.
pub(crate) fn judges(setting: &str) -> bool {
    let key = setting.split_once('=').map_or(setting, |(k, _)| k).trim();
    key == "verify" || key.starts_with("verify.")
}

/// [`results_dir_plan`] of `experiment` where no `--out` is given.
fn given_dir(
    experiment: &str,
    out: &Option<PathBuf>,
    plan: &PlanChoice,
) -> Result<(String, Option<PathBuf>, PlanChoice)> {
    let dir = PathBuf::from(experiment);
    match out {
        None => match results_dir_plan(&dir, plan)? {
            Some((name, plan)) => Ok((name, Some(dir), plan)),
            None => Ok((experiment.to_string(), None, plan.clone())),
        },
        Some(_) => Ok((experiment.to_string(), out.clone(), plan.clone())),
    }
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
