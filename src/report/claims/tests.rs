//! The claims' tests.

use super::*;
use crate::records::curves::CurvePoint;
use crate::records::results::tests::row;

mod protocol;

fn table() -> TableSpec {
    yaml_serde::from_str("{ rows: [algorithm], value: final_loss }").unwrap()
}

fn claims(yaml: &str) -> Vec<ClaimSpec> {
    yaml_serde::from_str(yaml).unwrap()
}

/// Runs of `alg` with these final losses, seeds 0, 1, ...
fn runs(alg: &str, losses: &[&str], status: &str) -> Vec<RunRecord> {
    losses
        .iter()
        .enumerate()
        .map(|(i, l)| row(alg, &i.to_string(), l, status))
        .collect()
}

fn no_curves(_: &str) -> Result<Vec<RunCurve>> {
    anyhow::bail!("no curves here")
}

fn verdicts(yaml: &str, rows: &[RunRecord]) -> Vec<Verdict> {
    evaluate(&claims(yaml), &table(), rows, None, &mut no_curves, 1).unwrap()
}

#[test]
fn a_claim_is_checked_before_anything_runs() {
    let points: Vec<BTreeMap<String, String>> =
        [("moniqua", "0.1"), ("moniqua", "0.5"), ("choco", "0.1")]
            .iter()
            .flat_map(|(a, lr)| {
                ["0", "1"].map(|s| {
                    [("algorithm", *a), ("lr", lr), ("seed", s)]
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .into()
                })
            })
            .collect();
    let check = |yaml: &str| check_specs(&claims(yaml), &table(), &points);
    assert!(
        check("[{better: moniqua, than: choco, where: {lr: 0.1}, metric: final_loss}]").is_ok()
    );
    let cases = [
        (
            "[{better: moniqua, within: 1, than: choco, metric: final_loss}]",
            "claims[0]",
            "exactly one",
        ),
        (
            "[{better: moniqua, where: {lr: 0.1}, metric: final_loss}]",
            "claims[0].than",
            "missing",
        ),
        (
            "[{better: moniqua, than: choco, where: {lr: 0.1}, metric: status}]",
            "claims[0].metric",
            "not a numeric",
        ),
        (
            "[{better: moniqua, than: choco, where: {bits: 1}, metric: final_loss}]",
            "claims[0].where.bits",
            "not a grid key",
        ),
        (
            "[{better: monqua, than: choco, where: {lr: 0.1}, metric: final_loss}]",
            "claims[0]",
            "`monqua` is no value",
        ),
        // moniqua ran at two learning rates: which one is meant?
        (
            "[{better: moniqua, than: choco, metric: final_loss}]",
            "claims[0].where",
            "differ in `lr`",
        ),
        (
            "[{faster_to: {train_loss: 1, test_loss: 2}, method: moniqua, than: choco}]",
            "claims[0].faster_to",
            "one metric",
        ),
        (
            "[{faster_to: {train_loss: 1}, method: moniqua, than: choco, by: hours, where: {lr: 0.1}}]",
            "claims[0].by",
            "not one of",
        ),
        (
            "[{diverges: choco, rate: 1.5}]",
            "claims[0].rate",
            "not in (0, 1)",
        ),
        (
            "[{within: -1, method: moniqua, of: choco, metric: final_loss}]",
            "claims[0].within",
            "positive",
        ),
        (
            "[{diverges: choco, level: 0.7}]",
            "claims[0].level",
            "not in (0, 0.5)",
        ),
    ];
    for (yaml, path, says) in cases {
        let (p, m) = check(yaml).unwrap_err();
        assert_eq!(p, path, "{yaml}: {m}");
        assert!(m.contains(says), "{yaml}: {m}");
    }
}

/// Same seeds on both sides: paired; otherwise Welch. Lower loss is
/// better, so a method with a clearly lower loss is supported, one with
/// a clearly higher loss contradicted, and noise is not supported.
#[test]
fn better_is_paired_by_seed_and_decided_by_the_interval() {
    let mut rows = runs("moniqua", &["1.0", "1.1", "0.9"], "completed");
    rows.extend(runs("choco", &["2.0", "2.1", "1.9"], "completed"));
    rows.extend(runs("dcd", &["1.5", "0.5", "1.0"], "completed"));
    let v = verdicts(
        "[{better: moniqua, than: choco, metric: final_loss},
          {better: choco, than: moniqua, metric: final_loss},
          {better: moniqua, than: dcd, metric: final_loss}]",
        &rows,
    );
    // differences are exactly -1 for every seed: no spread at all
    assert_eq!(v[0].test, "paired t");
    assert_eq!((v[0].n_method, v[0].n_baseline), (3, 3));
    assert_eq!(v[0].outcome, Outcome::Supported);
    assert!((v[0].effect.unwrap() + 1.0).abs() < 1e-12);
    assert_eq!(v[1].outcome, Outcome::Contradicted);
    assert_eq!(v[2].outcome, Outcome::NotSupported);
    // the differences -0.5, 0.6, -0.1: mean 0, the audit's kind of tie
    assert!(v[2].p.unwrap() > 0.9, "{:?}", v[2]);
    // a seed missing on one side: the samples are no longer paired
    let mut rows = runs("moniqua", &["1.0", "1.2", "0.9"], "completed");
    rows.extend(runs("choco", &["2.0", "2.1"], "completed"));
    let v = verdicts(
        "[{better: moniqua, than: choco, metric: final_loss}]",
        &rows,
    );
    assert_eq!(v[0].test, "Welch t");
    assert_eq!(v[0].outcome, Outcome::Supported);
}

/// A failed run counts against its method (intention to treat): a
/// diverged run without a loss ranks last, so the rank test decides;
/// a silent run did not test the method and is left out, named. The
/// verdict over the valid runs alone stands beside.
#[test]
fn a_failed_run_counts_and_a_silent_one_is_left_out() {
    let mut rows = runs("moniqua", &["1.0", "1.1", "0.9", "1.0"], "completed");
    rows.extend(runs("choco", &["2.0", "NaN", "1.9", "2.1"], "completed"));
    rows[5].metrics.insert(
        "status".into(),
        crate::records::metrics::Cell::Text("diverged".into()),
    );
    let rows = judged(rows, &[3], Health::Silent);
    let v = verdicts(
        "[{better: moniqua, than: choco, metric: final_loss}]",
        &rows,
    );
    // moniqua's seed 3 is left out, so the sides are not the same seeds
    assert_eq!((v[0].n_method, v[0].n_baseline), (3, 4), "{:?}", v[0]);
    assert_eq!(v[0].test, "Mann-Whitney", "{:?}", v[0]);
    assert!(
        v[0].note.contains("moniqua: 1 silent left out"),
        "{}",
        v[0].note
    );
    assert!(
        v[0].note
            .contains("choco: 1 of 4 runs failed (1 diverged), counted; 1 without a value at the worst the metric can take (ranked last)"),
        "{}",
        v[0].note
    );
    // 3 against 4 all below: Mann-Whitney's exact p = 2/35
    assert!((v[0].p.unwrap() - 2.0 / 35.0).abs() < 1e-12, "{:?}", v[0]);
    assert_eq!(v[0].outcome, Outcome::NotSupported);
    // over the valid runs alone, Welch supports it: the note says so
    assert_eq!(v[0].ok_only, Some(Outcome::Supported));
    assert!(
        v[0].note
            .contains("over the valid runs alone (3 / 3) it is supported"),
        "{}",
        v[0].note
    );
    // one run a side cannot be tested
    let rows = [
        runs("moniqua", &["1.0"], "completed"),
        runs("choco", &["2.0"], "completed"),
    ]
    .concat();
    let v = verdicts(
        "[{better: moniqua, than: choco, metric: final_loss}]",
        &rows,
    );
    assert_eq!(v[0].outcome, Outcome::NotTestable);
    assert!(v[0].note.contains("too few runs"), "{}", v[0].note);
    let v = verdicts("[{better: moniqua, than: dcd, metric: final_loss}]", &rows);
    assert_eq!(v[0].outcome, Outcome::NotTestable);
    assert!(
        v[0].note.contains("no recorded runs of dcd"),
        "{}",
        v[0].note
    );
}

/// The audit's case: one of the method's seeds failed (exploded). It
/// keeps n equal to its seeds, the comparison stays paired, and its
/// worst seed pulls the mean down; left out, the verdict would flip.
#[test]
fn a_failed_seed_keeps_the_pairing() {
    let acc = |alg: &str, values: &[f64]| -> Vec<RunRecord> {
        values
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let mut r = row(alg, &i.to_string(), "1", "completed");
                for (k, v) in [
                    ("avg_test_accuracy", Some(*a)),
                    ("chance_accuracy", Some(0.1)),
                ] {
                    r.metrics
                        .insert(k.into(), crate::records::metrics::Cell::Number(v));
                }
                r
            })
            .collect()
    };
    let mut rows = acc("moniqua", &[0.86, 0.87, 0.50, 0.86, 0.87, 0.86]);
    rows.extend(acc("choco", &[0.85, 0.86, 0.84, 0.85, 0.86, 0.85]));
    let rows = judged(rows, &[2], Health::Exploded);
    let v = verdicts(
        "[{better: moniqua, than: choco, metric: avg_test_accuracy}]",
        &rows,
    );
    assert_eq!(v[0].test, "paired t", "{:?}", v[0]);
    assert_eq!((v[0].n_method, v[0].n_baseline), (6, 6));
    assert_eq!(v[0].outcome, Outcome::NotSupported, "{:?}", v[0]);
    assert_eq!(v[0].ok_only, Some(Outcome::Supported), "{:?}", v[0]);
    assert!(
        v[0].note
            .contains("moniqua: 1 of 6 runs failed (1 exploded), counted")
    );
    // a diverged run without an accuracy counts at chance
    let mut rows = acc("moniqua", &[0.86, 0.87, 0.85]);
    rows[1].metrics.insert(
        "avg_test_accuracy".into(),
        crate::records::metrics::Cell::Number(None),
    );
    let mut rows = judged(rows, &[1], Health::Diverged);
    rows.extend(acc("choco", &[0.85, 0.86, 0.84]));
    let v = verdicts(
        "[{better: moniqua, than: choco, metric: avg_test_accuracy}]",
        &rows,
    );
    let mean = 100.0 * (0.86 + 0.1 + 0.85) / 3.0;
    assert!(
        (v[0].method_value.unwrap() - mean).abs() < 1e-12,
        "{:?}",
        v[0]
    );
    assert!(v[0].note.contains("(chance, 0.1000)"), "{}", v[0].note);
    assert!(
        v[0].note
            .contains("no exact test (rank or permutation) can go below 0.05"),
        "{}",
        v[0].note
    );
}

#[test]
fn within_needs_the_whole_interval_inside_the_margin() {
    let mut rows = runs("moniqua", &["1.00", "1.02", "0.98"], "completed");
    rows.extend(runs("d-psgd", &["1.01", "1.01", "1.00"], "completed"));
    rows.extend(runs("dcd", &["3.0", "3.1", "2.9"], "completed"));
    let v = verdicts(
        "[{within: 0.2, method: moniqua, of: d-psgd, metric: final_loss},
          {within: 0.0001, method: moniqua, of: d-psgd, metric: final_loss},
          {within: 0.2, method: dcd, of: d-psgd, metric: final_loss}]",
        &rows,
    );
    assert_eq!(v[0].outcome, Outcome::Supported, "{:?}", v[0]);
    assert!(v[0].p.unwrap() < 0.025);
    assert_eq!(v[1].outcome, Outcome::NotSupported);
    assert_eq!(v[2].outcome, Outcome::Contradicted);
}

/// 5 of 5 diverged is the fewest that supports "diverges" at 0.05
/// (1/32 < 0.05 < 1/16); 3 of 3 cannot, and the note says so.
#[test]
fn divergence_is_an_exact_count() {
    let mut rows = runs("dcd", &["NaN"; 5], "diverged");
    rows.extend(runs("ecd", &["NaN"; 3], "diverged"));
    rows.extend(runs("moniqua", &["1"; 5], "completed"));
    rows.extend(runs("choco", &["NaN", "1", "1"], "failed"));
    let v = verdicts(
        "[{diverges: dcd}, {diverges: ecd}, {diverges: moniqua}, {diverges: dcd, than: moniqua}, {diverges: choco}]",
        &rows,
    );
    assert_eq!(v[0].outcome, Outcome::Supported);
    assert!((v[0].p.unwrap() - 1.0 / 32.0).abs() < 1e-12);
    assert_eq!(v[1].outcome, Outcome::NotSupported);
    assert!(v[1].note.contains("that takes 5 of 5"), "{}", v[1].note);
    assert_eq!(v[2].outcome, Outcome::Contradicted);
    // Fisher: 5 of 5 against 0 of 5, p = 1 / C(10, 5) = 1/252
    assert_eq!(v[3].outcome, Outcome::Supported);
    assert!((v[3].p.unwrap() - 1.0 / 252.0).abs() < 1e-12);
    assert_eq!(v[4].outcome, Outcome::NotTestable);
    assert!(
        v[4].note.contains("no run tested the method"),
        "{}",
        v[4].note
    );
}

/// The health a run was judged with: collapsed runs are left out of a
/// comparison (named in the note) and count as failures to train.
fn judged(mut rows: Vec<RunRecord>, which: &[usize], health: Health) -> Vec<RunRecord> {
    for &i in which {
        rows[i].metrics.insert(
            "health".into(),
            crate::records::metrics::Cell::Text(health.text().into()),
        );
    }
    rows
}

#[test]
fn failures_count_against_the_method_and_are_named() {
    // two of ecd's three runs collapsed: they count, paired by seed;
    // over its one valid run nothing could be tested
    let mut rows = judged(
        runs("ecd", &["0.1", "0.1", "0.5"], "completed"),
        &[0, 1],
        Health::Collapsed,
    );
    // a run that wrapped past the modulus and trained: its premise
    // failed, its outcome did not
    let mut rows_wrapped = runs("ecd", &["0.1", "0.1", "0.5"], "completed");
    rows_wrapped[2].metrics.insert(
        "premise".into(),
        crate::records::metrics::Cell::Text("wrapped".into()),
    );
    rows.extend(runs("d-psgd", &["0.8", "0.82", "0.81"], "completed"));
    let v = verdicts(
        "[{better: d-psgd, than: ecd, metric: final_loss, higher_is_better: true}, {diverges: ecd}]",
        &rows,
    );
    assert_eq!(v[0].test, "paired t", "{:?}", v[0]);
    assert_eq!((v[0].n_method, v[0].n_baseline), (3, 3));
    assert_eq!(v[0].ok_only, Some(Outcome::NotTestable));
    assert!(
        v[0].note
            .contains("ecd: 2 of 3 runs failed (2 collapsed), counted"),
        "{}",
        v[0].note
    );
    // the failure count names every kind of failure
    assert_eq!(v[1].method_value, Some(2.0 / 3.0));
    assert!(
        v[1].note.contains("ecd: 2 of 3 failed: 2 collapsed"),
        "{}",
        v[1].note
    );
    let v = verdicts("[{diverges: ecd}]", &rows_wrapped);
    assert_eq!(v[0].method_value, Some(0.0));
    assert!(
        v[0].note
            .contains("ecd: premise: 1 of 3 wrapped past the modulus (not failures"),
        "{}",
        v[0].note
    );
    // a silent run is neither a success nor a failure: left out, named
    let rows = judged(runs("ecd", &["0.5"; 4], "completed"), &[3], Health::Silent);
    let v = verdicts("[{diverges: ecd}]", &rows);
    assert_eq!(v[0].n_method, 3);
    assert!(
        v[0].note
            .contains("ecd: 1 silent did not test the method, left out"),
        "{}",
        v[0].note
    );
}

/// Beside the t-test: Holm over the manifest's claims, the rank test,
/// and the verdict with each seed left out. One seed carrying the
/// whole difference makes a verdict fragile.
#[test]
fn verdicts_say_how_robust_they_are() {
    let mut rows = runs("moniqua", &["1.0", "1.1", "0.9", "1.0", "1.2"], "completed");
    rows.extend(runs(
        "choco",
        &["2.0", "2.1", "1.9", "2.0", "2.2"],
        "completed",
    ));
    rows.extend(runs(
        "dcd",
        &["1.1", "1.6", "1.1", "1.4", "2.7"],
        "completed",
    ));
    let v = verdicts(
        "[{better: moniqua, than: choco, metric: final_loss}, {better: moniqua, than: dcd, metric: final_loss}]",
        &rows,
    );
    // a constant difference of 1: supported, not fragile; Wilcoxon's
    // exact p with 5 pairs all one way is 2/32
    assert_eq!(v[0].outcome, Outcome::Supported);
    assert_eq!(v[0].fragile, Some(false));
    let rank = v[0].rank.unwrap();
    assert_eq!(rank.name, "Wilcoxon signed-rank");
    assert!((rank.p - 2.0 / 32.0).abs() < 1e-12);
    assert!(
        v[0].note
            .contains("Wilcoxon signed-rank test does not reject"),
        "{}",
        v[0].note
    );
    // Holm over two claims: the smaller p doubled, the larger kept
    // (at least the smaller's adjusted value)
    let (p0, p1) = (v[0].p.unwrap(), v[1].p.unwrap());
    assert!(p0 < p1);
    assert!((v[0].p_holm.unwrap() - 2.0 * p0).abs() < 1e-12);
    assert!((v[1].p_holm.unwrap() - p1.max(2.0 * p0)).abs() < 1e-12);
    // differences 0.1, 0.5, 0.2, 0.4, 1.5: not supported with all five,
    // supported without seed 4's large one
    assert_eq!(v[1].outcome, Outcome::NotSupported, "{:?}", v[1]);
    assert_eq!(v[1].fragile, Some(true), "{:?}", v[1]);
}

/// Under the figure's moving average one noisy minibatch does not
/// reach a target: raw, moniqua's single dip to 0.5 at 3 s beats
/// d-psgd's steady fall to 0.8 at 12 s; smoothed over 5 points it
/// never gets there.
#[test]
fn faster_to_times_the_smoothed_curve() {
    let rows = [
        runs("moniqua", &["1"; 3], "completed"),
        runs("d-psgd", &["1"; 3], "completed"),
    ]
    .concat();
    let point = |k: u64, value: f64| CurvePoint {
        iteration: k,
        epoch: 0.0,
        wall_s: k as f64,
        value,
        bytes: None,
    };
    let mut curves = |_: &str| -> Result<Vec<RunCurve>> {
        Ok(rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let c = (0..20)
                    .map(|k| match (i < 3, k) {
                        (true, 3) => point(k, 0.5),
                        (true, _) => point(k, 1.0),
                        (false, _) => point(k, 2.0 - 0.1 * k as f64),
                    })
                    .collect();
                (r.clone(), c)
            })
            .collect())
    };
    let specs = claims("[{faster_to: {train_loss: 0.8}, method: moniqua, than: d-psgd}]");
    let raw = evaluate(&specs, &table(), &rows, None, &mut curves, 1).unwrap();
    assert_eq!(raw[0].method_value, Some(3.0), "{:?}", raw[0]);
    assert_eq!(raw[0].outcome, Outcome::Supported, "{:?}", raw[0]);
    let smooth = evaluate(&specs, &table(), &rows, None, &mut curves, 5).unwrap();
    assert_ne!(smooth[0].outcome, Outcome::Supported, "{:?}", smooth[0]);
    // censored: the log-rank test decides, and says how many reached it
    assert_eq!(smooth[0].test, "log-rank", "{:?}", smooth[0]);
    assert_eq!(smooth[0].outcome, Outcome::Contradicted, "{:?}", smooth[0]);
    assert!(
        smooth[0].note.contains("moniqua reached it in 0 of 3 runs")
            && smooth[0].note.contains("d-psgd reached it in 3 of 3 runs"),
        "{:?}",
        smooth[0]
    );
}

/// Time to a target from the curves: where every run reached it, the
/// paired t-test decides; where none did, there is nothing to time.
#[test]
fn faster_to_reads_the_curves() {
    let rows = [
        runs("moniqua", &["1"; 3], "completed"),
        runs("d-psgd", &["1"; 3], "completed"),
    ]
    .concat();
    // losses fall by 1 per second from 10; moniqua's run i is 2 + i/10
    // s ahead of d-psgd's
    let curve = |shift: f64| -> Vec<CurvePoint> {
        (0..20)
            .map(|k| CurvePoint {
                iteration: k,
                epoch: 0.0,
                wall_s: k as f64,
                value: 10.0 - k as f64 - shift,
                bytes: Some(k as f64 * 8.0),
            })
            .collect()
    };
    let mut curves = |_: &str| -> Result<Vec<RunCurve>> {
        Ok(rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let shift = if i < 3 { 2.0 + i as f64 / 10.0 } else { 0.0 };
                (r.clone(), curve(shift))
            })
            .collect())
    };
    let specs = claims(
        "[{faster_to: {train_loss: 3}, method: moniqua, than: d-psgd},
          {faster_to: {train_loss: 3}, method: d-psgd, than: moniqua, by: bytes},
          {faster_to: {train_loss: -12}, method: moniqua, than: d-psgd}]",
    );
    let v = evaluate(&specs, &table(), &rows, None, &mut curves, 1).unwrap();
    assert_eq!(v[0].test, "paired t");
    assert_eq!(v[0].outcome, Outcome::Supported, "{:?}", v[0]);
    // moniqua reaches 3 at 5, 5, 5 s (value 10 - k - 2.x <= 3), d-psgd at 7
    assert_eq!(v[0].method_value, Some(5.0));
    assert_eq!(v[0].baseline_value, Some(7.0));
    assert_eq!(v[1].outcome, Outcome::Contradicted);
    assert_eq!(v[1].method_value, Some(56.0));
    // nobody reaches -12: no verdict either way
    assert_eq!(v[2].outcome, Outcome::NotSupported);
    assert!(
        v[2].note.contains("moniqua reached it in 0 of 3 runs")
            && v[2].note.contains("nothing to time"),
        "{}",
        v[2].note
    );
    // without curves, nothing is tested
    let v = evaluate(&specs[..1], &table(), &rows, None, &mut no_curves, 1).unwrap();
    assert_eq!(v[0].outcome, Outcome::NotTestable);
    assert!(v[0].note.contains("no curves here"));
}

#[test]
fn claims_files_have_every_verdict() {
    let mut rows = runs("moniqua", &["1.0", "1.1", "0.9"], "completed");
    rows.extend(runs("choco", &["2.0", "2.1", "1.9"], "completed"));
    rows.extend(runs("dcd", &["NaN"; 3], "diverged"));
    let v = verdicts(
        "[{better: moniqua, than: choco, metric: final_loss, source: 'Table 2'},
          {diverges: dcd, claim: 'DCD diverges'}]",
        &rows,
    );
    insta::assert_snapshot!("claims_md", markdown("Demo", &v));
    insta::assert_snapshot!("claims_csv", csv(&v).unwrap());
}
