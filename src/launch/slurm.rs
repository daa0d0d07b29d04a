//! A run directory's Slurm job (`repro submit`): its id in `job.json`, its
//! state as Slurm tells it, and cancelling it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The file in a run directory that names its job
/// (`records::results_dir::Entry::Job`).
pub(crate) const JOB: &str = "job.json";

/// Records job `id`, submitted with `script`, in `dir/job.json`.
pub(crate) fn record(dir: &Path, id: &str, script: &Path) -> Result<()> {
    crate::util::atomic::write(
        &dir.join(JOB),
        serde_json::to_string_pretty(&serde_json::json!({
            "job_id": id,
            "script": script.display().to_string(),
            "submitted_unix_s": crate::util::time::now_unix_s(),
        }))?,
    )
}

/// The id of the job `dir/job.json` names, where there is one.
pub(crate) fn job_id(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(JOB)).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    json["job_id"].as_str().map(str::to_string)
}

/// A job's state as Slurm says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobState {
    pub id: String,
    /// PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ...; or
    /// `ENDED` where Slurm no longer knows the job.
    pub state: String,
    /// The job's log (`slurm-<id>.out` in the run directory).
    pub log: PathBuf,
}

impl JobState {
    /// Whether the job ended other than by completing.
    pub(crate) fn failed(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING" | "RUNNING" | "COMPLETING" | "CONFIGURING" | "COMPLETED" | "ENDED"
        )
    }
}

/// The first word a Slurm command printed, if it ran and printed one.
fn said(program: &str, args: &[&str]) -> Option<String> {
    let o = Command::new(program).args(args).output().ok()?;
    if !o.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.split_whitespace().next().map(str::to_string)
}

/// `scontrol show job`'s `JobState=` of a job Slurm still holds.
fn scontrol_state(id: &str) -> Option<String> {
    let o = Command::new("scontrol")
        .args(["show", "job", id, "-o"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    parse_job_state(&text)
}

fn parse_job_state(scontrol: &str) -> Option<String> {
    scontrol
        .split_whitespace()
        .find_map(|w| w.strip_prefix("JobState="))
        .map(str::to_string)
}

/// The state of `dir`'s job: the queue's (squeue), else the controller's
/// (scontrol, for a while after the job ends), else accounting's (sacct),
/// else `ENDED`. None where `dir` has no job.
pub(crate) fn state(dir: &Path) -> Option<JobState> {
    let id = job_id(dir)?;
    let state = said("squeue", &["-h", "-j", &id, "-o", "%T"])
        .or_else(|| scontrol_state(&id))
        .or_else(|| said("sacct", &["-n", "-X", "-j", &id, "-o", "State"]))
        .unwrap_or_else(|| "ENDED".into());
    Some(JobState {
        log: dir.join(format!("slurm-{id}.out")),
        id,
        state,
    })
}

/// Cancels `dir`'s job (`scancel`): its id.
pub(crate) fn cancel(dir: &Path) -> Result<String> {
    let Some(id) = job_id(dir) else {
        bail!(
            "{} has no job.json: `repro submit` made no job for it",
            dir.display()
        );
    };
    let o = Command::new("scancel")
        .arg(&id)
        .output()
        .context("could not run scancel")?;
    if !o.status.success() {
        bail!(
            "scancel {id}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_is_read_from_scontrol() {
        let line = "JobId=7 JobName=repro-x UserId=root(0) JobState=TIMEOUT Reason=TimeLimit";
        assert_eq!(parse_job_state(line).as_deref(), Some("TIMEOUT"));
        assert_eq!(
            parse_job_state("slurm_load_jobs error: Invalid job id"),
            None
        );
        let s = |state: &str| JobState {
            id: "7".into(),
            state: state.into(),
            log: PathBuf::new(),
        };
        assert!(s("TIMEOUT").failed() && s("CANCELLED").failed() && !s("COMPLETED").failed());
    }
}
