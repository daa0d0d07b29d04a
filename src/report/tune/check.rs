//! Plan-time checks of a `tune` section: every space reaches as far for
//! every method, the budget covers each axis, and the split is sound.

use super::*;

/// Whether a larger value of the spec's metric is better.
pub(super) fn higher(spec: &TuneSpec) -> bool {
    spec.higher_is_better
        .unwrap_or_else(|| crate::records::metrics::is_accuracy(&spec.metric))
}

/// Checks the `tune` section at plan time against the final runs' grid
/// points: a numeric metric not measured on the test set, tuning seeds
/// disjoint from the grid's, a known key and known methods, a budget, and
/// a validation split where the metric needs one. The error is the path in
/// the manifest and what is wrong.
pub(crate) fn check(
    spec: &TuneSpec,
    backend: Backend,
    points: &[BTreeMap<String, String>],
) -> Result<(), (String, String)> {
    let metric = spec.metric.as_str();
    if !METRICS.contains(&metric) || kind(metric) == Kind::Text {
        return err("metric", format!("`{metric}` is not a numeric run metric"));
    }
    if metric.contains("test") {
        return err(
            "metric",
            format!(
                "`{metric}` is measured on the test set, which must never choose; select on a validation metric (val_accuracy, val_loss) with `tune.validation`"
            ),
        );
    }
    if spec.budget == 0 {
        return err(
            "budget",
            "give at least one configuration per method".into(),
        );
    }
    if spec.seeds.is_empty() {
        return err("seeds", "give at least one tuning seed".into());
    }
    check_grid(spec, points)?;
    check_space(spec, points)?;
    check_confirm(spec, points)?;
    check_split(spec, backend)
}

/// A `tune` section's error: the manifest path below `tune` and why.
pub(super) fn err(k: &str, m: String) -> Result<(), (String, String)> {
    Err((format!("tune.{k}"), m))
}

/// The grid has the seed axis and the tuned key, no configuration key, and
/// none of the tuning seeds among its final seeds.
pub(super) fn check_grid(
    spec: &TuneSpec,
    points: &[BTreeMap<String, String>],
) -> Result<(), (String, String)> {
    let keys: Vec<&String> = points
        .first()
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    if keys.iter().any(|k| *k == CONFIG_KEY) {
        return err(
            "",
            format!("the grid has a `{CONFIG_KEY}` key, which a tuned run's configuration takes"),
        );
    }
    if !keys.iter().any(|k| *k == SEED_KEY) {
        return err(
            "seeds",
            format!(
                "the grid needs a `{SEED_KEY}` axis: the final runs' seeds, kept apart from the tuning seeds"
            ),
        );
    }
    if !keys.iter().any(|k| **k == spec.key) {
        return err("key", format!("`{}` is not a grid key", spec.key));
    }
    let finals: Vec<&str> = points
        .iter()
        .filter_map(|p| p.get(SEED_KEY).map(String::as_str))
        .collect();
    if let Some(s) = spec
        .seeds
        .iter()
        .map(plan::text)
        .find(|s| finals.contains(&s.as_str()))
    {
        return err(
            "seeds",
            format!("seed {s} is also a final seed: a seed used to choose must not report"),
        );
    }
    Ok(())
}

/// Every method of the search space is a value of the tuned key, with
/// values to try.
pub(super) fn check_space(
    spec: &TuneSpec,
    points: &[BTreeMap<String, String>],
) -> Result<(), (String, String)> {
    for method in spec.space.keys() {
        // with `algorithm` as the key any algorithm the suite knows is fine
        // (a subset rerun plans only some); otherwise a value of the grid
        let known = if spec.key == "algorithm" {
            repro_algos::ALGORITHM_NAMES
                .iter()
                .chain(&repro_algos::ASYNC_ALGORITHM_NAMES)
                .any(|a| a == method)
        } else {
            points.iter().any(|p| p.get(&spec.key) == Some(method))
        };
        if !known {
            return err(
                &format!("space.{method}"),
                format!(
                    "`{method}` is no value of grid key `{}` at this scale",
                    spec.key
                ),
            );
        }
    }
    for (method, space) in &spec.space {
        for (param, axis) in space {
            let problem = match axis {
                Axis::Values(v) if v.is_empty() => Some("no values to try".to_string()),
                Axis::Values(_) => None,
                Axis::Range(r) => r.problem(),
            };
            if let Some(p) = problem {
                return err(&format!("space.{method}.{param}"), p);
            }
        }
        let ranged = space.values().any(|a| matches!(a, Axis::Range(_)));
        if ranged && space.len() > MAX_AXES {
            return err(
                &format!("space.{method}"),
                format!(
                    "{} axes: a space with a range takes at most {MAX_AXES}",
                    space.len()
                ),
            );
        }
        let needed = MIN_PER_AXIS * space.len();
        if ranged && spec.budget < needed {
            return err(
                "budget",
                format!(
                    "{method}'s range space has {} tuned values, which take at least {needed} configurations ({MIN_PER_AXIS} a value); the budget is {}",
                    space.len(),
                    spec.budget
                ),
            );
        }
    }
    Ok(())
}

/// The fewest configurations a space with a range draws per tuned value.
pub(crate) const MIN_PER_AXIS: usize = 6;

/// `tune.confirm`: a few of each setting's best, on seeds of its own.
pub(super) fn check_confirm(
    spec: &TuneSpec,
    points: &[BTreeMap<String, String>],
) -> Result<(), (String, String)> {
    if !(-1.0..1.0).contains(&spec.chance_margin) {
        return err(
            "chance_margin",
            format!(
                "{} is not a share of accuracy in [-1, 1) (-1 judges no setting at chance)",
                spec.chance_margin
            ),
        );
    }
    if let Some(w) = &spec.compare_with {
        if !spec.space.contains_key(&w.method) {
            return err(
                "compare_with.method",
                format!("`{}` has no search space to compare", w.method),
            );
        }
        if !crate::experiment::manifest::plain_name(&w.experiment) {
            return err(
                "compare_with.experiment",
                format!(
                    "`{}` is not an experiment's name (letters, digits, - and _; `repro list` shows them)",
                    w.experiment
                ),
            );
        }
    }
    let Some(c) = &spec.confirm else {
        return Ok(());
    };
    if c.best == 0 {
        return err("confirm.best", "confirm at least one configuration".into());
    }
    if c.seeds.is_empty() {
        return err(
            "confirm.seeds",
            "give at least one seed to confirm on".into(),
        );
    }
    let first: Vec<String> = spec.seeds.iter().map(plan::text).collect();
    let finals: Vec<&str> = points
        .iter()
        .filter_map(|p| p.get(SEED_KEY).map(String::as_str))
        .collect();
    for s in c.seeds.iter().map(plan::text) {
        if first.contains(&s) {
            return err(
                "confirm.seeds",
                format!("seed {s} is also in tune.seeds: a second look needs seeds of its own"),
            );
        }
        if finals.contains(&s.as_str()) {
            return err(
                "confirm.seeds",
                format!("seed {s} is also a final seed: a seed used to choose must not report"),
            );
        }
    }
    Ok(())
}

/// A validation metric has a split to be measured on, and only the
/// trainer has one.
pub(super) fn check_split(spec: &TuneSpec, backend: Backend) -> Result<(), (String, String)> {
    let metric = spec.metric.as_str();
    let needs_split = metric.starts_with("val_");
    match (backend, spec.validation) {
        (Backend::Sim, Some(_)) => {
            return err(
                "validation",
                "the simulator's objectives have no data to hold out; tune on `final_loss`".into(),
            );
        }
        (Backend::Sim, None) if needs_split => {
            return err(
                "metric",
                format!("`{metric}` needs a validation split, which the simulator has not"),
            );
        }
        (_, None) if needs_split => {
            return err(
                "validation",
                format!("`{metric}` is measured on a validation split: give its fraction (0.1)"),
            );
        }
        (_, Some(v)) if !(v > 0.0 && v < 1.0) => {
            return err("validation", format!("{v} is not a fraction in (0, 1)"));
        }
        _ => {}
    }
    Ok(())
}
