//! The MPI transport with real ranks under `mpirun` (OpenMPI, installed by
//! `ci/setup.sh`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `repro-mpi-check` on `ranks` ranks; kills it if it hangs.
fn mpirun(ranks: usize, panic_rank: Option<usize>) -> (Option<i32>, String) {
    mpirun_with(ranks, panic_rank, &[])
}

/// [`mpirun`] with arguments for `repro-mpi-check`.
fn mpirun_with(ranks: usize, panic_rank: Option<usize>, args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = Command::new("mpirun");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-np",
        &ranks.to_string(),
    ])
    .arg(env!("CARGO_BIN_EXE_repro-mpi-check"))
    .args(args)
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

/// Ranks map to GPUs by their local rank, which mpirun's variable gives
/// and MPI's count of the ranks on the node confirms: 4 ranks on a node of
/// 2 GPUs (a stand-in count; the mapping needs none) go to 0, 1, 0, 1.
#[test]
fn ranks_map_to_gpus_by_local_rank() {
    let (code, out) = mpirun_with(4, None, &["--gpus", "2"]);
    assert_eq!(code, Some(0), "{out}");
    for (local, gpu) in [(0, 0), (1, 1), (2, 0), (3, 1)] {
        assert!(
            out.contains(&format!(
                "local rank {local} (OMPI_COMM_WORLD_LOCAL_RANK) -> cuda:{gpu}"
            )),
            "{out}"
        );
    }
}

#[test]
fn a_panicking_rank_aborts_the_job_instead_of_hanging() {
    let (code, out) = mpirun(3, Some(1));
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("injected panic on rank 1"), "{out}");
    assert!(out.contains("aborting the MPI job"), "{out}");
}

/// Runs `repro-train` with `config` (JSON) in a fresh directory: `ranks`
/// MPI ranks under mpirun, or `--in-process ranks`; returns its output and
/// the logs that were written and parse.
fn launch(
    ranks: usize,
    name: &str,
    config: &str,
    in_process: bool,
) -> (std::process::Output, Vec<repro_runlog::Log>) {
    let mode = if in_process { "local" } else { "train" };
    let dir = std::env::temp_dir().join(format!("repro-{mode}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("run.json");
    std::fs::write(&cfg, config).unwrap();
    let mut cmd = if in_process {
        let mut c = Command::new(env!("CARGO_BIN_EXE_repro-train"));
        c.args(["--in-process", &ranks.to_string()]);
        c
    } else {
        let mut c = Command::new("mpirun");
        c.args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            &ranks.to_string(),
        ])
        .arg(env!("CARGO_BIN_EXE_repro-train"));
        c
    };
    let out = cmd
        .arg("--config")
        .arg(&cfg)
        .arg("--log-dir")
        .arg(&dir)
        .output()
        .expect("start repro-train");
    let logs = (0..ranks)
        .filter_map(|r| {
            let text = std::fs::read_to_string(dir.join(format!("rank-{r}.jsonl"))).ok()?;
            repro_runlog::read_log(text.as_bytes()).ok()
        })
        .collect();
    (out, logs)
}

/// Runs `repro-train` on `ranks` MPI ranks with `config`; every rank's log.
fn train(ranks: usize, name: &str, config: &str) -> Vec<repro_runlog::Log> {
    let (out, logs) = launch(ranks, name, config, false);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(logs.len(), ranks, "a rank left no readable log");
    logs
}

/// Runs `repro-train --in-process ranks` with `config`; returns the exit
/// code, stderr and the logs that were written.
fn train_in_process(
    ranks: usize,
    name: &str,
    config: &str,
) -> (Option<i32>, String, Vec<repro_runlog::Log>) {
    let (out, logs) = launch(ranks, name, config, true);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        logs,
    )
}

/// The in-process backend runs the same trainer as MPI ranks: D-PSGD on 3
/// workers gives the same training losses, step for step, as over mpirun,
/// and the same bytes; only the clock differs.
#[test]
fn in_process_workers_train_exactly_like_mpi_ranks() {
    let config = r#"{"run_id": "same", "model": "lenet", "dataset": "synthetic", "algorithm": "d-psgd",
        "iterations": 30, "eval_every": 30, "eval_samples": 100, "batch": 16, "lr": 0.01,
        "synthetic_samples": 300}"#;
    let mpi = train(3, "same", config);
    let (code, stderr, local) = train_in_process(3, "same", config);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(local.len(), 3);
    for (m, l) in mpi.iter().zip(&local) {
        assert_eq!(l.header.provenance.backend, "in-process");
        assert_eq!(m.header.provenance.backend, "mpi");
        let losses = |log: &repro_runlog::Log| -> Vec<f64> {
            log.steps.iter().map(|s| s.train_loss).collect()
        };
        assert_eq!(losses(m), losses(l));
        let bytes = |log: &repro_runlog::Log| -> Vec<u64> {
            log.steps.iter().map(|s| s.bytes_sent).collect()
        };
        assert_eq!(bytes(m), bytes(l));
        assert_eq!(
            m.evals.last().unwrap().avg_test_accuracy,
            l.evals.last().unwrap().avg_test_accuracy
        );
        // the process's resident set is not one worker's
        assert!(l.end.as_ref().unwrap().peak_rss_bytes.is_none());
    }
}

/// `theta: theorem3-step` on the trainer, as in the simulator: a full-precision
/// warm-up, then every rank sets the same theta from Theorem 3's
/// expression on the largest step of all ranks, logs it, and sends
/// b-bit frames from then on. An asynchronous algorithm has no warm-up
/// and refuses it.
#[test]
fn theorem3_step_theta_is_picked_after_a_warm_up_on_every_rank() {
    let config = r#"{"run_id": "auto", "model": "lenet", "dataset": "synthetic", "algorithm": "moniqua",
        "bits": 8, "theta": "theorem3-step", "theta_warmup": 5, "gamma": 0.5,
        "iterations": 12, "eval_every": 12, "eval_samples": 100, "batch": 16, "lr": 0.01,
        "synthetic_samples": 300}"#;
    let (code, stderr, logs) = train_in_process(3, "auto", config);
    assert_eq!(code, Some(0), "{stderr}");
    let thetas: Vec<f64> = logs
        .iter()
        .map(|l| l.end.as_ref().unwrap().theta.expect("a theta logged"))
        .collect();
    assert!(thetas.iter().all(|t| *t == thetas[0]), "{thetas:?}");
    assert!(thetas[0] > 0.0 && thetas[0] != 2.0, "{thetas:?}");
    // 32-bit frames during the warm-up, 8-bit ones after it
    let steps = &logs[0].steps;
    assert!(
        steps[0].bytes_sent > 3 * steps[11].bytes_sent,
        "{} vs {}",
        steps[0].bytes_sent,
        steps[11].bytes_sent
    );
    assert_eq!(steps[4].bytes_sent, steps[0].bytes_sent);
    let refused = config.replace("\"moniqua\"", "\"moniqua-ad-psgd\"");
    let (out, _) = launch(2, "auto-async", &refused, false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr
            .contains("`theta: theorem3-step` and `theta: theorem2` need a synchronous algorithm"),
        "{stderr}"
    );
}

/// The virtual clock charges what the modelled network would: at 1 Mbit/s
/// and 5 ms, a Moniqua step of two 8-bit LeNet frames (2 x 61,750 bytes
/// through one link) takes at least 0.988 s + 5 ms of virtual time once the
/// links are busy, far more than the run's real duration; a ring all-reduce
/// pays 2 (n - 1) latencies.
#[test]
fn in_process_time_is_the_modelled_network_s() {
    let (code, stderr, logs) = train_in_process(
        4,
        "virtual",
        r#"{"run_id": "v", "model": "lenet", "dataset": "synthetic", "algorithm": "moniqua",
            "iterations": 5, "eval_every": 0, "batch": 8, "lr": 0.01, "synthetic_samples": 200,
            "virtual_bandwidth_bps": 1e6, "latency_ms": 5}"#,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let frame = repro_codec::frame::HEADER_LEN as f64 + 61_706.0;
    let wire = 2.0 * frame * 8.0 / 1e6 + 0.005;
    let skew = compute_skew(&logs);
    for log in &logs {
        assert!(log.header.provenance.network.contains("virtual clock"));
        // past the first step, every worker waits for its neighbours' frames,
        // less the skew of the workers' computation (charged as thread CPU
        // time, which differs between threads: a worker that started its
        // exchange later waits that much less)
        for s in &log.steps[1..] {
            let k = s.iteration as usize;
            assert!(s.comm_s >= wire - skew[k] - 1e-9, "{s:?}");
            assert!(s.comm_s < wire + 0.5, "{s:?}");
        }
        // (the first step pays at least one frame and the latency)
        let end = log.end.as_ref().unwrap();
        assert!(end.wall_s >= 4.0 * wire + frame * 8.0 / 1e6);
        // the loop's real time is recorded beside the virtual
        assert!(end.real_s.expect("real_s") > 0.0, "{end:?}");
        assert_eq!(log.header.provenance.device, "cpu");
    }
    let (code, stderr, logs) = train_in_process(
        4,
        "virtual-ring",
        r#"{"run_id": "v", "model": "logistic", "dataset": "synthetic", "algorithm": "allreduce",
            "iterations": 3, "eval_every": 0, "batch": 8, "lr": 0.01, "synthetic_samples": 100,
            "latency_ms": 10}"#,
    );
    assert_eq!(code, Some(0), "{stderr}");
    let skew = compute_skew(&logs);
    for log in &logs {
        for s in &log.steps {
            let k = s.iteration as usize;
            assert!(s.comm_s >= 6.0 * 0.010 - skew[k] - 1e-9, "{s:?}");
        }
    }
}

/// With `profile_phases`, every step says where its time went: the four
/// compute phases within `compute_s`, the three of communication within
/// `comm_s`; without it, no step carries phases.
#[test]
fn profiled_steps_split_their_time_into_phases() {
    let config = |profile: bool| {
        format!(
            r#"{{"run_id": "p", "model": "lenet", "dataset": "synthetic", "algorithm": "moniqua",
                "iterations": 3, "eval_every": 0, "batch": 8, "lr": 0.01, "synthetic_samples": 100,
                "bits": 2, "profile_phases": {profile}}}"#
        )
    };
    let (code, stderr, logs) = train_in_process(2, "phases", &config(true));
    assert_eq!(code, Some(0), "{stderr}");
    for log in &logs {
        for s in &log.steps {
            let p = s.phases.unwrap_or_else(|| panic!("no phases: {s:?}"));
            let all = [
                p.scatter_s,
                p.forward_backward_s,
                p.gather_s,
                p.sgd_s,
                p.encode_s,
                p.exchange_s,
                p.decode_s,
            ];
            assert!(all.iter().all(|&v| v >= 0.0), "{p:?}");
            assert!(p.forward_backward_s > 0.0, "{p:?}");
            let compute = p.scatter_s + p.forward_backward_s + p.gather_s + p.sgd_s;
            assert!(compute <= s.compute_s + 1e-9, "{p:?} {s:?}");
            assert!(
                p.encode_s + p.exchange_s + p.decode_s <= s.comm_s + 1e-9,
                "{p:?} {s:?}"
            );
        }
    }
    let (code, stderr, logs) = train_in_process(2, "no-phases", &config(false));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        logs.iter()
            .flat_map(|l| &l.steps)
            .all(|s| s.phases.is_none())
    );
}

/// Per iteration, how far apart the workers' exchanges started: the
/// spread of their clocks at the start of each step's communication
/// (`wall_s - comm_s`), plus 0.1 ms for the clock read that `wall_s`
/// adds. A frame sent by the earliest starter still arrives a latency
/// after it left, so a worker that started later waits that much less.
/// (Bounding it by the computation alone missed the work charged between
/// steps: the step record, a log flush, which a loaded machine slows.)
fn compute_skew(logs: &[repro_runlog::Log]) -> Vec<f64> {
    let n = logs.iter().map(|l| l.steps.len()).max().unwrap_or(0);
    (0..n)
        .map(|k| {
            let starts: Vec<f64> = logs
                .iter()
                .filter_map(|l| l.steps.get(k))
                .map(|s| s.wall_s - s.comm_s)
                .collect();
            let max = starts.iter().copied().fold(f64::MIN, f64::max);
            let min = starts.iter().copied().fold(f64::MAX, f64::min);
            max - min + 1e-4
        })
        .collect()
}

/// A worker that diverges stops the in-process run with exit code 4 and
/// says so in its log, and the others do not hang; the asynchronous
/// algorithms, which a virtual clock cannot time, are refused; a wrong
/// worker count is a clear error.
#[test]
fn in_process_runs_stop_cleanly() {
    let (code, _, logs) = train_in_process(
        3,
        "diverge",
        r#"{"run_id": "d", "model": "mlp", "dataset": "synthetic", "algorithm": "d-psgd",
            "iterations": 50, "eval_every": 0, "batch": 8, "lr": 1e6, "momentum": 0.9,
            "synthetic_samples": 100}"#,
    );
    assert_eq!(code, Some(4));
    assert!(logs.iter().any(|l| matches!(
        l.end.as_ref().map(|e| &e.status),
        Some(repro_runlog::Status::Diverged { .. })
    )));
    let (code, stderr, _) = train_in_process(
        4,
        "async",
        r#"{"run_id": "a", "model": "logistic", "dataset": "synthetic", "algorithm": "ad-psgd",
            "iterations": 5, "synthetic_samples": 100}"#,
    );
    assert_eq!(code, Some(1));
    assert!(stderr.contains("mpi backend"), "{stderr}");
    let (code, stderr, _) = train_in_process(
        2,
        "count",
        r#"{"run_id": "c", "workers": 3, "model": "logistic", "dataset": "synthetic",
            "iterations": 5, "synthetic_samples": 100}"#,
    );
    assert_eq!(code, Some(1));
    assert!(stderr.contains("--in-process 3"), "{stderr}");
}

/// Real training over MPI: LeNet on synthetic images, 3 ranks on a ring,
/// Moniqua at 8 bits. Every rank logs every step; the bytes it logs are its
/// frames (header + one byte per parameter, to two neighbours); it learns.
#[test]
fn moniqua_trains_lenet_over_mpi() {
    let logs = train(
        3,
        "moniqua",
        r#"{"run_id": "t", "model": "lenet", "dataset": "synthetic", "algorithm": "moniqua",
            "iterations": 60, "eval_every": 60, "eval_samples": 200, "batch": 16, "lr": 0.01,
            "synthetic_samples": 600}"#,
    );
    // LeNet on 1x28x28: 61,706 parameters
    let frame = repro_codec::frame::HEADER_LEN as u64 + 61_706;
    for (r, log) in logs.iter().enumerate() {
        assert_eq!(log.header.rank as usize, r);
        assert_eq!(log.steps.len(), 60);
        assert!(matches!(
            log.end.as_ref().unwrap().status,
            repro_runlog::Status::Completed
        ));
        assert!(
            log.steps
                .iter()
                .all(|s| s.bytes_sent == 2 * frame && s.bytes_received == 2 * frame)
        );
        assert!(log.steps.iter().all(|s| s.hash_failures == 0));
        let eval = log.evals.last().unwrap();
        assert!(eval.test_accuracy.unwrap() > 0.8, "rank {r}: {eval:?}");
        averaged_accuracy_above(r, eval, 0.8);
    }
}

/// The real Fashion-MNIST (Debian package) with D-PSGD on 2 ranks: well
/// above chance (10%) after 150 steps.
#[test]
fn dpsgd_learns_fashion_mnist_over_mpi() {
    let logs = train(
        2,
        "fmnist",
        r#"{"run_id": "f", "model": "lenet", "dataset": "fashion-mnist", "algorithm": "d-psgd",
            "iterations": 150, "eval_every": 150, "eval_samples": 1000, "batch": 32, "lr": 0.05}"#,
    );
    for log in &logs {
        let eval = log.evals.last().unwrap();
        assert!(eval.test_accuracy.unwrap() > 0.6, "{eval:?}");
        let first = log.steps[..10].iter().map(|s| s.train_loss).sum::<f64>();
        let last = log.steps[140..].iter().map(|s| s.train_loss).sum::<f64>();
        assert!(last < 0.6 * first, "{first} -> {last}");
    }
}

/// Latency injected per message (kernels without netem): every step's
/// communication takes at least that long (a lower bound only), and the
/// provenance says how latency was realized.
#[test]
fn injected_latency_delays_every_exchange() {
    let logs = train(
        2,
        "latency",
        r#"{"run_id": "l", "model": "logistic", "dataset": "synthetic", "algorithm": "moniqua",
            "iterations": 10, "eval_every": 0, "batch": 8, "lr": 0.01, "synthetic_samples": 100,
            "latency_ms": 30}"#,
    );
    for log in &logs {
        assert!(
            log.header
                .provenance
                .network
                .contains("latency injected per message")
        );
        assert_eq!(log.steps.len(), 10);
        assert!(
            log.steps.iter().all(|s| s.comm_s >= 0.030),
            "{:?}",
            log.steps
        );
    }
}

/// AD-PSGD over MPI, 4 ranks on a ring (even ranks active, odd passive),
/// with half the synchronous tests' step (at lr 0.01, momentum 0.9 and stale
/// gradients LeNet's loss spiked on this synthetic task in one of several runs):
/// the job finishes (no deadlock), every rank logs every step, the ranks
/// average (bytes both ways, models close at the end) and learn; the bytes
/// an active rank logs are whole f32 frames, one per average it started.
#[test]
fn ad_psgd_averages_asynchronously_and_learns() {
    let logs = train(
        4,
        "adpsgd",
        r#"{"run_id": "a", "model": "lenet", "dataset": "synthetic", "algorithm": "ad-psgd",
            "iterations": 100, "eval_every": 50, "eval_samples": 200, "batch": 16, "lr": 0.005,
            "synthetic_samples": 600}"#,
    );
    let frame = repro_codec::frame::HEADER_LEN as u64 + 4 * 61_706;
    for (r, log) in logs.iter().enumerate() {
        assert_eq!(log.steps.len(), 100, "rank {r}");
        let end = log.end.as_ref().unwrap();
        assert!(matches!(end.status, repro_runlog::Status::Completed));
        let sent: u64 = log.steps.iter().map(|s| s.bytes_sent).sum();
        let received: u64 = log.steps.iter().map(|s| s.bytes_received).sum();
        assert!(sent > 0 && received > 0, "rank {r} never averaged");
        assert_eq!(sent % frame, 0, "rank {r}: {sent} is not whole frames");
        if r % 2 == 0 {
            // an active rank starts at most one average per step
            assert!(sent / frame <= 100, "rank {r}: {} averages", sent / frame);
        }
        // the transport counted the averages and the final all-reduce too
        assert!(end.transport_bytes_sent.unwrap() > sent);
        // the intermediate evaluation is local (no collective), the last one
        // also evaluates the averaged model
        assert_eq!(log.evals.len(), 2);
        assert!(log.evals[0].avg_test_accuracy.is_none());
        let last = log.evals.last().unwrap();
        averaged_accuracy_above(r, last, 0.8);
        assert!(last.consensus_distance.unwrap() < 1.0, "{last:?}");
    }
}

/// Moniqua on AD-PSGD: 8-bit frames instead of f32, recovery verified by the
/// hash (no failures with theta 2), and it still learns.
#[test]
fn moniqua_on_ad_psgd_sends_eight_bit_frames_and_learns() {
    let logs = train(
        2,
        "moniqua-adpsgd",
        r#"{"run_id": "m", "model": "lenet", "dataset": "synthetic",
            "algorithm": "moniqua-ad-psgd", "bits": 8, "theta": 2.0,
            "iterations": 100, "eval_every": 100, "eval_samples": 200, "batch": 16, "lr": 0.005,
            "synthetic_samples": 600}"#,
    );
    let frame = repro_codec::frame::HEADER_LEN as u64 + 61_706;
    for (r, log) in logs.iter().enumerate() {
        let sent: u64 = log.steps.iter().map(|s| s.bytes_sent).sum();
        assert!(sent > 0, "rank {r} never averaged");
        assert_eq!(
            sent % frame,
            0,
            "rank {r}: {sent} is not whole 8-bit frames"
        );
        assert!(log.steps.iter().all(|s| s.hash_failures == 0));
        let last = log.evals.last().unwrap();
        averaged_accuracy_above(r, last, 0.8);
    }
}

/// AD-PSGD pairs even with odd ranks: a topology where an active rank has
/// no odd neighbour is refused with a message saying what to do.
#[test]
fn ad_psgd_refuses_a_rank_without_a_partner() {
    // a star of 3: rank 2 (active) has only rank 0 (active) as a neighbour
    let (out, _) = launch(
        3,
        "adpsgd-bad",
        r#"{"run_id": "b", "model": "logistic", "dataset": "synthetic", "algorithm": "ad-psgd",
            "topology": "star", "iterations": 5, "eval_every": 0, "synthetic_samples": 100}"#,
        false,
    );
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(text.contains("no odd neighbour"), "{text}");
}

/// All-reduce SGD over MPI goes through the ring all-reduce: each rank sends
/// 2 (n - 1) / n of the gradient per step (not n - 1 copies of it), every
/// rank ends with bit-identical models (consensus distance exactly 0), and
/// it learns.
#[test]
fn allreduce_sgd_uses_the_ring_and_keeps_ranks_identical() {
    let logs = train(
        4,
        "allreduce",
        r#"{"run_id": "r", "model": "lenet", "dataset": "synthetic", "algorithm": "allreduce",
            "iterations": 40, "eval_every": 40, "eval_samples": 200, "batch": 16, "lr": 0.01,
            "synthetic_samples": 600}"#,
    );
    let d = 61_706u64;
    let ring = 2 * 3 * d / 4 * 4;
    for (r, log) in logs.iter().enumerate() {
        for s in &log.steps {
            // chunks of d / 4 rounded: within a few floats of the ideal
            assert!(
                s.bytes_sent.abs_diff(ring) <= 6 * 4,
                "rank {r}: {}",
                s.bytes_sent
            );
            assert_eq!(s.bytes_received, s.bytes_sent);
        }
        let last = log.evals.last().unwrap();
        assert_eq!(last.consensus_distance, Some(0.0), "rank {r}");
        averaged_accuracy_above(r, last, 0.8);
    }
}

/// Rank 0 alone evaluates the averaged model (the same on every rank):
/// its accuracy is above `floor` there, and the other ranks report none,
/// nor a validation score.
fn averaged_accuracy_above(r: usize, eval: &repro_runlog::Eval, floor: f64) {
    if r == 0 {
        assert!(eval.avg_test_accuracy.unwrap() > floor, "rank 0: {eval:?}");
    } else {
        assert!(
            eval.avg_test_accuracy.is_none() && eval.val_accuracy.is_none(),
            "rank {r}: {eval:?}"
        );
    }
}
