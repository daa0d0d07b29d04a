//! `repro table`: the table and the claims' verdicts, redrawn from the
//! recorded runs of the plan, each run's health judged again by this
//! build's rule and written back where it changed.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::cmd::status;
use crate::records::frames::RunsFrame;
use crate::records::results::{self, RunRecord};
use crate::records::results_dir::Entry;
use crate::report::outputs::{write_claims, write_table};
use crate::report::recorded::{self, Recorded};
use crate::report::tune;

/// A table's output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TableFormat {
    Md,
    Latex,
    Csv,
}

/// Options of `repro table`.
#[derive(Debug, Args)]
pub(crate) struct TableArgs {
    /// Experiment name or path to a manifest.
    pub experiment: String,
    /// Markdown, LaTeX (booktabs tabular) or CSV.
    #[arg(long, value_enum, default_value = "md")]
    pub format: TableFormat,
    /// Results directory, e.g. a run's runs/<experiment>/<scale>/latest
    /// (default: the record results/<experiment> at its scale, the newest
    /// run directory at another). The experiment may be such a directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub plan: status::PlanArgs,
}

/// `repro table`: the table (and the claims' verdicts) from runs.csv,
/// written beside it and printed; runs.csv, tuning/runs.csv, tuning.md
/// and tuning.csv re-judged first.
pub(crate) fn table(args: &TableArgs) -> Result<()> {
    let r = recorded::recorded(&args.experiment, &args.out, &args.plan.choice())?;
    let tuning = rejudge(&r)?;
    let table = write_table(&r.manifest, &r.out, &RunsFrame::new(&r.rows)?)?;
    let claims = write_claims(&r.manifest, &r.out, &r.rows, tuning.as_ref())?;
    // provenance.json names the build that judged, beside the one that ran
    crate::records::results_dir::ResultsDir::new(&r.out).record_judged()?;
    crate::util::sudo::give(&r.out);
    print!(
        "{}",
        match args.format {
            TableFormat::Md => table.markdown(),
            TableFormat::Latex => table.latex(),
            TableFormat::Csv => table.csv()?,
        }
    );
    // the verdicts follow a Markdown table (they are in claims.* always)
    if let (TableFormat::Md, Some(claims)) = (args.format, claims) {
        print!("\n{claims}");
    }
    Ok(())
}

/// Writes `dir`'s runs.csv and runs.parquet again with the runs of `plan`
/// judged by this build's rule, when any judgement changed; how many
/// rows changed.
fn rejudge_dir(
    dir: &std::path::Path,
    plan: &[crate::experiment::plan::PlannedRun],
    health: &crate::experiment::manifest::HealthSpec,
) -> Result<usize> {
    let csv = dir.join(Entry::Runs.name());
    let recorded =
        results::with_first_losses(results::read_csv(&csv)?, &dir.join(Entry::Curves.name()))?;
    let judged = results::judged(recorded.clone(), plan, health);
    // an empty cell reads back as no cell: compare what runs.csv would hold
    let written = |r: &RunRecord| -> Vec<(String, String)> {
        r.metrics
            .iter()
            .map(|(k, c)| (k.clone(), c.csv(k)))
            .filter(|(_, v)| !v.is_empty())
            .collect()
    };
    let changed = judged
        .iter()
        .zip(&recorded)
        .filter(|(a, b)| written(a) != written(b))
        .count();
    if changed > 0 {
        crate::records::frames::write_runs(dir, &judged)?;
        crate::util::progress::note(&format!(
            "re-judged: {changed} of {} rows of {} have their health written by this build's rule",
            judged.len(),
            csv.display()
        ));
    }
    Ok(changed)
}

/// The recorded runs' health judged again and written back (runs.csv,
/// and for a tuned experiment tuning/runs.csv, tuning.md and tuning.csv):
/// a committed result is re-judged without rerunning. The tuning runs of
/// the search, judged (as `tune::recorded_tuning` reads them).
fn rejudge(r: &Recorded) -> Result<Option<tune::TuningRecord>> {
    let m = &r.manifest;
    rejudge_dir(&r.out, &r.plan, &m.health)?;
    let Some(spec) = &m.tune else {
        return Ok(None);
    };
    let dir = r.out.join(Entry::TuningDir.name());
    if !dir.join(Entry::Runs.name()).is_file() {
        return Ok(None);
    }
    let recorded = results::read_csv(&dir.join(Entry::Runs.name()))?;
    let (tuning, selection, refused) = tune::search(m, spec, &r.scale, r.backend, &recorded)?;
    rejudge_dir(&dir, &tuning, &m.health)?;
    let judged = results::planned(&recorded, &tuning, &m.health);
    tune::write_outputs(
        m,
        spec,
        &r.out,
        &tune::final_seeds(&r.plan),
        &selection,
        &refused,
        &judged,
    )?;
    Ok(Some(
        tune::TuningRecord::new(spec, selection, judged).in_dir(dir),
    ))
}
