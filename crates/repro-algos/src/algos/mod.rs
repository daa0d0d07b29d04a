//! The algorithms, one file each, and the spec that builds them.

mod choco;
mod d2;
mod dcd;
mod deepsqueeze;
mod dpsgd;
mod ecd;
mod gradient;
mod moniqua;
mod periodic;
mod rotating;

pub use choco::Choco;
pub use d2::{D2, D2Exchange};
pub use dcd::Dcd;
pub use deepsqueeze::DeepSqueeze;
pub use dpsgd::NaiveQuantized;
pub use ecd::Ecd;
pub use gradient::QuantizedGradient;
pub use moniqua::Moniqua;
pub use periodic::Periodic;
pub use rotating::Rotating;

use repro_codec::{MoniquaCodec, MoniquaConfig, NormConfig};
pub use repro_runlog::{CompressorKind, Knobs, Theta};

use crate::algorithm::Worker;
use crate::compress::{Compressor, CompressorSpec};
use crate::{AlgoError, Topology};

/// Which algorithm, with its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum AlgorithmSpec {
    /// Centralized SGD by all-reduce of the local steps.
    AllReduce,
    /// D-PSGD with full-precision models.
    DPsgd,
    /// D-PSGD with neighbours' models quantized directly (Moniqua eq. 4).
    Naive(CompressorSpec),
    /// Moniqua; `gamma` = 1 is Algorithm 1, below 1 the slack matrix of Theorem 3.
    Moniqua { codec: MoniquaConfig, gamma: f64 },
    /// DCD-PSGD: compressed differences, exact neighbour replicas.
    Dcd(CompressorSpec),
    /// ECD-PSGD: compressed extrapolations, neighbour estimates.
    Ecd(CompressorSpec),
    /// CHOCO-SGD with consensus step size `gamma`.
    Choco {
        compressor: CompressorSpec,
        gamma: f64,
    },
    /// DeepSqueeze with consensus step size `gamma`.
    DeepSqueeze {
        compressor: CompressorSpec,
        gamma: f64,
    },
    /// D², mixing with `gamma W + (1 - gamma) I` (0.5 in the reference code).
    D2 { gamma: f64 },
    /// Moniqua on D² (Section 5).
    MoniquaD2 { codec: MoniquaConfig, gamma: f64 },
    /// PQASGD (Jiang & Agrawal, Algorithm 2): quantized model changes averaged
    /// every `period` iterations; with `CompressorSpec::Full`, PSGD.
    Periodic {
        period: u64,
        compressor: CompressorSpec,
    },
    /// RSGD: one of `chunks` slices of the model averaged per iteration.
    Rotating { chunks: u64 },
    /// Centralized SGD on compressed steps: QSGD and TernGrad
    /// (`CompressorSpec::Norm`), or any other compressor.
    QuantizedGradient(CompressorSpec),
}

impl AlgorithmSpec {
    /// A short name for logs and tables.
    pub fn name(&self) -> &'static str {
        match self {
            AlgorithmSpec::AllReduce => "allreduce",
            AlgorithmSpec::DPsgd => "d-psgd",
            AlgorithmSpec::Naive(_) => "naive",
            AlgorithmSpec::Moniqua { .. } => "moniqua",
            AlgorithmSpec::Dcd(_) => "dcd-psgd",
            AlgorithmSpec::Ecd(_) => "ecd-psgd",
            AlgorithmSpec::Choco { .. } => "choco-sgd",
            AlgorithmSpec::DeepSqueeze { .. } => "deepsqueeze",
            AlgorithmSpec::D2 { .. } => "d2",
            AlgorithmSpec::MoniquaD2 { .. } => "moniqua-d2",
            AlgorithmSpec::Periodic {
                compressor: CompressorSpec::Full,
                ..
            } => "psgd",
            AlgorithmSpec::Periodic { .. } => "pqasgd",
            AlgorithmSpec::Rotating { .. } => "rsgd",
            AlgorithmSpec::QuantizedGradient(_) => "quantized-sgd",
        }
    }

    /// The same spec with Moniqua's rounding changed (other algorithms unchanged).
    pub fn with_rounding(mut self, rounding: repro_codec::Rounding) -> Self {
        if let AlgorithmSpec::Moniqua { codec, .. } = &mut self {
            codec.rounding = rounding;
        }
        self
    }

    /// Builds worker `rank` of a run keyed by `seed`, starting from `x0`.
    pub fn build(
        &self,
        rank: usize,
        topology: &Topology,
        seed: u64,
        x0: &[f32],
    ) -> Result<Box<dyn Worker>, AlgoError> {
        Ok(match self {
            // all-reduce SGD is gradient "compression" at full precision
            AlgorithmSpec::AllReduce => Box::new(QuantizedGradient::new(
                rank,
                topology.n(),
                Compressor::new(&CompressorSpec::Full, seed)?,
                x0,
            )),
            // D-PSGD is gossip of the models at full precision
            AlgorithmSpec::DPsgd => Box::new(NaiveQuantized::new(
                rank,
                topology,
                Compressor::new(&CompressorSpec::Full, seed)?,
                x0,
            )),
            AlgorithmSpec::Naive(spec) => Box::new(NaiveQuantized::new(
                rank,
                topology,
                Compressor::new(spec, seed)?,
                x0,
            )),
            AlgorithmSpec::Moniqua { codec, gamma } => {
                Box::new(Moniqua::new(rank, topology, codec, seed, *gamma, x0)?)
            }
            AlgorithmSpec::Dcd(spec) => {
                Box::new(Dcd::new(rank, topology, Compressor::new(spec, seed)?, x0))
            }
            AlgorithmSpec::Ecd(spec) => {
                Box::new(Ecd::new(rank, topology, Compressor::new(spec, seed)?, x0))
            }
            AlgorithmSpec::Choco { compressor, gamma } => Box::new(Choco::new(
                rank,
                topology,
                Compressor::new(compressor, seed)?,
                *gamma,
                x0,
            )?),
            AlgorithmSpec::D2 { gamma } => {
                Box::new(D2::new(rank, topology, D2Exchange::Full, *gamma, x0)?)
            }
            AlgorithmSpec::MoniquaD2 { codec, gamma } => Box::new(D2::new(
                rank,
                topology,
                D2Exchange::Moniqua(MoniquaCodec::new(codec, seed)?),
                *gamma,
                x0,
            )?),
            AlgorithmSpec::Periodic { period, compressor } => Box::new(Periodic::new(
                rank,
                topology.n(),
                *period,
                Compressor::new(compressor, seed)?,
                x0,
            )?),
            AlgorithmSpec::Rotating { chunks } => {
                Box::new(Rotating::new(rank, topology.n(), *chunks, x0)?)
            }
            AlgorithmSpec::QuantizedGradient(spec) => Box::new(QuantizedGradient::new(
                rank,
                topology.n(),
                Compressor::new(spec, seed)?,
                x0,
            )),
            AlgorithmSpec::DeepSqueeze { compressor, gamma } => Box::new(DeepSqueeze::new(
                rank,
                topology,
                Compressor::new(compressor, seed)?,
                *gamma,
                x0,
            )?),
        })
    }
}

/// Moniqua's codec settings from the knobs (for Moniqua on D-PSGD, on D²
/// and on AD-PSGD alike). `theta: theorem3-step` starts at the default theta until
/// the runner's warm-up sets it.
pub fn moniqua_config(k: &Knobs) -> Result<MoniquaConfig, AlgoError> {
    Ok(MoniquaConfig {
        bits: k.bits,
        rounding: k.rounding,
        theta: match k.theta {
            Theta::Value(v) => v,
            Theta::Theorem3Step | Theta::Theorem2 => MoniquaConfig::default().theta,
        },
        modulus: k.modulus,
        b_theta: k.b_theta,
        fused: k.fused,
        hash: k.hash.sent(),
        leave_out_mismatched: k.hash == repro_runlog::HashMode::Act,
        ..MoniquaConfig::default()
    })
}

/// QSGD's levels `s`: the `levels` knob, or with `levels: 0` the most that
/// fit `bits` bits with the sign, `2^(bits - 1) - 1` (QSGD at 2, 4, 8 bits:
/// 1, 7, 127 levels).
pub fn qsgd_levels(k: &Knobs) -> Result<u32, AlgoError> {
    match k.levels {
        0 if (2..=16).contains(&k.bits) => Ok((1 << (k.bits - 1)) - 1),
        0 => Err(AlgoError::Invalid(format!(
            "`levels: 0` takes QSGD's levels from `bits`, which must be in 2..=16 \
             (a sign and at least one level), got {}",
            k.bits
        ))),
        s => Ok(s),
    }
}

/// How an algorithm takes the `compressor_scale` knob. Auto (0) is what
/// each one's analysis asks for.
#[derive(Debug, Clone, Copy)]
enum Scaling {
    /// It has no scaled compressor: the compressor as given.
    Never,
    /// A factor when one is set; auto is no scale, an unbiased compressor
    /// (DCD and ECD).
    Unbiased,
    /// A factor when one is set; auto divides by `1 + omega`, a
    /// contraction (CHOCO and DeepSqueeze; only they pay for measuring
    /// omega).
    Contraction,
}

impl Scaling {
    /// `q` scaled by the `compressor_scale` knob `scale`.
    fn apply(self, q: &CompressorSpec, scale: f64) -> Result<CompressorSpec, AlgoError> {
        let factor = match (self, scale) {
            (Scaling::Never, _) | (_, 1.0) | (Scaling::Unbiased, 0.0) => return Ok(q.clone()),
            (Scaling::Contraction, 0.0) => 1.0 / (1.0 + crate::compress::gaussian_omega(q)?),
            (_, factor) => factor,
        };
        Ok(CompressorSpec::Scaled {
            inner: Box::new(q.clone()),
            factor: factor as f32,
        })
    }
}

/// What a registered algorithm builds its spec from: the knobs and what
/// they describe.
#[derive(Debug)]
struct Parts<'a> {
    knobs: &'a Knobs,
    /// Moniqua's codec.
    moniqua: MoniquaConfig,
    /// QSGD's levels.
    levels: u32,
    /// The `compressor` knob's compressor.
    compressor: CompressorSpec,
    /// That compressor after the algorithm's [`Scaling`].
    scaled: CompressorSpec,
}

/// One algorithm a manifest can name: its name, how it takes
/// `compressor_scale`, and its spec from the knobs.
#[derive(Debug)]
struct Registration {
    name: &'static str,
    scaling: Scaling,
    spec: fn(Parts<'_>) -> AlgorithmSpec,
}

/// Every synchronous algorithm, in the order `repro list` and errors name
/// them. Adding an algorithm starts here (docs/extending.md); the
/// compiler then names every match on [`AlgorithmSpec`] that needs an arm.
const REGISTRY: &[Registration] = {
    use Scaling::{Contraction, Never, Unbiased};
    const fn entry(
        name: &'static str,
        scaling: Scaling,
        spec: fn(Parts<'_>) -> AlgorithmSpec,
    ) -> Registration {
        Registration {
            name,
            scaling,
            spec,
        }
    }
    &[
        entry("allreduce", Never, |_| AlgorithmSpec::AllReduce),
        // the same algorithm; the trainer sums with MPI_Allreduce
        entry("allreduce-mpi", Never, |_| AlgorithmSpec::AllReduce),
        // the same algorithm; the trainer sums by recursive halving and
        // doubling (2 log2 n rounds instead of the ring's 2 (n - 1))
        entry("allreduce-rhd", Never, |_| AlgorithmSpec::AllReduce),
        entry("d-psgd", Never, |_| AlgorithmSpec::DPsgd),
        entry("naive", Never, |p| AlgorithmSpec::Naive(p.compressor)),
        entry("naive-grid", Never, |p| {
            AlgorithmSpec::Naive(CompressorSpec::Grid {
                step: p.knobs.grid_step as f32,
            })
        }),
        entry("moniqua", Never, |p| AlgorithmSpec::Moniqua {
            codec: p.moniqua,
            gamma: p.knobs.gamma,
        }),
        entry("dcd", Unbiased, |p| AlgorithmSpec::Dcd(p.scaled)),
        entry("ecd", Unbiased, |p| AlgorithmSpec::Ecd(p.scaled)),
        entry("choco", Contraction, |p| AlgorithmSpec::Choco {
            compressor: p.scaled,
            gamma: p.knobs.gamma,
        }),
        entry("deepsqueeze", Contraction, |p| AlgorithmSpec::DeepSqueeze {
            compressor: p.scaled,
            gamma: p.knobs.gamma,
        }),
        entry("d2", Never, |p| AlgorithmSpec::D2 {
            gamma: p.knobs.gamma,
        }),
        entry("moniqua-d2", Never, |p| AlgorithmSpec::MoniquaD2 {
            codec: p.moniqua,
            gamma: p.knobs.gamma,
        }),
        entry("psgd", Never, |p| AlgorithmSpec::Periodic {
            period: p.knobs.period,
            compressor: CompressorSpec::Full,
        }),
        entry("pqasgd", Never, |p| AlgorithmSpec::Periodic {
            period: p.knobs.period,
            compressor: p.compressor,
        }),
        entry("rsgd", Never, |p| AlgorithmSpec::Rotating {
            chunks: p.knobs.period,
        }),
        entry("qsgd", Never, |p| {
            AlgorithmSpec::QuantizedGradient(CompressorSpec::Norm(NormConfig::qsgd(
                p.levels,
                p.knobs.bucket,
            )))
        }),
        entry("terngrad", Never, |p| {
            AlgorithmSpec::QuantizedGradient(CompressorSpec::Norm(NormConfig::terngrad(
                p.knobs.bucket,
            )))
        }),
    ]
};

/// The names [`AlgorithmSpec::from_name`] knows: the registry's.
pub const ALGORITHM_NAMES: [&str; REGISTRY.len()] = {
    let mut names = [""; REGISTRY.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = REGISTRY[i].name;
        i += 1;
    }
    names
};

/// The asynchronous algorithms: AD-PSGD and Moniqua on AD-PSGD. They are
/// not [`Worker`]s in lockstep; the simulator runs them in
/// [`crate::AsyncSimulator`] and the trainer in its two-thread loop.
pub const ASYNC_ALGORITHM_NAMES: [&str; 2] = ["ad-psgd", "moniqua-ad-psgd"];

impl AlgorithmSpec {
    /// The algorithm called `name` with the given knobs.
    pub fn from_name(name: &str, k: &Knobs) -> Result<Self, AlgoError> {
        let moniqua = moniqua_config(k)?;
        let levels = qsgd_levels(k)?;
        let compressor = CompressorSpec::from_knobs(k, levels)?;
        if !(k.compressor_scale >= 0.0 && k.compressor_scale.is_finite()) {
            return Err(AlgoError::Invalid(format!(
                "compressor_scale must be positive (1: none, 0: auto), got {}",
                k.compressor_scale
            )));
        }
        let Some(entry) = REGISTRY.iter().find(|e| e.name == name) else {
            return Err(AlgoError::Invalid(format!(
                "unknown algorithm `{name}`; use one of {}",
                ALGORITHM_NAMES.join(", ")
            )));
        };
        let scaled = entry.scaling.apply(&compressor, k.compressor_scale)?;
        let spec = (entry.spec)(Parts {
            knobs: k,
            moniqua,
            levels,
            compressor,
            scaled,
        });
        if let Some(c) = spec.compressor() {
            Compressor::new(c, 0)?;
        }
        Ok(spec)
    }

    /// The baseline compressor its frames go through; `None` where it
    /// sends f32 values or Moniqua's codes.
    pub fn compressor(&self) -> Option<&CompressorSpec> {
        match self {
            AlgorithmSpec::Naive(c)
            | AlgorithmSpec::Dcd(c)
            | AlgorithmSpec::Ecd(c)
            | AlgorithmSpec::QuantizedGradient(c)
            | AlgorithmSpec::Choco { compressor: c, .. }
            | AlgorithmSpec::DeepSqueeze { compressor: c, .. }
            | AlgorithmSpec::Periodic { compressor: c, .. } => Some(c),
            AlgorithmSpec::AllReduce
            | AlgorithmSpec::DPsgd
            | AlgorithmSpec::D2 { .. }
            | AlgorithmSpec::Moniqua { .. }
            | AlgorithmSpec::MoniquaD2 { .. }
            | AlgorithmSpec::Rotating { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_codec::{Keep, Select};

    /// The compressor called `name`.
    fn kind(name: &str) -> CompressorKind {
        CompressorKind::ALL
            .iter()
            .copied()
            .find(|c| c.name() == name)
            .unwrap()
    }

    /// The `compressor` knob picks the baselines' compressor; Moniqua and
    /// D-PSGD ignore it. (An unknown one is refused when the knobs are
    /// read: `repro_runlog`'s `rounding_and_compressor_read_and_write_their_names`.)
    #[test]
    fn the_compressor_knob_picks_the_baselines_compressor() {
        let with = |c: &str| Knobs {
            compressor: kind(c),
            levels: 15,
            bucket: 64,
            ..Knobs::default()
        };
        assert_eq!(
            AlgorithmSpec::from_name("dcd", &with("full")).unwrap(),
            AlgorithmSpec::Dcd(CompressorSpec::Full)
        );
        assert_eq!(
            AlgorithmSpec::from_name("ecd", &with("qsgd")).unwrap(),
            AlgorithmSpec::Ecd(CompressorSpec::Norm(NormConfig::qsgd(15, 64)))
        );
        assert!(matches!(
            AlgorithmSpec::from_name("choco", &with("stochastic")).unwrap(),
            AlgorithmSpec::Choco {
                compressor: CompressorSpec::Stochastic(_),
                ..
            }
        ));
        assert_eq!(
            AlgorithmSpec::from_name("d-psgd", &with("full")).unwrap(),
            AlgorithmSpec::DPsgd
        );
        // biased QSGD: divided by tau = 1 + min(64 / 225, 8 / 15) = 1.2844
        let biased = Knobs {
            biased: true,
            ..with("qsgd")
        };
        let AlgorithmSpec::Dcd(CompressorSpec::Scaled { factor, .. }) =
            AlgorithmSpec::from_name("dcd", &biased).unwrap()
        else {
            panic!("biased qsgd is scaled");
        };
        assert!(
            (f64::from(factor) - 1.0 / (1.0 + 64.0 / 225.0)).abs() < 1e-6,
            "{factor}"
        );
        // levels from bits: 2, 4, 8 bits are 1, 7, 127 levels in 2, 4, 8 bits
        for (bits, levels) in [(2, 1), (4, 7), (8, 127), (16, 32_767)] {
            let from_bits = Knobs {
                bits,
                levels: 0,
                ..with("qsgd")
            };
            assert_eq!(
                AlgorithmSpec::from_name("ecd", &from_bits).unwrap(),
                AlgorithmSpec::Ecd(CompressorSpec::Norm(NormConfig::qsgd(levels, 64)))
            );
            let c = repro_codec::NormCodec::new(&NormConfig::qsgd(levels, 64), 0).unwrap();
            assert_eq!(c.bits(), bits);
        }
        let one_bit = Knobs {
            bits: 1,
            levels: 0,
            ..with("qsgd")
        };
        let e = AlgorithmSpec::from_name("ecd", &one_bit).unwrap_err();
        assert!(e.to_string().contains("`levels: 0`"), "{e}");
    }

    /// The registry names each algorithm once, and an algorithm without a
    /// scaled compressor ignores `compressor_scale`.
    #[test]
    fn the_registry_names_each_algorithm_once() {
        let mut names = ALGORITHM_NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), REGISTRY.len());
        assert!(ALGORITHM_NAMES.iter().all(|n| !n.is_empty()));
        let half = Knobs {
            compressor_scale: 0.5,
            ..Knobs::default()
        };
        let AlgorithmSpec::Periodic { compressor, .. } =
            AlgorithmSpec::from_name("pqasgd", &half).unwrap()
        else {
            panic!("pqasgd is periodic");
        };
        assert!(matches!(compressor, CompressorSpec::Stochastic(_)));
        let e = AlgorithmSpec::from_name("sgd", &half).unwrap_err();
        assert!(
            e.to_string()
                .contains("allreduce, allreduce-mpi, allreduce-rhd, d-psgd"),
            "{e}"
        );
    }

    /// `top-k` and `random-k` take `k` or a `fraction` (exactly one);
    /// `biased` picks random-k's form; top-k refuses to be unbiased.
    #[test]
    fn sparsifier_knobs() {
        let sparse = |c: &str, k: u64, fraction: f64, biased: bool| {
            AlgorithmSpec::from_name(
                "choco",
                &Knobs {
                    compressor: kind(c),
                    k,
                    fraction,
                    biased,
                    ..Knobs::default()
                },
            )
        };
        let spec = |a: Result<AlgorithmSpec, AlgoError>| match a.unwrap() {
            AlgorithmSpec::Choco {
                compressor: CompressorSpec::Sparse(cfg),
                ..
            } => cfg,
            other => panic!("{other:?}"),
        };
        let top = spec(sparse("top-k", 10, 0.0, true));
        assert_eq!(
            (top.select, top.keep, top.unbiased),
            (Select::Top, Keep::Count(10), false)
        );
        let rand = spec(sparse("random-k", 0, 0.25, false));
        assert_eq!(
            (rand.select, rand.keep, rand.unbiased),
            (Select::Random, Keep::Fraction(0.25), true)
        );
        assert!(!spec(sparse("random-k", 3, 0.0, true)).unbiased);
        for (c, k, f, biased, says) in [
            ("top-k", 0, 0.0, true, "exactly one"),
            ("top-k", 5, 0.5, true, "exactly one"),
            ("top-k", 5, 0.0, false, "biased: true"),
            ("random-k", 0, 1.5, false, "fraction"),
            ("random-k", 1 << 33, 0.0, false, "2^32"),
        ] {
            let e = sparse(c, k, f, biased).unwrap_err().to_string();
            assert!(e.contains(says), "{c} k={k} fraction={f}: {e}");
        }
    }
}
