//! The statistics behind every interval and verdict: Student's t intervals
//! of a mean, paired and Welch t-tests of a difference, two one-sided tests
//! for equivalence, exact tests of divergence counts, the rank tests that
//! sit beside the t-tests (Wilcoxon signed-rank, Mann-Whitney), and Holm's
//! adjustment of a manifest's p-values. The distributions
//! come from `statrs`; the tests below check them against published table
//! values and hand-worked examples.

use statrs::distribution::{Beta, ContinuousCDF, Normal, StudentsT};
use statrs::function::factorial::ln_binomial;

/// The two-sided `1 - level` quantile of Student's t with `df` degrees of
/// freedom: the `t*` of a `1 - level` confidence interval.
pub fn t_star(df: f64, level: f64) -> f64 {
    if df.is_nan() {
        return f64::NAN;
    }
    t_dist(df).inverse_cdf(1.0 - level / 2.0)
}

/// P(T > t) for Student's t with `df` degrees of freedom; NaN when `t`
/// or `df` is NaN, 0 or 1 at an infinite `t`.
pub fn t_upper(t: f64, df: f64) -> f64 {
    if t.is_nan() || df.is_nan() {
        return f64::NAN;
    }
    if t.is_infinite() {
        return if t > 0.0 { 0.0 } else { 1.0 };
    }
    t_dist(df).sf(t)
}

fn t_dist(df: f64) -> StudentsT {
    // df > 0 by construction of every caller (n >= 2); an overflowed df is
    // the normal distribution's, near enough (statrs would panic on it)
    let df = if df.is_finite() { df } else { MAX_DF };
    StudentsT::new(0.0, 1.0, df.clamp(f64::MIN_POSITIVE, MAX_DF)).expect("a valid t distribution")
}

/// The degrees of freedom past which Student's t is taken as the normal.
const MAX_DF: f64 = 1e9;

/// Whether a p-value is below `level`. A p-value equal to the level up
/// to rounding (1/20 from an exact test, computed through logarithms) is
/// not below it.
pub fn below(p: f64, level: f64) -> bool {
    p < level * (1.0 - 1e-9)
}

/// The mean of `xs`, its sample standard deviation and the count.
pub fn mean_sd(xs: &[f64]) -> (f64, f64, usize) {
    let n = xs.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, 0);
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let sd = if n > 1 {
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        f64::NAN
    };
    if (mean.is_finite() && (n < 2 || sd.is_finite())) || !xs.iter().all(|x| x.is_finite()) {
        return (mean, sd, n);
    }
    // finite values whose sum or squares overflow (1e308): the same
    // statistics of the values scaled down by the largest, scaled back
    let big = xs.iter().fold(0.0_f64, |m, x| m.max(x.abs()));
    let scaled: Vec<f64> = xs.iter().map(|x| x / big).collect();
    let (m, s, _) = mean_sd(&scaled);
    (m * big, s * big, n)
}

/// A mean with its t interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanCi {
    pub mean: f64,
    /// Half the interval's width (NaN for one value).
    pub half: f64,
    pub n: usize,
}

/// The mean of `xs` and the half-width of its `1 - level` t interval.
pub fn mean_ci(xs: &[f64], level: f64) -> MeanCi {
    let (mean, sd, n) = mean_sd(xs);
    let half = if n > 1 {
        t_star((n - 1) as f64, level) * sd / (n as f64).sqrt()
    } else {
        f64::NAN
    };
    MeanCi { mean, half, n }
}

/// Which test compared two samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// The differences of runs paired by seed, one-sample t.
    Paired,
    /// Two independent samples, unequal variances.
    Welch,
}

impl Test {
    pub fn name(self) -> &'static str {
        match self {
            Test::Paired => "paired t",
            Test::Welch => "Welch t",
        }
    }
}

/// A difference of means `a - b` as a t statistic sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    pub test: Test,
    /// The estimate of `mean(a) - mean(b)`.
    pub effect: f64,
    /// Its standard error, and the t distribution's degrees of freedom.
    pub se: f64,
    pub df: f64,
    /// Values on each side (pairs, for a paired test: both the same).
    pub n_a: usize,
    pub n_b: usize,
}

impl Difference {
    /// The `1 - level` confidence interval of the effect.
    pub fn interval(&self, level: f64) -> (f64, f64) {
        if self.se == 0.0 {
            return (self.effect, self.effect);
        }
        let h = t_star(self.df, level) * self.se;
        (self.effect - h, self.effect + h)
    }

    /// The one-sided p-value of "the true effect is at most `shift`".
    pub fn p_at_most(&self, shift: f64) -> f64 {
        if self.se == 0.0 {
            // no spread: the observed difference is the difference
            return if self.effect > shift { 0.0 } else { 1.0 };
        }
        t_upper((self.effect - shift) / self.se, self.df)
    }

    /// The one-sided p-value of "the true effect is at least `shift`".
    pub fn p_at_least(&self, shift: f64) -> f64 {
        if self.se == 0.0 {
            return if self.effect < shift { 0.0 } else { 1.0 };
        }
        t_upper((shift - self.effect) / self.se, self.df)
    }

    /// The two-sided p-value of "no difference".
    pub fn p_two_sided(&self) -> f64 {
        if self.se == 0.0 {
            return if self.effect == 0.0 { 1.0 } else { 0.0 };
        }
        (2.0 * t_upper(self.effect.abs() / self.se, self.df)).min(1.0)
    }

    /// The p-value of two one-sided tests that the effect lies within
    /// `(-margin, margin)`: the larger of the two one-sided p-values.
    pub fn p_equivalent(&self, margin: f64) -> f64 {
        self.p_at_most(-margin).max(self.p_at_least(margin))
    }
}

/// The paired t-test of `a[i] - b[i]`; None with fewer than two pairs.
pub fn paired(a: &[f64], b: &[f64]) -> Option<Difference> {
    assert_eq!(a.len(), b.len(), "paired samples");
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let (mean, sd, n) = mean_sd(&d);
    (n >= 2).then(|| Difference {
        test: Test::Paired,
        effect: mean,
        se: sd / (n as f64).sqrt(),
        df: (n - 1) as f64,
        n_a: n,
        n_b: n,
    })
}

/// Welch's t-test of `mean(a) - mean(b)`, with the Welch-Satterthwaite
/// degrees of freedom; None unless each side has two values.
pub fn welch(a: &[f64], b: &[f64]) -> Option<Difference> {
    let (ma, sa, na) = mean_sd(a);
    let (mb, sb, nb) = mean_sd(b);
    welch_of((ma, sa, na), (mb, sb, nb))
}

/// [`welch`] from each side's mean, sample sd and size.
pub fn welch_of(a: (f64, f64, usize), b: (f64, f64, usize)) -> Option<Difference> {
    let ((ma, sa, na), (mb, sb, nb)) = (a, b);
    if na < 2 || nb < 2 {
        return None;
    }
    let (va, vb) = (sa * sa / na as f64, sb * sb / nb as f64);
    let se = (va + vb).sqrt();
    let df = if va + vb == 0.0 {
        (na + nb - 2) as f64
    } else {
        (va + vb).powi(2) / (va * va / (na - 1) as f64 + vb * vb / (nb - 1) as f64)
    };
    Some(Difference {
        test: Test::Welch,
        effect: ma - mb,
        se,
        df,
        n_a: na,
        n_b: nb,
    })
}

/// Values, each labelled by the seed of the run it came from.
pub type Seeded = Vec<(String, f64)>;

/// Two sides of values labelled by their seed, as a comparison takes
/// them: in pairs when both ran the same seeds (each once), else as two
/// independent samples.
enum Sides {
    Paired(Vec<f64>, Vec<f64>),
    Independent(Vec<f64>, Vec<f64>),
}

fn sides(a: &[(String, f64)], b: &[(String, f64)]) -> Sides {
    let mut sa = a.to_vec();
    let mut sb = b.to_vec();
    sa.sort_by(|x, y| x.0.cmp(&y.0));
    sb.sort_by(|x, y| x.0.cmp(&y.0));
    let distinct = sa.windows(2).all(|w| w[0].0 != w[1].0);
    let same_seeds =
        distinct && sa.len() == sb.len() && sa.iter().zip(&sb).all(|(x, y)| x.0 == y.0);
    let values = |s: &[(String, f64)]| s.iter().map(|x| x.1).collect::<Vec<_>>();
    if same_seeds {
        Sides::Paired(values(&sa), values(&sb))
    } else {
        Sides::Independent(values(&sa), values(&sb))
    }
}

/// `mean(a) - mean(b)` for values labelled by their seed: the paired test
/// when both sides have the same seeds (each once), Welch's otherwise.
/// None with fewer than two values a side, or with a value that is not
/// finite (a failed run of an unbounded metric: only ranks compare it).
pub fn difference(a: &[(String, f64)], b: &[(String, f64)]) -> Option<Difference> {
    if a.iter().chain(b).any(|(_, v)| !v.is_finite()) {
        return None;
    }
    let d = match sides(a, b) {
        Sides::Paired(va, vb) => paired(&va, &vb),
        Sides::Independent(va, vb) => welch(&va, &vb),
    }?;
    // values so large their difference overflows test nothing
    (d.effect.is_finite() && d.se.is_finite()).then_some(d)
}

/// P(X >= k) for X ~ Binomial(n, p), summed exactly.
pub fn binomial_at_least(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    (k..=n).map(|i| binomial_pmf(i, n, p)).sum::<f64>().min(1.0)
}

/// P(X <= k) for X ~ Binomial(n, p).
pub fn binomial_at_most(k: u64, n: u64, p: f64) -> f64 {
    (0..=k.min(n))
        .map(|i| binomial_pmf(i, n, p))
        .sum::<f64>()
        .min(1.0)
}

fn binomial_pmf(i: u64, n: u64, p: f64) -> f64 {
    if p <= 0.0 {
        return if i == 0 { 1.0 } else { 0.0 };
    }
    if p >= 1.0 {
        return if i == n { 1.0 } else { 0.0 };
    }
    (ln_binomial(n, i) + i as f64 * p.ln() + (n - i) as f64 * (1.0 - p).ln()).exp()
}

/// The Clopper-Pearson `1 - level` interval of a proportion `k / n`.
pub fn clopper_pearson(k: u64, n: u64, level: f64) -> (f64, f64) {
    let (k, n) = (k as f64, n as f64);
    let lo = if k == 0.0 {
        0.0
    } else {
        Beta::new(k, n - k + 1.0)
            .expect("a valid beta")
            .inverse_cdf(level / 2.0)
    };
    let hi = if k == n {
        1.0
    } else {
        Beta::new(k + 1.0, n - k)
            .expect("a valid beta")
            .inverse_cdf(1.0 - level / 2.0)
    };
    (lo, hi)
}

/// Fisher's exact test, one-sided: the p-value of "A's runs fail no more
/// often than B's" when `ka` of `na` and `kb` of `nb` failed (the chance,
/// with the margins fixed, of A having `ka` or more of the failures).
pub fn fisher_greater(ka: u64, na: u64, kb: u64, nb: u64) -> f64 {
    let k = ka + kb;
    let n = na + nb;
    let pmf = |x: u64| (ln_binomial(na, x) + ln_binomial(nb, k - x) - ln_binomial(n, k)).exp();
    let hi = k.min(na);
    (ka..=hi)
        .filter(|x| k - x <= nb)
        .map(pmf)
        .sum::<f64>()
        .min(1.0)
}

/// A rank test of two samples: which one, and its exact two-sided p.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankTest {
    pub name: &'static str,
    pub p: f64,
}

/// The rank test beside [`difference`]'s t-test: Wilcoxon's signed-rank
/// test where both sides ran the same seeds, Mann-Whitney's otherwise;
/// None where the t-test has too few values too.
pub fn rank_test(a: &[(String, f64)], b: &[(String, f64)]) -> Option<RankTest> {
    match sides(a, b) {
        Sides::Paired(va, vb) => (va.len() >= 2).then(|| {
            // two equal values (two infinities too) are a zero difference
            let d: Vec<f64> = va
                .iter()
                .zip(&vb)
                .map(|(x, y)| if x == y { 0.0 } else { x - y })
                .collect();
            RankTest {
                name: "Wilcoxon signed-rank",
                p: wilcoxon_signed_rank(&d),
            }
        }),
        Sides::Independent(va, vb) => (va.len() >= 2 && vb.len() >= 2).then(|| RankTest {
            name: "Mann-Whitney",
            p: mann_whitney(&va, &vb),
        }),
    }
}

/// A time to an event: when it happened, or when the run ended without
/// it (`reached` false: censored there).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timed {
    pub at: f64,
    pub reached: bool,
}

/// The log-rank test of two samples of times, some censored: `a`'s
/// events observed and expected under equal hazards, and the two-sided p
/// of `(O - E) / sqrt(V)` against the normal distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogRank {
    pub observed: f64,
    pub expected: f64,
    pub p: f64,
}

impl LogRank {
    /// Whether `a` reached the event sooner than `b` would have at equal
    /// hazards (more events than expected).
    pub fn a_sooner(&self) -> bool {
        self.observed > self.expected
    }
}

/// The log-rank (Mantel-Cox) test of `a` against `b`: at each time an
/// event happened, the runs still at risk (a run censored at `t` is at
/// risk at `t`) and the events of each side. None where no event
/// happened or the variance is zero (every run of one side done before
/// the other's first event and nothing left to compare).
pub fn log_rank(a: &[Timed], b: &[Timed]) -> Option<LogRank> {
    if a.iter().chain(b).any(|t| t.at.is_nan()) {
        return None;
    }
    let mut times: Vec<f64> = a
        .iter()
        .chain(b)
        .filter(|t| t.reached)
        .map(|t| t.at)
        .collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    let (mut observed, mut expected, mut variance) = (0.0, 0.0, 0.0);
    for &t in &times {
        let at_risk = |s: &[Timed]| s.iter().filter(|x| x.at >= t).count() as f64;
        let events = |s: &[Timed]| s.iter().filter(|x| x.reached && x.at == t).count() as f64;
        let (n1, n2, d1) = (at_risk(a), at_risk(b), events(a));
        let (n, d) = (n1 + n2, d1 + events(b));
        observed += d1;
        expected += d * n1 / n;
        if n > 1.0 {
            variance += d * (n1 / n) * (n2 / n) * (n - d) / (n - 1.0);
        }
    }
    if variance.is_nan() || variance <= 0.0 {
        return None;
    }
    let z = (observed - expected) / variance.sqrt();
    let normal = Normal::new(0.0, 1.0).ok()?;
    Some(LogRank {
        observed,
        expected,
        p: (2.0 * normal.sf(z.abs())).min(1.0),
    })
}

/// The most arrangements [`permutation_test`] enumerates (2^20).
const MAX_ARRANGEMENTS: f64 = 1_048_576.0;

/// The exact permutation test of `mean(a) - mean(b)` for values labelled
/// by their seed, two-sided: where both sides ran the same seeds, every
/// sign assignment of the paired differences; otherwise every split of
/// the pooled values into groups of the two sizes. The share of
/// arrangements whose statistic is at least as far from zero as the
/// observed one. None with fewer than two values a side, a value that is
/// not finite, or more than 2^20 arrangements (the t and rank tests stand
/// alone there).
pub fn permutation_test(a: &[(String, f64)], b: &[(String, f64)]) -> Option<f64> {
    if a.iter().chain(b).any(|(_, v)| !v.is_finite()) {
        return None;
    }
    // the statistic's distance from zero, with room for rounding
    let at_least = |x: f64, observed: f64| x.abs() >= observed.abs() * (1.0 - 1e-9) - 1e-12;
    match sides(a, b) {
        Sides::Paired(va, vb) => {
            let d: Vec<f64> = va.iter().zip(&vb).map(|(x, y)| x - y).collect();
            if d.len() < 2 || 2f64.powi(d.len() as i32) > MAX_ARRANGEMENTS {
                return None;
            }
            let observed: f64 = d.iter().sum();
            let total = 1u64 << d.len();
            let extreme = (0..total)
                .filter(|signs| {
                    let s: f64 = d
                        .iter()
                        .enumerate()
                        .map(|(i, x)| if signs >> i & 1 == 1 { -x } else { *x })
                        .sum();
                    at_least(s, observed)
                })
                .count();
            Some(extreme as f64 / total as f64)
        }
        Sides::Independent(va, vb) => {
            let (na, nb) = (va.len(), vb.len());
            if na < 2 || nb < 2 || arrangements(na, nb) > MAX_ARRANGEMENTS {
                return None;
            }
            let pooled: Vec<f64> = va.iter().chain(&vb).copied().collect();
            let total: f64 = pooled.iter().sum();
            let stat = |sum_a: f64| sum_a / na as f64 - (total - sum_a) / nb as f64;
            let observed = stat(va.iter().sum());
            let (mut extreme, mut all) = (0u64, 0u64);
            // every choice of na of the pooled values, by recursion
            fn choose(from: &[f64], k: usize, sum: f64, visit: &mut dyn FnMut(f64)) {
                if k == 0 {
                    visit(sum);
                    return;
                }
                for i in 0..=from.len() - k {
                    choose(&from[i + 1..], k - 1, sum + from[i], visit);
                }
            }
            choose(&pooled, na, 0.0, &mut |sum_a| {
                all += 1;
                if at_least(stat(sum_a), observed) {
                    extreme += 1;
                }
            });
            Some(extreme as f64 / all as f64)
        }
    }
}

/// C(na + nb, na), as a float.
fn arrangements(na: usize, nb: usize) -> f64 {
    (ln_binomial((na + nb) as u64, na as u64)).exp()
}

/// The smallest two-sided p an exact test of seeded sides can give:
/// 2 / 2^n paired, 2 / C(na + nb, na) otherwise (no ties). When it is not
/// below a claim's level, no rank or permutation test can support it.
pub fn smallest_exact_p(a: &[(String, f64)], b: &[(String, f64)]) -> Option<f64> {
    match sides(a, b) {
        Sides::Paired(va, _) => {
            (va.len() >= 2).then(|| (2.0 / 2f64.powi(va.len() as i32)).min(1.0))
        }
        Sides::Independent(va, vb) => (va.len() >= 2 && vb.len() >= 2)
            .then(|| (2.0 / arrangements(va.len(), vb.len())).min(1.0)),
    }
}

/// Twice the midranks of `xs` (ties share the mean of their ranks), as
/// integers: ranks 1.. doubled, so a tie of two at ranks 3 and 4 is 7 each.
fn doubled_midranks(xs: &[f64]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..xs.len()).collect();
    order.sort_by(|&i, &j| xs[i].total_cmp(&xs[j]));
    let mut ranks = vec![0u64; xs.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && xs[order[j + 1]] == xs[order[i]] {
            j += 1;
        }
        // ranks i+1 ..= j+1, doubled mean: (i + 1) + (j + 1)
        for &k in &order[i..=j] {
            ranks[k] = (i + j + 2) as u64;
        }
        i = j + 1;
    }
    ranks
}

/// The exact two-sided p of a statistic whose null distribution is
/// `counts` (count of outcomes at each value), observed at `at`.
fn two_sided(counts: &[f64], at: usize) -> f64 {
    let total: f64 = counts.iter().sum();
    let low: f64 = counts[..=at].iter().sum::<f64>() / total;
    let high: f64 = counts[at..].iter().sum::<f64>() / total;
    (2.0 * low.min(high)).min(1.0)
}

/// Wilcoxon's signed-rank test of paired differences `d`, exact two-sided
/// p under random signs: zero differences are dropped (Wilcoxon's rule),
/// tied magnitudes share midranks, and the null distribution is counted
/// over every sign assignment of those ranks. No difference left: 1.
pub fn wilcoxon_signed_rank(d: &[f64]) -> f64 {
    let nonzero: Vec<f64> = d.iter().copied().filter(|x| *x != 0.0).collect();
    if nonzero.is_empty() {
        return 1.0;
    }
    let ranks = doubled_midranks(&nonzero.iter().map(|x| x.abs()).collect::<Vec<_>>());
    let total: u64 = ranks.iter().sum();
    // ways to reach each sum of the positive differences' ranks
    let mut ways = vec![0f64; total as usize + 1];
    ways[0] = 1.0;
    for &r in &ranks {
        for s in (r as usize..ways.len()).rev() {
            ways[s] += ways[s - r as usize];
        }
    }
    let positive: u64 = nonzero
        .iter()
        .zip(&ranks)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| r)
        .sum();
    two_sided(&ways, positive as usize)
}

/// The Mann-Whitney (Wilcoxon rank-sum) test of `a` against `b`, exact
/// two-sided p: midranks for ties, the null distribution of `a`'s rank sum
/// counted over every way to choose `a`'s positions among both.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> f64 {
    let pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    let ranks = doubled_midranks(&pooled);
    let total: u64 = ranks.iter().sum();
    let k = a.len();
    // ways[j][s]: subsets of j ranks summing to s
    let mut ways = vec![vec![0f64; total as usize + 1]; k + 1];
    ways[0][0] = 1.0;
    for &r in &ranks {
        for j in (1..=k).rev() {
            for s in (r as usize..=total as usize).rev() {
                ways[j][s] += ways[j - 1][s - r as usize];
            }
        }
    }
    let observed: u64 = ranks[..k].iter().sum();
    two_sided(&ways[k], observed as usize)
}

/// Holm's step-down adjustment of a family of p-values (None: no test,
/// left out of the family): the i-th smallest of m is multiplied by
/// `m - i + 1`, and the adjusted values are kept in order (at most 1).
pub fn holm(ps: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut order: Vec<usize> = (0..ps.len()).filter(|&i| ps[i].is_some()).collect();
    order.sort_by(|&i, &j| ps[i].unwrap_or(1.0).total_cmp(&ps[j].unwrap_or(1.0)));
    let m = order.len();
    let mut out = vec![None; ps.len()];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        let adjusted = ((m - rank) as f64 * ps[i].unwrap_or(1.0)).min(1.0);
        running = running.max(adjusted);
        out[i] = Some(running);
    }
    out
}

#[cfg(test)]
mod tests;
