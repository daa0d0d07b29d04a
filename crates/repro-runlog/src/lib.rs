//! The contract between whatever runs an experiment (the trainer's MPI
//! ranks, the simulator) and the driver that turns runs into tables and
//! figures: one JSON object per line, per rank.
//!
//! A log is a `header` line, then any number of `step` and `eval` lines, then
//! an `end` line (absent if the process died). Every line has a `"type"`
//! field. The header carries [`SCHEMA_VERSION`]; readers refuse logs from a
//! newer schema instead of misreading them.
//!
//! ```text
//! {"type":"header","schema":2,"run_id":"ab12","rank":0,"world":8,"config":{..},"provenance":{..}}
//! {"type":"step","iteration":0,"epoch":0.0,"wall_s":0.12,"compute_s":0.1,"comm_s":0.02,"train_loss":2.3,"bytes_sent":270044,"bytes_received":540088,"hash_failures":0}
//! {"type":"eval","iteration":390,"epoch":1.0,"wall_s":48.0,"test_loss":1.2,"test_accuracy":0.61,"avg_test_loss":1.1,"avg_test_accuracy":0.63,"consensus_distance":0.02}
//! {"type":"end","status":"completed","wall_s":4800.0,"iterations":39000}
//! ```
//!
//! The simulator's end record also carries its final metrics
//! (`"metrics":{"final_loss":0.2,"consensus":1e-4,...}`, schema 2).
//!
//! All byte counts are lengths of frames really sent or received.

use std::io::{BufRead, Write};

pub use repro_codec::{BTheta, Rounding};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where Fashion-MNIST's IDX files are when `data_dir` is not given: the
/// Debian package `dataset-fashion-mnist`'s location. The trainer reads
/// it; the driver checksums it (`data_checksum` in runs.csv).
pub const FASHION_MNIST_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// The schema this build writes and the newest it reads.
///
/// 2: the end record may carry the simulator's final [`Metrics`]; version-1
/// logs read as before (no metrics).
/// 3: `consensus_distance` is `mean_i |x_i - x_bar|^2` everywhere (before,
/// the simulator logged the largest per-coordinate deviation and the
/// trainer a root-mean-square); evaluations may carry `max_deviation`,
/// `model_norm` and Moniqua's recovery counts. An older log's
/// `consensus_distance` reads as not measured.
pub const SCHEMA_VERSION: u32 = 3;

/// The configuration of one training run, as the driver writes it and each
/// `repro-train` rank reads it (JSON). Kept here, without torch, so the
/// driver and the trainer share one definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    pub run_id: String,
    /// MPI ranks the run expects (0: whatever was launched).
    pub workers: usize,
    /// Seconds the driver lets the whole run take before killing it.
    pub timeout_s: u64,
    /// Latency added to every message by the transport, milliseconds (for
    /// kernels without netem; 0: none). In-process runs add it to their
    /// virtual clock instead.
    pub latency_ms: f64,
    /// In-process runs (`repro-train --in-process N`): egress bandwidth per
    /// worker of the virtual network, bits per second (0: unlimited).
    pub virtual_bandwidth_bps: f64,
    /// logistic, mlp, lenet, resnet8 .. resnet110, vgg16
    pub model: String,
    /// fashion-mnist, cifar10, synthetic
    pub dataset: String,
    pub data_dir: Option<String>,
    /// iid, by-label, dirichlet
    pub partition: String,
    pub dirichlet_alpha: f64,
    pub algorithm: String,
    pub topology: String,
    /// The algorithm's knobs (`bits`, `theta`, `gamma`, ...), flat in the JSON.
    #[serde(flatten)]
    pub knobs: Knobs,
    /// Per-worker batch size.
    pub batch: usize,
    pub lr: f64,
    pub warmup_epochs: f64,
    /// constant, cosine, step
    pub schedule: String,
    pub milestones: Vec<f64>,
    pub momentum: f32,
    pub weight_decay: f32,
    pub iterations: u64,
    pub eval_every: u64,
    /// Test images per evaluation (0: all).
    pub eval_samples: usize,
    pub synthetic_samples: usize,
    /// Fraction of the training images held out as a validation set (0:
    /// none): the same images for every run of a data set, never trained
    /// on; evaluations score the averaged model on them (`val_loss`,
    /// `val_accuracy`), which is what a tuning protocol selects by.
    pub validation: f64,
    /// Pin each rank (each worker thread in process) to one CPU, the
    /// rank's modulo the CPUs it may use, so ranks sharing few cores do not
    /// migrate (false: the scheduler places them).
    pub pin_cores: bool,
    /// Time each phase of every step into its record (`Step::phases`),
    /// waiting for the device at each phase's end, which costs a GPU run
    /// a little of its overlap: for measuring, not for results.
    pub profile_phases: bool,
    /// Where each worker trains: `auto` (a GPU when libtorch sees one,
    /// else the CPU), `cpu`, or `cuda` (a GPU, or the run fails).
    pub device: DeviceChoice,
    pub seed: u64,
    /// Set by the driver when it launches the run (provenance only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invocation: Option<Invocation>,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            run_id: "manual".into(),
            workers: 0,
            timeout_s: 3600,
            latency_ms: 0.0,
            virtual_bandwidth_bps: 0.0,
            model: "lenet".into(),
            dataset: "fashion-mnist".into(),
            data_dir: None,
            partition: "iid".into(),
            dirichlet_alpha: 0.5,
            algorithm: "d-psgd".into(),
            topology: "ring".into(),
            knobs: Knobs::default(),
            batch: 32,
            // LeNet with momentum 0.9 collapsed at 0.05 on 3 ranks in tests
            lr: 0.02,
            warmup_epochs: 0.0,
            schedule: "constant".into(),
            milestones: Vec::new(),
            momentum: 0.9,
            weight_decay: 5e-4,
            iterations: 100,
            eval_every: 50,
            eval_samples: 1000,
            synthetic_samples: 2000,
            validation: 0.0,
            pin_cores: false,
            profile_phases: false,
            device: DeviceChoice::Auto,
            seed: 0,
            invocation: None,
        }
    }
}

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

/// Trainable parameters of every model the trainer builds, on each input
/// shape (`fashion-mnist` stands for its 1x28x28 images, `synthetic`
/// included; `cifar10` for 3x32x32; VGG16 pools 28x28 images to nothing,
/// so it runs on CIFAR-10 only): what the driver sizes a network
/// condition by without building a model. The trainer's tests check every
/// entry against the model it builds.
pub const MODEL_PARAMETERS: [(&str, &str, u64); 21] = [
    ("logistic", "fashion-mnist", 7_850),
    ("logistic", "cifar10", 30_730),
    ("mlp", "fashion-mnist", 101_770),
    ("mlp", "cifar10", 394_634),
    ("lenet", "fashion-mnist", 61_706),
    ("lenet", "cifar10", 62_006),
    ("resnet8", "fashion-mnist", 75_002),
    ("resnet8", "cifar10", 75_290),
    ("resnet14", "fashion-mnist", 172_218),
    ("resnet14", "cifar10", 172_506),
    ("resnet20", "fashion-mnist", 269_434),
    ("resnet20", "cifar10", 269_722),
    ("resnet32", "fashion-mnist", 463_866),
    ("resnet32", "cifar10", 464_154),
    ("resnet44", "fashion-mnist", 658_298),
    ("resnet44", "cifar10", 658_586),
    ("resnet56", "fashion-mnist", 852_730),
    ("resnet56", "cifar10", 853_018),
    ("resnet110", "fashion-mnist", 1_727_674),
    ("resnet110", "cifar10", 1_727_962),
    ("vgg16", "cifar10", 14_728_266),
];

/// The classes of a data set the trainer reads: Fashion-MNIST, CIFAR-10
/// and the synthetic images all have 10.
pub fn classes(dataset: &str) -> Option<u32> {
    matches!(dataset, "fashion-mnist" | "cifar10" | "synthetic").then_some(10)
}

/// The parameters of `model` on `dataset`'s images ([`MODEL_PARAMETERS`];
/// `mlp<width>`, a hidden layer of that width, by its formula).
pub fn model_parameters(model: &str, dataset: &str) -> Option<u64> {
    let model = match model {
        "vgg16bn" | "vgg16-bn" => "vgg16",
        m => m,
    };
    let shape = if dataset == "cifar10" {
        "cifar10"
    } else {
        "fashion-mnist"
    };
    if let Some(width) = mlp_width(model) {
        let inputs: u64 = if shape == "cifar10" {
            3 * 32 * 32
        } else {
            28 * 28
        };
        return Some((inputs + 1) * width + (width + 1) * 10);
    }
    MODEL_PARAMETERS
        .iter()
        .find(|(m, d, _)| *m == model && *d == shape)
        .map(|e| e.2)
}

/// The hidden width of `mlp<width>` (`mlp1280`), a positive number
/// without leading zeros; `None` for any other name (plain `mlp` is 128,
/// in [`MODEL_PARAMETERS`]).
pub fn mlp_width(model: &str) -> Option<u64> {
    let digits = model.strip_prefix("mlp")?;
    if digits.starts_with('0') {
        return None;
    }
    digits
        .parse::<u64>()
        .ok()
        .filter(|&w| w > 0 && w <= 1 << 20)
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

/// Where, with what and on what a run ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// `git rev-parse HEAD` of the source the binary was built from
    /// (`unknown`: not built from a git checkout, or before this was set).
    pub git_commit: String,
    /// Whether tracked files differed from `git_commit` at build time.
    #[serde(default)]
    pub git_dirty: Option<bool>,
    /// The exact source: the commit, or `<commit>+dirty.<hash of the diff>`;
    /// empty in logs written before it existed. A run is current only when
    /// this equals the running build's.
    #[serde(default)]
    pub source: String,
    /// `rustc --version` of the compiler that built the binary.
    #[serde(default)]
    pub rustc: String,
    /// `repro` crate version.
    pub version: String,
    pub host: String,
    /// `cpu`, `cuda:0`, ...
    pub device: String,
    /// `mpi`, `sim`, ...
    pub backend: String,
    /// How the network was shaped (`none`, `netns tbf 100mbit`, `virtual clock`, ...),
    /// including how latency was realized (netem, injected per message).
    pub network: String,
    /// The libtorch the trainer loaded: version and file (`None`: no torch).
    #[serde(default)]
    pub libtorch: Option<String>,
    /// The MPI library the ranks ran on (`None`: no MPI).
    #[serde(default)]
    pub mpi: Option<String>,
    /// The `repro` command line that launched the run.
    #[serde(default)]
    pub command: Option<String>,
    /// The hash of the resolved manifest the run was planned from.
    #[serde(default)]
    pub manifest_hash: Option<String>,
}

/// What the driver tells a trainer about the invocation that launched it,
/// for the log header's provenance. Not part of the run id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invocation {
    /// The `repro` command line.
    pub command: String,
    /// The hash of the resolved manifest.
    pub manifest_hash: String,
}

/// The first line of a log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub schema: u32,
    /// Stable id of the resolved configuration.
    pub run_id: String,
    pub rank: u32,
    pub world: u32,
    /// The full resolved configuration.
    pub config: serde_json::Value,
    pub provenance: Provenance,
}

/// One training iteration of one rank.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub iteration: u64,
    pub epoch: f64,
    /// Seconds since the run started (virtual seconds for the simulator).
    pub wall_s: f64,
    pub compute_s: f64,
    pub comm_s: f64,
    pub train_loss: f64,
    /// Bytes of frames this rank sent since its previous step record (the
    /// simulator logs every `log_every` iterations for all its workers: the
    /// mean worker's), so a log's records add up to what the rank sent.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Received frames whose recovery failed the hash (Moniqua).
    pub hash_failures: u64,
    /// Received frames whose hash verified the recovery (Moniqua with
    /// `hash`); with `hash_failures`, the frames checked.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hash_verified: u64,
    /// Where the step's time went (`profile_phases` runs only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Phases>,
}

/// Where a step's time went, seconds on the run's clock per phase, the
/// device waited for at each phase's end (`profile_phases`). `compute_s`
/// is the first four, `comm_s` the last three.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Phases {
    /// The flat model into the model's tensors (host to device).
    pub scatter_s: f64,
    /// A batch drawn and moved to the device, forward, loss, backward.
    pub forward_backward_s: f64,
    /// The gradients into the flat buffer (device to host).
    pub gather_s: f64,
    /// Momentum SGD on the flat buffer (host).
    pub sgd_s: f64,
    /// The algorithm's frame built (the codec's encode).
    pub encode_s: f64,
    /// The frames through the transport.
    pub exchange_s: f64,
    /// The received frames applied (the codec's decode, the mixing).
    pub decode_s: f64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// An evaluation of one rank's model (and of the averaged model).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Eval {
    pub iteration: u64,
    pub epoch: f64,
    pub wall_s: f64,
    /// The local model on the test set (trainer); absent in the
    /// simulator's evaluations, which have no test set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_loss: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_accuracy: Option<f64>,
    pub avg_test_loss: Option<f64>,
    pub avg_test_accuracy: Option<f64>,
    /// `mean_i |x_i - x_bar|^2` over the workers (Koloskova et al.'s
    /// consensus distance); see `repro_algos::Consensus`.
    pub consensus_distance: Option<f64>,
    /// `max_i |x_i - x_bar|_inf`: the largest deviation of one coordinate
    /// of one worker from the average (what Moniqua's theta must cover).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deviation: Option<f64>,
    /// `|x_bar|_2`, the averaged model's Euclidean norm (trainer runs): a
    /// model collapsed to zero has none left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_norm: Option<f64>,
    /// Moniqua's recovery checked at this evaluation (trainer runs): the
    /// coordinates every worker recovered from each neighbour's model, and
    /// those whose error exceeded Lemma 2's bound (a wrap around the
    /// modulus). See `repro_algos::Recovery`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapped: Option<u64>,
    /// The averaged model on the held-out validation images (runs with
    /// `validation` > 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_loss: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_accuracy: Option<f64>,
    /// The simulator's objective at the averaged model, `f(x_bar)` on the
    /// whole training set, and its suboptimality `f(x_bar) - f*`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objective: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subopt: Option<f64>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Status {
    Completed,
    /// The model became non-finite (or left a codec's range): a result, not a bug.
    Diverged {
        iteration: u64,
    },
    Failed {
        reason: String,
    },
}

impl Status {
    /// The status once the final model is evaluated: a run that completed
    /// but whose final `losses` are not all finite diverged at `iteration`,
    /// its last. The one rule the simulator and the trainer apply to their
    /// final evaluation; a step's divergence is `repro_algos::unless_diverged`.
    pub fn after_final(self, losses: impl IntoIterator<Item = f64>, iteration: u64) -> Status {
        match self {
            Status::Completed if losses.into_iter().any(|l| !l.is_finite()) => {
                Status::Diverged { iteration }
            }
            other => other,
        }
    }
}

/// The last line of a log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct End {
    #[serde(flatten)]
    pub status: Status,
    pub wall_s: f64,
    pub iterations: u64,
    /// Real seconds from this rank's first step to its end, whatever
    /// clock `wall_s` keeps (an in-process run's is virtual): how long the
    /// run's loop really took (absent in older logs and the simulator's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub real_s: Option<f64>,
    /// Payload bytes the rank handed to the network in the whole run, every
    /// message included (absent in logs of backends that send nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport_bytes_sent: Option<u64>,
    /// Bytes of algorithm state beyond D-PSGD's (replicas, error memory),
    /// from the buffers the worker holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_memory_bytes: Option<u64>,
    /// The process's peak resident memory (VmHWM), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    /// Moniqua's theta at the end: the one `theta: theorem3-step` picked after its
    /// warm-up (Theorem 2's expression on the largest step seen), else the
    /// one given. Absent for other algorithms and in older logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theta: Option<f64>,
    /// Moniqua's modulus B at the end (from theta, or the one given).
    /// Absent for other algorithms and in older logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modulus: Option<f64>,
    /// Metrics of the whole run computed at its end (the simulator's: the
    /// objective of the averaged model, ...). Absent in the trainer's logs,
    /// whose metrics are its eval records, and in version-1 logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
}

/// A run's final metrics, as the simulator computes them at its end. A
/// metric that is not a number (a diverged model) is `None` (`null`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// `f(x_bar)`: the objective at the averaged model.
    pub final_loss: Option<f64>,
    /// `mean_i f(x_i)`: the workers' own models.
    pub local_loss: Option<f64>,
    /// `mean_i |grad f(x_i)|^2`, averaged over the last fifth of the run.
    pub grad_norm_sq: Option<f64>,
    /// `f(x_bar)` before the first iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_loss: Option<f64>,
    /// Iterations in which the workers exchanged frames (bytes went on the
    /// wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchanges: Option<u64>,
    /// `mean_i |x_i - x_bar|^2`.
    pub consensus: Option<f64>,
    /// `max_i |x_i - x_bar|_inf`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deviation: Option<f64>,
    /// Frame bytes every worker sent, summed over workers and iterations.
    pub bytes_sent: u64,
    /// Received frames whose recovery failed the hash, all workers.
    pub hash_failures: u64,
    /// Received frames whose hash verified the recovery, all workers.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hash_verified: u64,
    /// Lemma 2 checked on the logged iterations' frames (`measure_recovery`):
    /// the largest recovery error over its bound `delta B`, and the share of
    /// recovered coordinates beyond the bound (wrap-arounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_over_bound: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrap_rate: Option<f64>,
    /// `f(x_bar) - f*` at the end, where `f*` is known (data objectives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subopt: Option<f64>,
    /// Seconds on this host spent setting the run up (objective, data,
    /// f*, workers), in the iterations, and in computing the metrics
    /// (evaluations, recovery checks, the gradient-norm tail and this end
    /// record's numbers): the run's cost, split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_s: Option<f64>,
    /// Of `metrics_s`, the seconds of this end record's numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_s: Option<f64>,
    /// Seconds to read every worker's model once on the run's threads,
    /// measured after the iterations: the reference an iteration's time
    /// is held against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_s: Option<f64>,
    /// The bytes the plan expected the run to hold (models, state, frames,
    /// scratch, objective), and the resident memory the process held when
    /// the run started (the peak, in the end record, includes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_rss_bytes: Option<u64>,
    /// The plan's parts, bytes: per worker its model, the algorithm's
    /// state beyond it, its frames and the simulator's optimizer buffers;
    /// once, what is not per worker (the objective, per-thread scratch).
    /// The peak less every model and the shared part, per worker, is the
    /// extra memory measured, set beside the planned state, frames and
    /// optimizer buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_bytes: Option<u64>,
}

/// This machine's host name, as the kernel has it (`$HOSTNAME` is a
/// shell variable, unset in most non-interactive processes); `unknown`
/// where it cannot be read.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// A field of this process's `/proc/self/status` in kB (`VmHWM`: the
/// peak resident memory, `VmRSS`: now), as bytes; `None` off Linux.
pub fn resident_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets this process's peak resident memory (`VmHWM`) to what it holds
/// now (`5` into `/proc/self/clear_refs`), so a later peak is of the work
/// since; `false` where the kernel refuses.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `Some(v)` when `v` is a number, `None` for NaN and infinities: how a
/// metric that is not a measurement is written (`null`) and summarized.
pub fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// One line of a log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Header(Header),
    Step(Step),
    Eval(Eval),
    End(End),
}

/// A log that cannot be read.
#[derive(Debug, Error)]
pub enum LogError {
    #[error("could not read the log")]
    Io(#[from] std::io::Error),
    #[error("line {line}: {source}")]
    Parse {
        line: usize,
        source: serde_json::Error,
    },
    #[error("the log does not start with a header line")]
    NoHeader,
    #[error(
        "the log was written with schema {found}, newer than this build's {supported}; update repro to read it"
    )]
    NewerSchema { found: u32, supported: u32 },
}

/// Writes one record as a line.
pub fn write_record(mut w: impl Write, record: &Record) -> std::io::Result<()> {
    serde_json::to_writer(&mut w, record)?;
    w.write_all(b"\n")
}

/// A parsed log.
#[derive(Debug, Clone, PartialEq)]
pub struct Log {
    pub header: Header,
    pub steps: Vec<Step>,
    pub evals: Vec<Eval>,
    /// `None` if the run did not finish (crashed or still running).
    pub end: Option<End>,
}

/// Reads a whole log; a truncated last line (a process killed mid-write) is
/// ignored, any other malformed line is an error naming it.
pub fn read_log(reader: impl BufRead) -> Result<Log, LogError> {
    let lines: Vec<String> = reader.lines().collect::<Result<_, _>>()?;
    let mut records = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => records.push(r),
            Err(e) if i + 1 == lines.len() && e.is_eof() => break,
            Err(source) => {
                return Err(LogError::Parse {
                    line: i + 1,
                    source,
                });
            }
        }
    }
    let mut records = records.into_iter();
    let header = match records.next() {
        Some(Record::Header(h)) => h,
        _ => return Err(LogError::NoHeader),
    };
    if header.schema > SCHEMA_VERSION {
        return Err(LogError::NewerSchema {
            found: header.schema,
            supported: SCHEMA_VERSION,
        });
    }
    let mut log = Log {
        header,
        steps: Vec::new(),
        evals: Vec::new(),
        end: None,
    };
    let old_consensus = log.header.schema < 3;
    for r in records {
        match r {
            Record::Step(s) => log.steps.push(s),
            Record::Eval(mut e) => {
                if old_consensus {
                    e.consensus_distance = None;
                }
                log.evals.push(e)
            }
            Record::End(mut e) => {
                if let Some(m) = e.metrics.as_mut().filter(|_| old_consensus) {
                    m.consensus = None;
                }
                log.end = Some(e)
            }
            Record::Header(_) => {}
        }
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `rounding` and `compressor` are written by their one name and read
    /// back from it (a run id hashes the knobs' JSON, so the names are
    /// those the strings were); an unknown name is refused, naming the
    /// choices.
    #[test]
    fn rounding_and_compressor_read_and_write_their_names() {
        for r in Rounding::ALL {
            for &c in CompressorKind::ALL {
                let k = Knobs {
                    rounding: r,
                    compressor: c,
                    ..Knobs::default()
                };
                let json = serde_json::to_value(&k).unwrap();
                assert_eq!(json["rounding"], r.name());
                assert_eq!(json["compressor"], c.name());
                assert_eq!(serde_json::from_value::<Knobs>(json).unwrap(), k);
            }
        }
        let names: Vec<&str> = CompressorKind::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(
            names[..2],
            ["stochastic", "qsgd"],
            "the first in help texts"
        );
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        let bad = serde_json::from_str::<Knobs>(r#"{"rounding": "up"}"#).unwrap_err();
        assert!(bad.to_string().contains("stochastic or nearest"), "{bad}");
        let bad = serde_json::from_str::<Knobs>(r#"{"compressor": "topk"}"#).unwrap_err();
        assert!(bad.to_string().contains("`top-k`"), "{bad}");
    }

    /// `hash` reads true, false and `count`, and writes them back as they
    /// were written (a run id hashes the knobs' JSON).
    #[test]
    fn the_hash_knob_has_three_modes() {
        for (text, mode) in [
            ("true", HashMode::Act),
            ("false", HashMode::Off),
            ("\"count\"", HashMode::Count),
        ] {
            let read: HashMode = serde_json::from_str(text).unwrap();
            assert_eq!(read, mode);
            assert_eq!(serde_json::to_string(&mode).unwrap(), text);
        }
        assert!(serde_json::from_str::<HashMode>("\"sometimes\"").is_err());
        assert!(HashMode::Count.sent() && !HashMode::Off.sent());
    }

    #[test]
    fn the_host_name_is_the_kernels() {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(host_name(), kernel.trim());
        assert_ne!(host_name(), "unknown");
    }

    #[test]
    fn a_header_from_before_the_build_provenance_still_reads() {
        let old = r#"{"type":"header","schema":2,"run_id":"ab","rank":0,"world":2,"config":{},
            "provenance":{"git_commit":"unknown","version":"0.1.0","host":"h","device":"cpu",
            "backend":"sim","network":"none"}}"#
            .replace('\n', "");
        let Record::Header(h) = serde_json::from_str::<Record>(&old).unwrap() else {
            panic!("not a header");
        };
        assert_eq!(h.provenance.source, "");
        assert_eq!(h.provenance.git_dirty, None);
        assert_eq!(h.provenance.manifest_hash, None);
        // an unknown provenance key is still an error
        let bad = old.replace("\"host\":\"h\"", "\"host\":\"h\",\"hots\":1");
        assert!(serde_json::from_str::<Record>(&bad).is_err());
    }

    #[test]
    fn a_non_finite_final_loss_is_divergence() {
        let done = || Status::Completed;
        assert_eq!(done().after_final([0.5, 0.7], 9), Status::Completed);
        assert_eq!(
            done().after_final([0.5, f64::NAN], 9),
            Status::Diverged { iteration: 9 }
        );
        assert_eq!(
            done().after_final([f64::INFINITY], 9),
            Status::Diverged { iteration: 9 }
        );
        // an earlier divergence keeps its iteration
        let early = Status::Diverged { iteration: 3 };
        assert_eq!(early.clone().after_final([f64::NAN], 9), early);
    }

    fn header() -> Header {
        Header {
            schema: SCHEMA_VERSION,
            run_id: "ab12".into(),
            rank: 0,
            world: 8,
            config: serde_json::json!({"algorithm": "moniqua", "bits": 8}),
            provenance: Provenance {
                git_commit: "0123abc".into(),
                version: "0.1.0".into(),
                host: "node1".into(),
                device: "cpu".into(),
                backend: "sim".into(),
                network: "virtual clock".into(),
                ..Provenance::default()
            },
        }
    }

    fn step(i: u64) -> Step {
        Step {
            iteration: i,
            epoch: i as f64 / 10.0,
            wall_s: 0.5 * i as f64,
            compute_s: 0.4,
            comm_s: 0.1,
            train_loss: 2.0,
            bytes_sent: 1000,
            bytes_received: 2000,
            hash_failures: 0,
            hash_verified: 0,
            phases: None,
        }
    }

    /// The wire form is a contract with the driver: pin it.
    #[test]
    fn lines_are_pinned() {
        let mut out = Vec::new();
        write_record(&mut out, &Record::Step(step(3))).unwrap();
        write_record(
            &mut out,
            &Record::End(End {
                status: Status::Diverged { iteration: 7 },
                wall_s: 1.5,
                iterations: 8,
                transport_bytes_sent: None,
                extra_memory_bytes: None,
                peak_rss_bytes: None,
                real_s: None,
                theta: None,
                modulus: None,
                metrics: None,
            }),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"type\":\"step\",\"iteration\":3,\"epoch\":0.3,\"wall_s\":1.5,\"compute_s\":0.4,\"comm_s\":0.1,\
             \"train_loss\":2.0,\"bytes_sent\":1000,\"bytes_received\":2000,\"hash_failures\":0}\n\
             {\"type\":\"end\",\"status\":\"diverged\",\"iteration\":7,\"wall_s\":1.5,\"iterations\":8}\n"
        );
    }

    #[test]
    fn round_trip_and_truncated_tail() {
        let mut out = Vec::new();
        write_record(&mut out, &Record::Header(header())).unwrap();
        for i in 0..3 {
            write_record(&mut out, &Record::Step(step(i))).unwrap();
        }
        // a process killed mid-line leaves a partial record: ignored
        out.extend_from_slice(b"{\"type\":\"step\",\"itera");
        let log = read_log(out.as_slice()).unwrap();
        assert_eq!(log.header, header());
        assert_eq!(log.steps.len(), 3);
        assert_eq!(log.end, None);
    }

    #[test]
    fn bad_logs_are_errors() {
        let err = read_log("{\"type\":\"step\"}\n".as_bytes()).unwrap_err();
        assert!(matches!(err, LogError::Parse { line: 1, .. }), "{err}");
        let mut out = Vec::new();
        write_record(&mut out, &Record::Step(step(0))).unwrap();
        assert!(matches!(read_log(out.as_slice()), Err(LogError::NoHeader)));
        let mut newer = header();
        newer.schema = SCHEMA_VERSION + 1;
        let mut out = Vec::new();
        write_record(&mut out, &Record::Header(newer)).unwrap();
        assert!(
            read_log(out.as_slice())
                .unwrap_err()
                .to_string()
                .contains("update repro")
        );
        // an unknown field in the middle of a log is an error naming its line
        let mut out = Vec::new();
        write_record(&mut out, &Record::Header(header())).unwrap();
        out.extend_from_slice(b"{\"type\":\"eval\",\"bogus\":1}\n{\"type\":\"end\",\"status\":\"completed\",\"wall_s\":1,\"iterations\":1}\n");
        assert!(matches!(
            read_log(out.as_slice()),
            Err(LogError::Parse { line: 2, .. })
        ));
    }
}
