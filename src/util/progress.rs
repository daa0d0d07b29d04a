//! Progress of `repro run`: indicatif bars (all runs, with ETA; the current
//! MPI run's iterations, read from rank 0's log) when stderr is a terminal,
//! plain lines otherwise (CI and Slurm logs, where indicatif draws nothing).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How much `repro` says on stderr, set once from `--quiet` / `--verbose`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Verbosity {
    /// Errors only: no progress, no per-run lines, no summary.
    Quiet,
    Normal,
    /// Also each run's resolved parameters as it starts.
    Verbose,
}

static VERBOSITY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);

/// Sets how much `repro` says (once, from the command line).
pub(crate) fn set_verbosity(v: Verbosity) {
    VERBOSITY.store(v as u8, std::sync::atomic::Ordering::Relaxed);
}

/// How much `repro` says.
pub(crate) fn verbosity() -> Verbosity {
    match VERBOSITY.load(std::sync::atomic::Ordering::Relaxed) {
        0 => Verbosity::Quiet,
        1 => Verbosity::Normal,
        _ => Verbosity::Verbose,
    }
}

/// Prints a note on stderr unless `--quiet`.
pub(crate) fn note(msg: &str) {
    if verbosity() > Verbosity::Quiet {
        eprintln!("{}", crate::util::text::terminal(msg));
    }
}

/// Seconds between plain progress lines of one run.
const PLAIN_EVERY: Duration = Duration::from_secs(30);

/// The progress of a whole experiment.
#[derive(Debug)]
pub(crate) struct Progress {
    bars: Option<(MultiProgress, ProgressBar)>,
}

impl Progress {
    /// Bars on a terminal, plain lines elsewhere.
    pub(crate) fn new(total_runs: usize) -> Self {
        if !std::io::stderr().is_terminal() || verbosity() == Verbosity::Quiet {
            return Self { bars: None };
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let overall = multi.add(ProgressBar::new(total_runs as u64));
        overall.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} runs, ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        Self {
            bars: Some((multi, overall)),
        }
    }

    /// A line of output above the bars.
    pub(crate) fn line(&self, msg: &str) {
        if verbosity() == Verbosity::Quiet {
            return;
        }
        let msg = &crate::util::text::terminal(msg);
        match &self.bars {
            Some((multi, _)) => {
                if multi.println(msg).is_err() {
                    eprintln!("{msg}");
                }
            }
            None => eprintln!("{msg}"),
        }
    }

    /// A run starts; `iterations` it will log (0: unknown).
    pub(crate) fn run(&self, label: &str, iterations: u64) -> RunProgress {
        let bar = self.bars.as_ref().map(|(multi, _)| {
            let bar = multi.add(ProgressBar::new(iterations.max(1)));
            bar.set_style(
                ProgressStyle::with_template("  {msg} [{bar:30}] {pos}/{len} iterations")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_message(label.to_string());
            bar
        });
        RunProgress {
            bar,
            label: label.to_string(),
            total: iterations,
            last_line: Instant::now(),
        }
    }

    /// A run finished (either way).
    pub(crate) fn run_done(&self, run: RunProgress) {
        if let Some(bar) = run.bar {
            bar.finish_and_clear();
        }
        if let Some((_, overall)) = &self.bars {
            overall.inc(1);
        }
    }

    /// Every run finished.
    pub(crate) fn finish(&self) {
        if let Some((_, overall)) = &self.bars {
            overall.finish_and_clear();
        }
    }
}

/// The progress of one run.
#[derive(Debug)]
pub(crate) struct RunProgress {
    bar: Option<ProgressBar>,
    label: String,
    total: u64,
    last_line: Instant,
}

impl RunProgress {
    /// `done` iterations logged so far.
    pub(crate) fn update(&mut self, done: u64) {
        match &self.bar {
            Some(bar) => bar.set_position(done),
            None => {
                if self.last_line.elapsed() >= PLAIN_EVERY && verbosity() > Verbosity::Quiet {
                    self.last_line = Instant::now();
                    eprintln!("  {}: {done}/{} iterations", self.label, self.total);
                }
            }
        }
    }
}

/// Iterations logged so far in a rank's JSON-lines log (0 if unreadable).
pub(crate) fn logged_steps(path: &std::path::Path) -> u64 {
    std::fs::read(path)
        .map(|b| {
            b.split(|&c| c == b'\n')
                .filter(|l| l.starts_with(b"{\"type\":\"step\""))
                .count() as u64
        })
        .unwrap_or(0)
}

/// Progress of a byte stream (a download): an indicatif bar with rate and
/// ETA on a terminal, a plain line every 10% (or every 8 MB when the size
/// is unknown) elsewhere.
#[derive(Debug)]
pub(crate) struct BytesBar {
    bar: Option<ProgressBar>,
    label: String,
    total: Option<u64>,
    done: u64,
    next_line: u64,
}

/// A [`BytesBar`] for `total` bytes (`None`: unknown).
pub(crate) fn bytes_bar(label: &str, total: Option<u64>) -> BytesBar {
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}, ETA {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_message(label.to_string());
        bar
    });
    let step = total.map_or(8 << 20, |t| (t / 10).max(1));
    BytesBar {
        bar,
        label: label.to_string(),
        total,
        done: 0,
        next_line: step,
    }
}

impl BytesBar {
    pub(crate) fn inc(&mut self, n: u64) {
        self.done += n;
        match &self.bar {
            Some(bar) => bar.inc(n),
            None => {
                if self.done >= self.next_line {
                    let step = self.total.map_or(8 << 20, |t| (t / 10).max(1));
                    self.next_line = self.done + step;
                    match self.total {
                        Some(t) => {
                            eprintln!("{}: {} of {} MB", self.label, self.done >> 20, t >> 20)
                        }
                        None => eprintln!("{}: {} MB", self.label, self.done >> 20),
                    }
                }
            }
        }
    }

    pub(crate) fn finish(&self) {
        match &self.bar {
            Some(bar) => bar.finish(),
            None => eprintln!("{}: done, {} bytes", self.label, self.done),
        }
    }
}
