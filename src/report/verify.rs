//! Whether a rerun reproduces the record: its table's cells against the
//! record's, each by a two-sample interval and an equivalence test, and
//! its claims' verdicts against the record's (`repro verify`).
//!
//! A cell is `reproduced` when two one-sided t-tests at 0.05 put the
//! difference inside the margin (its 90% interval lies within it); it
//! `differs` when it is not equivalent and the 95% interval of the
//! difference excludes zero; it is `inconclusive` otherwise. The
//! difference is paired by seed where both sides ran the same seeds (a
//! rerun of the same build and machine then differs by exactly zero),
//! Welch's otherwise, as the claims' tests are. A cell the rerun did not
//! run, or the record does not hold, is named and not judged. The
//! values are counted by intention to treat, as the table and the claims
//! count them (`RunRecord::counted`).

use std::path::Path;

use anyhow::Result;

use crate::records::frames::RunsFrame;
use crate::records::health::Counted;
use crate::report::claims::Outcome;
use crate::report::recorded::Recorded;
use crate::report::stats::{self, Difference};
use crate::report::table::{self, CellStats, Sample};

/// The level of the tests.
const LEVEL: f64 = 0.05;

/// What a cell's comparison says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Word {
    /// Equivalent within the margin.
    Reproduced,
    /// Not equivalent, and different from zero.
    Differs,
    /// Neither shown.
    Inconclusive,
    /// A side has fewer than two counted runs: no spread to test by.
    TooFew,
    /// The record has the cell; the rerun did not run it.
    NotRun,
    /// The rerun has the cell; the record does not.
    NotRecorded,
}

impl Word {
    pub(crate) fn text(self) -> &'static str {
        match self {
            Word::Reproduced => "reproduced",
            Word::Differs => "differs",
            Word::Inconclusive => "inconclusive",
            Word::TooFew => "too few runs",
            Word::NotRun => "not run",
            Word::NotRecorded => "not recorded",
        }
    }
}

/// One cell of the table, in the rerun and in the record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CellCheck {
    /// "method=moniqua, bits=1".
    pub cell: String,
    pub yours: Option<Sample>,
    pub record: Option<Sample>,
    /// Yours minus the record's (paired by seed, else Welch).
    pub difference: Option<Difference>,
    pub margin: f64,
    /// The p-value of the two one-sided tests of equivalence.
    pub p_equivalent: Option<f64>,
    pub word: Word,
}

/// One claim's verdict in the rerun and in the record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClaimCheck {
    pub claim: String,
    pub yours: Option<Outcome>,
    pub record: Option<Outcome>,
}

impl ClaimCheck {
    /// Both sides tested it and their verdicts differ. A claim the rerun
    /// could not test (too few runs) has not flipped: it is untested.
    pub(crate) fn flipped(&self) -> bool {
        matches!((self.yours, self.record), (Some(a), Some(b)) if a != b) && !self.untested()
    }

    /// The record tested it and the rerun did not (not run, or not
    /// testable on its runs).
    pub(crate) fn untested(&self) -> bool {
        match (self.yours, self.record) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(y), Some(r)) => y == Outcome::NotTestable && r != Outcome::NotTestable,
        }
    }
}

/// One experiment's rerun against its record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Check {
    pub experiment: String,
    pub scale: String,
    pub yours: String,
    pub record: String,
    /// The cells' metric and how it is shown ("avg_test_accuracy (×100)").
    pub value: String,
    /// How the cells' margins were set, in words.
    pub margin: String,
    pub cells: Vec<CellCheck>,
    pub claims: Vec<ClaimCheck>,
}

/// A cell's label: "method=moniqua, bits=1".
fn label(spec: &crate::experiment::manifest::TableSpec, row: &[String], col: &str) -> String {
    let mut parts: Vec<String> = spec
        .rows
        .iter()
        .zip(row)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if let Some(c) = &spec.cols {
        parts.push(format!("{c}={col}"));
    }
    parts.join(", ")
}

/// One side's cells: each cell's statistics as the table shows them, and
/// its runs' values by seed, as the table scales them.
fn cells_of(r: &Recorded) -> Result<Vec<(String, CellStats, stats::Seeded)>> {
    let spec = &r.manifest.table;
    let (factor, higher) = (
        table::factor(spec.scale, &spec.value),
        table::higher_is_better(&spec.value),
    );
    let cells = table::cell_stats(spec, &RunsFrame::new(&r.rows)?)?;
    Ok(cells
        .into_iter()
        .map(|((rk, ck), s)| {
            let values = r
                .rows
                .iter()
                .filter(|run| {
                    let key = |k: &str| run.point.get(k).map_or("", String::as_str);
                    spec.rows.iter().zip(&rk).all(|(k, v)| key(k) == v)
                        && spec.cols.as_ref().is_none_or(|c| key(c) == ck)
                })
                .filter_map(|run| match run.counted(&spec.value, higher) {
                    Counted::Value(x) | Counted::Worst(x) => {
                        Some((crate::report::claims::seed_of(run), x * factor))
                    }
                    Counted::LeftOut(_) => None,
                })
                .collect();
            (label(spec, &rk, &ck), s, values)
        })
        .collect())
}

/// The margin of a cell whose record is `record` (none for a cell only
/// the rerun holds): the manifest's, else one point of an accuracy in the
/// table's units, else 5% of the record's mean; and with `verify.spread`
/// at least that multiple of the record's standard deviation across seeds.
fn margin(r: &Recorded, record: Option<Sample>) -> f64 {
    let base = match Base::of(r) {
        Base::Manifest(m) => m,
        Base::OnePoint(factor) => 0.01 * factor,
        Base::ShareOfMean => {
            let mean = record.and_then(|s| s.mean);
            0.05 * mean.filter(|m| m.is_finite()).unwrap_or(0.0).abs()
        }
    };
    widened(base, r.manifest.verify.spread, record)
}

/// Where a cell's margin starts: the one rule [`margin`] computes and
/// [`margin_rule`] says.
enum Base {
    /// The manifest's `verify.margin`.
    Manifest(f64),
    /// One point of an accuracy, in the table's units (its factor).
    OnePoint(f64),
    /// 5% of the record's mean.
    ShareOfMean,
}

impl Base {
    fn of(r: &Recorded) -> Base {
        let spec = &r.manifest.table;
        if let Some(m) = r.manifest.verify.margin {
            Base::Manifest(m)
        } else if crate::records::metrics::is_accuracy(&spec.value) {
            Base::OnePoint(table::factor(spec.scale, &spec.value))
        } else {
            Base::ShareOfMean
        }
    }
}

/// `base`, or `spread` times the record's standard deviation across seeds
/// where that is wider (and finite).
fn widened(base: f64, spread: Option<f64>, record: Option<Sample>) -> f64 {
    spread
        .zip(record.and_then(|s| s.sd))
        .map(|(k, sd)| k * sd)
        .filter(|m| m.is_finite())
        .map_or(base, |m| m.max(base))
}

/// How the margins were set, in words, for the report's header.
fn margin_rule(r: &Recorded) -> String {
    let base = match Base::of(r) {
        Base::Manifest(m) => format!("±{} (the manifest's `verify.margin`)", table::number(m)),
        Base::OnePoint(_) => "±1 point of accuracy".to_string(),
        Base::ShareOfMean => "±5% of the record's mean".to_string(),
    };
    match r.manifest.verify.spread {
        Some(k) => format!(
            "{base}, or {} times the record's standard deviation across seeds where that is \
             wider (`verify.spread`: a cell whose seeds spread over several points is not held to \
             less)",
            table::number(k)
        ),
        None => base,
    }
}

/// One side of a cell: its statistics as the table shows them, and its
/// values by seed.
type Side<'a> = Option<(Sample, &'a [(String, f64)])>;

/// Judges one cell: yours against the record's.
fn judge(cell: String, yours: Side<'_>, record: Side<'_>, margin: f64) -> CellCheck {
    let mut c = CellCheck {
        cell,
        yours: yours.map(|s| s.0),
        record: record.map(|s| s.0),
        difference: None,
        margin,
        p_equivalent: None,
        word: Word::Inconclusive,
    };
    let (Some((_, a)), Some((_, b))) = (yours, record) else {
        c.word = if yours.is_none() {
            Word::NotRun
        } else {
            Word::NotRecorded
        };
        return c;
    };
    if a.len() < 2 || b.len() < 2 {
        // one run a side has no spread to test by, even digit for digit
        c.word = Word::TooFew;
        return c;
    }
    let Some(d) = stats::difference(a, b) else {
        // a value that is not finite (an unbounded failure): only the
        // same runs, value for value, reproduce it
        if a == b {
            c.word = Word::Reproduced;
        }
        return c;
    };
    let p = d.p_equivalent(margin);
    c.word = if stats::below(p, LEVEL) {
        Word::Reproduced
    } else if stats::below(d.p_two_sided(), LEVEL) {
        Word::Differs
    } else {
        Word::Inconclusive
    };
    c.difference = Some(d);
    c.p_equivalent = Some(p);
    c
}

/// Checks the rerun `yours` against the record `record` (one experiment,
/// the same scale): every cell either holds, and every claim either
/// tests. `verdicts` gives a side's claims' verdicts.
pub(crate) fn check(
    yours: &Recorded,
    record: &Recorded,
    verdicts: &dyn Fn(&Recorded) -> Result<Vec<crate::report::claims::Verdict>>,
) -> Result<Check> {
    let mine = cells_of(yours)?;
    let theirs = cells_of(record)?;
    let mut cells = Vec::new();
    for (label, s, v) in &theirs {
        let y = mine
            .iter()
            .find(|(l, ..)| l == label)
            .map(|(_, c, v)| (c.counted, v.as_slice()));
        cells.push(judge(
            label.clone(),
            y,
            Some((s.counted, v)),
            margin(record, Some(s.counted)),
        ));
    }
    for (label, s, v) in mine
        .iter()
        .filter(|(l, ..)| !theirs.iter().any(|(t, ..)| t == l))
    {
        cells.push(judge(
            label.clone(),
            Some((s.counted, v)),
            None,
            margin(yours, None),
        ));
    }
    let (vy, vr) = (verdicts(yours)?, verdicts(record)?);
    let mut claims: Vec<ClaimCheck> = vr
        .iter()
        .map(|v| ClaimCheck {
            claim: v.claim.clone(),
            yours: vy.iter().find(|y| y.claim == v.claim).map(|y| y.outcome),
            record: Some(v.outcome),
        })
        .collect();
    claims.extend(
        vy.iter()
            .filter(|y| !vr.iter().any(|v| v.claim == y.claim))
            .map(|y| ClaimCheck {
                claim: y.claim.clone(),
                yours: Some(y.outcome),
                record: None,
            }),
    );
    let spec = &record.manifest.table;
    let factor = table::factor(spec.scale, &spec.value);
    Ok(Check {
        experiment: record.manifest.name.clone(),
        scale: record.scale.clone(),
        yours: yours.out.display().to_string(),
        record: record.out.display().to_string(),
        value: if factor == 1.0 {
            spec.value.clone()
        } else {
            format!("{} (×{factor})", spec.value)
        },
        margin: margin_rule(record),
        cells,
        claims,
    })
}

impl Check {
    /// Cells by word.
    pub(crate) fn count(&self, word: Word) -> usize {
        self.cells.iter().filter(|c| c.word == word).count()
    }

    /// Claims both sides tested, and how many of them flipped.
    pub(crate) fn verdicts(&self) -> (usize, usize) {
        let both = self
            .claims
            .iter()
            .filter(|c| c.yours.is_some() && c.record.is_some());
        let n = both.clone().count();
        (n, both.filter(|c| c.flipped()).count())
    }

    /// What the evidence says: [`Answer`].
    pub(crate) fn answer(&self) -> Answer {
        let recorded = self.cells.iter().filter(|c| c.record.is_some()).count();
        let compared = self
            .cells
            .iter()
            .filter(|c| c.record.is_some() && c.yours.is_some())
            .count();
        if compared == 0 {
            // no cell to stand on: a claim's verdict on no runs says nothing
            return Answer::NotRun;
        }
        if self.count(Word::Differs) > 0 || self.verdicts().1 > 0 {
            return Answer::Differs;
        }
        let claims_tested = !self.claims.iter().any(ClaimCheck::untested);
        if self.count(Word::Reproduced) == recorded && claims_tested {
            Answer::Reproduces
        } else {
            Answer::CouldNotTell
        }
    }

    /// The Markdown report: the cells, the claims, then the summary line.
    pub(crate) fn markdown(&self) -> String {
        let md = crate::util::text::markdown_cell;
        let mut s = format!(
            "# {} at scale `{}`: {} against the record {}\n\n",
            md(&self.experiment),
            md(&self.scale),
            md(&self.yours),
            md(&self.record)
        );
        s.push_str(&format!(
            "Cells: `{}` by intention to treat, as the table shows them (mean ± 95% t half-width, n). \
             Difference: yours minus the record's, its 95% t interval, paired by seed where both \
             ran the same seeds (Welch otherwise). *reproduced*: two one-sided t-tests at 0.05 put the difference inside ± the margin (its 90% interval lies \
             within it); *differs*: not equivalent, and the 95% interval excludes 0; \
             *inconclusive*: neither; *too few runs*: under two runs a side, no spread to test \
             by. The margin: {}.\n\n",
            self.value, self.margin
        ));
        s.push_str(
            "| cell | yours | record | difference [95% CI] | margin | p (equivalent) | verdict |\n",
        );
        s.push_str("|---|---|---|---|---|---|---|\n");
        for c in &self.cells {
            let side = |x: &Option<Sample>| x.map_or_else(|| "-".into(), |s| s.text());
            let diff = c.difference.map_or_else(
                || "-".into(),
                |d| {
                    let (lo, hi) = d.interval(LEVEL);
                    format!(
                        "{} [{}, {}]",
                        table::number(d.effect),
                        table::number(lo),
                        table::number(hi)
                    )
                },
            );
            s.push_str(&format!(
                "| {} | {} | {} | {diff} | ±{} | {} | **{}** |\n",
                md(&c.cell),
                side(&c.yours),
                side(&c.record),
                table::number(c.margin),
                c.p_equivalent.map_or("-".into(), |p| format!("{p:.4}")),
                c.word.text()
            ));
        }
        if !self.claims.is_empty() {
            s.push_str("\n| claim | yours | record | |\n|---|---|---|---|\n");
            for c in &self.claims {
                let w = |o: Option<Outcome>| o.map_or("-", Outcome::word);
                let what = match (c.yours, c.record) {
                    (None, _) => "not run",
                    (_, None) => "not recorded",
                    _ if c.untested() => "not tested",
                    _ if c.flipped() => "**flipped**",
                    _ => "same",
                };
                s.push_str(&format!(
                    "| {} | {} | {} | {what} |\n",
                    md(&c.claim),
                    w(c.yours),
                    w(c.record)
                ));
            }
        }
        s
    }
}

/// What a rerun's evidence says of the record, over every experiment
/// checked; each has its own exit code (`cmd::mod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Every cell of the record reproduced (equivalent within its
    /// margin) and every claim the record tests has the same verdict.
    Reproduces,
    /// A cell differs or a verdict flipped.
    Differs,
    /// Nothing differs, but not every cell reproduced: inconclusive, too
    /// few runs, or not run; or a claim the rerun did not test.
    CouldNotTell,
    /// The rerun holds none of the record's cells.
    NotRun,
}

impl Answer {
    /// Over several experiments: the worst of their answers.
    pub(crate) fn of(checks: &[Check]) -> Answer {
        let answers: Vec<Answer> = checks.iter().map(Check::answer).collect();
        [Answer::Differs, Answer::NotRun, Answer::CouldNotTell]
            .into_iter()
            .find(|a| answers.contains(a))
            .unwrap_or(if answers.is_empty() {
                Answer::NotRun
            } else {
                Answer::Reproduces
            })
    }

    fn head(self) -> &'static str {
        match self {
            Answer::Reproduces => "your run reproduces the record",
            Answer::Differs => "your run does NOT reproduce the record",
            Answer::CouldNotTell => "could not tell whether your run reproduces the record",
            Answer::NotRun => "nothing compared: your run holds none of the record's cells",
        }
    }
}

/// The one-line answer over every experiment checked: "your run
/// reproduces the record: 7 of 7 verdicts the same, 7 of 7 cells
/// equivalent, 0 inconclusive, 0 differ".
pub(crate) fn summary(checks: &[Check]) -> String {
    let sum = |f: &dyn Fn(&Check) -> usize| checks.iter().map(f).sum::<usize>();
    let cells = sum(&|c| {
        c.cells
            .iter()
            .filter(|x| x.yours.is_some() && x.record.is_some())
            .count()
    });
    let verdicts = sum(&|c| c.verdicts().0);
    let flipped = sum(&|c| c.verdicts().1);
    let (same, differ, unsure) = (
        sum(&|c| c.count(Word::Reproduced)),
        sum(&|c| c.count(Word::Differs)),
        sum(&|c| c.count(Word::Inconclusive)),
    );
    let not_run = sum(&|c| c.count(Word::NotRun));
    let too_few = sum(&|c| c.count(Word::TooFew));
    let untested = sum(&|c| c.claims.iter().filter(|x| x.untested()).count());
    let mut s = format!(
        "{}: {} of {verdicts} verdicts the same, {same} of {cells} cells equivalent, \
         {unsure} inconclusive, {differ} differ",
        Answer::of(checks).head(),
        verdicts - flipped
    );
    if too_few > 0 {
        s.push_str(&format!(
            ", {too_few} with too few runs to test (fewer than 2 a side)"
        ));
    }
    if untested > 0 {
        s.push_str(&format!(", {untested} claims of the record not tested"));
    }
    if flipped > 0 {
        s.push_str(&format!(", {flipped} verdicts flipped"));
    }
    if not_run > 0 {
        s.push_str(&format!(" ({not_run} cells of the record not run)"));
    }
    s
}

/// Whether `dir` holds results (a runs.csv).
pub(crate) fn has_results(dir: &Path) -> bool {
    dir.join(crate::records::results_dir::Entry::Runs.name())
        .is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded(values: &[f64]) -> Vec<(String, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), *v))
            .collect()
    }

    /// A cell of `values` (its statistics as the table computes them).
    fn cell(values: &[f64]) -> (Sample, Vec<(String, f64)>) {
        let (mean, sd, n) = stats::mean_sd(values);
        (
            Sample {
                n,
                mean: Some(mean),
                sd: Some(sd),
            },
            seeded(values),
        )
    }

    fn word(a: &[f64], b: &[f64]) -> Word {
        let (a, b) = (cell(a), cell(b));
        judge("c".into(), Some((a.0, &a.1)), Some((b.0, &b.1)), 1.0).word
    }

    #[test]
    fn a_cell_is_judged_by_equivalence_then_by_difference() {
        // the same runs, however spread: reproduced (paired by seed)
        assert_eq!(
            word(&[10.0, 50.0, 90.0], &[10.0, 50.0, 90.0]),
            Word::Reproduced
        );
        // close, seed by seed: reproduced
        assert_eq!(
            word(&[82.1, 81.9, 82.3, 82.0], &[82.0, 82.0, 82.1, 82.1]),
            Word::Reproduced
        );
        // five points off, seed by seed: differs
        assert_eq!(
            word(&[77.0, 77.5, 76.8, 77.2], &[82.0, 82.4, 81.9, 82.1]),
            Word::Differs
        );
        // other seeds (Welch), wide: inconclusive, though the means are near
        let (a, b) = (cell(&[60.0, 80.0, 100.0]), cell(&[62.0, 82.0, 98.0]));
        let b = (
            b.0,
            b.1.into_iter()
                .map(|(s, v)| (format!("other {s}"), v))
                .collect::<Vec<_>>(),
        );
        assert_eq!(
            judge("c".into(), Some((a.0, &a.1)), Some((b.0, &b.1)), 1.0).word,
            Word::Inconclusive
        );
        // one run a side: too few to test, even digit for digit
        assert_eq!(word(&[82.0], &[82.0]), Word::TooFew);
        assert_eq!(word(&[82.1], &[82.0]), Word::TooFew);
        assert_eq!(word(&[82.1, 80.0], &[82.0]), Word::TooFew);
        // a side without the cell
        let x = cell(&[1.0, 2.0]);
        assert_eq!(
            judge("c".into(), None, Some((x.0, &x.1)), 1.0).word,
            Word::NotRun
        );
        assert_eq!(
            judge("c".into(), Some((x.0, &x.1)), None, 1.0).word,
            Word::NotRecorded
        );
    }

    /// `verify.spread` widens a cell's margin to that multiple of the
    /// record's seed-to-seed deviation, never narrows it, and a cell
    /// without a spread keeps the base margin.
    #[test]
    fn the_spread_widens_the_margin_and_never_narrows_it() {
        let sample = |sd: Option<f64>| {
            Some(Sample {
                n: 8,
                mean: Some(80.0),
                sd,
            })
        };
        assert_eq!(widened(1.0, Some(0.5), sample(Some(2.8))), 1.4);
        assert_eq!(widened(1.0, Some(0.5), sample(Some(1.0))), 1.0);
        assert_eq!(widened(1.0, None, sample(Some(2.8))), 1.0);
        assert_eq!(widened(1.0, Some(0.5), sample(None)), 1.0);
        assert_eq!(widened(1.0, Some(0.5), None), 1.0);
        assert_eq!(widened(1.0, Some(0.5), sample(Some(f64::INFINITY))), 1.0);
    }

    /// The answer follows the evidence: "reproduces" only when every
    /// cell of the record reproduced and every claim was tested the same.
    #[test]
    fn the_answer_is_what_the_evidence_says() {
        let x = cell(&[1.0, 2.0]);
        let at = |word: Word, yours: bool| CellCheck {
            cell: "c".into(),
            yours: yours.then_some(x.0),
            record: Some(x.0),
            difference: None,
            margin: 1.0,
            p_equivalent: None,
            word,
        };
        let claim = |yours| ClaimCheck {
            claim: "k".into(),
            yours,
            record: Some(Outcome::Supported),
        };
        let of = |cells: Vec<CellCheck>, claims: Vec<ClaimCheck>| {
            Answer::of(&[Check {
                experiment: "e".into(),
                scale: "cpu".into(),
                yours: "y".into(),
                record: "r".into(),
                value: "v".into(),
                margin: "m".into(),
                cells,
                claims,
            }])
        };
        let same = || vec![claim(Some(Outcome::Supported))];
        assert_eq!(
            of(vec![at(Word::Reproduced, true)], same()),
            Answer::Reproduces
        );
        // a header-only runs.csv: none of the record's cells, nothing passes
        assert_eq!(
            of(vec![at(Word::NotRun, false)], vec![claim(None)]),
            Answer::NotRun
        );
        for unsure in [Word::Inconclusive, Word::TooFew] {
            assert_eq!(
                of(vec![at(Word::Reproduced, true), at(unsure, true)], same()),
                Answer::CouldNotTell
            );
        }
        assert_eq!(
            of(
                vec![at(Word::Reproduced, true), at(Word::NotRun, false)],
                same()
            ),
            Answer::CouldNotTell
        );
        // a claim of the record the rerun did not test
        assert_eq!(
            of(vec![at(Word::Reproduced, true)], vec![claim(None)]),
            Answer::CouldNotTell
        );
        assert_eq!(
            of(
                vec![at(Word::Inconclusive, true), at(Word::Differs, true)],
                same()
            ),
            Answer::Differs
        );
        assert_eq!(
            of(
                vec![at(Word::Reproduced, true)],
                vec![claim(Some(Outcome::NotSupported))]
            ),
            Answer::Differs
        );
        // a cell only the rerun has does not stand in the way
        let mut extra = at(Word::NotRecorded, true);
        extra.record = None;
        assert_eq!(
            of(vec![at(Word::Reproduced, true), extra], same()),
            Answer::Reproduces
        );
    }

    #[test]
    fn a_flip_needs_both_verdicts() {
        let c = |y, r| ClaimCheck {
            claim: "x".into(),
            yours: y,
            record: r,
        };
        assert!(c(Some(Outcome::Supported), Some(Outcome::NotSupported)).flipped());
        assert!(!c(Some(Outcome::Supported), Some(Outcome::Supported)).flipped());
        assert!(!c(None, Some(Outcome::Supported)).flipped());
    }
}
