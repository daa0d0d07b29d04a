//! The tuning protocol of a manifest's `tune` section. Every method gets
//! the same budget of configurations from its search space; each runs on
//! tuning seeds that the final grid never uses and is scored by a
//! validation metric (never a test-set one); the best configuration of
//! each method (per setting of the other grid keys) then runs on the
//! grid's seeds. `tuning.md` and `tuning.csv` record the search, the
//! choice and why.

use std::collections::BTreeMap;

use anyhow::Result;
use yaml_serde::{Mapping, Value};

use crate::records::metrics::{Kind, METRICS, kind};
use crate::records::results::{RunRecord, csv_text};
use crate::report::table::{number, short};
use crate::spec::manifest::{Backend, Manifest, TuneSpec};
use crate::spec::plan::{self, CONFIG_KEY, Config, Limits, PlannedRun, SEED_KEY};

/// The configurations method `method` is tried in: the cartesian product
/// of its space (a config's label is its `key=value` pairs), cut to the
/// budget by a fixed pseudo-random choice (the order of the labels'
/// hashes); "untuned" alone for a method without a space.
pub(crate) fn configs(spec: &TuneSpec, method: &str) -> Vec<Config> {
    let Some(space) = spec.space.get(method) else {
        return vec![Config {
            label: "untuned".into(),
            set: Mapping::new(),
        }];
    };
    let mut all: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (k, values) in space {
        all = all
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((k.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    let mut configs: Vec<Config> = all
        .into_iter()
        .map(|pairs| Config {
            label: pairs
                .iter()
                .map(|(k, v)| format!("{k}={}", plan::text(v)))
                .collect::<Vec<_>>()
                .join(" "),
            set: pairs
                .into_iter()
                .map(|(k, v)| (Value::String(k), v))
                .collect(),
        })
        .collect();
    if configs.len() > spec.budget {
        configs.sort_by_key(|c| xxhash_rust::xxh3::xxh3_64(c.label.as_bytes()));
        configs.truncate(spec.budget);
        configs.sort_by(|a, b| a.label.cmp(&b.label));
    }
    configs
}

/// Whether a larger value of the spec's metric is better.
fn higher(spec: &TuneSpec) -> bool {
    spec.higher_is_better
        .unwrap_or_else(|| spec.metric.contains("accuracy"))
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
    check_split(spec, backend)
}

/// A `tune` section's error: the manifest path below `tune` and why.
fn err(k: &str, m: String) -> Result<(), (String, String)> {
    Err((format!("tune.{k}"), m))
}

/// The grid has the seed axis and the tuned key, no configuration key, and
/// none of the tuning seeds among its final seeds.
fn check_grid(
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
fn check_space(
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
    if let Some((method, param)) = spec
        .space
        .iter()
        .flat_map(|(m, s)| s.iter().map(move |(k, v)| (m, k, v)))
        .find(|(_, _, v)| v.is_empty())
        .map(|(m, k, _)| (m, k))
    {
        return err(
            &format!("space.{method}.{param}"),
            "no values to try".into(),
        );
    }
    Ok(())
}

/// A validation metric has a split to be measured on, and only the
/// trainer has one.
fn check_split(spec: &TuneSpec, backend: Backend) -> Result<(), (String, String)> {
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

/// The tuning runs: every grid point of a method with a search space, on
/// the tuning seeds, once per configuration.
pub(crate) fn tuning_runs(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    limits: Limits,
) -> Result<Vec<PlannedRun>, crate::spec::errors::DriverError> {
    let runs = plan::expand_configured(m, scale, backend, limits, Some(&spec.seeds), &|p| {
        configs(spec, p.get(&spec.key).map_or("", String::as_str))
    })?;
    Ok(runs
        .into_iter()
        .filter(|r| {
            r.point
                .get(&spec.key)
                .is_some_and(|method| spec.space.contains_key(method))
        })
        .collect())
}

/// The runs `m` plans at `scale` for `backend` with its results in `out`:
/// a tuned experiment's follow from its recorded tuning
/// ([`final_runs`]), any other's from its grid. What `repro status`,
/// `repro table` and `repro plot` hold recorded runs against.
pub(crate) fn recorded_plan(
    m: &Manifest,
    scale: &str,
    backend: Backend,
    out: &std::path::Path,
) -> Result<Vec<PlannedRun>> {
    match &m.tune {
        Some(spec) => final_runs(m, spec, scale, backend, out),
        None => Ok(plan::expand(m, scale, backend)?),
    }
}

/// The grid's runs as a tuned experiment runs them: each method with the
/// configuration its tuning runs recorded in `out/tuning/runs.csv` choose
/// (none recorded: its first configuration, which `repro status` then
/// reports missing). The tuning runs of this plan only count.
pub(crate) fn final_runs(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    out: &std::path::Path,
) -> Result<Vec<PlannedRun>> {
    let tuning = tuning_runs(m, spec, scale, backend, Limits::default())?;
    let csv = out.join("tuning").join("runs.csv");
    let recorded = if csv.is_file() {
        crate::records::results::read_csv(&csv)?
    } else {
        Vec::new()
    };
    let selection = select_planned(spec, &tuning, &recorded);
    Ok(plan::expand_configured(
        m,
        scale,
        backend,
        Limits::default(),
        None,
        &|p| {
            let chosen = selection.chosen_for(spec, p);
            if chosen.is_empty() {
                configs(spec, p.get(&spec.key).map_or("", String::as_str))
                    .into_iter()
                    .take(1)
                    .collect()
            } else {
                chosen
            }
        },
    )?)
}

/// The group a run is chosen within: its grid point without the seed and
/// the configuration (one method at one setting of the other keys).
fn group(point: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    point
        .iter()
        .filter(|(k, _)| *k != SEED_KEY && *k != CONFIG_KEY)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One configuration's score in one group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tried {
    pub group: BTreeMap<String, String>,
    pub config: String,
    /// The metric's mean over the tuning seeds whose runs completed with a
    /// value; None when none did.
    pub score: Option<f64>,
    /// Runs scored, and runs on the tuning seeds in all.
    pub scored: usize,
    pub runs: usize,
    pub chosen: bool,
}

/// The search's outcome: every configuration's score, and the chosen one
/// of each group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    pub tried: Vec<Tried>,
}

impl Selection {
    /// The configuration chosen for the group of `point`.
    /// A method without a space runs untuned; a group the search never
    /// scored (no tuning run of it) gets none.
    pub(crate) fn chosen_for(
        &self,
        spec: &TuneSpec,
        point: &BTreeMap<String, String>,
    ) -> Vec<Config> {
        let method = point.get(&spec.key).map_or("", String::as_str);
        if !spec.space.contains_key(method) {
            return configs(spec, method);
        }
        let g = group(point);
        let Some(t) = self.tried.iter().find(|t| t.chosen && t.group == g) else {
            return Vec::new();
        };
        configs(spec, method)
            .into_iter()
            .filter(|c| c.label == t.config)
            .collect()
    }
}

/// [`select`] over the recorded runs that belong to the search `tuning`:
/// runs an earlier search left in the same directory do not choose.
pub(crate) fn select_planned(
    spec: &TuneSpec,
    tuning: &[PlannedRun],
    recorded: &[RunRecord],
) -> Selection {
    let these: Vec<RunRecord> = recorded
        .iter()
        .filter(|r| tuning.iter().any(|t| t.id == r.run_id))
        .cloned()
        .collect();
    select(spec, &these)
}

/// Chooses each group's configuration from the tuning runs: the best mean
/// of the metric over the tuning seeds; a run that diverged or failed
/// counts as the worst possible, so a configuration that ever diverged
/// loses to one that never did. Ties keep the first configuration.
pub(crate) fn select(spec: &TuneSpec, rows: &[RunRecord]) -> Selection {
    let higher = higher(spec);
    // (group, config) -> (the scored values, the runs)
    type Key = (BTreeMap<String, String>, String);
    let mut by: BTreeMap<Key, (Vec<f64>, usize)> = BTreeMap::new();
    let mut order: Vec<Key> = Vec::new();
    for r in rows {
        let Some(config) = r.point.get(CONFIG_KEY) else {
            continue;
        };
        let k = (group(&r.point), config.clone());
        if !by.contains_key(&k) {
            order.push(k.clone());
        }
        let e = by.entry(k).or_default();
        e.1 += 1;
        let value = r.metrics.get(&spec.metric).and_then(|c| c.number());
        if r.status() == Some(crate::launch::summary::RunStatus::Completed)
            && let Some(v) = value.filter(|v| v.is_finite())
        {
            e.0.push(v);
        }
    }
    let mut tried: Vec<Tried> = order
        .iter()
        .map(|k| {
            let (values, runs) = &by[k];
            // every run must have a score, or the configuration is the worst
            let score = (values.len() == *runs && !values.is_empty())
                .then(|| values.iter().sum::<f64>() / values.len() as f64);
            Tried {
                group: k.0.clone(),
                config: k.1.clone(),
                score,
                scored: values.len(),
                runs: *runs,
                chosen: false,
            }
        })
        .collect();
    let better = |a: f64, b: f64| if higher { a > b } else { a < b };
    let groups: Vec<BTreeMap<String, String>> = {
        let mut g: Vec<_> = tried.iter().map(|t| t.group.clone()).collect();
        g.dedup();
        g
    };
    for g in groups {
        let mut best: Option<usize> = None;
        for (i, t) in tried.iter().enumerate().filter(|(_, t)| t.group == g) {
            best = match (best, t.score) {
                (None, _) => Some(i),
                (Some(b), Some(s)) if tried[b].score.is_none_or(|bs| better(s, bs)) => Some(i),
                (b, _) => b,
            };
        }
        if let Some(b) = best {
            tried[b].chosen = true;
        }
    }
    Selection { tried }
}

fn group_text(g: &BTreeMap<String, String>) -> String {
    g.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// tuning.md: the protocol in words, every configuration's score and the
/// choices.
pub(crate) fn markdown(
    m: &Manifest,
    spec: &TuneSpec,
    final_seeds: &[String],
    s: &Selection,
) -> String {
    let seeds: Vec<String> = spec.seeds.iter().map(plan::text).collect();
    let mut out = format!("# Tuning: {}\n\n", m.title);
    let sizes: BTreeMap<&String, usize> = spec
        .space
        .iter()
        .map(|(k, space)| (k, space.values().map(Vec::len).product()))
        .collect();
    out.push_str(&format!(
        "Protocol: each method tried up to {} configurations (the same budget for every method) from its search space; \
         each ran on the tuning seeds [{}], which the final runs (seeds [{}]) never use, and was scored by `{}` ({} is better){}, \
         the mean over the tuning seeds (a configuration with a diverged or failed run scores worst). \
         The best of each method and setting ran on the final seeds. The test set chose nothing.\n\n",
        spec.budget,
        seeds.join(", "),
        final_seeds.join(", "),
        spec.metric,
        if higher(spec) { "higher" } else { "lower" },
        match spec.validation {
            Some(v) => format!(
                " on a validation split of {}% of the training images, held out of training in every run",
                short(v * 100.0)
            ),
            None => String::new(),
        },
    ));
    out.push_str("Search spaces:\n\n");
    for (method, space) in &spec.space {
        let n = sizes[method];
        let params: Vec<String> = space
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k} in [{}]",
                    v.iter().map(plan::text).collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        out.push_str(&format!(
            "- {method}: {} ({n} configurations; {} tried{})\n",
            params.join(", "),
            n.min(spec.budget),
            if n > spec.budget {
                ", chosen by a fixed hash of their labels"
            } else if n < spec.budget {
                "; the whole space, under the budget"
            } else {
                ""
            }
        ));
    }
    out.push_str("- every other method: untuned (its manifest settings)\n\n");
    out.push_str(&format!(
        "| setting | configuration | {} (mean) | runs scored | chosen |\n|---|---|---|---|---|\n",
        spec.metric
    ));
    for t in &s.tried {
        out.push_str(&format!(
            "| {} | {} | {} | {}/{} | {} |\n",
            group_text(&t.group),
            t.config,
            t.score.map_or_else(|| "-".into(), number),
            t.scored,
            t.runs,
            if t.chosen { "**yes**" } else { "" }
        ));
    }
    out
}

/// tuning.csv: one line per configuration and setting.
pub(crate) fn csv(spec: &TuneSpec, s: &Selection) -> Result<String> {
    let keys: Vec<String> = s
        .tried
        .first()
        .map(|t| t.group.keys().cloned().collect())
        .unwrap_or_default();
    let header: Vec<String> = keys
        .iter()
        .cloned()
        .chain([
            CONFIG_KEY.to_string(),
            spec.metric.clone(),
            "runs_scored".into(),
            "runs".into(),
            "chosen".into(),
        ])
        .collect();
    let rows = s.tried.iter().map(|t| {
        keys.iter()
            .map(|k| t.group.get(k).cloned().unwrap_or_default())
            .chain([
                t.config.clone(),
                t.score.map(|v| v.to_string()).unwrap_or_default(),
                t.scored.to_string(),
                t.runs.to_string(),
                t.chosen.to_string(),
            ])
            .collect::<Vec<_>>()
    });
    csv_text(std::iter::once(header).chain(rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::metrics::Cell;

    fn spec(yaml: &str) -> TuneSpec {
        yaml_serde::from_str(yaml).unwrap()
    }

    #[test]
    fn every_method_gets_the_same_budget() {
        let s = spec(
            "{metric: val_accuracy, budget: 3, seeds: [9], validation: 0.1,
              space: {moniqua: {gamma: [0.1, 0.2], theta: [0.5, 1, 2]}, choco: {gamma: [0.1, 0.5]}}}",
        );
        let m = configs(&s, "moniqua");
        assert_eq!(m.len(), 3, "six cut to the budget");
        assert_eq!(m, configs(&s, "moniqua"), "the same three every time");
        assert!(
            m.iter()
                .all(|c| c.label.starts_with("gamma=") && c.set.len() == 2)
        );
        let c = configs(&s, "choco");
        assert_eq!(
            c.iter().map(|c| c.label.as_str()).collect::<Vec<_>>(),
            ["gamma=0.1", "gamma=0.5"]
        );
        assert_eq!(configs(&s, "d-psgd")[0].label, "untuned");
    }

    fn points() -> Vec<BTreeMap<String, String>> {
        ["moniqua", "choco"]
            .iter()
            .flat_map(|a| {
                ["0", "1"].map(|s| {
                    [("algorithm", *a), ("seed", s)]
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .into()
                })
            })
            .collect()
    }

    #[test]
    fn the_protocol_is_checked_before_anything_runs() {
        let ok = "{metric: val_accuracy, budget: 2, seeds: [9], validation: 0.1, space: {moniqua: {gamma: [0.1]}}}";
        assert!(check(&spec(ok), Backend::Mpi, &points()).is_ok());
        let cases = [
            (
                ok.replace("val_accuracy", "avg_test_accuracy"),
                Backend::Mpi,
                "tune.metric",
                "test set",
            ),
            (
                ok.replace("seeds: [9]", "seeds: [1]"),
                Backend::Mpi,
                "tune.seeds",
                "also a final seed",
            ),
            (
                ok.replace("budget: 2", "budget: 0"),
                Backend::Mpi,
                "tune.budget",
                "at least one",
            ),
            (
                ok.replace(", validation: 0.1", ""),
                Backend::Mpi,
                "tune.validation",
                "give its fraction",
            ),
            (ok.to_string(), Backend::Sim, "tune.validation", "no data"),
            (
                ok.replace("moniqua:", "monqua:"),
                Backend::Mpi,
                "tune.space.monqua",
                "no value",
            ),
            (
                ok.replace("[0.1]", "[]"),
                Backend::Mpi,
                "tune.space.moniqua.gamma",
                "no values",
            ),
        ];
        for (yaml, backend, path, says) in cases {
            let (p, m) = check(&spec(&yaml), backend, &points()).unwrap_err();
            assert_eq!(p, path, "{yaml}: {m}");
            assert!(m.contains(says), "{yaml}: {m}");
        }
        let unseeded: Vec<_> = points()
            .into_iter()
            .map(|mut p| {
                p.remove("seed");
                p
            })
            .collect();
        let (p, _) = check(&spec(ok), Backend::Mpi, &unseeded).unwrap_err();
        assert_eq!(p, "tune.seeds");
    }

    fn run(alg: &str, config: &str, seed: &str, status: &str, acc: Option<f64>) -> RunRecord {
        RunRecord {
            run_id: format!("{alg}-{config}-{seed}"),
            point: [
                ("algorithm", alg),
                ("config", config),
                ("seed", seed),
                ("bits", "1"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
            metrics: [
                ("status".to_string(), Cell::Text(status.into())),
                ("val_accuracy".to_string(), Cell::Number(acc)),
            ]
            .into(),
        }
    }

    /// The best mean over the tuning seeds wins; a configuration with a
    /// diverged run loses to every one without.
    #[test]
    fn selection_is_by_the_validation_mean() {
        let s =
            spec("{metric: val_accuracy, budget: 3, seeds: [8, 9], validation: 0.1, space: {}}");
        let rows = vec![
            run("moniqua", "g=1", "8", "completed", Some(0.80)),
            run("moniqua", "g=1", "9", "completed", Some(0.84)),
            run("moniqua", "g=2", "8", "completed", Some(0.90)),
            run("moniqua", "g=2", "9", "diverged", None),
            run("moniqua", "g=3", "8", "completed", Some(0.83)),
            run("moniqua", "g=3", "9", "completed", Some(0.83)),
            run("choco", "g=1", "8", "completed", Some(0.70)),
            run("choco", "g=1", "9", "completed", Some(0.70)),
        ];
        let sel = select(&s, &rows);
        let chosen: Vec<(&str, &str)> = sel
            .tried
            .iter()
            .filter(|t| t.chosen)
            .map(|t| (t.group["algorithm"].as_str(), t.config.as_str()))
            .collect();
        assert_eq!(chosen, [("moniqua", "g=3"), ("choco", "g=1")]);
        let g2 = sel.tried.iter().find(|t| t.config == "g=2").unwrap();
        assert_eq!((g2.score, g2.scored, g2.runs), (None, 1, 2));
        // lower is better for a loss
        let loss = spec("{metric: val_loss, budget: 3, seeds: [8], validation: 0.1, space: {}}");
        let rows: Vec<RunRecord> = [("a", 0.5), ("b", 0.2), ("c", 0.9)]
            .iter()
            .map(|(c, v)| {
                let mut r = run("moniqua", c, "8", "completed", None);
                r.metrics.insert("val_loss".into(), Cell::Number(Some(*v)));
                r
            })
            .collect();
        let sel = select(&loss, &rows);
        assert_eq!(sel.tried.iter().find(|t| t.chosen).unwrap().config, "b");
    }
}
