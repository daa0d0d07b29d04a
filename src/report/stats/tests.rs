use super::*;

/// No value a record can hold panics a test or an interval: huge,
/// tiny, infinite or NaN, on either side, paired or not. A p-value is
/// NaN or in [0, 1]; a mean of finite values is finite.
mod any_input {
    use proptest::prelude::*;

    use super::*;

    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            Just(1e308),
            Just(-1e308),
            Just(f64::MAX),
            Just(f64::MIN_POSITIVE),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::NAN),
            Just(0.0),
            -1e3..1e3_f64,
            any::<f64>(),
        ]
    }

    fn seeded(xs: &[f64]) -> Seeded {
        xs.iter()
            .enumerate()
            .map(|(i, x)| (i.to_string(), *x))
            .collect()
    }

    proptest! {
        #[test]
        fn statistics_never_panic(
            a in proptest::collection::vec(value(), 0..12),
            b in proptest::collection::vec(value(), 0..12),
            margin in value(),
        ) {
            let (mean, _, n) = mean_sd(&a);
            if n > 0 && a.iter().all(|x| x.is_finite()) {
                prop_assert!(mean.is_finite(), "{a:?}: {mean}");
            }
            let _ = mean_ci(&a, 0.05);
            for d in [difference(&seeded(&a), &seeded(&b)), welch(&a, &b)].into_iter().flatten() {
                for p in [d.p_two_sided(), d.p_equivalent(margin), d.p_at_most(margin)] {
                    prop_assert!(p.is_nan() || (0.0..=1.0).contains(&p), "{p}");
                }
                let _ = d.interval(0.05);
            }
        }
    }

    #[test]
    fn ten_values_of_1e308_have_their_mean() {
        let (mean, sd, n) = mean_sd(&[1e308; 10]);
        assert_eq!((mean, sd, n), (1e308, 0.0, 10));
        // the review's case: t_upper at an overflowed t and df
        assert_eq!(t_upper(f64::INFINITY, 3.0), 0.0);
        assert!(t_upper(1.0, f64::NAN).is_nan());
        assert!(t_upper(1.0, f64::INFINITY) > 0.15);
    }
}

/// Hollander and Wolfe's examples (Nonparametric Statistical Methods,
/// 3rd ed.: the depression scores, Example 3.1; the permeability
/// constants, Example 4.1): exact two-sided p-values 0.0391 and 0.2544
/// (as scipy's exact tests give them).
#[test]
// 3.14 is a measurement of the textbook's, not pi
#[allow(clippy::approx_constant)]
fn rank_tests_match_the_textbook() {
    let x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30];
    let y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29];
    let d: Vec<f64> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
    assert!(close(wilcoxon_signed_rank(&d), 0.0390625, 1e-12));
    let a = [0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46];
    let b = [1.15, 0.88, 0.90, 0.74, 1.21];
    assert!(close(mann_whitney(&a, &b), 0.2544122544122544, 1e-12));
    assert_eq!(wilcoxon_signed_rank(&[0.0, 0.0]), 1.0);
}

/// With ties, the exact p is the share of every relabelling at least
/// as extreme: counted here by brute force over the subsets.
#[test]
fn tied_ranks_are_counted_exactly() {
    let (a, b) = ([1.0, 2.0, 2.0, 3.0], [2.0, 3.0, 4.0, 4.0]);
    let pooled: Vec<f64> = a.iter().chain(&b).copied().collect();
    let ranks = doubled_midranks(&pooled);
    assert_eq!(ranks, [2, 6, 6, 11, 6, 11, 15, 15]);
    let observed: u64 = ranks[..4].iter().sum();
    let (mut low, mut high, mut all) = (0.0, 0.0, 0.0);
    for mask in 0u32..256 {
        if mask.count_ones() != 4 {
            continue;
        }
        let s: u64 = (0..8)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| ranks[i])
            .sum();
        all += 1.0;
        low += f64::from(u8::from(s <= observed));
        high += f64::from(u8::from(s >= observed));
    }
    let brute = (2.0 * (low / all).min(high / all)).min(1.0);
    assert!(close(mann_whitney(&a, &b), brute, 1e-12));
    // paired, with a tie of magnitudes and a zero dropped
    let d = [1.0, -1.0, 2.0, 0.0, 3.0];
    let ranks = [3u64, 3, 6, 8];
    let signs = [true, false, true, true];
    let obs: u64 = ranks
        .iter()
        .zip(signs)
        .filter(|(_, s)| *s)
        .map(|(r, _)| r)
        .sum();
    let (mut low, mut high) = (0.0, 0.0);
    for mask in 0u32..16 {
        let s: u64 = (0..4)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| ranks[i])
            .sum();
        low += f64::from(u8::from(s <= obs));
        high += f64::from(u8::from(s >= obs));
    }
    let brute = (2.0 * (low / 16.0).min(high / 16.0)).min(1.0);
    assert!(close(wilcoxon_signed_rank(&d), brute, 1e-12));
}

/// Holm on four p-values (Holm 1979's step-down): 0.01 x 4, 0.02 x 3,
/// 0.03 x 2 and 0.04 x 1 kept monotone.
/// Permutation tests worked by hand: three paired differences
/// (1, 2, 3) reach sum 6 only with every sign positive or every one
/// negative, p = 2/8; two against two with no overlap are the most
/// extreme of C(4, 2) = 6 splits, p = 2/6. Neither can go below 0.05,
/// as `smallest_exact_p` says.
#[test]
fn permutation_tests_are_exact() {
    let s = |xs: &[f64]| -> Vec<(String, f64)> {
        xs.iter()
            .enumerate()
            .map(|(i, x)| (i.to_string(), *x))
            .collect()
    };
    let p = permutation_test(&s(&[2.0, 3.0, 4.0]), &s(&[1.0, 1.0, 1.0])).unwrap();
    assert!(close(p, 0.25, 1e-12), "{p}");
    assert!(close(
        smallest_exact_p(&s(&[2.0, 3.0, 4.0]), &s(&[1.0; 3])).unwrap(),
        0.25,
        1e-12
    ));
    let b: Vec<(String, f64)> = vec![("x".into(), 1.0), ("y".into(), 2.0)];
    let p = permutation_test(&s(&[5.0, 6.0]), &b).unwrap();
    assert!(close(p, 2.0 / 6.0, 1e-12), "{p}");
    assert!(close(
        smallest_exact_p(&s(&[5.0, 6.0]), &b).unwrap(),
        2.0 / 6.0,
        1e-12
    ));
    // no difference at all: every arrangement is as extreme
    let p = permutation_test(&s(&[1.0, 2.0, 3.0]), &s(&[1.0, 2.0, 3.0])).unwrap();
    assert!(close(p, 1.0, 1e-12), "{p}");
    // 20 paired seeds are enumerated; an infinity is not
    let p = permutation_test(&s(&[1.0; 20]), &s(&[0.0; 20])).unwrap();
    assert!(close(p, 2.0 / 1_048_576.0, 1e-15), "{p}");
    assert!(permutation_test(&s(&[f64::INFINITY, 1.0]), &s(&[0.0, 0.0])).is_none());
    assert!(difference(&s(&[f64::INFINITY, 1.0]), &s(&[0.0, 0.0])).is_none());
}

#[test]
fn holm_steps_down_and_stays_monotone() {
    let adjusted = holm(&[Some(0.03), None, Some(0.01), Some(0.04), Some(0.02)]);
    let want = [Some(0.06), None, Some(0.04), Some(0.06), Some(0.06)];
    for (a, w) in adjusted.iter().zip(want) {
        match (a, w) {
            (Some(a), Some(w)) => assert!(close(*a, w, 1e-12), "{adjusted:?}"),
            (None, None) => {}
            _ => panic!("{adjusted:?}"),
        }
    }
    assert_eq!(holm(&[Some(0.9), Some(0.8)]), [Some(1.0), Some(1.0)]);
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// Two-sided 95% critical values of Student's t, as printed in every
/// t table (e.g. NIST/SEMATECH e-Handbook, Table 1.4.2.7.2).
#[test]
fn t_quantiles_match_a_printed_table() {
    for (df, t) in [
        (1.0, 12.706),
        (2.0, 4.303),
        (3.0, 3.182),
        (4.0, 2.776),
        (5.0, 2.571),
        (9.0, 2.262),
        (10.0, 2.228),
        (29.0, 2.045),
        (100.0, 1.984),
    ] {
        assert!(
            close(t_star(df, 0.05), t, 5e-4),
            "df {df}: {}",
            t_star(df, 0.05)
        );
    }
    // 99%, and a one-sided tail
    assert!(close(t_star(4.0, 0.01), 4.604, 5e-4));
    assert!(close(t_upper(1.833, 9.0), 0.05, 5e-4));
}

/// With two degrees of freedom the t distribution has a closed form,
/// P(T > t) = 1/2 - t / (2 sqrt(t^2 + 2)): differences 1, 2, 3 have mean
/// 2, sd 1, se 1/sqrt(3), t = 2 sqrt(3) = 3.4641, so the two-sided p
/// is 1 - 2 sqrt(3) / sqrt(14) = 0.074180.
#[test]
fn a_paired_test_worked_by_hand() {
    let d = paired(&[11.0, 12.0, 13.0], &[10.0, 10.0, 10.0]).unwrap();
    assert_eq!(d.test, Test::Paired);
    assert!(close(d.effect, 2.0, 1e-12));
    assert!(close(d.se, 1.0 / 3f64.sqrt(), 1e-12));
    let p = 1.0 - 2.0 * 3f64.sqrt() / 14f64.sqrt();
    assert!(close(d.p_two_sided(), p, 1e-9), "{}", d.p_two_sided());
    // the 95% interval: 2 -+ 4.303 / sqrt(3)
    let (lo, hi) = d.interval(0.05);
    assert!(close(lo, 2.0 - 4.3027 / 3f64.sqrt(), 1e-3), "{lo}");
    assert!(close(hi, 2.0 + 4.3027 / 3f64.sqrt(), 1e-3), "{hi}");
    assert!(paired(&[1.0], &[2.0]).is_none());
}

/// Welch's test worked by hand: a = 1, 2, 3, 4 (mean 2.5, var 5/3),
/// b = 2, 4, 6, 8 (mean 5, var 20/3); se^2 = 5/12 + 20/12 = 25/12,
/// t = -2.5 / sqrt(25/12) = -1.7321 = -sqrt(3);
/// df = (25/12)^2 / ((5/12)^2 / 3 + (20/12)^2 / 3) = 625 / 425 * 3 = 4.4118.
#[test]
fn a_welch_test_worked_by_hand() {
    let d = welch(&[1.0, 2.0, 3.0, 4.0], &[2.0, 4.0, 6.0, 8.0]).unwrap();
    assert!(close(d.effect, -2.5, 1e-12));
    assert!(close(d.se, (25.0f64 / 12.0).sqrt(), 1e-12));
    assert!(close(d.df, 625.0 / 425.0 * 3.0, 1e-9), "{}", d.df);
    // between the table's two-sided p at df 4 (t 1.7321: 0.1583) and
    // df 5 (0.1438); scipy.stats.ttest_ind(a, b, equal_var=False)
    // gives 0.1516
    let p = d.p_two_sided();
    assert!(close(p, 0.1516, 5e-4), "{p}");
    assert!(welch(&[1.0], &[1.0, 2.0]).is_none());
}

/// The audit's example: Table 2's Moniqua and CHOCO at 1 bit, seeds
/// 0, 1, 2 (avg_test_accuracy in results/table2/runs.csv): Welch p
/// about 0.24, paired by seed about 0.39 (scipy.stats 1.x: 0.2392, 0.3888).
#[test]
fn the_audits_numbers() {
    let moniqua = [0.8556, 0.8636, 0.8628];
    let choco = [0.8584, 0.8516, 0.8580];
    let w = welch(&moniqua, &choco).unwrap();
    assert!(close(w.p_two_sided(), 0.2392, 5e-4), "{}", w.p_two_sided());
    let p = paired(&moniqua, &choco).unwrap();
    assert!(close(p.p_two_sided(), 0.3888, 5e-4), "{}", p.p_two_sided());
}

#[test]
fn equivalence_needs_the_interval_inside_the_margin() {
    // effect 0.1, se 0.1, df 9: both one-sided tests at margin 1 reject
    let d = Difference {
        test: Test::Welch,
        effect: 0.1,
        se: 0.1,
        df: 9.0,
        n_a: 10,
        n_b: 10,
    };
    // (1 - 0.1) / 0.1 = 9 standard errors to the upper margin
    assert!(d.p_equivalent(1.0) < 1e-5);
    // margin 0.2: only one standard error above, p = P(T > 1) at df 9
    assert!(close(d.p_equivalent(0.2), t_upper(1.0, 9.0), 1e-12));
    assert!(close(t_upper(1.0, 9.0), 0.1717, 5e-4));
    // no spread: equivalent exactly when the effect is inside
    let exact = Difference { se: 0.0, ..d };
    assert_eq!(exact.p_equivalent(0.2), 0.0);
    assert_eq!(exact.p_equivalent(0.05), 1.0);
    assert_eq!(exact.p_two_sided(), 0.0);
}

#[test]
fn mean_intervals_use_t() {
    // 1, 2, 3: mean 2, sd 1, half-width 4.303 / sqrt(3) = 2.484
    let m = mean_ci(&[1.0, 2.0, 3.0], 0.05);
    assert_eq!(m.n, 3);
    assert!(close(m.mean, 2.0, 1e-12));
    assert!(close(m.half, 2.4842, 5e-4), "{}", m.half);
    assert!(mean_ci(&[5.0], 0.05).half.is_nan());
}

/// Exact counts: 3 of 3 is p = 1/8 against a fair coin; 10 of 10
/// is 1/1024. Clopper-Pearson for 3 of 3 at 95%: lower bound
/// 0.025^(1/3) = 0.2924; for 0 of 10 the upper is 1 - 0.025^(1/10).
#[test]
fn exact_tests_of_counts() {
    assert!(close(binomial_at_least(3, 3, 0.5), 0.125, 1e-12));
    assert!(close(binomial_at_least(10, 10, 0.5), 1.0 / 1024.0, 1e-12));
    assert!(close(binomial_at_least(2, 3, 0.5), 0.5, 1e-12));
    assert!(close(binomial_at_most(0, 3, 0.5), 0.125, 1e-12));
    let (lo, hi) = clopper_pearson(3, 3, 0.05);
    assert!(
        close(lo, 0.025f64.powf(1.0 / 3.0), 1e-6) && hi == 1.0,
        "{lo}"
    );
    let (lo, hi) = clopper_pearson(0, 10, 0.05);
    assert!(
        lo == 0.0 && close(hi, 1.0 - 0.025f64.powf(0.1), 1e-6),
        "{hi}"
    );
    // Fisher: 3 of 3 against 0 of 3 failed: p = 1 / C(6, 3) = 0.05
    assert!(close(fisher_greater(3, 3, 0, 3), 0.05, 1e-12));
    // exactly the level is not below it, whatever the rounding
    assert!(!below(fisher_greater(3, 3, 0, 3), 0.05));
    assert!(below(0.0499, 0.05));
    // 2 of 3 against 0 of 3: (C(3,2) C(3,0)) / C(6,2) + ... = 0.2
    assert!(close(fisher_greater(2, 3, 0, 3), 0.2, 1e-12));
    assert!(close(fisher_greater(0, 3, 3, 3), 1.0, 1e-12));
}

/// The log-rank test by hand on two tiny samples: a's events at 1 and 2,
/// b's at 3 and 4. At t=1 four at risk, E = 1/2, V = 1/4; at t=2 three,
/// E = 1/3, V = 2/9; then a has none at risk. O = 2, E = 5/6, V = 17/36:
/// chi-square 2.882, p 0.0896 (what R's survdiff gives).
#[test]
fn the_log_rank_test_counts_events_at_risk() {
    let t = |at: f64, reached: bool| Timed { at, reached };
    let lr = log_rank(&[t(1.0, true), t(2.0, true)], &[t(3.0, true), t(4.0, true)]).unwrap();
    assert_eq!(lr.observed, 2.0);
    assert!((lr.expected - 5.0 / 6.0).abs() < 1e-12, "{lr:?}");
    let chi2 = (lr.observed - lr.expected).powi(2) / (17.0 / 36.0);
    assert!((chi2 - 2.882).abs() < 1e-3, "{chi2}");
    assert!((lr.p - 0.0896).abs() < 1e-3, "{lr:?}");
    assert!(lr.a_sooner());
    // b censored after a's last event: the same test (a has none at risk)
    let late = log_rank(
        &[t(1.0, true), t(2.0, true)],
        &[t(2.5, false), t(2.5, false)],
    )
    .unwrap();
    assert!((late.p - lr.p).abs() < 1e-12, "{late:?}");
    // censored early, a run is at risk no more: fewer of b at risk at t=1
    // and 2 (E = 2/3 + 1/2, V = 2/9 + 1/4), weaker evidence, p 0.225
    let early = log_rank(
        &[t(1.0, true), t(2.0, true)],
        &[t(0.5, false), t(3.0, true)],
    )
    .unwrap();
    assert!((early.expected - 7.0 / 6.0).abs() < 1e-12, "{early:?}");
    assert!((early.p - 0.2252).abs() < 1e-3, "{early:?}");
    // swapped sides: the same p, the other direction
    let back = log_rank(&[t(3.0, true), t(4.0, true)], &[t(1.0, true), t(2.0, true)]).unwrap();
    assert!((back.p - lr.p).abs() < 1e-12 && !back.a_sooner());
    // nobody reached it: nothing to test
    assert!(log_rank(&[t(5.0, false)], &[t(5.0, false)]).is_none());
}
