//! RSGD (Jiang & Agrawal 2018): local steps, and each iteration one chunk of
//! the model averaged over all workers by an f32 all-reduce.

use repro_codec::FullPrecision;

use crate::AlgoError;
use crate::algorithm::{Group, Pattern, Received, Worker, check_len};

/// RSGD: local SGD steps; at iteration `k` the `(k mod p)`-th of `p`
/// contiguous chunks of the model is averaged over all workers (f32).
#[derive(Debug)]
pub struct Rotating {
    /// Its place in the collective.
    group: Group,
    chunks: u64,
    x: Vec<f32>,
    sum: Vec<f32>,
    scratch: Vec<f32>,
}

impl Rotating {
    pub fn new(rank: usize, n: usize, chunks: u64, x0: &[f32]) -> Result<Self, AlgoError> {
        if chunks == 0 || chunks as usize > x0.len().max(1) {
            return Err(AlgoError::Invalid(format!(
                "RSGD needs between 1 and d = {} chunks, got {chunks}",
                x0.len()
            )));
        }
        Ok(Self {
            group: Group { rank, n },
            chunks,
            x: crate::flat::model_copy(x0),
            sum: Vec::new(),
            scratch: Vec::new(),
        })
    }

    fn chunk(&self, k: u64) -> std::ops::Range<usize> {
        let d = self.x.len() as u64;
        let c = k % self.chunks;
        (c * d / self.chunks) as usize..((c + 1) * d / self.chunks) as usize
    }
}

impl Worker for Rotating {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        for (x, &d) in self.x.iter_mut().zip(delta) {
            *x -= d;
        }
        let range = self.chunk(k);
        FullPrecision::default().encode(&self.x[range], k, self.group.rank as u32, out)?;
        Ok(())
    }

    fn receive(
        &mut self,
        k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        let range = self.chunk(k);
        self.sum.resize(range.len(), 0.0);
        self.scratch.resize(range.len(), 0.0);
        let own = self.x[range.clone()].to_vec();
        self.group
            .sum_in_rank_order(&own, inbox, &mut self.sum, &mut self.scratch, |b, out| {
                FullPrecision::default()
                    .decode(b, out)
                    .map(drop)
                    .map_err(Into::into)
            })?;
        let inv = self.group.inv();
        for (x, &s) in self.x[range].iter_mut().zip(&self.sum) {
            *x = s * inv;
        }
        Ok(Received::default())
    }

    fn receive_sum(&mut self, k: u64, sum: &[f32]) -> Result<Received, AlgoError> {
        let range = self.chunk(k);
        check_len("all-reduce sum", range.len(), sum.len())?;
        let inv = self.group.inv();
        for (x, &s) in self.x[range].iter_mut().zip(sum) {
            *x = s * inv;
        }
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        0
    }

    fn pattern(&self) -> Pattern {
        Pattern::AllReduce
    }
}
