//! DCD-PSGD (Tang et al. 2018, Algorithm 1): each worker keeps exact replicas
//! `x^_j` of its neighbours' models and sends a compressed *difference*:
//! `x_half = sum_j W_ij x^_j - delta` (with `x^_i = x_i`), `z = x_half - x_i`,
//! `x_i <- x_i + C(z)`, and every neighbour applies `x^_i <- x^_i + C(z)`, so
//! the replicas stay exact. It diverges when `C` is too coarse: the difference
//! is not small relative to the quantization error.

use crate::algorithm::{Gossip, Received, Row, Worker, axpy, check_len};
use crate::compress::Compressor;
use crate::{AlgoError, Topology};

/// A DCD-PSGD worker.
#[derive(Debug)]
pub struct Dcd {
    /// Its row of the mixing matrix.
    row: Row,
    x: Vec<f32>,
    compressor: Compressor,
    /// Replicas of the neighbours' models, in `weights` order.
    replicas: Vec<Vec<f32>>,
    acc: Vec<f32>,
    scratch: Vec<f32>,
}

impl Dcd {
    pub fn new(rank: usize, topology: &Topology, compressor: Compressor, x0: &[f32]) -> Self {
        let Gossip { row, x, compressor } = Gossip::new(rank, topology, compressor, x0);
        Self {
            x,
            compressor,
            replicas: vec![x0.to_vec(); row.weights.len()],
            row,
            acc: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
        }
    }
}

impl Worker for Dcd {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        // acc = z = sum_j W_ij x^_j - delta - x_i
        for ((a, &x), &d) in self.acc.iter_mut().zip(&self.x).zip(delta) {
            *a = (self.row.self_weight - 1.0) * x - d;
        }
        for (replica, &(_, w)) in self.replicas.iter().zip(&self.row.weights) {
            axpy(&mut self.acc, w as f32, replica);
        }
        self.compressor.encode(
            &self.acc,
            k,
            self.row.rank as u32,
            Some(&mut self.scratch),
            out,
        )?;
        axpy(&mut self.x, 1.0, &self.scratch);
        Ok(())
    }

    fn receive(
        &mut self,
        _k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        for &(from, bytes) in inbox {
            let at = self.row.slot(from)?;
            self.compressor.decode(bytes, &mut self.scratch)?;
            axpy(&mut self.replicas[at], 1.0, &self.scratch);
        }
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        4 * self.replicas.iter().map(Vec::len).sum::<usize>()
    }
}
