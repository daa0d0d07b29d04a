//! Sparsifiers: top-k and random-k (Stich et al. 2018; the compressors of
//! Koloskova et al. 2019, CHOCO-SGD).
//!
//! Each keeps `k` of the `d` values and sends them with their indices: a
//! frame of `k` strictly increasing indices of `ceil(log2 d)` bits, then the
//! `k` values as f32. Nothing is counted that is not sent, so a sparsifier's
//! cost per kept value is `32 + ceil(log2 d)` bits.
//!
//! - `top-k` keeps the `k` values of largest magnitude (ties to the lower
//!   index). It is a contraction, `|C(v) - v|^2 <= (1 - k/d) |v|^2`, and
//!   biased; it has no unbiased form.
//! - `random-k` keeps `k` indices drawn uniformly without replacement from
//!   the sender's stream for this iteration. As is (`biased`), it is the
//!   contraction `E |C(v) - v|^2 = (1 - k/d) |v|^2`; `unbiased` multiplies
//!   the kept values by `d/k`, so that `E C(v) = v` with variance
//!   `(d/k - 1) |v|^2`.

use crate::dither::mix64;
use crate::frame::{self, Compression, Expect, FrameHeader, Kind, index_bits};
use crate::moniqua::Encoded;
use crate::pack::{pack, packed_len, unpack};
use crate::{CodecError, ConfigError};

/// Which values a sparsifier keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// The largest magnitudes.
    Top,
    /// Uniformly at random, without replacement.
    Random,
}

/// How many values a sparsifier keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Keep {
    /// `k` values (all of them when the model is shorter).
    Count(u32),
    /// `ceil(fraction d)` values, at least one.
    Fraction(f64),
}

/// What a user configures for a sparsifier.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseConfig {
    pub select: Select,
    pub keep: Keep,
    /// Multiply the kept values by `d / k` (random-k only).
    pub unbiased: bool,
    pub compression: Compression,
}

/// A validated sparsifier.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseCodec {
    cfg: SparseConfig,
    seed: u64,
}

impl SparseCodec {
    pub fn new(cfg: &SparseConfig, seed: u64) -> Result<Self, ConfigError> {
        match cfg.keep {
            Keep::Count(0) => {
                return Err(ConfigError::InvalidKeep {
                    what: "no value (k = 0)".into(),
                });
            }
            Keep::Fraction(f) if !(f > 0.0 && f <= 1.0) => {
                return Err(ConfigError::InvalidKeep {
                    what: format!("a fraction {f} of the values"),
                });
            }
            _ => {}
        }
        if cfg.unbiased && cfg.select == Select::Top {
            return Err(ConfigError::UnbiasedTopK);
        }
        Ok(Self {
            cfg: cfg.clone(),
            seed,
        })
    }

    /// The number of values kept of `len`.
    pub fn kept(&self, len: usize) -> usize {
        let k = match self.cfg.keep {
            Keep::Count(k) => k as usize,
            Keep::Fraction(f) => (f * len as f64).ceil() as usize,
        };
        k.clamp(len.min(1), len)
    }

    /// Bytes of one frame for `len` values, before entropy coding.
    pub fn frame_len(&self, len: usize) -> usize {
        let k = self.kept(len);
        frame::HEADER_LEN + packed_len(k, index_bits(len)) + 4 * k
    }

    /// The indices kept of `v`, increasing.
    fn select(&self, v: &[f32], iteration: u64, sender: u32) -> Vec<u32> {
        let (d, k) = (v.len(), self.kept(v.len()));
        match self.cfg.select {
            Select::Top => {
                let mut idx: Vec<u32> = (0..d as u32).collect();
                if k < d {
                    // largest magnitude first, ties to the lower index
                    let order = |&a: &u32, &b: &u32| {
                        v[b as usize]
                            .abs()
                            .total_cmp(&v[a as usize].abs())
                            .then(a.cmp(&b))
                    };
                    idx.select_nth_unstable_by(k, order);
                    idx.truncate(k);
                    idx.sort_unstable();
                }
                idx
            }
            Select::Random => {
                // selection sampling (Knuth's Algorithm S): index i is taken
                // with probability (still needed) / (still left), which
                // takes exactly k, each k-subset equally likely, in order
                let key = mix64(mix64(self.seed ^ 0x5a_5a5a) ^ (1 + u64::from(sender)))
                    ^ mix64(iteration);
                let mut idx = Vec::with_capacity(k);
                for i in 0..d {
                    let needed = (k - idx.len()) as f64;
                    if needed == 0.0 {
                        break;
                    }
                    let u = (mix64(key ^ i as u64) >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                    if u * ((d - i) as f64) < needed {
                        idx.push(i as u32);
                    }
                }
                idx
            }
        }
    }

    /// The factor on the kept values.
    fn factor(&self, len: usize) -> f32 {
        if self.cfg.unbiased {
            (len as f64 / self.kept(len) as f64) as f32
        } else {
            1.0
        }
    }

    /// Sparsifies `v` into a frame in `out`; `own` receives what receivers
    /// decode.
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
        let idx = self.select(v, iteration, sender);
        let k = idx.len();
        let factor = self.factor(v.len());
        if let Some(&at) = idx.iter().find(|&&i| !(v[i as usize] * factor).is_finite()) {
            return Err(CodecError::Overflow {
                what: "a value times d / k",
                at: at as usize,
            });
        }
        let bits = index_bits(v.len());
        let start = frame::begin_frame(out, packed_len(k, bits) + 4 * k);
        let (packed, values) = out[start..].split_at_mut(packed_len(k, bits));
        pack(&idx, bits, packed);
        for (dst, &i) in values.chunks_exact_mut(4).zip(&idx) {
            dst.copy_from_slice(&(v[i as usize] * factor).to_le_bytes());
        }
        if let Some(own) = own {
            own.fill(0.0);
            for &i in &idx {
                own[i as usize] = v[i as usize] * factor;
            }
        }
        let header = FrameHeader {
            kind: Kind::Sparse,
            bits: bits as u8,
            len,
            bucket: k as u32,
            iteration,
            sender,
            modulus: 0.0,
            hash: None,
            compressed: false,
            body_len: 0,
        };
        Ok(Encoded {
            header: frame::finish_frame(out, header, self.cfg.compression)?,
        })
    }

    /// Decodes a frame into `out`: the kept values at their indices, zero
    /// elsewhere.
    pub fn decode(&self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError> {
        let frame = frame::open_frame(
            bytes,
            &Expect {
                kind: Kind::Sparse,
                bits: index_bits(out.len()) as u8,
                len: out.len(),
                modulus: None,
                bucket: Some(self.kept(out.len()) as u32),
            },
        )?;
        let k = frame.header.bucket as usize;
        let bits = u32::from(frame.header.bits);
        let (packed, values) = frame.body.split_at(packed_len(k, bits));
        let mut idx = vec![0u32; k];
        unpack(packed, bits, &mut idx);
        out.fill(0.0);
        let mut next = 0usize;
        for (entry, (&i, v)) in idx.iter().zip(values.chunks_exact(4)).enumerate() {
            if (i as usize) < next || i as usize >= out.len() {
                return Err(CodecError::CorruptIndex {
                    entry,
                    index: i,
                    len: out.len(),
                });
            }
            let value = f32::from_le_bytes([v[0], v[1], v[2], v[3]]);
            if !value.is_finite() {
                return Err(CodecError::CorruptValue { entry, value });
            }
            out[i as usize] = value;
            next = i as usize + 1;
        }
        Ok(frame.header)
    }
}

crate::codec::impl_codec!(SparseCodec);

/// Its codecs in [`crate::CODECS`]: top-k of 1 and 3 values (biased),
/// random-k of a half (unbiased) and of all values, and top-k of the
/// header's count.
pub(crate) fn codecs(h: Option<&FrameHeader>) -> Vec<Box<dyn crate::Codec>> {
    let mut settings = vec![
        (Select::Top, Keep::Count(1), false),
        (Select::Top, Keep::Count(3), false),
        (Select::Random, Keep::Fraction(0.5), true),
        (Select::Random, Keep::Fraction(1.0), false),
    ];
    settings.extend(h.map(|h| (Select::Top, Keep::Count(h.bucket.max(1)), false)));
    settings
        .into_iter()
        .filter_map(|(select, keep, unbiased)| {
            let cfg = SparseConfig {
                select,
                keep,
                unbiased,
                compression: Compression::None,
            };
            SparseCodec::new(&cfg, 0).ok()
        })
        .map(|c| Box::new(c) as Box<dyn crate::Codec>)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codec(select: Select, keep: Keep, unbiased: bool) -> SparseCodec {
        SparseCodec::new(
            &SparseConfig {
                select,
                keep,
                unbiased,
                compression: Compression::None,
            },
            9,
        )
        .unwrap()
    }

    #[test]
    fn top_k_keeps_the_largest_magnitudes_with_their_indices() {
        let c = codec(Select::Top, Keep::Count(3), false);
        let v = [0.5f32, -4.0, 0.0, 2.0, -2.0, 1.0, 3.0];
        let mut f = Vec::new();
        let mut own = [9.0f32; 7];
        c.encode(&v, 0, 0, Some(&mut own), &mut f).unwrap();
        // 7 values: 3-bit indices; 3 kept: 44 + 2 + 12 bytes
        assert_eq!(f.len(), 44 + 2 + 12);
        assert_eq!(f.len(), c.frame_len(7));
        let mut out = [7.0f32; 7];
        c.decode(&f, &mut out).unwrap();
        assert_eq!(
            out,
            [0.0, -4.0, 0.0, 2.0, 0.0, 0.0, 3.0],
            "ties to the lower index"
        );
        assert_eq!(out, own);
    }

    #[test]
    fn random_k_takes_exactly_k_each_index_equally_often() {
        let (d, k) = (10usize, 3u32);
        let c = codec(Select::Random, Keep::Count(k), true);
        let v = vec![1.0f32; d];
        let mut f = Vec::new();
        let mut out = vec![0.0f32; d];
        let mut hits = vec![0u32; d];
        let draws = 30_000;
        for t in 0..draws {
            c.encode(&v, t, 1, None, &mut f).unwrap();
            c.decode(&f, &mut out).unwrap();
            let kept: Vec<usize> = (0..d).filter(|&i| out[i] != 0.0).collect();
            assert_eq!(kept.len(), k as usize);
            for i in kept {
                // unbiased: the kept value is v_i d / k
                assert!((out[i] - 10.0 / 3.0).abs() < 1e-6);
                hits[i] += 1;
            }
        }
        // each index kept with probability k / d = 0.3: 9000 +- 3 sigma (238)
        for (i, &h) in hits.iter().enumerate() {
            assert!((f64::from(h) - 9000.0).abs() < 240.0, "index {i}: {h}");
        }
        // another sender draws another subset
        let mut g = Vec::new();
        c.encode(&v, 0, 2, None, &mut g).unwrap();
        c.encode(&v, 0, 1, None, &mut f).unwrap();
        assert_ne!(f[44..], g[44..]);
    }

    #[test]
    fn fraction_rounds_up_and_keeps_at_least_one() {
        let c = codec(Select::Top, Keep::Fraction(0.01), false);
        assert_eq!(c.kept(1000), 10);
        assert_eq!(c.kept(1001), 11);
        assert_eq!(c.kept(5), 1);
        assert_eq!(c.kept(0), 0);
        assert_eq!(codec(Select::Top, Keep::Count(50), false).kept(7), 7);
        let bad = |keep, unbiased, select| {
            SparseCodec::new(
                &SparseConfig {
                    select,
                    keep,
                    unbiased,
                    compression: Compression::None,
                },
                0,
            )
        };
        assert!(bad(Keep::Count(0), false, Select::Top).is_err());
        assert!(bad(Keep::Fraction(0.0), false, Select::Random).is_err());
        assert!(bad(Keep::Fraction(1.5), false, Select::Random).is_err());
        assert!(bad(Keep::Fraction(f64::NAN), false, Select::Random).is_err());
        assert_eq!(
            bad(Keep::Count(2), true, Select::Top),
            Err(ConfigError::UnbiasedTopK)
        );
    }

    /// The seed frame `fuzz/make_seeds.py` writes from the layout in its
    /// own words (not by this codec) decodes to the values it meant.
    #[test]
    fn the_independently_built_seed_frame_decodes() {
        let root = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
        let path = std::path::Path::new(&root).join("fuzz/corpus/frame_decode/sparse");
        let bytes = std::fs::read(&path).unwrap();
        let c = codec(Select::Top, Keep::Count(3), false);
        let mut out = [9.0f32; 10];
        c.decode(&bytes, &mut out).unwrap();
        assert_eq!(out, [0.0, 1.0, 0.0, 0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.5]);
    }

    #[test]
    fn indices_out_of_order_or_range_and_bad_values_are_refused() {
        let c = codec(Select::Top, Keep::Count(2), false);
        let v = [1.0f32, 0.0, 0.0, 2.0, 0.0];
        let mut f = Vec::new();
        c.encode(&v, 0, 0, None, &mut f).unwrap();
        let mut out = [0.0f32; 5];
        // 5 values: 3-bit indices 0 and 3 in one byte (0b011_000)
        assert_eq!(f[44], 0b0001_1000);
        // (indices byte, the entry refused, its index)
        for (byte, entry, index) in [
            (0b0000_0011, 1, 0), // 3 then 0
            (0b0001_1011, 1, 3), // 3 then 3
            (0b0011_0000, 1, 6), // 0 then 6, beyond 5 values
        ] {
            let mut bad = f.clone();
            bad[44] = byte;
            assert_eq!(
                c.decode(&bad, &mut out),
                Err(CodecError::CorruptIndex {
                    entry,
                    index,
                    len: 5
                }),
                "{byte:#010b}"
            );
        }
        let mut nan = f.clone();
        nan[45..49].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(matches!(
            c.decode(&nan, &mut out),
            Err(CodecError::CorruptValue { entry: 0, .. })
        ));
        c.decode(&f, &mut out).unwrap();
        assert_eq!(out, [1.0, 0.0, 0.0, 2.0, 0.0]);
        // unbiased random-k scales by d / k: beyond f32 it is an overflow
        let r = codec(Select::Random, Keep::Count(1), true);
        assert!(matches!(
            r.encode(&[3e38f32; 4], 0, 0, None, &mut f),
            Err(CodecError::Overflow { .. })
        ));
    }
}
