//! Experiment manifests (`experiments/*.yaml`): parsed into raw structs with
//! unknown keys rejected and errors that name the YAML path, after `--set`
//! overrides are applied to the YAML tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use yaml_serde::{Mapping, Value};

use crate::experiment::condition::ShapingMode;
use crate::experiment::errors::DriverError;

mod load;
pub(crate) use load::*;

/// Which machinery runs the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Backend {
    /// The in-process simulator with a virtual clock.
    Sim,
    /// MPI ranks running the trainer.
    Mpi,
    /// The trainer's workers as threads of one process (`repro-train
    /// --in-process`), the network condition modelled by a virtual clock.
    /// `local`, its first name, is still accepted.
    #[serde(rename = "in-process", alias = "local")]
    InProcess,
}

impl Backend {
    /// Every backend.
    pub(crate) const ALL: [Backend; 3] = [Backend::Sim, Backend::Mpi, Backend::InProcess];

    /// The backend as the command line and a manifest spell it: the one
    /// spelling of its name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Sim => "sim",
            Backend::Mpi => "mpi",
            Backend::InProcess => "in-process",
        }
    }
}

/// What the table shows.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TableSpec {
    /// Grid keys that make the rows.
    pub rows: Vec<String>,
    /// A grid key whose values make the columns (none: one column).
    #[serde(default)]
    pub cols: Option<String>,
    /// The metric in the cells (a column of runs.csv).
    pub value: String,
    /// Multiply the measured values by this (100: fractions as percent).
    #[serde(default)]
    pub scale: Option<f64>,
    /// The paper's numbers, printed beside ours.
    #[serde(default)]
    pub paper: Option<PaperSpec>,
    /// More columns: one metric per row, over all of the row's runs.
    #[serde(default)]
    pub extra: Vec<ExtraColumn>,
    /// A reference row (row-key values, `{algorithm: d-psgd}`): every
    /// other row gets a row of its differences to it, paired by seed.
    #[serde(default)]
    pub reference: Option<BTreeMap<String, Value>>,
}

/// A column of one metric per table row (the extra-memory column of Table 2).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExtraColumn {
    /// A column of runs.csv.
    pub value: String,
    /// The column's title.
    pub label: String,
    /// The paper CSV's column with the same quantity, printed beside it.
    #[serde(default)]
    pub paper: Option<String>,
    /// Divide by the same metric of a reference: the runs with these grid
    /// values (and this row's values for the other row keys), e.g.
    /// `{algorithm: allreduce}` for bytes as a fraction of full-precision SGD's.
    #[serde(default)]
    pub relative_to: Option<BTreeMap<String, String>>,
    /// Only the runs with these grid values (`{bits: 1}`): one column per
    /// setting of a key that is not a row key.
    #[serde(default, rename = "where")]
    pub select: BTreeMap<String, Value>,
    /// Multiply by this (100: fractions as percent).
    #[serde(default)]
    pub scale: Option<f64>,
}

/// Where the paper's numbers for a table come from: a CSV in `paper/`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PaperSpec {
    /// The CSV, relative to the repository (`paper/moniqua_table2.csv`).
    pub file: String,
    /// Our grid key -> the CSV column that must hold the same value.
    pub keys: BTreeMap<String, String>,
    /// Values for keys a run does not have in its grid point (a CPU-scale
    /// stand-in for the paper's model, say).
    #[serde(default)]
    pub defaults: BTreeMap<String, String>,
    /// The CSV column with the number, and optionally its sd and a
    /// true/false column saying the paper reports divergence.
    pub value: String,
    #[serde(default)]
    pub sd: Option<String>,
    #[serde(default)]
    pub diverged: Option<String>,
    /// What the paper measured, for the caption ("ResNet20 on CIFAR-10").
    pub label: String,
}

/// A manifest as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    pub name: String,
    pub title: String,
    /// The paper, table or figure it reproduces.
    pub source: String,
    #[serde(default = "default_backend")]
    pub backend: Backend,
    /// How `network` conditions are applied (auto: netns for MPI runs,
    /// the virtual clock for the simulator).
    #[serde(default)]
    pub shaping: ShapingMode,
    /// Scale name -> parameter overrides (smoke: seconds; cpu: minutes; paper).
    pub scales: BTreeMap<String, Mapping>,
    /// Scale name -> what a run of it costs, as measured (`repro list` shows it).
    #[serde(default)]
    pub cost: BTreeMap<String, String>,
    /// The scale `repro run` uses when `--scale` is not given (default: smoke).
    #[serde(default)]
    pub default_scale: Option<String>,
    /// The scale whose results `results/<name>/` holds, the record
    /// (default: `cpu` where the manifest has it). Only `repro run
    /// --record` writes it; every run gets a directory of its own under
    /// `runs/<name>/<scale>/` ([`Manifest::committed_scale`]).
    #[serde(default)]
    pub committed_scale: Option<String>,
    /// Experiments `repro run` runs after this one, at the same scale, each
    /// into a directory of this one's results named after it.
    #[serde(default)]
    pub then: Vec<String>,
    /// What to run next, printed after the results (the full-size command).
    #[serde(default)]
    pub next: Option<String>,
    /// Grid key -> values; every combination is a run.
    #[serde(default)]
    pub grid: BTreeMap<String, Vec<Value>>,
    /// Parameters shared by every run.
    #[serde(default)]
    pub params: Mapping,
    /// Grid points left out: each entry's values (`{algorithm: d-psgd,
    /// bits: 8}`) remove every point that has them all.
    #[serde(default)]
    pub exclude: Vec<BTreeMap<String, Value>>,
    /// Parameters for some grid points only (a hyper-parameter tuned per
    /// algorithm), applied after the grid point.
    #[serde(default)]
    pub cases: Vec<Case>,
    /// Grid keys that name a variant rather than set a parameter
    /// (`method: [moniqua, moniqua-paper]`): they label the runs (runs.csv,
    /// tables, claims, tuning) and never reach the backend; `cases` map
    /// each of their values to parameters.
    #[serde(default)]
    pub labels: Vec<String>,
    pub table: TableSpec,
    /// The figure drawn from the runs' per-step logs (none: no figure).
    #[serde(default)]
    pub figure: Option<FigureSpec>,
    /// Statements about the results, each tested on the runs
    /// (`claims.md`, `claims.csv`).
    #[serde(default)]
    pub claims: Vec<ClaimSpec>,
    /// A tuning protocol run before the grid: each method's settings
    /// chosen on a validation metric and tuning seeds (`tuning.md`).
    #[serde(default)]
    pub tune: Option<TuneSpec>,
    /// The experiment whose tuning chose this one's settings (its `cases`
    /// copy the choices): the report holds that tuning's metric against
    /// this one's claims.
    #[serde(default)]
    pub tuned_in: Option<String>,
    /// The thresholds of the rule that judges whether a run is a valid
    /// result (runs.csv's `health`; `records::health`).
    #[serde(default)]
    pub health: HealthSpec,
    /// How `repro verify` judges a rerun against the record.
    #[serde(default)]
    pub verify: VerifySpec,
    /// The manifest as resolved (overrides applied) without its
    /// [`PRESENTATION`] keys: JSON with sorted keys.
    #[serde(skip)]
    pub resolved: String,
}

/// `verify`: how `repro verify` judges a rerun's cells against the
/// record's.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VerifySpec {
    /// The equivalence margin of a cell, in the table's units (as
    /// printed: points for an accuracy). Default: one point for an
    /// accuracy, else 5% of the record's mean.
    #[serde(default)]
    pub margin: Option<f64>,
    /// A cell's margin is at least this multiple of the record's standard
    /// deviation across seeds: a cell whose seeds spread over several
    /// points cannot be held to one point. Default: none.
    #[serde(default)]
    pub spread: Option<f64>,
}

impl Manifest {
    /// The figure's title: its own `title`, else the experiment's.
    pub(crate) fn figure_title(&self) -> &str {
        self.figure
            .as_ref()
            .and_then(|f| f.title.as_deref())
            .unwrap_or(&self.title)
    }

    /// The scale a run takes: `asked` (`--scale`), else `default_scale`,
    /// else smoke.
    pub(crate) fn run_scale(&self, asked: &Option<String>) -> String {
        asked
            .clone()
            .or_else(|| self.default_scale.clone())
            .unwrap_or_else(|| "smoke".to_string())
    }

    /// The scale whose results are committed under `results/<name>/`:
    /// `committed_scale`, else `cpu` where the manifest has that scale.
    pub(crate) fn committed_scale(&self) -> Option<&str> {
        match &self.committed_scale {
            Some(s) => Some(s),
            None => self.scales.get_key_value("cpu").map(|(k, _)| k.as_str()),
        }
    }

    /// Where this manifest's results at `scale` go without `--out`.
    pub(crate) fn default_out(&self, scale: &str) -> PathBuf {
        crate::experiment::project::default_out(&self.name, scale, self.committed_scale())
    }

    /// The hash of the resolved manifest at `scale` for `backend`: runs
    /// planned from another hash are stale (`repro status`).
    pub(crate) fn hash(&self, scale: &str, backend: Backend) -> String {
        let text = format!("manifest:{scale}:{backend:?}:{}", self.resolved);
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
    }
}

/// The manifest keys that only present the runs (read them, never decide
/// them): changing one leaves the runs current.
pub(crate) const PRESENTATION: [&str; 13] = [
    "title",
    "tuned_in",
    "verify",
    "health",
    "source",
    "cost",
    "default_scale",
    "committed_scale",
    "then",
    "next",
    "table",
    "figure",
    "claims",
];

/// The parameters that bound a run without deciding its result: they are
/// left out of run ids and of the manifest's hash, so raising a timeout
/// keeps every recorded run current.
pub(crate) const LIMITS: [&str; 1] = ["timeout_s"];

/// `value` without the [`LIMITS`] keys, at every depth (params, scales,
/// cases).
fn without_limits(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        J::Object(m) => J::Object(
            m.into_iter()
                .filter(|(k, _)| !LIMITS.contains(&k.as_str()))
                .map(|(k, v)| (k, without_limits(v)))
                .collect(),
        ),
        J::Array(a) => J::Array(a.into_iter().map(without_limits).collect()),
        other => other,
    }
}

/// `value` as JSON with every object's keys sorted.
fn sorted_json(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        J::Object(m) => {
            let sorted: BTreeMap<String, J> =
                m.into_iter().map(|(k, v)| (k, sorted_json(v))).collect();
            J::Object(sorted.into_iter().collect())
        }
        J::Array(a) => J::Array(a.into_iter().map(sorted_json).collect()),
        other => other,
    }
}

/// The thresholds of the rule that judges a run's health
/// (`records::health::judge`): a manifest's `health:` section (every key
/// optional; a changed threshold judges the same runs again, it never
/// makes them stale).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct HealthSpec {
    /// A trainer run has diverged when its final train loss exceeds this
    /// multiple of its first logged one. (A simulator objective is convex:
    /// it has diverged when `f(x_bar)` ends above `f(x_bar_0)`.)
    pub loss_growth: f64,
    /// A run has collapsed when its final accuracy is at most chance (one
    /// over the classes) plus this margin. A margin of -1 judges no run
    /// collapsed by its accuracy: a rehearsal of two steps checks the
    /// mechanics, not the result.
    pub chance_margin: f64,
    /// ... or when its averaged model's Euclidean norm is below this.
    pub min_model_norm: f64,
    /// A run of several workers is silent when it sent no gossip bytes, or
    /// when its workers completed an exchange in fewer than this share of
    /// the iterations at which its algorithm exchanges (every one; every
    /// `period`-th for PSGD and PQASGD).
    pub min_exchange_share: f64,
    /// Moniqua's premise failed (`premise: wrapped`, beside health) when
    /// more than this share of the coordinates its workers recovered
    /// wrapped around the modulus (`wrap_rate`).
    pub max_wrap_rate: f64,
}

impl Default for HealthSpec {
    fn default() -> Self {
        HealthSpec {
            loss_growth: 10.0,
            chance_margin: 0.02,
            min_model_norm: 1e-3,
            min_exchange_share: 0.05,
            max_wrap_rate: 0.01,
        }
    }
}

impl HealthSpec {
    /// The thresholds make sense: a plan-time check; an error names the
    /// manifest key (`health.loss_growth`) and what is wrong.
    pub(crate) fn check(&self) -> Result<(), (String, String)> {
        let bad =
            |key: &str, v: f64, what: &str| Err((format!("health.{key}"), format!("{v}: {what}")));
        if self.loss_growth.is_nan() || self.loss_growth <= 1.0 {
            return bad("loss_growth", self.loss_growth, "it must exceed 1");
        }
        if !(-1.0..=1.0).contains(&self.chance_margin) {
            return bad(
                "chance_margin",
                self.chance_margin,
                "it is a share of accuracy, from -1 to 1",
            );
        }
        for (key, v) in [
            ("min_exchange_share", self.min_exchange_share),
            ("max_wrap_rate", self.max_wrap_rate),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(key, v, "it is a share, from 0 to 1");
            }
        }
        if self.min_model_norm.is_nan() || self.min_model_norm < 0.0 {
            return bad(
                "min_model_norm",
                self.min_model_norm,
                "it must be 0 or more",
            );
        }
        Ok(())
    }
}

/// The tuning protocol: for every method (a value of grid key `key`),
/// `budget` configurations from its `space` run on the `seeds` (never the
/// grid's), scored by `metric` on the validation split; the best few run
/// on the `confirm` seeds as well, and the best over all its seeds then
/// runs on the grid's seeds. Methods without a space run untuned.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TuneSpec {
    /// A run metric that selects (`val_accuracy`, or `final_loss` in the
    /// simulator); never one measured on the test set.
    pub metric: String,
    /// Whether a larger metric is better (default: accuracies are).
    #[serde(default)]
    pub higher_is_better: Option<bool>,
    /// Configurations tried per method: the same for every method. A
    /// space with a range draws exactly this many; a grid of values is
    /// cut to it.
    pub budget: usize,
    /// The tuning seeds, disjoint from the grid's `seed` values.
    pub seeds: Vec<Value>,
    /// Fraction of the training images held out for the metric (trainer
    /// runs), in every tuning and final run alike.
    #[serde(default)]
    pub validation: Option<f64>,
    /// Method -> parameter -> its values to try, or a range to draw from.
    pub space: BTreeMap<String, BTreeMap<String, Axis>>,
    /// The grid key naming the methods.
    #[serde(default = "default_claim_key")]
    pub key: String,
    /// A choice at the edge of a numeric axis of its space is tried once
    /// more one step beyond it (the same rule for every method), and the
    /// choice made again.
    #[serde(default)]
    pub extend: bool,
    /// The second look: the best few configurations of each method and
    /// setting (and any step beyond the edge) run on more seeds, and the
    /// choice is made over all of their seeds.
    #[serde(default)]
    pub confirm: Option<ConfirmSpec>,
    /// A method whose best score is within this much of chance accuracy
    /// (a share: 0.05 is five points) found no working configuration: it
    /// gets no final runs, and its claims say so. Accuracy metrics only;
    /// -1 judges no setting so (a rehearsal of a few steps).
    #[serde(default = "default_chance_margin")]
    pub chance_margin: f64,
    /// A sweep of the same setting to hold the tuned choice against: the
    /// report sets the choice's final mean beside the sweep's best cell.
    #[serde(default)]
    pub compare_with: Option<CompareWith>,
}

/// `tune.compare_with`: an experiment that sweeps one tuned method's
/// values over the same setting (`{experiment: moniqua-sensitivity,
/// method: moniqua}`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompareWith {
    pub experiment: String,
    /// The value of `tune.key` the sweep ran.
    pub method: String,
}

fn default_chance_margin() -> f64 {
    0.05
}

/// `tune.confirm`: how many configurations of each method and setting
/// run again, and on which further seeds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfirmSpec {
    /// The best this many by the first seeds' score.
    pub best: usize,
    /// The further tuning seeds: neither the first ones nor the grid's.
    pub seeds: Vec<Value>,
}

/// One tuned parameter of a method's space: a list of values (a grid
/// axis), or a range to draw values from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "Value")]
pub(crate) enum Axis {
    Values(Vec<Value>),
    Range(RangeAxis),
}

impl TryFrom<Value> for Axis {
    type Error = String;

    fn try_from(v: Value) -> Result<Self, String> {
        match v {
            Value::Sequence(values) => Ok(Axis::Values(values)),
            Value::Mapping(_) => yaml_serde::from_value::<RangeAxis>(v)
                .map(Axis::Range)
                .map_err(|e| {
                    format!(
                        "{e}; a range reads {{range: [low, high], scale: log or linear, stated: the paper's value}}"
                    )
                }),
            other => Err(format!(
                "{} is neither a list of values nor a range {{range: [low, high]}}",
                text(&other)
            )),
        }
    }
}

/// `{range: [lo, hi], scale: log, stated: 0.005}`: values drawn from
/// `[lo, hi]`, evenly in `scale`; `stated` is the value the method's
/// paper gives, which the range must contain.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RangeAxis {
    pub range: [f64; 2],
    #[serde(default)]
    pub scale: AxisScale,
    #[serde(default)]
    pub stated: Option<f64>,
}

/// How a range is spanned: evenly in the logarithm (a step size, a
/// modulus, a learning rate) or in the value itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum AxisScale {
    #[default]
    Log,
    Linear,
}

/// A YAML scalar as a grid point holds it (a string as itself).
pub(crate) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => yaml_serde::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

impl RangeAxis {
    /// The value a share `u` in [0, 1] of the range gives, to three
    /// significant digits (its label spells it whole).
    pub(crate) fn at(&self, u: f64) -> f64 {
        let [lo, hi] = self.range;
        let v = match self.scale {
            AxisScale::Log => (lo.ln() + u * (hi.ln() - lo.ln())).exp(),
            AxisScale::Linear => lo + u * (hi - lo),
        };
        format!("{v:.2e}").parse().unwrap_or(v)
    }

    /// The value `share` of the range's span beyond `bound` (one of its
    /// ends), on the side away from the range, to three digits.
    pub(crate) fn beyond(&self, bound: f64, share: f64) -> f64 {
        let [lo, hi] = self.range;
        let outward = if bound <= lo { -share } else { share };
        let v = match self.scale {
            AxisScale::Log => bound * (hi / lo).powf(outward),
            AxisScale::Linear => bound + outward * (hi - lo),
        };
        format!("{v:.2e}").parse().unwrap_or(v)
    }

    /// What is wrong with the range, if anything.
    pub(crate) fn problem(&self) -> Option<String> {
        let [lo, hi] = self.range;
        if !(lo.is_finite() && hi.is_finite() && lo < hi) {
            return Some(format!(
                "[{lo}, {hi}] is not a range: give [low, high], low below high"
            ));
        }
        if self.scale == AxisScale::Log && lo <= 0.0 {
            return Some(format!(
                "a log-scale range must be positive, not [{lo}, {hi}]; use `scale: linear` to include 0 or less"
            ));
        }
        match self.stated {
            Some(v) if !(lo..=hi).contains(&v) => Some(format!(
                "the stated value {v} lies outside [{lo}, {hi}]: a range must reach where the method's paper puts it"
            )),
            _ => None,
        }
    }
}

impl Axis {
    /// The values of a grid axis (none for a range).
    pub(crate) fn values(&self) -> &[Value] {
        match self {
            Axis::Values(v) => v,
            Axis::Range(_) => &[],
        }
    }

    /// The axis as tuning.md spells it: "[0.1, 0.2]" or "log range
    /// [0.001, 1] (stated 0.005)".
    pub(crate) fn text(&self) -> String {
        match self {
            Axis::Values(v) => format!("[{}]", v.iter().map(text).collect::<Vec<_>>().join(", ")),
            Axis::Range(r) => format!(
                "{} range [{}, {}]{}",
                match r.scale {
                    AxisScale::Log => "log",
                    AxisScale::Linear => "linear",
                },
                r.range[0],
                r.range[1],
                r.stated
                    .map_or_else(String::new, |v| format!(" (the paper's value {v})"))
            ),
        }
    }
}

/// A claim about the results, as a manifest writes it. Exactly one of
/// `better`, `within`, `diverges` and `faster_to` says what kind:
///
/// - `{better: moniqua, than: choco, where: {bits: 1}, metric: avg_test_accuracy}`
/// - `{within: 1.0, method: moniqua, of: d-psgd, metric: ..., where: ...}`
/// - `{diverges: dcd, where: {bits: 1}}` (in more than `rate` of its runs),
///   or with `than: choco`: more often than it
/// - `{faster_to: {train_loss: 0.6}, method: moniqua, than: d-psgd, by: wall_s}`
///
/// The methods are values of grid key `key` (default `algorithm`). `where`
/// selects the runs of both sides; `baseline_where` overrides it for the
/// baseline (`{bits: 32}` for full precision).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClaimSpec {
    /// The claim in words (default: written from its fields).
    #[serde(default)]
    pub claim: Option<String>,
    /// Who makes it ("Moniqua, Table 2").
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub better: Option<String>,
    #[serde(default)]
    pub within: Option<f64>,
    #[serde(default)]
    pub diverges: Option<String>,
    #[serde(default)]
    pub faster_to: Option<BTreeMap<String, f64>>,
    /// The method of a `within` or `faster_to` claim.
    #[serde(default)]
    pub method: Option<String>,
    /// The baseline of `better`, `faster_to` and `diverges`.
    #[serde(default)]
    pub than: Option<String>,
    /// The baseline of `within`.
    #[serde(default)]
    pub of: Option<String>,
    #[serde(default, rename = "where")]
    pub select: BTreeMap<String, Value>,
    #[serde(default)]
    pub baseline_where: BTreeMap<String, Value>,
    /// A column of runs.csv (`better`, `within`).
    #[serde(default)]
    pub metric: Option<String>,
    /// Whether a larger metric is better (default: by its name; accuracy
    /// is, losses, times and bytes are not).
    #[serde(default)]
    pub higher_is_better: Option<bool>,
    /// Multiply the metric by this before comparing (default: the table's
    /// `scale` when the metric is the table's value, else 1), so that
    /// `within: 1.0` on a percent table means one point.
    #[serde(default)]
    pub scale: Option<f64>,
    /// `faster_to`: the curves' x (wall_s, iteration, epoch, bytes).
    #[serde(default)]
    pub by: Option<String>,
    /// `diverges` without `than`: the share of runs it must exceed.
    #[serde(default)]
    pub rate: Option<f64>,
    /// The grid key whose values name the methods.
    #[serde(default = "default_claim_key")]
    pub key: String,
    /// The test's level (0.05: 95% intervals).
    #[serde(default = "default_level")]
    pub level: f64,
}

fn default_claim_key() -> String {
    "algorithm".into()
}

fn default_level() -> f64 {
    0.05
}

/// `{when: {algorithm: deepsqueeze}, set: {gamma: 0.05}, scales: [cpu]}`:
/// `set` applies to the runs whose grid values match every `when` entry, at
/// the listed scales (every scale if none).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    pub when: BTreeMap<String, Value>,
    pub set: Mapping,
    #[serde(default)]
    pub scales: Vec<String>,
}

fn default_backend() -> Backend {
    Backend::Sim
}

/// What a figure shows (the manifest's `figure`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FigureSpec {
    /// The figure's title, naming what it draws (default: the
    /// experiment's title, when that says the figure's metric).
    #[serde(default)]
    pub title: Option<String>,
    /// `curves` (a metric of the logs' steps against x), `sweep` (a
    /// runs.csv metric against the network condition's bandwidth and
    /// latency) or `scaling` (a runs.csv metric against another:
    /// `iteration_s` against `coordinates`, log-log).
    #[serde(default)]
    pub kind: FigureKind,
    /// curves: `wall_s` (seconds), `iteration` or `epoch`; scaling: a
    /// column of runs.csv; sweep: unused.
    #[serde(default = "default_x")]
    pub x: String,
    /// curves: `train_loss`; sweep: a column of runs.csv (`epoch_time_s`).
    #[serde(default = "default_y")]
    pub y: String,
    /// sweep: a column of runs.csv drawn dashed beside `y` (`wire_bound_epoch_s`).
    #[serde(default)]
    pub bound: Option<String>,
    /// A grid key: one panel per value (none: one panel).
    #[serde(default)]
    pub panels: Option<String>,
    /// A grid key: one line per value.
    pub series: String,
    /// Moving-average window over steps (1: raw).
    #[serde(default = "default_smooth")]
    pub smooth: usize,
    /// Logarithmic y axis.
    #[serde(default)]
    pub log_y: bool,
    /// Logarithmic x axis (curves, scaling; a sweep's bandwidth axis is always).
    #[serde(default)]
    pub log_x: bool,
    /// Show only this part of the x axis (`[0, 10]`: the first 10 s); y
    /// fits what is shown.
    #[serde(default)]
    pub x_range: Option<[f64; 2]>,
    /// The y axis' range (default: the points shown).
    #[serde(default)]
    pub y_range: Option<[f64; 2]>,
    /// Values of y to reach: targets.md gives each series' x at the first
    /// point that reaches each (curves).
    #[serde(default)]
    pub targets: Vec<f64>,
    /// Curves: draw the panels again against each of these x as well
    /// (`[bytes]`: suboptimality per epoch and per byte sent).
    #[serde(default)]
    pub also_x: Vec<String>,
    /// Multiply y by this (100: a fraction in percent); default: the
    /// metric's unit, 100 for an accuracy, as in tables.
    #[serde(default)]
    pub scale: Option<f64>,
}

/// What a figure plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub(crate) enum FigureKind {
    #[default]
    Curves,
    Sweep,
    Scaling,
}

fn default_x() -> String {
    "wall_s".into()
}
fn default_y() -> String {
    "train_loss".into()
}
fn default_smooth() -> usize {
    10
}

#[cfg(test)]
mod tests;
