//! Objectives with analytic gradients, split across workers.
//!
//! `f(x) = 1/n sum_i f_i(x)`; worker `i` samples stochastic gradients of its
//! own `f_i`.

use crate::flat::{self, LOSS_LANES};

use crate::rng::Rng;

/// A distributed objective with a stochastic gradient oracle per worker.
pub trait Objective: Send + Sync {
    /// Dimension `d`.
    fn dim(&self) -> usize;
    /// Number of workers `n` the data is split across.
    fn workers(&self) -> usize;
    /// A stochastic gradient of `f_i` at `x` into `g`; returns the sampled loss.
    fn gradient(&self, worker: usize, x: &[f32], rng: &mut Rng, g: &mut [f32]) -> f64;
    /// `f(x)` (the global objective, no noise).
    fn loss(&self, x: &[f32]) -> f64;
    /// `grad f(x)` (the global gradient, no noise) into `g`.
    fn full_gradient(&self, x: &[f32], g: &mut [f32]);
    /// `|grad f(x)|^2`, each coordinate's f32 gradient squared in f64 and
    /// summed in order. Objectives that have the gradient in closed form
    /// compute it without a buffer.
    fn gradient_norm_sq(&self, x: &[f32]) -> f64 {
        let mut g = vec![0.0f32; x.len()];
        self.full_gradient(x, &mut g);
        g.iter().map(|&v| f64::from(v) * f64::from(v)).sum()
    }
    /// `Some` when the stochastic gradient can be computed a block of
    /// coordinates at a time (see [`Separable`]); the default is `None`.
    fn separable(&self) -> Option<&dyn Separable> {
        None
    }
    /// The samples the workers share, for objectives on data (an epoch is a
    /// worker's pass over its shard); `None` for analytic ones.
    fn samples(&self) -> Option<usize> {
        None
    }
    /// `f(x)` computed in f64 throughout where the objective can (data
    /// objectives: what `f(x_bar) - f*` is measured with), else [`loss`].
    ///
    /// [`loss`]: Objective::loss
    fn loss_f64(&self, x: &[f32]) -> f64 {
        self.loss(x)
    }
    /// `f*` to high precision, where the objective can compute it (L-BFGS
    /// in f64 on the whole data set); `None` otherwise.
    fn optimum(&self) -> Option<crate::minimize::Minimum> {
        None
    }
}

/// An objective whose stochastic gradient at coordinate `j` depends on
/// `x_j` alone (the quadratics): the simulator then runs a worker's
/// iteration a block of coordinates at a time, while they are in cache.
pub trait Separable: Sync {
    /// [`Objective::gradient`] of coordinates `from..from + x.len()` into
    /// `g`, adding to `lanes` (all zero before the first block) what the
    /// sampled loss sums. Blocks come in order, every one but the last a
    /// multiple of 64 long; taken together they write what `gradient`
    /// writes and draw what it draws from `rng`.
    fn gradient_block(
        &self,
        worker: usize,
        from: usize,
        x: &[f32],
        rng: &mut Rng,
        g: &mut [f32],
        lanes: &mut [f32; LOSS_LANES],
    );
    /// The sampled loss once every block is done: what `gradient` returns.
    fn block_loss(&self, lanes: &[f32; LOSS_LANES]) -> f64;
    /// [`gradient_block`](Self::gradient_block) turned into plain SGD's
    /// step (no momentum, no weight decay): `g = lr g`, the same bits as
    /// [`crate::Sgd::step_in_place`] after it; objectives may do both in
    /// one pass.
    #[allow(clippy::too_many_arguments)]
    fn step_block(
        &self,
        worker: usize,
        from: usize,
        x: &[f32],
        rng: &mut Rng,
        lr: f32,
        g: &mut [f32],
        lanes: &mut [f32; LOSS_LANES],
    ) {
        self.gradient_block(worker, from, x, rng, g, lanes);
        flat::sgd_step(lr, 0.0, 0.0, x, g, &mut []);
    }
}

/// `f_i(x) = |x - b_i|^2 / 2`, with Gaussian gradient noise of standard
/// deviation `sigma` per coordinate. Homogeneous when all `b_i` are equal.
#[derive(Debug, Clone)]
pub struct Quadratic {
    /// The distinct minimizers, each stored once.
    targets: Vec<Vec<f32>>,
    /// Worker `i`'s minimizer is `targets[of_worker[i]]`.
    of_worker: Vec<usize>,
    mean: Vec<f32>,
    /// The mean in f64, and `1/n sum_i |b_i - mean|^2`: the loss in closed
    /// form, `(|x - mean|^2 + spread) / 2`, costs O(d) instead of O(n d).
    mean64: Vec<f64>,
    spread: f64,
    sigma: f32,
}

impl Quadratic {
    /// Every worker has the same minimizer `b`, stored once.
    pub fn homogeneous(n: usize, b: Vec<f32>, sigma: f32) -> Self {
        Self::shared(vec![b], vec![0; n], sigma)
    }

    /// Worker `i` has minimizer `targets[i]`; the global minimizer is their mean.
    pub fn heterogeneous(targets: Vec<Vec<f32>>, sigma: f32) -> Self {
        let n = targets.len();
        Self::shared(targets, (0..n).collect(), sigma)
    }

    /// Worker `i` has minimizer `targets[of_worker[i]]`: n workers, each
    /// distinct minimizer stored once. The same objective, bit for bit, as
    /// `heterogeneous` with every worker's copy.
    pub fn shared(targets: Vec<Vec<f32>>, of_worker: Vec<usize>, sigma: f32) -> Self {
        let d = targets.first().map_or(0, Vec::len);
        assert!(
            targets.iter().all(|t| t.len() == d),
            "all targets need dimension {d}"
        );
        assert!(
            of_worker.iter().all(|&t| t < targets.len()),
            "every worker needs one of the {} targets",
            targets.len()
        );
        let (mean, mean64, spread) = mean_and_spread(&targets, &of_worker, d);
        Self {
            targets,
            of_worker,
            mean,
            mean64,
            spread,
            sigma,
        }
    }

    /// Worker `i`'s minimizer.
    fn target(&self, worker: usize) -> &[f32] {
        &self.targets[self.of_worker[worker]]
    }

    /// The global minimizer.
    pub fn minimizer(&self) -> &[f32] {
        &self.mean
    }
}

impl Objective for Quadratic {
    fn dim(&self) -> usize {
        self.mean.len()
    }

    fn workers(&self) -> usize {
        self.of_worker.len()
    }

    fn gradient(&self, worker: usize, x: &[f32], rng: &mut Rng, g: &mut [f32]) -> f64 {
        let mut lanes = [0.0f32; LOSS_LANES];
        self.gradient_block(worker, 0, x, rng, g, &mut lanes);
        self.block_loss(&lanes)
    }

    fn loss(&self, x: &[f32]) -> f64 {
        // 1/n sum_i |x - b_i|^2 / 2 = (|x - m|^2 + 1/n sum_i |b_i - m|^2) / 2
        // for the targets' mean m: one pass over x, not n
        let near = flat::squared_distance64(x, &self.mean64);
        0.5 * (near + self.spread)
    }

    fn full_gradient(&self, x: &[f32], g: &mut [f32]) {
        for ((gi, &xi), &m) in g.iter_mut().zip(x).zip(&self.mean) {
            *gi = xi - m;
        }
    }

    fn gradient_norm_sq(&self, x: &[f32]) -> f64 {
        // the f32 gradient x - m, squared in f64, without a buffer
        flat::squared_distance(x, &self.mean)
    }

    fn separable(&self) -> Option<&dyn Separable> {
        Some(self)
    }
}

/// The workers' minimizers' mean, in f32 (`sum_i b_i / n`, as
/// `sim::average` sums) and in f64, and `1/n sum_i |b_i - mean|^2`, each
/// coordinate summed over the workers in worker order. Coordinates are
/// taken a chunk at a time (on rayon's threads when there are many), the
/// chunk of each distinct target in cache while its mean and then its
/// spread terms are summed: O(n d) additions but O(t d) reads for t
/// distinct targets. A target's spread is the same for every worker that
/// has it, so it is computed once and summed per worker; within a chunk in
/// eight lanes (`j mod 8`), the chunks in order: the same value on any
/// number of threads.
fn mean_and_spread(
    targets: &[Vec<f32>],
    of_worker: &[usize],
    d: usize,
) -> (Vec<f32>, Vec<f64>, f64) {
    use rayon::prelude::*;
    const CHUNK: usize = 4096;
    let n = of_worker.len();
    let (nf, nd) = (n as f32, n.max(1) as f64);
    let (mut mean, mut mean64) = (flat::with_huge_pages(d), flat::with_huge_pages(d));
    mean.resize(d, 0.0f32);
    mean64.resize(d, 0.0f64);
    // each distinct target's sum of squares over chunk `c`
    let chunk = |(c, (m32, m64)): (usize, (&mut [f32], &mut [f64]))| -> Vec<f64> {
        let at = c * CHUNK;
        for &t in of_worker {
            let b = &targets[t][at..at + m32.len()];
            for ((a, a64), &v) in m32.iter_mut().zip(m64.iter_mut()).zip(b) {
                *a += v / nf;
                *a64 += f64::from(v);
            }
        }
        for a64 in m64.iter_mut() {
            *a64 /= nd;
        }
        targets
            .iter()
            .map(|b| {
                let mut lanes = [0.0f64; 8];
                for (j, (&v, &m)) in b[at..at + m64.len()].iter().zip(m64.iter()).enumerate() {
                    lanes[j % 8] += (f64::from(v) - m).powi(2);
                }
                lanes.iter().sum::<f64>()
            })
            .collect()
    };
    // below a million additions, waking threads costs more than it saves
    let parts: Vec<Vec<f64>> = if n * d >= 1 << 20 {
        mean.par_chunks_mut(CHUNK)
            .zip(mean64.par_chunks_mut(CHUNK))
            .enumerate()
            .map(chunk)
            .collect()
    } else {
        mean.chunks_mut(CHUNK)
            .zip(mean64.chunks_mut(CHUNK))
            .enumerate()
            .map(chunk)
            .collect()
    };
    let per_target: Vec<f64> = (0..targets.len())
        .map(|t| parts.iter().map(|p| p[t]).sum::<f64>())
        .collect();
    let spread = of_worker.iter().map(|&t| per_target[t]).sum::<f64>() / nd;
    (mean, mean64, spread)
}

impl Separable for Quadratic {
    fn gradient_block(
        &self,
        worker: usize,
        from: usize,
        x: &[f32],
        rng: &mut Rng,
        g: &mut [f32],
        lanes: &mut [f32; LOSS_LANES],
    ) {
        let b = &self.target(worker)[from..from + x.len()];
        // 64 independent f32 partial sums, vectorized: a single f64
        // accumulator would serialize the loop on the add latency
        flat::residual(x, b, g, lanes);
        if self.sigma > 0.0 {
            for gi in g.iter_mut() {
                *gi += self.sigma * rng.normal() as f32;
            }
        }
    }

    fn block_loss(&self, lanes: &[f32; LOSS_LANES]) -> f64 {
        0.5 * lanes.iter().map(|&l| f64::from(l)).sum::<f64>()
    }

    fn step_block(
        &self,
        worker: usize,
        from: usize,
        x: &[f32],
        rng: &mut Rng,
        lr: f32,
        g: &mut [f32],
        lanes: &mut [f32; LOSS_LANES],
    ) {
        if self.sigma > 0.0 {
            // the noise joins the gradient before the step
            self.gradient_block(worker, from, x, rng, g, lanes);
            flat::sgd_step(lr, 0.0, 0.0, x, g, &mut []);
        } else {
            let b = &self.target(worker)[from..from + x.len()];
            flat::residual_step(x, b, lr, g, lanes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadratic_loss_sums_in_sixty_four_lanes() {
        // the order the lanes are summed in is part of a run's determinism:
        // lane l holds coordinates l, l + 64, ... in increasing order
        for d in [1usize, 63, 64, 65, 100, 1000] {
            let b: Vec<f32> = (0..d).map(|i| (i as f32 * 0.7).sin()).collect();
            let x: Vec<f32> = (0..d).map(|i| (i as f32 * 1.3).cos() * 3.0).collect();
            let q = Quadratic::homogeneous(1, b.clone(), 0.0);
            let mut g = vec![0.0; d];
            let loss = q.gradient(0, &x, &mut Rng::new(1, 0), &mut g);
            let mut lanes = [0.0f32; 64];
            for (i, (&xi, &bi)) in x.iter().zip(&b).enumerate() {
                let r = xi - bi;
                lanes[i % 64] += r * r;
                assert_eq!(g[i], r);
            }
            let expected = 0.5 * lanes.iter().map(|&l| f64::from(l)).sum::<f64>();
            assert_eq!(loss.to_bits(), expected.to_bits(), "d = {d}");
        }
    }

    #[test]
    fn quadratic_gradient_in_blocks_is_the_whole_gradient() {
        let d = 1000;
        let targets: Vec<Vec<f32>> = (0..2)
            .map(|w| (0..d).map(|i| ((i + w) as f32 * 0.7).sin()).collect())
            .collect();
        let q = Quadratic::heterogeneous(targets, 0.5);
        let x: Vec<f32> = (0..d).map(|i| (i as f32 * 1.3).cos() * 3.0).collect();
        let (mut whole, mut rng) = (vec![0.0; d], Rng::new(3, 1));
        let loss = q.gradient(1, &x, &mut rng, &mut whole);
        for block in [64, 192, 512, 2048] {
            let (mut g, mut r, mut lanes) = (vec![0.0; d], Rng::new(3, 1), [0.0f32; LOSS_LANES]);
            for (at, (xb, gb)) in x.chunks(block).zip(g.chunks_mut(block)).enumerate() {
                q.gradient_block(1, at * block, xb, &mut r, gb, &mut lanes);
            }
            assert_eq!(g, whole, "block {block}");
            assert_eq!(q.block_loss(&lanes).to_bits(), loss.to_bits());
            assert_eq!(r.uniform().to_bits(), rng.clone().uniform().to_bits());
        }
    }

    #[test]
    fn quadratic_gradients() {
        let q = Quadratic::heterogeneous(vec![vec![1.0, 0.0], vec![3.0, 2.0]], 0.0);
        assert_eq!(q.minimizer(), &[2.0, 1.0]);
        let mut g = [0.0; 2];
        let mut rng = Rng::new(0, 0);
        let l = q.gradient(1, &[0.0, 0.0], &mut rng, &mut g);
        assert_eq!(g, [-3.0, -2.0]);
        assert_eq!(l, 6.5);
        q.full_gradient(&[2.0, 1.0], &mut g);
        assert_eq!(g, [0.0, 0.0]);
        assert_eq!(q.loss(&[2.0, 1.0]), 1.0);
    }

    /// The closed form is the mean of the n targets' losses, computed the
    /// long way in f64, on heterogeneous targets far from the point.
    #[test]
    fn quadratic_gradient_norm_is_the_full_gradients() {
        let (n, d) = (5, 1003);
        let targets: Vec<Vec<f32>> = (0..n)
            .map(|w| (0..d).map(|i| ((i * 3 + w) as f32 * 0.41).sin()).collect())
            .collect();
        let q = Quadratic::heterogeneous(targets, 0.0);
        let x: Vec<f32> = (0..d).map(|i| (i as f32 * 0.9).cos() * 2.0).collect();
        let mut g = vec![0.0f32; d];
        q.full_gradient(&x, &mut g);
        let direct: f64 = g.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        let fast = q.gradient_norm_sq(&x);
        assert!(
            (fast - direct).abs() <= 1e-12 * direct,
            "{fast} vs {direct}"
        );
        // and it is of this x: another gives another norm
        assert!((q.gradient_norm_sq(&g) - direct).abs() > 1e-3);
    }

    #[test]
    fn quadratic_loss_in_closed_form_is_the_mean_of_the_targets_losses() {
        // one chunk on this thread; many chunks on rayon's threads
        for (n, d) in [(9, 301), (3, 400_003)] {
            closed_form_loss_matches(n, d);
        }
    }

    fn closed_form_loss_matches(n: usize, d: usize) {
        let targets: Vec<Vec<f32>> = (0..n)
            .map(|w| {
                (0..d)
                    .map(|i| ((i * 7 + w * 13) as f32 * 0.37).sin() * (1.0 + w as f32))
                    .collect()
            })
            .collect();
        let q = Quadratic::heterogeneous(targets.clone(), 0.0);
        for scale in [0.0f32, 0.5, 40.0] {
            let x: Vec<f32> = (0..d).map(|i| (i as f32 * 1.1).cos() * scale).collect();
            let direct = targets
                .iter()
                .map(|b| {
                    x.iter()
                        .zip(b)
                        .map(|(&xi, &bi)| 0.5 * (f64::from(xi) - f64::from(bi)).powi(2))
                        .sum::<f64>()
                })
                .sum::<f64>()
                / n as f64;
            let closed = q.loss(&x);
            assert!(
                (closed - direct).abs() <= 1e-12 * direct,
                "{closed} vs {direct}"
            );
        }
    }

    /// Workers sharing a few distinct minimizers give the objective that
    /// every worker's own copy gives, bit for bit.
    #[test]
    fn shared_targets_behave_as_every_workers_copy() {
        let (n, d) = (23, 129);
        let distinct: Vec<Vec<f32>> = (0..5)
            .map(|t| {
                (0..d)
                    .map(|j| ((t * 7 + j * 3) % 11) as f32 / 10.0 - 0.4)
                    .collect()
            })
            .collect();
        let of_worker: Vec<usize> = (0..n).map(|i| (i * 3) % 5).collect();
        let copies: Vec<Vec<f32>> = of_worker.iter().map(|&t| distinct[t].clone()).collect();
        let shared = Quadratic::shared(distinct, of_worker, 0.2);
        let each = Quadratic::heterogeneous(copies, 0.2);
        assert_eq!(shared.workers(), n);
        assert_eq!(shared.minimizer(), each.minimizer());
        let x: Vec<f32> = (0..d).map(|i| (i as f32 * 0.7).sin()).collect();
        assert_eq!(shared.loss(&x).to_bits(), each.loss(&x).to_bits());
        for w in [0, 4, 22] {
            let (mut g1, mut g2) = (vec![0.0; d], vec![0.0; d]);
            let l1 = shared.gradient(w, &x, &mut Rng::new(5, w as u64), &mut g1);
            let l2 = each.gradient(w, &x, &mut Rng::new(5, w as u64), &mut g2);
            assert_eq!((g1, l1.to_bits()), (g2, l2.to_bits()), "worker {w}");
        }
    }

    #[test]
    fn a_shared_target_behaves_as_n_copies() {
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.3).sin() / 3.0).collect();
        let shared = Quadratic::homogeneous(7, b.clone(), 0.0);
        let copies = Quadratic::heterogeneous(vec![b; 7], 0.0);
        assert_eq!(shared.workers(), 7);
        assert_eq!(shared.minimizer(), copies.minimizer());
        let x: Vec<f32> = (0..37).map(|i| i as f32 * 0.01).collect();
        assert_eq!(shared.loss(&x).to_bits(), copies.loss(&x).to_bits());
        let (mut g1, mut g2) = (vec![0.0; 37], vec![0.0; 37]);
        let mut rng = Rng::new(0, 0);
        shared.gradient(6, &x, &mut rng, &mut g1);
        copies.gradient(6, &x, &mut rng, &mut g2);
        assert_eq!(g1, g2);
    }
}
