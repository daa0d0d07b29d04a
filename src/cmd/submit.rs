//! `repro submit`: an experiment as a Slurm batch job. The job runs
//! `repro run ... --launcher srun --resume` into a run directory made
//! now; the script (`submit.sbatch`) and the job's id (`job.json`) are
//! kept there, so the job can be watched, resumed or resubmitted.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::records::results_dir::Entry;
use crate::spec::manifest::{self, Backend};
use crate::spec::plan::{self, Params};

/// Options of `repro submit`.
#[derive(Debug, Args)]
pub(crate) struct SubmitArgs {
    /// Experiment name (see `repro list`) or path to a manifest.
    #[arg(default_value = crate::spec::project::DEFAULT_EXPERIMENT)]
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
    /// The job's time limit, HH:MM:SS (default: every trainer run's
    /// `timeout_s` added up, plus a tenth and 5 minutes).
    #[arg(long, value_name = "HH:MM:SS")]
    pub time: Option<String>,
    /// Nodes to spread the tasks over (default: Slurm's choice).
    #[arg(long)]
    pub nodes: Option<usize>,
    /// GPUs per task (one rank a task).
    #[arg(long, value_name = "G")]
    pub gpus_per_task: Option<usize>,
    /// The results directory (default: a new run directory,
    /// runs/<experiment>/<scale>/<time>/).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Write and print the script, submit nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// What the job needs, from the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resources {
    /// Tasks: the most ranks one run starts (one task a rank).
    pub tasks: usize,
    /// The time limit, seconds.
    pub seconds: u64,
}

/// The resources of `runs`: the most workers of an MPI run, and the time
/// every trainer run's timeout allows, with a margin (`None` without a
/// trainer run).
pub(crate) fn resources(runs: &[plan::PlannedRun]) -> Option<Resources> {
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
    Some(Resources {
        tasks,
        seconds: total + total / 10 + 300,
    })
}

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

/// The batch script for `args`' experiment into `out`, with `res`.
fn script(
    args: &SubmitArgs,
    name: &str,
    scale: &str,
    out: &Path,
    time: &str,
    tasks: usize,
) -> Result<String> {
    let repro = std::env::current_exe().context("could not locate the repro executable")?;
    let cwd = std::env::current_dir().context("no working directory")?;
    let root = std::fs::canonicalize(cwd.join(crate::spec::project::root().unwrap_or_default()))
        .unwrap_or(cwd);
    let mut s = String::from("#!/bin/bash\n");
    let mut sb = |line: String| s.push_str(&format!("#SBATCH {line}\n"));
    sb(format!("--job-name=repro-{name}-{scale}"));
    sb(format!("--ntasks={tasks}"));
    if let Some(n) = args.nodes {
        sb(format!("--nodes={n}"));
    }
    if let Some(g) = args.gpus_per_task {
        sb(format!("--gpus-per-task={g}"));
    }
    if let Some(p) = &args.partition {
        sb(format!("--partition={}", quoted(p)));
    }
    sb(format!("--time={time}"));
    sb(format!(
        "--output={}",
        quoted(&out.join("slurm-%j.out").display().to_string())
    ));
    sb(format!("--chdir={}", quoted(&root.display().to_string())));
    // the environment repro needs (libtorch, MPI, the trainer) is the
    // submitting shell's
    sb("--export=ALL".into());
    s.push_str(&format!(
        "# {tasks} tasks: the most ranks one run starts; the time: every run's timeout_s \
         added up, plus a tenth and 5 minutes, unless --time set it\nset -euo pipefail\n"
    ));
    let mut run = vec![
        repro.display().to_string(),
        "run".into(),
        args.experiment.clone(),
        "--scale".into(),
        scale.to_string(),
    ];
    for o in &args.overrides {
        run.extend(["--set".into(), o.clone()]);
    }
    run.extend([
        "--out".into(),
        out.display().to_string(),
        "--launcher".into(),
        "srun".into(),
        "--resume".into(),
    ]);
    let line: Vec<String> = run.iter().map(|w| quoted(w)).collect();
    s.push_str(&format!("exec {}\n", line.join(" ")));
    Ok(s)
}

/// `repro submit`: plans the experiment, writes its batch script into a
/// new run directory, and submits it with `sbatch` (the job's id into
/// `job.json`); with `--dry-run`, prints the script.
pub(crate) fn submit(args: &SubmitArgs) -> Result<()> {
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
    let runs = plan::expand(&m, &scale, m.backend)?;
    let res = resources(&runs).context("the plan has no trainer run to submit")?;
    let time = match &args.time {
        Some(t) => t.clone(),
        None => slurm_time(res.seconds),
    };
    let out = match &args.out {
        Some(o) => o.clone(),
        None => crate::spec::project::new_run_dir(&m.name, &scale),
    };
    let out = if out.is_absolute() {
        out
    } else {
        std::env::current_dir()?.join(out)
    };
    let text = script(args, &m.name, &scale, &out, &time, res.tasks)?;
    if args.dry_run {
        print!("{text}");
        return Ok(());
    }
    crate::util::atomic::create_dir_all(&out)?;
    let file = out.join(Entry::SubmitScript.name());
    crate::util::atomic::write(&file, &text)?;
    let o = std::process::Command::new("sbatch")
        .arg("--parsable")
        .arg(&file)
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
    let id = said.trim().split(';').next().unwrap_or("").to_string();
    crate::launch::slurm::record(&out, &id, &file)?;
    crate::util::sudo::give(&out);
    println!(
        "submitted job {id}: {} runs of `{}` at scale `{scale}` into {}",
        runs.len(),
        m.name,
        out.display()
    );
    println!(
        "watch it with `repro status {d}` (or `squeue -j {id}`), end it with `repro cancel {d}`; \
         its log: {}, its id: {}",
        out.join(format!("slurm-{id}.out")).display(),
        out.join(Entry::Job.name()).display(),
        d = out.display(),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

/// `repro cancel`: ends the run directory's Slurm job (`scancel`). The
/// runs it finished stay; `repro submit ... --out DIR` resumes the rest.
pub(crate) fn cancel(args: &CancelArgs) -> Result<()> {
    let id = crate::launch::slurm::cancel(&args.run)?;
    println!(
        "cancelled job {id}; the runs it finished stay in {} (`repro submit ... --out {}` resumes)",
        args.run.display(),
        args.run.display()
    );
    Ok(())
}
