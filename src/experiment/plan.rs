//! A manifest at one scale, expanded into runs with stable ids.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use yaml_serde::{Mapping, Value};

use repro_runlog::{Knobs, Theta, TrainConfig};

use crate::experiment::condition::Condition;
use crate::experiment::errors::DriverError;
use crate::experiment::manifest::{self, Backend, Manifest};

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

/// One grid point resolved into a run: the base parameters, the point's
/// values and the matching cases, deserialized into the backend's config,
/// with its id.
fn resolve(
    point: Vec<(String, Value)>,
    base: &Mapping,
    cases: &[&crate::experiment::manifest::Case],
    labels: &[String],
    config: Option<&Config>,
    backend: Backend,
    limits: Limits,
) -> Result<PlannedRun, DriverError> {
    let mut map = merged_params(&point, base, cases, config);
    // a label names the variant; its cases set the parameters
    for l in labels {
        map.remove(l.as_str());
    }
    let mut label: BTreeMap<String, String> =
        point.iter().map(|(k, v)| (k.clone(), text(v))).collect();
    if let Some(c) = config {
        label.insert(CONFIG_KEY.to_string(), c.label.clone());
    }
    let run = label
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    // how errors name this run
    let run = if run.is_empty() {
        "(no grid)".to_string()
    } else {
        run
    };
    let fail = |e| param_error(e, &run, backend);
    let ours = model_size(&map, backend);
    let network = match map.remove("network") {
        Some(v) => {
            Condition::from_yaml(&v, ours).map_err(|(key, message)| DriverError::RunParams {
                run: run.clone(),
                key: if key.is_empty() {
                    "network".into()
                } else {
                    format!("network.{key}")
                },
                message,
            })?
        }
        None => None,
    };
    if let Some(l) = label.get_mut("network") {
        *l = network
            .as_ref()
            .map_or_else(|| "none".to_string(), |c| c.label.clone());
    }
    if let Some(key) = non_finite(&Value::Mapping(map.clone()), "") {
        return Err(DriverError::RunParams {
            run: run.clone(),
            key,
            message: "not a finite number; every number of a run must be finite".into(),
        });
    }
    // the knobs are flattened into both configs, where serde loses
    // the key of a bad value: check them alone first, so the error
    // names it
    knob_errors(&map).map_err(fail)?;
    let (id, params) = typed_params(map, backend, network.as_ref(), &run)?;
    check_algorithm(&run, &params, backend)?;
    check_ranges(&run, &params, network.as_ref())?;
    check_workers(&run, &params, limits)?;
    Ok(PlannedRun {
        id,
        point: label,
        params,
        network,
    })
}

/// The base parameters with the point's values and the matching cases'
/// and tuned configuration's settings on top.
fn merged_params(
    point: &[(String, Value)],
    base: &Mapping,
    cases: &[&crate::experiment::manifest::Case],
    config: Option<&Config>,
) -> Mapping {
    let mut map: Mapping = base.clone();
    for (k, v) in point {
        map.insert(Value::String(k.clone()), v.clone());
    }
    for case in cases {
        let matches = case
            .when
            .iter()
            .all(|(k, want)| point.iter().any(|(pk, pv)| pk == k && pv == want));
        if matches {
            for (k, v) in &case.set {
                map.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(c) = config {
        for (k, v) in &c.set {
            map.insert(k.clone(), v.clone());
        }
    }
    map
}

/// A parameter error of run `run`, naming its key.
fn param_error(
    e: serde_path_to_error::Error<yaml_serde::Error>,
    run: &str,
    backend: Backend,
) -> DriverError {
    let message = e.inner().to_string();
    // a flattened struct loses the path of an unknown key (`.`): name
    // the key from the message, and list the valid ones
    match message
        .strip_prefix("unknown field `")
        .and_then(|m| m.split('`').next())
    {
        // a network condition is one key, for every backend
        Some(field @ ("bandwidth" | "latency")) => DriverError::RunParams {
            run: run.to_string(),
            key: field.to_string(),
            message: "a network condition is the `network` key, in params or the grid: \
                      `network: {bandwidth: 100mbit, latency: 1ms}`"
                .into(),
        },
        Some(field) if matches!(e.path().to_string().as_str(), "." | "") => {
            DriverError::RunParams {
                run: run.to_string(),
                key: field.to_string(),
                message: format!(
                    "unknown parameter of the {} backend; valid: {}",
                    backend.name(),
                    parameter_names(backend).join(", ")
                ),
            }
        }
        _ => DriverError::RunParams {
            run: run.to_string(),
            key: e.path().to_string(),
            message,
        },
    }
}

/// The run's model size in parameters: the trainer's model on its
/// images, or the simulator's dimension.
fn model_size(map: &Mapping, backend: Backend) -> Option<u64> {
    let text_of = |k: &str, default: String| {
        map.get(k)
            .and_then(|v| v.as_str())
            .map_or(default, str::to_string)
    };
    match backend {
        Backend::Sim => Some(
            map.get("dim")
                .and_then(Value::as_u64)
                .unwrap_or(SimParams::default().dim as u64),
        ),
        Backend::Mpi | Backend::InProcess => {
            let d = TrainConfig::default();
            repro_runlog::model_parameters(
                &text_of("model", d.model),
                &text_of("dataset", d.dataset),
            )
        }
    }
}

/// The merged parameters as the backend's typed config, and its run id.
fn typed_params(
    map: Mapping,
    backend: Backend,
    network: Option<&Condition>,
    run: &str,
) -> Result<(String, Params), DriverError> {
    let fail = |e| param_error(e, run, backend);
    let typed = match backend {
        Backend::Sim => {
            // the simulator's virtual clock models the condition, typed
            // (`PlannedRun::network`), not printed into its parameters
            let p: SimParams =
                serde_path_to_error::deserialize(Value::Mapping(map)).map_err(fail)?;
            if p.knobs.theta == Theta::Theorem2 {
                return Err(DriverError::RunParams {
                    run: run.to_string(),
                    key: "theta".into(),
                    message: "`theta: theorem2` tracks the stochastic gradients of the trainer's \
                              warm-up; the simulator tracks the local step: use `theta: theorem3-step` or \
                              a number"
                        .into(),
                });
            }
            (run_id("sim", &p, network), Params::Sim(p))
        }
        Backend::Mpi | Backend::InProcess => {
            let mut p: TrainConfig =
                serde_path_to_error::deserialize(Value::Mapping(map)).map_err(fail)?;
            if p.knobs.theta.warms_up()
                && repro_algos::ASYNC_ALGORITHM_NAMES.contains(&p.algorithm.as_str())
            {
                return Err(DriverError::RunParams {
                    run: run.to_string(),
                    key: "theta".into(),
                    message: format!(
                        "`theta: theorem3-step` and `theta: theorem2` need a synchronous algorithm's warm-up; {} is asynchronous: give theta a number",
                        p.algorithm
                    ),
                });
            }
            p.run_id = String::new();
            // the same config in process (virtual clock) and over
            // MPI (real time) are different runs
            let id = run_id(backend.name(), &p, network);
            p.run_id = id.clone();
            (id, Params::Train(p))
        }
    };
    Ok(typed)
}

/// The run's algorithm is one this build knows, on a backend that runs it.
fn check_algorithm(run: &str, params: &Params, backend: Backend) -> Result<(), DriverError> {
    let algorithm = match &params {
        Params::Sim(p) => &p.algorithm,
        Params::Train(c) => &c.algorithm,
    };
    let is_async = repro_algos::ASYNC_ALGORITHM_NAMES.contains(&algorithm.as_str());
    if algorithm == "allreduce-mpi" && backend != Backend::Mpi {
        return Err(DriverError::RunParams {
            run: run.to_string(),
            key: "algorithm".into(),
            message: "`allreduce-mpi` sums with the MPI library's MPI_Allreduce: the mpi backend only (`allreduce` is the ring everywhere)".into(),
        });
    }
    if is_async && backend != Backend::Mpi {
        return Err(DriverError::RunParams {
            run: run.to_string(),
            key: "algorithm".into(),
            message: format!("`{algorithm}` runs on the mpi backend only (`--backend mpi`)"),
        });
    }
    if !is_async && !repro_algos::ALGORITHM_NAMES.contains(&algorithm.as_str()) {
        return Err(DriverError::RunParams {
            run: run.to_string(),
            key: "algorithm".into(),
            message: format!(
                "unknown algorithm `{algorithm}`; known: {}, {}",
                repro_algos::ALGORITHM_NAMES.join(", "),
                repro_algos::ASYNC_ALGORITHM_NAMES.join(", ")
            ),
        });
    }
    Ok(())
}

/// The run's worker count is in range, and its algorithm builds with
/// these knobs on its topology (what every rank checks first).
/// The largest simulator dimension and sample count a plan accepts
/// (2^31: far beyond this machine's memory, small enough that no size
/// computed from them overflows).
pub(crate) const MAX_SIZE: usize = 1 << 31;
/// The longest latency a network condition, or a simulated step's
/// compute, may have: longer ones are typos that would hang a run.
pub(crate) const MAX_LATENCY_S: f64 = 10.0;
/// The slowest bandwidth accepted, bits per second.
pub(crate) const MIN_BANDWIDTH_BPS: f64 = 1_000.0;

/// A run's range checks: each error names the run and the key.
struct Ranges<'r> {
    run: &'r str,
}

impl Ranges<'_> {
    fn bad(&self, key: &str, message: String) -> DriverError {
        DriverError::RunParams {
            run: self.run.to_string(),
            key: key.into(),
            message,
        }
    }

    fn at_least_one(&self, key: &str, v: u64) -> Result<(), DriverError> {
        if v == 0 {
            Err(self.bad(key, "must be at least 1".into()))
        } else {
            Ok(())
        }
    }

    fn within(&self, key: &str, v: f64, lo: f64, hi: f64) -> Result<(), DriverError> {
        if (lo..=hi).contains(&v) {
            Ok(())
        } else {
            Err(self.bad(key, format!("{v} is outside {lo} ..= {hi}")))
        }
    }
}

/// Every numeric parameter within its valid range: a run that cannot do
/// what it is asked is refused at plan time, naming the key.
fn check_ranges(
    run: &str,
    params: &Params,
    network: Option<&Condition>,
) -> Result<(), DriverError> {
    let r = Ranges { run };
    match params {
        Params::Sim(p) => sim_ranges(&r, p)?,
        Params::Train(c) => train_ranges(&r, c)?,
    }
    if let Some(c) = network {
        r.within("network.latency", c.latency_s, 0.0, MAX_LATENCY_S)?;
        if let Some(b) = c.bandwidth_bps {
            r.within("network.bandwidth", b, MIN_BANDWIDTH_BPS, 1e15)?;
        }
    }
    Ok(())
}

/// [`check_ranges`] of the simulator's parameters.
fn sim_ranges(r: &Ranges<'_>, p: &SimParams) -> Result<(), DriverError> {
    r.at_least_one("iterations", p.iterations)?;
    r.at_least_one("batch", p.batch as u64)?;
    r.at_least_one("dim", p.dim as u64)?;
    for (key, v) in [("dim", p.dim), ("samples", p.samples)] {
        if v > MAX_SIZE {
            return Err(r.bad(key, format!("{v} is more than the limit of {MAX_SIZE}")));
        }
    }
    r.within("compute_ms", p.compute_ms, 0.0, MAX_LATENCY_S * 1e3)?;
    r.within("lr", f64::from(p.lr), 0.0, 1e6)?;
    r.within("momentum", f64::from(p.momentum), 0.0, 1.0)?;
    r.within("weight_decay", f64::from(p.weight_decay), 0.0, 1e6)?;
    r.within("eval_every", p.eval_every, 0.0, 1e9)?;
    r.within("noise", f64::from(p.noise), 0.0, 1e6)?;
    r.within("heterogeneity", f64::from(p.heterogeneity), 0.0, 1e6)?;
    r.within("x0_scale", p.x0_scale, 0.0, 1e6)?;
    if p.threads > 4096 {
        return Err(r.bad("threads", format!("{} is more than 4096", p.threads)));
    }
    Ok(())
}

/// [`check_ranges`] of the trainer's parameters.
fn train_ranges(r: &Ranges<'_>, c: &TrainConfig) -> Result<(), DriverError> {
    r.at_least_one("iterations", c.iterations)?;
    r.at_least_one("batch", c.batch as u64)?;
    r.at_least_one("timeout_s", c.timeout_s)?;
    r.within("lr", c.lr, 0.0, 1e6)?;
    r.within("momentum", f64::from(c.momentum), 0.0, 1.0)?;
    r.within("weight_decay", f64::from(c.weight_decay), 0.0, 1e6)?;
    r.within("latency_ms", c.latency_ms, 0.0, MAX_LATENCY_S * 1e3)?;
    r.within("validation", c.validation, 0.0, 0.9)?;
    r.within("warmup_epochs", c.warmup_epochs, 0.0, 1e6)?;
    r.within("dirichlet_alpha", c.dirichlet_alpha, 1e-6, 1e6)?;
    if c.synthetic_samples > MAX_SIZE {
        return Err(r.bad(
            "synthetic_samples",
            format!(
                "{} is more than the limit of {MAX_SIZE}",
                c.synthetic_samples
            ),
        ));
    }
    if c.virtual_bandwidth_bps != 0.0 {
        r.within(
            "virtual_bandwidth_bps",
            c.virtual_bandwidth_bps,
            MIN_BANDWIDTH_BPS,
            1e15,
        )?;
    }
    // a directory that is there must be one of data files; one that
    // is not is the trainer's to report (a cluster's data may live
    // where the planning machine has none)
    if let Some(dir) = &c.data_dir
        && std::fs::symlink_metadata(dir).is_ok()
    {
        crate::experiment::data::check_data_path(std::path::Path::new(dir), true)
            .map_err(|m| r.bad("data_dir", m))?;
    }
    Ok(())
}

/// The simulator's objective, split, initial point, schedule and data
/// file are ones it knows, and fit together.
fn sim_choices(r: &Ranges<'_>, p: &SimParams) -> Result<(), DriverError> {
    for (key, value, allowed) in [
        ("objective", &p.objective, &OBJECTIVES[..]),
        ("split", &p.split, &SPLITS[..]),
        ("x0", &p.x0, &["zero", "gaussian", "gaussian-each"][..]),
    ] {
        if !allowed.contains(&value.as_str()) {
            return Err(r.bad(
                key,
                format!("unknown {key} `{value}`; use one of {}", allowed.join(", ")),
            ));
        }
    }
    repro_algos::Schedule::parse(
        &p.schedule,
        1.0,
        &p.milestones,
        p.decay_a,
        p.decay_tau,
        f64::from(p.weight_decay),
    )
    .map_err(|m| r.bad("schedule", m))?;
    if let Some(path) = &p.data {
        if !matches!(p.objective.as_str(), "logistic" | "least-squares") {
            return Err(r.bad(
                "data",
                format!(
                    "a data file is for `logistic` or `least-squares`, not `{}`",
                    p.objective
                ),
            ));
        }
        let file = std::path::Path::new(path);
        // a set `repro data fetch` knows: generated, or asked for
        // before the first run (`data_cmd::prepare`)
        if file.exists() || crate::experiment::data::known(file).is_none() {
            crate::experiment::data::check_data_path(file, false).map_err(|m| r.bad("data", m))?;
        }
    }
    Ok(())
}

/// The run's workers, topology and algorithm fit together, within the
/// limits, with a sample of data each; and the simulator's named choices
/// are ones it knows.
fn check_workers(run: &str, params: &Params, limits: Limits) -> Result<(), DriverError> {
    let r = Ranges { run };
    let bad = |key: &str, message: String| r.bad(key, message);
    let (workers, topology, algorithm, knobs) = match params {
        Params::Sim(p) => (p.workers, p.topology.as_str(), &p.algorithm, &p.knobs),
        // `workers: 0` asks the trainer for the paper's 8
        Params::Train(c) => (
            if c.workers == 0 { 8 } else { c.workers },
            c.topology.as_str(),
            &c.algorithm,
            &c.knobs,
        ),
    };
    if workers == 0 {
        return Err(bad("workers", "a run needs at least 1 worker".into()));
    }
    if let Params::Sim(p) = params {
        sim_choices(&r, p)?;
    }
    // every worker needs a sample of the data sets the plan sizes (a data
    // file is checked when it is read)
    let samples = match params {
        Params::Sim(p)
            if p.data.is_none() && matches!(p.objective.as_str(), "logistic" | "least-squares") =>
        {
            Some(("samples", p.samples))
        }
        Params::Train(c) if c.dataset == "synthetic" => {
            Some(("synthetic_samples", c.synthetic_samples))
        }
        _ => None,
    };
    if let Some((key, n)) = samples.filter(|&(_, n)| n < workers) {
        return Err(bad(
            key,
            format!("{n} samples for {workers} workers; every worker needs at least one"),
        ));
    }
    if workers > limits.max_workers {
        return Err(bad(
            "workers",
            format!(
                "{workers} workers is more than the limit of {}; pass --max-workers {workers} if you mean it",
                limits.max_workers
            ),
        ));
    }
    if repro_algos::ASYNC_ALGORITHM_NAMES.contains(&algorithm.as_str()) {
        return Ok(());
    }
    let topology = repro_algos::Topology::by_name(topology, workers)
        .map_err(|e| bad("topology", e.to_string()))?;
    // an algorithm's error names the knob it is about
    let knob = |e: repro_algos::AlgoError| {
        let message = e.to_string();
        bad(&knob_named_in(&message, "algorithm"), message)
    };
    let spec = repro_algos::AlgorithmSpec::from_name(algorithm, knobs).map_err(knob)?;
    // worker 0 on a small model: its constructor checks what the run's would
    spec.build(0, &topology, 0, &[0.0; 64]).map_err(knob)?;
    Ok(())
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
mod tests {
    use super::*;
    use crate::experiment::manifest::{Backend, TableSpec};

    fn manifest() -> Manifest {
        Manifest {
            name: "t".into(),
            title: "t".into(),
            source: "s".into(),
            backend: Backend::Sim,
            shaping: crate::experiment::condition::ShapingMode::Auto,
            figure: None,
            claims: Vec::new(),
            tune: None,
            tuned_in: None,
            health: Default::default(),
            verify: Default::default(),
            cost: BTreeMap::new(),
            default_scale: None,
            committed_scale: None,
            then: Vec::new(),
            next: None,
            exclude: Vec::new(),
            scales: [(
                "smoke".to_string(),
                yaml_serde::from_str("{iterations: 5}").unwrap(),
            )]
            .into(),
            grid: [
                (
                    "algorithm".to_string(),
                    vec![Value::from("d-psgd"), Value::from("moniqua")],
                ),
                (
                    "seed".to_string(),
                    vec![Value::from(0), Value::from(1), Value::from(2)],
                ),
            ]
            .into(),
            params: yaml_serde::from_str("{workers: 4, lr: 0.05}").unwrap(),
            cases: Vec::new(),
            labels: Vec::new(),
            table: TableSpec {
                rows: vec!["algorithm".into()],
                cols: None,
                value: "final_loss".into(),
                scale: None,
                paper: None,
                extra: Vec::new(),
                reference: None,
            },
            resolved: String::new(),
        }
    }

    /// An exclusion removes exactly the points with all its values, and
    /// one naming a key the grid lacks, or no algorithm, is refused at plan
    /// time.
    #[test]
    fn exclusions_remove_matching_points_and_name_typos() {
        let mut m = manifest();
        m.exclude = vec![yaml_serde::from_str("{algorithm: moniqua, seed: 1}").unwrap()];
        let runs = expand(&m, "smoke", Backend::Sim).unwrap();
        assert_eq!(runs.len(), 5);
        assert!(
            !runs
                .iter()
                .any(|r| r.point["algorithm"] == "moniqua" && r.point["seed"] == "1")
        );
        assert!(runs.iter().any(|r| r.point["seed"] == "1"));
        for (bad, says) in [
            ("{algo: moniqua}", "exclude[0].algo: not a grid key"),
            (
                "{algorithm: monqua}",
                "exclude[0].algorithm: `monqua` is no algorithm",
            ),
        ] {
            m.exclude = vec![yaml_serde::from_str(bad).unwrap()];
            let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn a_scale_can_replace_a_grid_axis() {
        let mut m = manifest();
        m.scales.insert(
            "small".into(),
            yaml_serde::from_str("{iterations: 5, grid.seed: [7]}").unwrap(),
        );
        let runs = expand(&m, "small", Backend::Sim).unwrap();
        assert_eq!(runs.len(), 2, "two algorithms, one seed");
        assert!(runs.iter().all(|r| r.point["seed"] == "7"));
        m.scales.insert(
            "bad".into(),
            yaml_serde::from_str("{grid.seed: 3}").unwrap(),
        );
        let err = expand(&m, "bad", Backend::Sim).unwrap_err().to_string();
        assert!(err.contains("scales.bad.grid.seed"), "{err}");
        m.scales.insert(
            "empty".into(),
            yaml_serde::from_str("{grid.seed: []}").unwrap(),
        );
        assert!(matches!(
            expand(&m, "empty", Backend::Sim),
            Err(DriverError::EmptyGrid { .. })
        ));
    }

    /// A case sets parameters for the matching grid points only, at its
    /// scales; a `when` key that is not a grid key is an error naming it.
    #[test]
    fn cases_set_parameters_for_matching_points() {
        let mut m = manifest();
        m.scales.insert("other".into(), Mapping::new());
        m.cases = yaml_serde::from_str(
            "[{when: {algorithm: moniqua}, set: {lr: 0.5}},
              {when: {algorithm: moniqua, seed: 2}, set: {lr: 0.7}, scales: [smoke]}]",
        )
        .unwrap();
        let lr = |scale: &str| -> Vec<(String, String, f32)> {
            expand(&m, scale, Backend::Sim)
                .unwrap()
                .into_iter()
                .map(|r| match r.params {
                    Params::Sim(p) => (r.point["algorithm"].clone(), r.point["seed"].clone(), p.lr),
                    Params::Train(_) => unreachable!(),
                })
                .collect()
        };
        for (alg, seed, lr) in lr("smoke") {
            let want = match (alg.as_str(), seed.as_str()) {
                ("moniqua", "2") => 0.7,
                ("moniqua", _) => 0.5,
                _ => 0.05,
            };
            assert_eq!(lr, want, "{alg} {seed}");
        }
        assert!(
            lr("other")
                .iter()
                .all(|(a, _, lr)| *lr == if a == "moniqua" { 0.5 } else { 0.05 })
        );
        m.cases = yaml_serde::from_str("[{when: {bits: 1}, set: {lr: 0.5}}]").unwrap();
        let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
        assert!(
            err.contains("cases[0].when.bits") && err.contains("algorithm, seed"),
            "{err}"
        );
    }

    /// A label axis names variants: its cases set their parameters, the
    /// runs keep the label, and the backend never sees it. A label that is
    /// no grid key, shadows a parameter, or has a value no case maps is a
    /// plan-time error.
    #[test]
    fn a_label_names_variants_that_cases_define() {
        let mut m = manifest();
        m.grid.remove("algorithm");
        m.grid.insert(
            "method".into(),
            vec![Value::from("plain"), Value::from("fast")],
        );
        m.labels = vec!["method".into()];
        m.cases = yaml_serde::from_str(
            "[{when: {method: plain}, set: {algorithm: d-psgd}},
              {when: {method: fast}, set: {algorithm: moniqua, lr: 0.5}}]",
        )
        .unwrap();
        let runs = expand(&m, "smoke", Backend::Sim).unwrap();
        assert_eq!(runs.len(), 6);
        for r in &runs {
            let Params::Sim(p) = &r.params else {
                unreachable!()
            };
            let want = match r.point["method"].as_str() {
                "plain" => ("d-psgd", 0.05),
                _ => ("moniqua", 0.5),
            };
            assert_eq!((p.algorithm.as_str(), p.lr), want, "{:?}", r.point);
            assert!(!r.point.contains_key("algorithm"));
        }
        let err = |m: &Manifest| expand(m, "smoke", Backend::Sim).unwrap_err().to_string();
        let mut bad = m.clone();
        bad.labels = vec!["variant".into()];
        assert!(
            err(&bad).contains("labels: `variant` is not a grid key"),
            "{}",
            err(&bad)
        );
        let mut bad = m.clone();
        bad.labels.push("seed".into());
        assert!(
            err(&bad).contains("labels: `seed` is a parameter"),
            "{}",
            err(&bad)
        );
        let mut bad = m.clone();
        bad.cases.truncate(1);
        assert!(
            err(&bad).contains("value `fast` has no case"),
            "{}",
            err(&bad)
        );
        // without the label the backend is handed `method`, and refuses it
        let mut bad = m.clone();
        bad.labels.clear();
        assert!(
            err(&bad).contains("`method`: unknown parameter"),
            "{}",
            err(&bad)
        );
    }

    #[test]
    fn grid_expands_with_stable_distinct_ids() {
        let runs = expand(&manifest(), "smoke", Backend::Sim).unwrap();
        assert_eq!(runs.len(), 6);
        assert!(runs.iter().all(|r| match &r.params {
            Params::Sim(p) => p.iterations == 5 && p.workers == 4,
            Params::Train(_) => false,
        }));
        let mut ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 6);
        assert_eq!(runs, expand(&manifest(), "smoke", Backend::Sim).unwrap());
        // the same grid for the trainer: its config, its own ids
        let train = expand(&manifest(), "smoke", Backend::Mpi).unwrap();
        assert!(
            train.iter().all(
                |r| matches!(&r.params, Params::Train(c) if c.run_id == r.id && c.workers == 4)
            )
        );
        assert_ne!(train[0].id, runs[0].id);
        assert_eq!(runs[0].point["algorithm"], "d-psgd");
    }

    #[test]
    fn bad_params_name_the_run_and_key() {
        let mut m = manifest();
        m.params.insert(Value::from("workerz"), Value::from(3));
        let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
        assert!(
            err.contains("workerz") && err.contains("algorithm=d-psgd"),
            "{err}"
        );
        let err = expand(&manifest(), "paper", Backend::Sim)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has no scale `paper`") && err.contains("smoke"),
            "{err}"
        );
    }

    /// The knobs are flat manifest keys: a wrong value names its key, an
    /// unknown key is still refused, and `theta: theorem3-step` reaches the
    /// simulator and the trainer (refused at plan time for an
    /// asynchronous algorithm, which has no warm-up).
    #[test]
    fn knobs_are_flat_keys_named_in_errors() {
        let mut m = manifest();
        m.params.insert(Value::from("bits"), Value::from("one"));
        let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
        assert!(err.contains("bits"), "{err}");
        let mut m = manifest();
        m.params.insert(Value::from("thetta"), Value::from(1.0));
        let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
        assert!(err.contains("thetta"), "{err}");
        let err = expand(&m, "smoke", Backend::Mpi).unwrap_err().to_string();
        assert!(err.contains("thetta"), "{err}");
        let mut m = manifest();
        m.params
            .insert(Value::from("theta"), Value::from("theorem3-step"));
        m.params.insert(Value::from("theta_warmup"), Value::from(3));
        let runs = expand(&m, "smoke", Backend::Sim).unwrap();
        assert!(runs.iter().all(|r| matches!(&r.params,
            Params::Sim(p) if p.knobs.theta == Theta::Theorem3Step && p.knobs.theta_warmup == 3)));
        let runs = expand(&m, "smoke", Backend::InProcess).unwrap();
        assert!(
            runs.iter().all(|r| matches!(&r.params,
            Params::Train(c) if c.knobs.theta == Theta::Theorem3Step && c.knobs.theta_warmup == 3))
        );
        let mut asynchronous = m.clone();
        asynchronous
            .grid
            .insert("algorithm".into(), vec![Value::from("moniqua-ad-psgd")]);
        let err = expand(&asynchronous, "smoke", Backend::Mpi)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("theta") && err.contains("asynchronous"),
            "{err}"
        );
        m.params.insert(Value::from("theta"), Value::from("often"));
        let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
        assert!(
            err.contains("theta") && err.contains("theorem3-step"),
            "{err}"
        );
    }

    /// Ids hash the canonical parameters: a field at its default adds
    /// nothing, so a new field that keeps its default keeps every id, and a
    /// changed value changes it.
    #[test]
    fn run_ids_leave_out_defaults() {
        #[derive(Serialize, Default)]
        struct Old {
            a: u32,
        }
        #[derive(Serialize, Default)]
        struct New {
            a: u32,
            added: Option<f64>,
        }
        assert_eq!(
            run_id("sim", &Old { a: 3 }, None),
            run_id("sim", &New { a: 3, added: None }, None)
        );
        assert_ne!(
            run_id("sim", &Old { a: 3 }, None),
            run_id(
                "sim",
                &New {
                    a: 3,
                    added: Some(1.0)
                },
                None
            )
        );
        assert_ne!(
            run_id("sim", &Old { a: 3 }, None),
            run_id("mpi", &Old { a: 3 }, None)
        );
        // a manifest value equal to the default is the same run as no value
        let mut m = manifest();
        let plain = expand(&m, "smoke", Backend::Mpi).unwrap();
        m.params.insert(Value::from("bits"), Value::from(8));
        m.params.insert(Value::from("hash"), Value::from(true));
        assert_eq!(plain, expand(&m, "smoke", Backend::Mpi).unwrap());
    }

    /// A limit bounds a run without deciding its result: raising
    /// `timeout_s` keeps every id and the manifest's hash, so the recorded
    /// runs stay current; a parameter that decides the result changes both.
    #[test]
    fn a_timeout_is_not_part_of_a_run_id_or_the_manifest_hash() {
        let dir = std::env::temp_dir().join(format!("repro-limits-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.yaml");
        std::fs::write(
            &path,
            "name: t\ntitle: t\nsource: s\nbackend: mpi\nscales:\n  smoke: { iterations: 5, timeout_s: 60 }\n\
             grid:\n  algorithm: [d-psgd, moniqua]\nparams:\n  workers: 2\n  timeout_s: 600\n\
             table: { rows: [algorithm], value: final_loss }\n",
        )
        .unwrap();
        let plan = |overrides: &[&str]| {
            let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
            let m = manifest::load(&path, &o).unwrap();
            let runs = expand(&m, "smoke", Backend::Mpi).unwrap();
            let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
            let timeouts: Vec<u64> = runs
                .iter()
                .map(|r| match &r.params {
                    Params::Train(c) => c.timeout_s,
                    Params::Sim(_) => 0,
                })
                .collect();
            (ids, m.hash("smoke", Backend::Mpi), timeouts)
        };
        let (ids, hash, timeouts) = plan(&[]);
        assert_eq!(timeouts, [60, 60]);
        let (raised, raised_hash, raised_timeouts) = plan(&["scales.smoke.timeout_s=601"]);
        assert_eq!(raised_timeouts, [601, 601], "the override must take effect");
        assert_eq!((&ids, &hash), (&raised, &raised_hash));
        let (other, other_hash, _) = plan(&["params.workers=3"]);
        assert_ne!(ids, other);
        assert_ne!(hash, other_hash);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
