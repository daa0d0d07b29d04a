//! A run that is not a valid instance of its experiment is named: each
//! degenerate case end to end through `repro run`, its `health` word and
//! kind in runs.csv, its table cell and its claim's note. A failure of the
//! method counts against it (intention to treat); a run that did not test
//! the method is left out. Each test fails when the check that finds its
//! case, or the rule that counts it, is removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{csv_rows, serial, temp_out, train_binary};

/// A project directory holding one manifest, `experiments/<name>.yaml`.
fn project(name: &str, manifest: &str) -> PathBuf {
    let root = temp_out(&format!("health-{name}"));
    std::fs::create_dir_all(root.join("experiments")).unwrap();
    std::fs::write(
        root.join("experiments").join(format!("{name}.yaml")),
        manifest,
    )
    .unwrap();
    root
}

/// `repro run NAME --out DIR` in `root`: runs.csv's rows, the table and
/// the claims as written.
fn run(root: &Path, name: &str) -> (Vec<HashMap<String, String>>, String, String) {
    let out = root.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(["run", name, "--out", out.to_str().unwrap()])
        .env("REPRO_TRAIN", train_binary())
        .current_dir(root)
        .output()
        .expect("run repro");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    (
        csv_rows(&out.join("runs.csv")),
        read("table.md"),
        read("claims.md"),
    )
}

fn number(row: &HashMap<String, String>, key: &str) -> f64 {
    common::number(row, key)
}

/// A finite blow-up: D-PSGD at step size 2.5 on a quadratic grows its loss
/// a million-fold without a non-finite value. Its status says the process
/// completed; its health says exploded (not diverged, the status's word
/// for a non-finite value), and it counts against D-PSGD with the loss it
/// reached.
#[test]
fn a_finite_blow_up_is_exploded() {
    let root = project(
        "blowup",
        "name: blowup
title: a finite blow-up
source: tests/health.rs
backend: sim
scales:
  smoke: { iterations: 20 }
grid:
  algorithm: [d-psgd, moniqua]
  seed: [0, 1]
params: { objective: quadratic, workers: 4, dim: 16, lr: 0.1, bits: 8, theta: 1.0 }
cases:
  - { when: { algorithm: d-psgd }, set: { lr: 2.5 } }
table: { rows: [algorithm], value: final_loss }
claims:
  - { better: moniqua, than: d-psgd, metric: final_loss }
",
    );
    let (runs, table, claims) = run(&root, "blowup");
    for r in &runs {
        let (first, last) = (number(r, "first_loss"), number(r, "last_loss"));
        assert!(first.is_finite() && last.is_finite(), "{r:?}");
        assert_eq!(r["status"], "completed", "{r:?}");
        if r["algorithm"] == "d-psgd" {
            assert!(last > 1e5 * first, "{r:?}");
            assert_eq!(r["health"], "exploded", "{r:?}");
            assert_eq!(r["health_kind"], "method failed", "{r:?}");
        } else {
            assert!(last < first, "{r:?}");
            assert_eq!(r["health"], "ok", "{r:?}");
        }
    }
    assert!(
        table.contains("(n=2); 2 exploded |") && !table.contains("| d-psgd | 2 exploded |"),
        "{table}"
    );
    assert!(table.contains("| moniqua | 0.7"), "{table}");
    assert!(!claims.contains("**not testable**"), "{claims}");
    assert!(claims.contains("| paired t | 2 / 2 |"), "{claims}");
    assert!(
        claims.contains("d-psgd: 2 of 2 runs failed (2 exploded), counted"),
        "{claims}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// Moniqua with a modulus far below the models' distance: most recovered
/// coordinates wrap around it (counted against the true models). Its
/// premise failed (`premise: wrapped`, said beside the outcome); its
/// health is its outcome, which wrapping alone does not decide.
#[test]
fn a_wrapped_moniqua_is_named_by_its_premise() {
    let root = project(
        "wrap",
        "name: wrap
title: Moniqua outside Lemma 2's bound
source: tests/health.rs
backend: sim
scales:
  smoke: { iterations: 60 }
grid:
  theta: [1.0, 0.02]
  seed: [0, 1]
params: { algorithm: moniqua, objective: quadratic, heterogeneity: 1.0, workers: 4, dim: 64, lr: 0.1, bits: 8, hash: false }
table: { rows: [theta], value: final_loss }
claims:
  - { within: 0.1, method: \"0.02\", of: \"1.0\", metric: final_loss, key: theta }
",
    );
    let (runs, table, claims) = run(&root, "wrap");
    for r in &runs {
        let wrapped = number(r, "wrap_rate");
        if r["theta"] == "0.02" {
            assert!(wrapped > 0.5, "{r:?}");
            assert_eq!(r["premise"], "wrapped", "{r:?}");
            assert!(
                r["premise_note"].contains("wrapped around the modulus"),
                "{r:?}"
            );
            assert_ne!(r["health"], "unbounded", "{r:?}");
        } else {
            assert_eq!(wrapped, 0.0, "{r:?}");
            assert_eq!((&*r["health"], &*r["premise"]), ("ok", "held"), "{r:?}");
        }
    }
    assert!(
        table.contains("premise: 2 of 2 wrapped past the modulus |"),
        "{table}"
    );
    assert!(
        claims.contains("0.02: premise: 2 of 2 wrapped past the modulus"),
        "{claims}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A weight decay of 20 at step size 0.05 pulls the model to zero: the
/// loss sits at ln 10 and the accuracy at chance for 10 classes. The run
/// completes and its loss even fell; its health says collapsed.
#[test]
fn a_collapse_to_chance_is_collapsed() {
    let root = project(
        "collapse",
        "name: collapse
title: a collapse to chance
source: tests/health.rs
backend: in-process
scales:
  smoke: { workers: 3, iterations: 40, dataset: synthetic, synthetic_samples: 300, eval_every: 40, eval_samples: 100 }
grid:
  weight_decay: [0.0005, 20.0]
  seed: [0, 1]
params: { model: lenet, algorithm: d-psgd, topology: ring, batch: 32, lr: 0.05, momentum: 0.0 }
table: { rows: [weight_decay], value: avg_test_accuracy }
claims:
  - { better: \"0.0005\", than: \"20.0\", metric: avg_test_accuracy, key: weight_decay }
",
    );
    let (runs, table, claims) = run(&root, "collapse");
    for r in &runs {
        if r["weight_decay"] == "20.0" {
            assert!((number(r, "last_loss") - 10f64.ln()).abs() < 0.01, "{r:?}");
            assert!(number(r, "avg_test_accuracy") < 0.12, "{r:?}");
            assert!(number(r, "model_norm") < 0.01, "{r:?}");
            assert_eq!(r["health"], "collapsed", "{r:?}");
        } else {
            assert_eq!(r["health"], "ok", "{r:?}");
            assert!(number(r, "model_norm") > 1.0, "{r:?}");
        }
        assert_eq!(r["status"], "completed", "{r:?}");
    }
    assert!(
        table.contains("(n=2); 2 collapsed |") && !table.contains("| 20.0 | 2 collapsed |"),
        "{table}"
    );
    assert!(
        claims.contains("20.0: 2 of 2 runs failed (2 collapsed), counted"),
        "{claims}"
    );
    assert!(!claims.contains("**not testable**"), "{claims}");
    let _ = std::fs::remove_dir_all(&root);
}

/// AD-PSGD as real MPI ranks with 3 s added to every message: the ranks
/// finish their steps before a single pairwise average completes, so the
/// run is local SGD and a final average. Silent, however good its loss.
#[test]
fn a_run_without_gossip_is_silent() {
    let _serial = serial();
    let root = project(
        "silent",
        "name: silent
title: no gossip completes
source: tests/health.rs
backend: mpi
scales:
  smoke: { workers: 4, iterations: 60, lr: 0.005, dataset: synthetic, synthetic_samples: 300, eval_every: 60, eval_samples: 100 }
grid:
  algorithm: [ad-psgd]
  seed: [0]
params: { topology: ring, model: lenet, batch: 32, momentum: 0.9, latency_ms: 3000, timeout_s: 300 }
table: { rows: [algorithm], value: train_loss }
claims:
  - { diverges: ad-psgd }
",
    );
    let (runs, table, claims) = run(&root, "silent");
    let r = &runs[0];
    assert_eq!(r["status"], "completed", "{r:?}");
    assert!(number(r, "exchange_share") < 0.05, "{r:?}");
    assert_eq!(r["health"], "silent", "{r:?}");
    assert_eq!(r["health_kind"], "not tested", "{r:?}");
    assert!(table.contains("| ad-psgd | 1 silent |"), "{table}");
    assert!(
        claims.contains("ad-psgd: 1 silent did not test the method, left out"),
        "{claims}"
    );
    assert!(claims.contains("**not testable**"), "{claims}");
    let _ = std::fs::remove_dir_all(&root);
}

/// What the plan can know before anything runs: Figure 2(b)'s cpu-scale
/// bandwidth with the paper's ResNet110 frames (a message outlasts an
/// iteration's share of the timeout), and Moniqua at 1 bit with
/// stochastic rounding (no Lemma 2 bound). Warnings, on a dry run too.
#[test]
fn design_checks_warn_at_plan_time() {
    let stderr = |args: &[&str]| {
        let o = common::repro_cmd(args).output().expect("run repro");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let said = stderr(&[
        "run",
        "figure2b",
        "--scale",
        "paper",
        "--set",
        "grid.network=[{bandwidth: 713kbit, latency: 0.15ms}]",
        "--dry-run",
    ]);
    assert!(
        said.contains("warning: figure2b: network 713kbit/0.15ms: one ad-psgd message of 6.91 MB takes 77.6 s on the wire"),
        "{said}"
    );
    let said = stderr(&["run", "figure2b", "--scale", "paper", "--dry-run"]);
    assert!(!said.contains("on the wire"), "{said}");
    let said = stderr(&["run", "table2", "--scale", "cpu", "--dry-run"]);
    assert!(
        said.contains("warning: table2: moniqua at 1 bit with stochastic rounding: delta = 0.5, so Lemma 2 bounds no recovery"),
        "{said}"
    );
    let said = stderr(&[
        "run",
        "table2",
        "--scale",
        "cpu",
        "--set",
        "grid.bits=[2]",
        "--dry-run",
    ]);
    assert!(!said.contains("Lemma 2"), "{said}");
}

/// Tuning equal in substance: D-PSGD's best step size is the largest it
/// tried (flagged at the edge; `tune.extend` tries one step beyond and
/// takes it), and CHOCO at step 2.5 or 3 blows up in every configuration:
/// reported with no configuration trained, and given no final runs.
#[test]
fn tuning_flags_edges_and_runs_no_method_without_a_valid_choice() {
    let manifest = |extend: bool| {
        format!(
            "name: edge
title: tuning at the edge
source: tests/health.rs
backend: sim
scales:
  smoke: {{ iterations: 30 }}
grid:
  algorithm: [d-psgd, choco]
  seed: [0, 1]
params: {{ objective: quadratic, workers: 4, dim: 16, lr: 0.05, bits: 8, gamma: 0.5 }}
tune:
  metric: final_loss
  budget: 2
  seeds: [100, 101]
  extend: {extend}
  space:
    d-psgd: {{ lr: [0.01, 0.05] }}
    choco: {{ lr: [2.5, 3.0] }}
table: {{ rows: [algorithm], value: final_loss }}
claims:
  - {{ diverges: choco }}
  - {{ better: d-psgd, than: choco, metric: final_loss }}
"
        )
    };
    let root = project("edge", &manifest(false));
    let (runs, table, claims) = run(&root, "edge");
    // CHOCO has no final runs: its failure claim is decided from its
    // tuning runs (4 of 4 cannot reach 0.05 against one half), and a
    // comparison with it says no configuration trained
    assert!(
        claims.contains("| exact binomial against 50% (one-sided) | 4 |"),
        "{claims}"
    );
    assert!(
        claims.contains("choco: no configuration trained, every one of its 4 tuning runs failed (4 exploded); decided from the tuning runs"),
        "{claims}"
    );
    assert!(claims.contains("**no working configuration**"), "{claims}");
    let tuning = std::fs::read_to_string(root.join("out/tuning.md")).unwrap();
    assert!(
        tuning.contains("- algorithm=d-psgd: lr=0.05 is at the edge of its space; the optimum may lie beyond it (next step: lr=0.25; `tune.extend: true` tries it)"),
        "{tuning}"
    );
    assert!(
        tuning.contains("- algorithm=d-psgd: 2 of 2 (runs: 4 ok)"),
        "{tuning}"
    );
    assert!(
        tuning.contains("- algorithm=choco: 0 of 2 (runs: 4 exploded): no configuration trained, so this setting has no final runs"),
        "{tuning}"
    );
    // tuning runs are judged as the grid's are
    let tuned = common::csv_rows(&root.join("out/tuning/runs.csv"));
    assert_eq!(tuned.len(), 8);
    assert!(
        tuned.iter().all(|r| r["health"]
            == if r["algorithm"] == "choco" {
                "exploded"
            } else {
                "ok"
            }),
        "{tuned:?}"
    );
    assert!(runs.iter().all(|r| r["algorithm"] == "d-psgd"), "{runs:?}");
    assert_eq!(runs.len(), 2);
    assert!(!table.contains("choco"), "{table}");
    let _ = std::fs::remove_dir_all(&root);

    let root = project("edge", &manifest(true));
    let (runs, _, _) = run(&root, "edge");
    let tuning = std::fs::read_to_string(root.join("out/tuning.md")).unwrap();
    assert!(
        tuning.contains("| algorithm=d-psgd | lr=0.25 (beyond the space) |"),
        "{tuning}"
    );
    assert!(
        tuning.contains("- warning: algorithm=d-psgd: lr=0.25 (one step beyond the space) was chosen, at the edge after `extend`: the optimum may lie further out"),
        "{tuning}"
    );
    assert!(runs.iter().all(|r| r["config"] == "lr=0.25"), "{runs:?}");
    let _ = std::fs::remove_dir_all(&root);
}

/// `tune.compare_with`: the report sets a tuned choice's final mean beside
/// the best cell of a sweep over the same setting, and flags a gap wider
/// than both intervals. Here the tuned range of D-PSGD's step stops a
/// decade below where the sweep finds the lowest loss.
#[test]
fn a_tuned_choice_is_held_against_a_sweep() {
    let root = project(
        "sweep",
        "name: sweep
title: a sweep of the step size
source: tests/health.rs
backend: sim
committed_scale: smoke
scales:
  smoke: { iterations: 30 }
grid:
  lr: [0.002, 0.02, 0.2]
  seed: [0, 1, 2]
params: { algorithm: d-psgd, objective: quadratic, workers: 4, dim: 16, bits: 8 }
table: { rows: [lr], value: final_loss }
",
    );
    std::fs::write(
        root.join("experiments/tuned.yaml"),
        "name: tuned
title: a tuning that stops short
source: tests/health.rs
backend: sim
committed_scale: smoke
scales:
  smoke: { iterations: 30 }
grid:
  algorithm: [d-psgd]
  seed: [0, 1, 2]
params: { objective: quadratic, workers: 4, dim: 16, lr: 0.05, bits: 8 }
tune:
  metric: final_loss
  budget: 6
  seeds: [100, 101]
  space:
    d-psgd: { lr: { range: [0.0005, 0.005] } }
  compare_with: { experiment: sweep, method: d-psgd }
table: { rows: [algorithm], value: final_loss }
",
    )
    .unwrap();
    let repro = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_repro"))
            .args(args)
            .current_dir(&root)
            .output()
            .expect("run repro");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    repro(&["run", "sweep", "--record", "--quiet"]);
    repro(&["run", "tuned", "--record", "--quiet"]);
    let section = repro(&["report", "--markdown", "tuned", "--out", "results/tuned"]);
    assert!(
        section.contains("**Against the sweep** (`sweep`, the same setting with d-psgd fixed by hand), in `final_loss`:"),
        "{section}"
    );
    assert!(
        section.contains("the sweep's best cell (lr=0.2)")
            && section.contains("wider than the intervals**"),
        "{section}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A time-to-target claim the tuning decides: D-PSGD's step is chosen on
/// the final loss, and the chosen step reaches the train-loss target after
/// CHOCO, while two of the three best steps reach it before. The claim is
/// marked protocol-sensitive from the tuning runs' curves.
#[test]
fn a_time_claim_the_tuning_decides_is_marked() {
    let root = project(
        "ft",
        "name: ft
title: time to a target after tuning
source: tests/health.rs
backend: sim
scales:
  smoke: { iterations: 60 }
grid:
  algorithm: [d-psgd, choco]
  seed: [0, 1]
params: { objective: quadratic, workers: 4, dim: 16, lr: 0.05, bits: 8, gamma: 0.5, log_every: 1 }
tune:
  metric: final_loss
  budget: 6
  seeds: [100, 101]
  space:
    d-psgd: { lr: { range: [0.02, 0.2] } }
table: { rows: [algorithm], value: final_loss }
claims:
  - { faster_to: { train_loss: 0.65 }, method: d-psgd, than: choco, by: iteration }
",
    );
    let (_, _, claims) = run(&root, "ft");
    assert!(claims.contains("*protocol-sensitive* |"), "{claims}");
    assert!(
        claims.contains("protocol-sensitive: on the tuning runs' iteration to the train_loss target (diagnostic only: nothing was chosen on it), over the best 3 configurations of d-psgd against choco's final runs, the claim holds in 2 of 3 pairs"),
        "{claims}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
