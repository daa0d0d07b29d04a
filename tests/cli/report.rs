//! What reads the records: tables, comparisons, verify, status, exports,
//! and the files other tools open.

use super::*;

/// Runs `script` with `args` in the virtualenv `venv`: whether it
/// succeeded, and what it printed (stdout, then stderr).
fn venv_python(venv: &std::ffi::OsStr, script: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(Path::new(venv).join("bin/python"))
        .arg(script)
        .args(args)
        .output()
        .expect("run the virtualenv's python");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// The Parquet files load in pyarrow (filters included) and pandas, with the
/// rows of the CSV files beside them. `ci/setup.sh` installs both into the
/// virtualenv it names in `REPRO_VENV`; without that variable the test skips.
#[test]
fn parquet_files_read_back_in_pyarrow_and_pandas() {
    let Some(venv) = std::env::var_os("REPRO_VENV") else {
        skipped("REPRO_VENV is not set (source the env.sh that ci/setup.sh writes)");
        return;
    };
    let out = temp_out("pyarrow");
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/read_parquet.py");
    let (ok, said) = venv_python(&venv, &script, &[out.to_str().unwrap()]);
    assert!(ok, "{said}");
    assert!(said.contains("runs.parquet: 14 rows"), "{said}");
    assert!(said.contains("curves.parquet:"), "{said}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The figure.py beside a figure recomputes its series from curves.parquet
/// as repro drew them (`--check`: no difference; with another smoothing
/// window, differences) and draws it with matplotlib. Needs the virtualenv
/// `ci/setup.sh` names in `REPRO_VENV`; without it the test skips.
#[test]
fn figure_py_redraws_the_figure_with_matplotlib() {
    let Some(venv) = std::env::var_os("REPRO_VENV") else {
        skipped("REPRO_VENV is not set (source the env.sh that ci/setup.sh writes)");
        return;
    };
    let out = temp_out("figure-py");
    let o = repro(&[
        "run",
        "quickstart",
        "--scale",
        "smoke",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let python = |script: &Path, args: &[&str]| venv_python(&venv, script, args);
    let script = out.join("figure.py");
    let (ok, said) = python(&script, &["--check"]);
    assert!(ok && said.contains("check: 0 differences"), "{said}");
    let (ok, said) = python(&script, &[]);
    assert!(ok, "{said}");
    let png = std::fs::metadata(out.join("figure-matplotlib.png")).unwrap();
    assert!(png.len() > 10_000, "{png:?}");
    // the check can fail: another smoothing window gives other numbers
    let text = std::fs::read_to_string(&script).unwrap();
    let at = text.find("\"smooth\": ").unwrap();
    let other = format!(
        "{}\"smooth\": 3{}",
        &text[..at],
        &text[text[at..].find(',').unwrap() + at..]
    );
    let altered = out.join("altered.py");
    std::fs::write(&altered, other).unwrap();
    let (ok, said) = python(&altered, &["--check"]);
    assert!(!ok && !said.contains("check: 0 differences"), "{said}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `repro export` writes what MLflow's and TensorBoard's own readers open:
/// a smoke run's export has each run with its parameters, status, health,
/// final loss and curve (tests/fixtures/read_exports.py checks them against
/// runs.csv and curves.csv), and the export of every committed result opens
/// whole. `ci/setup.sh` installs mlflow-skinny and tensorboard into the
/// virtualenv it names in `REPRO_VENV`; without that variable the test skips.
#[test]
fn exports_open_in_mlflow_and_tensorboard() {
    let Some(venv) = std::env::var_os("REPRO_VENV") else {
        skipped("REPRO_VENV is not set (source the env.sh that ci/setup.sh writes)");
        return;
    };
    let out = temp_out("export");
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/read_exports.py");
    let read = |args: &[&str]| {
        let (ok, said) = venv_python(&venv, &script, args);
        assert!(ok, "{said}");
        said
    };
    let (mlflow, tb) = (out.join("mlflow"), out.join("tensorboard"));
    for (target, dir) in [("mlflow", &mlflow), ("tensorboard", &tb)] {
        let o = repro(&[
            "export",
            target,
            "smoke",
            "--out",
            out.to_str().unwrap(),
            "--to",
            dir.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let said = read(&[
        "runs",
        mlflow.to_str().unwrap(),
        tb.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(
        said.contains("mlflow: 14 runs; tensorboard: 14 runs; curves of train_loss: 14"),
        "{said}"
    );
    // every recorded result of a project (the results fixture's three)
    let project = common::fixture_project("export-all");
    let recorded: usize = ["theorem1", "figure1-compute", "memory"]
        .iter()
        .map(|e| csv_rows(&project.join("results").join(e).join("runs.csv")).len())
        .sum();
    let (mlflow, tb) = (out.join("all-mlflow"), out.join("all-tensorboard"));
    let mut wrote = Vec::new();
    for (target, dir) in [("mlflow", &mlflow), ("tensorboard", &tb)] {
        let o = common::repro_in(
            &project,
            &["-q", "export", target, "--to", dir.to_str().unwrap()],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        wrote.push(String::from_utf8_lossy(&o.stdout).to_string());
    }
    let _ = std::fs::remove_dir_all(&project);
    let counts: Vec<usize> = wrote[0]
        .split_whitespace()
        .filter_map(|w| w.trim_end_matches(',').parse().ok())
        .take(2)
        .collect();
    assert_eq!(counts, [3, recorded], "{}", wrote[0]);
    assert_eq!(
        wrote[0].split(" to ").next(),
        wrote[1].split(" to ").next(),
        "{wrote:?}"
    );
    let said = read(&[
        "count",
        mlflow.to_str().unwrap(),
        tb.to_str().unwrap(),
        &counts[0].to_string(),
        &counts[1].to_string(),
    ]);
    assert!(
        said.contains(&format!("tensorboard: {} runs", counts[1])),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Every run records where it came from (log header, runs.csv row,
/// provenance.json), and `repro status` calls a run stale when another
/// build or another manifest produced it, missing when it never finished.
#[test]
fn status_marks_runs_of_another_commit_or_manifest_stale() {
    let out = temp_out("status");
    let o = repro(&["run", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let here = repro_build::BUILD.source;
    assert_ne!(here, "unknown", "the tests run from a git checkout");
    let runs = read_runs(&out);
    for r in &runs {
        assert_eq!(r["source"], here);
        assert_eq!(r["git_commit"], repro_build::BUILD.commit);
        assert!(r["command"].ends_with(&format!("run smoke --out {}", out.display())));
        assert_eq!(r["manifest_hash"].len(), 16);
        let log = std::fs::read_to_string(out.join(format!("raw/{}.jsonl", r["run_id"]))).unwrap();
        assert!(
            log.lines()
                .next()
                .unwrap()
                .contains(&format!("\"source\":\"{here}\""))
        );
    }
    let provenance: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("provenance.json")).unwrap())
            .unwrap();
    assert_eq!(provenance["build"]["source"], here);
    assert_eq!(provenance["scale"], "smoke");
    assert_eq!(provenance["planned_runs"]["current"], 14);
    let status = |extra: &[&str]| {
        let o = repro(&[&["status", "smoke", "--out", out.to_str().unwrap()], extra].concat());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let said = status(&[]);
    assert!(
        said.contains("14 current, 0 stale, 0 missing; current"),
        "{said}"
    );
    // runs judged by other judging code (a change to health, claims or
    // tables only): current, re-judged by `repro table` without a rerun,
    // and provenance.json names both builds
    let prov = out.join("provenance.json");
    let mut p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&prov).unwrap()).unwrap();
    assert_eq!(p["build"]["judge"], repro_build::BUILD.judge);
    p["build"]["judge"] = "0123456789abcdef".into();
    std::fs::write(&prov, p.to_string()).unwrap();
    let said = status(&[]);
    assert!(
        said.contains("14 current, 0 stale, 0 missing; current runs, judged by other judging code (0123456789abcdef): `repro table smoke` re-judges them, no rerun"),
        "{said}"
    );
    let o = repro(&["table", "smoke", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = status(&[]);
    assert!(
        said.contains("14 current, 0 stale, 0 missing; re-judged, current"),
        "{said}"
    );
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&prov).unwrap()).unwrap();
    assert_eq!(p["build"]["judge"], "0123456789abcdef");
    assert_eq!(p["judged_by"]["judge"], repro_build::BUILD.judge);
    // three runs from an older commit, one row gone
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    for line in &mut lines[1..4] {
        *line = line.replace(here, "0123456789abcdef0123456789abcdef01234567");
    }
    let gone = lines.remove(4);
    std::fs::write(out.join("runs.csv"), lines.join("\n") + "\n").unwrap();
    let said = status(&[]);
    assert!(
        said.contains(
            "10 current, 3 stale, 1 missing; 4 runs to rerun (`repro run smoke --resume` runs them)"
        ),
        "{said}"
    );
    assert_eq!(
        said.matches("stale: built from 0123456789ab").count(),
        3,
        "{said}"
    );
    let gone_id = gone.split(',').next().unwrap();
    assert!(
        said.contains(&format!("{gone_id}  ")) && said.contains("missing: never run"),
        "{said}"
    );
    // another manifest: every run is stale (its id changed too)
    let said = status(&["--set", "params.lr=0.2"]);
    assert!(said.contains("0 current, 13 stale, 1 missing"), "{said}");
    // the same runs from an edited manifest that leaves them alone (another
    // scale's parameter)
    let said = status(&["--set", "scales.cpu.iterations=7"]);
    assert!(said.contains("0 current, 13 stale, 1 missing"), "{said}");
    assert!(said.contains("planned from manifest"), "{said}");
    // a new title, table or claim only presents the runs: still current
    let said = status(&["--set", "title=Renamed", "--set", "table.value=final_loss"]);
    assert!(said.contains("10 current, 3 stale, 1 missing"), "{said}");
    // the overview has a line per experiment (the fixture project's results)
    let project = common::fixture_project("status-overview");
    let o = common::repro_in(&project, &["status"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("theorem1"));
    let _ = std::fs::remove_dir_all(&project);
    let _ = std::fs::remove_dir_all(&out);
}

/// `repro table` tests a manifest's claims on recorded runs alone (Theorem
/// 1's, complete, from the results fixture): it prints the verdicts after
/// the table and writes claims.md and claims.csv, whose numbers are the
/// paired test over the seeds.
#[test]
fn claims_are_tested_on_recorded_runs() {
    let out = temp_out("claims");
    std::fs::create_dir_all(&out).unwrap();
    let recorded = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results/theorem1");
    std::fs::copy(recorded.join("runs.csv"), out.join("runs.csv")).unwrap();
    let o = repro(&["table", "theorem1", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stdout);
    let claim = "moniqua-fine has a lower grad_norm_sq than naive-fine (lr=0.5)";
    assert!(said.contains("# Claims:") && said.contains(claim), "{said}");
    assert_eq!(
        std::fs::read_to_string(out.join("claims.md")).unwrap(),
        said.split_once("\n# Claims:")
            .map(|(_, c)| format!("# Claims:{c}"))
            .unwrap()
    );
    let verdicts = csv_rows(&out.join("claims.csv"));
    assert_eq!(verdicts.len(), 6);
    assert!(verdicts.iter().all(|v| {
        ["supported", "not supported", "contradicted", "not testable"]
            .contains(&v["verdict"].as_str())
    }));
    // the claim, recomputed from runs.csv, paired by seed
    let runs = csv_rows(&out.join("runs.csv"));
    let measured = |method: &str| {
        let mut v: Vec<(u64, f64)> = runs
            .iter()
            .filter(|r| r["method"] == method && r["lr"] == "0.5")
            .map(|r| {
                (
                    r["seed"].parse().unwrap(),
                    r["grad_norm_sq"].parse::<f64>().unwrap(),
                )
            })
            .collect();
        v.sort_by_key(|a| a.0);
        v.into_iter().map(|(_, x)| x).collect::<Vec<f64>>()
    };
    let d =
        repro::report::stats::paired(&measured("moniqua-fine"), &measured("naive-fine")).unwrap();
    let first = verdicts.iter().find(|v| v["claim"] == claim).unwrap();
    assert_eq!(first["test"], "paired t");
    let number = |k: &str| first[k].parse::<f64>().unwrap();
    assert!((number("effect") - d.effect).abs() < 1e-15);
    assert!((number("p") - d.p_two_sided()).abs() < 1e-9);
    let (lo, hi) = d.interval(0.05);
    assert!((number("ci_low") - lo).abs() < 1e-15 && (number("ci_high") - hi).abs() < 1e-15);
    // lower is better: supported when the whole interval is below 0
    let verdict = if hi < 0.0 {
        "supported"
    } else if lo > 0.0 {
        "contradicted"
    } else {
        "not supported"
    };
    assert_eq!(first["verdict"], verdict);
    let _ = std::fs::remove_dir_all(&out);
}

/// `repro compare` reproduces recorded tables from the runs.parquet files
/// alone (the results fixture's, copies of committed directories).
/// Theorem 1's table.md (cells `mean ± half-width (n)`) has each of its
/// measured cells in compare's output; and every tidy table.csv's cells
/// are compare's lines, digit for digit.
#[test]
fn compare_reproduces_recorded_tables_from_parquet_alone() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let o = repro(&[
        "compare",
        root.join("results/theorem1").to_str().unwrap(),
        "--by",
        "method,lr",
        "--value",
        "grad_norm_sq",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let compared = String::from_utf8_lossy(&o.stdout);
    let table = std::fs::read_to_string(root.join("results/theorem1/table.md")).unwrap();
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut lines = table.lines().filter(|l| l.starts_with('|'));
    let header = cells(lines.next().unwrap());
    let mut checked = 0;
    for line in lines.filter(|l| !l.starts_with("|---") && !l.starts_with("| Δ")) {
        let row = cells(line);
        for (h, cell) in header.iter().zip(&row) {
            let Some(lr) = h.strip_prefix("lr=") else {
                continue;
            };
            let want = format!("| {} | {lr} | {cell} |", row[0]);
            assert!(compared.contains(&want), "{want} not in:\n{compared}");
            checked += 1;
        }
    }
    assert_eq!(checked, 12, "{table}");
    for entry in std::fs::read_dir(root.join("results")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(tidy) = std::fs::read_to_string(dir.join("table.csv")) else {
            continue;
        };
        let header: Vec<&str> = tidy.lines().next().unwrap_or("").split(',').collect();
        let Some(q) = header.iter().position(|h| *h == "quantity") else {
            continue; // a formatted table.csv from before the tidy form
        };
        let first = csv_rows(&dir.join("table.csv")).into_iter().next().unwrap();
        let by = header[..q].join(",");
        let o = repro(&[
            "compare",
            dir.to_str().unwrap(),
            "--by",
            &by,
            "--value",
            &first["metric"],
            "--factor",
            &first["factor"],
            "--format",
            "csv",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // the same cells; compare groups in the runs' order, the table in
        // its rows' order (two row keys may nest either way)
        let sorted = |t: &str| {
            let mut lines: Vec<String> = t.lines().map(str::to_string).collect();
            lines[1..].sort();
            lines
        };
        assert_eq!(
            sorted(&String::from_utf8_lossy(&o.stdout)),
            sorted(&common::cells_of_tidy_table(&tidy)),
            "{}",
            dir.display()
        );
    }
}

/// `repro verify` on the committed quickstart against itself: every cell
/// reproduced, every verdict the same, exit 0. Against a copy whose
/// Moniqua runs are at zero accuracy: that cell differs, a claim's verdict
/// flips, and the exit code is 4.
#[test]
fn verify_names_a_shifted_cell_and_a_flipped_claim() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let record = here.join("results/quickstart");
    let o = repro(&[
        "verify",
        record.to_str().unwrap(),
        "--against",
        "results/quickstart",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("your run reproduces the record: 10 of 10 verdicts the same, 17 of 17 cells equivalent, 0 inconclusive, 0 differ"),
        "{stdout}"
    );
    // a copy (without its `then` experiment) with Moniqua's runs shifted
    // to zero accuracy: far enough to flip "moniqua above deepsqueeze"
    // whatever the record holds, unless it is already contradicted
    let copy = temp_out("verify-shifted");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(&record).unwrap().flatten() {
        if e.path().is_file() {
            std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
        }
    }
    let csv = std::fs::read_to_string(copy.join("runs.csv")).unwrap();
    let mut lines = csv.lines();
    let header = fields(lines.next().unwrap());
    let at = |k: &str| header.iter().position(|h| h == k).unwrap();
    let (method, acc) = (at("method"), at("avg_test_accuracy"));
    let quote = |f: &String| {
        if f.contains([',', '"']) {
            format!("\"{}\"", f.replace('"', "\"\""))
        } else {
            f.clone()
        }
    };
    let mut shifted = vec![header.iter().map(quote).collect::<Vec<_>>().join(",")];
    let mut n = 0;
    for line in lines {
        let mut f = fields(line);
        if f[method] == "moniqua" {
            f[acc] = "0.0".to_string();
            n += 1;
        }
        shifted.push(f.iter().map(quote).collect::<Vec<_>>().join(","));
    }
    assert_eq!(n, 8);
    std::fs::write(copy.join("runs.csv"), shifted.join("\n") + "\n").unwrap();
    let o = repro(&[
        "verify",
        copy.to_str().unwrap(),
        "--against",
        "results/quickstart",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(4),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let row = |start: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start} in {stdout}"))
            .to_string()
    };
    assert!(
        row("| method=moniqua, bits=2 |").ends_with("| **differs** |"),
        "{stdout}"
    );
    assert!(
        row("| method=dcd, bits=2 |").ends_with("| **reproduced** |"),
        "{stdout}"
    );
    assert!(
        row("| moniqua has a higher avg_test_accuracy than deepsqueeze |")
            .ends_with("| **flipped** |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("your run does NOT reproduce the record"),
        "{stdout}"
    );
    assert!(stdout.contains("verdicts flipped"), "{stdout}");
    let _ = std::fs::remove_dir_all(&copy);
}

#[test]
fn unstamped_masks_run_directory_stamps_only() {
    assert_eq!(
        common::unstamped("runs/a/cpu/2026-11-29T093749Z/raw runs/a/cpu/2026-11-29T093749Z-12/x é"),
        "runs/a/cpu/<stamp>/raw runs/a/cpu/<stamp>/x é"
    );
    assert_eq!(common::unstamped("2026-11-29 09:37"), "2026-11-29 09:37");
}
