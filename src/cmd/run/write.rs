//! What `repro run` writes when an experiment's runs end: runs.csv and
//! runs.parquet, the table, claims and figure, provenance.json, and the
//! `--json` summary.

use super::*;

/// Writes runs.csv and runs.parquet (every run of the directory), the
/// table, claims and figure (this plan's runs only) and provenance.json;
/// the figure's files.
pub(super) fn write_records(
    x: Job<'_>,
    done: &Executed,
    runs: &[PlannedRun],
) -> Result<Vec<PathBuf>> {
    let quiet = crate::util::progress::verbosity() == crate::util::progress::Verbosity::Quiet;
    let merged = results::judged(done.merged.clone(), runs, &x.m.health);
    frames::write_runs(x.out, &merged)?;
    let tuning = crate::report::tune::recorded_tuning(x.m, x.scale, x.backend, x.out)?;
    let figures = write_results(
        x.m,
        x.out,
        (
            &results::planned(&merged, runs, &x.m.health),
            tuning.as_ref(),
        ),
        x.backend,
        !x.cfg.json && !quiet,
    )?;
    let launcher = match x.backend {
        Backend::Sim => "none (simulator)".to_string(),
        _ => x.cfg.launcher(x.backend)?.describe(),
    };
    freshness::write_provenance(
        x.out,
        (x.m, x.overrides),
        x.scale,
        (x.backend, &launcher),
        &done.invocation,
        runs,
        &done.merged,
    )?;
    Ok(figures)
}

/// What one experiment's `repro run` did, for its JSON summary.
pub(super) struct Ran<'a> {
    /// Every run of the directory after this one.
    pub(super) merged: &'a [RunRecord],
    pub(super) ran: usize,
    pub(super) failed: usize,
    pub(super) kept: usize,
    pub(super) wall_s: f64,
    pub(super) figures: &'a [PathBuf],
}

/// `--json`'s summary of one experiment: runs by status and the files.
pub(super) fn summary_json(x: Job<'_>, ran: &Ran<'_>) -> serde_json::Value {
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    for r in ran.merged {
        let status = r.status().map_or("", RunStatus::text);
        *by_status.entry(status.to_string()).or_default() += 1;
    }
    let file = |name: &str| {
        let p = x.out.join(name);
        p.is_file().then(|| p.display().to_string())
    };
    let json = serde_json::json!({
        "experiment": x.m.name,
        "scale": x.scale,
        "backend": x.backend.name(),
        "out": x.out.display().to_string(),
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
