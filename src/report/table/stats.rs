//! A cell's statistics: the aggregates polars computes per cell, the sample
//! they come from, and the tidy numbers the CSV writes.

use super::*;

/// The aggregates that [`CellStats::of`] reads from a group-by of runs:
/// the runs by health, failed and refused, and `metric` times `factor`
/// over the runs that tested the method (intention to treat,
/// [`frames::counted`]) and over the valid runs alone (health `ok`): each
/// mean, sample sd and count. `df` is the runs frame (for the columns it
/// has).
pub(crate) fn cell_aggregates(df: &DataFrame, metric: &str, factor: f64) -> Vec<Expr> {
    let counted = frames::counted(df, metric, factor, higher_is_better(metric));
    let ok = (frames::number(df, metric) * lit(factor)).filter(frames::valid());
    let mut aggs: Vec<Expr> = Health::ALL
        .iter()
        .map(|h| {
            frames::health()
                .eq(lit(h.text()))
                .cast(DataType::Float64)
                .sum()
                .alias(format!("__health_{}", h.text()))
        })
        .collect();
    aggs.extend([
        len().cast(DataType::Float64).alias("__runs"),
        col("status")
            .eq(lit(RunStatus::Failed.text()))
            .cast(DataType::Float64)
            .sum()
            .alias("__failed"),
        frames::text(df, "premise")
            .eq(lit(Premise::Wrapped.text()))
            .fill_null(lit(false))
            .cast(DataType::Float64)
            .sum()
            .alias("__premise_wrapped"),
        // a run refused at plan time: the memory it would have needed
        frames::number(df, "memory_mb")
            .filter(col("status").eq(lit(RunStatus::Refused.text())))
            .max()
            .alias("__refused_mb"),
    ]);
    for (values, prefix) in [(counted, "__"), (ok, "__ok_")] {
        aggs.extend([
            unoverflowed(&values, |v| v.mean()).alias(format!("{prefix}mean")),
            unoverflowed(&values, |v| v.std(1)).alias(format!("{prefix}sd")),
            values
                .count()
                .cast(DataType::Float64)
                .alias(format!("{prefix}n")),
        ]);
    }
    aggs
}

/// `stat` of `values` (a mean or sd), taken on the values scaled down by
/// the largest where finite values overflow it (ten of 1e308 have the
/// mean 1e308, not ∞); values with an infinity keep their infinite mean.
pub(super) fn unoverflowed(values: &Expr, stat: impl Fn(Expr) -> Expr) -> Expr {
    let plain = stat(values.clone());
    let (hi, lo) = (values.clone().max(), lit(0.0) - values.clone().min());
    let big = polars::prelude::when(hi.clone().gt_eq(lo.clone()))
        .then(hi)
        .otherwise(lo);
    let scaled = stat(values.clone() / big.clone()) * big;
    polars::prelude::when(
        plain
            .clone()
            .is_finite()
            .or(values.clone().is_finite().all(true).not()),
    )
    .then(plain)
    .otherwise(scaled)
}

/// The columns [`CellStats::tidy`] fills, in order: a cell's runs; the
/// number of runs counted by intention to treat, their mean, sample sd
/// and the mean's 95% t interval; the same over the valid runs alone;
/// and the runs counted by health.
pub(crate) const TIDY_STATS: [&str; 12] = [
    "runs",
    "n",
    "mean",
    "sd",
    "ci_low",
    "ci_high",
    "ok_n",
    "ok_mean",
    "ok_sd",
    "ok_ci_low",
    "ok_ci_high",
    "health",
];

/// A sample's mean, sample sd and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample {
    pub n: usize,
    pub mean: Option<f64>,
    pub sd: Option<f64>,
}

impl Sample {
    /// The 95% t interval of the mean; none below two values or without
    /// a finite sd.
    pub(crate) fn interval(&self) -> Option<(f64, f64)> {
        let (Some(m), Some(sd)) = (self.mean, self.sd) else {
            return None;
        };
        if self.n < 2 || !sd.is_finite() || !m.is_finite() {
            return None;
        }
        let half =
            crate::report::stats::t_star((self.n - 1) as f64, 0.05) * sd / (self.n as f64).sqrt();
        Some((m - half, m + half))
    }

    /// "0.81 ± 0.02 (n=3)", "0.8 (n=1)", "∞ (n=3)" where a failed run
    /// of an unbounded metric has no value, or "-" without a value.
    pub(crate) fn text(&self) -> String {
        match (self.n, self.mean) {
            (0, _) | (_, None) => "-".into(),
            (n, Some(m)) if m.is_infinite() => {
                format!("{}∞ (n={n})", if m < 0.0 { "-" } else { "" })
            }
            (1, Some(m)) => format!("{} (n=1)", number(m)),
            (n, Some(m)) => format!(
                "{} ± {} (n={n})",
                number(m),
                self.interval()
                    .map_or_else(|| "-".into(), |(lo, hi)| number((hi - lo) / 2.0))
            ),
        }
    }

    pub(super) fn tidy(&self) -> Vec<String> {
        let (lo, hi) = self.interval().unzip();
        vec![
            self.n.to_string(),
            tidy_number(self.mean),
            tidy_number(self.sd),
            tidy_number(lo),
            tidy_number(hi),
        ]
    }
}

/// One cell of runs: how many there are by health, and the statistics of
/// the value by intention to treat (every run that tested the method, a
/// failed one with what it achieved) and over the valid runs alone. The
/// one definition of a cell, for the formatted tables and the tidy CSV.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CellStats {
    pub runs: usize,
    pub failed: usize,
    /// The most memory a refused run would have needed (MB).
    pub refused_mb: Option<f64>,
    pub by_health: BTreeMap<Health, usize>,
    /// Runs whose method's premise failed (`premise` wrapped), whatever
    /// their health.
    pub wrapped: usize,
    /// Every run that tested the method ([`frames::counted`]).
    pub counted: Sample,
    /// The valid runs (health `ok`) with a value.
    pub ok: Sample,
}

impl CellStats {
    /// Group `i` of a group-by with [`cell_aggregates`].
    pub(crate) fn of(groups: &DataFrame, i: usize) -> Result<Self> {
        let count = |n: &str| -> Result<usize> {
            Ok(frames::number_at(groups, n, i)?.unwrap_or(0.0) as usize)
        };
        let mut by_health = BTreeMap::new();
        for h in Health::ALL {
            by_health.insert(h, count(&format!("__health_{}", h.text()))?);
        }
        let sample = |prefix: &str| -> Result<Sample> {
            Ok(Sample {
                n: count(&format!("{prefix}n"))?,
                mean: frames::number_at(groups, &format!("{prefix}mean"), i)?,
                sd: frames::number_at(groups, &format!("{prefix}sd"), i)?,
            })
        };
        Ok(Self {
            runs: count("__runs")?,
            failed: count("__failed")?,
            refused_mb: frames::number_at(groups, "__refused_mb", i)?,
            by_health,
            wrapped: count("__premise_wrapped")?,
            counted: sample("__")?,
            ok: sample("__ok_")?,
        })
    }

    /// The cell as a table prints it: the mean by intention to treat, the
    /// half-width of its interval and n; where some runs are not ok, the
    /// valid runs' figure beside it and the runs counted by health;
    /// "refused" or "failed" when no run has a result.
    pub(crate) fn text(&self) -> String {
        let premise = premise_text(self.wrapped, self.runs);
        match self.outcome_text() {
            text if premise.is_empty() => text,
            text => format!("{text}; {premise}"),
        }
    }

    /// [`Self::text`] without the premise.
    pub(super) fn outcome_text(&self) -> String {
        let ok = self.by_health[&Health::Ok];
        if ok == self.runs {
            return self.counted.text();
        }
        if ok == 0
            && self.by_health[&Health::Unfinished] == self.runs
            && let Some(mb) = self.refused_mb
        {
            return format!("refused: needs {:.1} GB", mb / 1e3);
        }
        if ok == 0 && self.failed == self.runs {
            return RunStatus::Failed.text().to_string();
        }
        let counts = counts_text(&self.by_health);
        match (self.counted.n, ok) {
            (0, _) => counts,
            (_, 0) => format!("{}; {counts}", self.counted.text()),
            _ => format!(
                "{}; ok only {}; {counts}",
                self.counted.text(),
                self.ok.text()
            ),
        }
    }

    /// The cell's [`TIDY_STATS`] columns: numbers in full precision
    /// (empty where there is none).
    pub(crate) fn tidy(&self) -> Vec<String> {
        std::iter::once(self.runs.to_string())
            .chain(self.counted.tidy())
            .chain(self.ok.tidy())
            .chain([counts_text(&self.by_health)])
            .collect()
    }
}

/// A number in a tidy CSV: every digit (the shortest text that reads
/// back as the same f64, with an exponent where that is shorter), empty
/// for none or not a number.
pub(crate) fn tidy_number(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(String::new, |v| format!("{v:?}"))
}

/// Whether row `rk` has every value `wanted` names.
pub(super) fn is_row(wanted: &[Option<String>], rk: &[String]) -> bool {
    wanted
        .iter()
        .zip(rk)
        .all(|(w, v)| w.as_ref().is_none_or(|w| w == v))
}

/// A difference as a table cell: mean ± the half-width of its 95%
/// interval, the test and the smaller n.
pub(super) fn difference_text(d: &crate::report::stats::Difference) -> String {
    let (lo, hi) = d.interval(0.05);
    let sign = if d.effect > 0.0 { "+" } else { "" };
    format!(
        "{sign}{} ± {} ({}, n={})",
        number(d.effect),
        number((hi - lo) / 2.0),
        d.test.name(),
        d.n_a.min(d.n_b)
    )
}
