//! A `Session`: one experiment's runs as they start, finish and are
//! recorded, with progress and the runs adopted from a job array.

use super::*;

/// What every run of one `repro run` shares.
pub(super) struct Session<'a> {
    pub(super) cfg: &'a RunConfig,
    pub(super) backend: Backend,
    pub(super) experiment: &'a str,
    pub(super) scale: &'a str,
    /// This command line and the resolved manifest's hash, for provenance.
    pub(super) invocation: Invocation,
    pub(super) out: &'a std::path::Path,
    pub(super) net: &'a NetContext,
    pub(super) progress: Progress,
    pub(super) done: std::sync::atomic::AtomicUsize,
    pub(super) total: usize,
    /// Runs refused at plan time, and the MB each would need.
    pub(super) refused: BTreeMap<String, f64>,
    /// The runs runs.csv held before this invocation.
    pub(super) previous: &'a [RunRecord],
}

impl Session<'_> {
    /// Runs `r` (or summarizes it from an earlier invocation's logs) and
    /// reports it: its record, `failed` if it produced no summary.
    pub(super) fn execute(&self, r: &PlannedRun) -> RunRecord {
        self.attempt(r).identified(self.experiment, self.scale, r)
    }

    /// The summary of `r` from an earlier invocation's logs in `raw`, where
    /// one is kept: with --resume (current runs only, unless
    /// --resume-stale), and for every finished run once interrupted.
    pub(super) fn earlier(
        &self,
        r: &PlannedRun,
        raw: &std::path::Path,
        interrupted: bool,
    ) -> Option<Summary> {
        let earlier = match self.backend {
            Backend::Mpi | Backend::InProcess if self.cfg.resume || interrupted => {
                train_backend::resume(r, &raw.join(&r.id), self.net)
                    .or_else(|| self.adopted(r, raw))
            }
            _ => None,
        };
        // --resume keeps a stale run only when told to
        earlier.filter(|s| {
            if interrupted || self.cfg.resume_stale {
                return true;
            }
            let p = s.provenance.clone().unwrap_or_default();
            let state = freshness::judge(
                &p.source,
                p.manifest_hash.as_deref().unwrap_or(""),
                &self.invocation,
            );
            if state != freshness::Freshness::Current {
                self.progress.line(&format!(
                    "  {} finished earlier but is {state}: running it again (--resume-stale keeps it)",
                    r.id
                ));
            }
            state == freshness::Freshness::Current
        })
    }

    /// With --resume, a run a job array's chunk finished (see
    /// [`chunk_raws`]): its logs move into `raw`, and its summary is read
    /// from there.
    pub(super) fn adopted(&self, r: &PlannedRun, raw: &std::path::Path) -> Option<Summary> {
        if !self.cfg.resume {
            return None;
        }
        let from = chunk_raws(self.out)
            .into_iter()
            .map(|c| c.join(&r.id))
            .find(|d| train_backend::resume(r, d, self.net).is_some())?;
        let to = raw.join(&r.id);
        if let Err(e) = crate::util::atomic::replace_dir(&from, &to) {
            self.progress.line(&format!(
                "  {}: could not adopt {} ({e:#}): running it",
                r.id,
                from.display()
            ));
            return None;
        }
        self.progress
            .line(&format!("  {}: adopted from {}", r.id, from.display()));
        train_backend::resume(r, &to, self.net)
    }

    /// With --resume, the runs.csv row of a run that finished in an
    /// earlier invocation whose logs are gone (committed results keep no
    /// raw/), where the row is current (or stale, with --resume-stale): a
    /// long experiment resumes from what was committed.
    pub(super) fn recorded(&self, r: &PlannedRun) -> Option<RunRecord> {
        if !self.cfg.resume || !matches!(self.backend, Backend::Mpi | Backend::InProcess) {
            return None;
        }
        let row = self
            .previous
            .iter()
            .find(|p| p.run_id == r.id && p.finished())?;
        let state = freshness::freshness(r, self.previous, &self.invocation);
        (state == freshness::Freshness::Current || self.cfg.resume_stale).then(|| row.clone())
    }

    /// [`Session::execute`] before the record gets its identity: refused,
    /// kept from runs.csv, summarized from earlier logs, or run.
    pub(super) fn attempt(&self, r: &PlannedRun) -> RunRecord {
        if let Some(&mb) = self.refused.get(&r.id) {
            self.counted_line(r, &format!("refused (needs {:.1} GB)", mb / 1e3));
            return RunRecord::refused(r, mb);
        }
        // a run that finished in an earlier invocation (same id: the same
        // resolved config) is summarized from its logs with --resume, and
        // also once Ctrl-C / SIGTERM stops this invocation, so an
        // interrupted rerun never replaces finished results with "not run"
        let interrupted = crate::util::signals::interrupted();
        let raw = self.out.join(Entry::Raw.name());
        let earlier = self.earlier(r, &raw, interrupted);
        if interrupted && earlier.is_none() {
            return RunRecord::not_run(r);
        }
        if earlier.is_none()
            && !raw.join(&r.id).is_dir()
            && let Some(row) = self.recorded(r)
        {
            self.counted_line(
                r,
                "finished earlier: kept from runs.csv (--resume; its logs are not here)",
            );
            return row;
        }
        let t = Instant::now();
        let result = self.summary(r, &raw, earlier, interrupted);
        self.report(r, &result, t.elapsed().as_secs_f64());
        if result.is_err() && crate::util::signals::interrupted() {
            // stopped part-way: not a result, so it never replaces one
            return RunRecord::not_run(r);
        }
        RunRecord::of(r, result.as_ref().map_err(|e| format!("{e:#}")))
    }

    /// One counted line about a run that is not run: `[n/total] id what`.
    pub(super) fn counted_line(&self, r: &PlannedRun, what: &str) {
        let n = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let total = self.total;
        let (id, run) = (&r.id, plan::describe(r));
        self.progress
            .line(&format!("[{n}/{total}] {id} {run}: {what}"));
    }

    /// The run's summary, under its progress bar: simulated, read from the
    /// logs an earlier invocation left (`earlier`), or trained.
    pub(super) fn summary(
        &self,
        r: &PlannedRun,
        raw: &std::path::Path,
        earlier: Option<Summary>,
        interrupted: bool,
    ) -> Result<Summary> {
        let iterations = match &r.params {
            plan::Params::Train(c) => c.iterations,
            plan::Params::Sim(p) => p.iterations,
        };
        if crate::util::progress::verbosity() == crate::util::progress::Verbosity::Verbose {
            let params = match &r.params {
                plan::Params::Train(c) => serde_json::to_string(c),
                plan::Params::Sim(p) => serde_json::to_string(p),
            };
            self.progress
                .line(&format!("{}: {}", r.id, params.unwrap_or_default()));
        }
        let mut bar = self
            .progress
            .run(&format!("{} {}", r.id, plan::describe(r)), iterations);
        let result = match (self.backend, earlier) {
            (Backend::Sim, _) => {
                let log = raw.join(format!("{}.jsonl", r.id));
                sim_backend::execute(r, self.experiment, &self.invocation, &log, &mut |k| {
                    bar.update(k)
                })
            }
            (_, Some(s)) => {
                let why = if interrupted {
                    "interrupted, so not run again"
                } else {
                    "--resume"
                };
                let id = &r.id;
                self.progress.line(&format!(
                    "  {id} finished earlier: summarized from its logs ({why})"
                ));
                Ok(s)
            }
            (_, None) => {
                let dir = raw.join(&r.id);
                train_backend::execute(r, &dir, self.net, &self.invocation, &mut |k| bar.update(k))
            }
        };
        self.progress.run_done(bar);
        result
    }

    /// One line for a finished run (and a warning if its bytes look wrong).
    pub(super) fn report(&self, r: &PlannedRun, result: &Result<Summary>, secs: f64) {
        let n = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let total = self.total;
        let s = match result {
            Ok(s) => s,
            Err(e) => {
                self.progress.line(&format!(
                    "[{n}/{total}] {} {}: FAILED: {e:#}",
                    r.id,
                    plan::describe(r)
                ));
                return;
            }
        };
        // a simulator run's cost: per iteration, against reading every
        // model once, and its peak memory against the plan's
        let cost = match (s.iteration_s, s.stream_ratio(), s.peak_rss_mb) {
            (Some(t), Some(ratio), peak) => format!(
                ", {:.3} ms/iteration ({ratio:.2}x reading every model once){}",
                t * 1e3,
                peak.map_or(String::new(), |p| format!(
                    ", peak {:.2} GB (plan {:.2} GB)",
                    p / 1e3,
                    s.memory_mb.unwrap_or(f64::NAN) / 1e3
                ))
            ),
            _ => String::new(),
        };
        self.progress.line(&format!(
            "[{n}/{total}] {} {}: {} in {secs:.1}s (final_loss {}, {} bytes{cost})",
            r.id,
            plan::describe(r),
            s.status,
            s.final_loss.map_or("none".into(), |l| format!("{l:.4e}")),
            s.bytes
        ));
        if s.bytes_flagged() {
            self.progress.line(&format!(
                "  warning: the kernel sent {:.0} bytes per worker, {:.3}x the {:.0} counted (expected 1.00-1.10x: TCP/IP overhead)",
                s.kernel_bytes_per_worker.unwrap_or(f64::NAN),
                s.kernel_over_counted().unwrap_or(f64::NAN),
                s.counted_bytes_per_worker.unwrap_or(f64::NAN)
            ));
        }
    }
}
