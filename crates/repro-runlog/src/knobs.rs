//! The algorithms' knobs, as a manifest writes them and a run id hashes
//! them: each with a default that changes nothing, and their names.

use super::*;

/// The algorithm knobs: the one definition of every setting an algorithm
/// reads, flattened into the simulator's and the trainer's configs, so a
/// manifest writes them as top-level keys (`bits: 1`, `theta: theorem3-step`). A new
/// knob is one field here (with its default) plus its use in
/// `repro_algos::AlgorithmSpec::from_name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Knobs {
    /// Bits per coordinate (Moniqua 1..=8; the baselines' quantizer).
    pub bits: u32,
    /// `stochastic` or `nearest`: the codec's [`Rounding`], by its name.
    #[serde(with = "rounding_name")]
    pub rounding: Rounding,
    /// Moniqua's a priori consensus bound: a number; `theorem3-step` (a
    /// full-precision warm-up of `theta_warmup` iterations tracks the
    /// largest local step, then Theorem 3's expression, with gamma, sets
    /// it; the simulator and the synchronous trainer); or `theorem2`
    /// (Section 6's first method as written: the warm-up tracks the
    /// infinity norm of the stochastic gradient, then Theorem 2's
    /// expression, without gamma; the synchronous trainer).
    pub theta: Theta,
    /// Warm-up iterations of `theta: theorem3-step` and `theta: theorem2`.
    pub theta_warmup: u64,
    /// Moniqua's explicit modulus B (overrides theta).
    pub modulus: Option<f64>,
    /// The delta Moniqua's B_theta = 2 theta / (1 - 2 delta) is computed
    /// with when B comes from theta: `lemma2` (the rounding's own bound;
    /// undefined for 1-bit stochastic rounding), `half-step` (half a
    /// step, whatever the rounding: 1 bit, B = 4 theta) or `lemma1` (B =
    /// 2 theta). The codec's [`BTheta`].
    #[serde(with = "b_theta_name")]
    pub b_theta: BTheta,
    /// Moniqua's update: `true`, one fused pass (recovery, average and
    /// step together); `false`, the baselines' passes (each neighbour
    /// decoded into a buffer, then added, then the step), so that per-step
    /// costs compare algorithms on equal kernels. Other algorithms have one
    /// path each and ignore it.
    pub fused: bool,
    /// Moniqua: `true` sends a hash of the codes so receivers check each
    /// recovery and leave a failed one out; `count` sends it and counts
    /// failures without acting on them (the algorithm as without a hash,
    /// its silent wrap-arounds measured); `false` sends none.
    pub hash: HashMode,
    /// Moniqua's and D²'s slack, CHOCO's and DeepSqueeze's consensus step.
    pub gamma: f64,
    /// The baselines' quantizer bucket (values per f32 scale).
    pub bucket: usize,
    /// Theorem 1's grid (naive-grid), and the `fixed` compressor's step.
    pub grid_step: f64,
    /// PSGD / PQASGD period, RSGD chunks.
    pub period: u64,
    /// QSGD levels `s` (1..=32767); 0: the most that fit `bits` with the
    /// sign, `2^(bits - 1) - 1`.
    pub levels: u32,
    /// CHOCO, DeepSqueeze, DCD and ECD: their compressor's output times
    /// this on both ends (1: as is; 0: auto, what each one's analysis asks
    /// for: `1 / (1 + omega)` for the quantizer's relative error omega for
    /// CHOCO and DeepSqueeze, a contraction; 1 for DCD and ECD, unbiased).
    pub compressor_scale: f64,
    /// The baselines' compressor (naive, DCD, ECD, CHOCO, DeepSqueeze):
    /// `stochastic` (`bits` per value, a scale per `bucket`), `qsgd`
    /// (`levels` per value, norm-scaled per `bucket`), `top-k` or
    /// `random-k` (`k` values or a `fraction` of them, with their indices)
    /// or `full` (f32: no compression, where each must equal D-PSGD).
    pub compressor: CompressorKind,
    /// `qsgd`: divide by `tau = 1 + min(d / s^2, sqrt(d) / s)` (`d` the
    /// bucket, `s` the levels), Koloskova et al.'s biased QSGD, which is a
    /// contraction where the unbiased one is not. `random-k`: keep the
    /// values as they are (a contraction); unbiased, they are scaled by
    /// `d / k`. `top-k` is biased by construction and needs `true`.
    pub biased: bool,
    /// `top-k` / `random-k`: values kept per message (0: use `fraction`).
    pub k: u64,
    /// `top-k` / `random-k`: the fraction of values kept, in (0, 1] (0:
    /// use `k`).
    pub fraction: f64,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            bits: 8,
            rounding: Rounding::Stochastic,
            theta: Theta::Value(2.0),
            theta_warmup: 10,
            modulus: None,
            b_theta: BTheta::Lemma2,
            fused: true,
            hash: HashMode::Act,
            gamma: 1.0,
            bucket: 1024,
            grid_step: 0.1,
            period: 4,
            levels: 7,
            compressor_scale: 1.0,
            compressor: CompressorKind::Stochastic,
            biased: false,
            k: 0,
            fraction: 0.0,
        }
    }
}

/// Declares [`CompressorKind`] from one row per compressor: its variant and
/// its one name, which serde, `name` and `ALL` all read.
macro_rules! compressors {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, )*) => {
        /// The baselines' compressor, the `compressor` knob (see [`Knobs`]).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum CompressorKind {
            $( $(#[$doc])* #[serde(rename = $name)] $variant, )*
        }

        impl CompressorKind {
            /// Every compressor, in the order help texts list them.
            pub const ALL: &[CompressorKind] = &[$(CompressorKind::$variant),*];

            /// Its one name, as a manifest writes it (serde's spelling too).
            pub fn name(self) -> &'static str {
                match self {
                    $( CompressorKind::$variant => $name, )*
                }
            }
        }
    };
}

compressors! {
    /// `bits` per value, a scale per `bucket`.
    #[default]
    Stochastic = "stochastic",
    /// `levels` per value, norm-scaled per `bucket`.
    Qsgd = "qsgd",
    /// The `k` (or `fraction`) largest values, with their indices.
    TopK = "top-k",
    /// `k` (or a `fraction` of) random values, with their indices.
    RandomK = "random-k",
    /// f32: no compression.
    Full = "full",
    /// `bits` per value on the fixed grid of step `grid_step`, whatever
    /// the magnitude (Tang et al.'s fixed-precision randomized quantizer).
    Fixed = "fixed",
}

impl std::fmt::Display for CompressorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The `rounding` knob written and read as the codec's [`Rounding`]'s name.
mod rounding_name {
    use repro_codec::Rounding;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(r: &Rounding, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(r.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Rounding, D::Error> {
        let name = String::deserialize(d)?;
        Rounding::from_name(&name).ok_or_else(|| {
            let all: Vec<&str> = Rounding::ALL.iter().map(|r| r.name()).collect();
            D::Error::custom(format!(
                "unknown rounding `{name}`; use {}",
                all.join(" or ")
            ))
        })
    }
}

/// The `b_theta` knob written and read as the codec's [`BTheta`]'s name.
mod b_theta_name {
    use repro_codec::BTheta;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(r: &BTheta, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(r.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTheta, D::Error> {
        let name = String::deserialize(d)?;
        BTheta::from_name(&name).ok_or_else(|| {
            let all: Vec<&str> = BTheta::ALL.iter().map(|r| r.name()).collect();
            D::Error::custom(format!(
                "unknown reading of B_theta `{name}`; use {}",
                all.join(", ")
            ))
        })
    }
}

/// Where a trainer's workers run (`device:` in a manifest).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceChoice {
    /// A GPU when libtorch sees one, else the CPU.
    #[default]
    Auto,
    Cpu,
    /// A GPU; a run without one fails at its start.
    Cuda,
}

/// Moniqua's theta: a number, `theorem3-step` or `theorem2` (see [`Knobs::theta`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Theta {
    Value(f64),
    /// Theorem 3's expression on the largest local step of a warm-up.
    Theorem3Step,
    /// Theorem 2's expression on the gradient's infinity norm over a
    /// warm-up: the paper's first method.
    Theorem2,
}

impl Theta {
    /// Whether it is chosen after a full-precision warm-up.
    pub fn warms_up(self) -> bool {
        matches!(self, Theta::Theorem3Step | Theta::Theorem2)
    }
}

impl Serialize for Theta {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Theta::Value(v) => s.serialize_f64(*v),
            Theta::Theorem3Step => s.serialize_str("theorem3-step"),
            Theta::Theorem2 => s.serialize_str("theorem2"),
        }
    }
}

impl<'de> Deserialize<'de> for Theta {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Theta;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a positive number, `theorem3-step` or `theorem2`")
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Theta, E> {
                Ok(Theta::Value(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Theta, E> {
                Ok(Theta::Value(v as f64))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Theta, E> {
                Ok(Theta::Value(v as f64))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Theta, E> {
                match v {
                    "theorem3-step" => Ok(Theta::Theorem3Step),
                    // its name until it was named for what it does
                    "auto" => Err(E::custom(
                        "`theta: auto` is now `theta: theorem3-step` (Theorem 3's expression, \
                         divided by gamma, on the largest local step of a warm-up); the paper's \
                         first method is `theta: theorem2`",
                    )),
                    "theorem2" => Ok(Theta::Theorem2),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// What Moniqua's receivers do with the sender's hash (the `hash` knob:
/// `false`, `true` or `count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashMode {
    /// No hash on the wire.
    Off,
    /// Verify every recovery; leave a neighbour that fails out.
    Act,
    /// Verify and count failures, but use every recovery as is.
    Count,
}

impl HashMode {
    /// Whether frames carry a hash.
    pub fn sent(self) -> bool {
        self != HashMode::Off
    }
}

impl Serialize for HashMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            HashMode::Off => s.serialize_bool(false),
            HashMode::Act => s.serialize_bool(true),
            HashMode::Count => s.serialize_str("count"),
        }
    }
}

impl<'de> Deserialize<'de> for HashMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = HashMode;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false or `count`")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<HashMode, E> {
                Ok(if v { HashMode::Act } else { HashMode::Off })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<HashMode, E> {
                match v {
                    "count" => Ok(HashMode::Count),
                    other => Err(E::invalid_value(serde::de::Unexpected::Str(other), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}
