//! The ranks' processes: spawned in a group of their own that dies with
//! the driver, waited on with the run's timeout, ended by signals, and their
//! logs read back.

use super::*;

/// How a job's process group ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// It was gone before the TERM.
    Gone,
    /// TERM ended it within the grace period.
    Term,
    /// It outlived the grace period: KILL.
    Kill,
}

/// The grace period between TERM and KILL.
const GRACE: Duration = Duration::from_secs(3);

/// TERM to the process group led by `leader`, then KILL if any of it is
/// still there after [`GRACE`], polled every 50 ms: the wait ends as soon
/// as the group is gone (the leader reaped as it ends, so a dead leader
/// does not hold it). `kill(1)`, not `libc::kill`: the driver keeps its
/// `unsafe` to the blocks ARCHITECTURE.md lists.
pub(super) fn terminate_group(leader: &mut std::process::Child) -> Ended {
    let group = format!("-{}", leader.id());
    let signal = |sig: &str| {
        Command::new("kill")
            .args([sig, "--", &group])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !signal("-TERM") {
        return Ended::Gone;
    }
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        let _ = leader.try_wait();
        if !signal("-0") {
            return Ended::Term;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal("-KILL");
    Ended::Kill
}

/// Starts the job in its own process group, its stdout discarded and its
/// stderr (mpirun's and the ranks') into `stderr_path`.
pub(super) fn spawn(launch: &Launch, stderr_path: &Path) -> Result<std::process::Child> {
    let stderr_file = crate::util::atomic::create_new(stderr_path)?;
    let mut cmd = Command::new(&launch.argv[0]);
    cmd.args(&launch.argv[1..])
        .envs(launch.env.iter().cloned())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr_file))
        .process_group(0);
    die_with_parent(&mut cmd);
    cmd.spawn().with_context(|| {
        format!(
            "could not start `{}`; install OpenMPI (ci/setup.sh does), or Slurm's srun",
            launch.argv[0]
        )
    })
}

/// Makes `cmd`'s process get SIGTERM when the driver dies, even by
/// SIGKILL: mpirun then stops its ranks, and `repro-train --in-process`
/// stops its threads. (Linux's parent-death signal; it fires when the
/// spawning thread ends, which waits for the job.)
#[allow(unsafe_code)]
pub(super) fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: between fork and exec only prctl and getppid run, both
    // async-signal-safe, touching no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // the driver died before prctl took effect: stop now
            if libc::getppid() == 1 {
                return Err(std::io::Error::other("the driver is gone"));
            }
            Ok(())
        });
    }
}

/// Waits for the job, reporting rank 0's logged steps about once a second;
/// terminates its process group on Ctrl-C / SIGTERM or past `timeout_s`.
pub(super) fn wait(
    child: &mut std::process::Child,
    run: &PlannedRun,
    timeout_s: u64,
    dir: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<std::process::ExitStatus> {
    // a timeout past what the clock can hold is no timeout (it once
    // overflowed `Instant + Duration` and panicked)
    let deadline = Instant::now().checked_add(Duration::from_secs(timeout_s));
    let mut polled = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if polled.elapsed() >= Duration::from_secs(1) {
            polled = Instant::now();
            progress(crate::util::progress::logged_steps(
                &dir.join("rank-0.jsonl"),
            ));
        }
        let stop = if crate::util::signals::interrupted() {
            Some(format!(
                "run {} was interrupted and its job terminated",
                run.id
            ))
        } else if deadline.is_some_and(|d| Instant::now() > d) {
            Some(format!(
                "run {} exceeded its timeout of {timeout_s} s and was terminated",
                run.id
            ))
        } else {
            None
        };
        if let Some(why) = stop {
            terminate_group(child);
            let _ = child.wait();
            bail!(why);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The ranks' logs after the job. A rank that diverged records it in its
/// log and stops the job (exit 4); the others are killed wherever they
/// are, their logs possibly empty or missing. Otherwise a missing log, or
/// a job that did not succeed, is `failed(why)`.
pub(super) fn rank_logs(
    dir: &Path,
    workers: usize,
    succeeded: bool,
    failed: impl Fn(Option<anyhow::Error>) -> anyhow::Error,
) -> Result<Vec<repro_runlog::Log>> {
    let logs = (0..workers)
        .map(|r| {
            let path = dir.join(format!("rank-{r}.jsonl"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("rank {r} left no log at {}", path.display()))?;
            read_log(text.as_bytes())
                .with_context(|| format!("rank {r}'s log {} is unreadable", path.display()))
        })
        .collect::<Vec<Result<_>>>();
    let diverged = RunStatus::of_logs(logs.iter().flatten()) == RunStatus::Diverged;
    let mut readable = Vec::new();
    for log in logs {
        match log {
            Ok(l) => readable.push(l),
            Err(_) if diverged => {}
            Err(e) => return Err(failed(Some(e))),
        }
    }
    if !succeeded && !diverged {
        return Err(failed(None));
    }
    Ok(readable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    fn group(script: &str) -> std::process::Child {
        Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .unwrap()
    }

    /// A group that ends on TERM is ended by it, its leader reaped; one
    /// that ignores TERM (its children too) is killed after the grace
    /// period; a group already gone is said so.
    #[test]
    fn a_group_ends_by_term_or_else_by_kill() {
        use std::os::unix::process::ExitStatusExt;
        let mut polite = group("sleep 30 & wait");
        assert_eq!(terminate_group(&mut polite), Ended::Term);
        let status = polite.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");

        let mut stubborn = group("trap '' TERM; while :; do sleep 0.1; done");
        // the trap is set before the TERM arrives
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(terminate_group(&mut stubborn), Ended::Kill);
        let status = stubborn.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");

        let mut gone = group("exit 0");
        gone.wait().unwrap();
        assert_eq!(terminate_group(&mut gone), Ended::Gone);
    }
}
