//! D-PSGD with full-precision models (Lian et al. 2017):
//! `x_i <- sum_j W_ij x_j - delta_i`.

use repro_codec::FullPrecision;

use crate::algorithm::{Received, Worker, axpy, check_len, weight_of};
use crate::{AlgoError, Topology};

/// A D-PSGD worker.
#[derive(Debug)]
pub struct DPsgd {
    rank: usize,
    x: Vec<f32>,
    self_weight: f32,
    weights: Vec<(usize, f64)>,
    acc: Vec<f32>,
    scratch: Vec<f32>,
}

impl DPsgd {
    pub fn new(rank: usize, topology: &Topology, x0: &[f32]) -> Self {
        Self {
            rank,
            x: x0.to_vec(),
            self_weight: topology.self_weight(rank) as f32,
            weights: topology.neighbours(rank).to_vec(),
            acc: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
        }
    }
}

impl Worker for DPsgd {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, _delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        FullPrecision::default().encode(&self.x, k, self.rank as u32, out)?;
        Ok(())
    }

    fn receive(
        &mut self,
        _k: u64,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        for (a, &x) in self.acc.iter_mut().zip(&self.x) {
            *a = self.self_weight * x;
        }
        for &(from, bytes) in inbox {
            let w = weight_of(&self.weights, self.rank, from)?;
            FullPrecision::default().decode(bytes, &mut self.scratch)?;
            axpy(&mut self.acc, w, &self.scratch);
        }
        for ((x, &a), &d) in self.x.iter_mut().zip(&self.acc).zip(delta) {
            *x = a - d;
        }
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        0
    }
}
