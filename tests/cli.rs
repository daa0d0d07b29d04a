//! The `repro` binary end to end: experiments run in the simulator, results
//! land in runs.csv and table.md, and bad input gives clear errors and the
//! documented exit codes.

use std::path::PathBuf;
use std::process::{Command, Output};

fn repro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run repro")
}

fn temp_out(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("repro-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

#[test]
fn theorem1_reproduces_in_the_simulator() {
    let out = temp_out("theorem1");
    let o = repro(&[
        "run",
        "theorem1",
        "--jobs",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 18);
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    // bound phi^2 delta^2 / (8 (1 + phi^2)) with phi = 1/3, delta = 0.1
    let bound = 0.01 / 80.0;
    for line in &lines[1..] {
        let f: Vec<&str> = line.split(',').collect();
        let g: f64 = f[col("grad_norm_sq")].parse().unwrap();
        match f[col("algorithm")] {
            "naive-grid" => assert!(g >= bound, "{line}"),
            "moniqua" => assert!(g < bound / 100.0, "{line}"),
            other => panic!("unexpected algorithm {other}"),
        }
        // every run left a log with a header and an end line
        let log = std::fs::read_to_string(out.join("raw").join(format!("{}.jsonl", f[0]))).unwrap();
        let parsed = repro_runlog::read_log(log.as_bytes()).unwrap();
        assert!(parsed.end.is_some() && !parsed.steps.is_empty());
    }
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(
        table.contains("| algorithm | lr=0.5 | lr=0.1 | lr=0.02 |"),
        "{table}"
    );
    // `repro table` renders the same table from runs.csv
    let t = repro(&["table", "theorem1", "--out", out.to_str().unwrap()]);
    assert!(t.status.success());
    assert_eq!(String::from_utf8_lossy(&t.stdout), table);
}

#[test]
fn smoke_is_the_default_and_every_algorithm_completes() {
    let out = temp_out("smoke");
    let o = repro(&["run", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 14);
    assert!(
        csv.lines().skip(1).all(|l| l.contains(",completed,")),
        "{csv}"
    );
}

#[test]
fn dry_run_and_overrides() {
    let o = repro(&["run", "theorem1", "--dry-run", "--set", "grid.seed=[0]"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("6 runs"), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("algorithm=")).count(), 6);
}

#[test]
fn bad_input_is_a_clear_error_with_exit_code_1() {
    for (args, needle) in [
        (vec!["run", "nosuch"], "no experiment `nosuch`"),
        (
            vec!["run", "theorem1", "--scale", "paper"],
            "has no scale `paper`",
        ),
        (
            vec!["run", "theorem1", "--set", "params.workerz=3", "--dry-run"],
            "workerz",
        ),
        (vec!["run", "theorem1", "--set", "oops"], "key=value"),
        (
            vec!["run", "theorem1", "--backend", "mpi"],
            "unknown field `objective`",
        ),
    ] {
        let o = repro(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    assert_eq!(repro(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn a_failing_run_is_reported_and_the_others_still_run() {
    let out = temp_out("failing");
    let o = repro(&[
        "run",
        "smoke",
        "--set",
        "grid.algorithm=[d-psgd, no-such-algorithm]",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert!(csv.contains(",d-psgd,completed,"), "{csv}");
    assert!(csv.contains(",no-such-algorithm,failed,"), "{csv}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown algorithm `no-such-algorithm`"));
}

/// The trainer binary next to `repro` (cargo test --workspace builds it), or
/// built now.
fn train_binary() -> PathBuf {
    let sibling = PathBuf::from(env!("CARGO_BIN_EXE_repro")).with_file_name("repro-train");
    if !sibling.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "repro-trainer", "--bin", "repro-train"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo build");
        assert!(status.success(), "could not build repro-train");
    }
    sibling
}

/// `repro run` with the MPI backend: real `repro-train` ranks under mpirun,
/// their logs summarized into runs.csv; Moniqua sends a quarter of D-PSGD's
/// bytes (8-bit codes instead of f32) and both learn.
#[test]
fn mpi_backend_trains_with_real_ranks() {
    let out = temp_out("mpi");
    let o = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(["run", "mpi-smoke", "--out", out.to_str().unwrap()])
        .env("REPRO_TRAIN", train_binary())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run repro");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let mut bytes = std::collections::BTreeMap::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[col("status")], "completed", "{line}");
        let acc: f64 = f[col("avg_test_accuracy")].parse().unwrap();
        assert!(acc > 0.8, "{line}");
        bytes.insert(
            f[col("algorithm")].to_string(),
            f[col("bytes")].parse::<f64>().unwrap(),
        );
        // every rank left its log
        for r in 0..3 {
            assert!(
                out.join("raw")
                    .join(f[0])
                    .join(format!("rank-{r}.jsonl"))
                    .is_file()
            );
        }
    }
    let ratio = bytes["moniqua"] / bytes["d-psgd"];
    assert!(
        (ratio - 0.25).abs() < 0.01,
        "moniqua/d-psgd bytes = {ratio}"
    );
}

/// `repro doctor` probes the host and always reports every check.
#[test]
fn doctor_reports_what_the_host_can_do() {
    let o = repro(&["doctor"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    for what in [
        "MPI (mpirun)",
        "tc rate limiting (tbf)",
        "tc delay (netem)",
        "network namespaces",
        "Fashion-MNIST",
    ] {
        assert!(text.contains(what), "{what} missing from:\n{text}");
    }
}
