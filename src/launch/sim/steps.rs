//! The simulator's loop: each step's record, the evaluations, and the log
//! lines written as it goes.

use super::*;

/// What the iterations left: how they ended, the workers' mean squared
/// gradient norm over the last fifth, and the hash mismatches.
pub(super) struct Steps {
    pub(super) status: Status,
    pub(super) grad_norm_sq: Option<f64>,
    pub(super) hash_failures: u64,
    pub(super) hash_verified: u64,
    /// `measure_recovery`: the largest error over the bound, coordinates
    /// beyond it, coordinates checked.
    pub(super) recovery: Option<(f64, u64, u64)>,
    /// Host seconds spent computing metrics between iterations.
    pub(super) metrics_s: f64,
    /// Iterations in which frames went on the wire.
    pub(super) exchanges: u64,
    /// The evaluation after the last iteration: the averaged model and
    /// the consensus distance, which the summary reuses.
    pub(super) last_eval: Option<(Vec<f32>, Consensus)>,
    /// Moniqua's theta after the last iteration (what `theta: theorem3-step` picked).
    pub(super) theta: Option<f64>,
    /// Moniqua's modulus after the last iteration.
    pub(super) modulus: Option<f64>,
    /// The tail's sum of the mean worker's squared gradient norm, and
    /// the iterations summed.
    pub(super) grad_acc: f64,
    pub(super) grad_count: u64,
    /// The mean worker's bytes up to the last step record.
    pub(super) logged_bytes: u64,
}

impl Steps {
    pub(super) fn new() -> Self {
        Steps {
            status: Status::Completed,
            grad_norm_sq: None,
            hash_failures: 0,
            hash_verified: 0,
            recovery: None,
            metrics_s: 0.0,
            exchanges: 0,
            last_eval: None,
            theta: None,
            modulus: None,
            grad_acc: 0.0,
            grad_count: 0,
            logged_bytes: 0,
        }
    }

    /// Lemma 2 on the frames iteration `k` sends, on the iterations that
    /// log (`measure_recovery`).
    pub(super) fn measure_recovery(
        &mut self,
        sim: &Simulator<'_>,
        p: &SimParams,
        k: u64,
    ) -> Result<()> {
        let measuring = Instant::now();
        if p.measure_recovery
            && logs(p, k)
            && let Some(r) = sim.recovery().map_err(anyhow::Error::new)?
        {
            self.add_recovery(&r);
        }
        self.metrics_s += measuring.elapsed().as_secs_f64();
        Ok(())
    }

    /// Counts what a step reported.
    pub(super) fn count(&mut self, r: &StepReport) {
        self.hash_failures += r.mismatched;
        self.hash_verified += r.verified;
        self.theta = r.theta;
        self.modulus = r.modulus;
    }

    /// Adds the mean worker's squared gradient norm after iteration `k`
    /// when it is in the tail (the last fifth). A full gradient of a data
    /// objective is a pass over every sample: every iteration of the tail
    /// would cost iterations x workers x samples x dim (minutes per run at
    /// the convex cpu scale), so a data objective adds the last one only.
    pub(super) fn add_tail_gradient(&mut self, sim: &Simulator<'_>, p: &SimParams, k: u64) {
        let tail_start = p.iterations - p.iterations / 5;
        let data_objective = sim.objective().samples().is_some();
        if k >= tail_start && (!data_objective || k + 1 == p.iterations) {
            self.grad_acc += sim.grad_norms_sq().iter().sum::<f64>() / p.workers as f64;
            self.grad_count += 1;
        }
    }

    /// The mean worker's bytes since the previous step record, so that the
    /// records add up to what each worker sent, as a rank's do.
    pub(super) fn bytes_since_record(&mut self, sim: &Simulator<'_>, p: &SimParams) -> u64 {
        let through = (sim.total_bytes() as f64 / p.workers.max(1) as f64).round() as u64;
        let bytes = through - self.logged_bytes;
        self.logged_bytes = through;
        bytes
    }

    /// The averaged model and the consensus distance at the end: the last
    /// evaluation's, which already averaged the models, else computed.
    pub(super) fn averaged(&mut self, sim: &Simulator<'_>) -> (Vec<f32>, Consensus) {
        self.last_eval.take().unwrap_or_else(|| {
            let avg = sim.average_model();
            let consensus = sim.consensus_to(&avg);
            (avg, consensus)
        })
    }

    /// Adds one iteration's check of Lemma 2.
    pub(super) fn add_recovery(&mut self, r: &repro_algos::Recovery) {
        let (over, beyond, checked) = self.recovery.unwrap_or((0.0, 0, 0));
        let ratio = if r.bound > 0.0 {
            r.max_error / r.bound
        } else {
            0.0
        };
        self.recovery = Some((
            over.max(ratio),
            beyond + r.beyond_bound,
            checked + r.coordinates,
        ));
    }
}

/// The step record of iteration `k` (`bytes`: the mean worker's since the
/// previous record).
pub(super) fn step_record(k: u64, epoch: f64, r: &StepReport, p: &SimParams, bytes: u64) -> Step {
    Step {
        iteration: k,
        epoch,
        wall_s: r.time_s,
        compute_s: p.compute_ms * 1e-3,
        comm_s: 0.0,
        train_loss: r.train_loss,
        bytes_sent: bytes,
        bytes_received: bytes,
        hash_failures: r.mismatched,
        hash_verified: r.verified,
        phases: None,
    }
}

/// The evaluation after `done` iterations: its record, the averaged model
/// and the consensus distance.
pub(super) fn evaluate(
    sim: &Simulator<'_>,
    done: u64,
    per_epoch: f64,
    fstar: Option<f64>,
) -> (repro_runlog::Eval, Vec<f32>, Consensus) {
    let avg = sim.average_model();
    let consensus = sim.consensus_to(&avg);
    let objective = sim.objective().loss_f64(&avg);
    let eval = repro_runlog::Eval {
        iteration: done,
        epoch: done as f64 / per_epoch,
        wall_s: sim.clock(),
        test_loss: None,
        test_accuracy: None,
        avg_test_loss: None,
        avg_test_accuracy: None,
        consensus_distance: finite(consensus.distance),
        max_deviation: finite(consensus.max_deviation),
        model_norm: None,
        recovered: None,
        wrapped: None,
        val_loss: None,
        val_accuracy: None,
        objective: finite(objective),
        subopt: fstar.and_then(|f| finite(objective - f)),
    };
    (eval, avg, consensus)
}

/// Whether iteration `k` writes a step record: every `log_every`, and the last.
pub(super) fn logs(p: &SimParams, k: u64) -> bool {
    k.is_multiple_of(p.log_every.max(1)) || k + 1 == p.iterations
}

/// Runs the iterations, logging a step record every `log_every` and
/// reporting the iterations done to `progress` (at most ten times a
/// second, and at the end); stops at the first divergence.
pub(super) fn iterate(
    sim: &mut Simulator<'_>,
    p: &SimParams,
    schedule: &repro_algos::LrSchedule,
    per_epoch: f64,
    fstar: Option<f64>,
    log: &mut impl Write,
    progress: &mut dyn FnMut(u64),
) -> Result<Steps> {
    let mut reported = Instant::now();
    // iterations between evaluations (none: at the end only)
    let eval_gap = (p.eval_every > 0.0).then(|| (p.eval_every * per_epoch).round().max(1.0) as u64);
    let mut out = Steps::new();
    for k in 0..p.iterations {
        // Ctrl-C and SIGTERM stop a run between iterations
        if crate::util::signals::interrupted() {
            bail!("run interrupted at iteration {k}");
        }
        let epoch = k as f64 / per_epoch;
        sim.set_lr(schedule.at(epoch, k) as f32);
        out.measure_recovery(sim, p, k)?;
        let sent_before = sim.total_bytes();
        let step = repro_algos::unless_diverged(sim.step()).map_err(anyhow::Error::new)?;
        out.exchanges += u64::from(sim.total_bytes() > sent_before);
        let Some(r) = step else {
            out.status = Status::Diverged { iteration: k };
            break;
        };
        out.count(&r);
        if !r.train_loss.is_finite() {
            out.status = Status::Diverged { iteration: k };
            break;
        }
        let measuring = Instant::now();
        out.add_tail_gradient(sim, p, k);
        if logs(p, k) {
            let bytes = out.bytes_since_record(sim, p);
            write_record(
                &mut *log,
                &Record::Step(step_record(k, epoch, &r, p, bytes)),
            )?;
        }
        let done = k + 1;
        if eval_gap.is_some_and(|g| done % g == 0) || done == p.iterations {
            let (eval, avg, consensus) = evaluate(sim, done, per_epoch, fstar);
            write_record(&mut *log, &Record::Eval(eval))?;
            if done == p.iterations {
                out.last_eval = Some((avg, consensus));
            }
        }
        out.metrics_s += measuring.elapsed().as_secs_f64();
        if done == p.iterations || reported.elapsed().as_secs_f64() >= 0.1 {
            progress(done);
            reported = Instant::now();
        }
    }
    out.grad_norm_sq = (out.grad_count > 0).then(|| out.grad_acc / out.grad_count as f64);
    Ok(out)
}
