//! DeepSqueeze (Tang et al. 2019): error-compensated compression of the model.
//! `x_half = x_i - delta`; `v = x_half + e_i`; `c_i = C(v)`; `e_i <- v - c_i`;
//! `x_i <- x_half + gamma sum_j (W - I)_ij c_j`. One extra vector, the error
//! memory `e_i`.

use crate::algorithm::{Gossip, Received, Row, Worker, axpy, check_len};
use crate::compress::Compressor;
use crate::{AlgoError, Topology};

/// A DeepSqueeze worker.
#[derive(Debug)]
pub struct DeepSqueeze {
    /// Its row of the mixing matrix.
    row: Row,
    x: Vec<f32>,
    compressor: Compressor,
    gamma: f32,
    error: Vec<f32>,
    /// Holds the worker's own `c_i` between `send` and `receive`.
    acc: Vec<f32>,
    scratch: Vec<f32>,
}

impl DeepSqueeze {
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
            error: vec![0.0; x0.len()],
            acc: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
        })
    }
}

impl Worker for DeepSqueeze {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        // x <- x_half; scratch <- v = x_half + e
        for (((x, &d), &e), v) in self
            .x
            .iter_mut()
            .zip(delta)
            .zip(&self.error)
            .zip(self.scratch.iter_mut())
        {
            *x -= d;
            *v = *x + e;
        }
        self.compressor.encode(
            &self.scratch,
            k,
            self.row.rank as u32,
            Some(&mut self.acc),
            out,
        )?;
        for ((e, &v), &c) in self.error.iter_mut().zip(&self.scratch).zip(&self.acc) {
            *e = v - c;
        }
        Ok(())
    }

    fn receive(
        &mut self,
        _k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        // acc holds c_i: the averaging term starts at (W_ii - 1) c_i
        let own = self.row.self_weight - 1.0;
        for a in self.acc.iter_mut() {
            *a *= own;
        }
        for &(from, bytes) in inbox {
            let w = self.row.weight(from)?;
            self.compressor.decode(bytes, &mut self.scratch)?;
            axpy(&mut self.acc, w, &self.scratch);
        }
        axpy(&mut self.x, self.gamma, &self.acc);
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        4 * self.error.len()
    }
}
