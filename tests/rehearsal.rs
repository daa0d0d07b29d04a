//! The paper scales' launch path, rehearsed on generated CIFAR-10. Its own
//! test binary: cargo runs binaries one at a time, so its ranks (VGG16's
//! ten hold about 15 GB) never share the machine with the timing-sensitive
//! tests of `cli.rs`.

mod common;
use common::{csv_rows, repro_cmd, temp_out};

/// Every paper scale that trains on CIFAR-10 starts as a GPU user's run
/// would, on generated images in CIFAR-10's binary format (`repro data
/// fetch cifar10-like`): its model at batch 128, its step schedule, its
/// backend (MPI ranks, shaped where the manifest shapes), for two
/// iterations of one grid point each (two for Tang et al.'s sweep), one
/// after another (VGG16's ten ranks hold about 15 GB). The data, the
/// iterations, the milestones (moved inside the two iterations) and the
/// evaluation's size are all that is replaced; Table 2's tuning is cut to
/// one configuration of Moniqua's on one seed, and PQASGD's 16 workers become 8 (16
/// ResNet110 ranks do not fit this machine). About 5 to 14 minutes here
/// (809 s alone in a debug build on a fresh 2-core machine).
#[test]
fn paper_scales_rehearse_on_generated_cifar10() {
    let data = temp_out("cifar10-like");
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
    // each manifest, one grid point, and what its run's header must say
    // (Tang et al.'s epoch-time runs keep a constant step)
    const STEP: &str = "\"schedule\":\"step\"";
    let cases: [(&str, &[&str], &[&str]); 6] = [
        (
            "table2",
            // its tuning too, cut to one configuration on one seed
            &[
                "grid.method=[moniqua]",
                "grid.bits=[1]",
                "grid.seed=[0]",
                "tune.budget=1",
                "tune.seeds=[100]",
                "tune.extend=false",
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
        ),
        (
            "figure1",
            &[
                "grid.algorithm=[moniqua]",
                "grid.network=[{bandwidth: 1mbit, latency: 1ms}]",
                "grid.seed=[0]",
            ],
            &["\"model\":\"resnet20\"", "\"workers\":8", STEP],
        ),
        (
            "figure2a",
            &["grid.algorithm=[moniqua-d2]", "grid.seed=[0]"],
            &["\"model\":\"vgg16\"", "\"workers\":10", STEP],
        ),
        (
            "figure2b",
            &["grid.algorithm=[moniqua-ad-psgd]", "grid.seed=[0]"],
            &["\"model\":\"resnet110\"", "\"workers\":6", STEP],
        ),
        (
            "pqasgd",
            &[
                "grid.algorithm=[pqasgd]",
                "grid.seed=[0]",
                "scales.paper.workers=8",
            ],
            &["\"model\":\"resnet110\"", "\"workers\":8", STEP],
        ),
        (
            "tang2018-epoch-time",
            // its figure is a sweep: two bandwidths
            &[
                "grid.algorithm=[ecd]",
                "grid.network=[{bandwidth: 20mbit, latency: 0.13ms}, {bandwidth: 1000mbit, latency: 0.13ms}]",
            ],
            &["\"model\":\"resnet20\"", "\"workers\":8"],
        ),
    ];
    // the step schedule's milestones fall inside the two iterations (an
    // epoch is tens of steps), so its switch runs too
    const MILESTONES: &str = "\"milestones\":[0.001,0.002]";
    for (manifest, point, header) in cases {
        let out = temp_out(&format!("rehearsal-{manifest}"));
        let mut args = vec!["run", manifest, "--scale", "paper", "--set", &dir];
        let stepped = header.contains(&STEP);
        let milestones = stepped.then_some("scales.paper.milestones=[0.001, 0.002]");
        for set in [
            "scales.paper.iterations=2",
            "scales.paper.eval_every=2",
            "scales.paper.eval_samples=256",
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
        let o = repro_cmd(&args).output().unwrap();
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
    }
    std::fs::remove_dir_all(&data).unwrap();
}
