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

mod knobs;
mod models;
mod system;
pub use knobs::*;
pub use models::*;
pub use system::*;

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
    /// The averaged model on the test set: rank 0's evaluation alone in
    /// trainer runs (the averaged model is the same on every rank), absent
    /// on the other ranks and at AD-PSGD's intermediate evaluations.
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
    /// `validation` > 0), rank 0's evaluation alone as for `avg_test_loss`.
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
mod tests;
