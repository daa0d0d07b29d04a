//! The centralized, communication-reducing SGD variants of Jiang & Agrawal
//! (2018): periodic averaging (PSGD) and periodic *quantized* averaging
//! (PQASGD, Algorithm 2), rotating averaging (RSGD), and gradient
//! quantization (QSGD, TernGrad).
//!
//! All keep every worker's model in step through a collective. Summable f32
//! frames travel by all-reduce; compressed frames cannot be summed on the
//! way, so they are all-gathered. Sums run in rank order on every worker, as
//! a deterministic collective's do.

use repro_codec::FullPrecision;

use crate::AlgoError;
use crate::algorithm::{Pattern, Received, Worker, check_len, sum_in_rank_order};
use crate::compress::Compressor;

fn collective(compressor: &Compressor) -> Pattern {
    if compressor.is_full() {
        Pattern::AllReduce
    } else {
        Pattern::AllGather
    }
}

/// PQASGD (and PSGD with a full-precision compressor): local SGD steps; every
/// `period` iterations the change since the last synchronization is
/// compressed and averaged over all workers:
/// `x <- x_sync + 1/n sum_j Q(x_j - x_sync)`.
#[derive(Debug)]
pub struct Periodic {
    rank: usize,
    n: usize,
    period: u64,
    compressor: Compressor,
    x: Vec<f32>,
    x_sync: Vec<f32>,
    acc: Vec<f32>,
    scratch: Vec<f32>,
    own: Vec<f32>,
}

impl Periodic {
    pub fn new(
        rank: usize,
        n: usize,
        period: u64,
        compressor: Compressor,
        x0: &[f32],
    ) -> Result<Self, AlgoError> {
        if period == 0 {
            return Err(AlgoError::Invalid(
                "the averaging period must be at least 1".into(),
            ));
        }
        Ok(Self {
            rank,
            n,
            period,
            compressor,
            x: x0.to_vec(),
            x_sync: x0.to_vec(),
            acc: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
            own: vec![0.0; x0.len()],
        })
    }

    fn syncs(&self, k: u64) -> bool {
        (k + 1) % self.period == 0
    }
}

impl Worker for Periodic {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        for (x, &d) in self.x.iter_mut().zip(delta) {
            *x -= d;
        }
        if !self.syncs(k) {
            out.clear();
            return Ok(());
        }
        for ((a, &x), &s) in self.acc.iter_mut().zip(&self.x).zip(&self.x_sync) {
            *a = x - s;
        }
        self.compressor
            .encode(&self.acc, k, self.rank as u32, Some(&mut self.own), out)?;
        Ok(())
    }

    fn receive(
        &mut self,
        k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        if !self.syncs(k) {
            return Ok(Received::default());
        }
        check_len("collective inbox", self.n - 1, inbox.len())?;
        let compressor = &self.compressor;
        sum_in_rank_order(
            self.rank,
            &self.own,
            inbox,
            &mut self.acc,
            &mut self.scratch,
            |b, out| compressor.decode(b, out).map_err(Into::into),
        )?;
        let inv = 1.0 / self.n as f32;
        for ((x, s), &a) in self.x.iter_mut().zip(self.x_sync.iter_mut()).zip(&self.acc) {
            *x = *s + a * inv;
            *s = *x;
        }
        Ok(Received::default())
    }

    fn extra_memory(&self) -> usize {
        // the model at the last synchronization
        4 * self.x_sync.len()
    }

    fn pattern(&self) -> Pattern {
        collective(&self.compressor)
    }
}

/// RSGD: local SGD steps; at iteration `k` the `(k mod p)`-th of `p`
/// contiguous chunks of the model is averaged over all workers (f32).
#[derive(Debug)]
pub struct Rotating {
    rank: usize,
    n: usize,
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
            rank,
            n,
            chunks,
            x: x0.to_vec(),
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
        FullPrecision::default().encode(&self.x[range], k, self.rank as u32, out)?;
        Ok(())
    }

    fn receive(
        &mut self,
        k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        check_len("collective inbox", self.n - 1, inbox.len())?;
        let range = self.chunk(k);
        self.sum.resize(range.len(), 0.0);
        self.scratch.resize(range.len(), 0.0);
        let own = self.x[range.clone()].to_vec();
        sum_in_rank_order(
            self.rank,
            &own,
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
        for (x, &s) in self.x[range].iter_mut().zip(&self.sum) {
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

/// Gradient quantization (QSGD, TernGrad, or any compressor): every worker
/// applies `x <- x - 1/n sum_j Q(delta_j)`.
#[derive(Debug)]
pub struct QuantizedGradient {
    rank: usize,
    n: usize,
    compressor: Compressor,
    x: Vec<f32>,
    own: Vec<f32>,
    sum: Vec<f32>,
    scratch: Vec<f32>,
}

impl QuantizedGradient {
    pub fn new(rank: usize, n: usize, compressor: Compressor, x0: &[f32]) -> Self {
        Self {
            rank,
            n,
            compressor,
            x: x0.to_vec(),
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
            .encode(delta, k, self.rank as u32, Some(&mut self.own), out)?;
        Ok(())
    }

    fn receive(
        &mut self,
        _k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        check_len("collective inbox", self.n - 1, inbox.len())?;
        let compressor = &self.compressor;
        sum_in_rank_order(
            self.rank,
            &self.own,
            inbox,
            &mut self.sum,
            &mut self.scratch,
            |b, out| compressor.decode(b, out).map_err(Into::into),
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
        collective(&self.compressor)
    }
}
