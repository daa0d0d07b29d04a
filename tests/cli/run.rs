//! `repro run`: experiments through the simulator, the in-process trainer
//! and MPI, and what a run leaves behind when it fails, is interrupted or
//! is killed.

use super::*;

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
    assert_eq!(lines.len(), 1 + 120);
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    // bound phi^2 delta^2 / (8 (1 + phi^2)) with phi = 1/3, delta = 0.1
    let bound = 0.01 / 80.0;
    // the same on Moniqua's own grid step, delta = 0.005
    let fine_bound = 0.005 * 0.005 / 80.0;
    let mut moniqua = std::collections::BTreeSet::new();
    for line in &lines[1..] {
        let f: Vec<&str> = line.split(',').collect();
        let g: f64 = f[col("grad_norm_sq")].parse().unwrap();
        match f[col("method")] {
            "naive-grid" => assert!(g >= bound, "{line}"),
            "naive-fine" => assert!(g >= fine_bound, "{line}"),
            "moniqua-fine" => {
                let wraps: f64 = f[col("wrap_rate")].parse().unwrap();
                assert!(wraps < 0.01, "{line}");
            }
            "moniqua" => {
                // below the floor, though every frame carries a
                // quantization error: distinct starts and gradient noise
                // keep the workers apart, so recovery errors reach delta B
                assert!(g < bound, "{line}");
                let over: f64 = f[col("recovery_over_bound")].parse().unwrap();
                assert!(over > 0.9, "{line}");
                let wraps: f64 = f[col("wrap_rate")].parse().unwrap();
                assert!(wraps < 0.01, "{line}");
                moniqua.insert(g.to_bits());
            }
            other => panic!("unexpected method {other}"),
        }
        // every run left a log with a header and an end line
        let log = std::fs::read_to_string(out.join("raw").join(format!("{}.jsonl", f[0]))).unwrap();
        let parsed = repro_runlog::read_log(log.as_bytes()).unwrap();
        assert!(parsed.end.is_some() && !parsed.steps.is_empty());
    }
    // no two of Moniqua's thirty runs are the same (seeds differ)
    assert_eq!(moniqua.len(), 30);
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(
        table.contains("| method | lr=0.5 | lr=0.1 | lr=0.02 | largest recovery error / delta B |"),
        "{table}"
    );
    // `repro table` renders the same table from runs.csv, then the claims
    let t = repro(&["table", "theorem1", "--out", out.to_str().unwrap()]);
    assert!(t.status.success());
    let said = String::from_utf8_lossy(&t.stdout);
    assert!(said.starts_with(&table), "{said}");
    assert_eq!(said.matches("**supported**").count(), 6, "{said}");
    // `repro compare` gives the table's cells from runs.parquet alone
    let c = repro(&[
        "compare",
        out.to_str().unwrap(),
        "--by",
        "method,lr",
        "--value",
        "grad_norm_sq",
        "--format",
        "csv",
    ]);
    assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    let tidy = std::fs::read_to_string(out.join("table.csv")).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&c.stdout),
        common::cells_of_tidy_table(&tidy),
        "{tidy}"
    );
}

/// The main job: `repro run` with no experiment named plans the quickstart
/// at its default scale, then Theorem 1 at the same scale. Its smoke scale
/// runs end to end here (in-process workers, synthetic images): the table
/// beside the paper's numbers, the claims' verdicts, the figure, Theorem
/// 1's runs in a directory of the quickstart's, and the full-size command.
#[test]
fn quickstart_is_the_default_and_runs_end_to_end() {
    let stdout = |o: &Output| String::from_utf8_lossy(&o.stdout).to_string();
    let o = repro(&["run", "--dry-run"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let plan = stdout(&o);
    assert!(
        plan.contains("quickstart: ")
            && plan.contains("at scale `cpu`, 40 runs (backend in-process)"),
        "{plan}"
    );
    assert!(
        plan.contains("theorem1: ") && plan.contains("at scale `cpu`, 120 runs (backend sim)"),
        "{plan}"
    );
    // `--scale` still wins, for both
    let plan = stdout(&repro(&["run", "--scale", "smoke", "--dry-run"]));
    assert_eq!(plan.matches("at scale `smoke`").count(), 2, "{plan}");
    // a default scale the manifest lacks, or a `then` that is no
    // experiment, is refused at plan time, naming the key
    for (args, said) in [
        (
            &["--set", "default_scale=huge"][..],
            "default_scale`: `huge` is not one of the manifest's scales",
        ),
        (&["--set", "then=[nosuch]"], "`then` names `nosuch`"),
        (
            &["--scale", "paper", "--set", "scales.paper={iterations: 10}"],
            "`then` runs `theorem1` at scale `paper`",
        ),
        (&["--scale", "paper"], "has no scale `paper`"),
    ] {
        let o = repro(&[&["run", "--dry-run"], args].concat());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(said), "{args:?}: {err}");
    }

    let out = temp_out("quickstart");
    let run = |extra: &[&str]| {
        let at = [
            "run",
            "quickstart",
            "--scale",
            "smoke",
            "--out",
            out.to_str().unwrap(),
        ];
        repro(&[&at[..], extra].concat())
    };
    let o = run(&[]);
    let said = stdout(&o);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "{said}\n{err}");
    let runs = csv_rows(&out.join("runs.csv"));
    assert_eq!(runs.len(), 15);
    // the table beside the paper's Table 2, and the claims tested
    assert!(
        said.contains("| method | bits=2 (measured) | bits=2 (paper: ResNet20 on CIFAR-10) |"),
        "{said}"
    );
    assert!(
        said.contains("| moniqua | ") && said.contains("| 91.13 ± 0.12 |"),
        "{said}"
    );
    assert!(
        said.contains("| dcd | ") && said.contains("| diverge |"),
        "{said}"
    );
    assert!(
        said.contains("moniqua has a higher avg_test_accuracy than deepsqueeze"),
        "{said}"
    );
    assert!(out.join("claims.md").is_file() && out.join("figure.svg").is_file());
    assert!(
        err.contains(&format!("figure: {}", out.join("figure.svg").display())),
        "{err}"
    );
    // then Theorem 1, in a directory of the quickstart's, its table printed
    let theorem1 = csv_rows(&out.join("theorem1").join("runs.csv"));
    assert_eq!(theorem1.len(), 120);
    assert!(
        said.contains("| method | lr=0.5 | lr=0.1 | lr=0.02 |"),
        "{said}"
    );
    // and, last, what to run next
    let next = said.lines().last().unwrap_or_default();
    assert!(
        next.starts_with("Next: ") && next.contains("repro run table2 --scale cpu"),
        "{said}"
    );
    // the JSON summary holds both experiments
    let o = run(&["--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["experiment"], "quickstart");
    assert_eq!(json["then"][0]["experiment"], "theorem1");
    assert_eq!(json["then"][0]["ran"], 120);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn smoke_runs_every_algorithm() {
    let out = temp_out("smoke");
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 14);
    assert!(
        csv.lines().skip(1).all(|l| l.contains(",completed,")),
        "{csv}"
    );
    // the figure: one curve per algorithm, drawn from the logs
    let svg = std::fs::read_to_string(out.join("figure.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("moniqua") && svg.contains("iteration"));
    let curves = std::fs::read_to_string(out.join("curves.csv")).unwrap();
    assert!(curves.lines().count() > 14 * 10, "{curves}");
    // the same figure as PNG, and the results as Parquet for polars users
    let magic = |file: &str, head: &[u8], tail: &[u8]| {
        let bytes = std::fs::read(out.join(file)).unwrap();
        assert!(bytes.starts_with(head) && bytes.ends_with(tail), "{file}");
    };
    magic("figure.png", b"\x89PNG\r\n", b"IEND\xaeB`\x82");
    magic("runs.parquet", b"PAR1", b"PAR1");
    magic("curves.parquet", b"PAR1", b"PAR1");
    // `repro plot` redraws it from runs.csv and the logs, in one format if asked
    std::fs::remove_file(out.join("figure.svg")).unwrap();
    std::fs::remove_file(out.join("figure.png")).unwrap();
    let o = repro(&[
        "plot",
        "smoke",
        "--out",
        out.to_str().unwrap(),
        "--format",
        "png",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join("figure.png").is_file());
    assert!(!out.join("figure.svg").exists());
    let o = repro(&["plot", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join("figure.svg").is_file());
    // each curve counts the bytes a worker had sent, up to the run's total
    let rows = csv_rows(&out.join("runs.csv"));
    let points = csv_rows(&out.join("curves.csv"));
    for row in &rows {
        let sent: Vec<f64> = points
            .iter()
            .filter(|p| p["run_id"] == row["run_id"])
            .map(|p| p["bytes"].parse().unwrap())
            .collect();
        assert!(sent.windows(2).all(|w| w[0] <= w[1]), "{sent:?}");
        let total: f64 = row["counted_bytes_per_worker"].parse().unwrap();
        assert!(
            (sent.last().unwrap() - total).abs() <= 0.5,
            "{sent:?} {total}"
        );
    }
    // a fresh clone has no logs: `repro plot` draws the same figure from
    // curves.parquet and leaves the results files as they are
    let svg = std::fs::read(out.join("figure.svg")).unwrap();
    let parquet = std::fs::read(out.join("curves.parquet")).unwrap();
    let csv = std::fs::read(out.join("curves.csv")).unwrap();
    std::fs::rename(out.join("raw"), out.join("raw-kept")).unwrap();
    std::fs::remove_file(out.join("figure.svg")).unwrap();
    let o = repro(&["plot", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(out.join("figure.svg")).unwrap(), svg);
    assert_eq!(std::fs::read(out.join("curves.parquet")).unwrap(), parquet);
    assert_eq!(std::fs::read(out.join("curves.csv")).unwrap(), csv);
    // with neither, the error says what is missing
    std::fs::rename(out.join("curves.parquet"), out.join("curves.kept")).unwrap();
    let o = repro(&["plot", "smoke", "--out", out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no curves.parquet holds these runs"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(out.join("curves.kept"), out.join("curves.parquet")).unwrap();
    std::fs::rename(out.join("raw-kept"), out.join("raw")).unwrap();
    // panels of several experiments in one figure (as the paper's Figure 2),
    // read from results/<experiment> under the working directory
    let root = temp_out("combined");
    std::fs::create_dir_all(root.join("results")).unwrap();
    std::os::unix::fs::symlink(&out, root.join("results").join("smoke")).unwrap();
    // a project: its experiments/ (the shipped ones) and its results/
    std::os::unix::fs::symlink(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments"),
        root.join("experiments"),
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args([
            "plot", "smoke", "--with", "smoke", "--name", "both", "--title", "Two",
        ])
        .current_dir(&root)
        .output()
        .expect("run repro");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(root.join("results/both/figure.svg")).unwrap();
    let own = std::fs::read_to_string(out.join("figure.svg")).unwrap();
    assert!(svg.contains("\nTwo\n"), "the combined title");
    // twice the panels: every series label appears twice as often
    assert_eq!(
        svg.matches("moniqua").count(),
        2 * own.matches("moniqua").count()
    );
    assert!(root.join("results/both/figure.png").is_file());
    let o = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(["plot", "smoke", "--with", "smoke", "--name", "../x"])
        .current_dir(&root)
        .output()
        .expect("run repro");
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn dry_run_and_overrides() {
    let o = repro(&["run", "theorem1", "--dry-run", "--set", "grid.seed=[0]"]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("12 runs"), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains(" seed=0")).count(), 12);
}

/// The worked example of extending (docs/extending.md): CHOCO-SGD and
/// DeepSqueeze with top-k and random-k through the driver, tuned and run
/// on three seeds. Each sends a sparse frame of 49 bytes (44-byte header,
/// one 6-bit index into 50 values, one f32) to each of two neighbours per
/// iteration, where D-PSGD sends 244 (50 f32).
#[test]
fn the_sparsifier_example_runs_through_the_driver() {
    let out = temp_out("convex-sparse");
    let o = repro(&[
        "-q",
        "run",
        "convex-sparse",
        "scales.smoke.iterations=100",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = csv_rows(&out.join("runs.csv"));
    assert_eq!(rows.len(), 18);
    let per_run = |frame: u64| (100 * 8 * 2 * frame).to_string();
    for r in &rows {
        assert_eq!(r["status"], "completed", "{r:?}");
        let want = if r["algorithm"] == "d-psgd" {
            per_run(44 + 4 * 50)
        } else {
            per_run(44 + 1 + 4)
        };
        assert_eq!(r["bytes"], want, "{r:?}");
        let subopt: f64 = r["subopt"].parse().unwrap();
        assert!(subopt.is_finite() && subopt > 0.0, "{r:?}");
    }
    assert!(out.join("tuning.md").is_file() && out.join("figure.svg").is_file());
    std::fs::remove_dir_all(&out).unwrap();
}

/// `sim-scale` through the driver: every run records its time per
/// iteration against reading every model once, and the resident memory it
/// added at its peak is within a quarter of what the plan expected; a run
/// that needs more than `--max-memory` is refused before anything runs,
/// with what it needs, and the others still run.
#[test]
fn a_simulator_run_measures_its_peak_memory() {
    let out = temp_out("sim-memory");
    // 32 workers of 200k coordinates: one copy of every model is 25.6 MB
    let o = repro(&[
        "run",
        "sim-scale",
        "--scale",
        "cpu",
        "grid.workers=[32]",
        "grid.dim=[200000]",
        "scales.cpu.iterations=4",
        "params.threads=2",
        "--max-memory",
        "0.1",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    // a refused run did not run: exit 3, as for a failed one
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    let runs = csv_rows(&out.join("runs.csv"));
    assert_eq!(runs.len(), 4, "{stderr}");
    for r in &runs {
        let what = format!("{} at {} bits", r["algorithm"], r["bits"]);
        if r["algorithm"] == "choco" {
            // per worker the model, x^ and s, and the step CHOCO's send
            // reads (4 x 25.6 MB), per thread two scratch vectors, once the
            // 11 targets and their means (14 x 0.8 MB), and the 1-bit frames
            assert_eq!(r["status"], "refused", "{what}");
            assert!(
                (number(r, "memory_mb") - 117.63).abs() < 0.01,
                "{what}: {r:?}"
            );
            assert!(stderr.contains("would need 0.1 GB"), "{stderr}");
            continue;
        }
        assert_eq!(r["status"], "completed", "{what}: {stderr}");
        assert!(number(r, "iteration_s") > 0.0 && number(r, "stream_s") > 0.0);
        // the ratio of two timings, so the test checks how it is made and
        // never how large it is: a loaded host can read the models slower
        // than it runs an iteration (CI once saw 0.69)
        let ratio = number(r, "iteration_s") / number(r, "stream_s");
        assert!(
            (number(r, "stream_ratio") - ratio).abs() <= 1e-6 * ratio,
            "{what}: {r:?}"
        );
        assert_eq!(number(r, "coordinates"), 32.0 * 200_000.0);
        let ratio = number(r, "peak_over_memory");
        assert!(
            (0.75..=1.25).contains(&ratio),
            "{what}: peak / planned {ratio}: {r:?}"
        );
    }
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("refused: needs 0.1 GB"), "{table}");
    std::fs::remove_dir_all(&out).unwrap();
}

/// The memory experiment measures each worker's extra memory from the
/// process's peak resident memory, and it matches the plan's parts: state,
/// frames and optimizer buffers per worker (16 workers of 1M coordinates,
/// a model 4 MB, 8-bit frames).
#[test]
fn extra_memory_is_measured_from_resident_memory() {
    let out = temp_out("extra-memory");
    let o = repro(&[
        "run",
        "memory",
        "--scale",
        "smoke",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let runs = csv_rows(&out.join("runs.csv"));
    assert_eq!(runs.len(), 6, "{stderr}");
    for r in &runs {
        let what = &r["algorithm"];
        assert_eq!(r["status"], "completed", "{what}: {stderr}");
        assert_eq!(number(r, "model_mb"), 4.0, "{what}");
        let planned =
            number(r, "state_models") + number(r, "frames_models") + number(r, "optimizer_models");
        let measured = number(r, "measured_extra_models");
        // the averaged model of the metrics adds 1/16 of a model
        assert!(
            (measured - planned).abs() < 0.35,
            "{what}: measured {measured} models, planned {planned}: {r:?}"
        );
        if what == "moniqua" {
            // two neighbours' 8-bit frames, a quarter model each, and no
            // copy of the model: under one model, where D-PSGD's is two
            assert!((0.49..0.51).contains(&number(r, "frames_models")), "{r:?}");
            assert!(measured < 1.0, "{r:?}");
            assert_eq!(number(r, "extra_memory_models"), 0.0);
        }
        if what == "choco" {
            // x^ and s, and the step its send reads
            assert!((2.8..3.5).contains(&measured), "{r:?}");
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_failing_run_is_reported_and_the_others_still_run() {
    let out = temp_out("failing");
    // a data directory without the data: the Fashion-MNIST run fails when
    // its trainer loads the data (the plan checks the directory is one,
    // not what it holds); the synthetic run never looks
    let empty = temp_out("failing-data");
    std::fs::create_dir_all(&empty).unwrap();
    let set = format!("params.data_dir={}", empty.display());
    let o = repro_cmd(&[
        "run",
        "mpi-smoke",
        "--backend",
        "in-process",
        "--set",
        "grid.algorithm=[d-psgd]",
        "--set",
        "grid.dataset=[synthetic, fashion-mnist]",
        "--set",
        &set,
        "--out",
        out.to_str().unwrap(),
    ])
    .output()
    .expect("run repro");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{stderr}");
    let runs = read_runs(&out);
    let status = |dataset: &str| {
        runs.iter()
            .find(|r| r["dataset"] == dataset)
            .map(|r| r["status"].clone())
    };
    assert_eq!(
        status("synthetic").as_deref(),
        Some("completed"),
        "{stderr}"
    );
    assert_eq!(
        status("fashion-mnist").as_deref(),
        Some("failed"),
        "{stderr}"
    );
    assert!(stderr.contains(empty.to_str().unwrap()), "{stderr}");
    // the failure's reason is in runs.csv
    let failed = runs.iter().find(|r| r["status"] == "failed").unwrap();
    assert!(
        failed["error"].contains(empty.to_str().unwrap()),
        "{failed:?}"
    );
    let _ = std::fs::remove_dir_all(&empty);
}

/// `--backend local`: Figure 1's methods as workers of one process under a
/// virtual 1 Mbit/s network, no root and no MPI. Every run completes and
/// learns, the shaping column says how the network was modelled, the time
/// per epoch is the wire time of the bytes sent (plus a little compute),
/// and Moniqua's 8-bit frames make its epochs about 4x shorter than
/// D-PSGD's.
#[test]
fn local_backend_models_the_network_with_a_virtual_clock() {
    let out = temp_out("local");
    let o = repro_cmd(&[
        "run",
        "figure1",
        "--backend",
        "local",
        "--set",
        "grid.algorithm=[d-psgd,moniqua]",
        "--set",
        "grid.network=[{bandwidth: 1mbit, latency: 1ms}]",
        "--out",
        out.to_str().unwrap(),
    ])
    .output()
    .expect("run repro");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs = read_runs(&out);
    assert_eq!(runs.len(), 2);
    let mut epoch = std::collections::BTreeMap::new();
    for r in &runs {
        assert_eq!(r["status"], "completed", "{r:?}");
        assert!(
            r["shaping"].starts_with("virtual clock (in-process)"),
            "{r:?}"
        );
        let over: f64 = r["time_over_bound"].parse().unwrap();
        assert!((0.95..1.3).contains(&over), "{r:?}");
        epoch.insert(
            r["algorithm"].clone(),
            r["epoch_time_s"].parse::<f64>().unwrap(),
        );
        // the run's time is the virtual clock's
        let (wall, virt) = (
            r["wall_s"].parse::<f64>().unwrap(),
            r["virtual_s"].parse::<f64>().unwrap(),
        );
        assert!((wall - virt).abs() < 1e-3, "{r:?}");
    }
    let speedup = epoch["d-psgd"] / epoch["moniqua"];
    assert!((3.0..4.2).contains(&speedup), "{epoch:?}");
    // the figure's time axis names the clock the runs kept, on the run and
    // when `repro plot` redraws it (the backend from provenance.json)
    for redraw in [false, true] {
        if redraw {
            let o = repro(&[
                "plot",
                "figure1",
                "--out",
                out.to_str().unwrap(),
                "--format",
                "svg",
            ]);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let svg = std::fs::read_to_string(out.join("figure.svg")).unwrap();
        assert!(
            svg.contains("virtual time (s; measured compute, modelled network)"),
            "redraw {redraw}"
        );
        assert!(!svg.contains("wall-clock"), "redraw {redraw}");
    }
    // `in-process` is the backend's name; `local`, its first, plans the
    // same runs with the same ids, as a flag and in a manifest
    let plan = |args: &[&str]| {
        let o = repro(args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        common::unstamped(&String::from_utf8_lossy(&o.stdout))
    };
    let named = plan(&["run", "figure1", "--backend", "in-process", "--dry-run"]);
    assert!(named.contains("(backend in-process)"), "{named}");
    assert_eq!(
        named,
        plan(&["run", "figure1", "--backend", "local", "--dry-run"])
    );
    assert_eq!(
        named,
        plan(&["run", "figure1", "--set", "backend=local", "--dry-run"])
    );
    // the asynchronous algorithms need real threads and time
    refused(
        &["run", "figure2b", "--backend", "local", "--dry-run"],
        "mpi backend only",
    );
}

/// Regression: stopping a rerun (SIGTERM) used to overwrite the runs.csv
/// rows of runs that had finished in an earlier invocation with "not run
/// (interrupted)". Now a run whose complete logs for the same id are there
/// is summarized from them, as with --resume; only the run that was
/// stopped is lost. (Local backend: no root, no MPI.)
#[test]
fn an_interrupted_rerun_keeps_the_runs_that_finished_before() {
    let out = temp_out("interrupted-rerun");
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "mpi-smoke", "--backend", "local", "--out"];
        args.push(out.to_str().unwrap());
        args.extend_from_slice(extra);
        repro_cmd(&args)
    };
    let o = run(&[]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before = read_runs(&out);
    assert_eq!(before.len(), 2);
    // a rerun with a long new run first: stopped while that one trains
    let mut child = run(&[
        "--set",
        "grid.algorithm=[allreduce,d-psgd,moniqua]",
        "--set",
        "cases=[{when: {algorithm: allreduce}, set: {iterations: 1000000}}]",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_for_trainer(&mut child, &out);
    kill("-TERM", child.id());
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(130), "{stderr}");
    let after = read_runs(&out);
    assert_eq!(after.len(), 3, "{stderr}");
    for old in &before {
        let now = after
            .iter()
            .find(|r| r["run_id"] == old["run_id"])
            .unwrap_or_else(|| panic!("{} lost: {stderr}", old["run_id"]));
        assert_eq!(now["status"], "completed", "{stderr}");
        assert_eq!(now["avg_test_accuracy"], old["avg_test_accuracy"]);
    }
    assert!(stderr.contains("interrupted, so not run again"), "{stderr}");
}

/// Without the trainer next to `repro` (and no REPRO_TRAIN), an MPI
/// experiment stops before its first run with one message saying how to
/// build it, instead of failing every run.
#[test]
fn a_missing_trainer_is_one_error_before_any_run() {
    let dir = temp_out("no-trainer");
    std::fs::create_dir_all(&dir).unwrap();
    let lonely = dir.join("repro");
    std::fs::copy(env!("CARGO_BIN_EXE_repro"), &lonely).unwrap();
    let out = dir.join("out");
    let o = Command::new(&lonely)
        .args(["run", "mpi-smoke", "--out", out.to_str().unwrap()])
        .env_remove("REPRO_TRAIN")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cargo build --release --locked -p repro -p repro-trainer"),
        "{stderr}"
    );
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// In a new shell, with nothing sourced (no LD_LIBRARY_PATH, no venv on
/// the PATH), the quickstart's smoke scale runs: the trainer finds its
/// libtorch by the run path its build recorded, and a second run of the
/// same build verifies as reproduced in every cell. A trainer that does
/// not start stops `repro run` before the first run, with one message
/// that names the fix.
#[test]
fn a_new_shell_runs_the_quickstart_or_stops_with_the_fix() {
    let out = temp_out("new-shell");
    let bare = |train: &Path, out: &Path| {
        Command::new(env!("CARGO_BIN_EXE_repro"))
            .args(["run", "quickstart", "--scale", "smoke", "--quiet", "--out"])
            .arg(out)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .env("REPRO_TRAIN", train)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .expect("run repro")
    };
    let o = bare(&train_binary(), &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let rows = read_runs(&out);
    assert_eq!(rows.len(), 15, "{stderr}");
    assert!(rows.iter().all(|r| r["status"] != "failed"), "{rows:?}");
    // the same build on the same machine again, in the test's own
    // environment: every cell the same, to the digit
    let again = temp_out("new-shell-again");
    let o = repro(&[
        "run",
        "quickstart",
        "--scale",
        "smoke",
        "--quiet",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = repro(&[
        "verify",
        out.to_str().unwrap(),
        "--against",
        again.to_str().unwrap(),
        "--brief",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("10 of 10 verdicts the same, 17 of 17 cells equivalent"),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&again);
    // a trainer whose libraries are not found (as the loader says it)
    let broken = temp_out("new-shell-broken");
    std::fs::create_dir_all(&broken).unwrap();
    let fake = broken.join("repro-train");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'repro-train: error while loading shared libraries: libtorch_cuda.so: cannot open shared object file' >&2\nexit 127\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let none = broken.join("out");
    let o = bare(&fake, &none);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("does not start").count(), 1, "{stderr}");
    assert!(
        stderr.contains("libtorch_cuda.so") && stderr.contains("Fix:"),
        "{stderr}"
    );
    assert!(!none.exists(), "a directory was made before the first run");
    for d in [out, broken] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// A subset rerun updates only its own rows: every other run of the
/// earlier invocation stays in runs.csv; the table the rerun writes is its
/// own plan's (never a mix of two settings).
#[test]
fn a_subset_rerun_keeps_every_other_row() {
    let out = temp_out("subset");
    let dir = out.to_str().unwrap();
    let o = repro(&["run", "smoke", "--out", dir]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let o = repro(&[
        "run",
        "smoke",
        "--set",
        "grid.algorithm=[moniqua]",
        "--set",
        "params.lr=0.07",
        "--out",
        dir,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let after = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let (b, a): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.lines().collect());
    // rerun with another lr: a new run id at the same point, added beside
    // the earlier one; every earlier row as it was
    assert_eq!(a.len(), b.len() + 1, "{after}");
    assert_eq!(a[..b.len()], b[..], "an earlier row changed");
    let added = a[b.len()];
    assert!(
        added.contains(",moniqua,") && added.contains("0.07"),
        "{added}"
    );
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("| moniqua |"), "{table}");
    assert!(!table.contains("| choco |"), "{table}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A results directory has one writer: a second `repro run` into a
/// directory another live process holds is refused and names the holder;
/// a lock left by a dead process is taken over.
#[test]
fn a_second_run_into_a_held_directory_is_refused() {
    let out = temp_out("locked");
    std::fs::create_dir_all(&out).unwrap();
    // this test process stands for a running repro
    std::fs::write(
        out.join(".lock"),
        format!("{}\nrepro run smoke\n", std::process::id()),
    )
    .unwrap();
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("in use by another repro"), "{err}");
    assert!(err.contains(&std::process::id().to_string()), "{err}");
    assert!(!out.join("runs.csv").exists());
    // the holder is gone: the next run takes the lock over and releases it
    std::fs::write(out.join(".lock"), "999999999\nrepro run smoke\n").unwrap();
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.join(".lock").exists());
    let _ = std::fs::remove_dir_all(&out);
}

/// The simulator stops between iterations on SIGTERM: the driver exits
/// with 130 at once, and the earlier invocation's rows stay, the stopped
/// run's included (a run stopped part-way replaces no result).
#[test]
fn a_simulator_run_stops_on_sigterm_and_replaces_nothing() {
    let out = temp_out("sim-sigterm");
    let dir = out.to_str().unwrap();
    let o = repro(&["run", "smoke", "--out", dir]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let raw = out.join("raw");
    let logs = || -> Vec<(String, u64)> {
        std::fs::read_dir(&raw)
            .unwrap()
            .flatten()
            .map(|e| {
                let len = e.metadata().map_or(0, |m| m.len());
                (e.file_name().to_string_lossy().into_owned(), len)
            })
            .collect()
    };
    let earlier: Vec<String> = logs().into_iter().map(|(n, _)| n).collect();
    let child = repro_cmd(&[
        "run",
        "smoke",
        "--set",
        "grid.algorithm=[d-psgd]",
        "--set",
        "scales.smoke.iterations=2000000000",
        "--out",
        dir,
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // running: a new log has grown past its header
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let grown = logs()
            .iter()
            .any(|(name, len)| !earlier.contains(name) && *len > 2000);
        if grown {
            break;
        }
        assert!(Instant::now() < deadline, "the long run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    kill("-TERM", child.id());
    let (code, stderr) = finish(child);
    assert_eq!(code, Some(130), "{stderr}");
    let after = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    assert_eq!(after, before, "{stderr}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The driver SIGKILLed at every write and every rename of a rerun (strace
/// stops it there) never leaves a results directory less than whole: every
/// earlier run, its log and the table stay as they were, each file complete,
/// and the next run tidies up what the killed one left.
#[test]
fn a_results_directory_survives_the_driver_killed_at_any_write() {
    let strace = ["/usr/bin/strace", "/bin/strace"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("strace is needed to stop the driver at a write (ci/setup.sh installs it)");
    let out = temp_out("sigkill");
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    let ids = |out: &Path| {
        let mut ids: Vec<String> = read_runs(out)
            .iter()
            .map(|r| format!("{} {}", r["run_id"], r["status"]))
            .collect();
        ids.sort();
        ids
    };
    let before = ids(&out);
    assert_eq!(before.len(), 14);
    let whole = |file: &str, head: &[u8], tail: &[u8]| {
        let bytes = std::fs::read(out.join(file)).unwrap();
        assert!(bytes.starts_with(head) && bytes.ends_with(tail), "{file}");
    };
    let mut kills = 0;
    for call in ["write", "rename"] {
        for k in 1.. {
            assert!(k < 1000, "the run never got past {call} {k}");
            let o = Command::new(strace)
                .args(["-f", "-qq", "-o", "/dev/null", "-e"])
                .arg(format!("trace={call}"))
                .arg("-e")
                .arg(format!("inject={call}:signal=KILL:when={k}"))
                .args([env!("CARGO_BIN_EXE_repro"), "run", "smoke", "--out"])
                .arg(&out)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .output()
                .expect("run strace");
            // every file whole, every earlier run kept
            assert_eq!(ids(&out), before, "killed at {call} {k}");
            assert_eq!(
                std::fs::read_to_string(out.join("table.md")).unwrap(),
                table,
                "killed at {call} {k}"
            );
            for id in &before {
                let id = id.split(' ').next().unwrap();
                let log = std::fs::read_to_string(out.join(format!("raw/{id}.jsonl"))).unwrap();
                let last = log.lines().last().unwrap_or("");
                assert!(last.contains("\"type\":\"end\""), "{id} at {call} {k}");
            }
            whole("runs.parquet", b"PAR1", b"PAR1");
            whole("curves.parquet", b"PAR1", b"PAR1");
            whole("figure.png", b"\x89PNG\r\n", b"IEND\xaeB`\x82");
            whole("figure.svg", b"<svg", b"</svg>\n");
            if o.status.success() {
                break; // past the last call: nothing was killed
            }
            kills += 1;
        }
    }
    eprintln!("killed the driver {kills} times");
    assert!(kills > 40, "only {kills} kills");
    // the next run takes over the dead driver's lock and tidies up
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for dir in [out.clone(), out.join("raw")] {
        let hidden: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(hidden.is_empty(), "left in {}: {hidden:?}", dir.display());
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// `pin_cores` pins each worker to one CPU (round robin over the CPUs the
/// process may use), and the trainer says where each went.
#[test]
fn workers_can_be_pinned_to_cores() {
    let out = temp_out("pin");
    let o = repro(&[
        "run",
        "mpi-smoke",
        "--backend",
        "in-process",
        "--set",
        "params.pin_cores=true",
        "--set",
        "grid.algorithm=[d-psgd]",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let raw = std::fs::read_dir(out.join("raw"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let said = std::fs::read_to_string(raw.join("mpirun.stderr")).unwrap();
    for rank in 0..3 {
        assert!(
            said.contains(&format!("rank {rank} pinned to CPU ")),
            "{said}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A LIBSVM file (gzipped, labels 0/1) through the simulator from a
/// manifest: logistic regression with a decaying step size from a Gaussian
/// start point, split in file order; epochs count passes over a shard.
#[test]
fn a_libsvm_file_runs_through_the_simulator() {
    use std::io::Write as _;
    let dir = temp_out("libsvm");
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.join("toy.svm.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&data).unwrap(),
        flate2::Compression::default(),
    );
    for s in 0..200u32 {
        let x1 = (s % 7) as f32 / 7.0 - 0.5;
        let x3 = (s % 5) as f32 / 5.0 - 0.4;
        let label = u32::from(x1 + 0.5 * x3 > 0.0);
        writeln!(gz, "{label} 1:{x1} 3:{x3} 5:1").unwrap();
    }
    gz.finish().unwrap();
    let manifest = dir.join("convex.yaml");
    let text = format!(
        "name: convex-toy
title: toy
source: tests
backend: sim
scales: {{ smoke: {{}} }}
grid: {{ algorithm: [d-psgd, choco] }}
params:
  workers: 4
  topology: ring
  objective: logistic
  data: {}
  split: file-order
  batch: 1
  weight_decay: 0.01
  schedule: decay
  decay_a: 1.0
  decay_tau: 10
  x0: gaussian
  x0_scale: 0.5
  iterations: 200
  log_every: 10
  eval_every: 1
  bits: 4
  gamma: 0.5
table: {{ rows: [algorithm], value: subopt }}
figure: {{ x: epoch, also_x: [bytes], y: subopt, series: algorithm, log_y: true }}
",
        data.display()
    );
    std::fs::write(&manifest, text).unwrap();
    let out = dir.join("out");
    let o = repro(&[
        "run",
        manifest.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = csv_rows(&out.join("runs.csv"));
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r["status"], "completed", "{r:?}");
        let loss: f64 = r["final_loss"].parse().unwrap();
        // below log 2, where the zero model sits
        assert!(loss < std::f64::consts::LN_2, "{r:?}");
    }
    // f(x_bar) - f* per epoch (50 samples a worker, batch 1: every 50
    // iterations), positive and falling; f* cached beside the data
    let points = csv_rows(&out.join("curves.csv"));
    let d: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p["algorithm"] == "d-psgd")
        .map(|p| (p["epoch"].parse().unwrap(), p["subopt"].parse().unwrap()))
        .collect();
    assert_eq!(
        d.iter().map(|p| p.0).collect::<Vec<_>>(),
        [1.0, 2.0, 3.0, 4.0],
        "{d:?}"
    );
    assert!(d.iter().all(|p| p.1 > 0.0) && d[3].1 < d[0].1, "{d:?}");
    let end: f64 = rows.iter().find(|r| r["algorithm"] == "d-psgd").unwrap()["subopt"]
        .parse()
        .unwrap();
    assert!((end - d[3].1).abs() < 1e-9, "{end} vs {d:?}");
    // f* cached in the results' raw/, never beside the data
    let cache = |out: &Path| -> f64 {
        let file = std::fs::read_dir(out.join("raw"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("fstar-")
            })
            .expect("an f* cache in raw/");
        let text = std::fs::read_to_string(file).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(json["grad_inf"].as_f64().unwrap() <= 1e-8, "{json}");
        json["fstar"].as_f64().unwrap()
    };
    // the figure per epoch, and again per byte sent
    let svg = std::fs::read_to_string(out.join("figure.svg")).unwrap();
    assert!(svg.contains("against bytes") && svg.contains("bytes sent per worker"));
    let fstar = cache(&out);
    assert!(fstar > 0.0 && fstar < std::f64::consts::LN_2);
    let beside: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("fstar"))
        .collect();
    assert!(beside.is_empty(), "written beside the data: {beside:?}");
    // from the Gaussian start, not from zero (whose loss is log 2 exactly)
    let log = std::fs::read_dir(out.join("raw"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let parsed = repro_runlog::read_log(std::fs::read_to_string(&log).unwrap().as_bytes()).unwrap();
    let l0 = parsed.steps[0].train_loss;
    assert!((l0 - std::f64::consts::LN_2).abs() > 1e-3, "{l0}");
    assert!(
        (parsed.steps[1].epoch - 0.2).abs() < 1e-12,
        "{:?}",
        parsed.steps[1]
    );
    // the same set bzip2-compressed reads the same
    let bz = dir.join("toy.svm.bz2");
    let plain = {
        use std::io::Read as _;
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&data).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        text
    };
    let mut enc = bzip2::write::BzEncoder::new(
        std::fs::File::create(&bz).unwrap(),
        bzip2::Compression::default(),
    );
    enc.write_all(plain.as_bytes()).unwrap();
    enc.finish().unwrap();
    let again = dir.join("again");
    let set = format!("params.data={}", bz.display());
    let o = repro(&[
        "run",
        manifest.to_str().unwrap(),
        "--set",
        &set,
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let losses = |rows: &[std::collections::HashMap<String, String>]| {
        rows.iter()
            .map(|r| r["final_loss"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(losses(&csv_rows(&again.join("runs.csv"))), losses(&rows));
    assert_eq!(cache(&again), fstar, "the same optimum from the bzip2 copy");
    // a missing file and a bad schedule are refused before anything runs
    for (set, says) in [
        ("params.data=/nonexistent.svm", "`data`"),
        ("params.decay_a=0", "decay_a > 0"),
        ("params.x0=ones", "unknown x0"),
    ] {
        refused(
            &["run", manifest.to_str().unwrap(), "--set", set, "--dry-run"],
            says,
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Moniqua's failed-recovery rate is measured: every frame a rank receives
/// is checked by the hash, so failed plus verified frames are iterations x
/// workers x neighbours; a modulus far below the models' distance fails
/// some, a wide one none. (In-process backend: no root, no MPI.)
#[test]
fn moniquas_failed_recoveries_are_a_share_of_the_frames_checked() {
    let rate_at = |modulus: &str| {
        let out = temp_out(&format!("wrap-{modulus}"));
        let o = repro_cmd(&[
            "run",
            "mpi-smoke",
            "--backend",
            "in-process",
            "--set",
            "grid.algorithm=[moniqua]",
            "--set",
            "params.bits=2",
            "--set",
            "params.lr=0.05",
            "--set",
            "params.hash=count",
            "--set",
            &format!("params.modulus={modulus}"),
            "--set",
            &format!("params.theta={modulus}"),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .expect("run repro");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = read_runs(&out).remove(0);
        assert_eq!(r["status"], "completed", "{r:?}");
        let count = |k: &str| r[k].parse::<u64>().unwrap();
        // 40 iterations, 3 workers on a ring, 2 neighbours each
        assert_eq!(
            count("hash_failures") + count("hash_verified"),
            240,
            "{r:?}"
        );
        let rate: f64 = r["failed_recovery_rate"].parse().unwrap();
        assert_eq!(rate, count("hash_failures") as f64 / 240.0);
        rate
    };
    assert_eq!(rate_at("4.0"), 0.0);
    let tight = rate_at("0.0005");
    assert!(tight > 0.0 && tight <= 1.0, "{tight}");
}

/// `theta: theorem2` is the paper's first method as written: the warm-up
/// tracks the infinity norm of the stochastic gradient, and Theorem 2's
/// expression (no gamma) sets theta. `theta: theorem3-step` tracks the local step
/// and divides by gamma (Theorem 3). After a one-iteration warm-up without
/// weight decay the first step is `lr g`, so with gamma 0.5 the two thetas
/// differ by exactly that factor. The simulator, which sees no stochastic
/// gradient, refuses `theorem2` at plan time.
#[test]
fn theorem2_theta_comes_from_the_gradient_without_gamma() {
    let out = temp_out("theorem2");
    let o = repro(&[
        "run",
        "mpi-smoke",
        "--backend",
        "in-process",
        "--set",
        "grid.algorithm=[moniqua]",
        "--set",
        "grid.theta=[theorem3-step, theorem2]",
        "--set",
        "params.theta_warmup=1",
        "--set",
        "params.weight_decay=0",
        "--set",
        "params.gamma=0.5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs = read_runs(&out);
    let theta = |which: &str| -> f64 {
        let r = runs.iter().find(|r| r["theta"] == which).unwrap();
        assert_eq!(r["status"], "completed", "{r:?}");
        r["theta_used"].parse().unwrap()
    };
    let (step, theorem2) = (theta("theorem3-step"), theta("theorem2"));
    assert!(theorem2 > 0.0, "{runs:?}");
    assert!(
        (theorem2 - 0.5 * step).abs() <= 1e-5 * theorem2,
        "theorem2 {theorem2}, theorem3-step {step}"
    );
    refused(
        &[
            "run",
            "smoke",
            "--set",
            "params.theta=theorem2",
            "--dry-run",
        ],
        "`theta: theorem2` tracks",
    );
    // the old name says what the value is called now
    refused(
        &["run", "smoke", "--set", "params.theta=auto", "--dry-run"],
        "is now `theta: theorem3-step`",
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// The readings of B_theta at 1 bit with stochastic rounding, where Lemma
/// 2's `2 theta / (1 - 2 delta)` is undefined (delta = 1/2): `lemma2` is
/// refused at plan time naming the other readings; `half-step` gives B =
/// 4 theta and `lemma1` B = 2 theta, and each run records the theta and
/// the modulus it ran with (`theta_used`, `modulus_used`). With `theta:
/// theorem2` the modulus follows the theta the warm-up picked.
#[test]
fn each_reading_of_b_theta_records_the_modulus_it_ran_with() {
    let o = repro(&[
        "run",
        "mpi-smoke",
        "--set",
        "params.bits=1",
        "--set",
        "params.rounding=stochastic",
        "--dry-run",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("`b_theta: half-step`"), "{err}");
    let out = temp_out("b-theta");
    let o = repro(&[
        "run",
        "mpi-smoke",
        "--backend",
        "in-process",
        "--set",
        "grid.algorithm=[moniqua]",
        "--set",
        "grid.b_theta=[half-step, lemma1]",
        "--set",
        "grid.theta=[2.0, theorem2]",
        "--set",
        "params.bits=1",
        "--set",
        "params.theta_warmup=3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs = read_runs(&out);
    assert_eq!(runs.len(), 4, "{runs:?}");
    for r in &runs {
        assert_eq!(r["status"], "completed", "{r:?}");
        let theta: f64 = r["theta_used"].parse().unwrap();
        let modulus: f64 = r["modulus_used"].parse().unwrap();
        let times = if r["b_theta"] == "half-step" {
            4.0
        } else {
            2.0
        };
        if r["theta"] == "2.0" {
            assert_eq!(theta, 2.0, "{r:?}");
        } else {
            assert!(theta > 0.0 && theta != 2.0, "{r:?}");
        }
        assert!((modulus - times * theta).abs() <= 1e-5 * modulus, "{r:?}");
    }
    let _ = std::fs::remove_dir_all(&out);
}
