//! The compressors the baselines apply to what they send: the paper's
//! "identical quantizer" (unbiased stochastic rounding with a per-bucket
//! scale), QSGD and TernGrad, top-k and random-k, full precision, the
//! fixed-grid quantizer of Theorem 1, and Tang et al.'s fixed-precision
//! randomized quantizer.

use repro_codec::{
    Codec, CodecError, FixedCodec, FixedConfig, FullPrecision, Keep, NormCodec, NormConfig, Select,
    SparseCodec, SparseConfig, StochasticCodec, StochasticConfig,
};
use repro_runlog::{CompressorKind, Knobs};

use std::sync::Arc;

use crate::AlgoError;

/// What a baseline's frames carry.
#[derive(Debug, Clone, PartialEq)]
pub enum CompressorSpec {
    /// f32 values.
    Full,
    /// Unbiased stochastic rounding to `bits` over `[-s, s]`, `s` per bucket.
    Stochastic(StochasticConfig),
    /// Unbiased stochastic rounding onto the fixed grid `step * Z`, sent as
    /// f32 values (32 bits each: the grid is unbounded). The quantizer of
    /// Moniqua's Theorem 1.
    Grid { step: f32 },
    /// `bits` per value on the fixed grid `(k + 1/2) step`, whatever the
    /// magnitude: Tang et al.'s fixed-precision randomized quantizer.
    Fixed(FixedConfig),
    /// Norm-scaled sign + level codes: QSGD (L2) or TernGrad (Linf, 1 level).
    Norm(NormConfig),
    /// Top-k or random-k: `k` values and their indices.
    Sparse(SparseConfig),
    /// Another compressor's output multiplied by `factor` on both ends:
    /// `Q(v) / (1 + omega)` turns an unbiased quantizer with variance
    /// `omega |v|^2` into the contraction CHOCO and DeepSqueeze need
    /// (Koloskova et al. 2019; what ChocoSGD's code does).
    Scaled {
        inner: Box<CompressorSpec>,
        factor: f32,
    },
}

/// The `compressor` knob's compressor, checked (a sparsifier's own checks:
/// top-k unbiased, a fraction out of range), at plan time.
impl CompressorSpec {
    /// The compressor the `compressor` knob names, with its settings from
    /// the knobs (`levels`: QSGD's, from `qsgd_levels`). `from_name` checks
    /// it by building it where the algorithm uses it: the driver builds
    /// every run's spec at plan time, so a bad setting is an error naming
    /// the knob before anything runs.
    pub fn from_knobs(k: &Knobs, levels: u32) -> Result<CompressorSpec, AlgoError> {
        let q = match k.compressor {
            CompressorKind::Stochastic => CompressorSpec::Stochastic(StochasticConfig {
                bits: k.bits,
                bucket: k.bucket,
                ..StochasticConfig::default()
            }),
            CompressorKind::Qsgd if k.biased => {
                let (d, s) = (k.bucket as f64, f64::from(levels));
                let tau = 1.0 + (d / (s * s)).min(d.sqrt() / s);
                CompressorSpec::Scaled {
                    inner: Box::new(CompressorSpec::Norm(NormConfig::qsgd(levels, k.bucket))),
                    factor: (1.0 / tau) as f32,
                }
            }
            CompressorKind::Qsgd => CompressorSpec::Norm(NormConfig::qsgd(levels, k.bucket)),
            CompressorKind::TopK | CompressorKind::RandomK => CompressorSpec::Sparse(sparse(k)?),
            CompressorKind::Full => CompressorSpec::Full,
            CompressorKind::Fixed => CompressorSpec::Fixed(repro_codec::FixedConfig {
                bits: k.bits,
                step: k.grid_step as f32,
                compression: repro_codec::Compression::None,
            }),
        };
        Ok(q)
    }
}

/// The sparsifiers' settings: `k` values or a `fraction` of them, exactly
/// one; `biased` picks random-k's form.
fn sparse(k: &Knobs) -> Result<SparseConfig, AlgoError> {
    let keep = match (k.k, k.fraction) {
        (n @ 1.., 0.0) => Keep::Count(u32::try_from(n).map_err(|_| {
            AlgoError::Invalid(format!(
                "`k` is {n}, above the 2^32 - 1 values a frame holds"
            ))
        })?),
        (0, f) if f != 0.0 => Keep::Fraction(f),
        _ => {
            return Err(AlgoError::Invalid(format!(
                "compressor `{}` keeps `k` values or a `fraction` of them: set exactly one (k = {}, fraction = {})",
                k.compressor, k.k, k.fraction
            )));
        }
    };
    Ok(SparseConfig {
        select: if k.compressor == CompressorKind::TopK {
            Select::Top
        } else {
            Select::Random
        },
        keep,
        unbiased: !k.biased,
        compression: repro_codec::Compression::None,
    })
}

/// A built compressor for one worker.
#[derive(Debug, Clone)]
pub enum Compressor {
    /// f32 values (D-PSGD's fast path reads it).
    Full(FullPrecision),
    /// A codec of repro-codec's: every compressor with a frame kind of its
    /// own.
    Coded(Arc<dyn Codec>),
    Grid {
        step: f32,
        seed: u64,
    },
    Scaled {
        inner: Box<Compressor>,
        factor: f32,
    },
}

impl Compressor {
    /// Whether frames carry f32 values that a collective could sum
    /// (all-reduce) rather than gather.
    pub fn is_full(&self) -> bool {
        matches!(self, Compressor::Full(_))
    }

    /// Builds the compressor of a run keyed by `seed`.
    pub fn new(spec: &CompressorSpec, seed: u64) -> Result<Self, AlgoError> {
        Ok(match spec {
            CompressorSpec::Full => Compressor::Full(FullPrecision::default()),
            CompressorSpec::Stochastic(cfg) => {
                Compressor::Coded(Arc::new(StochasticCodec::new(cfg, seed)?))
            }
            CompressorSpec::Grid { step } => {
                if !(*step > 0.0 && step.is_finite()) {
                    return Err(AlgoError::Invalid(format!(
                        "grid_step must be positive, got {step}"
                    )));
                }
                Compressor::Grid { step: *step, seed }
            }
            CompressorSpec::Fixed(cfg) => Compressor::Coded(Arc::new(FixedCodec::new(cfg, seed)?)),
            CompressorSpec::Norm(cfg) => Compressor::Coded(Arc::new(NormCodec::new(cfg, seed)?)),
            CompressorSpec::Sparse(cfg) => {
                Compressor::Coded(Arc::new(SparseCodec::new(cfg, seed)?))
            }
            CompressorSpec::Scaled { inner, factor } => {
                if !(*factor > 0.0 && factor.is_finite()) {
                    return Err(AlgoError::Invalid(format!(
                        "scale factor must be positive, got {factor}"
                    )));
                }
                Compressor::Scaled {
                    inner: Box::new(Compressor::new(inner, seed)?),
                    factor: *factor,
                }
            }
        })
    }

    /// Bytes of one frame of `len` values, before entropy coding.
    pub fn frame_len(&self, len: usize) -> usize {
        match self {
            Compressor::Full(f) => f.frame_len(len),
            Compressor::Coded(c) => c.frame_len(len),
            Compressor::Grid { .. } => FullPrecision::default().frame_len(len),
            Compressor::Scaled { inner, .. } => inner.frame_len(len),
        }
    }

    /// Compresses `v` into a frame in `out`; `own` receives `C(v)` as the
    /// receivers will decode it.
    pub fn encode(
        &self,
        v: &[f32],
        k: u64,
        sender: u32,
        own: Option<&mut [f32]>,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        match self {
            Compressor::Full(f) => {
                f.encode(v, k, sender, out)?;
                if let Some(own) = own {
                    own.copy_from_slice(v);
                }
            }
            Compressor::Coded(c) => c.encode_frame(v, k, sender, own, out)?,
            Compressor::Grid { step, seed } => {
                let dither = repro_codec::Dither::new(*seed, 1 + u64::from(sender), k);
                let q: Vec<f32> = v
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| step * (x / step + dither.uniform(i as u32)).floor())
                    .collect();
                FullPrecision::default().encode(&q, k, sender, out)?;
                if let Some(own) = own {
                    own.copy_from_slice(&q);
                }
            }
            Compressor::Scaled { inner, factor } => {
                let mut own = own;
                inner.encode(v, k, sender, own.as_deref_mut(), out)?;
                if let Some(own) = own {
                    own.iter_mut().for_each(|o| *o *= *factor);
                }
            }
        }
        Ok(())
    }

    /// Decodes a frame into `out`.
    pub fn decode(&self, bytes: &[u8], out: &mut [f32]) -> Result<(), CodecError> {
        match self {
            Compressor::Full(f) => f.decode(bytes, out).map(drop),
            Compressor::Coded(c) => c.decode_frame(bytes, out).map(drop),
            Compressor::Grid { .. } => FullPrecision::default().decode(bytes, out).map(drop),
            Compressor::Scaled { inner, factor } => {
                inner.decode(bytes, out)?;
                out.iter_mut().for_each(|o| *o *= *factor);
                Ok(())
            }
        }
    }
}

/// The relative error `omega = E |C(v) - v|^2 / |v|^2` of `spec` on
/// Gaussian values: 16 draws of one fixed pseudo-random vector of 4096
/// values (deterministic). What `compressor_scale: 0` ("auto") divides by:
/// Koloskova et al.'s `C(v) / (1 + omega)` is a contraction for an unbiased
/// `C` of variance `omega |v|^2`.
pub fn gaussian_omega(spec: &CompressorSpec) -> Result<f64, AlgoError> {
    let c = Compressor::new(spec, 3)?;
    let mut rng = crate::rng::Rng::new(7, 0);
    let v: Vec<f32> = (0..4096).map(|_| rng.normal() as f32).collect();
    let norm: f64 = v.iter().map(|&x| f64::from(x).powi(2)).sum();
    let (mut f, mut out) = (Vec::new(), vec![0f32; v.len()]);
    let draws = 16;
    let mut err = 0.0;
    for k in 0..draws {
        c.encode(&v, k, 0, None, &mut f)?;
        c.decode(&f, &mut out)?;
        err += out
            .iter()
            .zip(&v)
            .map(|(&o, &x)| f64::from(o - x).powi(2))
            .sum::<f64>();
    }
    Ok(err / draws as f64 / norm)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why CHOCO and DeepSqueeze diverge at 1 bit with the paper's
    /// "identical quantizer" (Table 2 at CPU scale) and not at 2: unbiased
    /// stochastic rounding onto {-s, s}, s = max |v| of the bucket, has an
    /// error of about 9 |v|^2 on Gaussian values (s is about 3.2 sigma), so
    /// the error-feedback state they keep grows each step; at 2 bits the
    /// error is below |v|^2 (a contraction). Scaling by 1 / (1 + omega), as
    /// Koloskova et al. prescribe, makes the 1-bit one a contraction too.
    #[test]
    fn one_bit_identical_quantizer_is_no_contraction_unless_scaled() {
        let q = |bits| {
            CompressorSpec::Stochastic(StochasticConfig {
                bits,
                bucket: 1024,
                ..StochasticConfig::default()
            })
        };
        let one = gaussian_omega(&q(1)).unwrap();
        let two = gaussian_omega(&q(2)).unwrap();
        assert!(one > 5.0, "1 bit: {one}");
        assert!(two < 1.0, "2 bits: {two}");
        let scaled = gaussian_omega(&CompressorSpec::Scaled {
            inner: Box::new(q(1)),
            factor: (1.0 / (1.0 + one)) as f32,
        })
        .unwrap();
        assert!(scaled < 1.0, "1 bit scaled: {scaled}");
        eprintln!("relative error: 1 bit {one:.2}, 2 bits {two:.2}, 1 bit scaled {scaled:.2}");
        // and the knob reaches CHOCO's compressor: fixed, or "auto" (0)
        for (scale, factor) in [(0.1, 0.1), (0.0, 1.0 / (1.0 + one))] {
            let spec = crate::AlgorithmSpec::from_name(
                "choco",
                &crate::Knobs {
                    bits: 1,
                    compressor_scale: scale,
                    ..crate::Knobs::default()
                },
            )
            .unwrap();
            let crate::AlgorithmSpec::Choco {
                compressor: CompressorSpec::Scaled { factor: f, .. },
                ..
            } = spec
            else {
                panic!("{spec:?}")
            };
            assert!((f64::from(f) - factor).abs() < 1e-6, "{f} vs {factor}");
        }
        // DCD and ECD: a given scale, and auto leaves them unbiased
        for name in ["dcd", "ecd"] {
            let with = |scale| {
                let knobs = crate::Knobs {
                    bits: 1,
                    compressor_scale: scale,
                    ..crate::Knobs::default()
                };
                match crate::AlgorithmSpec::from_name(name, &knobs).unwrap() {
                    crate::AlgorithmSpec::Dcd(c) | crate::AlgorithmSpec::Ecd(c) => c,
                    spec => panic!("{spec:?}"),
                }
            };
            assert!(
                matches!(with(0.25), CompressorSpec::Scaled { factor, .. } if factor == 0.25),
                "{name}"
            );
            assert!(matches!(with(0.0), CompressorSpec::Stochastic(_)), "{name}");
            assert!(matches!(with(1.0), CompressorSpec::Stochastic(_)), "{name}");
        }
        let bad = crate::Knobs {
            compressor_scale: -1.0,
            ..crate::Knobs::default()
        };
        assert!(crate::AlgorithmSpec::from_name("choco", &bad).is_err());
    }

    /// Why ECD needs Tang et al.'s quantizer: ECD sends an extrapolation
    /// that grows with t. The bucket quantizer's error grows with the
    /// magnitude sent (its scale is the bucket's largest value); the
    /// fixed-precision one's stays below its step while the values stay in
    /// its range. `compressor: fixed` picks it, with `bits` and `grid_step`.
    #[test]
    fn the_fixed_precision_error_does_not_grow_with_the_magnitude() {
        let knobs = crate::Knobs {
            compressor: repro_runlog::CompressorKind::Fixed,
            bits: 8,
            grid_step: 0.01,
            ..crate::Knobs::default()
        };
        let spec = match crate::AlgorithmSpec::from_name("ecd", &knobs).unwrap() {
            crate::AlgorithmSpec::Ecd(q) => q,
            other => panic!("{other:?}"),
        };
        assert!(matches!(spec, CompressorSpec::Fixed(_)), "{spec:?}");
        let bucket = CompressorSpec::Stochastic(StochasticConfig {
            bits: 8,
            bucket: 1024,
            ..StochasticConfig::default()
        });
        let err = |spec: &CompressorSpec, scale: f32| {
            let c = Compressor::new(spec, 2).unwrap();
            let v: Vec<f32> = (0..1024).map(|i| (i as f32 * 0.37).sin() * scale).collect();
            let (mut f, mut out) = (Vec::new(), vec![0f32; v.len()]);
            c.encode(&v, 0, 0, None, &mut f).unwrap();
            c.decode(&f, &mut out).unwrap();
            out.iter()
                .zip(&v)
                .map(|(o, x)| (o - x).abs())
                .fold(0f32, f32::max)
        };
        // 8 bits of step 0.01: the range is +-1.275
        for scale in [0.01f32, 0.1, 1.0] {
            assert!(err(&spec, scale) < 0.01, "fixed at {scale}");
        }
        assert!(err(&bucket, 1.0) > 10.0 * err(&bucket, 0.01));
        let bad = crate::Knobs {
            grid_step: 0.0,
            ..knobs
        };
        assert!(crate::AlgorithmSpec::from_name("ecd", &bad).is_err());
    }

    #[test]
    fn grid_quantizer_is_unbiased_on_its_grid() {
        let c = Compressor::new(&CompressorSpec::Grid { step: 0.5 }, 1).unwrap();
        let v = [0.25f32, 0.1, -0.3, 1.0];
        let mut mean = [0.0f64; 4];
        let mut f = Vec::new();
        let mut out = [0.0f32; 4];
        let draws = 20_000;
        for k in 0..draws {
            c.encode(&v, k, 0, None, &mut f).unwrap();
            c.decode(&f, &mut out).unwrap();
            for ((m, &o), &x) in mean.iter_mut().zip(&out).zip(&v) {
                assert!((o / 0.5).fract() == 0.0, "off the grid: {o}");
                assert!((o - x).abs() < 0.5);
                *m += f64::from(o) / draws as f64;
            }
        }
        for (m, &x) in mean.iter().zip(&v) {
            assert!((m - f64::from(x)).abs() < 0.01, "{m} vs {x}");
        }
    }
}
