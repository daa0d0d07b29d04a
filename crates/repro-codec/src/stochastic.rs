//! The baselines' quantizer: unbiased stochastic rounding to `b` bits over
//! `[-s, s]`, with `s = max |v|` per bucket sent as an f32 beside the codes.
//!
//! Level `k` of `L = 2^b` stands for `-s + k * 2s / (L - 1)`, so both ends are
//! representable (at one bit the levels are `{-s, s}`), and
//! `k = floor((v + s) (L - 1) / (2s) + u)` is unbiased for a uniform dither `u`.

use crate::dither::Dither;
use crate::frame::{self, Compression, Expect, FrameHeader, Kind};
use crate::kernels::{self, BucketParams};
use crate::moniqua::Encoded;
use crate::pack::packed_len;
use crate::{CodecError, ConfigError};

/// Default values per scale.
pub const DEFAULT_BUCKET: usize = 1024;

/// What a user configures for the baselines' quantizer.
#[derive(Debug, Clone, PartialEq)]
pub struct StochasticConfig {
    /// Bits per value, 1..=8.
    pub bits: u32,
    /// Values sharing one f32 scale.
    pub bucket: usize,
    /// Entropy coding of the payload.
    pub compression: Compression,
}

impl Default for StochasticConfig {
    fn default() -> Self {
        Self {
            bits: 8,
            bucket: DEFAULT_BUCKET,
            compression: Compression::None,
        }
    }
}

/// A validated baseline quantizer for one run. Each sender draws its own
/// dither stream (independent rounding across workers).
#[derive(Debug, Clone, PartialEq)]
pub struct StochasticCodec {
    bits: u32,
    bucket: usize,
    compression: Compression,
    seed: u64,
}

impl StochasticCodec {
    /// Validates `cfg`; `seed` keys the run's dither.
    pub fn new(cfg: &StochasticConfig, seed: u64) -> Result<Self, ConfigError> {
        if !(1..=8).contains(&cfg.bits) {
            return Err(ConfigError::BitsOutOfRange { bits: cfg.bits });
        }
        if cfg.bucket == 0 || u32::try_from(cfg.bucket).is_err() {
            return Err(ConfigError::InvalidBucket);
        }
        Ok(Self {
            bits: cfg.bits,
            bucket: cfg.bucket,
            compression: cfg.compression,
            seed,
        })
    }

    /// Bits per value.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Bytes of one frame for `len` values, before entropy coding.
    pub fn frame_len(&self, len: usize) -> usize {
        frame::HEADER_LEN + frame::raw_body_len(Kind::Stochastic, self.bits, len, self.bucket)
    }

    fn dither(&self, iteration: u64, sender: u32) -> Dither {
        // stream 0 is Moniqua's shared stream; baselines never share theirs
        Dither::new(self.seed, 1 + u64::from(sender), iteration)
    }

    /// Quantizes `x` into a frame in `out`; `own`, if given, receives the
    /// dequantized values `C(x)` the receivers will see.
    pub fn encode(
        &self,
        x: &[f32],
        iteration: u64,
        sender: u32,
        own: Option<&mut [f32]>,
        out: &mut Vec<u8>,
    ) -> Result<Encoded, CodecError> {
        let len = frame::encode_preamble(x, own.as_deref(), "dequantized output buffer")?;
        let nb = x.len().div_ceil(self.bucket);
        let body_start = frame::begin_frame(out, 4 * nb + packed_len(x.len(), self.bits));
        let (scales, codes) = out[body_start..].split_at_mut(4 * nb);
        if kernels::bucket_scales(self.bucket, x, scales) > 0 {
            return Err(frame::non_finite_error(x));
        }
        let params = BucketParams {
            bits: self.bits,
            bucket: self.bucket,
            dither: self.dither(iteration, sender),
        };
        kernels::bucket_encode(&params, x, own, scales, codes);
        let header = FrameHeader {
            kind: Kind::Stochastic,
            bits: self.bits as u8,
            len,
            bucket: self.bucket as u32,
            iteration,
            sender,
            modulus: 0.0,
            hash: None,
            compressed: false,
            body_len: 0,
        };
        let header = frame::finish_frame(out, header, self.compression)?;
        Ok(Encoded { header })
    }

    /// Dequantizes a frame into `out`.
    pub fn decode(&self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError> {
        let frame = frame::open_frame(
            bytes,
            &Expect {
                kind: Kind::Stochastic,
                bits: self.bits as u8,
                len: out.len(),
                modulus: None,
                bucket: Some(self.bucket as u32),
            },
        )?;
        let h = frame.header;
        let len = out.len();
        let nb = len.div_ceil(self.bucket);
        let (scales, packed) = frame.body.split_at(4 * nb);
        if let Some(bucket) = kernels::bucket_decode(self.bits, self.bucket, scales, packed, out) {
            return Err(CodecError::CorruptScale {
                bucket,
                scale: f32::from_le_bytes(
                    scales[4 * bucket..4 * bucket + 4]
                        .try_into()
                        .unwrap_or([0; 4]),
                ),
            });
        }
        Ok(h)
    }
}

crate::codec::impl_codec!(StochasticCodec);

/// Its codecs in [`crate::CODECS`]: 1, 2 and 8 bits with buckets of 1,
/// 7 and 1024 values, and the header's own setting.
pub(crate) fn codecs(h: Option<&FrameHeader>) -> Vec<Box<dyn crate::Codec>> {
    let mut settings: Vec<(u32, usize)> = [1, 2, 8]
        .into_iter()
        .flat_map(|bits| [1, 7, 1024].map(|bucket| (bits, bucket)))
        .collect();
    settings.extend(h.map(|h| (u32::from(h.bits), h.bucket as usize)));
    settings
        .into_iter()
        .filter_map(|(bits, bucket)| {
            let cfg = StochasticConfig {
                bits,
                bucket,
                compression: Compression::None,
            };
            StochasticCodec::new(&cfg, 0).ok()
        })
        .map(|c| Box::new(c) as Box<dyn crate::Codec>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(bits: u32, bucket: usize) -> StochasticCodec {
        StochasticCodec::new(
            &StochasticConfig {
                bits,
                bucket,
                compression: Compression::None,
            },
            3,
        )
        .unwrap()
    }

    #[test]
    fn decoded_values_lie_on_the_bucket_grid() {
        let c = codec(2, 4);
        let x = [0.0f32, 1.0, -0.5, 0.2, 10.0, 0.0, 0.0, -10.0, 0.3];
        let mut f = Vec::new();
        let mut own = vec![0.0; x.len()];
        c.encode(&x, 0, 0, Some(&mut own), &mut f).unwrap();
        assert_eq!(f.len(), c.frame_len(x.len()));
        assert_eq!(f.len(), frame::HEADER_LEN + 3 * 4 + 3);
        let mut out = vec![0.0; x.len()];
        c.decode(&f, &mut out).unwrap();
        assert_eq!(out, own);
        let grids: [&[f32]; 3] = [
            &[-1.0, -1.0 / 3.0, 1.0 / 3.0, 1.0],
            &[-10.0, -10.0 / 3.0, 10.0 / 3.0, 10.0],
            &[-0.3, -0.1, 0.1, 0.3],
        ];
        for (i, v) in out.iter().enumerate() {
            let g = grids[i / 4];
            assert!(
                g.iter().any(|p| (p - v).abs() < 1e-6),
                "{i}: {v} not in {g:?}"
            );
        }
        // the extremes of each bucket are exact
        assert_eq!(out[1], 1.0);
        assert_eq!(out[4], 10.0);
        assert_eq!(out[7], -10.0);
    }

    #[test]
    fn zero_bucket_decodes_to_zero() {
        let c = codec(1, 8);
        let x = [0.0f32; 20];
        let mut f = Vec::new();
        c.encode(&x, 0, 0, None, &mut f).unwrap();
        let mut out = vec![1.0; 20];
        c.decode(&f, &mut out).unwrap();
        assert!(out.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn corrupt_scale_is_an_error_not_garbage() {
        let c = codec(8, 16);
        let mut f = Vec::new();
        c.encode(&[0.5f32; 16], 0, 0, None, &mut f).unwrap();
        f[frame::HEADER_LEN..frame::HEADER_LEN + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        let mut out = vec![0.0; 16];
        assert!(matches!(
            c.decode(&f, &mut out),
            Err(CodecError::CorruptScale { .. })
        ));
    }

    #[test]
    fn senders_draw_independent_dither() {
        let c = codec(1, 1024);
        // 0 sits half-way between the 1-bit levels -1 and 1: a coin flip each
        let mut x = vec![0.0f32; 64];
        x[0] = 1.0;
        let mut a = Vec::new();
        let mut b = Vec::new();
        c.encode(&x, 0, 0, None, &mut a).unwrap();
        c.encode(&x, 0, 1, None, &mut b).unwrap();
        assert_ne!(a[frame::HEADER_LEN..], b[frame::HEADER_LEN..]);
    }

    #[test]
    fn invalid_configuration() {
        let bad_bits = StochasticConfig {
            bits: 0,
            ..StochasticConfig::default()
        };
        assert_eq!(
            StochasticCodec::new(&bad_bits, 0),
            Err(ConfigError::BitsOutOfRange { bits: 0 })
        );
        let bad_bucket = StochasticConfig {
            bucket: 0,
            ..StochasticConfig::default()
        };
        assert_eq!(
            StochasticCodec::new(&bad_bucket, 0),
            Err(ConfigError::InvalidBucket)
        );
    }
}
