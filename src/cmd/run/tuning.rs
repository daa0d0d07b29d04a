//! `repro run`'s tuning: the tuning runs first, then the grid planned
//! with each method's choice, and the second look beyond an edge.

use super::*;

/// Runs the tuning into `out/tuning`, writes tuning.md and tuning.csv, and
/// plans the grid with each method's chosen configuration: the grid's runs
/// and the tuning runs that failed; `None` when interrupted.
pub(super) fn tune_first(
    x: Job<'_>,
    spec: &manifest::TuneSpec,
    tuning: &[PlannedRun],
    grid: &[PlannedRun],
    launcher: &Launcher,
) -> Result<Option<(Vec<PlannedRun>, usize)>> {
    let dir = x.tuning_dir();
    let done = execute(x.into_dir(&dir), tuning, launcher.clone(), "tuning")?;
    if crate::util::signals::interrupted() {
        eprintln!(
            "interrupted while tuning: kept the finished tuning runs in {}",
            dir.join(Entry::Runs.name()).display()
        );
        return Ok(None);
    }
    let selection = tune::select_planned(spec, tuning, &done.merged, &x.m.health);
    let Some((selection, more_failed, refused, (all, merged))) =
        extend_tuning(x, spec, tuning, selection, launcher, done.merged.clone())?
    else {
        return Ok(None);
    };
    let failed = done.failed + more_failed;
    tune::write_outputs(
        x.m,
        spec,
        x.out,
        &tune::final_seeds(grid),
        &selection,
        &refused,
        &results::planned(&merged, &all, &x.m.health),
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
    let runs = plan::expand_configured(x.m, x.scale, x.backend, x.cfg.limits, None, &|p| {
        Some(selection.chosen_for(spec, p).unwrap_or_default())
    })?;
    Ok(Some((runs, failed)))
}

/// The design warnings of each experiment's plan (`experiment::design`), said
/// before anything runs.
pub(super) fn warn_design<'a>(plans: impl Iterator<Item = (&'a String, &'a Vec<PlannedRun>)>) {
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
pub(super) fn extend_tuning(
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
    let dir = x.tuning_dir();
    let more = execute(
        x.into_dir(&dir),
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
pub(super) type SecondLook = (
    tune::Selection,
    usize,
    Vec<String>,
    (Vec<PlannedRun>, Vec<RunRecord>),
);

/// The dry run's lines about a tuned experiment's grid: its runs, whose
/// ids follow from the configurations the tuning chooses; for a chunk,
/// that they wait for every chunk.
pub(super) fn say_grid_after_tuning(
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
