//! D-PSGD (Lian et al. 2017) and its naively quantized form (Moniqua eq. 4):
//! neighbours' models go through a compressor `Q`,
//! `x_i <- W_ii x_i + sum_{j != i} W_ij Q(x_j) - delta_i`. With `Q` the
//! identity (full precision) this is D-PSGD; with a quantizer, Theorem 1
//! shows it cannot converge on `|x - delta/2|^2 / 2` with the grid `delta Z`.

use crate::algorithm::{Received, Worker, axpy, check_len, weight_of};
use crate::compress::Compressor;
use crate::{AlgoError, Topology, scratch};

/// A D-PSGD worker, exact or naively quantized.
#[derive(Debug)]
pub struct NaiveQuantized {
    rank: usize,
    x: Vec<f32>,
    compressor: Compressor,
    self_weight: f32,
    weights: Vec<(usize, f64)>,
}

impl NaiveQuantized {
    pub fn new(rank: usize, topology: &Topology, compressor: Compressor, x0: &[f32]) -> Self {
        Self {
            rank,
            x: x0.to_vec(),
            compressor,
            self_weight: topology.self_weight(rank) as f32,
            weights: topology.neighbours(rank).to_vec(),
        }
    }
}

impl Worker for NaiveQuantized {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, _delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        self.compressor
            .encode(&self.x, k, self.rank as u32, None, out)?;
        Ok(())
    }

    fn send_reads_delta(&self) -> bool {
        false
    }

    fn receive(
        &mut self,
        _k: u64,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        // the accumulator and the decode buffer are per-thread scratch
        scratch::with_vectors(self.x.len(), |[acc, decoded]| {
            for (a, &x) in acc.iter_mut().zip(&self.x) {
                *a = self.self_weight * x;
            }
            for &(from, bytes) in inbox {
                let w = weight_of(&self.weights, self.rank, from)?;
                self.compressor.decode(bytes, decoded)?;
                axpy(acc, w, decoded);
            }
            for ((x, &a), &d) in self.x.iter_mut().zip(acc.iter()).zip(delta) {
                *x = a - d;
            }
            Ok(Received::default())
        })
    }

    fn extra_memory(&self) -> usize {
        0
    }
}
