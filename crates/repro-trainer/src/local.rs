//! What a rank computes on its own, shared by the synchronous and the
//! asynchronous loop: the phases of a local step (scatter, forward-backward,
//! gather), the evaluations, the averaged model, the clocks and the run
//! log's writer.

use std::io::Write;
use std::time::{Duration, Instant};

use repro_algos::rng::Rng;
use repro_algos::{Consensus, Deviation};
use repro_runlog::{Record, write_record};
use tch::nn::ModuleT;
use tch::{Device, Kind};

use crate::data::ImageSet;
use crate::setup::{Data, Setup, TrainError};
use crate::transport::Transport;

impl Setup {
    /// The epoch (of this rank's shard) at the start of iteration `k`.
    pub fn epoch(&self, k: u64, batch: usize) -> f64 {
        (k as f64 * batch as f64) / self.shard.len() as f64
    }

    /// Scatter: the flat model `x` into the model's tensors.
    pub fn scatter(&self, x: &[f32]) -> Result<(), TrainError> {
        Ok(self.flat.scatter(x)?)
    }

    /// Forward-backward on a minibatch of `batch` images drawn from the
    /// shard: the training loss, with the gradient left in the model's
    /// tensors; `None` (and no backward pass) when the loss is not finite.
    pub fn forward_backward(&self, batch: usize, rng: &mut Rng) -> Option<f64> {
        self.vs
            .trainable_variables()
            .iter_mut()
            .for_each(|v| v.zero_grad());
        let picked: Vec<usize> = (0..batch)
            .map(|_| self.shard[rng.below(self.shard.len())])
            .collect();
        let (xb, yb) = self
            .data
            .train_tf
            .batch(&self.data.train, &picked, rng, self.device);
        let loss_t = self
            .model
            .forward_t(&xb, true)
            .cross_entropy_for_logits(&yb);
        let loss = loss_t.double_value(&[]);
        if !loss.is_finite() {
            return None;
        }
        loss_t.backward();
        Some(loss)
    }

    /// Gather: the gradient of the model's tensors into `grad`.
    pub fn gather_grad(&self, grad: &mut [f32]) -> Result<(), TrainError> {
        Ok(self.flat.gather_grad(grad)?)
    }

    /// Test loss and accuracy of the flat model `x` on the first
    /// `samples` test images. Leaves `x` in the model's tensors.
    pub fn evaluate(
        &self,
        x: &[f32],
        samples: usize,
        rng: &mut Rng,
    ) -> Result<(f64, f64), TrainError> {
        self.scatter(x)?;
        Ok(score(
            &*self.model,
            &self.data.test,
            &self.data,
            samples,
            rng,
            self.device,
        ))
    }

    /// The averaged model `avg` on the test images and the validation split:
    /// rank 0 alone evaluates it (it is the same model on every rank), the
    /// others report `None` for both. Leaves `avg` in the tensors on rank 0.
    pub(crate) fn evaluate_average(
        &self,
        avg: &[f32],
        samples: usize,
        rng: &mut Rng,
    ) -> Result<AverageScores, TrainError> {
        if self.rank != 0 {
            return Ok(AverageScores::default());
        }
        let test = self.evaluate(avg, samples, rng)?;
        Ok(AverageScores {
            test: Some(test),
            valid: self.validate(rng),
        })
    }

    /// Loss and accuracy of the model now in the tensors on every held-out
    /// validation image (seen as test images are: no augmentation); `None`
    /// without them.
    pub fn validate(&self, rng: &mut Rng) -> Option<(f64, f64)> {
        let valid = self.data.valid.as_ref()?;
        Some(score(&*self.model, valid, &self.data, 0, rng, self.device))
    }
}

/// The averaged model's (loss, accuracy) on the test images and on the
/// validation split, as rank 0 measured them; `None` on the other ranks.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AverageScores {
    pub(crate) test: Option<(f64, f64)>,
    pub(crate) valid: Option<(f64, f64)>,
}

/// Loss and accuracy on the first `samples` images of `set` (0: all),
/// through the test transform of `data`.
fn score(
    model: &dyn ModuleT,
    set: &ImageSet,
    data: &Data,
    samples: usize,
    rng: &mut Rng,
    device: Device,
) -> (f64, f64) {
    let n = if samples == 0 {
        set.len()
    } else {
        samples.min(set.len())
    };
    let idx: Vec<usize> = (0..n).collect();
    let (mut loss, mut correct) = (0.0, 0.0);
    tch::no_grad(|| {
        for chunk in idx.chunks(500) {
            let (x, y) = data.test_tf.batch(set, chunk, rng, device);
            let logits = model.forward_t(&x, false);
            loss += logits.cross_entropy_for_logits(&y).double_value(&[]) * chunk.len() as f64;
            correct += logits
                .argmax(-1, false)
                .eq_tensor(&y)
                .to_kind(Kind::Float)
                .sum(Kind::Float)
                .double_value(&[]);
        }
    });
    (loss / n as f64, correct / n as f64)
}

/// Seconds since the run started: the transport's virtual clock when it
/// has one, else the wall clock.
pub(crate) fn now<T: Transport + ?Sized>(t: &T, started: &Instant) -> f64 {
    t.virtual_time()
        .unwrap_or_else(|| started.elapsed().as_secs_f64())
}

/// This rank's peak resident set (the process's VmHWM), bytes; `None` off
/// Linux, and when workers share one process (in-process transport), where
/// no per-worker figure exists.
pub(crate) fn peak_rss_bytes(backend: &str) -> Option<u64> {
    if backend != "mpi" {
        return None;
    }
    repro_runlog::resident_bytes("VmHWM")
}

/// The averaged model and the workers' consensus around it
/// ([`Consensus`]), through the transport's all-reduce and an all-gather
/// of every rank's deviation.
pub(crate) fn average<T: Transport>(
    t: &mut T,
    x: &[f32],
) -> Result<(Vec<f32>, Consensus), TrainError> {
    let n = t.size() as f32;
    let mut avg = x.to_vec();
    t.all_reduce_sum(&mut avg)?;
    avg.iter_mut().for_each(|v| *v /= n);
    let mine = Deviation::of(x, &avg);
    let frame: Vec<u8> = [mine.sq, mine.max]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let all = t.all_gather(&frame)?;
    let each = all.iter().map(|f| {
        let at = |i: usize| {
            f.get(8 * i..8 * i + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(f64::NAN, f64::from_le_bytes)
        };
        Deviation {
            sq: at(0),
            max: at(1),
        }
    });
    Ok((avg, Consensus::of(each)))
}

/// `|x|_2`, in f64.
pub(crate) fn norm(x: &[f32]) -> f64 {
    x.iter().map(|v| f64::from(*v).powi(2)).sum::<f64>().sqrt()
}

/// A rank's run log: records written as they come, flushed at least once
/// a second (the driver's progress reads the log, and a killed rank leaves
/// what it did) and at the end.
pub(crate) struct RunLog<W: Write> {
    out: W,
    last_flush: Instant,
}

impl<W: Write> RunLog<W> {
    pub fn new(out: W) -> Self {
        RunLog {
            out,
            last_flush: Instant::now(),
        }
    }

    pub fn write(&mut self, record: &Record) -> Result<(), TrainError> {
        Ok(write_record(&mut self.out, record)?)
    }

    /// Flushes now.
    pub fn flush(&mut self) -> Result<(), TrainError> {
        self.out.flush()?;
        self.last_flush = Instant::now();
        Ok(())
    }

    /// Flushes when the last flush is a second old.
    pub fn flush_if_due(&mut self) -> Result<(), TrainError> {
        if self.last_flush.elapsed() >= Duration::from_secs(1) {
            self.flush()?;
        }
        Ok(())
    }
}
