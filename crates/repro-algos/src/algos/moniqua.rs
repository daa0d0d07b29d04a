//! Moniqua (Lu & De Sa 2020, Algorithm 1):
//! `x_i <- x_i + sum_{j in N(i)} W_ij (x^_j - x^_i) - delta_i`, where `x^_j`
//! is neighbour `j`'s model recovered from its modulo-quantized codes against
//! `x_i`, and `x^_i` the local biased term. With `gamma < 1` the averaging
//! term is scaled by `gamma` (the slack matrix of Theorem 3).
//!
//! No state beyond D-PSGD's: the local biased term is written into the
//! accumulator at `send` time, and neighbours are decoded straight into it
//! (`decode_accumulate`), so not even D-PSGD's decode buffer is needed.

use repro_codec::{MoniquaCodec, Verification};

use crate::algorithm::{Received, Worker, check_len, weight_of};
use crate::{AlgoError, Topology};

/// A Moniqua worker.
#[derive(Debug)]
pub struct Moniqua {
    rank: usize,
    x: Vec<f32>,
    codec: MoniquaCodec,
    /// `(j, gamma W_ij)`.
    weights: Vec<(usize, f64)>,
    /// Holds `x^_i` between `send` and `receive`, then the averaging term.
    acc: Vec<f32>,
}

impl Moniqua {
    /// Worker `rank`; `gamma` in (0, 1] scales the averaging term.
    pub fn new(
        rank: usize,
        topology: &Topology,
        codec: MoniquaCodec,
        gamma: f64,
        x0: &[f32],
    ) -> Result<Self, AlgoError> {
        let slack = topology.slack(gamma)?;
        Ok(Self {
            rank,
            x: x0.to_vec(),
            codec,
            weights: slack.neighbours(rank).to_vec(),
            acc: vec![0.0; x0.len()],
        })
    }
}

impl Worker for Moniqua {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, _delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        self.codec
            .encode(&self.x, k, self.rank as u32, Some(&mut self.acc), out)?;
        Ok(())
    }

    fn receive(
        &mut self,
        _k: u64,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        // acc holds x^_i: start from -(sum_j W_ij) x^_i
        let mut total = 0.0f32;
        for &(from, _) in inbox {
            total += weight_of(&self.weights, self.rank, from)?;
        }
        for a in self.acc.iter_mut() {
            *a *= -total;
        }
        let mut received = Received::default();
        for &(from, bytes) in inbox {
            let w = weight_of(&self.weights, self.rank, from)?;
            let d = self
                .codec
                .decode_accumulate(bytes, &self.x, w, &mut self.acc)?;
            match d.verification {
                Verification::Verified => received.verified += 1,
                Verification::Mismatch => received.mismatched += 1,
                Verification::Unchecked => {}
            }
        }
        for ((x, &a), &d) in self.x.iter_mut().zip(&self.acc).zip(delta) {
            *x += a - d;
        }
        Ok(received)
    }

    fn extra_memory(&self) -> usize {
        0
    }
}
