//! ECD-PSGD (Tang et al. 2018, Algorithm 2): each worker keeps *estimates*
//! `x~_j` of its own and its neighbours' models and sends a compressed
//! extrapolation: `x_{t+1} = sum_j W_ij x~_j - delta`,
//! `z = (1 - t/2) x_t + (t/2) x_{t+1}`, and every estimate of `j` is updated
//! `x~_j <- (1 - 2/t) x~_j + (2/t) C(z_j)`. The counter `t` starts at 1, so
//! the first update is `x~ = -x~ + 2 C(z)` (ChocoSGD's `ecd_psgd.py` agrees).
//! The estimates start at `x_0`.

use crate::algorithm::{Received, Row, Worker, axpy, check_len};
use crate::compress::Compressor;
use crate::{AlgoError, Topology};

/// An ECD-PSGD worker.
#[derive(Debug)]
pub struct Ecd {
    /// Its row of the mixing matrix.
    row: Row,
    x: Vec<f32>,
    compressor: Compressor,
    /// Estimate of the worker's own model.
    own_estimate: Vec<f32>,
    /// Estimates of the neighbours' models, in `weights` order.
    estimates: Vec<Vec<f32>>,
    acc: Vec<f32>,
    scratch: Vec<f32>,
}

impl Ecd {
    pub fn new(rank: usize, topology: &Topology, compressor: Compressor, x0: &[f32]) -> Self {
        let row = Row::of(topology, rank);
        Self {
            x: crate::flat::model_copy(x0),
            compressor,
            own_estimate: x0.to_vec(),
            estimates: vec![x0.to_vec(); row.weights.len()],
            row,
            acc: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
        }
    }
}

/// `x~ <- (1 - 2/t) x~ + (2/t) c`.
fn extrapolate(estimate: &mut [f32], c: &[f32], t: f32) {
    let (a, b) = (1.0 - 2.0 / t, 2.0 / t);
    for (e, &c) in estimate.iter_mut().zip(c) {
        *e = a * *e + b * c;
    }
}

impl Worker for Ecd {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        let t = (k + 1) as f32;
        // acc = x_{t+1} = sum_j W_ij x~_j - delta
        for ((a, &e), &d) in self.acc.iter_mut().zip(&self.own_estimate).zip(delta) {
            *a = self.row.self_weight * e - d;
        }
        for (estimate, &(_, w)) in self.estimates.iter().zip(&self.row.weights) {
            axpy(&mut self.acc, w as f32, estimate);
        }
        // x <- z = (1 - t/2) x_t + (t/2) x_{t+1}, then compress; x <- x_{t+1}
        for (x, &next) in self.x.iter_mut().zip(&self.acc) {
            *x = (1.0 - 0.5 * t) * *x + 0.5 * t * next;
        }
        self.compressor.encode(
            &self.x,
            k,
            self.row.rank as u32,
            Some(&mut self.scratch),
            out,
        )?;
        std::mem::swap(&mut self.x, &mut self.acc);
        extrapolate(&mut self.own_estimate, &self.scratch, t);
        Ok(())
    }

    fn receive(
        &mut self,
        k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        let t = (k + 1) as f32;
        for &(from, bytes) in inbox {
            let at = self.row.slot(from)?;
            self.compressor.decode(bytes, &mut self.scratch)?;
            extrapolate(&mut self.estimates[at], &self.scratch, t);
        }
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        4 * (self.own_estimate.len() + self.estimates.iter().map(Vec::len).sum::<usize>())
    }
}
