//! A run directory's Slurm job (`repro submit`): its id in `job.json`, its
//! state as Slurm tells it, and cancelling it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The file in a run directory that names its job
/// (`records::results_dir::Entry::Job`).
pub(crate) const JOB: &str = "job.json";

/// Records job `id`, submitted with `script`, in `dir/job.json`, with
/// the job array of chunks it waits for (its id and size) where there is
/// one; the jobs submitted into `dir` before it stay listed, oldest first.
pub(crate) fn record(
    dir: &Path,
    id: &str,
    script: &Path,
    array: Option<(&str, usize)>,
) -> Result<()> {
    let mut earlier = std::fs::read_to_string(dir.join(JOB))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map(|j| {
            let mut ids: Vec<serde_json::Value> =
                j["earlier_jobs"].as_array().cloned().unwrap_or_default();
            ids.extend(j.get("job_id").cloned());
            ids
        })
        .unwrap_or_default();
    earlier.retain(|v| v.as_str().is_some_and(|s| s != id));
    let mut job = serde_json::json!({
        "job_id": id,
        "script": script.display().to_string(),
        "submitted_unix_s": crate::util::time::now_unix_s(),
        "earlier_jobs": earlier,
    });
    if let Some((a, n)) = array {
        job["array_job_id"] = a.into();
        job["chunks"] = n.into();
    }
    crate::util::atomic::write(&dir.join(JOB), serde_json::to_string_pretty(&job)?)
}

/// The job array `dir/job.json` names (its id and chunks), where there is
/// one.
pub(crate) fn array(dir: &Path) -> Option<(String, usize)> {
    let text = std::fs::read_to_string(dir.join(JOB)).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    Some((
        json["array_job_id"].as_str()?.to_string(),
        json["chunks"].as_u64()? as usize,
    ))
}

/// `dir`'s job array: its id, its chunks, and the states of the chunks
/// Slurm still queues, as `RUNNING 2, PENDING 1` (squeue), or `ENDED`.
/// `None` where `dir` has no job array.
pub(crate) fn array_state(dir: &Path) -> Option<(String, usize, String)> {
    let (id, n) = array(dir)?;
    let text = Command::new("squeue")
        .args(["-h", "-r", "-j", &id, "-o", "%T"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let counted = count_states(&text);
    let states = if counted.is_empty() {
        "ENDED".to_string()
    } else {
        counted
    };
    Some((id, n, states))
}

/// One state a line (squeue's `%T`) as `RUNNING 2, PENDING 1`, in the
/// order first seen.
fn count_states(text: &str) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for w in text.split_whitespace() {
        match counts.iter_mut().find(|(s, _)| s == w) {
            Some((_, n)) => *n += 1,
            None => counts.push((w.to_string(), 1)),
        }
    }
    counts
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The file in which job `id`'s script records `repro run`'s exit status
/// (`slurm-<id>.exit`, beside its log `slurm-<id>.out`). A job cancelled,
/// timed out or lost with its node writes none.
pub(crate) fn exit_file(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("slurm-{id}.exit"))
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
    /// PENDING, RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ...; where
    /// Slurm no longer knows the job (no accounting), COMPLETED or FAILED
    /// from the exit status its script recorded, else `ENDED`.
    pub state: String,
    /// Where the state was read: `squeue`, `scontrol`, `sacct`, or the
    /// exit file `slurm-<id>.exit`; `nothing` for `ENDED`.
    pub from: String,
    /// The job's log (`slurm-<id>.out` in the run directory).
    pub log: PathBuf,
}

impl JobState {
    /// Whether the job ended other than by completing.
    pub(crate) fn failed(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING" | "RUNNING" | "COMPLETING" | "CONFIGURING" | "COMPLETED"
        )
    }

    /// Where the state was read, where Slurm no longer knows the job.
    pub(crate) fn note(&self) -> Option<String> {
        match self.from.as_str() {
            "squeue" | "scontrol" | "sacct" => None,
            "nothing" => Some(
                "Slurm no longer knows the job, and its script recorded no exit: cancelled, \
                 timed out or lost with its node"
                    .into(),
            ),
            file => Some(format!(
                "Slurm no longer knows the job; its script recorded this in {file}"
            )),
        }
    }
}

/// The state from what each source said, first to last: the queue, the
/// controller, accounting, then the exit status the script recorded.
fn decide(
    squeue: Option<String>,
    scontrol: Option<String>,
    sacct: Option<String>,
    exit: Option<(String, i32)>,
) -> (String, String) {
    let slurm = [("squeue", squeue), ("scontrol", scontrol), ("sacct", sacct)];
    if let Some((from, state)) = slurm
        .into_iter()
        .find_map(|(from, s)| s.map(|s| (from.to_string(), s)))
    {
        return (state, from);
    }
    match exit {
        Some((file, 0)) => ("COMPLETED".into(), file),
        Some((file, _)) => ("FAILED".into(), file),
        None => ("ENDED".into(), "nothing".into()),
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
    let squeue = said("squeue", &["-h", "-j", &id, "-o", "%T"]);
    let scontrol = squeue.is_none().then(|| scontrol_state(&id)).flatten();
    let sacct = (squeue.is_none() && scontrol.is_none())
        .then(|| said("sacct", &["-n", "-X", "-j", &id, "-o", "State"]))
        .flatten();
    let file = exit_file(dir, &id);
    let exit = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .map(|rc| (file.file_name().unwrap().to_string_lossy().into_owned(), rc));
    let (state, from) = decide(squeue, scontrol, sacct, exit);
    Some(JobState {
        log: dir.join(format!("slurm-{id}.out")),
        id,
        state,
        from,
    })
}

/// Cancels `dir`'s job, and the job array it waits for (`scancel`): the
/// job's id.
pub(crate) fn cancel(dir: &Path) -> Result<String> {
    let Some(id) = job_id(dir) else {
        bail!(
            "{} has no job.json: `repro submit` made no job for it",
            dir.display()
        );
    };
    // the array first, so that the job waiting for it ends with it; an
    // array that already ended is no error
    if let Some((a, _)) = array(dir) {
        let _ = Command::new("scancel").arg(&a).output();
    }
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
            from: "squeue".into(),
            log: PathBuf::new(),
        };
        assert!(s("TIMEOUT").failed() && s("CANCELLED").failed() && !s("COMPLETED").failed());
        assert!(s("ENDED").failed() && !s("RUNNING").failed());
    }

    #[test]
    fn array_states_are_counted_in_the_order_seen() {
        assert_eq!(
            count_states("RUNNING\nPENDING\nRUNNING\n"),
            "RUNNING 2, PENDING 1"
        );
        assert_eq!(count_states(""), "");
    }

    #[test]
    fn a_job_slurm_forgot_is_judged_by_the_exit_its_script_recorded() {
        let some = |s: &str| Some(s.to_string());
        let exit = |rc| Some(("slurm-7.exit".to_string(), rc));
        // Slurm's word first, the queue's before accounting's
        let (state, from) = decide(some("RUNNING"), None, some("COMPLETED"), exit(0));
        assert_eq!((state.as_str(), from.as_str()), ("RUNNING", "squeue"));
        let (state, from) = decide(None, None, some("TIMEOUT"), exit(0));
        assert_eq!((state.as_str(), from.as_str()), ("TIMEOUT", "sacct"));
        // no accounting: the exit status the script wrote
        let (state, from) = decide(None, None, None, exit(0));
        assert_eq!(
            (state.as_str(), from.as_str()),
            ("COMPLETED", "slurm-7.exit")
        );
        assert_eq!(decide(None, None, None, exit(2)).0, "FAILED");
        let (state, from) = decide(None, None, None, None);
        assert_eq!((state.as_str(), from.as_str()), ("ENDED", "nothing"));
        let j = JobState {
            id: "7".into(),
            state,
            from,
            log: PathBuf::new(),
        };
        assert!(j.failed() && j.note().unwrap().contains("recorded no exit"));
    }
}
