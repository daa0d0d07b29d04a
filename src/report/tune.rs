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

use crate::experiment::manifest::{Axis, AxisScale, Backend, HealthSpec, Manifest, TuneSpec};
use crate::experiment::plan::{self, CONFIG_KEY, Config, Limits, PlannedRun, SEED_KEY};
use crate::records::health::{Health, counts_text};
use crate::records::metrics::{Kind, METRICS, kind};
use crate::records::results::{RunRecord, csv_text};
use crate::records::results_dir::Entry;
use crate::report::table::{number, short};

/// The configurations method `method` is tried in (a config's label is
/// its `key=value` pairs): with a range in its space, `budget` points
/// drawn by the Halton sequence ([`sampled`]); a grid of values alone,
/// its cartesian product cut to the budget by a fixed pseudo-random
/// choice (the order of the labels' hashes); "untuned" alone for a method
/// without a space.
pub(crate) fn configs(spec: &TuneSpec, method: &str) -> Vec<Config> {
    let mut configs = configs_unbudgeted(spec, method);
    if configs.len() > spec.budget {
        configs.sort_by_key(|c| xxhash_rust::xxh3::xxh3_64(c.label.as_bytes()));
        configs.truncate(spec.budget);
        configs.sort_by(|a, b| a.label.cmp(&b.label));
    }
    configs
}

/// Every configuration of `method`'s space ("untuned" alone without one):
/// a grid's whole cartesian product, or a range's draws.
fn configs_unbudgeted(spec: &TuneSpec, method: &str) -> Vec<Config> {
    let Some(space) = spec.space.get(method) else {
        return vec![Config {
            label: "untuned".into(),
            set: Mapping::new(),
        }];
    };
    if space.values().any(|a| matches!(a, Axis::Range(_))) {
        return sampled(space, spec.budget);
    }
    let mut all: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (k, axis) in space {
        all = all
            .into_iter()
            .flat_map(|c| {
                axis.values().iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((k.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    all.into_iter().map(config_of).collect()
}

/// The configuration of `pairs`, labelled by them in order.
fn config_of(pairs: Vec<(String, Value)>) -> Config {
    Config {
        label: pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", plan::text(v)))
            .collect::<Vec<_>>()
            .join(" "),
        set: pairs
            .into_iter()
            .map(|(k, v)| (Value::String(k), v))
            .collect(),
    }
}

/// The first primes: the Halton sequence's base for each axis of a
/// space, in the space's order.
const HALTON_BASES: [u64; 8] = [2, 3, 5, 7, 11, 13, 17, 19];

/// The most axes a space with a range may have.
pub(crate) const MAX_AXES: usize = HALTON_BASES.len();

/// Point `index` (from 1) of the Halton sequence in base `base`: the
/// radical inverse of `index`, a share in (0, 1).
pub(crate) fn halton(index: u64, base: u64) -> f64 {
    let (mut share, mut inverse, mut i) = (1.0, 0.0, index);
    while i > 0 {
        share /= base as f64;
        inverse += share * (i % base) as f64;
        i /= base;
    }
    inverse
}

/// `n` configurations of a space with a range: points 1..=n of the
/// Halton sequence, one prime base per axis in the space's order, each
/// share mapped onto its axis (a range in its scale, a list of values by
/// index). Deterministic, and the same points for every method: equal
/// coverage for equal budgets. Two draws that round to the same label are
/// kept once.
fn sampled(space: &std::collections::BTreeMap<String, Axis>, n: usize) -> Vec<Config> {
    let mut out: Vec<Config> = Vec::new();
    for i in 1..=n as u64 {
        let pairs: Vec<(String, Value)> = space
            .iter()
            .zip(HALTON_BASES)
            .map(|((k, axis), base)| {
                let u = halton(i, base);
                let v = match axis {
                    Axis::Range(r) => Value::from(r.at(u)),
                    Axis::Values(values) => {
                        let at = ((u * values.len() as f64) as usize).min(values.len() - 1);
                        values[at].clone()
                    }
                };
                (k.clone(), v)
            })
            .collect();
        let c = config_of(pairs);
        if !out.iter().any(|o| o.label == c.label) {
            out.push(c);
        }
    }
    out
}

/// Whether a larger value of the spec's metric is better.
fn higher(spec: &TuneSpec) -> bool {
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
fn check_confirm(
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
) -> Result<Vec<PlannedRun>, crate::experiment::errors::DriverError> {
    let runs = plan::expand_configured(m, scale, backend, limits, Some(&spec.seeds), &|p| {
        Some(configs(spec, p.get(&spec.key).map_or("", String::as_str)))
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
    let csv = out.join(Entry::TuningDir.name()).join(Entry::Runs.name());
    let recorded = if csv.is_file() {
        crate::records::results::read_csv(&csv)?
    } else {
        Vec::new()
    };
    let (_, selection, _) = search(m, spec, scale, backend, &recorded)?;
    Ok(plan::expand_configured(
        m,
        scale,
        backend,
        Limits::default(),
        None,
        &|p| {
            Some(selection.chosen_for(spec, p).unwrap_or_else(|| {
                configs(spec, p.get(&spec.key).map_or("", String::as_str))
                    .into_iter()
                    .take(1)
                    .collect()
            }))
        },
    )?)
}

/// The whole search as `recorded` holds it: the tuning runs (with the
/// second wave the first choice asks for: `tune.confirm`'s finalists on
/// their seeds, and under `tune.extend` the steps beyond an edge), the
/// choice among them, and the steps beyond the space the plan refused.
pub(crate) fn search(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    recorded: &[RunRecord],
) -> Result<(Vec<PlannedRun>, Selection, Vec<String>)> {
    let mut tuning = tuning_runs(m, spec, scale, backend, Limits::default())?;
    let first = select_planned(spec, &tuning, recorded, &m.health);
    let (extra, refused) = second_wave(m, spec, scale, backend, &first);
    if extra.is_empty() {
        return Ok((tuning, first, refused));
    }
    tuning.extend(extra);
    let selection = select_planned(spec, &tuning, recorded, &m.health);
    Ok((tuning, selection, refused))
}

/// A recorded search as claims read it: the choice and every tuning run,
/// judged.
#[derive(Debug, Clone)]
pub(crate) struct TuningRecord {
    pub selection: Selection,
    pub runs: Vec<RunRecord>,
    /// How many configurations of each side a protocol check compares:
    /// `tune.confirm.best`, else 3.
    pub best: usize,
    /// The tuning directory, whose raw/ logs hold the runs' curves where
    /// they were kept (a time-to-target check reads them).
    pub dir: Option<std::path::PathBuf>,
}

impl TuningRecord {
    /// A search recorded as `rows` (its runs, judged) chose `selection`.
    pub(crate) fn new(spec: &TuneSpec, selection: Selection, rows: Vec<RunRecord>) -> Self {
        TuningRecord {
            selection,
            runs: rows,
            best: spec.confirm.as_ref().map_or(3, |c| c.best),
            dir: None,
        }
    }

    /// The record with its runs' logs under `dir` (the tuning directory).
    pub(crate) fn in_dir(mut self, dir: std::path::PathBuf) -> Self {
        self.dir = Some(dir);
        self
    }

    /// The runs of the settings that found no working configuration:
    /// what a claim decides from in their place.
    pub(crate) fn unworking(&self) -> Vec<RunRecord> {
        let none = self.selection.unviable();
        self.runs
            .iter()
            .filter(|r| none.contains(&&group(&r.point)))
            .cloned()
            .collect()
    }

    /// The best `self.best` configurations of the one setting whose runs
    /// `wanted` selects, by the search's score, each with its runs; empty
    /// when the runs span no setting or several.
    pub(crate) fn best_of(
        &self,
        wanted: &dyn Fn(&RunRecord) -> bool,
    ) -> Vec<(String, Vec<&RunRecord>)> {
        let runs: Vec<&RunRecord> = self.runs.iter().filter(|r| wanted(r)).collect();
        let mut groups: Vec<BTreeMap<String, String>> =
            runs.iter().map(|r| group(&r.point)).collect();
        groups.sort();
        groups.dedup();
        let [g] = groups.as_slice() else {
            return Vec::new();
        };
        self.selection
            .ranked(g)
            .into_iter()
            .take(self.best)
            .map(|t| {
                let of: Vec<&RunRecord> = runs
                    .iter()
                    .filter(|r| r.point.get(CONFIG_KEY) == Some(&t.config))
                    .copied()
                    .collect();
                (t.config.clone(), of)
            })
            .collect()
    }
}

/// The search recorded in `out/tuning/runs.csv` for `m` at `scale` on
/// `backend` (none without a search or a record): what claims read.
pub(crate) fn recorded_tuning(
    m: &Manifest,
    scale: &str,
    backend: Backend,
    out: &std::path::Path,
) -> Result<Option<TuningRecord>> {
    let csv = out.join(Entry::TuningDir.name()).join(Entry::Runs.name());
    let Some(spec) = m.tune.as_ref().filter(|_| csv.is_file()) else {
        return Ok(None);
    };
    let recorded = crate::records::results::read_csv(&csv)?;
    let (tuning, selection, _) = search(m, spec, scale, backend, &recorded)?;
    let judged = crate::records::results::planned(&recorded, &tuning, &m.health);
    let dir = out.join(Entry::TuningDir.name());
    Ok(Some(TuningRecord::new(spec, selection, judged).in_dir(dir)))
}

/// A value of a numeric axis, as a number.
fn numeric(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_i64().map(|i| i as f64))
}

/// How far beyond a range's bound `tune.extend` steps: this share of
/// the range's span (in its scale).
const BEYOND_RANGE: f64 = 0.25;

/// Where `config` of `method` sits at the edge of its space, with the
/// value one step beyond, per numeric axis. A grid axis of two or more
/// values: the chosen value is its smallest or largest, and the step is
/// one grid step (geometric for positive values, else arithmetic; whole
/// numbers stay whole); zero, the bound of an axis of non-negative
/// values, is no edge. A range: the chosen value is the smallest or
/// largest drawn, and the step lands a quarter of the range's span
/// beyond its bound.
fn edges(spec: &TuneSpec, method: &str, config: &str) -> Vec<(String, Value, Value)> {
    let Some(space) = spec.space.get(method) else {
        return Vec::new();
    };
    let chosen: BTreeMap<&str, &str> = config
        .split(' ')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let mut out = Vec::new();
    for (axis, a) in space {
        let Some(at) = chosen
            .get(axis.as_str())
            .and_then(|t| t.parse::<f64>().ok())
        else {
            continue;
        };
        let found = match a {
            Axis::Values(values) => grid_edge(values, at),
            Axis::Range(r) => {
                let drawn: Vec<f64> = configs(spec, method)
                    .iter()
                    .filter_map(|c| c.set.get(axis.as_str()).and_then(numeric))
                    .collect();
                let lowest = drawn.iter().copied().fold(f64::INFINITY, f64::min);
                let highest = drawn.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let bound = match at {
                    _ if lowest == highest => None,
                    _ if at == lowest => Some(r.range[0]),
                    _ if at == highest => Some(r.range[1]),
                    _ => None,
                };
                bound.map(|b| (Value::from(at), Value::from(r.beyond(b, BEYOND_RANGE))))
            }
        };
        if let Some((edge, beyond)) = found {
            out.push((axis.clone(), edge, beyond));
        }
    }
    out
}

/// A grid axis's edge at the chosen value `at`, and the value one step
/// beyond it (see [`edges`]).
fn grid_edge(values: &[Value], at: f64) -> Option<(Value, Value)> {
    let mut nums: Vec<f64> = values.iter().filter_map(numeric).collect();
    if nums.len() != values.len() || nums.len() < 2 {
        return None;
    }
    nums.sort_by(f64::total_cmp);
    nums.dedup();
    // zero bounds an axis of non-negative values (an unscaled
    // compressor, no momentum): nothing lies beyond it
    if nums.len() < 2 || (at == 0.0 && nums[0] >= 0.0) {
        return None;
    }
    let (edge, inner) = if at == nums[0] {
        (nums[0], nums[1])
    } else if at == nums[nums.len() - 1] {
        (nums[nums.len() - 1], nums[nums.len() - 2])
    } else {
        return None;
    };
    let mut beyond = if nums[0] > 0.0 {
        edge * (edge / inner)
    } else {
        edge + (edge - inner)
    };
    let whole = values.iter().all(|v| v.as_i64().is_some());
    beyond = if whole {
        beyond.round()
    } else {
        // four significant digits: 0.08, not 0.08000000000000002
        format!("{beyond:.3e}").parse().unwrap_or(beyond)
    };
    let value = if whole {
        Value::from(beyond as i64)
    } else {
        Value::from(beyond)
    };
    let edge_value = values
        .iter()
        .find(|v| numeric(v) == Some(edge))
        .cloned()
        .unwrap_or(Value::from(edge));
    Some((edge_value, value))
}

/// The configuration `config` of `method` with `axis` set to `value`.
fn replaced(
    spec: &TuneSpec,
    method: &str,
    config: &str,
    axis: &str,
    value: &Value,
) -> Option<Config> {
    let base = configs_unbudgeted(spec, method)
        .into_iter()
        .find(|c| c.label == config)?;
    let mut set = base.set.clone();
    set.insert(Value::String(axis.to_string()), value.clone());
    let label = set
        .iter()
        .map(|(k, v)| format!("{}={}", plan::text(k), plan::text(v)))
        .collect::<Vec<_>>()
        .join(" ");
    Some(Config { label, set })
}

/// The runs the first choice `first` adds, and the steps beyond the
/// space the plan refused (said in words). `tune.confirm`: the best
/// `best` configurations of each setting (that trained at all) on the
/// confirm seeds. `tune.extend`: for each setting whose first choice sits
/// at the edge of a numeric axis, that configuration with the axis one
/// step beyond, on every tuning seed (the first and the confirm ones), so
/// a step beyond is judged on as many seeds as the finalists, never on
/// one seed's luck.
pub(crate) fn second_wave(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    first: &Selection,
) -> (Vec<PlannedRun>, Vec<String>) {
    let (mut runs, mut refused) = (Vec::new(), Vec::new());
    let confirm_seeds: Vec<Value> = spec
        .confirm
        .as_ref()
        .map(|c| c.seeds.clone())
        .unwrap_or_default();
    if let Some(c) = &spec.confirm {
        let finalists = first.finalists(c.best);
        let planned =
            plan::expand_configured(m, scale, backend, Limits::default(), Some(&c.seeds), &|p| {
                let g = group(p);
                let method = p.get(&spec.key).map_or("", String::as_str);
                Some(
                    configs(spec, method)
                        .into_iter()
                        .filter(|c| finalists.iter().any(|(fg, fc)| *fg == g && *fc == c.label))
                        .collect(),
                )
            });
        match planned {
            Ok(r) => runs.extend(r),
            Err(e) => refused.push(format!("the confirm runs: {e}")),
        }
    }
    if !spec.extend {
        return (runs, refused);
    }
    let every_seed: Vec<Value> = spec.seeds.iter().chain(&confirm_seeds).cloned().collect();
    for t in first.tried.iter().filter(|t| t.chosen && t.score.is_some()) {
        let method = t.group.get(&spec.key).map_or("", String::as_str);
        for (axis, _, beyond) in edges(spec, method, &t.config) {
            let Some(c) = replaced(spec, method, &t.config, &axis, &beyond) else {
                continue;
            };
            let planned = plan::expand_configured(
                m,
                scale,
                backend,
                Limits::default(),
                Some(&every_seed),
                &|p| {
                    Some(if group(p) == t.group {
                        vec![c.clone()]
                    } else {
                        Vec::new()
                    })
                },
            );
            match planned {
                Ok(r) => runs.extend(r),
                Err(e) => refused.push(format!("{} {}: {e}", group_text(&t.group), c.label)),
            }
        }
    }
    (runs, refused)
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
    /// The metric's mean over the runs on the tuning seeds that tested
    /// the method, a failed run counted with what it achieved (intention
    /// to treat, `health::counted`); None without any.
    pub score: Option<f64>,
    /// Runs scored, and runs on the tuning seeds in all.
    pub scored: usize,
    pub runs: usize,
    /// The runs by health.
    pub health: BTreeMap<Health, usize>,
    /// Whether it ran on `tune.confirm`'s seeds too (a finalist, or a
    /// step beyond the edge): the choice is made among these where any
    /// did.
    pub confirmed: bool,
    pub chosen: bool,
}

impl Tried {
    /// Its runs whose method failed (diverged, exploded, collapsed).
    pub(crate) fn failed(&self) -> usize {
        self.health
            .iter()
            .filter(|(h, _)| h.kind() == crate::records::health::Kind::MethodFailed)
            .map(|(_, n)| n)
            .sum()
    }

    /// Whether at least one of its runs trained (health ok).
    pub(crate) fn trained(&self) -> bool {
        self.health.get(&Health::Ok).is_some_and(|n| *n > 0)
    }
}

/// Why a setting got no final runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NoChoice {
    /// Every run of every configuration failed.
    NoneTrained,
    /// The best score is within `tune.chance_margin` of chance.
    AtChance { best: f64, chance: f64 },
}

/// The search's outcome: every configuration's score, and the chosen one
/// of each group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    pub tried: Vec<Tried>,
    /// The settings that found no working configuration, and why.
    pub none: Vec<(BTreeMap<String, String>, NoChoice)>,
    /// Whether a larger score is better.
    pub higher: bool,
}

impl Selection {
    /// The groups in the order the search first met them.
    pub(crate) fn groups(&self) -> Vec<&BTreeMap<String, String>> {
        let mut groups: Vec<&BTreeMap<String, String>> = Vec::new();
        for t in &self.tried {
            if !groups.contains(&&t.group) {
                groups.push(&t.group);
            }
        }
        groups
    }

    /// The configurations of group `g` with a score, best first: by score,
    /// ties to fewer failed runs, then in the order tried.
    pub(crate) fn ranked(&self, g: &BTreeMap<String, String>) -> Vec<&Tried> {
        let mut of: Vec<&Tried> = self
            .tried
            .iter()
            .filter(|t| &t.group == g && t.score.is_some())
            .collect();
        of.sort_by(|a, b| {
            let (sa, sb) = (a.score.unwrap_or(0.0), b.score.unwrap_or(0.0));
            let by_score = if self.higher {
                sb.total_cmp(&sa)
            } else {
                sa.total_cmp(&sb)
            };
            by_score.then(a.failed().cmp(&b.failed()))
        });
        of
    }

    /// Each group's best `k` by the scores so far (the sort of
    /// [`Self::ranked`]), in groups where some run trained: `tune.confirm`'s
    /// finalists, as (group, configuration).
    pub(crate) fn finalists(&self, k: usize) -> Vec<(BTreeMap<String, String>, String)> {
        let mut out = Vec::new();
        for g in self.groups() {
            if !self.tried.iter().any(|t| &t.group == g && t.trained()) {
                continue;
            }
            for t in self.ranked(g).into_iter().take(k) {
                out.push((g.clone(), t.config.clone()));
            }
        }
        out
    }

    /// The configuration chosen for the group of `point`: a method without
    /// a space runs untuned; a group whose configurations all failed to be
    /// valid gets none (no final runs); `None` when the search never tried
    /// the group.
    pub(crate) fn chosen_for(
        &self,
        spec: &TuneSpec,
        point: &BTreeMap<String, String>,
    ) -> Option<Vec<Config>> {
        let method = point.get(&spec.key).map_or("", String::as_str);
        if !spec.space.contains_key(method) {
            return Some(configs(spec, method));
        }
        let g = group(point);
        if !self.tried.iter().any(|t| t.group == g) {
            return None;
        }
        let Some(t) = self.tried.iter().find(|t| t.chosen && t.group == g) else {
            return Some(Vec::new());
        };
        let found: Vec<Config> = configs_unbudgeted(spec, method)
            .into_iter()
            .filter(|c| c.label == t.config)
            .collect();
        if !found.is_empty() {
            return Some(found);
        }
        // a configuration of the extension: one axis stepped beyond
        Some(
            extended_config(spec, method, &t.config)
                .into_iter()
                .collect(),
        )
    }

    /// The groups that found no working configuration: no final runs.
    pub(crate) fn unviable(&self) -> Vec<&BTreeMap<String, String>> {
        self.none.iter().map(|(g, _)| g).collect()
    }
}

/// The configuration an extension label names: the base configuration
/// whose other axes it shares, with the one it steps beyond.
fn extended_config(spec: &TuneSpec, method: &str, label: &str) -> Option<Config> {
    let pairs: Vec<(&str, &str)> = label
        .split(' ')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    for base in configs_unbudgeted(spec, method) {
        for (axis, _, beyond) in edges(spec, method, &base.label) {
            let c = replaced(spec, method, &base.label, &axis, &beyond)?;
            let theirs: Vec<(&str, &str)> = c
                .label
                .split(' ')
                .filter_map(|kv| kv.split_once('='))
                .collect();
            if theirs == pairs {
                return Some(c);
            }
        }
    }
    None
}

/// [`select`] over the recorded runs that belong to the search `tuning`,
/// each judged by `health`: runs an earlier search left in the same
/// directory do not choose.
pub(crate) fn select_planned(
    spec: &TuneSpec,
    tuning: &[PlannedRun],
    recorded: &[RunRecord],
    health: &HealthSpec,
) -> Selection {
    select(
        spec,
        &crate::records::results::planned(recorded, tuning, health),
    )
}

/// Chooses each group's configuration from the tuning runs: the best
/// mean of the metric over its tuning seeds by intention to treat (a
/// failed run counts with what it achieved, a run that did not test the
/// method is left out), whatever its runs' health; ties go to fewer
/// failed runs, then to the first tried. Where some configurations ran on
/// `tune.confirm`'s seeds, the choice is among those, over all their
/// seeds. A group gets no choice when no run of it trained, or when its
/// best score on an accuracy is within `tune.chance_margin` of chance.
pub(crate) fn select(spec: &TuneSpec, rows: &[RunRecord]) -> Selection {
    let (tried, chance) = tally(spec, rows);
    let mut s = Selection {
        tried,
        none: Vec::new(),
        higher: higher(spec),
    };
    let accuracy = crate::records::metrics::is_accuracy(&spec.metric);
    for g in s.groups().into_iter().cloned().collect::<Vec<_>>() {
        if !s.tried.iter().any(|t| t.group == g && t.trained()) {
            s.none.push((g, NoChoice::NoneTrained));
            continue;
        }
        let any_confirmed = s.tried.iter().any(|t| t.group == g && t.confirmed);
        let best = s
            .ranked(&g)
            .into_iter()
            .find(|t| t.confirmed || !any_confirmed)
            .map(|t| (t.config.clone(), t.score.unwrap_or(f64::NAN)));
        let Some((config, score)) = best else {
            s.none.push((g, NoChoice::NoneTrained));
            continue;
        };
        if let Some(c) = chance.get(&g).filter(|_| accuracy)
            && score <= c + spec.chance_margin
        {
            let why = NoChoice::AtChance {
                best: score,
                chance: *c,
            };
            s.none.push((g, why));
            continue;
        }
        if let Some(t) = s
            .tried
            .iter_mut()
            .find(|t| t.group == g && t.config == config)
        {
            t.chosen = true;
        }
    }
    s
}

/// Each configuration's score and runs by health, in the order the rows
/// first name them (none chosen yet), and each group's chance accuracy.
type Tally = (Vec<Tried>, BTreeMap<BTreeMap<String, String>, f64>);

/// The rows counted per (group, configuration): see [`Tally`].
fn tally(spec: &TuneSpec, rows: &[RunRecord]) -> Tally {
    let higher = higher(spec);
    let confirm_seeds: Vec<String> = spec
        .confirm
        .iter()
        .flat_map(|c| c.seeds.iter().map(plan::text))
        .collect();
    // (group, config) -> (the scored values, the runs by health, confirmed)
    type Key = (BTreeMap<String, String>, String);
    type Acc = (Vec<f64>, BTreeMap<Health, usize>, bool);
    let mut by: BTreeMap<Key, Acc> = BTreeMap::new();
    let mut order: Vec<Key> = Vec::new();
    let mut chance: BTreeMap<BTreeMap<String, String>, f64> = BTreeMap::new();
    for r in rows {
        let Some(config) = r.point.get(CONFIG_KEY) else {
            continue;
        };
        let k = (group(&r.point), config.clone());
        if !by.contains_key(&k) {
            order.push(k.clone());
        }
        if let Some(c) = r.chance() {
            chance.insert(k.0.clone(), c);
        }
        let e = by.entry(k).or_default();
        *e.1.entry(r.health().unwrap_or(Health::Unfinished))
            .or_default() += 1;
        if r.point
            .get(SEED_KEY)
            .is_some_and(|s| confirm_seeds.contains(s))
        {
            e.2 = true;
        }
        if let Some(v) = r.counted(&spec.metric, higher).number() {
            e.0.push(v);
        }
    }
    let tried = order
        .iter()
        .map(|k| {
            let (values, health, confirmed) = &by[k];
            let score =
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
            Tried {
                group: k.0.clone(),
                config: k.1.clone(),
                score,
                scored: values.len(),
                runs: health.values().sum(),
                health: health.clone(),
                confirmed: *confirmed,
                chosen: false,
            }
        })
        .collect();
    (tried, chance)
}

/// A setting as `key=value` pairs: "bits=1 method=moniqua".
pub(crate) fn group_text(g: &BTreeMap<String, String>) -> String {
    g.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The seeds of the final runs `grid`, sorted, once each: what tuning.md
/// says the tuning seeds are kept apart from.
pub(crate) fn final_seeds(grid: &[PlannedRun]) -> Vec<String> {
    let mut seeds: Vec<String> = grid
        .iter()
        .filter_map(|r| r.point.get(SEED_KEY).cloned())
        .collect();
    seeds.sort();
    seeds.dedup();
    seeds
}

/// tuning.md's paragraph on the protocol: seeds, score, choice, second
/// look.
fn protocol(spec: &TuneSpec, final_seeds: &[String]) -> String {
    let seeds: Vec<String> = spec.seeds.iter().map(plan::text).collect();
    format!(
        "Protocol: each method tried {} configurations (the same budget for every method) from its search space; \
         each ran on the tuning seeds [{}], which the final runs (seeds [{}]) never use, and was scored by `{}` ({} is better){}, \
         the mean over its tuning seeds by intention to treat: a run whose method failed (diverged, exploded, collapsed) counts with what it achieved (its value, or the worst the metric can take where it has none: chance accuracy, or last), a run that did not test the method (silent, unfinished) is left out. \
         The best score is chosen whatever its runs' health (ties go to fewer failed runs); a setting where no run trained{}, found no working configuration and has no final runs.{} \
         The choice of each method and setting ran on the final seeds. The test set chose nothing.\n\n",
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
        if crate::records::metrics::is_accuracy(&spec.metric) && spec.chance_margin >= 0.0 {
            format!(
                ", or whose best {} is within {} of chance",
                spec.metric,
                short(spec.chance_margin)
            )
        } else {
            String::new()
        },
        match &spec.confirm {
            Some(c) => format!(
                " The best {} of each method and setting by that score then ran on the further seeds [{}], and the choice was made among them over all their seeds.",
                c.best,
                c.seeds
                    .iter()
                    .map(plan::text)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        },
    )
}

/// tuning.md: the protocol in words, every configuration's score and the
/// choices.
pub(crate) fn markdown(
    m: &Manifest,
    spec: &TuneSpec,
    final_seeds: &[String],
    s: &Selection,
    refused: &[String],
    figures: &[(String, std::path::PathBuf)],
) -> String {
    let mut out = format!("# Tuning: {}\n\n", m.title);
    out.push_str(&protocol(spec, final_seeds));
    out.push_str(&spaces(spec));
    out.push_str("- every other method: untuned (its manifest settings)\n\n");
    if spec.extend {
        out.push_str(
            "`tune.extend`: a first choice at the edge of a numeric axis was tried once more one step beyond it (a grid step, geometric for positive values; a quarter of a range's span beyond its bound), on every tuning seed, the same rule for every method, and the choice made again.\n\n",
        );
    }
    out.push_str(&format!(
        "| setting | configuration | {} (mean) | runs scored | health | second look | chosen |\n|---|---|---|---|---|---|---|\n",
        spec.metric
    ));
    for t in &s.tried {
        let method = t.group.get(&spec.key).map_or("", String::as_str);
        let beyond = !configs(spec, method).iter().any(|c| c.label == t.config);
        out.push_str(&format!(
            "| {} | {}{} | {} | {}/{} | {} | {} | {} |\n",
            group_text(&t.group),
            t.config,
            if beyond { " (beyond the space)" } else { "" },
            t.score.map_or_else(|| "-".into(), number),
            t.scored,
            t.runs,
            counts_text(&t.health),
            if t.confirmed { "yes" } else { "" },
            if t.chosen { "**yes**" } else { "" }
        ));
    }
    if !figures.is_empty() {
        out.push_str(&format!(
            "\nWhat the search saw, per setting: `{}` over each tuned value (the other values as drawn), each run a dot by health (a failed run, counted, a cross), a run that wrapped past the modulus ringed, each configuration's mean a bar, the choice circled, chance a grey line.\n\n",
            spec.metric
        ));
        for (setting, path) in figures {
            out.push_str(&format!(
                "![{setting}]({})\n\n",
                path.to_string_lossy().replace('\\', "/")
            ));
        }
    }
    out.push_str(&findings(spec, s, refused));
    out
}

/// The figures' view of each setting of the search: every run of `rows`
/// (the search's runs, judged) that belongs to it, each configuration's
/// mean, and the choice, over each numeric tuned value.
pub(crate) fn views(
    spec: &TuneSpec,
    s: &Selection,
    rows: &[RunRecord],
) -> Vec<crate::report::tune_figure::SearchView> {
    use crate::report::tune_figure::{ConfigPoint, RunPoint, SearchView};
    let accuracy = crate::records::metrics::is_accuracy(&spec.metric);
    let scale = if accuracy { 100.0 } else { 1.0 };
    let values = |label: &str| -> BTreeMap<String, f64> {
        label
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_string(), v.parse::<f64>().ok()?)))
            .collect()
    };
    let mut out = Vec::new();
    for g in s.groups() {
        let method = g.get(&spec.key).map_or("", String::as_str);
        let Some(space) = spec.space.get(method) else {
            continue;
        };
        let axes: Vec<(String, bool)> = space
            .iter()
            .filter_map(|(k, a)| match a {
                Axis::Range(r) => Some((k.clone(), r.scale == AxisScale::Log)),
                Axis::Values(v) => {
                    let nums: Vec<f64> = v.iter().filter_map(numeric).collect();
                    let lo = nums.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = nums.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    (nums.len() == v.len() && !nums.is_empty())
                        .then(|| (k.clone(), lo > 0.0 && hi >= 10.0 * lo))
                }
            })
            .collect();
        let mut chance = None;
        let runs: Vec<RunPoint> = rows
            .iter()
            .filter(|r| group(&r.point) == *g)
            .filter_map(|r| {
                chance = chance.or(r.chance().filter(|_| accuracy).map(|c| c * scale));
                let value = r.counted(&spec.metric, s.higher).number()?;
                Some(RunPoint {
                    at: values(r.point.get(CONFIG_KEY)?),
                    value: value * scale,
                    health: r.health().unwrap_or(Health::Unfinished),
                    premise: r.premise(),
                })
            })
            .collect();
        let configs = s
            .tried
            .iter()
            .filter(|t| t.group == *g)
            .filter_map(|t| {
                Some(ConfigPoint {
                    at: values(&t.config),
                    mean: t.score? * scale,
                    chosen: t.chosen,
                })
            })
            .collect();
        out.push(SearchView {
            setting: group_text(g),
            y_label: if accuracy {
                format!("{} (%)", spec.metric)
            } else {
                spec.metric.clone()
            },
            axes,
            runs,
            configs,
            chance,
        });
    }
    out
}

/// Writes what a search chose and saw into `out`: its figures
/// (`tuning-figures/`), tuning.md and tuning.csv. `rows` are the
/// search's runs, judged.
pub(crate) fn write_outputs(
    m: &Manifest,
    spec: &TuneSpec,
    out: &std::path::Path,
    final_seeds: &[String],
    s: &Selection,
    refused: &[String],
    rows: &[RunRecord],
) -> Result<()> {
    let figures = crate::report::tune_figure::write(out, &views(spec, s, rows))?;
    crate::util::atomic::write(
        &out.join(Entry::Tuning.name()),
        markdown(m, spec, final_seeds, s, refused, &figures),
    )?;
    crate::util::atomic::write(&out.join(Entry::TuningCsv.name()), csv(spec, s)?)
}

/// tuning.md's list of the search spaces, what each holds and how many
/// configurations the budget tried; unequal effort is said.
fn spaces(spec: &TuneSpec) -> String {
    let mut out = String::from("Search spaces:\n\n");
    let mut tried = BTreeMap::new();
    for (method, space) in &spec.space {
        let ranged = space.values().any(|a| matches!(a, Axis::Range(_)));
        let n = configs(spec, method).len();
        tried.insert(method.clone(), n);
        let params: Vec<String> = space
            .iter()
            .map(|(k, a)| format!("{k} in {}", a.text()))
            .collect();
        let whole: usize = space.values().map(|a| a.values().len()).product();
        out.push_str(&format!(
            "- {method}: {} ({n} configurations{})\n",
            params.join(", "),
            if ranged {
                ", drawn by the Halton sequence".to_string()
            } else if whole > spec.budget {
                format!(" of {whole}, chosen by a fixed hash of their labels")
            } else if whole < spec.budget {
                "; the whole space, under the budget".to_string()
            } else {
                String::new()
            }
        ));
    }
    let fewest = tried.values().min().copied().unwrap_or(0);
    let most = tried.values().max().copied().unwrap_or(0);
    if fewest < most {
        let under: Vec<String> = tried
            .iter()
            .filter(|(_, n)| **n < most)
            .map(|(m, n)| format!("{m} {n}"))
            .collect();
        out.push_str(&format!(
            "- warning: unequal effort: {} tried fewer than {most} configurations (a grid smaller than the budget; a range draws the whole budget)\n",
            under.join(", ")
        ));
    }
    out
}

/// What tuning.md says below its table: per setting, how many
/// configurations trained and whether a working one was found (no final
/// runs without one), and the warnings: choices at the edge of their
/// space, and settings whose best is at chance.
pub(crate) fn findings(spec: &TuneSpec, s: &Selection, refused: &[String]) -> String {
    let mut out =
        String::from("\nConfigurations in which some run trained (health ok), by setting:\n\n");
    for g in s.groups() {
        let of: Vec<&Tried> = s.tried.iter().filter(|t| t.group == *g).collect();
        let trained = of.iter().filter(|t| t.trained()).count();
        let mut health: BTreeMap<Health, usize> = BTreeMap::new();
        for t in &of {
            for (h, n) in &t.health {
                *health.entry(*h).or_default() += n;
            }
        }
        let none = s.none.iter().find(|(ng, _)| ng == g).map(|(_, why)| why);
        out.push_str(&format!(
            "- {}: {trained} of {} (runs: {}){}\n",
            group_text(g),
            of.len(),
            counts_text(&health),
            match none {
                Some(NoChoice::NoneTrained) =>
                    ": no configuration trained, so this setting has no final runs".to_string(),
                Some(NoChoice::AtChance { .. }) =>
                    ": no working configuration found (below), so this setting has no final runs"
                        .to_string(),
                None => String::new(),
            }
        ));
    }
    let warnings = warnings(spec, s, refused);
    if !warnings.is_empty() {
        out.push_str("\nWarnings, and choices at the edge of the search space:\n\n");
        out.extend(warnings);
    }
    if !refused.is_empty() {
        out.push_str("\nSteps beyond the space the plan refused:\n\n");
        for r in refused {
            out.push_str(&format!("- {r}\n"));
        }
    }
    out
}

/// tuning.md's warnings: settings at chance, choices beyond the space
/// after `extend`, and choices at the edge of a numeric axis.
fn warnings(spec: &TuneSpec, s: &Selection, refused: &[String]) -> Vec<String> {
    let mut warnings = Vec::new();
    for (g, why) in &s.none {
        if let NoChoice::AtChance { best, chance } = why {
            warnings.push(format!(
                "- warning: {}: no working configuration found: the best {} is {}, within {} of chance ({}); its comparisons read as for a method that did not train\n",
                group_text(g),
                spec.metric,
                number(*best),
                short(spec.chance_margin),
                number(*chance)
            ));
        }
    }
    for t in s.tried.iter().filter(|t| t.chosen) {
        let method = t.group.get(&spec.key).map_or("", String::as_str);
        if !configs(spec, method).iter().any(|c| c.label == t.config) {
            warnings.push(format!(
                "- warning: {}: {} (one step beyond the space) was chosen, at the edge after `extend`: the optimum may lie further out; widen the space\n",
                group_text(&t.group),
                t.config
            ));
            continue;
        }
        for (axis, edge, beyond) in edges(spec, method, &t.config) {
            let step = format!("{axis}={}", plan::text(&beyond));
            let tried_beyond = s
                .tried
                .iter()
                .any(|u| u.group == t.group && u.config.split(' ').any(|kv| kv == step));
            // a refusal reads "{group} {config}: why"
            let refused_beyond = refused.iter().any(|r| {
                r.strip_prefix(&format!("{} ", group_text(&t.group)))
                    .and_then(|r| r.split_once(": "))
                    .is_some_and(|(config, _)| config.split(' ').any(|kv| kv == step))
            });
            warnings.push(format!(
                "- {}: {axis}={} is at the edge of its space{}\n",
                group_text(&t.group),
                plan::text(&edge),
                if tried_beyond {
                    format!(" ({step} was tried beyond it and scored worse)")
                } else if refused_beyond {
                    format!("; the step beyond it, {step}, was refused (below)")
                } else {
                    format!("; the optimum may lie beyond it (next step: {step}; `tune.extend: true` tries it)")
                }
            ));
        }
    }
    warnings
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
            "health".into(),
            "confirmed".into(),
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
                counts_text(&t.health),
                t.confirmed.to_string(),
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
        let ranged = "{metric: val_accuracy, budget: 12, seeds: [9], validation: 0.1, confirm: {best: 3, seeds: [10, 11]}, compare_with: {experiment: sweep, method: moniqua}, space: {moniqua: {gamma: {range: [0.002, 1.0], stated: 0.005}, modulus: {range: [0.02, 20.0]}}}}";
        assert!(check(&spec(ranged), Backend::Mpi, &points()).is_ok());
        let cases = cases.into_iter().chain([
            (
                ranged.replace("stated: 0.005", "stated: 0.001"),
                Backend::Mpi,
                "tune.space.moniqua.gamma",
                "lies outside [0.002, 1]",
            ),
            (
                ranged.replace("[0.02, 20.0]", "[0.0, 20.0]"),
                Backend::Mpi,
                "tune.space.moniqua.modulus",
                "must be positive",
            ),
            (
                ranged.replace("[0.02, 20.0]", "[20.0, 0.02]"),
                Backend::Mpi,
                "tune.space.moniqua.modulus",
                "is not a range",
            ),
            (
                ranged.replace("budget: 12", "budget: 11"),
                Backend::Mpi,
                "tune.budget",
                "at least 12 configurations",
            ),
            (
                ranged.replace("seeds: [10, 11]", "seeds: [9, 11]"),
                Backend::Mpi,
                "tune.confirm.seeds",
                "also in tune.seeds",
            ),
            (
                ranged.replace("seeds: [10, 11]", "seeds: [1]"),
                Backend::Mpi,
                "tune.confirm.seeds",
                "also a final seed",
            ),
            (
                ranged.replace("best: 3", "best: 0"),
                Backend::Mpi,
                "tune.confirm.best",
                "at least one",
            ),
            (
                ranged.replace("method: moniqua}", "method: choco}"),
                Backend::Mpi,
                "tune.compare_with.method",
                "no search space",
            ),
            (
                ranged.replace("experiment: sweep", "experiment: ../etc/x"),
                Backend::Mpi,
                "tune.compare_with.experiment",
                "not an experiment's name",
            ),
            (
                ranged.replace("validation: 0.1,", "validation: 0.1, chance_margin: 1.5,"),
                Backend::Mpi,
                "tune.chance_margin",
                "not a share",
            ),
        ]);
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
                ("chance_accuracy".to_string(), Cell::Number(Some(0.1))),
            ]
            .into(),
        }
    }

    fn chosen(sel: &Selection) -> Vec<(&str, &str)> {
        sel.tried
            .iter()
            .filter(|t| t.chosen)
            .map(|t| (t.group["algorithm"].as_str(), t.config.as_str()))
            .collect()
    }

    fn with_health(mut r: RunRecord, health: &str) -> RunRecord {
        r.metrics.insert("health".into(), Cell::Text(health.into()));
        r
    }

    /// The best mean over the tuning seeds wins, a failed run counted with
    /// what it achieved (chance accuracy without a value).
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
        assert_eq!(chosen(&sel), [("moniqua", "g=3"), ("choco", "g=1")]);
        let g2 = sel.tried.iter().find(|t| t.config == "g=2").unwrap();
        // 0.90 and the diverged run at chance: (0.9 + 0.1) / 2
        assert_eq!((g2.scored, g2.runs, g2.failed()), (2, 2, 1));
        assert!((g2.score.unwrap() - 0.5).abs() < 1e-12, "{g2:?}");
        assert_eq!(counts_text(&g2.health), "1 ok, 1 diverged");
        // a silent run did not test the method: left out of the score
        let mut rows = rows.clone();
        rows.push(with_health(
            run("choco", "g=1", "10", "completed", Some(0.1)),
            "silent",
        ));
        let sel = select(&s, &rows);
        let choco = sel
            .tried
            .iter()
            .find(|t| t.group["algorithm"] == "choco")
            .unwrap();
        assert_eq!((choco.score, choco.scored, choco.runs), (Some(0.7), 2, 3));
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

    /// The audit's case: the best-scoring configuration has runs that are
    /// not ok, and it is chosen all the same (no veto by health). Equal
    /// scores go to fewer failed runs. A setting where no run trained gets
    /// no choice.
    #[test]
    fn the_best_score_is_chosen_whatever_its_health() {
        let s =
            spec("{metric: val_accuracy, budget: 3, seeds: [8, 9], validation: 0.1, space: {}}");
        let rows = vec![
            // B 0.4, gamma 0.5 in v4: the best mean, one run failed
            run("moniqua", "b=0.4", "8", "completed", Some(0.62)),
            with_health(
                run("moniqua", "b=0.4", "9", "completed", Some(0.25)),
                "exploded",
            ),
            // B 8, gamma 5e-3: every run ok, a lower mean
            run("moniqua", "b=8", "8", "completed", Some(0.16)),
            run("moniqua", "b=8", "9", "completed", Some(0.14)),
        ];
        let sel = select(&s, &rows);
        assert_eq!(chosen(&sel), [("moniqua", "b=0.4")], "{sel:?}");
        // a tie: the one with fewer failed runs, though tried later
        let tie = vec![
            run("choco", "a", "8", "completed", Some(0.9)),
            with_health(run("choco", "a", "9", "completed", Some(0.5)), "exploded"),
            run("choco", "b", "8", "completed", Some(0.7)),
            run("choco", "b", "9", "completed", Some(0.7)),
        ];
        assert_eq!(chosen(&select(&s, &tie)), [("choco", "b")]);
        // no run trained: no choice, and the setting says why
        let none = vec![
            with_health(run("ecd", "a", "8", "completed", Some(0.3)), "collapsed"),
            run("ecd", "b", "8", "diverged", None),
        ];
        let sel = select(&s, &none);
        assert!(chosen(&sel).is_empty());
        assert_eq!(sel.none.len(), 1);
        assert_eq!(sel.none[0].1, NoChoice::NoneTrained);
        assert_eq!(sel.unviable().len(), 1);
    }

    /// A setting whose best score is within `tune.chance_margin` of chance
    /// found no working configuration: no choice, and tuning.md warns. A
    /// setting that trains is left alone.
    #[test]
    fn a_best_score_at_chance_is_no_working_configuration() {
        let s =
            spec("{metric: val_accuracy, budget: 3, seeds: [8, 9], validation: 0.1, space: {}}");
        let mut rows = vec![
            run("moniqua", "b=160", "8", "completed", Some(0.13)),
            run("moniqua", "b=160", "9", "completed", Some(0.14)),
            run("moniqua", "b=8", "8", "completed", Some(0.11)),
        ];
        let sel = select(&s, &rows);
        assert!(chosen(&sel).is_empty(), "{sel:?}");
        assert!(matches!(
            sel.none[0].1,
            NoChoice::AtChance { best, chance } if (best - 0.135).abs() < 1e-12 && chance == 0.1
        ));
        let said = findings(&s, &sel, &[]);
        assert!(
            said.contains("warning: algorithm=moniqua bits=1: no working configuration found: the best val_accuracy is 0.1350, within 0.05 of chance (0.1000)"),
            "{said}"
        );
        // a configuration that trains: chosen, and no warning
        rows.push(run("moniqua", "b=2", "8", "completed", Some(0.82)));
        let sel = select(&s, &rows);
        assert_eq!(chosen(&sel), [("moniqua", "b=2")]);
        assert!(
            !findings(&s, &sel, &[]).contains("no working configuration"),
            "{sel:?}"
        );
        // a loss has no chance level: never judged so
        let loss = spec("{metric: val_loss, budget: 3, seeds: [8], validation: 0.1, space: {}}");
        let mut r = run("moniqua", "a", "8", "completed", None);
        r.metrics.insert("val_loss".into(), Cell::Number(Some(0.1)));
        assert_eq!(chosen(&select(&loss, &[r])), [("moniqua", "a")]);
    }

    /// Halton's radical inverse, against its first values by hand.
    #[test]
    fn the_halton_sequence() {
        let base2: Vec<f64> = (1..=4).map(|i| halton(i, 2)).collect();
        assert_eq!(base2, [0.5, 0.25, 0.75, 0.125]);
        let base3: Vec<f64> = (1..=4).map(|i| halton(i, 3)).collect();
        for (got, want) in base3
            .iter()
            .zip([1.0 / 3.0, 2.0 / 3.0, 1.0 / 9.0, 4.0 / 9.0])
        {
            assert!((got - want).abs() < 1e-15, "{base3:?}");
        }
    }

    const MONIQUA_RANGES: &str = "{metric: val_accuracy, budget: 12, seeds: [8, 9], validation: 0.1,
        space: {moniqua: {modulus: {range: [0.05, 20], stated: 8.0}, gamma: {range: [0.002, 1], stated: 0.005}},
                choco: {gamma: {range: [0.01, 1]}, compressor_scale: [0, 1]}}}";

    /// A range draws exactly the budget, the same points for every run of
    /// the tool, spread over the whole range in its scale; a list axis
    /// beside a range is drawn from by index, both values taken.
    #[test]
    fn a_range_draws_the_budget_evenly() {
        let s = spec(MONIQUA_RANGES);
        let m = configs(&s, "moniqua");
        assert_eq!(m.len(), 12);
        assert_eq!(m, configs(&s, "moniqua"), "deterministic");
        let axis = |cs: &[Config], k: &str| -> Vec<f64> {
            cs.iter()
                .map(|c| numeric(c.set.get(k).unwrap()).unwrap())
                .collect()
        };
        // gamma is the first axis (base 2): log-even over [0.002, 1]
        let gamma = axis(&m, "gamma");
        assert!(gamma.iter().all(|g| (0.002..=1.0).contains(g)), "{gamma:?}");
        let below = |x: f64| gamma.iter().filter(|g| **g < x).count();
        // half the draws below the log-midpoint 0.0447
        assert_eq!(below(0.0447), 6, "{gamma:?}");
        assert_eq!(m[0].label, "gamma=0.0447 modulus=0.368", "{:?}", m[0]);
        let c = configs(&s, "choco");
        assert_eq!(c.len(), 12);
        let scales = axis(&c, "compressor_scale");
        assert_eq!(
            scales.iter().filter(|v| **v == 0.0).count(),
            6,
            "{scales:?}"
        );
    }

    /// The v4 failure: Moniqua's working region at 1 bit (B 0.5-2, gamma
    /// 0.05-0.2 in the sensitivity sweep) lies between the grid's values,
    /// so the grid never tries it; the range does, and the choice lands
    /// in it on a score that peaks there.
    #[test]
    fn a_working_region_between_grid_values_is_found_by_the_range() {
        let works = |b: f64, g: f64| (0.3..=3.0).contains(&b) && (0.02..=0.3).contains(&g);
        let score = |b: f64, g: f64| if works(b, g) { 0.83 } else { 0.15 };
        let grid = spec(
            "{metric: val_accuracy, budget: 6, seeds: [8], validation: 0.1,
              space: {moniqua: {modulus: [0.02, 0.4, 8.0], gamma: [0.005, 0.5]}}}",
        );
        let ranged = spec(MONIQUA_RANGES);
        let rows = |s: &TuneSpec| -> Vec<RunRecord> {
            configs(s, "moniqua")
                .iter()
                .map(|c| {
                    let b = numeric(c.set.get("modulus").unwrap()).unwrap();
                    let g = numeric(c.set.get("gamma").unwrap()).unwrap();
                    run("moniqua", &c.label, "8", "completed", Some(score(b, g)))
                })
                .collect()
        };
        let in_region = |label: &str| {
            let kv: BTreeMap<&str, f64> = label
                .split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k, v.parse().unwrap()))
                .collect();
            works(kv["modulus"], kv["gamma"])
        };
        assert!(
            !configs(&grid, "moniqua")
                .iter()
                .any(|c| in_region(&c.label))
        );
        // the grid's best is at chance: no working configuration
        assert!(chosen(&select(&grid, &rows(&grid))).is_empty());
        let sel = select(&ranged, &rows(&ranged));
        let picked = chosen(&sel);
        assert_eq!(picked.len(), 1, "{sel:?}");
        assert!(in_region(picked[0].1), "{picked:?}");
    }

    /// `tune.confirm`: the best few run on more seeds and the choice is
    /// made among them over all their seeds; a step beyond the edge that
    /// won on one lucky seed does not win over five.
    #[test]
    fn extend_on_one_lucky_seed_is_not_taken() {
        let s = spec(
            "{metric: val_accuracy, budget: 3, seeds: [8, 9], validation: 0.1, extend: true,
              confirm: {best: 2, seeds: [10, 11, 12]}, space: {}}",
        );
        let mut rows = vec![
            run("moniqua", "a", "8", "completed", Some(0.80)),
            run("moniqua", "a", "9", "completed", Some(0.80)),
            run("moniqua", "b", "8", "completed", Some(0.79)),
            run("moniqua", "b", "9", "completed", Some(0.79)),
            run("moniqua", "c", "8", "completed", Some(0.60)),
            run("moniqua", "c", "9", "completed", Some(0.60)),
        ];
        let first = select(&s, &rows);
        assert_eq!(first.finalists(2).len(), 2);
        assert_eq!(first.finalists(2)[1].1, "b");
        // the second look: a and b on three more seeds; the step beyond,
        // e, on all five, lucky on one of them
        for (c, values) in [
            ("a", [0.78, 0.78, 0.78]),
            ("b", [0.80, 0.80, 0.80]),
            ("e", [0.95, 0.70, 0.70]),
        ] {
            for (seed, v) in ["10", "11", "12"].iter().zip(values) {
                rows.push(run("moniqua", c, seed, "completed", Some(v)));
            }
        }
        rows.push(run("moniqua", "e", "8", "completed", Some(0.70)));
        rows.push(run("moniqua", "e", "9", "completed", Some(0.70)));
        let sel = select(&s, &rows);
        // b: 0.794 over five seeds; a: 0.788; e: 0.75; c, never
        // confirmed, is out of the running
        assert_eq!(chosen(&sel), [("moniqua", "b")], "{sel:?}");
        let e = sel.tried.iter().find(|t| t.config == "e").unwrap();
        assert!(e.confirmed && e.scored == 5);
        // one seed alone would have taken the step beyond
        let one_seed: Vec<RunRecord> = rows
            .iter()
            .filter(|r| r.point["seed"] == "10")
            .cloned()
            .collect();
        assert_eq!(chosen(&select(&s, &one_seed)), [("moniqua", "e")]);
    }

    /// A choice at an edge whose step beyond the plan refused says so; one
    /// never tried beyond suggests `tune.extend`.
    #[test]
    fn an_edge_whose_step_beyond_was_refused_says_so() {
        let s = spec(
            "{metric: val_accuracy, budget: 3, seeds: [9], validation: 0.1, extend: true,
              space: {choco: {gamma: [0.25, 0.5, 1.0]}}}",
        );
        let rows = vec![
            run("choco", "gamma=0.5", "9", "completed", Some(0.80)),
            run("choco", "gamma=1.0", "9", "completed", Some(0.90)),
        ];
        let sel = select(&s, &rows);
        let refused = ["algorithm=choco bits=1 gamma=2.0: gamma must be at most 1".to_string()];
        let said = findings(&s, &sel, &refused);
        assert!(
            said.contains(
                "algorithm=choco bits=1: gamma=1.0 is at the edge of its space; \
                 the step beyond it, gamma=2.0, was refused (below)"
            ),
            "{said}"
        );
        assert!(!said.contains("tries it"), "{said}");
        let said = findings(&s, &sel, &[]);
        assert!(
            said.contains("next step: gamma=2.0; `tune.extend: true` tries it"),
            "{said}"
        );
    }

    /// A choice at the smallest or largest value of a numeric axis is at
    /// its edge; the step beyond is geometric for positive values,
    /// arithmetic otherwise, and whole for whole numbers.
    #[test]
    fn edges_and_the_step_beyond() {
        let s = spec(
            "{metric: val_accuracy, budget: 9, seeds: [9], validation: 0.1,
              space: {dcd: {lr: [0.02, 0.05, 0.1], compressor_scale: [1, 0.25]}, choco: {gamma: [-1.0, 0.0, 1.0], bucket: [256, 512]}}}",
        );
        let at = |m: &str, c: &str| {
            edges(&s, m, c)
                .into_iter()
                .map(|(a, e, b)| format!("{a}: {} -> {}", plan::text(&e), plan::text(&b)))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            at("dcd", "compressor_scale=1 lr=0.1"),
            ["compressor_scale: 1 -> 4.0", "lr: 0.1 -> 0.2"]
        );
        assert_eq!(
            at("dcd", "compressor_scale=0.25 lr=0.05"),
            ["compressor_scale: 0.25 -> 0.0625"]
        );
        assert_eq!(
            at("dcd", "compressor_scale=0.25 lr=0.02"),
            ["compressor_scale: 0.25 -> 0.0625", "lr: 0.02 -> 0.008"]
        );
        assert_eq!(at("choco", "bucket=512 gamma=0.0"), ["bucket: 512 -> 1024"]);
        let zero = spec(
            "{metric: val_accuracy, budget: 9, seeds: [9], validation: 0.1, space: {choco: {compressor_scale: [0, 1]}}}",
        );
        assert!(edges(&zero, "choco", "compressor_scale=0").is_empty());
        assert_eq!(edges(&zero, "choco", "compressor_scale=1").len(), 1);
        assert_eq!(
            at("choco", "bucket=256 gamma=-1.0"),
            ["bucket: 256 -> 128", "gamma: -1.0 -> -2.0"]
        );
        assert!(at("d-psgd", "untuned").is_empty());
        // the configuration beyond, and back from its label
        let c = replaced(
            &s,
            "dcd",
            "compressor_scale=1 lr=0.1",
            "lr",
            &Value::from(0.2),
        )
        .unwrap();
        assert_eq!(c.label, "compressor_scale=1 lr=0.2");
        assert_eq!(
            extended_config(&s, "dcd", "compressor_scale=1 lr=0.2"),
            Some(c)
        );
    }
}
