//! `repro submit`: an experiment as a Slurm batch job. The job runs
//! `repro run ... --launcher srun --resume` into a run directory made
//! now; the script (`submit.sbatch`) and the job's id (`job.json`) are
//! kept there, so the job can be watched, resumed or resubmitted. With
//! `--array N`, a job array (`chunks.sbatch`) runs the plan in N chunks,
//! each into `chunks/<k>/`, and the job of `submit.sbatch` waits for it
//! and adopts their runs (`repro run --resume`), so one writer merges.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::experiment::manifest::{self, Backend};
use crate::experiment::plan::{self, Params};
use crate::records::results_dir::Entry;

/// Options of `repro submit`.
#[derive(Debug, Args)]
pub(crate) struct SubmitArgs {
    /// Experiment name (see `repro list`) or path to a manifest.
    #[arg(default_value = crate::experiment::project::DEFAULT_EXPERIMENT)]
    pub experiment: String,
    /// The scale (default: the manifest's `default_scale`, else smoke).
    #[arg(long)]
    pub scale: Option<String>,
    /// Override any manifest key, as `repro run --set` does.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// The Slurm partition (default: the cluster's default).
    #[arg(long)]
    pub partition: Option<String>,
    /// The job's time limit, HH:MM:SS (default: twice the manifest's
    /// estimate plus 10 minutes, at most every run's `timeout_s` added up
    /// plus a tenth and 5 minutes).
    #[arg(long, value_name = "HH:MM:SS")]
    pub time: Option<String>,
    /// Nodes to spread the tasks over (default: Slurm's choice).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// GPUs per task (one rank a task).
    #[arg(long, value_name = "G")]
    pub gpus_per_task: Option<usize>,
    /// Memory per node, GB (default: the site's). The plan estimates no
    /// memory for trainer runs, so the script asks for none unless told.
    #[arg(long, value_name = "GB")]
    pub mem: Option<u64>,
    /// The results directory (default: a new run directory,
    /// runs/<experiment>/<scale>/<time>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The nodes' network interface, for an experiment that shapes the
    /// network (`shaping: hosts`: each node's interface, through srun).
    #[arg(long, value_name = "IFACE")]
    pub interface: Option<String>,
    /// Run the plan as a job array of N chunks (each every N-th run; a
    /// tuned experiment's tuning runs), then one job that waits for them,
    /// adopts their runs and runs what is left (the final runs).
    #[arg(long, value_name = "N")]
    pub array: Option<usize>,
    /// How the job starts each run's ranks: srun (with the MPI plugin
    /// `REPRO_SRUN_MPI` names, pmix by default), or mpirun inside the
    /// allocation, for a site whose MPI does not start under srun.
    #[arg(long, value_enum, default_value = "srun")]
    pub launcher: JobLauncher,
    /// Submit the script of this run directory again (a job cancelled,
    /// timed out or failed): the runs it recorded stay, the rest run.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["experiment", "scale", "overrides", "partition", "time", "nodes", "gpus_per_task", "mem", "out", "launcher", "array", "interface"]
    )]
    pub resume: Option<PathBuf>,
    /// Write and print the script, submit nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// How a job starts its ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum JobLauncher {
    Srun,
    Mpirun,
}

/// What the job needs, from the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resources {
    /// Tasks: the most ranks one run starts (one task a rank).
    pub tasks: usize,
    /// The time limit, seconds.
    pub seconds: u64,
    /// Where the time limit came from, for the script's comment.
    pub why: String,
}

/// The resources of `runs`, of the `all` runs the experiment plans at
/// `scale` (tuning runs included): the most workers of a run, and a time
/// limit. The limit is twice the manifest's estimate for the scale (its
/// share for `runs`) plus 10 minutes where it gives one, but never more
/// than the worst case: the runs' `timeout_s` added up, plus a tenth and
/// 5 minutes. `None` without a trainer run.
pub(crate) fn resources(
    m: &manifest::Manifest,
    scale: &str,
    runs: &[plan::PlannedRun],
    all: usize,
) -> Option<Resources> {
    let configs: Vec<_> = runs
        .iter()
        .filter_map(|r| match &r.params {
            Params::Train(c) => Some(c),
            Params::Sim(_) => None,
        })
        .collect();
    if configs.is_empty() {
        return None;
    }
    let tasks = configs
        .iter()
        .map(|c| crate::launch::train::workers(c))
        .max()
        .unwrap_or(1);
    let total: u64 = configs.iter().map(|c| c.timeout_s).sum();
    let worst = total + total / 10 + 300;
    let share = runs.len() as f64 / all.max(1) as f64;
    let estimate = m
        .cost
        .get(scale)
        .and_then(|text| crate::cmd::list::cost_seconds(text).0)
        .map(|s| (2.0 * s * share) as u64 + 600);
    let of = if runs.len() == all {
        String::new()
    } else {
        format!(" ({} of its {all} runs)", runs.len())
    };
    let (seconds, why) = match estimate {
        Some(e) if e < worst => (
            e,
            format!(
                "twice the manifest's estimate for `{scale}`{of} plus 10 minutes ({} runs' \
                 timeouts would allow {})",
                configs.len(),
                slurm_time(worst)
            ),
        ),
        _ => (
            worst,
            format!(
                "{} runs' timeout_s added up, plus a tenth and 5 minutes",
                configs.len()
            ),
        ),
    };
    Some(Resources {
        tasks,
        seconds,
        why,
    })
}

/// A time limit past which `repro submit` warns (7 days).
const LONG_JOB_S: u64 = 7 * 86_400;

/// Seconds as Slurm's `D-HH:MM:SS`.
fn slurm_time(seconds: u64) -> String {
    let (d, rest) = (seconds / 86_400, seconds % 86_400);
    format!(
        "{d}-{:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// Refuses a value that goes into a script (an `#SBATCH` line or the
/// command line) when it holds a control character: a line break ends an
/// `#SBATCH` comment, and what follows it would run.
fn script_value(what: &str, value: &str) -> Result<()> {
    if crate::util::text::has_control(value) {
        bail!(
            "{what} `{}` holds a control character (a line break, an escape); a value written \
             into the job's script is one line of plain text",
            crate::util::text::shown(value)
        );
    }
    Ok(())
}

/// `--time` as Slurm reads it: minutes, minutes:seconds,
/// hours:minutes:seconds, days-hours, days-hours:minutes or
/// days-hours:minutes:seconds; every part digits.
fn slurm_time_arg(t: &str) -> Result<String> {
    let digits = |s: &str| !s.is_empty() && s.len() <= 6 && s.bytes().all(|b| b.is_ascii_digit());
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, t),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let ok = days.is_none_or(digits) && parts.len() <= 3 && parts.iter().all(|p| digits(p));
    if !ok {
        bail!(
            "--time `{}` is not a Slurm time: write MINUTES, MINUTES:SECONDS, HH:MM:SS, \
             DAYS-HH, DAYS-HH:MM or DAYS-HH:MM:SS (e.g. 12:00:00, 2-00:00:00)",
            crate::util::text::shown(t)
        );
    }
    Ok(t.to_string())
}

/// Refuses `--partition` unless it is partition names: letters, digits,
/// `-`, `_`, `.`, comma-separated.
fn partition_arg(p: &str) -> Result<()> {
    let name = |n: &str| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    if !p.split(',').all(name) {
        bail!(
            "--partition `{}` is not a partition's name (letters, digits, `-`, `_`, `.`; several \
             comma-separated)",
            crate::util::text::shown(p)
        );
    }
    Ok(())
}

/// Checks every value `repro submit` writes into a script, before any
/// script is written.
fn check_script_values(args: &SubmitArgs, out: &Path) -> Result<()> {
    if let Some(t) = &args.time {
        slurm_time_arg(t)?;
    }
    if let Some(p) = &args.partition {
        partition_arg(p)?;
    }
    script_value("the experiment", &args.experiment)?;
    for o in &args.overrides {
        script_value("--set", o)?;
    }
    if let Some(i) = &args.interface {
        script_value("--interface", i)?;
    }
    script_value("--out", &out.display().to_string())?;
    let cwd = std::env::current_dir().context("no working directory")?;
    script_value("the working directory", &cwd.display().to_string())?;
    let exe = std::env::current_exe().context("could not locate the repro executable")?;
    script_value("the repro executable's path", &exe.display().to_string())
}

/// A word as a shell reads it back whole: single-quoted where it needs it.
fn quoted(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+".contains(c))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// `repro run --launcher`'s word for `l`.
fn launcher_word(l: JobLauncher) -> &'static str {
    match l {
        JobLauncher::Srun => "srun",
        JobLauncher::Mpirun => "mpirun",
    }
}

/// One batch script of a submission.
struct Script<'a> {
    args: &'a SubmitArgs,
    name: &'a str,
    scale: &'a str,
    /// The run directory.
    out: &'a Path,
    res: &'a Resources,
    /// `Some(n)`: the job array of `n` chunks, each into `chunks/<k>/`.
    chunks: Option<usize>,
}

impl Script<'_> {
    /// The time limit: `--time`, else the resources' (with a warning past
    /// [`LONG_JOB_S`]).
    fn time(&self) -> (String, String) {
        if let Some(t) = &self.args.time {
            // checked by `check_script_values`
            return (t.clone(), "--time".into());
        }
        if self.res.seconds > LONG_JOB_S {
            crate::util::progress::note(&format!(
                "warning: the job's time limit is {} ({}); most clusters end jobs after a few \
                 days: set --time, and `repro submit --resume DIR` continues what a job left",
                slurm_time(self.res.seconds),
                self.res.why
            ));
        }
        (slurm_time(self.res.seconds), self.res.why.clone())
    }

    /// The script's text: the `#SBATCH` lines, then the run.
    fn text(&self) -> Result<String> {
        let mut s = self.header()?;
        s.push_str(&self.body()?);
        Ok(s)
    }

    /// The `#SBATCH` lines and the comment that says where they came from.
    fn header(&self) -> Result<String> {
        let (args, out) = (self.args, self.out);
        let cwd = std::env::current_dir().context("no working directory")?;
        let root =
            std::fs::canonicalize(cwd.join(crate::experiment::project::root().unwrap_or_default()))
                .unwrap_or(cwd);
        let chunks_dir = out.join(Entry::Chunks.name());
        let (time, why) = self.time();
        let tasks = self.res.tasks;
        let mut s = String::from("#!/bin/bash\n");
        let mut sb = |line: String| s.push_str(&format!("#SBATCH {line}\n"));
        match self.chunks {
            Some(n) => {
                sb(format!(
                    "--job-name=repro-{}-{}-chunks",
                    self.name, self.scale
                ));
                sb(format!("--array=1-{n}"));
            }
            None => sb(format!("--job-name=repro-{}-{}", self.name, self.scale)),
        }
        sb(format!("--ntasks={tasks}"));
        if let Some(n) = args.nodes {
            sb(format!("--nodes={n}"));
        }
        if let Some(g) = args.gpus_per_task {
            sb(format!("--gpus-per-task={g}"));
        }
        if let Some(g) = args.mem {
            sb(format!("--mem={g}G"));
        }
        if let Some(p) = &args.partition {
            sb(format!("--partition={}", quoted(p)));
        }
        sb(format!("--time={time}"));
        let log = match self.chunks {
            Some(_) => chunks_dir.join("slurm-%A_%a.out"),
            None => out.join("slurm-%j.out"),
        };
        sb(format!("--output={}", quoted(&log.display().to_string())));
        sb(format!("--chdir={}", quoted(&root.display().to_string())));
        // the environment repro needs (libtorch, MPI, the trainer) is the
        // submitting shell's
        sb("--export=ALL".into());
        let each = if self.chunks.is_some() {
            "each chunk's time"
        } else {
            "the time"
        };
        s.push_str(&format!(
            "# {tasks} tasks: the most ranks one run starts; {each}: {why}. A job that runs out \
             of time keeps the runs it finished: `repro submit --resume` runs the rest.\n\
             set -uo pipefail\n"
        ));
        Ok(s)
    }

    /// `repro run` in the background, the shell waiting for it, and its
    /// exit status kept.
    fn body(&self) -> Result<String> {
        let (args, out) = (self.args, self.out);
        let repro = std::env::current_exe().context("could not locate the repro executable")?;
        let chunks_dir = out.join(Entry::Chunks.name());
        let mut run = vec![
            repro.display().to_string(),
            "run".into(),
            args.experiment.clone(),
            "--scale".into(),
            self.scale.to_string(),
        ];
        for o in &args.overrides {
            run.extend(["--set".into(), o.clone()]);
        }
        if let Some(i) = &args.interface {
            run.extend(["--interface".into(), i.clone()]);
        }
        run.extend([
            "--launcher".into(),
            launcher_word(args.launcher).into(),
            "--resume".into(),
        ]);
        let mut line: Vec<String> = run.iter().map(|w| quoted(w)).collect();
        // the chunk's share and directory come from Slurm's task id
        let exit = match self.chunks {
            Some(n) => {
                let dir = quoted(&format!("{}/", chunks_dir.display()));
                line.push(format!("--chunk \"$SLURM_ARRAY_TASK_ID\"/{n}"));
                line.push(format!("--out {dir}\"$SLURM_ARRAY_TASK_ID\""));
                format!("{dir}slurm-\"$SLURM_ARRAY_JOB_ID\"_\"$SLURM_ARRAY_TASK_ID\".exit")
            }
            None => {
                line.push(format!("--out {}", quoted(&out.display().to_string())));
                format!(
                    "{}\"$SLURM_JOB_ID\".exit",
                    quoted(&out.join("slurm-").display().to_string())
                )
            }
        };
        // the shell outlives repro run: Slurm ends a job whose shell exited
        // with SIGKILL, so a cancelled or timed-out run would record nothing
        Ok(format!(
            "# Slurm's SIGTERM (scancel, the time limit) stops repro run, which records the \
             runs that finished; the shell waits for it\n\
             trap 'kill -TERM \"$child\" 2>/dev/null' TERM INT\n{} &\nchild=$!\n\
             while :; do wait \"$child\"; rc=$?; kill -0 \"$child\" 2>/dev/null || break; done\n\
             wait \"$child\" 2>/dev/null && rc=0 || {{ r=$?; [ \"$r\" = 127 ] || rc=$r; }}\n\
             # repro run's exit status, for `repro status` once Slurm forgets the job\n\
             echo \"$rc\" > {exit}\nexit \"$rc\"\n",
            line.join(" ")
        ))
    }
}

/// What `repro submit` planned: the experiment, its runs, and the jobs'
/// resources.
struct Submission {
    m: manifest::Manifest,
    scale: String,
    /// The tuning runs (none for an untuned experiment).
    tuning: Vec<plan::PlannedRun>,
    /// The grid's runs (a tuned experiment's before its tuning chooses).
    grid: Vec<plan::PlannedRun>,
    /// With `--array N`: N and one chunk's resources.
    chunks: Option<(usize, Resources)>,
    /// The resources of the job that writes the run directory.
    res: Resources,
    /// The run directory, absolute.
    out: PathBuf,
}

impl Submission {
    /// The runs the chunks of an array share ([`shared`]).
    fn shared(&self) -> &[plan::PlannedRun] {
        shared(&self.tuning, &self.grid)
    }
}

/// The runs the chunks of an array share: a tuned experiment's tuning
/// runs, else the grid's.
fn shared<'a>(
    tuning: &'a [plan::PlannedRun],
    grid: &'a [plan::PlannedRun],
) -> &'a [plan::PlannedRun] {
    if tuning.is_empty() { grid } else { tuning }
}

/// Plans `args`' experiment for a submission.
fn plan_submission(args: &SubmitArgs) -> Result<Submission> {
    let path = manifest::locate(&args.experiment)?;
    let m = manifest::load(&path, &args.overrides)?;
    let scale = m.run_scale(&args.scale);
    if m.backend != Backend::Mpi {
        bail!(
            "`{}` runs on the {} backend; a Slurm job starts MPI ranks: submit an MPI \
             experiment, or run this one with `repro run`",
            m.name,
            m.backend.name()
        );
    }
    let tuning = match &m.tune {
        Some(t) => {
            crate::report::tune::tuning_runs(&m, t, &scale, m.backend, plan::Limits::default())?
        }
        None => Vec::new(),
    };
    let grid = plan::expand(&m, &scale, m.backend)?;
    // a job started with srun shapes each node's interface: say it now,
    // not when the job runs
    let shaped = m.shaping != crate::experiment::condition::ShapingMode::None
        && grid.iter().chain(&tuning).any(|r| r.network.is_some());
    if shaped && args.interface.is_none() && args.launcher == JobLauncher::Srun {
        return Err(crate::launch::net::NetError::NoInterface.into());
    }
    let all: Vec<plan::PlannedRun> = tuning.iter().chain(&grid).cloned().collect();
    // a chunk runs a share of the tuning runs, else of the grid's; the
    // job after the array runs what is left (a tuned experiment's final
    // runs) and, at worst, a chunk's share again
    let shared = shared(&tuning, &grid);
    let first = match args.array {
        Some(n) if n < 2 || n > shared.len() => bail!(
            "--array {n}: give 2 to {} chunks (the {} runs the chunks share)",
            shared.len().max(2),
            shared.len()
        ),
        Some(n) => Some((n, crate::cmd::run::share(shared, (1, n)))),
        None => None,
    };
    let closing: Vec<plan::PlannedRun> = match &first {
        Some((_, first)) if tuning.is_empty() => first.clone(),
        Some((_, first)) => first.iter().chain(&grid).cloned().collect(),
        None => all.clone(),
    };
    let none = || anyhow::anyhow!("the plan has no trainer run to submit");
    let res = resources(&m, &scale, &closing, all.len()).ok_or_else(none)?;
    let chunks = match &first {
        Some((n, first)) => Some((
            *n,
            resources(&m, &scale, first, all.len()).ok_or_else(none)?,
        )),
        None => None,
    };
    let out = match &args.out {
        Some(o) => o.clone(),
        None => crate::experiment::project::new_run_dir(&m.name, &scale),
    };
    let out = if out.is_absolute() {
        out
    } else {
        std::env::current_dir()?.join(out)
    };
    Ok(Submission {
        m,
        scale,
        tuning,
        grid,
        chunks,
        res,
        out,
    })
}

/// `repro submit`: plans the experiment, writes its batch script into a
/// new run directory, and submits it with `sbatch` (the job's id into
/// `job.json`); with `--array N`, first a job array of N chunks that the
/// job waits for. With `--dry-run`, prints the scripts.
pub(crate) fn submit(args: &SubmitArgs) -> Result<()> {
    if let Some(dir) = &args.resume {
        return resubmit(dir, args.dry_run);
    }
    let mut sub = plan_submission(args)?;
    check_script_values(args, &sub.out)?;
    if args.out.is_none() && !args.dry_run {
        // made with mkdir: two submissions in one second get two
        let dir = crate::experiment::project::claim_run_dir(&sub.m.name, &sub.scale)?;
        sub.out = std::fs::canonicalize(&dir).unwrap_or(dir);
    }
    let script = |res: &Resources, chunks: Option<usize>| {
        Script {
            args,
            name: &sub.m.name,
            scale: &sub.scale,
            out: &sub.out,
            res,
            chunks,
        }
        .text()
    };
    let chunks_text = match &sub.chunks {
        Some((n, r)) => Some((*n, script(r, Some(*n))?)),
        None => None,
    };
    let text = script(&sub.res, None)?;
    if args.dry_run {
        if let Some((_, c)) = &chunks_text {
            print!(
                "{c}\n# then, once every chunk has ended (sbatch --dependency=afterany:<the \
                 array's job id>):\n"
            );
        }
        print!("{text}");
        return Ok(());
    }
    let (id, array) = write_and_submit(args, &sub, &text, chunks_text.as_ref())?;
    let (m, out, scale) = (&sub.m, &sub.out, &sub.scale);
    if let Some((a, n)) = &array {
        println!(
            "submitted job array {a}: {} runs of `{}` at scale `{scale}` in {n} chunks, into {}",
            sub.shared().len(),
            m.name,
            out.join(Entry::Chunks.name()).display()
        );
        println!(
            "submitted job {id}: after the array, adopts its runs and runs the other {} into {}",
            sub.tuning.len() + sub.grid.len() - sub.shared().len(),
            out.display()
        );
    } else {
        println!(
            "submitted job {id}: {} runs of `{}` at scale `{scale}` ({} of them tuning) into {}",
            sub.tuning.len() + sub.grid.len(),
            m.name,
            sub.tuning.len(),
            out.display()
        );
    }
    watching(out, &id);
    Ok(())
}

/// Writes the scripts and provenance.json into the run directory, submits
/// the job array (where there is one) and the job after it, and records
/// both in job.json: the job's id, and the array's with its chunks.
fn write_and_submit(
    args: &SubmitArgs,
    sub: &Submission,
    text: &str,
    chunks_text: Option<&(usize, String)>,
) -> Result<(String, Option<(String, usize)>)> {
    let (m, out, scale) = (&sub.m, &sub.out, &sub.scale);
    crate::util::atomic::create_dir_all(out)?;
    let file = out.join(Entry::SubmitScript.name());
    crate::util::atomic::write(&file, text)?;
    // the directory says what it will hold before the job starts, so that
    // `repro status DIR` reads it while the job waits or after a cancel
    if crate::records::results_dir::ResultsDir::new(out)
        .provenance_or_none()
        .is_none()
    {
        crate::records::freshness::write_provenance(
            out,
            (m, &args.overrides),
            scale,
            (
                m.backend,
                &format!(
                    "{launcher}, submitted to Slurm",
                    launcher = launcher_word(args.launcher)
                ),
            ),
            &crate::records::freshness::invocation(m, scale, m.backend),
            &sub.grid,
            &[],
        )?;
    }
    let array = match chunks_text {
        Some((n, c)) => {
            crate::util::atomic::create_dir_all(&out.join(Entry::Chunks.name()))?;
            let f = out.join(Entry::ChunksScript.name());
            crate::util::atomic::write(&f, c)?;
            Some((sbatch(&f, None)?, *n))
        }
        None => None,
    };
    let after = array.as_ref().map(|(a, _)| format!("afterany:{a}"));
    let id = sbatch(&file, after.as_deref())?;
    crate::launch::slurm::record(
        out,
        &id,
        &file,
        array.as_ref().map(|(a, n)| (a.as_str(), *n)),
    )?;
    crate::util::sudo::give(out);
    Ok((id, array))
}

/// Submits `file` with `sbatch` (after `dependency`, where given): the
/// job's id.
fn sbatch(file: &Path, dependency: Option<&str>) -> Result<String> {
    let mut cmd = std::process::Command::new("sbatch");
    cmd.arg("--parsable");
    if let Some(d) = dependency {
        cmd.arg(format!("--dependency={d}"));
    }
    let o = cmd
        .arg(file)
        .output()
        .context("could not run sbatch (is this a Slurm login node?)")?;
    if !o.status.success() {
        bail!(
            "sbatch refused {}: {}",
            file.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let said = String::from_utf8_lossy(&o.stdout);
    Ok(said.trim().split(';').next().unwrap_or("").to_string())
}

/// Tells how to watch and end job `id` writing `out`.
fn watching(out: &Path, id: &str) {
    println!(
        "watch it with `repro status {d}` (or `squeue -j {id}`), end it with `repro cancel {d}`; \
         its log: {}, its id: {}",
        out.join(format!("slurm-{id}.out")).display(),
        out.join(Entry::Job.name()).display(),
        d = out.display(),
    );
}

/// `repro submit --resume DIR`: submits DIR's script again, unless its
/// job is still queued or running. The job's `repro run --resume` keeps
/// the runs DIR recorded (and its chunks') and runs the rest.
fn resubmit(dir: &Path, dry_run: bool) -> Result<()> {
    let file = dir.join(Entry::SubmitScript.name());
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "{} has no readable {}: `repro submit EXPERIMENT --out {}` makes one",
            dir.display(),
            Entry::SubmitScript.name(),
            dir.display()
        )
    })?;
    if dry_run {
        print!("{text}");
        return Ok(());
    }
    if let Some(j) = crate::launch::slurm::state(dir)
        && !j.failed()
        && j.state != "COMPLETED"
    {
        bail!(
            "job {} of {} is {}: wait for it, or end it with `repro cancel {}` first",
            j.id,
            dir.display(),
            j.state,
            dir.display()
        );
    }
    let id = sbatch(&file, None)?;
    crate::launch::slurm::record(dir, &id, &file, None)?;
    crate::util::sudo::give(dir);
    println!(
        "submitted job {id}: {} again, into {} (the runs recorded there are kept)",
        file.display(),
        dir.display()
    );
    watching(dir, &id);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that reach a script: `--time` only in Slurm's formats,
    /// `--partition` only names, nothing with a line break.
    #[test]
    fn values_for_a_script_are_refused_unless_plain() {
        for t in ["90", "90:30", "12:00:00", "2-00", "2-12:30", "2-12:30:00"] {
            assert_eq!(slurm_time_arg(t).unwrap(), t);
        }
        for t in [
            "01:00:00\ntouch pwned",
            "1:2:3:4",
            "$(touch pwned)",
            "",
            "1-",
            "-1",
            "12:00:00 #",
        ] {
            let e = slurm_time_arg(t).unwrap_err().to_string();
            assert!(e.contains("is not a Slurm time"), "{t}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        partition_arg("debug").unwrap();
        partition_arg("gpu,gpu-long").unwrap();
        for p in ["debug\ntouch pwned #", "a b", "x;y", "'q'", "", "a,,b"] {
            assert!(partition_arg(p).is_err(), "{p}");
        }
        assert!(script_value("--out", "/tmp/a\nb").is_err());
        assert!(script_value("--out", "/tmp/\u{202e}x").is_err());
        script_value("--out", "/tmp/it's $(here)").unwrap();
    }

    #[test]
    fn times_and_words_read_as_slurm_and_the_shell_expect() {
        assert_eq!(slurm_time(3_600 + 61), "0-01:01:01");
        assert_eq!(slurm_time(2 * 86_400 + 5), "2-00:00:05");
        assert_eq!(quoted("grid.seed=[0,1]"), "'grid.seed=[0,1]'");
        assert_eq!(quoted("params.lr=0.05"), "params.lr=0.05");
        assert_eq!(quoted("it's"), r"'it'\''s'");
    }
}

/// Options of `repro cancel`.
#[derive(Debug, Args)]
pub(crate) struct CancelArgs {
    /// The run directory `repro submit` made (it holds job.json).
    pub run: PathBuf,
}

/// `repro cancel`: ends the run directory's Slurm job, and its job array
/// where it has one (`scancel`). The runs they finished stay; `repro
/// submit --resume DIR` runs the rest.
pub(crate) fn cancel(args: &CancelArgs) -> Result<()> {
    let id = crate::launch::slurm::cancel(&args.run)?;
    println!(
        "cancelled job {id}; the runs it finished stay in {} (`repro submit --resume {}` runs the rest)",
        args.run.display(),
        args.run.display()
    );
    Ok(())
}
