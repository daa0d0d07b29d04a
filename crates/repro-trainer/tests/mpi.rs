//! The MPI transport with real ranks under `mpirun` (OpenMPI, installed by
//! `ci/setup.sh`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `repro-mpi-check` on `ranks` ranks; kills it if it hangs.
fn mpirun(ranks: usize, panic_rank: Option<usize>) -> (Option<i32>, String) {
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        &ranks.to_string(),
    ])
    .arg(env!("CARGO_BIN_EXE_repro-mpi-check"))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if let Some(r) = panic_rank {
        cmd.env("REPRO_MPI_CHECK_PANIC_RANK", r.to_string());
    }
    let mut child = cmd
        .spawn()
        .expect("mpirun must be installed (ci/setup.sh installs OpenMPI)");
    // a hang guard, not a timing assertion: a deadlocked job never finishes
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let out = child.wait_with_output().expect("output");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return (status.code(), text);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("mpirun did not finish within 120 s: the job hung");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ranks_exchange_moniqua_frames_and_run_collectives() {
    for ranks in [2, 4] {
        let (code, out) = mpirun(ranks, None);
        assert_eq!(code, Some(0), "{out}");
        assert_eq!(out.matches(": ok (").count(), ranks, "{out}");
    }
}

#[test]
fn a_panicking_rank_aborts_the_job_instead_of_hanging() {
    let (code, out) = mpirun(3, Some(1));
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("injected panic on rank 1"), "{out}");
    assert!(out.contains("aborting the MPI job"), "{out}");
}
