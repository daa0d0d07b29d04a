//! Judging one claim: its sides, the paired or two-sample tests, the
//! divergence and time-to-target tests, and leave-one-seed-out fragility.

use super::*;

/// Appends `more` to a verdict's note, "; " between them.
pub(super) fn add_note(note: &mut String, more: &str) {
    if more.is_empty() {
        return;
    }
    if !note.is_empty() {
        note.push_str("; ");
    }
    note.push_str(more);
}

/// A side's values of the claim's metric, scaled: by intention to treat
/// (`itt`; [`health::counted`]) or over the valid runs alone.
pub(super) fn side(c: &Claim<'_>, runs: &[&RunRecord], itt: bool) -> Side {
    let metric = c.metric.as_deref().unwrap_or_default();
    let mut s = Side::default();
    for r in runs {
        let counted = if itt {
            r.counted(metric, c.higher)
        } else {
            match r.health() {
                Some(Health::Ok) => r.counted(metric, c.higher),
                Some(h) => Counted::LeftOut(h.text()),
                None => Counted::LeftOut("without a status"),
            }
        };
        let health = r.health().unwrap_or(Health::Unfinished);
        match counted {
            Counted::Value(x) | Counted::Worst(x) => {
                if health.kind() == HealthKind::MethodFailed {
                    *s.failed.entry(health).or_default() += 1;
                }
                if matches!(counted, Counted::Worst(_)) {
                    s.at_worst.push(x);
                }
                if r.premise() == Some(Premise::Wrapped) {
                    s.wrapped += 1;
                }
                s.values.push((seed_of(r), x * c.scale));
            }
            Counted::LeftOut(why) => *s.left_out.entry(why.to_string()).or_default() += 1,
        }
    }
    s
}

/// A `better` or `within` claim: the difference of the metric's means,
/// by intention to treat, with the verdict over the valid runs alone
/// beside it.
pub(super) fn difference(
    c: &Claim<'_>,
    v: &mut Verdict,
    mine: &[&RunRecord],
    theirs: &[&RunRecord],
) {
    let ranked = !matches!(c.kind, Kind::Within(_));
    let decide = |d: &Difference, level: f64| match c.kind {
        Kind::Within(margin) => {
            let (lo, hi) = d.interval(level);
            let p = d.p_equivalent(margin);
            let outcome = if lo > -margin && hi < margin {
                Outcome::Supported
            } else if lo >= margin || hi <= -margin {
                Outcome::Contradicted
            } else {
                Outcome::NotSupported
            };
            (p, outcome)
        }
        _ => {
            let (lo, hi) = d.interval(level);
            let (good, bad) = if c.higher {
                (lo > 0.0, hi < 0.0)
            } else {
                (hi < 0.0, lo > 0.0)
            };
            let outcome = if good {
                Outcome::Supported
            } else if bad {
                Outcome::Contradicted
            } else {
                Outcome::NotSupported
            };
            (d.p_two_sided(), outcome)
        }
    };
    let (a, b) = (side(c, mine, true), side(c, theirs, true));
    two_samples(c, v, (&a, &b), ranked, decide);
    let (oa, ob) = (side(c, mine, false), side(c, theirs, false));
    let mut ok = Verdict {
        test: String::new(),
        effect: None,
        ci: None,
        p: None,
        rank: None,
        permutation: None,
        fragile: None,
        outcome: Outcome::NotTestable,
        ..v.clone()
    };
    two_samples(c, &mut ok, (&oa, &ob), false, decide);
    v.ok_only = Some(ok.outcome);
    if ok.outcome != v.outcome {
        let differs = format!(
            "over the valid runs alone ({} / {}) it is {}",
            ok.n_method,
            ok.n_baseline,
            ok.outcome.word()
        );
        add_note(&mut v.note, &differs);
    }
}

/// A `diverges` claim: the share of runs that diverged, against a rate
/// or against the baseline's share.
pub(super) fn divergence(
    c: &Claim<'_>,
    v: &mut Verdict,
    mine: &[&RunRecord],
    theirs: &[&RunRecord],
    rate: f64,
) {
    let base = c.baseline.clone().unwrap_or_default();
    let mut notes = Vec::new();
    let mut count = |name: &str, runs: &[&RunRecord]| failures(name, runs, &mut notes);
    let (ka, na) = count(&c.method, mine);
    let (kb, nb) = if c.baseline.is_some() {
        count(&base, theirs)
    } else {
        (0, 0)
    };
    v.n_method = na as usize;
    if na == 0 {
        notes.push(format!("{}: no run tested the method", c.method));
        v.note = notes.join("; ");
        return;
    }
    v.method_value = Some(ka as f64 / na as f64);
    if c.baseline.is_some() {
        v.n_baseline = nb as usize;
        if nb == 0 {
            notes.push(format!("{base}: no run tested the method"));
            v.note = notes.join("; ");
            return;
        }
        v.baseline_value = Some(kb as f64 / nb as f64);
        v.effect = Some(ka as f64 / na as f64 - kb as f64 / nb as f64);
        v.test = "Fisher exact (one-sided)".into();
        let p = stats::fisher_greater(ka, na, kb, nb);
        let against = stats::fisher_greater(kb, nb, ka, na);
        v.p = Some(p);
        v.outcome = Outcome::of_exact_test(p, against, c.spec.level);
    } else {
        v.test = format!(
            "exact binomial against {}% (one-sided)",
            short(rate * 100.0)
        );
        v.effect = Some(ka as f64 / na as f64);
        v.ci = Some(stats::clopper_pearson(ka, na, c.spec.level));
        let p = stats::binomial_at_least(ka, na, rate);
        let against = stats::binomial_at_most(ka, na, rate);
        v.p = Some(p);
        v.outcome = Outcome::of_exact_test(p, against, c.spec.level);
        // the fewest runs that could support it, all failing
        let needed = (c.spec.level.ln() / rate.ln()).floor() as u64 + 1;
        if v.outcome != Outcome::Supported && na < needed {
            notes.push(format!(
                "{na} runs cannot support it at level {}, even all failing: that takes {needed} of {needed}",
                short(c.spec.level)
            ));
        }
    }
    v.note = notes.join("; ");
}

/// A side's failures of the method and the runs that tested it: every
/// failure counts (diverged, exploded, collapsed: outcomes, never a failed
/// premise), a run that did not test the method is left out; both named
/// in `notes`.
pub(super) fn failures(name: &str, runs: &[&RunRecord], notes: &mut Vec<String>) -> (u64, u64) {
    let by = by_health(runs.iter().copied());
    let of_kind = |kind: HealthKind| -> BTreeMap<Health, usize> {
        by.iter()
            .filter(|(h, _)| h.kind() == kind)
            .map(|(h, n)| (*h, *n))
            .collect()
    };
    let (failed, untested) = (
        of_kind(HealthKind::MethodFailed),
        of_kind(HealthKind::NotTested),
    );
    let ok = by.get(&Health::Ok).copied().unwrap_or(0);
    let k: usize = failed.values().sum();
    if k > 0 {
        notes.push(format!(
            "{name}: {k} of {} failed: {}",
            k + ok,
            counts_text(&failed)
        ));
    }
    if !untested.is_empty() {
        notes.push(format!(
            "{name}: {} did not test the method, left out",
            counts_text(&untested)
        ));
    }
    let wrapped = runs
        .iter()
        .filter(|r| {
            r.health()
                .is_some_and(|h| h.kind() != HealthKind::NotTested)
        })
        .filter(|r| r.premise() == Some(Premise::Wrapped))
        .count();
    if wrapped > 0 {
        notes.push(format!(
            "{name}: {} (not failures: the outcome is the run's health)",
            premise_text(wrapped, k + ok)
        ));
    }
    (k as u64, (k + ok) as u64)
}

/// What a `faster_to` claim times: the first `by` at which `metric`,
/// under the figure's moving average of `smooth` logged points
/// ([`crate::report::plot::smoothed`]), reaches `target`.
pub(super) struct TimeTo<'a> {
    pub(super) metric: &'a str,
    pub(super) target: f64,
    pub(super) by: &'a str,
    pub(super) smooth: usize,
}

/// A `faster_to` claim: the difference of the times to the target.
pub(super) fn time_to(
    c: &Claim<'_>,
    v: &mut Verdict,
    mine: &[&RunRecord],
    theirs: &[&RunRecord],
    reach: &TimeTo<'_>,
    curves: &mut dyn FnMut(&str) -> Result<Vec<RunCurve>>,
) {
    let metric = reach.metric;
    let base = c.baseline.clone().unwrap_or_default();
    let all = match curves(metric) {
        Ok(all) => all,
        Err(e) => {
            v.note = format!("no curves of {metric}: {e:#}");
            return;
        }
    };
    let by_id: BTreeMap<&str, &[CurvePoint]> = all
        .iter()
        .map(|(r, p)| (r.run_id.as_str(), p.as_slice()))
        .collect();
    let side = |runs: &[&RunRecord]| reach_side(c, runs, &by_id, reach);
    let ((a, ra), (b, rb)) = (side(mine), side(theirs));
    let censored = ra.iter().chain(&rb).any(|r| !r);
    // the rank tests beside the t-test only where every time is real
    two_samples(c, v, (&a, &b), !censored, |d, level| {
        let (lo, hi) = d.interval(level);
        let outcome = if hi < 0.0 {
            Outcome::Supported
        } else if lo > 0.0 {
            Outcome::Contradicted
        } else {
            Outcome::NotSupported
        };
        (d.p_two_sided(), outcome)
    });
    if censored {
        censored_times(c, v, (&a, &ra), (&b, &rb));
    }
    for (name, reached) in [(&c.method, &ra), (&base, &rb)] {
        let k = reached.iter().filter(|r| **r).count();
        add_note(
            &mut v.note,
            &format!("{name} reached it in {k} of {} runs", reached.len()),
        );
    }
}

/// A `faster_to` claim where some run never reached the target: its time
/// is censored at the run's end, so the t-test's interval is a bound, not
/// a test. The log-rank test decides over reached and censored runs
/// alike (unpaired); leaving out one seed at a time says if it is fragile.
fn censored_times(c: &Claim<'_>, v: &mut Verdict, a: (&Side, &[bool]), b: (&Side, &[bool])) {
    let timed = |(s, reached): (&Side, &[bool])| -> Vec<(String, stats::Timed)> {
        s.values
            .iter()
            .zip(reached)
            .map(|((seed, at), &reached)| (seed.clone(), stats::Timed { at: *at, reached }))
            .collect()
    };
    let (ta, tb) = (timed(a), timed(b));
    let level = c.spec.level;
    let decide = |ta: &[(String, stats::Timed)], tb: &[(String, stats::Timed)]| {
        let plain = |t: &[(String, stats::Timed)]| t.iter().map(|(_, x)| *x).collect::<Vec<_>>();
        stats::log_rank(&plain(ta), &plain(tb)).map(|lr| {
            let outcome = match (stats::below(lr.p, level), lr.a_sooner()) {
                (false, _) => Outcome::NotSupported,
                (true, true) => Outcome::Supported,
                (true, false) => Outcome::Contradicted,
            };
            (lr.p, outcome)
        })
    };
    v.test = "log-rank".into();
    v.rank = None;
    v.permutation = None;
    match decide(&ta, &tb) {
        Some((p, outcome)) => {
            v.p = Some(p);
            v.outcome = outcome;
            let seeds: std::collections::BTreeSet<&String> =
                ta.iter().chain(&tb).map(|(s, _)| s).collect();
            v.fragile = Some(seeds.into_iter().any(|seed| {
                let drop = |t: &[(String, stats::Timed)]| -> Vec<(String, stats::Timed)> {
                    t.iter().filter(|(s, _)| s != seed).cloned().collect()
                };
                decide(&drop(&ta), &drop(&tb)).map(|(_, o)| o) != Some(outcome)
            }));
            add_note(
                &mut v.note,
                "times censored at a run's end where it never reached the target: the log-rank test decides; the t interval is a bound",
            );
        }
        None => {
            v.p = None;
            v.outcome = Outcome::NotSupported;
            v.fragile = None;
            add_note(&mut v.note, "no run reached the target: nothing to time");
        }
    }
}

/// One side of a `faster_to` claim: each run's x at the target (`by_id`:
/// its smoothed curve), and beside each value whether the run reached it
/// (one that never did counts at its last point: censored there). A failed run counts by its curve
/// (intention to treat); one that did not test the method is left out.
pub(super) fn reach_side(
    c: &Claim<'_>,
    runs: &[&RunRecord],
    by_id: &BTreeMap<&str, &[CurvePoint]>,
    reach: &TimeTo<'_>,
) -> (Side, Vec<bool>) {
    let mut s = Side::default();
    let mut reached = Vec::new();
    for r in runs {
        match r.health() {
            Some(h) if h.kind() == HealthKind::NotTested => {
                *s.left_out.entry(h.text().into()).or_default() += 1;
                continue;
            }
            Some(h) if h.kind() == HealthKind::MethodFailed => {
                *s.failed.entry(h).or_default() += 1;
            }
            _ => {}
        }
        if r.premise() == Some(Premise::Wrapped) {
            s.wrapped += 1;
        }
        let points = by_id.get(r.run_id.as_str()).copied().unwrap_or(&[]);
        let points = crate::report::plot::smoothed(points, reach.smooth);
        match crate::records::curves::first_reach(&points, reach.target, c.higher, reach.by) {
            Ok(x) => {
                s.values.push((seed_of(r), x));
                reached.push(true);
            }
            Err(Some(x)) => {
                s.values.push((seed_of(r), x));
                reached.push(false);
            }
            Err(None) => *s.left_out.entry("without a curve".into()).or_default() += 1,
        }
    }
    (s, reached)
}

/// Fills `v` from a two-sample comparison of `a` (the method) and `b`;
/// `decide` gives the p-value and outcome from the difference. Beside the
/// t-test: the rank test (where `ranked`), and whether the outcome holds
/// with each seed left out in turn.
pub(super) fn two_samples(
    c: &Claim<'_>,
    v: &mut Verdict,
    (a, b): (&Side, &Side),
    ranked: bool,
    decide: impl Fn(&Difference, f64) -> (f64, Outcome),
) {
    v.n_method = a.values.len();
    v.n_baseline = b.values.len();
    let mean = |s: &Side| (!s.values.is_empty()).then(|| stats::mean_sd(&s.numbers()).0);
    v.method_value = mean(a);
    v.baseline_value = mean(b);
    let base = c.baseline.as_deref().unwrap_or_default();
    let mut notes: Vec<String> = [a.describe(&c.method), b.describe(base)]
        .into_iter()
        .flatten()
        .collect();
    let level = c.spec.level;
    let enough = a.values.len() >= 2 && b.values.len() >= 2;
    match stats::difference(&a.values, &b.values) {
        Some(d) => {
            v.test = d.test.name().into();
            v.effect = Some(d.effect);
            v.ci = Some(d.interval(level));
            if d.test == stats::Test::Paired {
                notes.push(seeds_ahead(c, a, b));
            }
            let (p, outcome) = decide(&d, level);
            v.p = Some(p);
            v.outcome = outcome;
            if ranked {
                v.rank = stats::rank_test(&a.values, &b.values);
                v.permutation = stats::permutation_test(&a.values, &b.values);
            }
            v.fragile = Some(fragile(&a.values, &b.values, outcome, |d| {
                decide(d, level).1
            }));
        }
        // a failed run without a finite value of an unbounded metric:
        // no mean, so its rank (last) decides
        None if enough => {
            if let Some(r) = stats::rank_test(&a.values, &b.values) {
                v.test = r.name.into();
                v.p = Some(r.p);
                v.outcome = by_ranks(c, a, b, r.p, level);
                notes.push(
                    "a failed run without a finite value has no mean: the exact rank test decides, that run ranked last".into(),
                );
            }
        }
        None => notes.push(format!(
            "too few runs to test ({} and {}; two a side needed)",
            a.values.len(),
            b.values.len()
        )),
    }
    if let Some(smallest) =
        stats::smallest_exact_p(&a.values, &b.values).filter(|p| !stats::below(*p, level) && ranked)
    {
        notes.push(format!(
            "with n = {} / {} no exact test (rank or permutation) can go below {}: its smallest p is {}; the verdict rests on the t-test's normality",
            a.values.len(),
            b.values.len(),
            short(level),
            short(smallest)
        ));
    }
    v.note = notes.join("; ");
}

/// How many seeds the method is better on, paired: "by seed, moniqua is
/// better on 3 of 20 (more than 1 better on 0)" (the margin for a
/// `within` claim).
pub(super) fn seeds_ahead(c: &Claim<'_>, a: &Side, b: &Side) -> String {
    let theirs: BTreeMap<&String, f64> = b.values.iter().map(|(s, x)| (s, *x)).collect();
    let diffs: Vec<f64> = a
        .values
        .iter()
        .filter_map(|(s, x)| theirs.get(s).map(|y| if c.higher { x - y } else { y - x }))
        .collect();
    let ahead = diffs.iter().filter(|d| **d > 0.0).count();
    let mut said = format!(
        "by seed, {} is better on {ahead} of {}",
        c.method,
        diffs.len()
    );
    if let Kind::Within(m) = c.kind {
        let below = diffs.iter().filter(|d| **d < -m).count();
        said.push_str(&format!(" and worse by more than {} on {below}", short(m)));
    }
    said
}

/// The verdict of a `better` claim (or a time) decided by the rank test
/// alone: its two-sided `p`, and which side's median is better.
pub(super) fn by_ranks(c: &Claim<'_>, a: &Side, b: &Side, p: f64, level: f64) -> Outcome {
    if matches!(c.kind, Kind::Within(_)) || !stats::below(p, level) {
        return Outcome::NotSupported;
    }
    let median = |s: &Side| {
        let mut xs = s.numbers();
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        if n % 2 == 1 {
            xs[n / 2]
        } else {
            // two infinities of one sign stay one
            let (x, y) = (xs[n / 2 - 1], xs[n / 2]);
            if x == y { x } else { x / 2.0 + y / 2.0 }
        }
    };
    let (ma, mb) = (median(a), median(b));
    let method_better = if c.higher { ma > mb } else { ma < mb };
    if method_better {
        Outcome::Supported
    } else {
        Outcome::Contradicted
    }
}

/// Whether leaving out any one seed's values (on both sides) changes
/// `outcome`, or leaves too few to test.
pub(super) fn fragile(
    a: &stats::Seeded,
    b: &stats::Seeded,
    outcome: Outcome,
    decide: impl Fn(&Difference) -> Outcome,
) -> bool {
    let seeds: std::collections::BTreeSet<&String> = a.iter().chain(b).map(|(s, _)| s).collect();
    seeds.into_iter().any(|seed| {
        let without = |s: &stats::Seeded| -> stats::Seeded {
            s.iter().filter(|(k, _)| k != seed).cloned().collect()
        };
        stats::difference(&without(a), &without(b)).is_none_or(|d| decide(&d) != outcome)
    })
}
