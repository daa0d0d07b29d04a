//! Dealing samples to workers.

use repro_algos::rng::Rng;

use super::DataError;

/// How samples are dealt to workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Partition {
    /// A seeded shuffle, then equal contiguous shares.
    Iid,
    /// Sorted by label, then equal contiguous shares: with as many workers as
    /// classes each worker sees one label (the paper's Figure 2a).
    ByLabel,
    /// Per class, shares drawn from a symmetric Dirichlet(alpha): small alpha
    /// gives skewed label mixes, large alpha approaches iid.
    Dirichlet { alpha: f64 },
}

/// Sample indices for each of `workers` workers; every sample goes to exactly
/// one worker and every worker gets at least one.
pub fn partition(
    labels: &[u8],
    workers: usize,
    how: Partition,
    seed: u64,
) -> Result<Vec<Vec<usize>>, DataError> {
    let fail = |reason: String| DataError::Partition {
        samples: labels.len(),
        workers,
        reason,
    };
    if workers == 0 || labels.len() < workers {
        return Err(fail("every worker needs at least one sample".into()));
    }
    let mut rng = Rng::new(seed, 0xDA7A);
    let shares = |order: &[usize]| -> Vec<Vec<usize>> {
        let per = order.len() as f64 / workers as f64;
        (0..workers)
            .map(|w| order[(w as f64 * per) as usize..((w + 1) as f64 * per) as usize].to_vec())
            .collect()
    };
    match how {
        Partition::Iid => {
            let mut order: Vec<usize> = (0..labels.len()).collect();
            shuffle(&mut order, &mut rng);
            Ok(shares(&order))
        }
        Partition::ByLabel => {
            let mut order: Vec<usize> = (0..labels.len()).collect();
            order.sort_by_key(|&i| (labels[i], i));
            Ok(shares(&order))
        }
        Partition::Dirichlet { alpha } => {
            if !(alpha > 0.0 && alpha.is_finite()) {
                return Err(fail(format!(
                    "Dirichlet alpha must be positive, got {alpha}"
                )));
            }
            let mut out = vec![Vec::new(); workers];
            for class in 0..=u8::MAX {
                let mut members: Vec<usize> =
                    (0..labels.len()).filter(|&i| labels[i] == class).collect();
                if members.is_empty() {
                    continue;
                }
                shuffle(&mut members, &mut rng);
                let weights: Vec<f64> = (0..workers).map(|_| gamma(alpha, &mut rng)).collect();
                let total: f64 = weights.iter().sum();
                let mut start = 0;
                let mut cumulative = 0.0;
                for (w, weight) in weights.iter().enumerate() {
                    cumulative += weight / total;
                    let end = if w + 1 == workers {
                        members.len()
                    } else {
                        ((cumulative * members.len() as f64).round() as usize).min(members.len())
                    };
                    out[w].extend_from_slice(&members[start..end.max(start)]);
                    start = end.max(start);
                }
            }
            // a worker left empty by the draw takes one sample from the largest
            for w in 0..workers {
                if out[w].is_empty() {
                    let largest = (0..workers).max_by_key(|&v| out[v].len()).unwrap_or(0);
                    let moved = out[largest]
                        .pop()
                        .ok_or_else(|| fail("no samples to move".into()))?;
                    out[w].push(moved);
                }
            }
            Ok(out)
        }
    }
}

fn shuffle(v: &mut [usize], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i + 1));
    }
}

/// A Gamma(alpha, 1) variate (Marsaglia & Tsang; boosted for alpha < 1).
fn gamma(alpha: f64, rng: &mut Rng) -> f64 {
    if alpha < 1.0 {
        let u = 1.0 - rng.uniform();
        return gamma(alpha + 1.0, rng) * u.powf(1.0 / alpha);
    }
    let d = alpha - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = 1.0 - rng.uniform();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Vec<u8> {
        (0..1000).map(|i| (i % 10) as u8).collect()
    }

    fn check_cover(parts: &[Vec<usize>], n: usize) {
        let mut all: Vec<usize> = parts.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..n).collect::<Vec<_>>());
        assert!(parts.iter().all(|p| !p.is_empty()));
    }

    #[test]
    fn by_label_gives_one_label_per_worker_with_ten_workers() {
        let l = labels();
        let parts = partition(&l, 10, Partition::ByLabel, 0).unwrap();
        check_cover(&parts, 1000);
        for (w, p) in parts.iter().enumerate() {
            assert!(p.iter().all(|&i| l[i] == w as u8), "worker {w}");
        }
    }

    #[test]
    fn iid_mixes_labels_and_is_seeded() {
        let l = labels();
        let parts = partition(&l, 8, Partition::Iid, 3).unwrap();
        check_cover(&parts, 1000);
        for p in &parts {
            let distinct: std::collections::BTreeSet<u8> = p.iter().map(|&i| l[i]).collect();
            assert!(distinct.len() >= 8);
        }
        assert_eq!(parts, partition(&l, 8, Partition::Iid, 3).unwrap());
        assert_ne!(parts, partition(&l, 8, Partition::Iid, 4).unwrap());
    }

    #[test]
    fn dirichlet_skew_follows_alpha() {
        let l = labels();
        // mean over workers of the largest label share: near 1 for small
        // alpha, near 1/10 for large alpha
        let skew = |alpha| {
            let parts = partition(&l, 10, Partition::Dirichlet { alpha }, 1).unwrap();
            check_cover(&parts, 1000);
            parts
                .iter()
                .map(|p| {
                    let mut counts = [0usize; 10];
                    for &i in p {
                        counts[usize::from(l[i])] += 1;
                    }
                    *counts.iter().max().unwrap() as f64 / p.len() as f64
                })
                .sum::<f64>()
                / 10.0
        };
        let (low, high) = (skew(0.05), skew(100.0));
        assert!(low > 0.6, "alpha 0.05: {low}");
        assert!(high < 0.25, "alpha 100: {high}");
    }

    #[test]
    fn invalid_partitions_are_errors() {
        assert!(partition(&[1, 2], 3, Partition::Iid, 0).is_err());
        assert!(partition(&labels(), 4, Partition::Dirichlet { alpha: 0.0 }, 0).is_err());
    }

    #[test]
    fn gamma_has_the_right_mean() {
        let mut rng = Rng::new(1, 1);
        for alpha in [0.3, 1.0, 4.0] {
            let mean = (0..20_000).map(|_| gamma(alpha, &mut rng)).sum::<f64>() / 20_000.0;
            assert!(
                (mean - alpha).abs() < 0.05 * alpha.max(1.0),
                "alpha {alpha}: {mean}"
            );
        }
    }
}
