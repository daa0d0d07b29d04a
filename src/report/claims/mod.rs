//! Claims: what a manifest says its results show, each tested on the runs
//! with the test that fits (`stats`), and written as claims.md and
//! claims.csv. A verdict is only as strong as its test: *supported* when
//! the interval (or exact test) rules out the opposite at the claim's
//! level, *contradicted* when it rules out the claim, *not supported*
//! otherwise.

use std::collections::BTreeMap;

use anyhow::Result;

use crate::experiment::manifest::{ClaimSpec, TableSpec};
use crate::experiment::plan::{self, SEED_KEY};
use crate::records::curves::{CurvePoint, RunCurve};
use crate::records::health::{
    Counted, Health, Kind as HealthKind, Premise, counts_text, premise_text,
};
use crate::records::metrics::{CURVE_METRICS, Kind as Column, METRICS, kind};
use crate::records::results::by_health;
use crate::records::results::{RunRecord, csv_text};
use crate::report::stats::{self, Difference};
use crate::report::table::{number, short};
use crate::report::tune::TuningRecord;

mod claim;
mod judge;
mod protocol;
mod write;
pub(crate) use claim::*;
use judge::*;
use protocol::*;
pub(crate) use write::*;

#[cfg(test)]
mod tests;

/// A claim's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Supported,
    NotSupported,
    Contradicted,
    /// No test could be made (too few runs, no curves): the note says
    /// why.
    NotTestable,
    /// A side has no final runs because every configuration its tuning
    /// tried failed: the method did not train in its search space.
    NoConfiguration,
}

impl Outcome {
    /// The verdict of an exact test: `p` is the claim's one-sided p-value,
    /// `against` the opposite claim's.
    fn of_exact_test(p: f64, against: f64, level: f64) -> Self {
        if stats::below(p, level) {
            Outcome::Supported
        } else if stats::below(against, level) {
            Outcome::Contradicted
        } else {
            Outcome::NotSupported
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Outcome::Supported => "supported",
            Outcome::NotSupported => "not supported",
            Outcome::Contradicted => "contradicted",
            Outcome::NotTestable => "not testable",
            Outcome::NoConfiguration => "no working configuration",
        }
    }
}

/// One claim tested.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub claim: String,
    pub source: String,
    /// The test made ("paired t", "Welch t", "exact binomial", "Fisher exact").
    pub test: String,
    pub n_method: usize,
    pub n_baseline: usize,
    /// The method's and the baseline's mean (or divergence rate), scaled.
    pub method_value: Option<f64>,
    pub baseline_value: Option<f64>,
    /// Method minus baseline, and its interval at `1 - level`.
    pub effect: Option<f64>,
    pub ci: Option<(f64, f64)>,
    pub p: Option<f64>,
    /// `p` adjusted by Holm's method over the manifest's claims.
    pub p_holm: Option<f64>,
    /// The rank test beside a t-test, with its two-sided p.
    pub rank: Option<stats::RankTest>,
    /// The exact permutation test's two-sided p beside a t-test (none
    /// where it would take more than 2^20 arrangements).
    pub permutation: Option<f64>,
    /// The verdict over the valid runs alone (health `ok`), beside the
    /// intention-to-treat one (two-sample claims; `None`: not computed).
    pub ok_only: Option<Outcome>,
    /// Whether the verdict changes when one seed's runs are left out
    /// (two-sample claims; `None`: not checked).
    pub fragile: Option<bool>,
    /// The claim's direction on the tuning runs changes with the
    /// configuration of a side (see [`protocol_check`]): the protocol,
    /// not only the method, decides it.
    pub protocol_sensitive: bool,
    pub level: f64,
    pub outcome: Outcome,
    /// What else a reader needs: runs left out, why nothing was tested.
    pub note: String,
}

/// A side's runs: the value of each by seed (its run id without a seed
/// key), what was left out, and the failed runs that were counted.
#[derive(Default)]
struct Side {
    values: stats::Seeded,
    left_out: BTreeMap<String, usize>,
    /// Runs whose method failed, counted, by health.
    failed: BTreeMap<Health, usize>,
    /// Of those, the ones without a finite value, counted at the worst.
    at_worst: Vec<f64>,
    /// Runs counted whose method's premise failed (wrapped past the
    /// modulus), whatever their health.
    wrapped: usize,
}

impl Side {
    fn numbers(&self) -> Vec<f64> {
        self.values.iter().map(|(_, v)| *v).collect()
    }

    fn describe(&self, name: &str) -> Option<String> {
        let mut said = Vec::new();
        if !self.failed.is_empty() {
            let n: usize = self.failed.values().sum();
            let mut line = format!(
                "{name}: {n} of {} runs failed ({}), counted",
                self.values.len(),
                counts_text(&self.failed)
            );
            if let Some(w) = self.at_worst.first() {
                line.push_str(&format!(
                    "; {} without a value at the worst the metric can take ({})",
                    self.at_worst.len(),
                    if w.is_finite() {
                        format!("chance, {}", number(*w))
                    } else {
                        "ranked last".into()
                    }
                ));
            }
            said.push(line);
        }
        if self.wrapped > 0 {
            said.push(format!(
                "{name}: {}",
                premise_text(self.wrapped, self.values.len())
            ));
        }
        if !self.left_out.is_empty() {
            let parts: Vec<String> = self
                .left_out
                .iter()
                .map(|(why, n)| format!("{n} {why}"))
                .collect();
            said.push(format!("{name}: {} left out", parts.join(", ")));
        }
        (!said.is_empty()).then(|| said.join("; "))
    }
}

impl Verdict {
    /// Adds to the note where a supported or contradicted verdict does not
    /// hold up: beyond Holm's adjustment, under the rank test, or without
    /// one seed.
    fn note_robustness(&mut self) {
        if !matches!(self.outcome, Outcome::Supported | Outcome::Contradicted) {
            return;
        }
        let mut weak = Vec::new();
        // an exact test's p is the claim's one-sided p: it speaks for a
        // supported verdict only (a two-sided t p for either)
        let two_sided = self.test.ends_with(" t");
        let holm = self
            .p_holm
            .filter(|_| two_sided || self.outcome == Outcome::Supported);
        if let Some(p) = holm.filter(|p| !stats::below(*p, self.level)) {
            weak.push(format!(
                "not below {} after Holm's adjustment (p = {})",
                short(self.level),
                p_text(Some(p))
            ));
        }
        if let Some(r) = self.rank.filter(|r| !stats::below(r.p, self.level)) {
            weak.push(format!(
                "the {} test does not reject (p = {})",
                r.name,
                p_text(Some(r.p))
            ));
        }
        if self.fragile == Some(true) {
            weak.push("fragile: leaving out one seed changes the verdict".into());
        }
        add_note(&mut self.note, &weak.join("; "));
    }
}

/// The label that pairs a run with another side's: its seed, else its run id.
pub(crate) fn seed_of(r: &RunRecord) -> String {
    r.point
        .get(SEED_KEY)
        .cloned()
        .unwrap_or_else(|| r.run_id.clone())
}

/// Tests every claim on `rows`; `curves(metric)` gives the runs' curves of
/// a metric (for `faster_to`).
/// `tuning` holds the experiment's tuning runs (judged; empty without a
/// search): a side without final runs whose every tuning run failed is
/// decided from them.
pub(crate) fn evaluate(
    specs: &[ClaimSpec],
    table: &TableSpec,
    rows: &[RunRecord],
    tuning: Option<&TuningRecord>,
    curves: &mut dyn FnMut(&str) -> Result<Vec<RunCurve>>,
    smooth: usize,
) -> Result<Vec<Verdict>> {
    let mut out = Vec::new();
    let unworking = tuning.map(TuningRecord::unworking).unwrap_or_default();
    for (i, spec) in specs.iter().enumerate() {
        let claim = Claim::resolve(spec, table)
            .map_err(|(k, m)| anyhow::anyhow!("claims[{i}].{k}: {m}"))?;
        let mut v = test(&claim, rows, &unworking, curves, smooth);
        if let Some(t) = tuning {
            protocol_check(&claim, rows, t, &mut v, (curves, smooth));
        }
        out.push(v);
    }
    let adjusted = stats::holm(&out.iter().map(|v| v.p).collect::<Vec<_>>());
    for (v, p) in out.iter_mut().zip(adjusted) {
        v.p_holm = p;
        v.note_robustness();
    }
    Ok(out)
}

/// One claim's verdict.
fn test(
    c: &Claim<'_>,
    rows: &[RunRecord],
    tuning: &[RunRecord],
    curves: &mut dyn FnMut(&str) -> Result<Vec<RunCurve>>,
    smooth: usize,
) -> Verdict {
    let runs = |by_baseline: bool| -> Vec<&RunRecord> {
        let s = c.selection(by_baseline);
        rows.iter().filter(|r| matches(&r.point, &s)).collect()
    };
    let mut v = Verdict {
        claim: c.text(),
        source: c.spec.source.clone().unwrap_or_default(),
        test: String::new(),
        n_method: 0,
        n_baseline: 0,
        method_value: None,
        baseline_value: None,
        effect: None,
        ci: None,
        p: None,
        p_holm: None,
        rank: None,
        fragile: None,
        permutation: None,
        ok_only: None,
        level: c.spec.level,
        outcome: Outcome::NotTestable,
        note: String::new(),
        protocol_sensitive: false,
    };
    let (mut mine, mut theirs) = (runs(false), runs(true));
    let base = c.baseline.clone().unwrap_or_default();
    let mut from_tuning = untrained_sides(c, tuning, (&mut mine, &mut theirs));
    if mine.is_empty() || (c.baseline.is_some() && theirs.is_empty()) {
        let who = if mine.is_empty() { &c.method } else { &base };
        v.note = format!("no recorded runs of {who} match");
        return v;
    }
    if !from_tuning.is_empty() && !matches!(c.kind, Kind::Diverges { .. }) {
        // what failed to train is no sample of a trained method's metric
        v.outcome = Outcome::NoConfiguration;
        v.note = from_tuning.join("; ");
        return v;
    }
    match &c.kind {
        Kind::Better | Kind::Within(_) => difference(c, &mut v, &mine, &theirs),
        Kind::Diverges { rate } => divergence(c, &mut v, &mine, &theirs, *rate),
        Kind::FasterTo { metric, target, by } => {
            let reach = TimeTo {
                metric,
                target: *target,
                by,
                smooth,
            };
            time_to(c, &mut v, &mine, &theirs, &reach, curves);
        }
    }
    if !from_tuning.is_empty() {
        from_tuning.push("decided from the tuning runs".into());
        let said = std::mem::take(&mut v.note);
        v.note = from_tuning.join("; ");
        add_note(&mut v.note, &said);
    }
    v
}

/// The metric each comparison claim of `specs` tests (`better`, `within`:
/// its `metric`; `faster_to`: the curve it times), once each, in order:
/// what a report holds against the tuning's metric.
pub(crate) fn compared_metrics(specs: &[ClaimSpec], table: &TableSpec) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for spec in specs {
        let Ok(c) = Claim::resolve(spec, table) else {
            continue;
        };
        let m = match &c.kind {
            Kind::Better | Kind::Within(_) => c.metric.clone(),
            Kind::FasterTo { metric, .. } => Some(metric.clone()),
            Kind::Diverges { .. } => None,
        };
        if let Some(m) = m.filter(|m| !out.contains(m)) {
            out.push(m);
        }
    }
    out
}
