//! The paper scales' launch path, rehearsed on generated CIFAR-10, one
//! test per manifest. All in nextest's `network` group
//! (.config/nextest.toml): one at a time, never beside the MPI and network
//! tests of `network.rs` (whose checks that no network is left would see a
//! shaped rehearsal's), and never beside each other (VGG16's ten ranks and
//! ResNet110's eight each hold about 13 GB here).

mod common;
use common::{csv_rows, repro_cmd, temp_out};

/// The step schedule's marker in a run's header (Tang et al.'s
/// epoch-time runs keep a constant step).
const STEP: &str = "\"schedule\":\"step\"";

/// One paper scale of `manifest` plans and takes one step as a GPU user's
/// run would, on generated images in CIFAR-10's binary format (`repro
/// data fetch cifar10-like`): its model at batch 128, its step schedule,
/// its backend (MPI ranks, shaped where the manifest shapes), for one
/// iteration of the grid point `point` picks (two for Tang et al.'s
/// sweep). Replaced: the data, the iterations, the milestones (moved
/// inside that iteration), and the evaluation's and validation split's
/// sizes. The rank-0 log's header must hold each of `header`. Measured
/// alone in a debug build on this 2-core machine on 2026-12-07: 13 to 46 s
/// a test, and a peak of 14.5 GB used (PQASGD's eight ResNet110 ranks).
fn rehearse(manifest: &str, point: &[&str], header: &[&str]) {
    let _serial = common::serial();
    let data = temp_out(&format!("cifar10-like-{manifest}"));
    let o = repro_cmd(&[
        "data",
        "fetch",
        "cifar10-like",
        "--dir",
        data.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = format!("scales.paper.data_dir={}", data.display());
    // the step schedule's milestones fall inside the iteration (an
    // epoch is tens of steps), so its switch runs too
    const MILESTONES: &str = "\"milestones\":[0.001,0.002]";
    let out = temp_out(&format!("rehearsal-{manifest}"));
    let mut args = vec!["run", manifest, "--scale", "paper", "--set", &dir];
    let stepped = header.contains(&STEP);
    let milestones = stepped.then_some("scales.paper.milestones=[0.001, 0.002]");
    for set in [
        "scales.paper.iterations=1",
        "scales.paper.eval_every=1",
        "scales.paper.eval_samples=32",
        // every rank scores the averaged model on the whole validation
        // split (5,000 images; 140 of VGG16's 170 s here): 100 images
        // keep the split and its scoring
        "params.validation=0.002",
        // two steps train nothing: a tuning choice must not wait on
        // accuracy above chance, or a tuned manifest has no final run
        "health.chance_margin=-1",
        "health.min_model_norm=0",
    ]
    .iter()
    .chain(point)
    .chain(milestones.iter())
    {
        args.extend(["--set", set]);
    }
    let out_arg = out.to_str().unwrap().to_string();
    args.extend(["--out", &out_arg]);
    let started = std::time::Instant::now();
    let o = repro_cmd(&args).output().unwrap();
    eprintln!("{manifest}: {:.0} s", started.elapsed().as_secs_f64());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{manifest}: {stderr}");
    let runs = csv_rows(&out.join("runs.csv"));
    assert!(!runs.is_empty(), "{manifest}: {stderr}");
    for r in &runs {
        assert_eq!(r["status"], "completed", "{manifest}: {stderr}");
    }
    let log = std::fs::read_dir(out.join("raw"))
        .unwrap()
        .flatten()
        .flat_map(|run| {
            std::fs::read_dir(run.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .find(|f| f.file_name().to_string_lossy().starts_with("rank-0"))
        .map(|f| std::fs::read_to_string(f.path()).unwrap())
        .unwrap_or_else(|| panic!("{manifest}: no rank-0 log under {}", out.display()));
    let first = log.lines().next().unwrap_or_default();
    for p in header
        .iter()
        .chain(&["\"batch\":128", "\"dataset\":\"cifar10\""])
        .chain(stepped.then_some(&MILESTONES))
    {
        assert!(
            first.contains(p),
            "{manifest}: {p} missing from the header: {first}"
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&data).unwrap();
}

/// Table 2 (ResNet20, 8 ranks, not shaped), its tuning too, cut to one
/// configuration of Moniqua's on one seed.
#[test]
fn table2_rehearses_at_paper_scale() {
    rehearse(
        "table2",
        &[
            "grid.method=[moniqua]",
            "grid.bits=[1]",
            "grid.seed=[0]",
            "tune.budget=1",
            "tune.seeds=[100]",
            "tune.extend=false",
            "tune.confirm=null",
            // two steps train nothing: no setting is judged at chance
            "tune.chance_margin=-1",
            // the tuning's validation split, cut as the others'
            "tune.validation=0.002",
            // the other methods' spaces and claims name grid values
            // this point leaves out
            "tune.space={moniqua: {modulus: [0.5, 2.0], gamma: [0.05, 0.2, 0.5]}}",
            "claims=[]",
        ],
        &[
            "\"model\":\"resnet20\"",
            "\"workers\":8",
            "\"lr\":0.1,",
            STEP,
        ],
    );
}

/// Figure 1 (ResNet20, 8 ranks, shaped) at the paper's fastest condition:
/// the final evaluation's all-reduce of the full model is slow at 1
/// Mbit/s.
#[test]
fn figure1_rehearses_at_paper_scale() {
    rehearse(
        "figure1",
        &[
            "grid.algorithm=[moniqua]",
            "grid.network=[{bandwidth: 200mbit, latency: 0.15ms}]",
            "grid.seed=[0]",
        ],
        &["\"model\":\"resnet20\"", "\"workers\":8", STEP],
    );
}

/// Figure 2(a) (VGG16, 10 ranks, not shaped).
#[test]
fn figure2a_rehearses_at_paper_scale() {
    rehearse(
        "figure2a",
        &["grid.algorithm=[moniqua-d2]", "grid.seed=[0]"],
        &["\"model\":\"vgg16\"", "\"workers\":10", STEP],
    );
}

/// Figure 2(b) (ResNet110, 6 ranks, shaped).
#[test]
fn figure2b_rehearses_at_paper_scale() {
    rehearse(
        "figure2b",
        &["grid.algorithm=[moniqua-ad-psgd]", "grid.seed=[0]"],
        &["\"model\":\"resnet110\"", "\"workers\":6", STEP],
    );
}

/// PQASGD (ResNet110, shaped), its 16 workers cut to 8: 16 ResNet110
/// ranks do not fit this machine.
#[test]
fn pqasgd_rehearses_at_paper_scale() {
    rehearse(
        "pqasgd",
        &[
            "grid.algorithm=[pqasgd]",
            "grid.seed=[0]",
            "scales.paper.workers=8",
        ],
        &["\"model\":\"resnet110\"", "\"workers\":8", STEP],
    );
}

/// Tang et al.'s epoch time (ResNet20, 8 ranks, shaped): its figure is a
/// sweep, so two bandwidths.
#[test]
fn tang2018_epoch_time_rehearses_at_paper_scale() {
    rehearse(
        "tang2018-epoch-time",
        &[
            "grid.algorithm=[ecd]",
            "grid.network=[{bandwidth: 20mbit, latency: 0.13ms}, {bandwidth: 1000mbit, latency: 0.13ms}]",
            // one seed: the manifest's ten made this 20 runs, 128 s
            "grid.seed=[200]",
        ],
        &["\"model\":\"resnet20\"", "\"workers\":8"],
    );
}
