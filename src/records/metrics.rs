//! The metrics a run has, in one registry ([`REGISTRY`]): every runs.csv
//! column after the grid point (its name, how it is written, where its
//! value comes from) and every curve a figure can draw. runs.csv's
//! columns ([`METRICS`]) and their kinds ([`kind`]), a summary's cells,
//! the curves ([`CURVE_METRICS`]), and so the metrics that tables, figures,
//! claims and tuning accept, are all read from it.

use repro_runlog::Eval;

use crate::launch::summary::Summary;

/// How runs.csv writes a metric column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    Count,
    /// A number in scientific notation, every digit kept.
    Sci,
    /// A number with this many decimals.
    Fixed(usize),
}

/// One metric of one run, typed by its column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Text(String),
    Count(u64),
    /// `None`: not measured, or not a number.
    Number(Option<f64>),
}

impl Cell {
    /// The value as a number, if it is one.
    pub(crate) fn number(&self) -> Option<f64> {
        match self {
            Cell::Number(v) => *v,
            Cell::Count(n) => Some(*n as f64),
            Cell::Text(_) => None,
        }
    }

    /// The text of a text cell ("" for others).
    pub(crate) fn text(&self) -> &str {
        match self {
            Cell::Text(t) => t,
            _ => "",
        }
    }

    /// The cell as runs.csv writes it in column `metric` (a missing number
    /// as `NaN`).
    pub(crate) fn csv(&self, metric: &str) -> String {
        match (self, kind(metric)) {
            (Cell::Text(t), _) => t.clone(),
            (Cell::Count(n), _) => n.to_string(),
            (Cell::Number(None), _) => "NaN".into(),
            (Cell::Number(Some(v)), Kind::Fixed(d)) => format!("{v:.d$}"),
            (Cell::Number(Some(v)), _) => format!("{v:e}"),
        }
    }

    /// A runs.csv cell of column `metric` read back: the one place text
    /// becomes a cell. An empty cell is no cell.
    pub(crate) fn parse(metric: &str, text: &str) -> Option<Cell> {
        if text.is_empty() {
            return None;
        }
        let number = || Cell::Number(text.parse::<f64>().ok().filter(|v| !v.is_nan()));
        Some(match kind(metric) {
            Kind::Text => Cell::Text(text.to_string()),
            Kind::Count => text.parse().map_or_else(|_| number(), Cell::Count),
            Kind::Sci | Kind::Fixed(_) => number(),
        })
    }
}

/// Where a runs.csv column's value comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum From {
    /// The run's summary.
    Summary(fn(&Summary) -> Cell),
    /// The run's network condition (`results::condition_cells`).
    Network,
    /// Why the run failed (`results::error_cells`).
    Failure,
    /// The driver's judgement of the run's other cells (`health::judge`).
    Judged,
}

/// A runs.csv column: how it is written and where its value comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    pub kind: Kind,
    pub from: From,
}

/// A curve over a run: the training loss of every step, or a value of
/// the evaluations (every `eval_every` steps).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Curve {
    TrainLoss,
    Eval(fn(&Eval) -> Option<f64>),
}

/// One metric: a runs.csv column, a curve a figure can draw, or both.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Metric {
    pub name: &'static str,
    pub column: Option<Column>,
    pub curve: Option<Curve>,
    /// How a figure's axis and a report name it (its name where it has
    /// no other).
    pub label: &'static str,
    /// The values it can take, for intervals that stay inside them.
    pub range: Range,
    /// How it is shown and judged.
    pub unit: Unit,
}

/// What a metric is, as far as showing and judging it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// A share of correct answers, 0 to 1: shown in percent, better when
    /// higher, and at worst chance (a failed run's value).
    Accuracy,
    /// Anything else, shown as measured.
    AsMeasured,
}

impl Metric {
    /// A column from the run's summary.
    const fn of(name: &'static str, kind: Kind, of: fn(&Summary) -> Cell) -> Self {
        Self::column(name, kind, From::Summary(of))
    }

    const fn column(name: &'static str, kind: Kind, from: From) -> Self {
        Metric {
            name,
            column: Some(Column { kind, from }),
            curve: None,
            label: name,
            range: Range::Real,
            unit: Unit::AsMeasured,
        }
    }

    /// A curve that is no runs.csv column.
    const fn curve(name: &'static str, curve: Curve) -> Self {
        Metric {
            name,
            column: None,
            curve: Some(curve),
            label: name,
            range: Range::Real,
            unit: Unit::AsMeasured,
        }
    }

    /// The metric's values lie in `range`.
    const fn within(mut self, range: Range) -> Self {
        self.range = range;
        self
    }

    /// The metric is an accuracy ([`Unit::Accuracy`]).
    const fn accuracy(mut self) -> Self {
        self.unit = Unit::Accuracy;
        self
    }

    /// The metric's label on an axis.
    const fn labelled(mut self, label: &'static str) -> Self {
        self.label = label;
        self
    }

    /// The metric with a curve as well.
    const fn and_curve(mut self, curve: Curve) -> Self {
        self.curve = Some(curve);
        self
    }
}

/// Every metric, in runs.csv's column order (the curves that are no
/// column sit beside their kin). A new metric is one entry here, and a
/// field of [`Summary`] where it comes from the run's logs.
pub(crate) const REGISTRY: [Metric; 69] = {
    use Kind::{Count, Fixed, Sci, Text};
    use Metric as M;
    [
        M::of("status", Text, |s| Cell::Text(s.status.text().into())),
        M::column("health", Text, From::Judged),
        M::column("health_note", Text, From::Judged),
        M::column("health_kind", Text, From::Judged),
        M::column("premise", Text, From::Judged),
        M::column("premise_note", Text, From::Judged),
        M::column("chance_accuracy", Sci, From::Judged)
            .within(Range::Fraction)
            .accuracy(),
        M::of("final_loss", Sci, |s| Cell::Number(s.final_loss)).within(Range::Positive),
        M::of("train_loss", Sci, |s| Cell::Number(s.train_loss))
            .and_curve(Curve::TrainLoss)
            .within(Range::Positive)
            .labelled("train loss"),
        M::of("first_loss", Sci, |s| Cell::Number(s.first_loss)).within(Range::Positive),
        M::of("last_loss", Sci, |s| Cell::Number(s.last_loss())).within(Range::Positive),
        M::of("local_loss", Sci, |s| Cell::Number(s.local_loss)).within(Range::Positive),
        M::of("grad_norm_sq", Sci, |s| Cell::Number(s.grad_norm_sq)).within(Range::Positive),
        M::of("consensus_distance", Sci, |s| Cell::Number(s.consensus))
            .and_curve(Curve::Eval(|e| e.consensus_distance))
            .within(Range::Positive)
            .labelled("consensus distance"),
        M::of("max_deviation", Sci, |s| Cell::Number(s.max_deviation))
            .and_curve(Curve::Eval(|e| e.max_deviation)),
        M::of("model_norm", Sci, |s| Cell::Number(s.model_norm))
            .and_curve(Curve::Eval(|e| e.model_norm)),
        M::of("bytes", Count, |s| Cell::Count(s.bytes)).within(Range::Positive),
        M::of("exchange_share", Fixed(4), |s| {
            Cell::Number(s.exchange_share)
        }),
        M::of("virtual_s", Sci, |s| Cell::Number(s.virtual_s)).within(Range::Positive),
        M::of("hash_failures", Count, |s| Cell::Count(s.hash_failures)),
        M::of("hash_verified", Count, |s| Cell::Count(s.hash_verified)),
        M::of("failed_recovery_rate", Sci, |s| {
            Cell::Number(s.failed_recovery_rate())
        })
        .within(Range::Fraction),
        M::curve("test_loss", Curve::Eval(|e| e.test_loss))
            .within(Range::Positive)
            .labelled("test loss (local models)"),
        M::of("test_accuracy", Sci, |s| Cell::Number(s.test_accuracy))
            .and_curve(Curve::Eval(|e| e.test_accuracy))
            .within(Range::Fraction)
            .accuracy()
            .labelled("test accuracy (local models)"),
        M::curve("avg_test_loss", Curve::Eval(|e| e.avg_test_loss))
            .within(Range::Positive)
            .labelled("test loss of the averaged model"),
        M::of("avg_test_accuracy", Sci, |s| {
            Cell::Number(s.avg_test_accuracy)
        })
        .and_curve(Curve::Eval(|e| e.avg_test_accuracy))
        .within(Range::Fraction)
        .accuracy()
        .labelled("test accuracy of the averaged model"),
        M::of("val_loss", Sci, |s| Cell::Number(s.val_loss))
            .and_curve(Curve::Eval(|e| e.val_loss))
            .within(Range::Positive)
            .labelled("validation loss of the averaged model"),
        M::of("val_accuracy", Sci, |s| Cell::Number(s.val_accuracy))
            .and_curve(Curve::Eval(|e| e.val_accuracy))
            .within(Range::Fraction)
            .accuracy()
            .labelled("validation accuracy of the averaged model"),
        M::of("recovery_over_bound", Sci, |s| {
            Cell::Number(s.recovery_over_bound)
        }),
        M::of("wrap_rate", Sci, |s| Cell::Number(s.wrap_rate)).within(Range::Fraction),
        M::curve("objective", Curve::Eval(|e| e.objective)).labelled("f(averaged model)"),
        M::of("subopt", Sci, |s| Cell::Number(s.subopt))
            .and_curve(Curve::Eval(|e| e.subopt))
            .within(Range::Positive)
            .labelled("f(averaged model) - f*"),
        M::of("wall_s", Fixed(3), |s| {
            Cell::Number(repro_runlog::finite(s.wall_s))
        })
        .within(Range::Positive)
        .labelled("wall-clock time (s)"),
        M::of("setup_s", Sci, |s| Cell::Number(s.setup_s)).within(Range::Positive),
        M::of("metrics_s", Sci, |s| Cell::Number(s.metrics_s)).within(Range::Positive),
        M::of("summary_s", Sci, |s| Cell::Number(s.summary_s)).within(Range::Positive),
        M::of("iteration_s", Sci, |s| Cell::Number(s.iteration_s))
            .within(Range::Positive)
            .labelled("seconds per iteration (host)"),
        M::of("stream_s", Sci, |s| Cell::Number(s.stream_s)).within(Range::Positive),
        M::of("stream_ratio", Sci, |s| Cell::Number(s.stream_ratio())),
        M::of("overhead", Sci, |s| Cell::Number(s.overhead())),
        M::of("coordinates", Sci, |s| Cell::Number(s.coordinates))
            .within(Range::Positive)
            .labelled("coordinates of all models (n d)"),
        M::of("extra_memory_mb", Sci, |s| Cell::Number(s.extra_memory_mb)).within(Range::Positive),
        M::of("memory_mb", Sci, |s| Cell::Number(s.memory_mb))
            .within(Range::Positive)
            .labelled("planned memory (MB)"),
        M::of("peak_rss_mb", Sci, |s| Cell::Number(s.peak_rss_mb))
            .within(Range::Positive)
            .labelled("peak resident memory (MB)"),
        M::of("theta_used", Sci, |s| Cell::Number(s.theta)),
        M::of("modulus_used", Sci, |s| Cell::Number(s.modulus)),
        M::of("peak_over_memory", Sci, |s| {
            Cell::Number(s.peak_over_memory())
        }),
        M::of("model_mb", Sci, |s| Cell::Number(s.model_mb)).within(Range::Positive),
        M::of("measured_extra_mb", Sci, |s| {
            Cell::Number(s.measured_extra_mb())
        })
        .within(Range::Positive),
        M::of("measured_extra_models", Sci, |s| {
            Cell::Number(s.in_models(s.measured_extra_mb()))
        }),
        M::of("state_models", Sci, |s| {
            Cell::Number(s.in_models(s.state_mb))
        }),
        M::of("frames_models", Sci, |s| {
            Cell::Number(s.in_models(s.frames_mb))
        }),
        M::of("optimizer_models", Sci, |s| {
            Cell::Number(s.in_models(s.optimizer_mb))
        }),
        M::of("extra_memory_models", Sci, |s| {
            Cell::Number(s.in_models(s.extra_memory_mb))
        }),
        M::of("epoch_time_s", Sci, |s| Cell::Number(s.epoch_time_s))
            .within(Range::Positive)
            .labelled("epoch time (s)"),
        M::of("wire_bound_epoch_s", Sci, |s| {
            Cell::Number(s.wire_bound_epoch_s)
        })
        .within(Range::Positive),
        M::of("time_over_bound", Fixed(4), |s| {
            Cell::Number(s.epoch_time_s.zip(s.wire_bound_epoch_s).map(|(t, b)| t / b))
        }),
        M::of("comm_fraction", Fixed(4), |s| Cell::Number(s.comm_fraction)).within(Range::Fraction),
        M::of("compute_step_s", Sci, |s| Cell::Number(s.compute_step_s)).within(Range::Positive),
        M::of("algorithm_step_s", Sci, |s| {
            Cell::Number(s.algorithm_step_s)
        })
        .within(Range::Positive),
        M::of("shaping", Text, |s| Cell::Text(s.shaping.clone())),
        M::of("counted_bytes_per_worker", Sci, |s| {
            Cell::Number(s.counted_bytes_per_worker)
        })
        .within(Range::Positive)
        .labelled("bytes sent per worker"),
        M::of("gossip_bytes_per_worker", Sci, |s| {
            Cell::Number(s.gossip_bytes_per_worker)
        })
        .within(Range::Positive),
        M::of("kernel_bytes_per_worker", Sci, |s| {
            Cell::Number(s.kernel_bytes_per_worker)
        })
        .within(Range::Positive),
        M::of("kernel_over_counted", Fixed(4), |s| {
            Cell::Number(s.kernel_over_counted())
        }),
        M::of("bytes_check", Text, |s| Cell::Text(s.bytes_check().into())).within(Range::Positive),
        M::column("bandwidth_bps", Sci, From::Network),
        M::column("latency_s", Sci, From::Network).within(Range::Positive),
        M::column("error", Text, From::Failure),
    ]
};

/// Whether `m` is a runs.csv column (`curves` false) or a curve (true).
const fn selected(m: &Metric, curves: bool) -> bool {
    if curves {
        m.curve.is_some()
    } else {
        m.column.is_some()
    }
}

/// How many of the registry's metrics are columns, or curves.
const fn count(curves: bool) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < REGISTRY.len() {
        if selected(&REGISTRY[i], curves) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The names of the registry's columns, or curves, in order.
const fn names<const N: usize>(curves: bool) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < REGISTRY.len() {
        if selected(&REGISTRY[i], curves) {
            out[n] = REGISTRY[i].name;
            n += 1;
        }
        i += 1;
    }
    out
}

/// runs.csv's measured columns, in order (after the grid point; then
/// [`PROVENANCE`] and [`IDENTITY`]).
pub(crate) const METRICS: [&str; count(false)] = names(false);

/// The `y` values a figure can draw along a run.
pub(crate) const CURVE_METRICS: [&str; count(true)] = names(true);

/// The values a metric can take, for intervals that stay inside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Range {
    /// Above zero: a loss, a time, a count of bytes, a distance.
    Positive,
    /// Between 0 and 1: an accuracy, a share.
    Fraction,
    /// Any number.
    Real,
}

/// The range of metric `name` (a curve or a runs.csv column), from its
/// registry entry; any number for a name that is no metric.
pub(crate) fn range(name: &str) -> Range {
    metric(name).map_or(Range::Real, |m| m.range)
}

/// Whether metric `name` is an accuracy ([`Unit::Accuracy`]).
pub(crate) fn is_accuracy(name: &str) -> bool {
    metric(name).is_some_and(|m| m.unit == Unit::Accuracy)
}

/// The factor metric `name` is shown multiplied by where a manifest does
/// not set one (`scale`): 100 for an accuracy, so accuracies read in
/// percent in every table, claim and figure; 1 for the rest.
pub(crate) fn unit_factor(name: &str) -> f64 {
    if is_accuracy(name) { 100.0 } else { 1.0 }
}

/// The registry's entry for `name`.
pub(crate) fn metric(name: &str) -> Option<&'static Metric> {
    REGISTRY.iter().find(|m| m.name == name)
}

/// The kind of runs.csv column `name`: the registry's, text for the
/// provenance and identity columns, else a number.
pub(crate) fn kind(name: &str) -> Kind {
    match metric(name).and_then(|m| m.column) {
        Some(c) => c.kind,
        None if PROVENANCE.contains(&name) || IDENTITY.contains(&name) => Kind::Text,
        None => Kind::Sci,
    }
}

/// Where each run came from, after [`METRICS`] in runs.csv: the run log's
/// provenance (see `repro_runlog::Provenance`); `source` and
/// `manifest_hash` decide whether a run is current (`repro status`).
pub(crate) const PROVENANCE: [&str; 11] = [
    "git_commit",
    "git_dirty",
    "source",
    "rustc",
    "version",
    "host",
    "device",
    "libtorch",
    "mpi",
    "command",
    "manifest_hash",
];

/// What a run is a run of, after [`PROVENANCE`] in runs.csv: the
/// experiment and scale it was planned for, its data set and a checksum of
/// the data files it read (`generated` for data made from its
/// parameters), and its resolved parameters (canonical JSON without the
/// defaults, the text its run id hashes). A results directory holds one
/// experiment at one scale (`results::check_identity`).
pub(crate) const IDENTITY: [&str; 5] = [
    "experiment",
    "scale",
    "data_source",
    "data_checksum",
    "params",
];

/// Every column of a run record after its grid point: [`METRICS`], then
/// [`PROVENANCE`], then [`IDENTITY`].
pub(crate) fn columns() -> impl Iterator<Item = &'static str> {
    METRICS.into_iter().chain(PROVENANCE).chain(IDENTITY)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No column is named like a run parameter: a manifest grids over
    /// parameters (`theta`, `bits`), and a grid key must not be a column.
    #[test]
    fn no_column_is_named_like_a_parameter() {
        use crate::experiment::manifest::Backend;
        for backend in [Backend::Sim, Backend::Mpi] {
            for p in crate::experiment::plan::parameter_names(backend) {
                assert!(
                    !METRICS.contains(&p.as_str()),
                    "runs.csv column `{p}` is a {backend:?} parameter"
                );
            }
        }
    }

    /// Each column's cells are of its kind (text, a count, a number), so
    /// runs.csv writes and reads back what the registry says; the names
    /// are unique, and the curves are the ones a figure may draw.
    #[test]
    fn every_column_writes_cells_of_its_kind() {
        let s = Summary::default();
        for m in &REGISTRY {
            let Some(Column { kind, from }) = m.column else {
                continue;
            };
            let From::Summary(of) = from else {
                continue;
            };
            let ok = matches!(
                (kind, of(&s)),
                (Kind::Text, Cell::Text(_))
                    | (Kind::Count, Cell::Count(_))
                    | (Kind::Sci | Kind::Fixed(_), Cell::Number(_))
            );
            assert!(ok, "{}: {kind:?} but {:?}", m.name, of(&s));
            let back = Cell::parse(m.name, &of(&s).csv(m.name));
            assert!(back.is_none() || back == Some(of(&s)), "{}", m.name);
        }
        let mut names: Vec<&str> = REGISTRY.iter().map(|m| m.name).collect();
        names.extend(PROVENANCE);
        names.extend(IDENTITY);
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all);
        assert_eq!(METRICS.len() + 3, REGISTRY.len());
        assert_eq!(CURVE_METRICS[0], "train_loss");
        assert!(CURVE_METRICS.contains(&"consensus_distance"));
        assert!(METRICS.contains(&"consensus_distance"));
        assert!(!METRICS.contains(&"consensus"));
    }
}
