//! Plan-time refusals: every shipped manifest valid, bad and hostile input
//! refused with a clear error before anything runs.

use super::*;

/// Every shipped manifest parses and expands at every scale it declares, and
/// `repro list` shows each with its cost.
#[test]
fn every_shipped_manifest_is_valid() {
    let o = repro(&["list"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains("invalid"), "{text}");
    for name in [
        "quickstart",
        "smoke",
        "theorem1",
        "mpi-smoke",
        "table2",
        "figure1",
        "tang2018-epoch-time",
        "tune-smoke",
        "convex",
        "convex-sparse",
    ] {
        assert!(text.contains(name), "{name} missing from {text}");
    }
    assert!(text.contains("cpu: 120 runs, about 7 s"), "{text}");
    assert!(text.contains("cpu (default): 40 runs"), "{text}");
    // a tuned experiment's search counts too
    assert!(
        text.contains("smoke: 9 runs after 12 tuning runs"),
        "{text}"
    );
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
            "`workerz`: unknown parameter of the sim backend; valid: algorithm,",
        ),
        (vec!["run", "theorem1", "--set", "oops"], "key=value"),
        (
            vec!["run", "smoke", "--max-memory=-1", "--dry-run"],
            "--max-memory -1: give the memory runs may hold in GB",
        ),
        (
            vec!["run", "theorem1", "--backend", "mpi"],
            "`objective`: unknown parameter of the mpi backend; valid: algorithm, b_theta, batch",
        ),
        // malformed manifests: each error names the key
        (
            vec!["run", "smoke", "--set", "params.workers=many", "--dry-run"],
            "`workers`: invalid type",
        ),
        (
            vec![
                "run",
                "figure1",
                "--set",
                "grid.network=[{bandwidth: 10 parsecs}]",
                "--dry-run",
            ],
            "`network.bandwidth`: `10 parsecs` is not a rate",
        ),
        (
            vec!["run", "smoke", "--set", "grid.algorithm=[]", "--dry-run"],
            "grid key `algorithm` has no values",
        ),
        (
            vec![
                "run",
                "smoke",
                "--set",
                "grid.algorithm=[moniqa]",
                "--dry-run",
            ],
            "`algorithm`: unknown algorithm `moniqa`",
        ),
        (
            vec!["run", "smoke", "--set", "table.colour=red", "--dry-run"],
            "unknown field `colour`",
        ),
    ] {
        refused(&args, needle);
    }
    assert_eq!(repro(&["frobnicate"]).status.code(), Some(2));
}

/// Every manifest under tests/hostile/ (bad syntax, types, ranges, unknown
/// keys, names, a 10^10-run grid, shell metacharacters in string fields)
/// is refused by `--dry-run` with exit code 1, a message holding what its
/// first line (`# refused: ...`) names, and no panic.
#[test]
fn hostile_manifests_are_refused_at_plan_time() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "only {} hostile manifests", files.len());
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# refused: "))
            .unwrap_or_else(|| panic!("{} has no `# refused:` line", path.display()));
        let o = repro(&[
            "run",
            path.to_str().unwrap(),
            "--scale",
            "smoke",
            "--dry-run",
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        let name = path.file_name().unwrap().to_string_lossy();
        assert_eq!(o.status.code(), Some(1), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
        assert!(
            err.contains(expect),
            "{name}: expected `{expect}` in: {err}"
        );
    }
}

/// `repro show` prints a manifest as a run reads it: the quickstart with
/// table2's parameters merged in, without table2's tuning, with `--set`
/// applied; an unknown experiment is an error.
#[test]
fn show_prints_the_manifest_resolved() {
    let o = repro(&["show", "quickstart", "--set", "params.weight_decay=0.001"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    for line in [
        "backend: in-process",
        "  model: lenet",
        "  timeout_s: 600",
        "  weight_decay: 0.001",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
    }
    assert!(!text.contains("extends:"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("tune:")), "{text}");
    let o = repro(&["show", "no-such-experiment"]);
    assert_eq!(o.status.code(), Some(1));
}

/// A control character in a `--set` key or value, or in a manifest's
/// key or grid value, is refused at plan time, and the message shows it
/// escaped: no escape sequence reaches the terminal.
#[test]
fn control_characters_never_reach_the_terminal() {
    for args in [
        ["run", "smoke", "--set", "params.l\u{1b}[2Jr=1", "--dry-run"],
        [
            "run",
            "smoke",
            "--set",
            "params.lr=\u{1b}]0;x\u{7}",
            "--dry-run",
        ],
        [
            "run",
            "tests/hostile/grid-key-escape.yaml",
            "--dry-run",
            "-q",
            "-q",
        ],
    ] {
        let args: Vec<&str> = args.iter().copied().filter(|a| *a != "-q").collect();
        let o = repro(&args);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(!stderr.contains('\u{1b}'), "{args:?}: {stderr:?}");
        assert!(stderr.contains("\\u{1b}"), "{args:?}: {stderr:?}");
    }
}

/// A gzip bomb (2.6 MB that inflate to 600 MB of LIBSVM text) under an
/// address-space limit (`ulimit -v`, 1 GB): the memory plan holds the
/// data against what RLIMIT_AS leaves, not only against what the machine
/// has, and `--dry-run` refuses the run, naming the limit. Without the
/// limit the same plan passes.
#[test]
fn a_gzip_bomb_is_refused_under_an_address_space_limit() {
    let root = temp_out("gzip-bomb");
    std::fs::create_dir_all(root.join("experiments")).unwrap();
    std::fs::create_dir_all(root.join("data")).unwrap();
    let made = Command::new("bash")
        .args([
            "-c",
            "yes '1 1:1' | head -c 600000000 | gzip -1 > data/bomb.libsvm.gz",
        ])
        .current_dir(&root)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::write(
        root.join("experiments/bomb.yaml"),
        "name: bomb\ntitle: bomb\nsource: tests/cli.rs\nbackend: sim\nscales: { smoke: {} }\n\
         params: { iterations: 5, dim: 8, workers: 4, objective: logistic, data: data/bomb.libsvm.gz }\n\
         grid: { algorithm: [d-psgd] }\ntable: { rows: [algorithm], value: final_loss }\n",
    )
    .unwrap();
    let dry_run = |limit: &str| {
        Command::new("bash")
            .args([
                "-c",
                &format!("{limit} exec \"$0\" run bomb --dry-run",),
                env!("CARGO_BIN_EXE_repro"),
            ])
            .current_dir(&root)
            .output()
            .unwrap()
    };
    let o = dry_run("ulimit -v 1000000;");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("would need 1.2 GB") && stderr.contains("RLIMIT_AS"),
        "{stderr}"
    );
    let o = dry_run("");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let _ = std::fs::remove_dir_all(&root);
}

/// A LIBSVM file's faults are judged at plan time: `--dry-run` refuses a
/// NaN label, a bad index, a value that is not finite and fewer samples
/// than workers, naming the file, the line and the value.
#[test]
fn a_faulty_libsvm_file_is_refused_by_the_dry_run() {
    let root = temp_out("libsvm-faults");
    std::fs::create_dir_all(root.join("experiments")).unwrap();
    for (name, text, workers, want) in [
        (
            "nan-label",
            "1 1:1\n-1 2:1\nnan 1:1\n1 1:2\n",
            2,
            "line 3: label `nan` is not finite",
        ),
        (
            "zero-index",
            "1 1:1\n-1 0:1\n",
            2,
            "line 2: indices start at 1",
        ),
        (
            "inf-value",
            "1 1:inf\n-1 1:1\n",
            2,
            "line 1: value `inf` is not finite",
        ),
        (
            "few",
            "1 1:1\n-1 1:2\n",
            4,
            "holds 2 samples, fewer than the 4 workers",
        ),
    ] {
        std::fs::write(root.join(format!("{name}.libsvm")), text).unwrap();
        std::fs::write(
            root.join(format!("experiments/{name}.yaml")),
            format!(
                "name: {name}\ntitle: t\nsource: tests/cli.rs\nbackend: sim\nscales: {{ smoke: {{}} }}\n\
                 params: {{ iterations: 5, dim: 8, workers: {workers}, objective: logistic, data: {name}.libsvm }}\n\
                 grid: {{ algorithm: [d-psgd] }}\ntable: {{ rows: [algorithm], value: final_loss }}\n"
            ),
        )
        .unwrap();
        let o = common::repro_in(&root, &["run", name, "--dry-run"]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.contains(want), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}.libsvm")),
            "{name}: {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// CIFAR-10's batches are judged at plan time: `--dry-run` refuses a
/// truncated batch and a record whose label is no class, naming the file
/// and the record.
#[test]
fn a_damaged_cifar_batch_is_refused_by_the_dry_run() {
    use std::os::unix::fs::FileExt as _;
    let root = temp_out("cifar-faults");
    let data = root.join("cifar");
    let o = repro(&[
        "data",
        "fetch",
        "cifar10-like",
        "--dir",
        data.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::create_dir_all(root.join("experiments")).unwrap();
    std::fs::write(
        root.join("experiments/c.yaml"),
        format!(
            "name: c\ntitle: t\nsource: tests/cli.rs\nbackend: in-process\nscales: {{ smoke: {{}} }}\n\
             params: {{ workers: 2, iterations: 1, model: lenet, dataset: cifar10, data_dir: {} }}\n\
             grid: {{ algorithm: [d-psgd] }}\ntable: {{ rows: [algorithm], value: avg_test_accuracy }}\n",
            data.display()
        ),
    )
    .unwrap();
    let dry_run = || common::repro_in(&root, &["run", "c", "--dry-run"]);
    let o = dry_run();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // a label byte that is no class
    let batch = std::fs::OpenOptions::new()
        .write(true)
        .open(data.join("data_batch_2.bin"))
        .unwrap();
    batch.write_all_at(&[200], 5 * 3073).unwrap();
    let o = dry_run();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("data_batch_2.bin: record 5 (byte 15365) has label 200"),
        "{stderr}"
    );
    // a truncated batch
    batch.set_len(30_000_000).unwrap();
    let o = dry_run();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("data_batch_2.bin has 30000000 bytes, expected 30730000"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
