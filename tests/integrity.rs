//! Nothing lost, nothing mixed: a results directory holds one experiment at
//! one scale, runs go to runs/ and only --record to results/, a failure never replaces a result, an
//! added grid key keeps the earlier rows, the command line wins over a
//! scale, and bad input stops at plan time with exit code 1 and no panic.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

mod common;
use common::{csv_rows, repro_in, temp_out};

/// A small simulator manifest with a `smoke` and a `cpu` scale (cpu is its
/// committed scale), `extra` appended.
fn manifest(name: &str, extra: &str) -> String {
    format!(
        "name: {name}
title: integrity test
source: tests/integrity.rs
backend: sim
scales:
  smoke: {{ iterations: 20 }}
  cpu: {{ iterations: 30 }}
grid:
  algorithm: [d-psgd, moniqua]
params: {{ workers: 4, dim: 16, lr: 0.1, bits: 8, theta: 1.0 }}
table: {{ rows: [algorithm], value: final_loss }}
{extra}"
    )
}

/// A project directory (with `experiments/`) holding `name`'s manifest.
fn project(test: &str, name: &str, extra: &str) -> PathBuf {
    let root = temp_out(test);
    std::fs::create_dir_all(root.join("experiments")).unwrap();
    std::fs::write(
        root.join("experiments").join(format!("{name}.yaml")),
        manifest(name, extra),
    )
    .unwrap();
    root
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A run without `--record` gets a directory of its own under runs/, at
/// any scale, and never touches results/; `--record` writes the record,
/// results/<name>/, at the committed scale only; a run beside a record
/// ends with the comparison; and one results directory never takes runs
/// of two scales.
#[test]
fn runs_get_their_own_directory_and_only_record_writes_results() {
    let root = project("runs", "twoscale", "");
    for scale in ["smoke", "cpu"] {
        let o = repro_in(&root, &["run", "twoscale", "--scale", scale]);
        assert!(o.status.success(), "{}", stderr(&o));
        let latest = root.join(format!("runs/twoscale/{scale}/latest"));
        assert!(latest.join("runs.csv").is_file(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("writing to runs/twoscale/"),
            "{}",
            stderr(&o)
        );
    }
    assert!(
        !root.join("results").exists(),
        "a run without --record wrote results/"
    );
    // the readers take a run directory for the experiment
    for cmd in ["table", "status"] {
        let o = repro_in(&root, &[cmd, "runs/twoscale/smoke/latest"]);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
    }
    let o = repro_in(&root, &["table", "twoscale", "--scale", "smoke"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // the record holds its committed scale only
    let o = repro_in(&root, &["run", "twoscale", "--scale", "smoke", "--record"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--record writes results/twoscale/"),
        "{}",
        stderr(&o)
    );
    assert!(!root.join("results").exists());
    let o = repro_in(&root, &["run", "twoscale", "--scale", "cpu", "--record"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&root.join("results/twoscale/runs.csv"));
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["scale"], "cpu");
        assert_eq!(r["experiment"], "twoscale");
        assert_eq!(r["data_source"], "quadratic");
        assert_eq!(r["data_checksum"], "generated");
        assert!(r["params"].contains("\"iterations\":30"), "{r:?}");
    }
    // a rerun beside the record: a new directory, the record unchanged
    // (git, with the project's .gitignore, sees no change), and the
    // comparison at the end: one seed a cell is too few to test, even
    // digit for digit (the simulator is deterministic)
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".gitignore"),
        root.join(".gitignore"),
    )
    .unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&root)
            .output()
            .expect("run git");
        assert!(o.status.success(), "git {args:?}: {}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "the record"]);
    let before = std::fs::read_to_string(root.join("results/twoscale/runs.csv")).unwrap();
    let o = repro_in(&root, &["run", "twoscale", "--scale", "cpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(
            "could not tell whether your run reproduces the record: 0 of 0 verdicts the same, \
             0 of 2 cells equivalent, 0 inconclusive, 0 differ, 2 with too few runs to test"
        ),
        "{stdout}"
    );
    let after = std::fs::read_to_string(root.join("results/twoscale/runs.csv")).unwrap();
    assert_eq!(before, after);
    assert_eq!(
        git(&["status", "--porcelain"]),
        "",
        "a rerun changed the checkout"
    );
    let runs = std::fs::read_dir(root.join("runs/twoscale/cpu"))
        .unwrap()
        .count();
    assert_eq!(runs, 3, "two run directories and `latest`");
    // the smoke scale into the committed directory: refused, nothing changed
    let before = std::fs::read_to_string(root.join("results/twoscale/runs.csv")).unwrap();
    let out = root.join("results/twoscale");
    let o = repro_in(
        &root,
        &[
            "run",
            "twoscale",
            "--scale",
            "smoke",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("holds runs of scale `cpu`") && stderr(&o).contains("--out"),
        "{}",
        stderr(&o)
    );
    let after = std::fs::read_to_string(root.join("results/twoscale/runs.csv")).unwrap();
    assert_eq!(before, after);
    // a runs.csv from before the scale column: provenance.json's scale
    // still refuses the mix
    let old = root.join("results/old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("provenance.json"), "{\"scale\": \"cpu\"}").unwrap();
    std::fs::write(
        old.join("runs.csv"),
        "run_id,algorithm,status\nabc,d-psgd,completed\n",
    )
    .unwrap();
    let o = repro_in(
        &root,
        &[
            "run",
            "twoscale",
            "--scale",
            "smoke",
            "--out",
            old.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&root);
}

/// The table and claims read only the runs of the plan: runs.csv keeps an
/// earlier run at another setting, the table leaves it out.
#[test]
fn a_table_reads_only_the_runs_of_its_plan() {
    let root = project("planned", "planned", "");
    let out = root.join("out");
    let dir = out.to_str().unwrap();
    let o = repro_in(&root, &["run", "planned", "--scale", "cpu", "--out", dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    // a subset with another lr: a new run at moniqua's point
    let o = repro_in(
        &root,
        &[
            "run",
            "planned",
            "--scale",
            "cpu",
            "--out",
            dir,
            "grid.algorithm=[moniqua]",
            "params.lr=0.05",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(
        table.contains("| moniqua |") && !table.contains("| d-psgd |"),
        "{table}"
    );
    // the manifest's own plan: d-psgd, and not the lr=0.05 moniqua
    let o = repro_in(&root, &["table", "planned", "--out", dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("| d-psgd |"), "{text}");
    assert!(
        stderr(&o).contains("1 of 3 recorded runs") && stderr(&o).contains("left out"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A rerun that fails never replaces a finished run: runs.csv keeps the
/// result, attempts.csv records the failure, the earlier log stays and the
/// failed attempt's goes to raw/attempts/. The exit code says a run failed.
#[test]
fn a_failure_never_replaces_a_result() {
    use std::io::Write as _;
    let root = project("failure", "failing", "");
    // bzip2: the plan takes its text as 8 times the file, so a large one
    // is left to the run to read
    let data = root.join("tiny.libsvm.bz2");
    let mut bz = bzip2::write::BzEncoder::new(
        std::fs::File::create(&data).unwrap(),
        bzip2::Compression::fast(),
    );
    bz.write_all(b"1 1:0.5 2:1.0\n-1 1:-0.5 3:2.0\n1 2:0.1\n-1 3:-1\n")
        .unwrap();
    bz.finish().unwrap();
    let set = format!("params.data={}", data.display());
    let out = root.join("out");
    let dir = out.to_str().unwrap();
    let args = [
        "run",
        "failing",
        "--scale",
        "cpu",
        "--out",
        dir,
        "params.objective=logistic",
        "params.samples=4",
        &set,
        "grid.algorithm=[d-psgd]",
    ];
    let o = repro_in(&root, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let first = csv_rows(&out.join("runs.csv"));
    assert_eq!(first[0]["status"], "completed");
    let id = first[0]["run_id"].clone();
    let log = std::fs::read_to_string(out.join("raw").join(format!("{id}.jsonl"))).unwrap();
    // the same run (same id), now unreadable data too large to read at
    // plan time (a sparse file of 130 MB: no bzip2 stream), so the run
    // itself fails
    std::fs::File::create(&data)
        .unwrap()
        .set_len(130_000_000)
        .unwrap();
    let o = repro_in(&root, &args);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let rows = csv_rows(&out.join("runs.csv"));
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["status"], "completed", "{:?}", rows[0]);
    assert_eq!(rows[0]["run_id"], id);
    let attempts = csv_rows(&out.join("attempts.csv"));
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["run_id"], id);
    assert_eq!(attempts[0]["status"], "failed");
    assert!(attempts[0]["error"].contains("LIBSVM"), "{:?}", attempts[0]);
    assert_eq!(
        std::fs::read_to_string(out.join("raw").join(format!("{id}.jsonl"))).unwrap(),
        log
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A grid key added after a run keeps the earlier rows: those still in the
/// plan take the key's value, the others stay with it empty; none is
/// dropped.
#[test]
fn an_added_grid_key_keeps_the_earlier_rows() {
    let root = project("gridkey", "gridkey", "");
    let out = root.join("out");
    let dir = out.to_str().unwrap();
    let o = repro_in(&root, &["run", "gridkey", "--scale", "cpu", "--out", dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    // a new axis at a new value: the two earlier rows are not in this plan
    let o = repro_in(
        &root,
        &[
            "run",
            "gridkey",
            "--scale",
            "cpu",
            "--out",
            dir,
            "grid.lr=[0.2]",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&out.join("runs.csv"));
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r["lr"].is_empty()).count(), 2);
    // the axis at the earlier value: the earlier runs are in the plan again
    // and take its value
    let o = repro_in(
        &root,
        &[
            "run",
            "gridkey",
            "--scale",
            "cpu",
            "--out",
            dir,
            "grid.lr=[0.1]",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = csv_rows(&out.join("runs.csv"));
    assert_eq!(rows.len(), 4, "{rows:?}");
    let mut lrs: Vec<&str> = rows.iter().map(|r| r["lr"].as_str()).collect();
    lrs.sort();
    assert_eq!(lrs, ["0.1", "0.1", "0.2", "0.2"]);
    let _ = std::fs::remove_dir_all(&root);
}

/// The command line beats the scale, which beats the manifest; an override
/// a case would shadow is an error naming where.
#[test]
fn the_command_line_wins_over_the_scale() {
    let root = project(
        "precedence",
        "prec",
        "cases:\n  - { when: { algorithm: moniqua }, set: { theta: 2.0 } }\n",
    );
    let plan = |args: &[&str]| {
        let mut all = vec!["run", "prec", "--dry-run", "--json"];
        all.extend_from_slice(args);
        let o = repro_in(&root, &all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {}",
                String::from_utf8_lossy(&o.stdout)
            )
        })
    };
    // the scale sets iterations; the command line's value wins
    let p = plan(&["--scale", "smoke", "params.iterations=7"]);
    assert_eq!(p["dry_run"], true);
    let runs = p["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["params"]["iterations"], 7, "{r}");
    }
    // without it, the scale's
    let p = plan(&["--scale", "smoke"]);
    assert_eq!(p["runs"][0]["params"]["iterations"], 20);
    // a scale's grid axis too
    std::fs::write(
        root.join("experiments/prec.yaml"),
        manifest("prec", "").replace(
            "smoke: { iterations: 20 }",
            "smoke: { iterations: 20, grid.seed: [0, 1, 2] }",
        ),
    )
    .unwrap();
    let p = plan(&["--scale", "smoke", "grid.seed=[5]"]);
    assert_eq!(p["runs"].as_array().unwrap().len(), 2, "{p}");
    assert_eq!(p["runs"][0]["point"]["seed"], "5");
    // shadowed by a case: an error naming it
    std::fs::write(
        root.join("experiments/prec.yaml"),
        manifest(
            "prec",
            "cases:\n  - { when: { algorithm: moniqua }, set: { theta: 2.0 } }\n",
        ),
    )
    .unwrap();
    let o = repro_in(&root, &["run", "prec", "--dry-run", "params.theta=3.0"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cases[0].set.theta"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&root);
}

/// Output closed early ends `repro` quietly (SIGPIPE, no panic); an
/// unknown scale in `repro status` is an error with a nonzero exit code.
#[test]
fn a_closed_pipe_ends_quietly_and_errors_exit_nonzero() {
    for args in [&["list"][..], &["status"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_repro"))
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // the reader is gone before the first write, as `| head -0` would
        // be: the write meets a closed pipe
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?} {err}",
            o.status
        );
    }
    let o = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(["status", "--scale", "bogus"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

/// Bad input that used to pass plan time is refused there, exit code 1, no
/// panic: a deep `--set` key, a FIFO as data, a manifest too large or
/// nested too deep, a non-results `--out` (whose files stay untouched),
/// and a named experiment outside any project.
#[test]
fn bad_input_is_refused_at_plan_time() {
    let root = project("badinput", "bad", "");
    let refused = |args: &[&str], needle: &str| {
        let o = repro_in(&root, args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected `{needle}` in {err}"
        );
    };
    let deep = format!("{}=1", vec!["a"; 10_000].join("."));
    refused(
        &["run", "bad", "--dry-run", "--set", &deep],
        "a key of 10000 parts",
    );
    // a FIFO as the trainer's data directory
    let fifo = root.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo_set = format!("params.data={}", fifo.display());
    refused(
        &[
            "run",
            "bad",
            "--dry-run",
            "params.objective=logistic",
            &fifo_set,
        ],
        "is a FIFO",
    );
    let big = root.join("big.yaml");
    std::fs::write(
        &big,
        manifest("big", &format!("# {}\n", "x".repeat(2 << 20))),
    )
    .unwrap();
    refused(
        &["run", big.to_str().unwrap(), "--dry-run"],
        "a manifest is at most",
    );
    let nested = root.join("nested.yaml");
    let deep_value = format!("{}1{}", "[".repeat(200_000), "]".repeat(200_000));
    std::fs::write(&nested, manifest("nested", &format!("x: {deep_value}\n"))).unwrap();
    refused(
        &["run", nested.to_str().unwrap(), "--dry-run"],
        "nested more than",
    );
    // --out at a directory that is not a results directory
    let other = root.join("notes");
    std::fs::create_dir_all(other.join(".draft.running")).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    refused(
        &["run", "bad", "--out", other.to_str().unwrap()],
        "is not a results directory",
    );
    assert!(other.join(".draft.running").is_dir() && other.join("notes.txt").is_file());
    // outside a project, a name finds nothing (never the source checkout)
    let nowhere = temp_out("nowhere");
    std::fs::create_dir_all(&nowhere).unwrap();
    let o = repro_in(&nowhere, &["run", "smoke", "--dry-run"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no `experiments/` directory"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&nowhere);
}

/// Hostile data is judged at plan time, where reading it is cheap: a
/// feature index of 2^32 - 1 and a decompression bomb (a gzip of one line
/// of 100 MB) are each refused before any run, with a message naming the
/// file, the line and the problem, never a panic (exit code 1, nothing
/// written). The run's own reading checks the same again.
#[test]
fn hostile_data_is_refused_before_the_run() {
    use std::io::Write;
    let root = project("hostiledata", "hd", "");
    let index = root.join("index.libsvm");
    std::fs::write(&index, "1 4294967295:1.0\n-1 1:1.0\n1 2:1.0\n-1 2:0.5\n").unwrap();
    let bomb = root.join("bomb.libsvm.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&bomb).unwrap(),
        flate2::Compression::fast(),
    );
    let zeros = vec![b'0'; 1 << 20];
    for _ in 0..100 {
        gz.write_all(&zeros).unwrap();
    }
    gz.finish().unwrap();
    for (file, says) in [
        (&index, "index 4294967295 is beyond the limit"),
        (&bomb, "longer than 67108864 bytes"),
    ] {
        let out = root.join(format!(
            "out-{}",
            file.file_name().unwrap().to_string_lossy()
        ));
        let set = format!("params.data={}", file.display());
        let o = repro_in(
            &root,
            &[
                "run",
                "hd",
                "--scale",
                "cpu",
                "--out",
                out.to_str().unwrap(),
                "params.objective=logistic",
                "grid.algorithm=[d-psgd]",
                &set,
            ],
        );
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked") && err.contains(says), "{err}");
        assert!(err.contains("line 1:"), "{err}");
        assert!(!out.join("runs.csv").exists());
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A rerun with other parameters at the same grid points keeps the
/// earlier rows beside the new ones (runs.csv is keyed by run id), says
/// so, and counts kept, replaced and added rows truthfully; the table
/// shows the plan's runs.
#[test]
fn a_parameter_change_keeps_the_earlier_rows_and_says_so() {
    let root = project("params", "params", "");
    let out = root.join("out");
    let dir = out.to_str().unwrap();
    let o = repro_in(&root, &["run", "params", "--scale", "cpu", "--out", dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("(0 earlier rows kept, 0 replaced, 2 added)"),
        "{}",
        stderr(&o)
    );
    let o = repro_in(
        &root,
        &[
            "run",
            "params",
            "--scale",
            "cpu",
            "--out",
            dir,
            "params.lr=0.05",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stderr(&o);
    assert!(
        said.contains("(2 earlier rows kept, 0 replaced, 2 added)"),
        "{said}"
    );
    assert!(
        said.contains("2 runs sit at grid points where runs.csv keeps a run of other parameters"),
        "{said}"
    );
    let rows = csv_rows(&out.join("runs.csv"));
    assert_eq!(rows.len(), 4, "{rows:?}");
    // the manifest's lr (0.1) leaves `lr` out of params; 0.05 is there
    let changed = rows
        .iter()
        .filter(|r| r["params"].contains("\"lr\":0.05"))
        .count();
    assert_eq!(changed, 2, "{rows:?}");
    // the same again replaces its own two rows, and only those
    let o = repro_in(
        &root,
        &[
            "run",
            "params",
            "--scale",
            "cpu",
            "--out",
            dir,
            "params.lr=0.05",
        ],
    );
    assert!(
        stderr(&o).contains("(2 earlier rows kept, 2 replaced, 0 added)"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A results directory whose runs.csv is gone but whose runs.parquet holds
/// rows is refused, and runs.parquet stays as it was.
#[test]
fn a_missing_runs_csv_never_lets_runs_parquet_be_overwritten() {
    let root = project("parquet-only", "pq", "");
    let out = root.join("out");
    let dir = out.to_str().unwrap();
    let o = repro_in(&root, &["run", "pq", "--scale", "cpu", "--out", dir]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(out.join("runs.csv")).unwrap();
    let before = std::fs::read(out.join("runs.parquet")).unwrap();
    let o = repro_in(
        &root,
        &[
            "run",
            "pq",
            "--scale",
            "cpu",
            "--out",
            dir,
            "grid.algorithm=[moniqua]",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("holds 2 rows' runs.parquet but no runs.csv"),
        "{}",
        stderr(&o)
    );
    assert_eq!(std::fs::read(out.join("runs.parquet")).unwrap(), before);
    let _ = std::fs::remove_dir_all(&root);
}

/// `%XX` decoded: the corpus writes a newline as `%0A`.
fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// runs.csv as its header and records.
fn read_records(path: &std::path::Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_path(path)
        .unwrap();
    let mut rows: Vec<Vec<String>> = r
        .records()
        .map(|x| x.unwrap().iter().map(str::to_string).collect())
        .collect();
    let header = rows.remove(0);
    (header, rows)
}

fn write_records(path: &std::path::Path, header: &[String], rows: &[Vec<String>]) {
    let mut w = csv::Writer::from_path(path).unwrap();
    w.write_record(header).unwrap();
    for r in rows {
        w.write_record(r).unwrap();
    }
    w.flush().unwrap();
}

/// Applies one corpus mutation to the copy `dir`.
fn mutate(dir: &std::path::Path, mutation: &str) {
    let parts: Vec<String> = mutation.splitn(4, ':').map(percent_decoded).collect();
    let runs = dir.join("runs.csv");
    let (mut header, mut rows) = read_records(&runs);
    let col = |header: &[String], name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let row = |k: &str| k.parse::<usize>().unwrap() - 1;
    match parts[0].as_str() {
        "none" => return,
        "header-only" => rows.clear(),
        "scale-col" => {
            let (j, f) = (col(&header, &parts[1]), parts[2].parse::<f64>().unwrap());
            for r in &mut rows {
                r[j] = format!("{:e}", r[j].parse::<f64>().unwrap() * f);
            }
        }
        "set-col" => {
            let j = col(&header, &parts[1]);
            for r in &mut rows {
                r[j] = parts[2].clone();
            }
        }
        "set-cell" => {
            let j = col(&header, &parts[1]);
            rows[row(&parts[2])][j] = parts[3].clone();
        }
        "drop-col" => {
            let j = col(&header, &parts[1]);
            header.remove(j);
            for r in &mut rows {
                r.remove(j);
            }
        }
        "dup-row" => rows.push(rows[row(&parts[1])].clone()),
        "dup-row-changed" => {
            let mut r = rows[row(&parts[1])].clone();
            let j = col(&header, &parts[2]);
            r[j] = parts[3].clone();
            rows.push(r);
        }
        "keep-where" => {
            let j = col(&header, &parts[1]);
            rows.retain(|r| r[j] == parts[2]);
        }
        "prov" => {
            let p = dir.join("provenance.json");
            let mut v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let rest = mutation.split_once(':').unwrap().1;
            let (field, json) = rest.split_once(':').unwrap();
            v[field] = serde_json::from_str(json).unwrap();
            std::fs::write(&p, v.to_string()).unwrap();
            return;
        }
        "prov-raw" => {
            let text = mutation.split_once(':').unwrap().1;
            std::fs::write(dir.join("provenance.json"), text).unwrap();
            return;
        }
        "link" => {
            let at = dir.join(&parts[1]);
            let _ = std::fs::remove_file(&at);
            std::os::unix::fs::symlink(&parts[2], &at).unwrap();
            return;
        }
        "fifo" => {
            let at = dir.join(&parts[1]);
            std::fs::remove_file(&at).unwrap();
            assert!(Command::new("mkfifo").arg(&at).status().unwrap().success());
            return;
        }
        "sparse" => {
            let f = std::fs::File::create(dir.join(&parts[1])).unwrap();
            f.set_len(parts[2].parse().unwrap()).unwrap();
            return;
        }
        "lock" => {
            // held by this test process, alive while the command runs
            let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
            let after = &stat[stat.rfind(')').unwrap() + 1..];
            let started = after.split_whitespace().nth(19).unwrap();
            let lock = format!("{}\nrepro run quickstart\n{started}\n", std::process::id());
            std::fs::write(dir.join(".lock"), lock).unwrap();
            return;
        }
        other => panic!("unknown mutation {other}"),
    }
    write_records(&runs, &header, &rows);
}

/// The review's tries of hostile records and flags (tests/hostile-records.txt):
/// each a copy of the quickstart record changed one way, then one
/// command. Each is answered by what it holds: the exit code and the
/// message the corpus names, never a panic, a hang, a device replaced
/// or a file's content printed.
#[test]
fn hostile_records_are_answered_by_what_they_hold() {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let record = here.join("results/quickstart");
    let corpus = std::fs::read_to_string(here.join("tests/hostile-records.txt")).unwrap();
    let (mut tried, mut failures) = (0, Vec::new());
    for line in corpus
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let line = line.trim_end();
        let line = line.strip_suffix(" |").unwrap_or(line);
        let f: Vec<&str> = line.split(" | ").map(str::trim).collect();
        assert!(f.len() >= 5, "a try has 5 or 6 fields: {line}");
        let (name, mutation, command, exit, expect) = (f[0], f[1], f[2], f[3], f[4]);
        let copy = temp_out(&format!("hostile-{name}"));
        std::fs::create_dir_all(&copy).unwrap();
        for e in std::fs::read_dir(&record).unwrap().flatten() {
            if e.path().is_file() {
                std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
            }
        }
        mutate(&copy, mutation);
        let args: Vec<String> = command
            .split_whitespace()
            .map(|w| {
                percent_decoded(
                    &w.replace("COPY", copy.to_str().unwrap())
                        .replace("RECORD", record.to_str().unwrap()),
                )
            })
            .collect();
        let mut child = common::repro_cmd(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // a hang is a failure, not a stuck test
        let started = std::time::Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > std::time::Duration::from_secs(120) {
                let _ = child.kill();
                panic!("{name}: still running after 120 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let code = o.status.code().map_or("signal".into(), |c| c.to_string());
        let mut wrong = Vec::new();
        if code != exit {
            wrong.push(format!("exit {code}, not {exit}"));
        }
        if said.contains("panicked") {
            wrong.push("a panic".into());
        }
        if !said.contains(expect) {
            wrong.push(format!("no `{expect}`"));
        }
        if let Some(never) = f.get(5).filter(|n| !n.is_empty())
            && said.contains(never)
        {
            wrong.push(format!("`{never}` said"));
        }
        if said.contains('\u{1b}') || said.contains('\u{0}') {
            wrong.push("a control character reached the terminal".into());
        }
        if !wrong.is_empty() {
            let tail: String = said
                .chars()
                .rev()
                .take(1500)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            failures.push(format!("{name}: {}\n{tail}", wrong.join("; ")));
        }
        let _ = std::fs::remove_dir_all(&copy);
        tried += 1;
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(tried >= 40, "only {tried} tries");
    // /dev/full is still the device it was
    use std::os::unix::fs::FileTypeExt as _;
    assert!(
        std::fs::metadata("/dev/full")
            .unwrap()
            .file_type()
            .is_char_device()
    );
}
