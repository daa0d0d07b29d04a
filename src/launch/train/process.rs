//! The ranks' processes: spawned in a group of their own that dies with
//! the driver, waited on with the run's timeout, ended by signals, and their
//! logs read back.

use super::*;

/// TERM to the process group, then KILL if any of it is still there after
/// a grace period of 3 s, polled every 50 ms: a group that is gone ends
/// the wait. (`kill(1)`, not `libc::kill`: the driver keeps its `unsafe`
/// to the blocks ARCHITECTURE.md lists.)
pub(super) fn terminate_group(pgid: u32) {
    let group = format!("-{pgid}");
    let signal = |sig: &str| {
        Command::new("kill")
            .args([sig, "--", &group])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !signal("-TERM") {
        return;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < deadline {
        if !signal("-0") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    signal("-KILL");
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
            terminate_group(child.id());
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
