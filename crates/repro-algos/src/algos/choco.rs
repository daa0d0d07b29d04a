//! CHOCO-SGD (Koloskova et al. 2019, Algorithm 2), memory-lean form:
//! local step `x <- x - delta`; `q_i = C(x_i - x^_i)`; `x^_j <- x^_j + q_j`
//! for `i` and its neighbours; gossip
//! `x_i <- x_i + gamma sum_j W_ij (x^_j - x^_i)`. Instead of one replica per
//! neighbour, each worker keeps `x^_i` and `s_i = sum_{j != i} W_ij x^_j`,
//! which is all the gossip step needs: two vectors, whatever the degree.
//! `x^` starts at 0. The difference to compress and the decoded frames are
//! per-thread scratch, not state: a worker holds three vectors (`x`, `x^_i`,
//! `s_i`), which is what lets 1024 workers of a million coordinates fit
//! in 24 GB.

use crate::algorithm::{Gossip, Received, Row, Worker, axpy, check_len};
use crate::compress::Compressor;
use crate::{AlgoError, Topology, scratch};

/// A CHOCO-SGD worker.
#[derive(Debug)]
pub struct Choco {
    /// Its row of the mixing matrix.
    row: Row,
    x: Vec<f32>,
    compressor: Compressor,
    gamma: f32,
    x_hat: Vec<f32>,
    s: Vec<f32>,
}

impl Choco {
    pub fn new(
        rank: usize,
        topology: &Topology,
        compressor: Compressor,
        gamma: f64,
        x0: &[f32],
    ) -> Result<Self, AlgoError> {
        let gamma = crate::topology::check_gamma(gamma)?;
        let Gossip { row, x, compressor } = Gossip::new(rank, topology, compressor, x0);
        Ok(Self {
            row,
            x,
            compressor,
            gamma: gamma as f32,
            x_hat: vec![0.0; x0.len()],
            s: vec![0.0; x0.len()],
        })
    }
}

impl Worker for Choco {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        for (x, &d) in self.x.iter_mut().zip(delta) {
            *x -= d;
        }
        scratch::with_vectors(self.x.len(), |[acc, decoded]| {
            for ((a, &x), &h) in acc.iter_mut().zip(&self.x).zip(&self.x_hat) {
                *a = x - h;
            }
            self.compressor
                .encode(acc, k, self.row.rank as u32, Some(&mut decoded[..]), out)?;
            axpy(&mut self.x_hat, 1.0, decoded);
            Ok(())
        })
    }

    fn receive(
        &mut self,
        _k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        scratch::with_vectors(self.x.len(), |[decoded]| {
            for &(from, bytes) in inbox {
                let w = self.row.weight(from)?;
                self.compressor.decode(bytes, decoded)?;
                axpy(&mut self.s, w, decoded);
            }
            Ok::<(), AlgoError>(())
        })?;
        // sum_j W_ij (x^_j - x^_i) = s_i - (1 - W_ii) x^_i
        let off = 1.0 - self.row.self_weight;
        for ((x, &s), &h) in self.x.iter_mut().zip(&self.s).zip(&self.x_hat) {
            *x += self.gamma * (s - off * h);
        }
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        4 * (self.x_hat.len() + self.s.len())
    }
}
