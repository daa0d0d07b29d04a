//! ECD-PSGD (Tang et al. 2018, Algorithm 2): each worker keeps *estimates*
//! `x~_j` of its own and its neighbours' models and sends a compressed
//! extrapolation: `x_{t+1} = sum_j W_ij x~_j - delta`,
//! `z = (1 - t/2) x_t + (t/2) x_{t+1}`, and every estimate of `j` is updated
//! `x~_j <- (1 - 2/t) x~_j + (2/t) C(z_j)`. The counter `t` starts at 1, so
//! the first update is `x~ = -x~ + 2 C(z)` (ChocoSGD's `ecd_psgd.py` agrees).
//! The estimates start at `x_0`.
//!
//! The estimates are kept in f64, and `z` is computed in f64 as
//! `x_t + (t/2)(x_{t+1} - x_t)` from the f32 models. The coefficient `t/2`
//! grows with the iterations: in f32 an estimate's rounding errors add up
//! linearly in `t`, and lossless ECD drifted from D-PSGD (4.7e-4 of the
//! largest coordinate after 5000 iterations,
//! `lossless_ecd_is_d_psgd_over_thousands_of_iterations`). The models and
//! the frames stay f32.

use crate::algorithm::{Gossip, Received, Row, Worker, check_len};
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
    own_estimate: Vec<f64>,
    /// Estimates of the neighbours' models, in `weights` order.
    estimates: Vec<Vec<f64>>,
    /// The extrapolation `z`, as the compressor takes it.
    z: Vec<f32>,
    /// What the receivers decode: `C(z)`, or a neighbour's.
    decoded: Vec<f32>,
}

impl Ecd {
    pub fn new(rank: usize, topology: &Topology, compressor: Compressor, x0: &[f32]) -> Self {
        let Gossip { row, x, compressor } = Gossip::new(rank, topology, compressor, x0);
        let start: Vec<f64> = x0.iter().map(|&v| f64::from(v)).collect();
        Self {
            x,
            compressor,
            estimates: vec![start.clone(); row.weights.len()],
            own_estimate: start,
            row,
            z: vec![0.0; x0.len()],
            decoded: vec![0.0; x0.len()],
        }
    }
}

/// `x~ <- (1 - 2/t) x~ + (2/t) c`.
fn extrapolate(estimate: &mut [f64], c: &[f32], t: f64) {
    let (a, b) = (1.0 - 2.0 / t, 2.0 / t);
    for (e, &c) in estimate.iter_mut().zip(c) {
        *e = a * *e + b * f64::from(c);
    }
}

impl Worker for Ecd {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        let t = (k + 1) as f64;
        for i in 0..self.x.len() {
            // x_{t+1} = sum_j W_ij x~_j - delta, the model in f32, summed
            // as D-PSGD sums its neighbours' models (own term, neighbours
            // in rank order, then the step)
            let mut next = self.row.self_weight * self.own_estimate[i] as f32;
            for (estimate, &(_, w)) in self.estimates.iter().zip(&self.row.weights) {
                next += w as f32 * estimate[i] as f32;
            }
            let next = next - delta[i];
            // z = x_t + (t/2)(x_{t+1} - x_t)
            let x = f64::from(self.x[i]);
            self.z[i] = (x + 0.5 * t * (f64::from(next) - x)) as f32;
            self.x[i] = next;
        }
        self.compressor.encode(
            &self.z,
            k,
            self.row.rank as u32,
            Some(&mut self.decoded),
            out,
        )?;
        extrapolate(&mut self.own_estimate, &self.decoded, t);
        Ok(())
    }

    fn receive(
        &mut self,
        k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        let t = (k + 1) as f64;
        for &(from, bytes) in inbox {
            let at = self.row.slot(from)?;
            self.compressor.decode(bytes, &mut self.decoded)?;
            extrapolate(&mut self.estimates[at], &self.decoded, t);
        }
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        8 * (self.own_estimate.len() + self.estimates.iter().map(Vec::len).sum::<usize>())
    }
}
