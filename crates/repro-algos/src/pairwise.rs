//! The pairwise average of AD-PSGD (Lian et al. 2017b) and of Moniqua on
//! AD-PSGD (Lu & De Sa 2020, Section 5), one side of it: what a worker sends
//! and how it folds in what its partner sent. Used by the event-driven
//! simulator and by the trainer's asynchronous MPI loop, so both average the
//! same way.
//!
//! A side encodes its model `s` (a snapshot: in the trainer the gradient
//! thread may change the model while the frames travel), then on receiving
//! the partner's frame adds half the difference to its current model:
//! `x <- x + (x^_j - x^_own) / 2`, where for full precision `x^_j` is the
//! partner's model and `x^_own = s`, and for Moniqua `x^_j` is recovered
//! against `s` and `x^_own` is the own biased term of `s` (Algorithm 1). When
//! `x = s` (no update meanwhile) and both sides use full precision this is
//! exactly `x_i, x_j <- (x_i + x_j) / 2`; an update made meanwhile is kept.

use repro_codec::{DecodeTarget, FullPrecision, MoniquaCodec, MoniquaConfig, Verification};

use crate::AlgoError;

/// How a pair exchanges models.
#[derive(Debug, Clone, PartialEq)]
pub enum AsyncExchange {
    /// AD-PSGD: full-precision models.
    Full,
    /// Moniqua on AD-PSGD.
    Moniqua(MoniquaConfig),
}

/// One side of a pairwise average.
#[derive(Debug, Clone)]
pub struct PairSide {
    codec: Option<MoniquaCodec>,
    /// The snapshot that was sent.
    sent: Vec<f32>,
    /// What the partner will recover of it: `sent` itself for full
    /// precision, the own biased term for Moniqua.
    own: Vec<f32>,
    theirs: Vec<f32>,
}

/// What folding in a partner's frame did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Folded {
    /// The model moved halfway towards the partner's (no hash to check).
    Averaged,
    /// Moniqua's hash verified the recovery, and the model moved halfway
    /// towards the partner's.
    Verified,
    /// Moniqua's hash showed that the recovery failed (theta too small for
    /// the distance between the two models): the model was left as it is.
    Mismatch,
}

impl PairSide {
    /// A side for models of `d` coordinates; `seed` seeds Moniqua's shared dither.
    pub fn new(exchange: &AsyncExchange, seed: u64, d: usize) -> Result<Self, AlgoError> {
        Ok(Self {
            codec: match exchange {
                AsyncExchange::Full => None,
                AsyncExchange::Moniqua(c) => Some(MoniquaCodec::new(c, seed)?),
            },
            sent: vec![0.0; d],
            own: vec![0.0; d],
            theirs: vec![0.0; d],
        })
    }

    /// Encodes the snapshot `x` into `frame` (`iteration` and `sender` go in
    /// its header) and remembers it for [`PairSide::fold`].
    pub fn encode(
        &mut self,
        x: &[f32],
        iteration: u64,
        sender: u32,
        frame: &mut Vec<u8>,
    ) -> Result<(), AlgoError> {
        crate::algorithm::check_len("model", self.sent.len(), x.len())?;
        self.sent.copy_from_slice(x);
        match &self.codec {
            None => {
                FullPrecision::default().encode(x, iteration, sender, frame)?;
                self.own.copy_from_slice(x);
            }
            Some(codec) => {
                codec.encode(x, iteration, sender, Some(&mut self.own), frame)?;
            }
        }
        Ok(())
    }

    /// Folds the partner's `frame` into the current model `x`.
    pub fn fold(&mut self, frame: &[u8], x: &mut [f32]) -> Result<Folded, AlgoError> {
        crate::algorithm::check_len("model", self.sent.len(), x.len())?;
        let mut verified = false;
        match &self.codec {
            None => {
                FullPrecision::default().decode(frame, &mut self.theirs)?;
            }
            Some(codec) => {
                let d = codec.decode(frame, &self.sent, DecodeTarget::Out(&mut self.theirs))?;
                match d.verification {
                    Verification::Mismatch => return Ok(Folded::Mismatch),
                    Verification::Verified => verified = true,
                    Verification::Unchecked => {}
                }
            }
        }
        for ((x, &theirs), &own) in x.iter_mut().zip(&self.theirs).zip(&self.own) {
            *x += 0.5 * (theirs - own);
        }
        Ok(if verified {
            Folded::Verified
        } else {
            Folded::Averaged
        })
    }
}

#[cfg(test)]
mod tests {
    use repro_codec::{MoniquaConfig, Rounding};

    use super::*;

    fn pair(exchange: &AsyncExchange, a: &mut [f32], b: &mut [f32]) -> (Folded, Folded, usize) {
        let mut sa = PairSide::new(exchange, 3, a.len()).unwrap();
        let mut sb = PairSide::new(exchange, 3, b.len()).unwrap();
        let (mut fa, mut fb) = (Vec::new(), Vec::new());
        sa.encode(a, 7, 0, &mut fa).unwrap();
        sb.encode(b, 7, 1, &mut fb).unwrap();
        (
            sa.fold(&fb, a).unwrap(),
            sb.fold(&fa, b).unwrap(),
            fa.len() + fb.len(),
        )
    }

    #[test]
    fn full_precision_sides_meet_at_the_mean() {
        let mut a = vec![1.0f32, -2.0, 0.5];
        let mut b = vec![3.0f32, 2.0, 0.5];
        let (x, y, _) = pair(&AsyncExchange::Full, &mut a, &mut b);
        assert_eq!((x, y), (Folded::Averaged, Folded::Averaged));
        assert_eq!(a, vec![2.0, 0.0, 0.5]);
        assert_eq!(a, b);
    }

    #[test]
    fn an_update_made_while_the_frames_travel_is_kept() {
        let mut side = PairSide::new(&AsyncExchange::Full, 0, 2).unwrap();
        let mut frame = Vec::new();
        let mut x = vec![1.0f32, 1.0];
        side.encode(&x, 0, 0, &mut frame).unwrap();
        // the gradient thread steps while the exchange is in flight
        x[0] -= 0.25;
        let mut partner = Vec::new();
        FullPrecision::default()
            .encode(&[3.0, 1.0], 0, 1, &mut partner)
            .unwrap();
        side.fold(&partner, &mut x).unwrap();
        assert_eq!(x, vec![2.0 - 0.25, 1.0]);
    }

    #[test]
    fn moniqua_sides_average_within_the_quantization_error_with_fewer_bytes() {
        let cfg = MoniquaConfig {
            bits: 8,
            rounding: Rounding::Nearest,
            theta: 1.0,
            ..MoniquaConfig::default()
        };
        let a0: Vec<f32> = (0..300).map(|i| (i as f32 * 0.1).sin()).collect();
        let b0: Vec<f32> = a0.iter().map(|v| v + 0.3).collect();
        let (mut a, mut b) = (a0.clone(), b0.clone());
        let (x, y, bytes) = pair(&AsyncExchange::Moniqua(cfg.clone()), &mut a, &mut b);
        assert_eq!((x, y), (Folded::Verified, Folded::Verified));
        let tol = 2.0 / (1.0 - 2.0 / 512.0) * 2.0 / 512.0; // a few times delta * B
        for i in 0..300 {
            let mean = 0.5 * (a0[i] + b0[i]);
            assert!((a[i] - mean).abs() < tol, "{i}: {} vs {mean}", a[i]);
            assert!((b[i] - mean).abs() < tol, "{i}: {} vs {mean}", b[i]);
        }
        let (mut fa, mut fb) = (a0.clone(), b0.clone());
        let (_, _, full) = pair(&AsyncExchange::Full, &mut fa, &mut fb);
        assert!(bytes * 3 < full, "8-bit frames: {bytes} bytes, f32: {full}");
    }

    #[test]
    fn moniqua_leaves_the_model_when_theta_is_too_small() {
        let cfg = MoniquaConfig {
            bits: 4,
            rounding: Rounding::Nearest,
            theta: 0.01,
            ..MoniquaConfig::default()
        };
        let a0: Vec<f32> = (0..64).map(|i| i as f32 * 0.05).collect();
        let b0: Vec<f32> = a0.iter().map(|v| v + 5.0).collect();
        let (mut a, mut b) = (a0.clone(), b0.clone());
        let (x, y, _) = pair(&AsyncExchange::Moniqua(cfg), &mut a, &mut b);
        assert_eq!((x, y), (Folded::Mismatch, Folded::Mismatch));
        assert_eq!((a, b), (a0, b0));
    }
}
