//! Centralized SGD by all-reduce: every worker applies the average step, so
//! all models stay identical. Momentum and weight decay act locally on each
//! worker's gradient before averaging; as all models are equal, this is the
//! same as applying them to the averaged gradient.

use repro_codec::FullPrecision;

use crate::AlgoError;
use crate::algorithm::{Pattern, Received, Worker, check_len};

/// An all-reduce worker.
#[derive(Debug)]
pub struct AllReduce {
    rank: usize,
    n: usize,
    x: Vec<f32>,
    sum: Vec<f32>,
    scratch: Vec<f32>,
}

impl AllReduce {
    pub fn new(rank: usize, n: usize, x0: &[f32]) -> Self {
        Self {
            rank,
            n,
            x: x0.to_vec(),
            sum: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
        }
    }
}

impl Worker for AllReduce {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        FullPrecision::default().encode(delta, k, self.rank as u32, out)?;
        Ok(())
    }

    fn receive(
        &mut self,
        _k: u64,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        check_len("all-reduce inbox", self.n - 1, inbox.len())?;
        crate::algorithm::sum_in_rank_order(
            self.rank,
            delta,
            inbox,
            &mut self.sum,
            &mut self.scratch,
            |b, out| {
                FullPrecision::default()
                    .decode(b, out)
                    .map(drop)
                    .map_err(Into::into)
            },
        )?;
        let inv = 1.0 / self.n as f32;
        for (x, &s) in self.x.iter_mut().zip(&self.sum) {
            *x -= s * inv;
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
