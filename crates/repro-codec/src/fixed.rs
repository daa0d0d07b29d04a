//! A fixed-precision randomized quantizer: `b`-bit codes on a grid of step
//! `d` that does not depend on what is sent. Tang et al. (2018, DCD/ECD-PSGD)
//! used one in their experiments: "using fix precision randomized
//! quantization strategy - a magnitude independent method - still works
//! very well" (their section 4.2).
//!
//! The `2^b` levels are `(k + 1/2) d` for `k` in `[-2^(b-1), 2^(b-1))`,
//! symmetric about 0 (at one bit, `-d/2` and `d/2`). A value inside the
//! range `[-(2^(b-1) - 1/2) d, (2^(b-1) - 1/2) d]` rounds to one of its two
//! neighbouring levels, unbiased for a uniform dither, with an error below
//! `d` whatever its magnitude. A value beyond the range saturates to the end
//! level: biased, and counted in [`FixedEncoded::saturated`]. The header's
//! parameter field carries `d`; no scale is sent.

use crate::dither::Dither;
use crate::frame::{self, Compression, Expect, FrameHeader, Kind};
use crate::pack::{pack, packed_len, unpack};
use crate::{CodecError, ConfigError};

/// What a user configures for the fixed-precision quantizer.
#[derive(Debug, Clone, PartialEq)]
pub struct FixedConfig {
    /// Bits per value, 1..=8.
    pub bits: u32,
    /// The grid's step `d`: positive and finite.
    pub step: f32,
    /// Entropy coding of the payload.
    pub compression: Compression,
}

/// A validated fixed-precision quantizer for one run. Each sender draws its
/// own dither stream, as the baselines' quantizer does.
#[derive(Debug, Clone, PartialEq)]
pub struct FixedCodec {
    bits: u32,
    step: f32,
    compression: Compression,
    seed: u64,
}

/// What an encode produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedEncoded {
    pub header: FrameHeader,
    /// Values beyond the grid's range, sent as its end level.
    pub saturated: usize,
}

impl FixedCodec {
    /// Validates `cfg`; `seed` keys the run's dither.
    pub fn new(cfg: &FixedConfig, seed: u64) -> Result<Self, ConfigError> {
        if !(1..=8).contains(&cfg.bits) {
            return Err(ConfigError::BitsOutOfRange { bits: cfg.bits });
        }
        if !(cfg.step > 0.0 && cfg.step.is_finite()) {
            return Err(ConfigError::InvalidStep { step: cfg.step });
        }
        Ok(Self {
            bits: cfg.bits,
            step: cfg.step,
            compression: cfg.compression,
            seed,
        })
    }

    /// Bits per value.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The grid's half-range: values within `[-r, r]` never saturate.
    pub fn range(&self) -> f32 {
        (self.half() - 0.5) * self.step
    }

    /// `2^(b-1)`: the levels on each side of 0.
    fn half(&self) -> f32 {
        (1u32 << (self.bits - 1)) as f32
    }

    /// Bytes of one frame for `len` values, before entropy coding.
    pub fn frame_len(&self, len: usize) -> usize {
        frame::HEADER_LEN + packed_len(len, self.bits)
    }

    fn dither(&self, iteration: u64, sender: u32) -> Dither {
        // stream 0 is Moniqua's shared stream; baselines never share theirs
        Dither::new(self.seed, 1 + u64::from(sender), iteration)
    }

    /// The code of `x` with dither `u`: the lower neighbouring level's
    /// index, plus one with the probability of the distance from it.
    fn code(&self, x: f32, u: f32) -> (u32, bool) {
        let top = 2.0 * self.half() - 1.0;
        // level k + 1/2 sits at index k + half
        let at = x / self.step - 0.5 + self.half();
        let k = (at + u).floor().clamp(0.0, top);
        (k as u32, !(0.0..=top).contains(&at))
    }

    /// The value of code `c`.
    fn level(&self, c: u32) -> f32 {
        (c as f32 - self.half() + 0.5) * self.step
    }

    /// Quantizes `x` into a frame in `out`; `own`, if given, receives the
    /// values `C(x)` the receivers will decode.
    pub fn encode(
        &self,
        x: &[f32],
        iteration: u64,
        sender: u32,
        own: Option<&mut [f32]>,
        out: &mut Vec<u8>,
    ) -> Result<FixedEncoded, CodecError> {
        let len = frame::encode_preamble(x, own.as_deref(), "dequantized output buffer")?;
        frame::check_finite(x)?;
        let dither = self.dither(iteration, sender);
        let mut saturated = 0;
        let codes: Vec<u32> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let (c, clipped) = self.code(v, dither.uniform(i as u32));
                saturated += usize::from(clipped);
                c
            })
            .collect();
        if let Some(own) = own {
            for (o, &c) in own.iter_mut().zip(&codes) {
                *o = self.level(c);
            }
        }
        let body_start = frame::begin_frame(out, packed_len(x.len(), self.bits));
        pack(&codes, self.bits, &mut out[body_start..]);
        let header = FrameHeader {
            kind: Kind::Fixed,
            bits: self.bits as u8,
            len,
            bucket: 0,
            iteration,
            sender,
            modulus: self.step,
            hash: None,
            compressed: false,
            body_len: 0,
        };
        let header = frame::finish_frame(out, header, self.compression)?;
        Ok(FixedEncoded { header, saturated })
    }

    /// Dequantizes a frame into `out`. A frame on another grid (its step
    /// differs from this codec's) is refused.
    pub fn decode(&self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError> {
        let frame = frame::open_frame(
            bytes,
            &Expect {
                kind: Kind::Fixed,
                bits: self.bits as u8,
                len: out.len(),
                modulus: Some(self.step),
                bucket: None,
            },
        )?;
        let mut codes = vec![0u32; out.len()];
        unpack(&frame.body, self.bits, &mut codes);
        for (o, &c) in out.iter_mut().zip(&codes) {
            *o = self.level(c);
        }
        Ok(frame.header)
    }
}

crate::codec::impl_codec!(FixedCodec);

/// Its codecs in [`crate::CODECS`]: 1, 2 and 8 bits on steps 0.1 and
/// 1, and the header's own bits and step.
pub(crate) fn codecs(h: Option<&FrameHeader>) -> Vec<Box<dyn crate::Codec>> {
    let mut settings: Vec<(u32, f32)> = [1, 2, 8]
        .into_iter()
        .flat_map(|bits| [0.1, 1.0].map(|step| (bits, step)))
        .collect();
    settings.extend(h.map(|h| (u32::from(h.bits), h.modulus)));
    settings
        .into_iter()
        .filter_map(|(bits, step)| {
            let cfg = FixedConfig {
                bits,
                step,
                compression: Compression::None,
            };
            FixedCodec::new(&cfg, 0).ok()
        })
        .map(|c| Box::new(c) as Box<dyn crate::Codec>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(bits: u32, step: f32) -> FixedCodec {
        FixedCodec::new(
            &FixedConfig {
                bits,
                step,
                compression: Compression::None,
            },
            7,
        )
        .unwrap()
    }

    #[test]
    fn one_bit_sends_half_a_step_either_way() {
        let c = codec(1, 2.0);
        assert_eq!(c.range(), 1.0);
        let x = [-5.0f32, -1.0, 0.0, 0.3, 1.0, 5.0];
        let mut f = Vec::new();
        let mut own = vec![0.0; x.len()];
        let e = c.encode(&x, 0, 0, Some(&mut own), &mut f).unwrap();
        assert_eq!(f.len(), c.frame_len(x.len()));
        assert_eq!(f.len(), frame::HEADER_LEN + 1);
        assert!(own.iter().all(|&v| v == -1.0 || v == 1.0), "{own:?}");
        assert_eq!((own[0], own[1], own[4], own[5]), (-1.0, -1.0, 1.0, 1.0));
        assert_eq!(e.saturated, 2);
        let mut out = vec![0.0; x.len()];
        c.decode(&f, &mut out).unwrap();
        assert_eq!(out, own);
    }

    #[test]
    fn the_error_is_below_a_step_whatever_the_magnitude() {
        // the same step serves small and large values alike: the baselines'
        // bucket quantizer's error grows with the largest value sent
        let c = codec(8, 0.5);
        let x: Vec<f32> = (0..2000).map(|i| (i as f32 - 1000.0) * 0.0631).collect();
        let mut own = vec![0.0; x.len()];
        let e = c.encode(&x, 3, 1, Some(&mut own), &mut Vec::new()).unwrap();
        assert_eq!(e.saturated, 0);
        for (a, b) in x.iter().zip(&own) {
            assert!((a - b).abs() < 0.5, "{a} -> {b}");
        }
    }

    #[test]
    fn a_frame_on_another_grid_is_refused() {
        let mut f = Vec::new();
        codec(4, 0.5).encode(&[0.1; 9], 0, 0, None, &mut f).unwrap();
        let mut out = vec![0.0; 9];
        assert!(codec(4, 0.25).decode(&f, &mut out).is_err());
        assert!(codec(3, 0.5).decode(&f, &mut out).is_err());
        assert!(codec(4, 0.5).decode(&f, &mut out).is_ok());
    }

    #[test]
    fn invalid_configuration() {
        for step in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            let cfg = FixedConfig {
                bits: 4,
                step,
                compression: Compression::None,
            };
            assert!(FixedCodec::new(&cfg, 0).is_err(), "{step}");
        }
        let cfg = FixedConfig {
            bits: 9,
            step: 1.0,
            compression: Compression::None,
        };
        assert_eq!(
            FixedCodec::new(&cfg, 0),
            Err(ConfigError::BitsOutOfRange { bits: 9 })
        );
        let mut f = Vec::new();
        assert!(
            codec(2, 1.0)
                .encode(&[f32::NAN], 0, 0, None, &mut f)
                .is_err()
        );
    }
}
