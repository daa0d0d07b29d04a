//! Communication graphs and their mixing matrices.
//!
//! Every topology is an undirected graph with Metropolis-Hastings weights
//! `W_ij = 1 / (1 + max(deg i, deg j))` on edges and `W_ii = 1 - sum_j W_ij`,
//! which is symmetric and doubly stochastic. On regular graphs this is the
//! uniform `1 / (deg + 1)`: 1/3 on a ring, 1/5 on a torus, 1/n on the
//! complete graph, as in the papers.

use std::collections::BTreeSet;
use std::fmt;

use crate::TopologyError;

/// A graph of `n` workers with its mixing matrix `W`.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    name: String,
    /// For each worker, `(j, W_ij)` for its neighbours `j != i`, sorted by `j`.
    neighbours: Vec<Vec<(usize, f64)>>,
    self_weight: Vec<f64>,
}

/// Eigen-structure of `W` that the theory uses.
#[derive(Debug, Clone, PartialEq)]
pub struct Spectrum {
    /// Eigenvalues in decreasing order (the first is 1).
    pub eigenvalues: Vec<f64>,
    /// `rho = max(|lambda_2|, |lambda_n|)`.
    pub rho: f64,
    /// `1 - rho`.
    pub gap: f64,
}

impl Topology {
    /// Builds `W` from undirected edges with Metropolis-Hastings weights.
    /// Duplicate edges (in either direction) count once.
    pub fn from_edges(
        name: impl Into<String>,
        n: usize,
        edges: &[(usize, usize)],
    ) -> Result<Self, TopologyError> {
        if n == 0 {
            return Err(TopologyError::TooFewWorkers {
                kind: "graph",
                n,
                min: 1,
            });
        }
        let mut adj: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
        for &(a, b) in edges {
            if a >= n || b >= n {
                return Err(TopologyError::EdgeOutOfRange { a, b, n });
            }
            if a == b {
                return Err(TopologyError::SelfLoop { a });
            }
            adj[a].insert(b);
            adj[b].insert(a);
        }
        // connectivity: breadth-first search from 0
        let mut seen = vec![false; n];
        let mut queue = vec![0];
        seen[0] = true;
        while let Some(i) = queue.pop() {
            for &j in &adj[i] {
                if !seen[j] {
                    seen[j] = true;
                    queue.push(j);
                }
            }
        }
        if let Some(unreached) = seen.iter().position(|s| !s) {
            return Err(TopologyError::Disconnected { unreached });
        }
        let degree: Vec<usize> = adj.iter().map(BTreeSet::len).collect();
        let neighbours: Vec<Vec<(usize, f64)>> = adj
            .iter()
            .enumerate()
            .map(|(i, set)| {
                set.iter()
                    .map(|&j| (j, 1.0 / (1.0 + degree[i].max(degree[j]) as f64)))
                    .collect()
            })
            .collect();
        let self_weight = neighbours
            .iter()
            .map(|nb| 1.0 - nb.iter().map(|&(_, w)| w).sum::<f64>())
            .collect();
        Ok(Self {
            name: name.into(),
            neighbours,
            self_weight,
        })
    }

    /// Ring: each worker talks to `i - 1` and `i + 1` (weights 1/3 for n >= 3).
    pub fn ring(n: usize) -> Result<Self, TopologyError> {
        if n < 2 {
            return Err(TopologyError::TooFewWorkers {
                kind: "ring",
                n,
                min: 2,
            });
        }
        let edges: Vec<_> = (0..n).map(|i| (i, (i + 1) % n)).collect();
        Self::from_edges(format!("ring({n})"), n, &edges)
    }

    /// Torus: a `rows x cols` grid with wrap-around (weights 1/5 when both
    /// sides are at least 3).
    pub fn torus(rows: usize, cols: usize) -> Result<Self, TopologyError> {
        let n = rows * cols;
        if rows < 2 || cols < 2 {
            return Err(TopologyError::TooFewWorkers {
                kind: "torus (per side)",
                n: rows.min(cols),
                min: 2,
            });
        }
        let at = |r: usize, c: usize| (r % rows) * cols + (c % cols);
        let mut edges = Vec::with_capacity(2 * n);
        for r in 0..rows {
            for c in 0..cols {
                edges.push((at(r, c), at(r + 1, c)));
                edges.push((at(r, c), at(r, c + 1)));
            }
        }
        Self::from_edges(format!("torus({rows}x{cols})"), n, &edges)
    }

    /// A square torus of `n = k^2` workers.
    pub fn torus_square(n: usize) -> Result<Self, TopologyError> {
        let k = (n as f64).sqrt().round() as usize;
        if k * k != n {
            return Err(TopologyError::NotSquare { n });
        }
        Self::torus(k, k)
    }

    /// Complete graph: `W = 1/n` everywhere (D-PSGD on it is AllReduce).
    pub fn complete(n: usize) -> Result<Self, TopologyError> {
        let mut edges = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                edges.push((a, b));
            }
        }
        Self::from_edges(format!("complete({n})"), n, &edges)
    }

    /// Star: worker 0 talks to everyone, the others only to worker 0.
    pub fn star(n: usize) -> Result<Self, TopologyError> {
        if n < 2 {
            return Err(TopologyError::TooFewWorkers {
                kind: "star",
                n,
                min: 2,
            });
        }
        let edges: Vec<_> = (1..n).map(|i| (0, i)).collect();
        Self::from_edges(format!("star({n})"), n, &edges)
    }

    /// Exponential graph: worker `i` talks to `i +- 2^k mod n` for every
    /// `2^k < n` (the static, undirected version of the graph SGP uses).
    pub fn exponential(n: usize) -> Result<Self, TopologyError> {
        if n < 2 {
            return Err(TopologyError::TooFewWorkers {
                kind: "exponential graph",
                n,
                min: 2,
            });
        }
        let mut edges = Vec::new();
        for i in 0..n {
            let mut hop = 1;
            while hop < n {
                edges.push((i, (i + hop) % n));
                hop *= 2;
            }
        }
        Self::from_edges(format!("exponential({n})"), n, &edges)
    }

    /// A topology by name: `ring`, `torus` (square), `complete`, `star`, `exponential`.
    pub fn by_name(name: &str, n: usize) -> Result<Self, TopologyError> {
        match name {
            "ring" => Self::ring(n),
            "torus" => Self::torus_square(n),
            "complete" => Self::complete(n),
            "star" => Self::star(n),
            "exponential" => Self::exponential(n),
            other => Err(TopologyError::UnknownName {
                name: other.to_string(),
            }),
        }
    }

    /// The slack matrix `gamma W + (1 - gamma) I` (Moniqua's Theorem 3,
    /// CHOCO's and DeepSqueeze's consensus step size).
    pub fn slack(&self, gamma: f64) -> Result<Self, TopologyError> {
        let gamma = check_gamma(gamma)?;
        let neighbours: Vec<Vec<(usize, f64)>> = self
            .neighbours
            .iter()
            .map(|nb| nb.iter().map(|&(j, w)| (j, gamma * w)).collect())
            .collect();
        let self_weight = neighbours
            .iter()
            .map(|nb: &Vec<(usize, f64)>| 1.0 - nb.iter().map(|&(_, w)| w).sum::<f64>())
            .collect();
        Ok(Self {
            name: format!("{} with gamma {gamma}", self.name),
            neighbours,
            self_weight,
        })
    }

    /// Number of workers.
    pub fn n(&self) -> usize {
        self.self_weight.len()
    }

    /// A short description, e.g. `ring(8)`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `(j, W_ij)` for the neighbours of `i`, sorted by `j`.
    pub fn neighbours(&self, i: usize) -> &[(usize, f64)] {
        &self.neighbours[i]
    }

    /// `W_ii`.
    pub fn self_weight(&self, i: usize) -> f64 {
        self.self_weight[i]
    }

    /// `W_ij` (0 when `i` and `j` are not neighbours).
    pub fn weight(&self, i: usize, j: usize) -> f64 {
        if i == j {
            return self.self_weight[i];
        }
        self.neighbours[i]
            .binary_search_by_key(&j, |&(k, _)| k)
            .map_or(0.0, |at| self.neighbours[i][at].1)
    }

    /// The largest number of neighbours of any worker.
    pub fn max_degree(&self) -> usize {
        self.neighbours.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// The smallest non-zero entry of `W` (phi in Theorem 1).
    pub fn min_nonzero_weight(&self) -> f64 {
        self.neighbours
            .iter()
            .flatten()
            .map(|&(_, w)| w)
            .chain(self.self_weight.iter().copied().filter(|&w| w > 0.0))
            .fold(f64::INFINITY, f64::min)
    }

    /// `W` as a dense row-major `n x n` matrix.
    pub fn matrix(&self) -> Vec<f64> {
        let n = self.n();
        let mut m = vec![0.0; n * n];
        for i in 0..n {
            m[i * n + i] = self.self_weight[i];
            for &(j, w) in &self.neighbours[i] {
                m[i * n + j] = w;
            }
        }
        m
    }

    /// Eigenvalues of `W`, `rho` and the spectral gap (dense symmetric
    /// eigen-decomposition: O(n^3), about a second at n = 1024).
    pub fn spectrum(&self) -> Spectrum {
        let n = self.n();
        let m = nalgebra::DMatrix::from_row_slice(n, n, &self.matrix());
        let mut eigenvalues: Vec<f64> = m.symmetric_eigenvalues().iter().copied().collect();
        eigenvalues.sort_by(|a, b| b.total_cmp(a));
        let rho = if n == 1 {
            0.0
        } else {
            eigenvalues[1].abs().max(eigenvalues[n - 1].abs())
        };
        Spectrum {
            eigenvalues,
            rho,
            gap: 1.0 - rho,
        }
    }

    /// Moniqua's bound on the bits per coordinate it needs with this `W`
    /// (Section 4): `ceil(log2(4 log2(16 n) / (1 - rho) + 3))`.
    pub fn moniqua_bits_bound(&self) -> u32 {
        let n = self.n() as f64;
        let rho = self.spectrum().rho;
        (4.0 * (16.0 * n).log2() / (1.0 - rho) + 3.0).log2().ceil() as u32
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Message rounds, one after the other, of the trainer's halving and doubling all-reduce
/// on `n` ranks: `2 log2 p` for the largest power of two `p <= n`, plus
/// two (a fold in and a copy out) when `n` is not one.
pub fn halving_doubling_rounds(n: usize) -> u32 {
    if n < 2 {
        return 0;
    }
    let p = 1usize << n.ilog2();
    2 * p.ilog2() + if p == n { 0 } else { 2 }
}

/// A consensus step size `gamma`, checked: in (0, 1]. The one check for
/// the slack matrix and every gossip algorithm's step (CHOCO, DeepSqueeze).
pub fn check_gamma(gamma: f64) -> Result<f64, TopologyError> {
    if gamma > 0.0 && gamma <= 1.0 {
        Ok(gamma)
    } else {
        Err(TopologyError::InvalidGamma { gamma })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    fn assert_doubly_stochastic(t: &Topology) {
        let n = t.n();
        let m = t.matrix();
        for i in 0..n {
            let row: f64 = (0..n).map(|j| m[i * n + j]).sum();
            let col: f64 = (0..n).map(|j| m[j * n + i]).sum();
            assert!(
                (row - 1.0).abs() < 1e-12 && (col - 1.0).abs() < 1e-12,
                "{t}: row {row} col {col}"
            );
            for j in 0..n {
                assert_eq!(
                    m[i * n + j],
                    m[j * n + i],
                    "{t}: not symmetric at ({i},{j})"
                );
                assert!(m[i * n + j] >= 0.0);
            }
        }
    }

    /// Halving and doubling: 2 log2 p rounds, two more off a power of two.
    #[test]
    fn halving_doubling_takes_log_depth_rounds() {
        assert_eq!(
            [1, 2, 3, 4, 6, 8, 16].map(halving_doubling_rounds),
            [0, 2, 4, 4, 6, 6, 8]
        );
    }

    #[test]
    fn weights_match_the_papers() {
        let r = Topology::ring(8).unwrap();
        assert!(close(r.self_weight(3), 1.0 / 3.0));
        assert_eq!(r.weight(3, 4), 1.0 / 3.0);
        assert_eq!(r.weight(0, 7), 1.0 / 3.0);
        assert_eq!(r.weight(0, 4), 0.0);
        let t = Topology::torus(4, 4).unwrap();
        assert_eq!(t.neighbours(5).len(), 4);
        assert!(t.neighbours(5).iter().all(|&(_, w)| w == 0.2));
        let c = Topology::complete(5).unwrap();
        assert!((c.weight(1, 3) - 0.2).abs() < 1e-15);
        for t in [
            Topology::ring(2).unwrap(),
            Topology::ring(9).unwrap(),
            Topology::torus(3, 5).unwrap(),
            Topology::torus_square(4).unwrap(),
            Topology::complete(6).unwrap(),
            Topology::star(7).unwrap(),
            Topology::exponential(10).unwrap(),
            Topology::from_edges("path", 4, &[(0, 1), (1, 2), (2, 3), (1, 0)]).unwrap(),
        ] {
            assert_doubly_stochastic(&t);
        }
    }

    /// Spectral gaps from the ChocoSGD paper (Koloskova et al. 2019, Table 2).
    #[test]
    fn spectral_gaps_match_the_reference_table() {
        let cases = [
            (Topology::ring(4).unwrap(), 0.67),
            (Topology::ring(16).unwrap(), 0.05),
            (Topology::ring(36).unwrap(), 0.01),
            (Topology::torus_square(4).unwrap(), 0.67),
            (Topology::torus_square(16).unwrap(), 0.4),
            (Topology::torus_square(36).unwrap(), 0.2),
        ];
        for (t, gap) in cases {
            let s = t.spectrum();
            assert!((s.gap - gap).abs() < 0.006, "{t}: gap {} vs {gap}", s.gap);
            assert!((s.eigenvalues[0] - 1.0).abs() < 1e-12);
        }
        // closed form for the ring: rho = (1 + 2 cos(2 pi / n)) / 3 for n >= 5
        let s = Topology::ring(16).unwrap().spectrum();
        let want = (1.0 + 2.0 * (2.0 * std::f64::consts::PI / 16.0).cos()) / 3.0;
        assert!((s.rho - want).abs() < 1e-12);
        assert!(Topology::complete(8).unwrap().spectrum().rho.abs() < 1e-12);
    }

    #[test]
    fn slack_matrix_shrinks_the_gap() {
        let r = Topology::ring(8).unwrap();
        let s = r.slack(0.1).unwrap();
        assert_doubly_stochastic(&s);
        assert!((s.weight(0, 1) - 0.1 / 3.0).abs() < 1e-15);
        assert!((s.self_weight(0) - (1.0 - 0.2 / 3.0)).abs() < 1e-15);
        // eigenvalues map as gamma lambda + 1 - gamma
        let (a, b) = (r.spectrum(), s.spectrum());
        for (x, y) in a.eigenvalues.iter().zip(&b.eigenvalues) {
            assert!((0.1 * x + 0.9 - y).abs() < 1e-12);
        }
        assert!(matches!(
            r.slack(0.0),
            Err(TopologyError::InvalidGamma { .. })
        ));
        assert!(matches!(
            r.slack(1.5),
            Err(TopologyError::InvalidGamma { .. })
        ));
    }

    #[test]
    fn invalid_graphs_are_errors() {
        assert!(matches!(
            Topology::ring(1),
            Err(TopologyError::TooFewWorkers { .. })
        ));
        assert!(matches!(
            Topology::torus_square(8),
            Err(TopologyError::NotSquare { n: 8 })
        ));
        assert!(matches!(
            Topology::from_edges("x", 3, &[(0, 3)]),
            Err(TopologyError::EdgeOutOfRange { .. })
        ));
        assert!(matches!(
            Topology::from_edges("x", 3, &[(1, 1)]),
            Err(TopologyError::SelfLoop { a: 1 })
        ));
        assert!(matches!(
            Topology::from_edges("x", 4, &[(0, 1), (2, 3)]),
            Err(TopologyError::Disconnected { unreached: 2 })
        ));
    }

    #[test]
    fn star_uses_metropolis_hastings() {
        let s = Topology::star(5).unwrap();
        // leaves have degree 1, the centre 4: W_0i = 1 / (1 + 4)
        assert!(close(s.weight(0, 3), 0.2));
        assert!(close(s.self_weight(0), 0.2));
        assert!(close(s.self_weight(3), 0.8));
        assert!(close(s.min_nonzero_weight(), 0.2));
    }

    #[test]
    fn bit_bound_grows_slowly_with_n() {
        let b8 = Topology::ring(8).unwrap().moniqua_bits_bound();
        let b64 = Topology::torus_square(64).unwrap().moniqua_bits_bound();
        assert!((4..=10).contains(&b8), "{b8}");
        assert!(b64 <= b8 + 2, "{b64}");
    }
}
