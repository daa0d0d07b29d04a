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

use crate::records::health::{Health, counts_text};
use crate::records::metrics::{Kind, METRICS, kind};
use crate::records::results::{RunRecord, csv_text};
use crate::records::results_dir::Entry;
use crate::report::table::{number, short};
use crate::spec::manifest::{Backend, HealthSpec, Manifest, TuneSpec};
use crate::spec::plan::{self, CONFIG_KEY, Config, Limits, PlannedRun, SEED_KEY};

/// The configurations method `method` is tried in: the cartesian product
/// of its space (a config's label is its `key=value` pairs), cut to the
/// budget by a fixed pseudo-random choice (the order of the labels'
/// hashes); "untuned" alone for a method without a space.
pub(crate) fn configs(spec: &TuneSpec, method: &str) -> Vec<Config> {
    let mut configs = configs_unbudgeted(spec, method);
    if configs.len() > spec.budget {
        configs.sort_by_key(|c| xxhash_rust::xxh3::xxh3_64(c.label.as_bytes()));
        configs.truncate(spec.budget);
        configs.sort_by(|a, b| a.label.cmp(&b.label));
    }
    configs
}

/// Every configuration of `method`'s space ("untuned" alone without one).
fn configs_unbudgeted(spec: &TuneSpec, method: &str) -> Vec<Config> {
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
    all.into_iter()
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
        .collect()
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
/// extension the first choice asks for, under `tune.extend`), the choice
/// among them, and the steps beyond the space the plan refused.
pub(crate) fn search(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    recorded: &[RunRecord],
) -> Result<(Vec<PlannedRun>, Selection, Vec<String>)> {
    let mut tuning = tuning_runs(m, spec, scale, backend, Limits::default())?;
    let first = select_planned(spec, &tuning, recorded, &m.health);
    if !spec.extend {
        return Ok((tuning, first, Vec::new()));
    }
    let (extra, refused) = extension_runs(m, spec, scale, backend, &first);
    tuning.extend(extra);
    let selection = select_planned(spec, &tuning, recorded, &m.health);
    Ok((tuning, selection, refused))
}

/// The tuning runs recorded in `out/tuning/runs.csv` that belong to
/// `m`'s search at `scale` on `backend`, health judged (none without a
/// search or a record): what a claim decides from when a method's every
/// configuration failed.
pub(crate) fn recorded_tuning(
    m: &Manifest,
    scale: &str,
    backend: Backend,
    out: &std::path::Path,
) -> Result<Vec<RunRecord>> {
    let csv = out.join(Entry::TuningDir.name()).join(Entry::Runs.name());
    let Some(spec) = m.tune.as_ref().filter(|_| csv.is_file()) else {
        return Ok(Vec::new());
    };
    let recorded = crate::records::results::read_csv(&csv)?;
    let (tuning, ..) = search(m, spec, scale, backend, &recorded)?;
    Ok(crate::records::results::planned(
        &recorded, &tuning, &m.health,
    ))
}

/// A value of a numeric axis, as a number.
fn numeric(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_i64().map(|i| i as f64))
}

/// Where `config` of `method` sits at the edge of its space: each numeric
/// axis of two or more values whose chosen value is its smallest or its
/// largest, with the value one step beyond (geometric for positive
/// values, else arithmetic; whole numbers stay whole). Zero, the bound of
/// an axis of non-negative values, is no edge.
fn edges(spec: &TuneSpec, method: &str, config: &str) -> Vec<(String, Value, Value)> {
    let Some(space) = spec.space.get(method) else {
        return Vec::new();
    };
    let chosen: BTreeMap<&str, &str> = config
        .split(' ')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let mut out = Vec::new();
    for (axis, values) in space {
        let mut nums: Vec<f64> = values.iter().filter_map(numeric).collect();
        if nums.len() != values.len() || nums.len() < 2 {
            continue;
        }
        nums.sort_by(f64::total_cmp);
        nums.dedup();
        let Some(at) = chosen
            .get(axis.as_str())
            .and_then(|t| t.parse::<f64>().ok())
        else {
            continue;
        };
        // zero bounds an axis of non-negative values (an unscaled
        // compressor, no momentum): nothing lies beyond it
        if at == 0.0 && nums[0] >= 0.0 {
            continue;
        }
        let (edge, inner) = if at == nums[0] {
            (nums[0], nums[1])
        } else if at == nums[nums.len() - 1] {
            (nums[nums.len() - 1], nums[nums.len() - 2])
        } else {
            continue;
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
        out.push((axis.clone(), edge_value, value));
    }
    out
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

/// The runs `tune.extend` adds after the first choice: for each group
/// whose choice sits at the edge of a numeric axis, that configuration
/// with the axis one step beyond, on the tuning seeds. A step the plan
/// refuses (a value the algorithm does not accept) is left out and said
/// in the second part.
pub(crate) fn extension_runs(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    first: &Selection,
) -> (Vec<PlannedRun>, Vec<String>) {
    let (mut runs, mut refused) = (Vec::new(), Vec::new());
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
                Some(&spec.seeds),
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
    pub chosen: bool,
}

impl Tried {
    /// Whether the configuration is viable: at least one of its runs
    /// trained (health ok), and it has a score. A configuration whose
    /// every run failed is never chosen: the method did not train in it.
    pub(crate) fn viable(&self) -> bool {
        self.health.get(&Health::Ok).is_some_and(|n| *n > 0) && self.score.is_some()
    }
}

/// The search's outcome: every configuration's score, and the chosen one
/// of each group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    pub tried: Vec<Tried>,
}

impl Selection {
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

    /// The groups whose every configuration was invalid: no final runs.
    pub(crate) fn unviable(&self) -> Vec<&BTreeMap<String, String>> {
        let mut groups: Vec<&BTreeMap<String, String>> = Vec::new();
        for t in &self.tried {
            if !groups.contains(&&t.group) {
                groups.push(&t.group);
            }
        }
        groups
            .into_iter()
            .filter(|g| !self.tried.iter().any(|t| &t.group == *g && t.chosen))
            .collect()
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

/// Chooses each group's configuration from the tuning runs: the best mean
/// of the metric over the tuning seeds by intention to treat (a failed
/// run counts with what it achieved, a run that did not test the method
/// is left out) among the viable configurations (at least one run ok). A
/// group with none viable gets no choice. Ties keep the first.
pub(crate) fn select(spec: &TuneSpec, rows: &[RunRecord]) -> Selection {
    let higher = higher(spec);
    // (group, config) -> (the scored values, the runs by health)
    type Key = (BTreeMap<String, String>, String);
    let mut by: BTreeMap<Key, (Vec<f64>, BTreeMap<Health, usize>)> = BTreeMap::new();
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
        let health = r.health().unwrap_or(Health::Unfinished);
        *e.1.entry(health).or_default() += 1;
        if let Some(v) = r.counted(&spec.metric, higher).number() {
            e.0.push(v);
        }
    }
    let mut tried: Vec<Tried> = order
        .iter()
        .map(|k| {
            let (values, health) = &by[k];
            let runs: usize = health.values().sum();
            let score =
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
            Tried {
                group: k.0.clone(),
                config: k.1.clone(),
                score,
                scored: values.len(),
                runs,
                health: health.clone(),
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
        let mut best: Option<(usize, f64)> = None;
        for (i, t) in tried.iter().enumerate().filter(|(_, t)| t.group == g) {
            if let Some(s) = t.score.filter(|_| t.viable())
                && best.is_none_or(|(_, b)| better(s, b))
            {
                best = Some((i, s));
            }
        }
        if let Some((b, _)) = best {
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

/// tuning.md: the protocol in words, every configuration's score and the
/// choices.
pub(crate) fn markdown(
    m: &Manifest,
    spec: &TuneSpec,
    final_seeds: &[String],
    s: &Selection,
    refused: &[String],
) -> String {
    let seeds: Vec<String> = spec.seeds.iter().map(plan::text).collect();
    let mut out = format!("# Tuning: {}\n\n", m.title);
    out.push_str(&format!(
        "Protocol: each method tried up to {} configurations (the same budget for every method) from its search space; \
         each ran on the tuning seeds [{}], which the final runs (seeds [{}]) never use, and was scored by `{}` ({} is better){}, \
         the mean over the tuning seeds by intention to treat: a run whose method failed (diverged, exploded, collapsed, unbounded) counts with what it achieved (its value, or the worst the metric can take where it has none: chance accuracy, or last), a run that did not test the method (silent, unfinished) is left out. A configuration is viable when at least one of its runs trained (health `ok`); one whose every run failed is never chosen. \
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
    out.push_str(&spaces(spec));
    out.push_str("- every other method: untuned (its manifest settings)\n\n");
    if spec.extend {
        out.push_str(
            "`tune.extend`: a choice at the edge of a numeric axis was tried once more one step beyond it (geometric for positive values), the same rule for every method, and the choice made again.\n\n",
        );
    }
    out.push_str(&format!(
        "| setting | configuration | {} (mean) | runs scored | health | chosen |\n|---|---|---|---|---|---|\n",
        spec.metric
    ));
    for t in &s.tried {
        let method = t.group.get(&spec.key).map_or("", String::as_str);
        let beyond = !configs(spec, method).iter().any(|c| c.label == t.config);
        out.push_str(&format!(
            "| {} | {}{} | {} | {}/{} | {} | {} |\n",
            group_text(&t.group),
            t.config,
            if beyond { " (beyond the space)" } else { "" },
            t.score.map_or_else(|| "-".into(), number),
            t.scored,
            t.runs,
            counts_text(&t.health),
            if t.chosen { "**yes**" } else { "" }
        ));
    }
    out.push_str(&findings(spec, s, refused));
    out
}

/// tuning.md's list of the search spaces, what each holds and how much
/// of it the budget tried.
fn spaces(spec: &TuneSpec) -> String {
    let mut out = String::from("Search spaces:\n\n");
    for (method, space) in &spec.space {
        let n: usize = space.values().map(Vec::len).product();
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
    out
}

/// What tuning.md says below its table: per setting, how many
/// configurations were viable (no final runs without one), and the
/// choices at the edge of their space.
pub(crate) fn findings(spec: &TuneSpec, s: &Selection, refused: &[String]) -> String {
    let mut out = String::from("\nViable configurations (at least one run ok), by setting:\n\n");
    let mut groups: Vec<&BTreeMap<String, String>> = Vec::new();
    for t in &s.tried {
        if !groups.contains(&&t.group) {
            groups.push(&t.group);
        }
    }
    for g in &groups {
        let of: Vec<&Tried> = s.tried.iter().filter(|t| &t.group == *g).collect();
        let viable = of.iter().filter(|t| t.viable()).count();
        let mut health: BTreeMap<Health, usize> = BTreeMap::new();
        for t in &of {
            for (h, n) in &t.health {
                *health.entry(*h).or_default() += n;
            }
        }
        out.push_str(&format!(
            "- {}: {viable} of {} viable (runs: {}){}\n",
            group_text(g),
            of.len(),
            counts_text(&health),
            if viable == 0 {
                ": no configuration trained, so this setting has no final runs"
            } else {
                ""
            }
        ));
    }
    let mut edge_lines = Vec::new();
    for t in s.tried.iter().filter(|t| t.chosen) {
        let method = t.group.get(&spec.key).map_or("", String::as_str);
        if !configs(spec, method).iter().any(|c| c.label == t.config) {
            edge_lines.push(format!(
                "- {}: {} (one step beyond the space) was chosen; the optimum may lie further out\n",
                group_text(&t.group),
                t.config
            ));
            continue;
        }
        for (axis, edge, beyond) in edges(spec, method, &t.config) {
            let tried_beyond = s.tried.iter().any(|u| {
                u.group == t.group
                    && u.config
                        .split(' ')
                        .any(|kv| kv == format!("{axis}={}", plan::text(&beyond)))
            });
            let step = format!("{axis}={}", plan::text(&beyond));
            // a refusal reads "{group} {config}: why"
            let refused_beyond = refused.iter().any(|r| {
                r.strip_prefix(&format!("{} ", group_text(&t.group)))
                    .and_then(|r| r.split_once(": "))
                    .is_some_and(|(config, _)| config.split(' ').any(|kv| kv == step))
            });
            edge_lines.push(format!(
                "- {}: {axis}={} is at the edge of its space{}\n",
                group_text(&t.group),
                plan::text(&edge),
                if tried_beyond {
                    format!(" ({step} was tried beyond it and scored worse)")
                } else if refused_beyond {
                    format!("; the step beyond it, {step}, was refused (below)")
                } else {
                    format!("; the optimum may lie beyond it (next step: {axis}={}; `tune.extend: true` tries it)", plan::text(&beyond))
                }
            ));
        }
    }
    if !edge_lines.is_empty() {
        out.push_str("\nChoices at the edge of the search space:\n\n");
        out.extend(edge_lines);
    }
    if !refused.is_empty() {
        out.push_str("\nSteps beyond the space the plan refused:\n\n");
        for r in refused {
            out.push_str(&format!("- {r}\n"));
        }
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
            "health".into(),
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
                ("chance_accuracy".to_string(), Cell::Number(Some(0.1))),
            ]
            .into(),
        }
    }

    /// The best mean over the tuning seeds wins, a failed run counted with
    /// what it achieved (chance accuracy without a value); a configuration
    /// whose every run failed is never chosen.
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
        // 0.90 and the diverged run at chance: (0.9 + 0.1) / 2
        assert_eq!((g2.scored, g2.runs), (2, 2));
        assert!((g2.score.unwrap() - 0.5).abs() < 1e-12, "{g2:?}");
        assert!(g2.viable());
        assert_eq!(counts_text(&g2.health), "1 ok, 1 diverged");
        // a failed run with a value counts with it: g=4 wins on 0.95 and
        // an unbounded 0.91, though one of its runs is not ok
        let mut rows = rows.clone();
        rows.push(run("moniqua", "g=4", "8", "completed", Some(0.95)));
        let mut wrapped = run("moniqua", "g=4", "9", "completed", Some(0.91));
        wrapped
            .metrics
            .insert("health".into(), Cell::Text("unbounded".into()));
        rows.push(wrapped);
        let sel = select(&s, &rows);
        let chosen = sel
            .tried
            .iter()
            .find(|t| t.chosen && t.group["algorithm"] == "moniqua")
            .unwrap();
        assert_eq!(chosen.config, "g=4", "{sel:?}");
        // a silent run did not test the method: left out of the score
        let mut silent = run("choco", "g=1", "10", "completed", Some(0.1));
        silent
            .metrics
            .insert("health".into(), Cell::Text("silent".into()));
        rows.push(silent);
        let sel = select(&s, &rows);
        let choco = sel
            .tried
            .iter()
            .find(|t| t.group["algorithm"] == "choco")
            .unwrap();
        assert_eq!((choco.score, choco.scored, choco.runs), (Some(0.7), 2, 3));
        // a run that completed but is not a valid result counts against
        // its configuration; a setting with no viable one gets no choice
        let mut collapsed = run("choco", "g=1", "8", "completed", Some(0.95));
        collapsed
            .metrics
            .insert("health".into(), Cell::Text("collapsed".into()));
        let sel = select(&s, &[collapsed, run("choco", "g=2", "8", "diverged", None)]);
        assert!(
            sel.tried.iter().all(|t| !t.chosen && !t.viable()),
            "{sel:?}"
        );
        assert_eq!(sel.unviable().len(), 1);
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
