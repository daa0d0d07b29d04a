//! Moniqua (Lu & De Sa 2020, Algorithm 1):
//! `x_i <- x_i + sum_{j in N(i)} W_ij (x^_j - x^_i) - delta_i`, where `x^_j`
//! is neighbour `j`'s model recovered from its modulo-quantized codes against
//! `x_i`, and `x^_i` the local biased term. With `gamma < 1` the averaging
//! term is scaled by `gamma` (the slack matrix of Theorem 3).
//!
//! No state beyond D-PSGD's: the local biased term takes the place of
//! D-PSGD's decode buffer, and neighbours are decoded straight into the
//! accumulator. `receive` is one pass of the codec's `mix` (local biased
//! term, recovery of every neighbour, the update): in place without hashes,
//! else into a per-thread buffer copied into `x` once every neighbour
//! verified (or recomputed without those that failed). The local biased term is
//! recomputed from `x` (the encoder's, bit for bit) instead of being kept
//! from `send`. `send` does not read the local step, so a simulator can send
//! for every worker first and then compute each worker's gradient and
//! finish its iteration while its model is in cache.
//!
//! A neighbour whose recovery fails the hash (theta too small) is left out of
//! that iteration's average, as if it had not sent: a wrong model is counted,
//! never used.
//!
//! theta `theorem3-step`: during a warm-up the worker
//! exchanges full-precision models (it is D-PSGD) and tracks the largest
//! `|delta|_inf`; the caller then sets `theta = 2 G log(16 n) / (gamma (1 - rho))`
//! with `G` the largest over all workers (Theorems 2 and 3, `alpha G_inf = G`).

use repro_codec::{
    BlockUpdate, CodecError, DecodeTarget, DitherTable, FullPrecision, MixTarget, MoniquaCodec,
    MoniquaConfig, Prefetch, Verification,
};

use crate::algorithm::{Blockwise, Received, Row, Worker, axpy, block_views, check_len};
use crate::{AlgoError, Topology, scratch};

/// A Moniqua worker.
#[derive(Debug)]
pub struct Moniqua {
    /// Its row of the slack matrix `gamma W + (1 - gamma) I`: `(j, gamma
    /// W_ij)` for its neighbours.
    row: Row,
    x: Vec<f32>,
    config: MoniquaConfig,
    seed: u64,
    codec: MoniquaCodec,
    gamma: f64,
    /// `Some(max |delta|_inf)` while warming up for theta = auto.
    warmup: Option<f32>,
    /// What to prefetch during the next receive (see `Worker::prefetch_next`).
    next: Prefetch,
    /// The iteration in progress a block at a time (see [`Blockwise`]).
    blocks: Option<BlockUpdate>,
    /// On the baselines' passes (`fused: false`): the local biased term of
    /// the last frame sent, which the fused update recomputes instead.
    own: Option<Vec<f32>>,
}

impl Moniqua {
    /// Worker `rank`; `gamma` in (0, 1] scales the averaging term.
    pub fn new(
        rank: usize,
        topology: &Topology,
        config: &MoniquaConfig,
        seed: u64,
        gamma: f64,
        x0: &[f32],
    ) -> Result<Self, AlgoError> {
        let slack = topology.slack(gamma)?;
        Ok(Self {
            row: Row::of(&slack, rank),
            x: crate::flat::model_copy(x0),
            codec: MoniquaCodec::new(config, seed)?,
            config: config.clone(),
            seed,
            gamma,
            warmup: None,
            next: Prefetch::NONE,
            blocks: None,
            own: (!config.fused).then(|| vec![0.0; x0.len()]),
        })
    }
}

impl Worker for Moniqua {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, _delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        if self.warmup.is_some() {
            FullPrecision::default().encode(&self.x, k, self.row.rank as u32, out)?;
        } else {
            let own = self.own.as_deref_mut();
            self.codec
                .encode(&self.x, k, self.row.rank as u32, own, out)?;
        }
        Ok(())
    }

    fn send_reads_delta(&self) -> bool {
        false
    }

    fn receive(
        &mut self,
        k: u64,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        if self.warmup.is_some() {
            return self.receive_full_precision(delta, inbox);
        }
        if self.own.is_some() {
            return self.receive_in_passes(delta, inbox);
        }
        let mut neighbours = self.neighbours(inbox)?;
        let sender = self.row.rank as u32;
        let next = std::mem::take(&mut self.next);
        if !self.config.hash {
            // no hash to verify, nothing to leave out afterwards: in place
            match self.codec.mix(
                MixTarget::InPlace(&mut self.x),
                k,
                sender,
                &neighbours,
                delta,
                next,
            ) {
                Ok(_) => return Ok(Received::default()),
                // a peer that hashes anyway: verify, out of place
                Err(CodecError::HashInPlace) => {}
                Err(e) => return Err(e.into()),
            }
        }
        scratch::with_vectors(self.x.len(), |[out]| {
            // x + sum_j W_ij (x^_j - x^_i) - delta in one pass
            let verdicts = self.codec.mix(
                MixTarget::Out { x: &self.x, out },
                k,
                sender,
                &neighbours,
                delta,
                next,
            )?;
            let mut received = Received::default();
            for &v in &verdicts {
                received.record(v);
            }
            if received.mismatched > 0 && self.config.leave_out_mismatched {
                // again without the neighbours whose recovery failed
                let mut verdict = verdicts.iter();
                neighbours.retain(|_| verdict.next() != Some(&Verification::Mismatch));
                self.codec.mix(
                    MixTarget::Out { x: &self.x, out },
                    k,
                    sender,
                    &neighbours,
                    delta,
                    Prefetch::NONE,
                )?;
            }
            // the update becomes the model; the old model's buffer goes to the pool
            std::mem::swap(&mut self.x, out);
            Ok(received)
        })
    }

    fn blockwise(&mut self) -> Option<&mut dyn Blockwise> {
        // the fused update only: the passes are whole-vector by design
        if self.own.is_some() {
            return None;
        }
        Some(self)
    }

    fn extra_memory(&self) -> usize {
        self.own.as_ref().map_or(0, |own| 4 * own.len())
    }

    fn prefetch_next(&mut self, next: Prefetch) {
        self.next = next;
    }

    fn start_theta_warmup(&mut self) -> bool {
        self.warmup = Some(0.0);
        true
    }

    fn max_step(&self) -> Option<f32> {
        self.warmup
    }

    fn recover(
        &self,
        k: u64,
        sender: usize,
        model: &[f32],
        frame: &mut Vec<u8>,
        out: &mut [f32],
    ) -> Option<Result<f64, AlgoError>> {
        if self.warmup.is_some() {
            return None;
        }
        let recovered = self
            .codec
            .encode(model, k, sender as u32, None, frame)
            .and_then(|_| self.codec.decode(frame, &self.x, DecodeTarget::Out(out)));
        Some(
            recovered
                .map(|_| self.codec.delta() * f64::from(self.codec.modulus()))
                .map_err(AlgoError::from),
        )
    }

    fn set_auto_theta(
        &mut self,
        max_step: f32,
        n: usize,
        rho: f64,
    ) -> Result<Option<f64>, AlgoError> {
        let theta = 2.0 * f64::from(max_step) * (16.0 * n as f64).ln() / (self.gamma * (1.0 - rho));
        self.set_theta(theta)?;
        self.warmup = None;
        Ok(Some(theta))
    }

    fn end_warmup_with(&mut self, theta: f64) -> Result<Option<f64>, AlgoError> {
        self.set_theta(theta)?;
        self.warmup = None;
        Ok(Some(theta))
    }

    fn theta(&self) -> Option<f64> {
        Some(self.codec.theta())
    }

    fn modulus(&self) -> Option<f64> {
        Some(f64::from(self.codec.modulus()))
    }

    fn set_theta(&mut self, theta: f64) -> Result<(), AlgoError> {
        self.config.theta = theta;
        self.config.modulus = None;
        self.codec = MoniquaCodec::new(&self.config, self.seed)?;
        Ok(())
    }
}

impl Blockwise for Moniqua {
    fn begin(
        &mut self,
        k: u64,
        inbox: &[(usize, &[u8])],
        next: Option<&mut Vec<u8>>,
    ) -> Result<bool, AlgoError> {
        // a warm-up exchanges full precision
        if self.warmup.is_some() {
            return Ok(false);
        }
        let neighbours = self.neighbours(inbox)?;
        self.blocks = BlockUpdate::begin(
            &self.codec,
            self.x.len(),
            k,
            self.row.rank as u32,
            &neighbours,
            next,
        )?;
        Ok(self.blocks.is_some())
    }

    fn fill_dither(&self, k: u64, at: usize, len: usize, tables: &mut [DitherTable; 2]) {
        let sender = self.row.rank as u32;
        tables[0].fill(&self.codec, k, sender, at, len);
        tables[1].fill(&self.codec, k + 1, sender, at, len);
    }

    fn block(
        &mut self,
        _k: u64,
        inbox: &[(usize, &[u8])],
        at: usize,
        len: usize,
        local_step: &mut dyn FnMut(&[f32], &mut [f32]),
        scratch: &mut [f32],
        tables: &[DitherTable; 2],
        next: Option<&mut Vec<u8>>,
        prefetch: Prefetch,
    ) -> Result<(), AlgoError> {
        let update = self.blocks.as_mut().ok_or_else(|| {
            AlgoError::Invalid("a block outside an iteration begun in blocks".into())
        })?;
        let (x, delta) = block_views(&mut self.x, scratch, at, len)?;
        local_step(x, delta);
        let tables = [Some(&tables[0]), Some(&tables[1])];
        // the frames as `begin` had them
        let frames = inbox.iter().map(|&(_, bytes)| bytes);
        update.block(x, at, frames, delta, tables, next, prefetch)?;
        Ok(())
    }

    fn finish(
        &mut self,
        _k: u64,
        next: Option<&mut Vec<u8>>,
    ) -> Result<(Received, bool), AlgoError> {
        let update = self.blocks.take().ok_or_else(|| {
            AlgoError::Invalid("finishing an iteration not begun in blocks".into())
        })?;
        let sent = update.finish(&self.x, next)?;
        Ok((Received::default(), matches!(sent, Some(Ok(_)))))
    }
}

impl Moniqua {
    /// The inbox as the codec takes it: `(frame, W_ij)`.
    fn neighbours<'f>(
        &self,
        inbox: &[(usize, &'f [u8])],
    ) -> Result<Vec<(&'f [u8], f32)>, AlgoError> {
        inbox
            .iter()
            .map(|&(from, bytes)| Ok((bytes, self.row.weight(from)?)))
            .collect()
    }

    /// A warm-up iteration: D-PSGD with the slack weights (x^ = x exactly),
    /// tracking the largest local step.
    fn receive_full_precision(
        &mut self,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        if let Some(g) = self.warmup.as_mut() {
            *g = delta.iter().fold(*g, |m, d| m.max(d.abs()));
        }
        scratch::with_vectors(self.x.len(), |[acc, decoded]| {
            acc.fill(0.0);
            let mut total = 0.0f32;
            for &(from, bytes) in inbox {
                let w = self.row.weight(from)?;
                FullPrecision::default().decode(bytes, decoded)?;
                axpy(acc, w, decoded);
                total += w;
            }
            for ((x, &a), &d) in self.x.iter_mut().zip(acc.iter()).zip(delta) {
                *x += a - total * *x - d;
            }
            Ok(Received::default())
        })
    }
}

impl Moniqua {
    /// The update on the baselines' passes: `acc = -(sum_j w_j) x^_i` from
    /// the local term kept at `send`; each neighbour recovered into a
    /// buffer, then `acc += w_j x^_j`; then `x += acc - delta`. The fused
    /// `mix`'s arithmetic in the same order, so the same bits, in separate
    /// passes over memory. A neighbour whose recovery fails the hash is
    /// taken back out where the codec leaves it out.
    fn receive_in_passes(
        &mut self,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        let own = self.own.as_deref().unwrap_or_default();
        check_len("local biased term", self.x.len(), own.len())?;
        let neighbours = self.neighbours(inbox)?;
        let total: f32 = neighbours.iter().fold(0.0, |t, &(_, w)| t + w);
        scratch::with_vectors(self.x.len(), |[acc, decoded]| {
            for (a, &o) in acc.iter_mut().zip(own) {
                *a = -total * o;
            }
            let mut received = Received::default();
            for &(bytes, w) in &neighbours {
                let d = self
                    .codec
                    .decode(bytes, &self.x, DecodeTarget::Out(decoded))?;
                received.record(d.verification);
                if d.verification == Verification::Mismatch && self.codec.leaves_out_mismatched() {
                    // as if it had not sent: its weight back on the local term
                    axpy(acc, w, own);
                    continue;
                }
                axpy(acc, w, decoded);
            }
            for ((x, &a), &d) in self.x.iter_mut().zip(acc.iter()).zip(delta) {
                *x += a - d;
            }
            Ok(received)
        })
    }
}

/// `acc += sum_j W_ij x^_j` over the neighbours' Moniqua frames, recovered
/// against `local`. A frame whose recovery fails the hash is taken back out
/// and its neighbour left out of the average (counted, never used). Returns
/// the total weight of the neighbours used and the verification counts.
/// Moniqua on D² uses it (Moniqua itself updates in one pass, `MoniquaCodec::mix`).
pub(crate) fn accumulate_verified(
    codec: &MoniquaCodec,
    row: &Row,
    local: &[f32],
    inbox: &[(usize, &[u8])],
    acc: &mut [f32],
) -> Result<(f32, Received), AlgoError> {
    let mut total = 0.0f32;
    let mut received = Received::default();
    for &(from, bytes) in inbox {
        let w = row.weight(from)?;
        let d = codec.decode(
            bytes,
            local,
            DecodeTarget::Add {
                acc: &mut *acc,
                weight: w,
            },
        )?;
        received.record(d.verification);
        if d.verification == Verification::Mismatch && codec.leaves_out_mismatched() {
            codec.decode(
                bytes,
                local,
                DecodeTarget::Add {
                    acc: &mut *acc,
                    weight: -w,
                },
            )?;
            continue;
        }
        total += w;
    }
    Ok((total, received))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Moniqua on the baselines' passes (`fused: false`) computes the fused
    /// update's arithmetic in the same order: the same bits, at 1, 2 and 8
    /// bits, with and without the hash, a slack gamma below 1, and a length
    /// that is no multiple of a chunk.
    #[test]
    fn the_passes_give_the_fused_update_bit_for_bit() {
        let (n, d) = (4, 4099);
        let topology = Topology::ring(n).unwrap();
        let model = |i: usize| -> Vec<f32> {
            (0..d)
                .map(|j| ((i * 131 + j * 17) % 97) as f32 * 1e-3 + 0.01 * i as f32 - 0.05)
                .collect()
        };
        let delta: Vec<f32> = (0..d).map(|j| (j % 13) as f32 * 1e-4).collect();
        for (bits, modulus, hash) in [(1, Some(0.5), false), (2, None, true), (8, None, false)] {
            let config = |fused| MoniquaConfig {
                bits,
                theta: 0.5,
                modulus,
                hash,
                fused,
                ..MoniquaConfig::default()
            };
            let k = 3;
            let frames: Vec<(usize, Vec<u8>)> = [1, 3]
                .into_iter()
                .map(|from| {
                    let mut w =
                        Moniqua::new(from, &topology, &config(true), 7, 0.4, &model(from)).unwrap();
                    let mut frame = Vec::new();
                    w.send(k, &delta, &mut frame).unwrap();
                    (from, frame)
                })
                .collect();
            let inbox: Vec<(usize, &[u8])> =
                frames.iter().map(|(j, f)| (*j, f.as_slice())).collect();
            let mut updated = Vec::new();
            for fused in [true, false] {
                let mut w = Moniqua::new(0, &topology, &config(fused), 7, 0.4, &model(0)).unwrap();
                let mut frame = Vec::new();
                w.send(k, &delta, &mut frame).unwrap();
                let received = w.receive(k, &delta, &inbox).unwrap();
                assert_eq!(received.verified, if hash { 2 } else { 0 });
                assert_eq!(w.extra_memory(), if fused { 0 } else { 4 * d });
                updated.push(w.model().iter().map(|v| v.to_bits()).collect::<Vec<_>>());
            }
            assert_ne!(
                updated[0],
                model(0).iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            assert_eq!(updated[0], updated[1], "bits {bits}, hash {hash}");
        }
    }
}
