//! Norm-scaled quantization of gradients: QSGD (Alistarh et al. 2017) and
//! TernGrad (Wen et al. 2017), as Jiang & Agrawal (2018) describe them.
//!
//! Per bucket, with scale `m = |v|_2` (QSGD) or `m = |v|_inf` (TernGrad) and
//! `s` levels, value `v_i` becomes `sign(v_i) * m * l_i / s` where
//! `l_i = floor(s |v_i| / m + u)`: unbiased. A code is the level in the low
//! bits and the sign above it: `1 + ceil(log2(s + 1))` bits, at most 16. TernGrad is
//! `Linf` with `s = 1`: the values `{-m, 0, m}` in 2 bits.

use crate::dither::Dither;
use crate::frame::{self, Compression, Expect, FrameHeader, Kind};
use crate::moniqua::Encoded;
use crate::pack::{pack, packed_len, unpack};
use crate::{CodecError, ConfigError};

/// Which norm scales a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Norm {
    /// `|v|_2` (QSGD).
    L2,
    /// `|v|_inf` (TernGrad).
    Linf,
}

/// What a user configures for QSGD / TernGrad.
#[derive(Debug, Clone, PartialEq)]
pub struct NormConfig {
    pub norm: Norm,
    /// Levels `s` (1 for TernGrad); at most 32767 so that a code fits 16 bits.
    pub levels: u32,
    /// Values per norm.
    pub bucket: usize,
    pub compression: Compression,
}

impl NormConfig {
    /// TernGrad: `{-m, 0, m}` with `m = max |v|` per bucket.
    pub fn terngrad(bucket: usize) -> Self {
        Self {
            norm: Norm::Linf,
            levels: 1,
            bucket,
            compression: Compression::None,
        }
    }

    /// QSGD with `s` levels per bucket.
    pub fn qsgd(levels: u32, bucket: usize) -> Self {
        Self {
            norm: Norm::L2,
            levels,
            bucket,
            compression: Compression::None,
        }
    }
}

/// A validated QSGD / TernGrad quantizer.
#[derive(Debug, Clone, PartialEq)]
pub struct NormCodec {
    cfg: NormConfig,
    bits: u32,
    level_bits: u32,
    seed: u64,
}

impl NormCodec {
    pub fn new(cfg: &NormConfig, seed: u64) -> Result<Self, ConfigError> {
        if !(1..=32_767).contains(&cfg.levels) {
            return Err(ConfigError::InvalidLevels { levels: cfg.levels });
        }
        if cfg.bucket == 0 || u32::try_from(cfg.bucket).is_err() {
            return Err(ConfigError::InvalidBucket);
        }
        let level_bits = 32 - cfg.levels.leading_zeros();
        Ok(Self {
            cfg: cfg.clone(),
            bits: 1 + level_bits,
            level_bits,
            seed,
        })
    }

    /// Bits per value (sign + level).
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Bytes of one frame for `len` values, before entropy coding.
    pub fn frame_len(&self, len: usize) -> usize {
        frame::HEADER_LEN + frame::raw_body_len(Kind::Norm, self.bits, len, self.cfg.bucket)
    }

    /// Quantizes `v` into a frame in `out`; `own` receives what receivers decode.
    pub fn encode(
        &self,
        v: &[f32],
        iteration: u64,
        sender: u32,
        own: Option<&mut [f32]>,
        out: &mut Vec<u8>,
    ) -> Result<Encoded, CodecError> {
        let len = frame::encode_preamble(v, own.as_deref(), "dequantized output buffer")?;
        frame::check_finite(v)?;
        let bucket = self.cfg.bucket;
        let nb = v.len().div_ceil(bucket);
        let start = frame::begin_frame(out, 4 * nb + packed_len(v.len(), self.bits));
        let (scales, packed) = out[start..].split_at_mut(4 * nb);
        let dither = Dither::new(self.seed, 1 + u64::from(sender), iteration);
        let s = self.cfg.levels as f32;
        let mut codes = vec![0u32; v.len()];
        let mut own = own;
        for (k, (vb, cb)) in v.chunks(bucket).zip(codes.chunks_mut(bucket)).enumerate() {
            let m = match self.cfg.norm {
                Norm::L2 => vb
                    .iter()
                    .map(|&x| f64::from(x) * f64::from(x))
                    .sum::<f64>()
                    .sqrt() as f32,
                Norm::Linf => vb.iter().fold(0.0f32, |m, &x| m.max(x.abs())),
            };
            if !m.is_finite() {
                return Err(CodecError::Overflow {
                    what: "a bucket's norm",
                    at: k,
                });
            }
            scales[4 * k..4 * k + 4].copy_from_slice(&m.to_le_bytes());
            let inv = if m > 0.0 { s / m } else { 0.0 };
            for (j, (c, &x)) in cb.iter_mut().zip(vb).enumerate() {
                let u = dither.uniform((k * bucket + j) as u32);
                let level = ((x.abs() * inv + u).floor() as u32).min(self.cfg.levels);
                *c = level | (u32::from(x < 0.0) << self.level_bits);
            }
            if let Some(own) = own.as_deref_mut() {
                let dst = &mut own[k * bucket..k * bucket + vb.len()];
                self.dequantize(cb, m, dst);
            }
        }
        pack(&codes, self.bits, packed);
        let header = FrameHeader {
            kind: Kind::Norm,
            bits: self.bits as u8,
            len,
            bucket: bucket as u32,
            iteration,
            sender,
            modulus: s,
            hash: None,
            compressed: false,
            body_len: 0,
        };
        Ok(Encoded {
            header: frame::finish_frame(out, header, self.cfg.compression)?,
        })
    }

    fn dequantize(&self, codes: &[u32], m: f32, out: &mut [f32]) {
        let mask = (1u32 << self.level_bits) - 1;
        let unit = m / self.cfg.levels as f32;
        for (o, &c) in out.iter_mut().zip(codes) {
            let value = (c & mask) as f32 * unit;
            *o = if c >> self.level_bits & 1 == 1 {
                -value
            } else {
                value
            };
        }
    }

    /// Dequantizes a frame into `out`.
    pub fn decode(&self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError> {
        let frame = frame::open_frame(
            bytes,
            &Expect {
                kind: Kind::Norm,
                bits: self.bits as u8,
                len: out.len(),
                modulus: Some(self.cfg.levels as f32),
                bucket: Some(self.cfg.bucket as u32),
            },
        )?;
        let bucket = self.cfg.bucket;
        let nb = out.len().div_ceil(bucket);
        let (scales, packed) = frame.body.split_at(4 * nb);
        let mut codes = vec![0u32; out.len()];
        unpack(packed, self.bits, &mut codes);
        for (k, (cb, ob)) in codes.chunks(bucket).zip(out.chunks_mut(bucket)).enumerate() {
            let m = f32::from_le_bytes([
                scales[4 * k],
                scales[4 * k + 1],
                scales[4 * k + 2],
                scales[4 * k + 3],
            ]);
            if !(m >= 0.0 && m.is_finite()) {
                return Err(CodecError::CorruptScale {
                    bucket: k,
                    scale: m,
                });
            }
            let level_mask = (1u32 << self.level_bits) - 1;
            if cb.iter().any(|&c| c & level_mask > self.cfg.levels) {
                return Err(CodecError::CorruptScale {
                    bucket: k,
                    scale: m,
                });
            }
            self.dequantize(cb, m, ob);
        }
        Ok(frame.header)
    }
}

crate::codec::impl_codec!(NormCodec);

/// Its codecs in [`crate::CODECS`]: TernGrad and QSGD with levels from
/// 1 to 32767 and buckets of 1 to 1024 values, and the header's own levels
/// (its parameter field) and bucket.
pub(crate) fn codecs(h: Option<&FrameHeader>) -> Vec<Box<dyn crate::Codec>> {
    let mut settings = vec![
        NormConfig::qsgd(1, 1),
        NormConfig::qsgd(127, 7),
        NormConfig::terngrad(1024),
        NormConfig::qsgd(255, 64),
        NormConfig::qsgd(32_767, 7),
    ];
    if let Some(h) = h
        && h.modulus >= 1.0
        && h.modulus <= 32_767.0
    {
        settings.push(NormConfig::qsgd(h.modulus as u32, h.bucket as usize));
        settings.push(NormConfig {
            norm: Norm::Linf,
            ..NormConfig::qsgd(h.modulus as u32, h.bucket as usize)
        });
    }
    settings
        .iter()
        .filter_map(|cfg| NormCodec::new(cfg, 0).ok())
        .map(|c| Box::new(c) as Box<dyn crate::Codec>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terngrad_is_ternary_and_unbiased() {
        let c = NormCodec::new(&NormConfig::terngrad(4), 1).unwrap();
        assert_eq!(c.bits(), 2);
        let v = [0.5f32, -1.0, 0.25, 0.0, 3.0];
        let mut f = Vec::new();
        let mut out = [0.0f32; 5];
        let mut mean = [0.0f64; 5];
        let draws = 20_000;
        for k in 0..draws {
            c.encode(&v, k, 0, None, &mut f).unwrap();
            assert_eq!(f.len(), c.frame_len(5));
            c.decode(&f, &mut out).unwrap();
            for (i, &o) in out.iter().enumerate() {
                let m = if i < 4 { 1.0 } else { 3.0 };
                assert!(o == 0.0 || o.abs() == m, "{o}");
                mean[i] += f64::from(o) / draws as f64;
            }
        }
        for (m, &x) in mean.iter().zip(&v) {
            assert!((m - f64::from(x)).abs() < 0.02, "{m} vs {x}");
        }
    }

    #[test]
    fn qsgd_levels_and_bits() {
        let c = NormCodec::new(&NormConfig::qsgd(7, 100), 1).unwrap();
        assert_eq!(c.bits(), 4);
        let v: Vec<f32> = (0..250).map(|i| ((i as f32) * 0.37).sin()).collect();
        let mut f = Vec::new();
        let mut own = vec![0.0; 250];
        c.encode(&v, 3, 2, Some(&mut own), &mut f).unwrap();
        let mut out = vec![0.0; 250];
        c.decode(&f, &mut out).unwrap();
        assert_eq!(out, own);
        for (k, (vb, ob)) in v.chunks(100).zip(out.chunks(100)).enumerate() {
            let norm = vb.iter().map(|x| x * x).sum::<f32>().sqrt();
            for (x, o) in vb.iter().zip(ob) {
                assert!((x - o).abs() <= norm / 7.0 + 1e-5, "bucket {k}");
                assert!(*o == 0.0 || o.signum() == x.signum());
            }
        }
        // more than 127 levels: codes wider than a byte
        for (levels, bits) in [(128, 9), (255, 9), (256, 10), (32_767, 16)] {
            let c = NormCodec::new(&NormConfig::qsgd(levels, 64), 1).unwrap();
            assert_eq!(c.bits(), bits, "{levels} levels");
            c.encode(&v, 3, 2, Some(&mut own), &mut f).unwrap();
            assert_eq!(f.len(), c.frame_len(250));
            assert_eq!(f.len(), 44 + 4 * 4 + (250 * bits as usize).div_ceil(8));
            c.decode(&f, &mut out).unwrap();
            assert_eq!(out, own);
            for (k, (vb, ob)) in v.chunks(64).zip(out.chunks(64)).enumerate() {
                let norm = vb.iter().map(|x| x * x).sum::<f32>().sqrt();
                for (x, o) in vb.iter().zip(ob) {
                    let err = (x - o).abs();
                    assert!(err <= norm / levels as f32 + 1e-5, "bucket {k}: {err}");
                }
            }
        }
        // finite values whose norm is beyond f32: a diverged model, not a
        // frame its receivers would refuse
        let huge = [3e38f32, 3e38, 1.0];
        let c = NormCodec::new(&NormConfig::qsgd(7, 2), 1).unwrap();
        assert_eq!(
            c.encode(&huge, 0, 0, None, &mut f),
            Err(CodecError::Overflow {
                what: "a bucket's norm",
                at: 0
            })
        );
        assert!(matches!(
            NormCodec::new(&NormConfig::qsgd(32_768, 10), 0),
            Err(ConfigError::InvalidLevels { .. })
        ));
    }
}
