//! Whether a run is a valid result: its [`Health`], judged by one rule
//! ([`judge`]) from the numbers its record holds, with thresholds a
//! manifest may set ([`HealthSpec`]). `status` says what happened to the
//! process; `health` says whether the run is an instance of the
//! experiment at all. A table, a claim or a tuning choice stands only on
//! `ok` runs.
//!
//! The rule reads the record's cells, not the logs, so a committed
//! runs.csv is judged again without rerunning (with the numbers it has).

use std::collections::BTreeMap;

use crate::experiment::manifest::HealthSpec;
use crate::experiment::plan::Params;
use crate::launch::summary::RunStatus;
use crate::records::metrics::Cell;

/// Whether a run is a valid result, as runs.csv's `health` column says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Health {
    Ok,
    /// A value became non-finite: the run's status says diverged too (the
    /// same word for the same thing).
    Diverged,
    /// The loss stayed finite but grew past the rule's limit (a finite
    /// blow-up; its status is completed).
    Exploded,
    /// The model learned nothing: accuracy at chance, or its norm gone.
    Collapsed,
    /// No gossip: a run of workers that never (or too rarely) exchanged.
    Silent,
    /// Interrupted, timed out, failed or refused: no result.
    Unfinished,
}

impl Health {
    pub(crate) const ALL: [Health; 6] = [
        Self::Ok,
        Self::Diverged,
        Self::Exploded,
        Self::Collapsed,
        Self::Silent,
        Self::Unfinished,
    ];

    /// The word runs.csv holds.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Diverged => "diverged",
            Self::Exploded => "exploded",
            Self::Collapsed => "collapsed",
            Self::Silent => "silent",
            Self::Unfinished => "unfinished",
        }
    }

    /// The health `text` spells, if any.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.text() == text)
    }

    /// Which of the two kinds of "not ok" this is (see [`Kind`]).
    pub(crate) fn kind(self) -> Kind {
        match self {
            Self::Ok => Kind::Ok,
            Self::Diverged | Self::Exploded | Self::Collapsed => Kind::MethodFailed,
            Self::Silent | Self::Unfinished => Kind::NotTested,
        }
    }

    /// What a status implies for a record never judged: completed is
    /// taken as ok, diverged as diverged, the rest as unfinished.
    pub(crate) fn of_status(status: RunStatus) -> Self {
        match status {
            RunStatus::Completed => Self::Ok,
            RunStatus::Diverged => Self::Diverged,
            RunStatus::Failed | RunStatus::NotRun | RunStatus::Refused => Self::Unfinished,
        }
    }
}

/// The two kinds of "not ok", kept apart everywhere (runs.csv's
/// `health_kind`). A run whose method failed is an outcome of the method
/// on that seed and counts against it; a run that did not test the
/// method is no evidence either way and is left out, named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Kind {
    Ok,
    /// The method failed: diverged, exploded or collapsed.
    MethodFailed,
    /// The experiment did not test the method: silent or unfinished.
    NotTested,
}

impl Kind {
    /// The word runs.csv's `health_kind` holds.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::MethodFailed => "method failed",
            Self::NotTested => "not tested",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

/// What one run adds to a comparison of a metric, by intention to treat:
/// every run that tested the method counts, a failed one with what it
/// achieved. The one rule for table cells, claims and tuning scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Counted {
    /// Its recorded value: a valid run's, or a failed run's where finite.
    Value(f64),
    /// A failed run without a finite value: the worst value the metric
    /// can take for it (chance accuracy), or an infinity where the metric
    /// has no bound (it then ranks last, and no mean is defined).
    Worst(f64),
    /// Not counted: the run did not test the method, or a valid run has
    /// no value of the metric; why, in a few words.
    LeftOut(&'static str),
}

impl Counted {
    /// The number counted, if any.
    pub(crate) fn number(self) -> Option<f64> {
        match self {
            Self::Value(x) | Self::Worst(x) => Some(x),
            Self::LeftOut(_) => None,
        }
    }
}

/// The worst value `metric` can take for a run whose data has `chance`
/// accuracy (1 / classes): chance for an accuracy, else an infinity on
/// the bad side (`higher`: a larger value is better).
pub(crate) fn worst(metric: &str, chance: Option<f64>, higher: bool) -> f64 {
    match chance.filter(|_| crate::records::metrics::is_accuracy(metric)) {
        Some(c) => c,
        None if higher => f64::NEG_INFINITY,
        None => f64::INFINITY,
    }
}

/// What a run of `health` with `value` of `metric` counts as (see
/// [`Counted`]); `chance` is its data's chance accuracy.
pub(crate) fn counted(
    health: Option<Health>,
    value: Option<f64>,
    metric: &str,
    chance: Option<f64>,
    higher: bool,
) -> Counted {
    let value = value.filter(|v| v.is_finite());
    match health.map(Health::kind) {
        Some(Kind::Ok) => value.map_or(Counted::LeftOut("without a value"), Counted::Value),
        Some(Kind::MethodFailed) => value.map_or_else(
            || Counted::Worst(worst(metric, chance, higher)),
            Counted::Value,
        ),
        Some(Kind::NotTested) => Counted::LeftOut(match health {
            Some(Health::Silent) => "silent",
            _ => "unfinished",
        }),
        None => Counted::LeftOut("without a status"),
    }
}

/// Runs counted by health, valid ones first, words with no run left out:
/// "2 ok, 1 collapsed". The one spelling of a count by health (table
/// cells, tuning.md, a report's setting).
pub(crate) fn counts_text(counts: &BTreeMap<Health, usize>) -> String {
    counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(h, n)| format!("{n} {h}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Display for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

/// A run's health and why, in one sentence ("" when ok).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub health: Health,
    pub why: String,
}

impl Verdict {
    fn of(health: Health, why: String) -> Self {
        Verdict { health, why }
    }
}

/// What the rule needs to know of the run beyond its cells.
struct Run {
    /// A simulator run: its objective is convex.
    convex: bool,
    workers: usize,
    /// Classes of its data (trainer runs).
    classes: Option<u32>,
    /// Iterations between its algorithm's exchanges.
    period: u64,
}

impl Run {
    fn of(params: &Params) -> Run {
        match params {
            Params::Sim(p) => Run {
                convex: true,
                workers: p.workers,
                classes: None,
                period: period(&p.algorithm, p.knobs.period),
            },
            Params::Train(c) => Run {
                convex: false,
                workers: c.workers,
                classes: repro_runlog::classes(&c.dataset),
                period: period(&c.algorithm, c.knobs.period),
            },
        }
    }
}

/// The chance accuracy of a run's data (1 / classes), if it has classes.
pub(crate) fn chance(params: &Params) -> Option<f64> {
    Run::of(params).classes.map(|c| 1.0 / f64::from(c))
}

/// Iterations between exchanges: `period` for the periodic algorithms,
/// else every iteration.
fn period(algorithm: &str, period: u64) -> u64 {
    match algorithm {
        "psgd" | "pqasgd" => period.max(1),
        _ => 1,
    }
}

/// The one rule: a run's health from its record's `cells` (see
/// [`Health`]). The first that applies wins, in this order: unfinished,
/// diverged, exploded, collapsed, silent; else ok. A number the record
/// lacks is not judged. Health names outcomes only: whether Moniqua's
/// premise held is [`premise`]'s, beside it.
pub(crate) fn judge(params: &Params, cells: &BTreeMap<String, Cell>, spec: &HealthSpec) -> Verdict {
    let run = Run::of(params);
    let number = |k: &str| cells.get(k).and_then(Cell::number);
    let status = RunStatus::parse(cells.get("status").map_or("", Cell::text));
    match status {
        Some(s) if s.finished() => {}
        s => {
            let what = s.map_or("no status", RunStatus::text);
            return Verdict::of(
                Health::Unfinished,
                format!("the run did not finish ({what})"),
            );
        }
    }
    if status == Some(RunStatus::Diverged) {
        return Verdict::of(Health::Diverged, "a value became non-finite".into());
    }
    if let Some(v) = loss_growth(&run, number("first_loss"), last_loss(cells), spec) {
        return v;
    }
    if let Some(v) = collapse(&run, cells, spec) {
        return v;
    }
    if let Some(v) = silence(&run, cells, spec) {
        return v;
    }
    Verdict::of(Health::Ok, String::new())
}

/// Whether Moniqua's premise held in a run: that its workers' models
/// stayed within the modulus of each other, so a recovery rarely wraps
/// (Lemma 2). runs.csv's `premise`. A premise that failed is not an
/// outcome: a run that wrapped may still train, and its outcome is its
/// health and its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Premise {
    /// At most `health.max_wrap_rate` of the recovered coordinates wrapped.
    Held,
    /// More than that share wrapped around the modulus.
    Wrapped,
}

impl Premise {
    /// The word runs.csv's `premise` holds.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::Held => "held",
            Self::Wrapped => "wrapped",
        }
    }

    /// The premise `text` spells, if any.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        [Self::Held, Self::Wrapped]
            .into_iter()
            .find(|p| p.text() == text)
    }
}

/// Whether the premise of a run's method held, and why not (see
/// [`Premise`]); `None` for a run that measures no wrapping (every
/// method but Moniqua, or a record without `wrap_rate`).
pub(crate) fn premise(
    cells: &BTreeMap<String, Cell>,
    spec: &HealthSpec,
) -> Option<(Premise, String)> {
    let w = cells.get("wrap_rate").and_then(Cell::number)?;
    Some(if w > spec.max_wrap_rate {
        (
            Premise::Wrapped,
            format!(
                "{} of the coordinates recovered wrapped around the modulus (more than {})",
                percent(w),
                percent(spec.max_wrap_rate)
            ),
        )
    } else {
        (Premise::Held, String::new())
    })
}

/// Runs whose premise failed, as a table cell or a note adds it: "2 of 8
/// wrapped past the modulus"; empty when none did.
pub(crate) fn premise_text(wrapped: usize, runs: usize) -> String {
    if wrapped == 0 {
        return String::new();
    }
    format!("premise: {wrapped} of {runs} wrapped past the modulus")
}

/// The loss the run ended with: `last_loss`, else (a record written before
/// it) the train loss or the simulator's `final_loss`.
fn last_loss(cells: &BTreeMap<String, Cell>) -> Option<f64> {
    ["last_loss", "train_loss", "final_loss"]
        .iter()
        .find_map(|k| cells.get(*k).and_then(Cell::number))
}

/// Exploded: a finite loss that grew past the rule's limit.
fn loss_growth(
    run: &Run,
    first: Option<f64>,
    last: Option<f64>,
    spec: &HealthSpec,
) -> Option<Verdict> {
    let (first, last) = (first?, last?);
    if run.convex && last > first {
        return Some(Verdict::of(
            Health::Exploded,
            format!("f(x_bar) ended at {last:.4e}, above f(x_bar_0) = {first:.4e}"),
        ));
    }
    let limit = spec.loss_growth * first;
    (!run.convex && first > 0.0 && last > limit).then(|| {
        Verdict::of(
            Health::Exploded,
            format!(
                "the train loss grew from {first:.4} to {last:.4e}, more than {}x",
                spec.loss_growth
            ),
        )
    })
}

/// Collapsed: an accuracy at chance, or a model with no norm left.
fn collapse(run: &Run, cells: &BTreeMap<String, Cell>, spec: &HealthSpec) -> Option<Verdict> {
    let number = |k: &str| cells.get(k).and_then(Cell::number);
    if let Some(classes) = run.classes {
        let chance = 1.0 / f64::from(classes);
        // the model the run reports: the average, else the local ones
        let judged = ["avg_test_accuracy", "test_accuracy", "val_accuracy"]
            .iter()
            .find_map(|k| number(k).map(|a| (*k, a)));
        if let Some((which, a)) = judged.filter(|(_, a)| *a <= chance + spec.chance_margin) {
            return Some(Verdict::of(
                Health::Collapsed,
                format!(
                    "{which} {} is within {} of chance ({} for {classes} classes)",
                    percent(a),
                    percent(spec.chance_margin),
                    percent(chance)
                ),
            ));
        }
    }
    number("model_norm")
        .filter(|&n| n < spec.min_model_norm)
        .map(|n| {
            Verdict::of(
                Health::Collapsed,
                format!(
                    "the averaged model's norm is {n:.3e}, below {:e}",
                    spec.min_model_norm
                ),
            )
        })
}

/// Silent: workers that did not gossip.
fn silence(run: &Run, cells: &BTreeMap<String, Cell>, spec: &HealthSpec) -> Option<Verdict> {
    if run.workers == 1 {
        return None;
    }
    if cells.get("bytes").and_then(Cell::number) == Some(0.0) {
        return Some(Verdict::of(
            Health::Silent,
            "no gossip bytes were sent during training".into(),
        ));
    }
    let share = cells.get("exchange_share").and_then(Cell::number)?;
    let of_planned = share * run.period as f64;
    (of_planned < spec.min_exchange_share).then(|| {
        Verdict::of(
            Health::Silent,
            format!(
                "the workers completed an exchange in {} of the iterations that exchange (fewer than {})",
                percent(of_planned),
                percent(spec.min_exchange_share)
            ),
        )
    })
}

/// A share as a percentage, with what precision it needs.
fn percent(v: f64) -> String {
    let p = 100.0 * v;
    if p == 0.0 || p >= 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.2e}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::plan::SimParams;
    use repro_runlog::TrainConfig;

    fn trainer() -> Params {
        Params::Train(TrainConfig {
            workers: 4,
            dataset: "fashion-mnist".into(),
            algorithm: "moniqua".into(),
            ..TrainConfig::default()
        })
    }

    fn cells(pairs: &[(&str, Cell)]) -> BTreeMap<String, Cell> {
        let mut c: BTreeMap<String, Cell> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        c.entry("status".into())
            .or_insert(Cell::Text("completed".into()));
        c
    }

    fn health(params: &Params, pairs: &[(&str, Cell)]) -> Health {
        judge(params, &cells(pairs), &HealthSpec::default()).health
    }

    fn n(v: f64) -> Cell {
        Cell::Number(Some(v))
    }

    #[test]
    fn every_health_reads_back_from_its_word() {
        for h in Health::ALL {
            assert_eq!(Health::parse(h.text()), Some(h));
        }
        assert_eq!(Health::parse("OK"), None);
    }

    /// A healthy trainer run is ok; each number past its threshold gives
    /// its word, and the order decides between several.
    #[test]
    fn each_number_past_its_threshold_gives_its_word() {
        let p = trainer();
        let fine = [
            ("first_loss", n(2.3)),
            ("last_loss", n(0.5)),
            ("avg_test_accuracy", n(0.8)),
            ("model_norm", n(12.0)),
            ("bytes", Cell::Count(1000)),
            ("exchange_share", n(1.0)),
            ("wrap_rate", n(0.0)),
        ];
        assert_eq!(health(&p, &fine), Health::Ok);
        let replaced = |changes: &[(&'static str, Cell)]| {
            let mut c = fine.to_vec();
            c.retain(|(name, _)| changes.iter().all(|(k, _)| k != name));
            c.extend(changes.iter().cloned());
            health(&p, &c)
        };
        let with = |k: &'static str, v: Cell| replaced(&[(k, v)]);
        assert_eq!(with("last_loss", n(1.5e14)), Health::Exploded);
        assert_eq!(with("last_loss", n(22.0)), Health::Ok);
        assert_eq!(with("avg_test_accuracy", n(0.1)), Health::Collapsed);
        assert_eq!(with("avg_test_accuracy", n(0.119)), Health::Collapsed);
        assert_eq!(with("avg_test_accuracy", n(0.13)), Health::Ok);
        assert_eq!(with("model_norm", n(1e-6)), Health::Collapsed);
        assert_eq!(with("bytes", Cell::Count(0)), Health::Silent);
        assert_eq!(with("exchange_share", n(0.0056)), Health::Silent);
        // wrapping is Moniqua's premise failing, not an outcome
        assert_eq!(with("wrap_rate", n(0.035)), Health::Ok);
        assert_eq!(
            with("status", Cell::Text("diverged".into())),
            Health::Diverged
        );
        assert_eq!(
            with("status", Cell::Text("not run (interrupted)".into())),
            Health::Unfinished
        );
        // the order decides: collapsed before silent, exploded before both
        let silent_and_collapsed = [("bytes", Cell::Count(0)), ("avg_test_accuracy", n(0.1))];
        assert_eq!(replaced(&silent_and_collapsed), Health::Collapsed);
        let all_three = [
            ("bytes", Cell::Count(0)),
            ("avg_test_accuracy", n(0.1)),
            ("last_loss", n(1e9)),
        ];
        assert_eq!(replaced(&all_three), Health::Exploded);
    }

    /// A convex objective explodes when it ends above where it started;
    /// a periodic algorithm is judged on the exchanges it plans.
    #[test]
    fn the_simulator_is_convex_and_periods_count() {
        let sim = Params::Sim(SimParams {
            workers: 4,
            ..SimParams::default()
        });
        let start = [("first_loss", n(1.0))];
        let at = |last: f64| {
            let mut c = start.to_vec();
            c.push(("last_loss", n(last)));
            health(&sim, &c)
        };
        assert_eq!(at(0.5), Health::Ok);
        assert_eq!(at(1.5), Health::Exploded);
        // the simulator has no classes: an accuracy is not judged
        assert_eq!(health(&sim, &[("avg_test_accuracy", n(0.1))]), Health::Ok);
        let periodic = Params::Train(TrainConfig {
            workers: 4,
            algorithm: "pqasgd".into(),
            knobs: repro_runlog::Knobs {
                period: 30,
                ..repro_runlog::Knobs::default()
            },
            ..TrainConfig::default()
        });
        assert_eq!(
            health(&periodic, &[("exchange_share", n(1.0 / 30.0))]),
            Health::Ok
        );
        assert_eq!(
            health(&trainer(), &[("exchange_share", n(1.0 / 30.0))]),
            Health::Silent
        );
        // one worker has no one to talk to
        let alone = Params::Train(TrainConfig {
            workers: 1,
            ..TrainConfig::default()
        });
        assert_eq!(health(&alone, &[("bytes", Cell::Count(0))]), Health::Ok);
    }

    /// The method's failures are outcomes; silence and an unfinished run
    /// are no test of it. A failed run counts with its value, or at the
    /// worst the metric can take; a run that did not test is left out.
    #[test]
    fn failures_count_and_untested_runs_are_left_out() {
        use Health::*;
        let kinds: Vec<Kind> = Health::ALL.iter().map(|h| h.kind()).collect();
        assert_eq!(
            kinds,
            [
                Kind::Ok,
                Kind::MethodFailed,
                Kind::MethodFailed,
                Kind::MethodFailed,
                Kind::NotTested,
                Kind::NotTested
            ]
        );
        let acc =
            |h: Health, v: Option<f64>| counted(Some(h), v, "avg_test_accuracy", Some(0.1), true);
        assert_eq!(acc(Ok, Some(0.8)), Counted::Value(0.8));
        assert_eq!(acc(Ok, None), Counted::LeftOut("without a value"));
        assert_eq!(acc(Collapsed, Some(0.11)), Counted::Value(0.11));
        assert_eq!(acc(Diverged, None), Counted::Worst(0.1));
        assert_eq!(acc(Diverged, Some(f64::NAN)), Counted::Worst(0.1));
        assert_eq!(acc(Exploded, Some(0.3)), Counted::Value(0.3));
        assert_eq!(acc(Silent, Some(0.8)), Counted::LeftOut("silent"));
        assert_eq!(acc(Unfinished, None), Counted::LeftOut("unfinished"));
        // a loss has no worst value: the run ranks last
        let loss = counted(Some(Diverged), None, "final_loss", Some(0.1), false);
        assert_eq!(loss, Counted::Worst(f64::INFINITY));
        assert_eq!(worst("val_accuracy", None, true), f64::NEG_INFINITY);
    }

    /// Wrapping past the modulus is the premise's word, beside health:
    /// a run that wrapped and trained is ok with its premise failed.
    #[test]
    fn the_premise_is_judged_beside_health() {
        let spec = HealthSpec::default();
        let at = |w: f64| premise(&cells(&[("wrap_rate", n(w))]), &spec);
        assert_eq!(at(0.0).unwrap().0, Premise::Held);
        assert_eq!(at(0.01).unwrap().0, Premise::Held);
        let (p, why) = at(0.035).unwrap();
        assert_eq!(p, Premise::Wrapped);
        assert!(why.contains("3.5% of the coordinates"), "{why}");
        assert_eq!(premise(&cells(&[]), &spec), None);
        for p in [Premise::Held, Premise::Wrapped] {
            assert_eq!(Premise::parse(p.text()), Some(p));
        }
        assert_eq!(premise_text(0, 8), "");
        assert_eq!(
            premise_text(2, 8),
            "premise: 2 of 8 wrapped past the modulus"
        );
    }

    #[test]
    fn thresholds_are_checked() {
        assert!(HealthSpec::default().check().is_ok());
        let e = HealthSpec {
            loss_growth: 0.5,
            ..HealthSpec::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.0, "health.loss_growth");
        let e = HealthSpec {
            max_wrap_rate: 2.0,
            ..HealthSpec::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.0, "health.max_wrap_rate");
    }
}
