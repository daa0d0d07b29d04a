//! A manifest at one scale, expanded into runs with stable ids.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use yaml_serde::{Mapping, Value};

use repro_runlog::{Knobs, Theta, TrainConfig};

use crate::experiment::condition::Condition;
use crate::experiment::errors::DriverError;
use crate::experiment::manifest::{self, Backend, Manifest};

mod limits;
mod params;
pub(crate) use limits::*;
use params::*;

/// The simulator's objectives (`objective`).
pub(crate) const OBJECTIVES: [&str; 4] = ["quadratic", "theorem1", "logistic", "least-squares"];
/// How the simulator splits generated data among the workers (`split`).
pub(crate) const SPLITS: [&str; 3] = ["iid", "by-label", "file-order"];

/// Everything one simulated run needs. Unknown keys are errors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct SimParams {
    /// allreduce, d-psgd, naive, naive-grid, moniqua, dcd, ecd, choco,
    /// deepsqueeze, d2, moniqua-d2, psgd, pqasgd, rsgd, qsgd, terngrad
    pub algorithm: String,
    pub workers: usize,
    /// ring, torus, complete, star, exponential
    pub topology: String,
    /// quadratic, theorem1, logistic, least-squares
    pub objective: String,
    pub dim: usize,
    pub samples: usize,
    /// Spread of the workers' minimizers (quadratic).
    pub heterogeneity: f32,
    /// iid or by-label (logistic, least-squares)
    pub split: String,
    /// Gradient noise (quadratic) or label noise (generated data).
    pub noise: f32,
    pub batch: usize,
    /// The algorithm's knobs (`bits`, `theta`, `gamma`, ...), flat in the manifest.
    #[serde(flatten)]
    pub knobs: Knobs,
    pub lr: f32,
    pub momentum: f32,
    pub weight_decay: f32,
    pub iterations: u64,
    pub seed: u64,
    pub compute_ms: f64,
    /// Write a step record every this many iterations.
    pub log_every: u64,
    /// Moniqua: check Lemma 2 on the frames of every logged iteration
    /// (each worker's recovery of each neighbour against the truth):
    /// `recovery_over_bound` and `wrap_rate` in runs.csv, which the run's
    /// health reads (`unbounded`). On by default; off saves the checks'
    /// time and leaves the wraps unmeasured.
    pub measure_recovery: bool,
    /// A LIBSVM file (plain, `.gz` or `.bz2`) for `logistic` or
    /// `least-squares` instead of generated data; its dimension is the
    /// largest feature index. Logistic regression maps its two labels onto
    /// -1 (the smaller) and +1.
    pub data: Option<String>,
    /// `zero`, or `gaussian`: each coordinate N(0, x0_scale^2), drawn from
    /// `x0_seed` (every worker starts from the same point), or
    /// `gaussian-each`: the same, but every worker from its own point.
    pub x0: String,
    pub x0_scale: f64,
    pub x0_seed: u64,
    /// The step-size schedule (`repro_algos::SCHEDULES`): constant, step
    /// (times 0.1 at each of `milestones`, in epochs), cosine, decay
    /// (`decay_a / (weight_decay (t + decay_tau))`), bottou
    /// (`decay_a / (1 + decay_a weight_decay t)`), `t` in iterations, after
    /// `warmup_epochs`. An epoch is a worker's pass over its shard (data
    /// objectives) or one iteration (quadratics).
    pub schedule: String,
    pub milestones: Vec<f64>,
    pub warmup_epochs: f64,
    pub decay_a: f64,
    pub decay_tau: f64,
    /// Evaluate every this many epochs (0: at the end only): `f(x_bar)` on
    /// the whole training set, `f(x_bar) - f*` where `f*` is known (data
    /// objectives), and the consensus distance, as the log's evaluations.
    pub eval_every: f64,
    /// Threads for the run's workers and per-worker metrics (1: the run's
    /// own thread; 0: every core). Results do not depend on it.
    pub threads: usize,
}

impl Default for SimParams {
    fn default() -> Self {
        Self {
            algorithm: "d-psgd".into(),
            workers: 8,
            topology: "ring".into(),
            objective: "quadratic".into(),
            dim: 100,
            samples: 2000,
            heterogeneity: 0.5,
            split: "iid".into(),
            noise: 0.1,
            batch: 8,
            knobs: Knobs::default(),
            lr: 0.1,
            momentum: 0.0,
            weight_decay: 0.0,
            iterations: 100,
            seed: 0,
            compute_ms: 0.0,
            log_every: 10,
            measure_recovery: true,
            data: None,
            x0: "zero".into(),
            x0_scale: 1.0,
            x0_seed: 0,
            schedule: "constant".into(),
            milestones: Vec::new(),
            warmup_epochs: 0.0,
            decay_a: 0.0,
            decay_tau: 0.0,
            eval_every: 0.0,
            threads: 1,
        }
    }
}

/// A run's resolved parameters, for the backend that runs it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Params {
    /// The in-process simulator.
    Sim(SimParams),
    /// `repro-train` ranks under mpirun (the trainer's own config).
    Train(TrainConfig),
}

/// One run of the plan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedRun {
    /// First 12 hex digits of the xxh3 of the resolved parameters (JSON).
    pub id: String,
    /// The grid values that define it, as text.
    pub point: BTreeMap<String, String>,
    pub params: Params,
    /// The network condition (`network` key); `None`: unshaped.
    pub network: Option<Condition>,
}

/// The grid key that tells repetitions apart: runs that differ only in it
/// are seeds of one setting, and are paired across settings by its value
/// (claims, and a table's differences to its reference row).
pub(crate) const SEED_KEY: &str = "seed";

pub(crate) use crate::experiment::manifest::text;

/// The version of the run-id scheme. Bump it when a parameter's meaning or
/// a default changes, so an old id never names a different run.
pub(crate) const RUN_ID_VERSION: u32 = 3;

/// A run's id: the first 12 hex digits of the xxh3 of the scheme's version,
/// the backend kind, the canonical parameters (JSON with sorted keys,
/// leaving out every field at its default and the limits,
/// [`manifest::LIMITS`]) and the network condition. A new field that keeps
/// its default therefore keeps every id, and a raised timeout keeps them
/// too.
pub(crate) fn run_id<T: Serialize + Default>(
    kind: &str,
    params: &T,
    network: Option<&Condition>,
) -> String {
    let text = format!(
        "v{RUN_ID_VERSION}:{kind}:{}{}",
        canonical(params),
        network
            .map(|c| format!(" network:{}", serde_json::to_string(c).unwrap_or_default()))
            .unwrap_or_default()
    );
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))[..12].to_string()
}

/// The knobs' keys, as serde names them: computed once per process.
static KNOB_NAMES: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| match serde_json::to_value(Knobs::default()) {
        Ok(serde_json::Value::Object(m)) => m.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    });

/// The knob an algorithm's error `message` is about (the first knob it
/// names, whole words only), else `fallback`.
fn knob_named_in(message: &str, fallback: &str) -> String {
    let words: Vec<&str> = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    words
        .iter()
        .find(|w| KNOB_NAMES.iter().any(|n| n == *w))
        .map_or_else(|| fallback.to_string(), |w| w.to_string())
}

/// Deserializes the [`Knobs`] keys of `map` alone, so a wrong value's
/// error has its key.
fn knob_errors(map: &Mapping) -> Result<(), serde_path_to_error::Error<yaml_serde::Error>> {
    let knobs: Mapping = map
        .iter()
        .filter(|(k, _)| {
            k.as_str()
                .is_some_and(|k| KNOB_NAMES.iter().any(|n| n == k))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    serde_path_to_error::deserialize::<_, Knobs>(Value::Mapping(knobs)).map(|_| ())
}

/// `params` as JSON with sorted keys and without the fields at their default.
/// A run's resolved parameters as the canonical JSON its id hashes
/// (without its network condition and its own id): the `params` column.
pub(crate) fn canonical_params(params: &Params) -> String {
    match params {
        Params::Sim(p) => canonical(p),
        Params::Train(c) => canonical(&TrainConfig {
            run_id: TrainConfig::default().run_id,
            ..c.clone()
        }),
    }
}

fn canonical<T: Serialize + Default>(params: &T) -> String {
    let json = |v: &T| match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m.into_iter().collect::<BTreeMap<_, _>>(),
        _ => BTreeMap::new(),
    };
    let default = json(&T::default());
    let mut fields = json(params);
    fields.retain(|k, v| default.get(k) != Some(v) && !manifest::LIMITS.contains(&k.as_str()));
    serde_json::to_string(&fields).unwrap_or_default()
}

/// What a plan may hold: a grid larger than `max_runs`, or a run with more
/// than `max_workers` workers, is refused before anything is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub max_runs: usize,
    pub max_workers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_runs: 10_000,
            max_workers: 4096,
        }
    }
}

/// Expands `manifest` at `scale` for `backend` within the default
/// [`Limits`].
pub(crate) fn expand(
    manifest: &Manifest,
    scale: &str,
    backend: Backend,
) -> Result<Vec<PlannedRun>, DriverError> {
    expand_within(manifest, scale, backend, Limits::default())
}

/// Expands `manifest` at `scale` for `backend`: params, then the scale's
/// overrides, then each grid point, resolved into the backend's parameters
/// and checked as a run would check them. The grid's size is checked
/// against `limits` before it is expanded; two points that resolve to the
/// same run are an error.
pub(crate) fn expand_within(
    manifest: &Manifest,
    scale: &str,
    backend: Backend,
    limits: Limits,
) -> Result<Vec<PlannedRun>, DriverError> {
    expand_configured(manifest, scale, backend, limits, None, &|_| None)
}

/// Every parameter a run of `backend` takes, sorted (and `network`).
pub(crate) fn parameter_names(backend: Backend) -> Vec<String> {
    let value = match backend {
        Backend::Sim => serde_json::to_value(SimParams::default()),
        Backend::Mpi | Backend::InProcess => serde_json::to_value(TrainConfig::default()),
    };
    let mut names: Vec<String> = match value {
        Ok(serde_json::Value::Object(m)) => m.into_iter().map(|(k, _)| k).collect(),
        _ => Vec::new(),
    };
    names.retain(|n| n != "run_id" && n != "invocation");
    names.push("network".into());
    names.sort();
    names
}

/// A configuration a run gets on top of its grid point (a tuning
/// protocol's): the label its point holds under [`CONFIG_KEY`], and the
/// parameters it sets after every case.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Config {
    pub label: String,
    pub set: Mapping,
}

/// What configurations a grid point runs in: `None` once as it is, else
/// once per configuration given (none: not at all).
pub(crate) type Configure<'a> = dyn Fn(&BTreeMap<String, String>) -> Option<Vec<Config>> + 'a;

/// The grid key a tuned experiment's runs hold their configuration in.
pub(crate) const CONFIG_KEY: &str = "config";

/// [`expand_within`], with the seed axis replaced by `seeds` when given,
/// and each point run once per configuration `configs` gives it (once as
/// it is for `None`; not at all for none).
pub(crate) fn expand_configured(
    manifest: &Manifest,
    scale: &str,
    backend: Backend,
    limits: Limits,
    seeds: Option<&[Value]>,
    configs: &Configure<'_>,
) -> Result<Vec<PlannedRun>, DriverError> {
    // a title names parameters that every run has
    titled(manifest, scale)?;
    let (mut base, mut grid) = at_scale(manifest, scale)?;
    if let Some(seeds) = seeds {
        grid.insert(SEED_KEY.to_string(), seeds.to_vec());
    }
    // a tuning protocol's validation split holds in every run alike
    if let Some(v) = manifest.tune.as_ref().and_then(|t| t.validation) {
        base.insert(Value::from("validation"), Value::from(v));
    }
    let size = grid
        .values()
        .fold(1u128, |n, v| n.saturating_mul(v.len() as u128));
    if size > limits.max_runs as u128 {
        return Err(DriverError::TooManyRuns {
            runs: size,
            max: limits.max_runs,
        });
    }
    let cases: Vec<&crate::experiment::manifest::Case> = manifest
        .cases
        .iter()
        .filter(|c| c.scales.is_empty() || c.scales.iter().any(|s| s == scale))
        .collect();
    let mut runs = Vec::new();
    for point in cartesian(&grid) {
        let excluded = manifest.exclude.iter().any(|e| {
            e.iter()
                .all(|(k, want)| point.iter().any(|(pk, pv)| pk == k && pv == want))
        });
        if excluded {
            continue;
        }
        let label: BTreeMap<String, String> =
            point.iter().map(|(k, v)| (k.clone(), text(v))).collect();
        let configs = configs(&label);
        // once as it is where no configuration is given
        let each: Vec<Option<&Config>> = match &configs {
            None => vec![None],
            Some(c) => c.iter().map(Some).collect(),
        };
        for c in each {
            runs.push(resolve(
                point.clone(),
                &base,
                &cases,
                &manifest.labels,
                c,
                backend,
                limits,
            )?);
        }
        if runs.len() > limits.max_runs {
            return Err(DriverError::TooManyRuns {
                runs: runs.len() as u128,
                max: limits.max_runs,
            });
        }
    }
    if runs.is_empty() && size > 0 && !manifest.exclude.is_empty() {
        return Err(DriverError::ExcludedEverything {
            points: size,
            scale: scale.to_string(),
        });
    }
    check_distinct(&runs)?;
    check_labels(&runs)?;
    Ok(runs)
}

/// No two grid points resolve to the same run.
fn check_distinct(runs: &[PlannedRun]) -> Result<(), DriverError> {
    let mut seen: BTreeMap<&str, &PlannedRun> = BTreeMap::new();
    for r in runs {
        if let Some(first) = seen.insert(&r.id, r) {
            return Err(DriverError::DuplicateRun {
                id: r.id.clone(),
                first: describe(first),
                second: describe(r),
            });
        }
    }
    Ok(())
}

/// Distinct runs have distinct grid labels (a table row, a runs.csv row
/// and a merge all go by them), and one network condition has one label.
fn check_labels(runs: &[PlannedRun]) -> Result<(), DriverError> {
    let mut by_label: BTreeMap<&BTreeMap<String, String>, &PlannedRun> = BTreeMap::new();
    for r in runs {
        if let Some(first) = by_label.insert(&r.point, r) {
            return Err(DriverError::LabelClash {
                first: format!("`{}`", describe(first)),
                second: format!("`{}`", describe(r)),
                problem: format!(
                    "share one label but are different runs ({} and {})",
                    first.id, r.id
                ),
                fix: "give each grid value a distinct spelling (a network condition's label \
                      is its bandwidth, latency, qdisc and tcp as written)"
                    .into(),
            });
        }
    }
    let same = |a: &Condition, b: &Condition| {
        a.bandwidth_bps == b.bandwidth_bps
            && a.latency_s == b.latency_s
            && a.qdisc == b.qdisc
            && a.tcp == b.tcp
    };
    // one run per label is enough: the same label is the same condition
    let mut labelled: Vec<&PlannedRun> = Vec::new();
    for r in runs {
        if let Some(c) = &r.network
            && !labelled
                .iter()
                .any(|l| l.network.as_ref().is_some_and(|n| n.label == c.label))
        {
            labelled.push(r);
        }
    }
    for (i, a) in labelled.iter().enumerate() {
        let Some(ca) = &a.network else { continue };
        for b in &labelled[i + 1..] {
            let Some(cb) = &b.network else { continue };
            if same(ca, cb) {
                return Err(DriverError::LabelClash {
                    first: format!("`{}`", describe(a)),
                    second: format!("`{}`", describe(b)),
                    problem: format!(
                        "have one network condition under two labels (`{}` and `{}`)",
                        ca.label, cb.label
                    ),
                    fix: "write each condition once, in one spelling".into(),
                });
            }
        }
    }
    Ok(())
}

/// A run as its grid values (`algorithm=moniqua seed=0`), for messages.
pub(crate) fn describe(run: &PlannedRun) -> String {
    if run.point.is_empty() {
        return "(no grid)".into();
    }
    run.point
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first number in `value` that is not finite (`.nan`, `.inf`), with
/// its key path.
fn non_finite(value: &Value, path: &str) -> Option<String> {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| !f.is_finite()) => Some(path.to_string()),
        Value::Mapping(m) => m.iter().find_map(|(k, v)| {
            let k = text(k);
            let p = if path.is_empty() {
                k
            } else {
                format!("{path}.{k}")
            };
            non_finite(v, &p)
        }),
        Value::Sequence(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| non_finite(v, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// The manifest's parameters and grid with the scale's overrides applied
/// (a scale may also replace a grid axis: `grid.network: [none]`), checked:
/// no empty axis, and every case's `when` key a grid key.
/// `template` with each `{key}` replaced by parameter `key` of `params` (its
/// text as a grid point holds it); `{{` and `}}` are braces. The key a `{key}`
/// names that `params` lacks is the error.
pub(crate) fn fill(template: &str, params: &Mapping) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(at) = rest.find('{') {
        out.push_str(&rest[..at].replace("}}", "}"));
        rest = &rest[at + 1..];
        if let Some(after) = rest.strip_prefix('{') {
            out.push('{');
            rest = after;
            continue;
        }
        let Some(end) = rest.find('}') else {
            return Err("a `{` without its `}` (write `{{` for a brace)".into());
        };
        let key = &rest[..end];
        match params.get(key) {
            Some(v) => out.push_str(&text(v)),
            None => {
                return Err(format!(
                    "`{{{key}}}` names no parameter of the runs; use a key of `params` (e.g. {{workers}})"
                ));
            }
        }
        rest = &rest[end + 1..];
    }
    out.push_str(&rest.replace("}}", "}"));
    Ok(out)
}

/// The manifest with its titles (`title`, `figure.title`) filled with its
/// parameters at `scale` ([`fill`]): "{workers} workers" says 8 at the
/// cpu scale and 3 at smoke. A `{key}` the parameters lack is an error
/// naming the title.
pub(crate) fn titled(manifest: &Manifest, scale: &str) -> Result<Manifest, DriverError> {
    let (params, _) = at_scale(manifest, scale)?;
    let error = |key: &str, message: String| DriverError::Title {
        experiment: manifest.name.clone(),
        key: key.to_string(),
        scale: scale.to_string(),
        message,
    };
    let mut m = manifest.clone();
    m.title = fill(&manifest.title, &params).map_err(|e| error("title", e))?;
    if let Some(f) = m.figure.as_mut()
        && let Some(t) = &f.title
    {
        f.title = Some(fill(t, &params).map_err(|e| error("figure.title", e))?);
    }
    Ok(m)
}

/// The manifest's parameters and grid at `scale`: the scale's keys
/// merged over `params` (and `grid.<key>` over the grid).
pub(crate) fn at_scale(
    manifest: &Manifest,
    scale: &str,
) -> Result<(Mapping, BTreeMap<String, Vec<Value>>), DriverError> {
    let overrides = manifest
        .scales
        .get(scale)
        .ok_or_else(|| DriverError::UnknownScale {
            experiment: manifest.name.clone(),
            scale: scale.to_string(),
            available: manifest
                .scales
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let mut base = manifest.params.clone();
    // a scale may also replace a grid axis: `grid.network: [none]`
    let mut grid = manifest.grid.clone();
    for (k, v) in overrides {
        match k.as_str().and_then(|k| k.strip_prefix("grid.")) {
            Some(axis) => {
                let Value::Sequence(values) = v else {
                    return Err(DriverError::ScaleGrid {
                        scale: scale.to_string(),
                        key: axis.to_string(),
                    });
                };
                grid.insert(axis.to_string(), values.clone());
            }
            None => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some((key, _)) = grid.iter().find(|(_, v)| v.is_empty()) {
        return Err(DriverError::EmptyGrid { key: key.clone() });
    }
    check_cases(manifest, &grid)?;
    check_label_keys(manifest, &grid, manifest.backend)?;
    Ok((base, grid))
}

/// Every label is a grid key, no parameter of the backend (it would never
/// reach it), and each of its values is mapped by some case (else the
/// variant would run the base parameters under a name that says more).
fn check_label_keys(
    manifest: &Manifest,
    grid: &BTreeMap<String, Vec<Value>>,
    backend: Backend,
) -> Result<(), DriverError> {
    let names = parameter_names(backend);
    for key in &manifest.labels {
        let problem = if !grid.contains_key(key) {
            format!(
                "is not a grid key; a label names the variants of a grid axis (grid keys: {})",
                grid.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        } else if names.contains(key) {
            "is a parameter of the backend; a label must not shadow one (name the axis \
             `method` or `variant`)"
                .to_string()
        } else if let Some(v) = grid[key].iter().find(|v| {
            !manifest
                .cases
                .iter()
                .any(|c| c.when.get(key.as_str()) == Some(*v))
        }) {
            format!(
                "value `{}` has no case that sets its parameters; add \
                 `{{when: {{{key}: {}}}, set: {{...}}}}` to `cases`",
                text(v),
                text(v)
            )
        } else {
            continue;
        };
        return Err(DriverError::Label {
            key: key.clone(),
            problem,
        });
    }
    Ok(())
}

/// Every case's `when` and every exclusion names grid keys, and an
/// algorithm a run can have (a typo would silently apply or exclude
/// nothing). Other values may be absent from this grid: a subset rerun
/// (`--set grid.algorithm=[moniqua]`) leaves the rest idle.
fn check_cases(
    manifest: &Manifest,
    grid: &BTreeMap<String, Vec<Value>>,
) -> Result<(), DriverError> {
    for (index, case) in manifest.cases.iter().enumerate() {
        if let Some(key) = case.when.keys().find(|k| !grid.contains_key(*k)) {
            return Err(DriverError::CaseKey {
                index,
                key: key.clone(),
                keys: grid.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        }
        // an algorithm no run can have would silently never apply (a typo
        // drops a tuned value). Other values may be absent from this grid:
        // a subset rerun (`--set grid.algorithm=[moniqua]`) leaves the
        // other algorithms' cases idle.
        if let Some(want) = case.when.get("algorithm") {
            let name = text(want);
            let known = repro_algos::ALGORITHM_NAMES
                .iter()
                .chain(&repro_algos::ASYNC_ALGORITHM_NAMES);
            if !known.clone().any(|a| *a == name) {
                return Err(DriverError::CaseValue {
                    index,
                    key: "algorithm".into(),
                    value: name,
                    values: known.copied().collect::<Vec<_>>().join(", "),
                });
            }
        }
    }
    // an exclusion names grid keys, and an algorithm a run can have (a
    // typo would silently exclude nothing); other values may be absent, as
    // in a subset rerun (`--set grid.bits=[1]`)
    for (index, e) in manifest.exclude.iter().enumerate() {
        for (key, want) in e {
            let problem = if !grid.contains_key(key) {
                "not a grid key".to_string()
            } else if key == "algorithm"
                && !repro_algos::ALGORITHM_NAMES
                    .iter()
                    .chain(&repro_algos::ASYNC_ALGORITHM_NAMES)
                    .any(|a| *a == text(want))
            {
                format!("`{}` is no algorithm", text(want))
            } else {
                continue;
            };
            return Err(DriverError::Exclude {
                index,
                key: key.clone(),
                problem,
                keys: grid.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        }
    }
    Ok(())
}

/// Every grid point: the cartesian product of the axes, in key order.
fn cartesian(grid: &BTreeMap<String, Vec<Value>>) -> Vec<Vec<(String, Value)>> {
    // cartesian product in key order
    let mut points: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (key, values) in grid {
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((key.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    points
}

#[cfg(test)]
mod title_tests {
    use super::*;

    #[test]
    fn a_title_names_the_parameters_at_its_scale() {
        let params: Mapping =
            yaml_serde::from_str("{ workers: 8, dataset: fashion-mnist }").unwrap();
        assert_eq!(
            fill("{workers} workers on {dataset}, {{sic}}", &params).unwrap(),
            "8 workers on fashion-mnist, {sic}"
        );
        assert!(
            fill("{worker} workers", &params)
                .unwrap_err()
                .contains("`{worker}` names no parameter")
        );
        assert!(fill("a { b", &params).is_err());
    }
}

#[cfg(test)]
mod tests;
