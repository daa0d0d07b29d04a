//! What a run measured ([`Summary`], read from its logs by either backend)
//! and how it ended ([`RunStatus`], runs.csv's `status` column).

use repro_runlog::finite;

/// How a run ended, as runs.csv records it. The one spelling of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) enum RunStatus {
    Completed,
    /// The model became non-finite: a result, not a bug.
    Diverged,
    /// No result: the run's error column says why. A summary's status
    /// until its backend reads one from the logs.
    #[default]
    Failed,
    /// Not started: the command was interrupted first.
    NotRun,
    /// Refused at plan time for the memory it would need.
    Refused,
}

impl RunStatus {
    pub(crate) const ALL: [RunStatus; 5] = [
        Self::Completed,
        Self::Diverged,
        Self::Failed,
        Self::NotRun,
        Self::Refused,
    ];

    /// The text runs.csv holds.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Diverged => "diverged",
            Self::Failed => "failed",
            Self::NotRun => "not run (interrupted)",
            Self::Refused => "refused",
        }
    }

    /// The status `text` spells, if any.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.text() == text)
    }

    /// Whether the run ended with a result (completed or diverged).
    pub(crate) fn finished(self) -> bool {
        matches!(self, Self::Completed | Self::Diverged)
    }

    /// A run's status from its logs (a rank's each, or the simulator's
    /// one), the one place a log's status becomes a run's: diverged when
    /// any log ends diverged (that rank stopped the job), completed when
    /// every log ends completed, else failed (no log, or one cut short).
    pub(crate) fn of_logs<'a>(logs: impl IntoIterator<Item = &'a repro_runlog::Log>) -> Self {
        let ends: Vec<Option<&repro_runlog::Status>> = logs
            .into_iter()
            .map(|l| l.end.as_ref().map(|e| &e.status))
            .collect();
        let is = |want: fn(&repro_runlog::Status) -> bool| {
            move |s: &Option<&repro_runlog::Status>| s.is_some_and(want)
        };
        if ends
            .iter()
            .any(is(|s| matches!(s, repro_runlog::Status::Diverged { .. })))
        {
            Self::Diverged
        } else if !ends.is_empty()
            && ends
                .iter()
                .all(is(|s| *s == repro_runlog::Status::Completed))
        {
            Self::Completed
        } else {
            Self::Failed
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

/// What one run measured, read from its logs. A metric the backend cannot
/// measure, or that is not a number (a diverged model), is `None`.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Summary {
    pub status: RunStatus,
    /// `f(x_bar)` at the end.
    pub final_loss: Option<f64>,
    /// `mean_i f(x_i)` at the end.
    pub local_loss: Option<f64>,
    /// `mean_i |grad f(x_i)|^2`: averaged over every iteration of the last
    /// fifth of the run for an analytic objective (Theorem 1's measure);
    /// at the last iteration for a data objective, where it is a full pass
    /// over the data per worker.
    pub grad_norm_sq: Option<f64>,
    /// `mean_i |x_i - x_bar|^2` and `max_i |x_i - x_bar|_inf` at the end
    /// (`repro_algos::Consensus`).
    pub consensus: Option<f64>,
    pub max_deviation: Option<f64>,
    /// The loss the run started from: the ranks' first logged train loss
    /// (trainer), `f(x_bar_0)` (simulator).
    pub first_loss: Option<f64>,
    /// The share of logged iterations in which a worker completed an
    /// exchange (received a frame, or for the simulator, sent one).
    pub exchange_share: Option<f64>,
    /// `|x_bar|_2` at the end (trainer runs).
    pub model_norm: Option<f64>,
    pub bytes: u64,
    /// Seconds: virtual (simulator) or wall-clock (MPI).
    pub virtual_s: Option<f64>,
    /// Received frames whose recovery failed the hash, and those whose hash
    /// verified it (Moniqua with `hash`; all workers).
    pub hash_failures: u64,
    pub hash_verified: u64,
    /// Test accuracy of the local models (mean over ranks) and of the averaged model.
    pub test_accuracy: Option<f64>,
    pub avg_test_accuracy: Option<f64>,
    /// The averaged model on the held-out validation images (trainer runs
    /// with `validation`), at the last evaluation.
    pub val_loss: Option<f64>,
    pub val_accuracy: Option<f64>,
    /// Lemma 2 checked on real frames (simulator, `measure_recovery`; the
    /// trainer at its evaluations): the largest recovery error over
    /// `delta B` (simulator), and the share of recovered coordinates beyond
    /// it, which wrapped around the modulus.
    pub recovery_over_bound: Option<f64>,
    pub wrap_rate: Option<f64>,
    /// `f(x_bar) - f*` at the end (simulator, data objectives).
    pub subopt: Option<f64>,
    /// Payload bytes each worker handed to the network (mean over workers):
    /// every message, the evaluations' all-reduces included.
    pub counted_bytes_per_worker: Option<f64>,
    /// Of those, the algorithm's own frames during training (the steps'
    /// `bytes_sent`), mean over workers: the gossip, without evaluation.
    pub gossip_bytes_per_worker: Option<f64>,
    /// Seconds per step computing (the gradient and the SGD update: the
    /// steps' `compute_s`), mean over ranks and steps (trainer runs).
    pub compute_step_s: Option<f64>,
    /// Seconds per step the algorithm spent building and applying frames
    /// (the encode and decode phases, without the transport), mean over
    /// ranks and steps (trainer runs with `profile_phases`).
    pub algorithm_step_s: Option<f64>,
    /// Bytes the kernel's qdisc sent per worker (when shaped).
    pub kernel_bytes_per_worker: Option<f64>,
    /// How the network condition was applied.
    pub shaping: String,
    /// Seconds the run took on this host (for MPI: mpirun from start to exit).
    pub wall_s: f64,
    /// Of those, seconds spent setting up and computing metrics
    /// (simulator runs).
    pub setup_s: Option<f64>,
    pub metrics_s: Option<f64>,
    /// Of the metrics, seconds spent on the end-of-run summary.
    pub summary_s: Option<f64>,
    /// Host seconds per iteration (simulator runs), and the seconds to
    /// read every worker's model once on the same threads, its reference.
    pub iteration_s: Option<f64>,
    pub stream_s: Option<f64>,
    /// The memory the plan expected the run to hold, MB (simulator runs),
    /// and the process's resident memory when the run started.
    pub memory_mb: Option<f64>,
    pub base_rss_mb: Option<f64>,
    /// The plan's parts, MB (simulator runs; see `repro_runlog::Metrics`):
    /// per worker model, state, frames, optimizer buffers; once the
    /// objective and per-thread scratch.
    pub model_mb: Option<f64>,
    pub state_mb: Option<f64>,
    pub frames_mb: Option<f64>,
    pub optimizer_mb: Option<f64>,
    pub shared_mb: Option<f64>,
    /// Workers (simulator) or ranks that wrote a log (trainer).
    pub workers: Option<usize>,
    /// Coordinates of every worker's model together, n d (simulator runs).
    pub coordinates: Option<f64>,
    /// Algorithm state beyond D-PSGD's, MB per worker (mean over ranks).
    pub extra_memory_mb: Option<f64>,
    /// Peak resident memory of the largest rank, MB.
    pub peak_rss_mb: Option<f64>,
    /// Moniqua's theta at the end (rank 0's; every rank sets the same):
    /// the one `theta: theorem3-step` picked, else the one given.
    pub theta: Option<f64>,
    /// Moniqua's modulus B at the end (rank 0's; every rank has the same).
    pub modulus: Option<f64>,
    /// Seconds per epoch: iterations (slowest rank's compute + communication)
    /// times iterations per epoch.
    pub epoch_time_s: Option<f64>,
    /// Wire-time bound per epoch: bytes on the wire / bandwidth + latency per
    /// iteration (when shaped).
    pub wire_bound_epoch_s: Option<f64>,
    /// Training loss at the end: the ranks' mean over their last tenth of
    /// steps (MPI; none for the simulator, whose `final_loss` is exact).
    pub train_loss: Option<f64>,
    /// Share of the ranks' step time spent communicating:
    /// sum of comm_s / sum of (compute_s + comm_s) over every step of every rank.
    pub comm_fraction: Option<f64>,
    /// Where the run came from, as its (first rank's) log header says.
    pub provenance: Option<repro_runlog::Provenance>,
}

impl Summary {
    /// The loss the run ended with: the train loss (trainer), else
    /// `f(x_bar)` (simulator). What `first_loss` is held against.
    pub(crate) fn last_loss(&self) -> Option<f64> {
        self.train_loss.or(self.final_loss)
    }

    /// kernel / counted bytes, when both are known.
    pub(crate) fn kernel_over_counted(&self) -> Option<f64> {
        finite(self.kernel_bytes_per_worker? / self.counted_bytes_per_worker?)
    }

    /// Host time per iteration over the time to read every model once
    /// (simulator runs): how far an iteration is from the memory traffic
    /// it cannot avoid.
    pub(crate) fn stream_ratio(&self) -> Option<f64> {
        finite(self.iteration_s? / self.stream_s?)
    }

    /// The share of the run's host time spent setting it up and
    /// summarizing it at its end (simulator runs); the metrics between
    /// iterations are `metrics_s` less `summary_s`.
    pub(crate) fn overhead(&self) -> Option<f64> {
        finite((self.setup_s? + self.summary_s?) / self.wall_s)
    }

    /// The resident memory the run added at its peak over what the plan
    /// expected it to hold.
    pub(crate) fn peak_over_memory(&self) -> Option<f64> {
        finite((self.peak_rss_mb? - self.base_rss_mb?) / self.memory_mb?)
    }

    /// Resident memory each worker held at the run's peak beyond its
    /// model, MB (simulator runs): the peak the run added, less every model
    /// and what is held once (the objective, per-thread scratch), over the
    /// workers. The plan puts state, frames and optimizer buffers there;
    /// buffers of the metrics (the averaged model) add a share.
    pub(crate) fn measured_extra_mb(&self) -> Option<f64> {
        let added = self.peak_rss_mb? - self.base_rss_mb?;
        let n = self.workers? as f64;
        finite((added - n * self.model_mb? - self.shared_mb?) / n)
    }

    /// The share of the frames checked by Moniqua's hash whose recovery
    /// failed it (a coordinate wrapped around the modulus); `None` when no
    /// frame was checked.
    pub(crate) fn failed_recovery_rate(&self) -> Option<f64> {
        let checked = self.hash_failures + self.hash_verified;
        (checked > 0).then(|| self.hash_failures as f64 / checked as f64)
    }

    /// `mb` in models of this run (`model_mb`).
    pub(crate) fn in_models(&self, mb: Option<f64>) -> Option<f64> {
        finite(mb? / self.model_mb?)
    }

    /// Whether the kernel's bytes disagree with the counted ones beyond
    /// TCP/IP overhead: fewer bytes than counted (counted bits that were
    /// never sent), or more than 10% extra.
    pub(crate) fn bytes_flagged(&self) -> bool {
        self.kernel_over_counted()
            .is_some_and(|r| !(1.0..=1.10).contains(&r))
    }

    /// The `bytes_check` column: `ok` or `flagged` where the kernel's
    /// bytes were measured, else empty.
    pub(crate) fn bytes_check(&self) -> &'static str {
        match self.kernel_over_counted() {
            None => "",
            Some(_) if self.bytes_flagged() => "flagged",
            Some(_) => "ok",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_runlog::{End, Header, Log, Provenance, Status};

    /// A rank's log that ends with `status`, or is cut short (`None`).
    fn ending(status: Option<Status>) -> Log {
        Log {
            header: Header {
                schema: 2,
                run_id: "r".into(),
                rank: 0,
                world: 2,
                config: serde_json::Value::Null,
                provenance: Provenance::default(),
            },
            steps: Vec::new(),
            evals: Vec::new(),
            end: status.map(|status| End {
                status,
                wall_s: 1.0,
                iterations: 1,
                transport_bytes_sent: None,
                extra_memory_bytes: None,
                peak_rss_bytes: None,
                real_s: None,
                theta: None,
                modulus: None,
                metrics: None,
            }),
        }
    }

    /// A run diverged when one log ends diverged, completed when every
    /// one ends completed, and failed otherwise.
    #[test]
    fn a_runs_status_comes_from_its_logs() {
        let done = || ending(Some(Status::Completed));
        let diverged = || ending(Some(Status::Diverged { iteration: 3 }));
        let failed = || ending(Some(Status::Failed { reason: "x".into() }));
        let of = |logs: Vec<Log>| RunStatus::of_logs(&logs);
        assert_eq!(of(vec![done(), done()]), RunStatus::Completed);
        assert_eq!(of(vec![done(), diverged()]), RunStatus::Diverged);
        assert_eq!(of(vec![ending(None), diverged()]), RunStatus::Diverged);
        assert_eq!(of(vec![done(), ending(None)]), RunStatus::Failed);
        assert_eq!(of(vec![done(), failed()]), RunStatus::Failed);
        assert_eq!(of(Vec::new()), RunStatus::Failed);
    }

    #[test]
    fn every_status_reads_back_from_its_text() {
        for s in RunStatus::ALL {
            assert_eq!(RunStatus::parse(s.text()), Some(s));
        }
        assert_eq!(RunStatus::parse("Completed"), None);
        assert_eq!(RunStatus::parse(""), None);
    }
}
