//! Centralized SGD on averaged gradients: full precision (all-reduce SGD)
//! or quantized (QSGD, TernGrad). Summable f32 frames travel by all-reduce,
//! compressed ones by all-gather; sums run in rank order on every worker.

use super::periodic::collective;
use crate::AlgoError;
use crate::algorithm::{Group, Pattern, Received, Worker, check_len};
use crate::compress::Compressor;

/// Gradient quantization (QSGD, TernGrad, or any compressor): every worker
/// applies `x <- x - 1/n sum_j Q(delta_j)`.
#[derive(Debug)]
pub struct QuantizedGradient {
    /// Its place in the collective.
    group: Group,
    compressor: Compressor,
    x: Vec<f32>,
    own: Vec<f32>,
    sum: Vec<f32>,
    scratch: Vec<f32>,
}

impl QuantizedGradient {
    pub fn new(rank: usize, n: usize, compressor: Compressor, x0: &[f32]) -> Self {
        Self {
            group: Group { rank, n },
            compressor,
            x: crate::flat::model_copy(x0),
            own: vec![0.0; x0.len()],
            sum: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
        }
    }
}

impl Worker for QuantizedGradient {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        self.compressor
            .encode(delta, k, self.group.rank as u32, Some(&mut self.own), out)?;
        Ok(())
    }

    fn receive(
        &mut self,
        _k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        let compressor = &self.compressor;
        self.group.sum_in_rank_order(
            &self.own,
            inbox,
            &mut self.sum,
            &mut self.scratch,
            |b, out| compressor.decode(b, out).map_err(Into::into),
        )?;
        let inv = self.group.inv();
        for (x, &s) in self.x.iter_mut().zip(&self.sum) {
            *x -= s * inv;
        }
        Ok(Received::default())
    }

    fn receive_sum(&mut self, _k: u64, sum: &[f32]) -> Result<Received, AlgoError> {
        if !self.compressor.is_full() {
            return Err(AlgoError::Invalid(
                "quantized gradients cannot be summed by an all-reduce".into(),
            ));
        }
        check_len("all-reduce sum", self.x.len(), sum.len())?;
        let inv = self.group.inv();
        for (x, &s) in self.x.iter_mut().zip(sum) {
            *x -= s * inv;
        }
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        0
    }

    fn pattern(&self) -> Pattern {
        collective(&self.compressor)
    }
}
