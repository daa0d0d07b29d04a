//! Periodic averaging (PSGD) and periodic *quantized* averaging (PQASGD,
//! Jiang & Agrawal 2018, Algorithm 2). Their siblings among the centralized,
//! communication-reducing variants: `rotating.rs` (RSGD) and `gradient.rs`
//! (all-reduce SGD, QSGD, TernGrad).
//!
//! All keep every worker's model in step through a collective. Summable f32
//! frames travel by all-reduce; compressed frames cannot be summed on the
//! way, so they are all-gathered. Sums run in rank order on every worker, as
//! a deterministic collective's do.

use crate::AlgoError;
use crate::algorithm::{Group, Pattern, Received, Worker, check_len};
use crate::compress::Compressor;

/// All-reduce for summable f32 frames, all-gather for compressed ones.
pub(super) fn collective(compressor: &Compressor) -> Pattern {
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
    /// Its place in the collective.
    group: Group,
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
            group: Group { rank, n },
            period,
            compressor,
            x: crate::flat::model_copy(x0),
            x_sync: x0.to_vec(),
            acc: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
            own: vec![0.0; x0.len()],
        })
    }

    fn syncs(&self, k: u64) -> bool {
        (k + 1).is_multiple_of(self.period)
    }

    /// `x <- x_sync + sum / n`, the new synchronization point.
    fn apply_sum(&mut self, sum: &[f32]) {
        let inv = self.group.inv();
        for ((x, s), &a) in self.x.iter_mut().zip(self.x_sync.iter_mut()).zip(sum) {
            *x = *s + a * inv;
            *s = *x;
        }
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
        self.compressor.encode(
            &self.acc,
            k,
            self.group.rank as u32,
            Some(&mut self.own),
            out,
        )?;
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
        let compressor = &self.compressor;
        self.group.sum_in_rank_order(
            &self.own,
            inbox,
            &mut self.acc,
            &mut self.scratch,
            |b, out| compressor.decode(b, out).map_err(Into::into),
        )?;
        let acc = std::mem::take(&mut self.acc);
        self.apply_sum(&acc);
        self.acc = acc;
        Ok(Received::default())
    }

    fn receive_sum(&mut self, k: u64, sum: &[f32]) -> Result<Received, AlgoError> {
        if !self.syncs(k) {
            return Ok(Received::default());
        }
        if !self.compressor.is_full() {
            return Err(AlgoError::Invalid(
                "quantized changes cannot be summed by an all-reduce".into(),
            ));
        }
        check_len("all-reduce sum", self.x.len(), sum.len())?;
        self.apply_sum(sum);
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

#[cfg(test)]
mod tests {
    use crate::algos::{AlgorithmSpec, Knobs};
    use crate::{Pattern, Topology, Worker};

    /// What an all-reduce hands `receive_sum` (the sum of every worker's
    /// f32 vector) finishes the iteration as `receive` with all the frames
    /// does, for every algorithm that averages through an all-reduce.
    #[test]
    fn receive_sum_matches_receive_with_every_frame() {
        let n = 4;
        let d = 10;
        let topology = Topology::ring(n).unwrap();
        let knobs = Knobs {
            period: 2,
            ..Knobs::default()
        };
        for name in ["allreduce", "psgd", "rsgd"] {
            let spec = AlgorithmSpec::from_name(name, &knobs).unwrap();
            let x0: Vec<f32> = (0..d).map(|i| i as f32 * 0.1).collect();
            let mut a: Vec<Box<dyn Worker>> = (0..n)
                .map(|r| spec.build(r, &topology, 0, &x0).unwrap())
                .collect();
            let mut b: Vec<Box<dyn Worker>> = (0..n)
                .map(|r| spec.build(r, &topology, 0, &x0).unwrap())
                .collect();
            assert_eq!(a[0].pattern(), Pattern::AllReduce, "{name}");
            for k in 0..4u64 {
                let mut frames = Vec::new();
                for r in 0..n {
                    let delta: Vec<f32> = (0..d)
                        .map(|i| ((r * 7 + i) as f32 + k as f32).sin() * 0.01)
                        .collect();
                    let mut fa = Vec::new();
                    let mut fb = Vec::new();
                    a[r].send(k, &delta, &mut fa).unwrap();
                    b[r].send(k, &delta, &mut fb).unwrap();
                    assert_eq!(fa, fb);
                    frames.push((delta, fa));
                }
                if frames[0].1.is_empty() {
                    for r in 0..n {
                        a[r].receive(k, &frames[r].0, &[]).unwrap();
                        b[r].receive_sum(k, &[]).unwrap();
                    }
                    continue;
                }
                let decoded: Vec<Vec<f32>> = frames
                    .iter()
                    .map(|(_, f)| {
                        let h = repro_codec::FrameHeader::parse(f, u32::MAX).unwrap();
                        let mut v = vec![0.0; h.len as usize];
                        repro_codec::FullPrecision::default()
                            .decode(f, &mut v)
                            .unwrap();
                        v
                    })
                    .collect();
                let sum: Vec<f32> = (0..decoded[0].len())
                    .map(|i| decoded.iter().map(|v| v[i]).sum())
                    .collect();
                for r in 0..n {
                    let inbox: Vec<(usize, &[u8])> = (0..n)
                        .filter(|&j| j != r)
                        .map(|j| (j, frames[j].1.as_slice()))
                        .collect();
                    a[r].receive(k, &frames[r].0, &inbox).unwrap();
                    b[r].receive_sum(k, &sum).unwrap();
                }
            }
            for r in 0..n {
                for (x, y) in a[r].model().iter().zip(b[r].model()) {
                    assert!((x - y).abs() < 1e-6, "{name} rank {r}: {x} vs {y}");
                }
            }
        }
        // a worker that gossips cannot take a sum
        let moniqua = AlgorithmSpec::from_name("moniqua", &knobs).unwrap();
        let mut w = moniqua.build(0, &topology, 0, &vec![0.0; d]).unwrap();
        assert!(w.receive_sum(0, &vec![0.0; d]).is_err());
    }
}
