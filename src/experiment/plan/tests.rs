use super::*;
use crate::experiment::manifest::{Backend, TableSpec};

fn manifest() -> Manifest {
    Manifest {
        name: "t".into(),
        title: "t".into(),
        source: "s".into(),
        backend: Backend::Sim,
        shaping: crate::experiment::condition::ShapingMode::Auto,
        figure: None,
        claims: Vec::new(),
        tune: None,
        tuned_in: None,
        health: Default::default(),
        verify: Default::default(),
        cost: BTreeMap::new(),
        default_scale: None,
        committed_scale: None,
        then: Vec::new(),
        next: None,
        exclude: Vec::new(),
        scales: [(
            "smoke".to_string(),
            yaml_serde::from_str("{iterations: 5}").unwrap(),
        )]
        .into(),
        grid: [
            (
                "algorithm".to_string(),
                vec![Value::from("d-psgd"), Value::from("moniqua")],
            ),
            (
                "seed".to_string(),
                vec![Value::from(0), Value::from(1), Value::from(2)],
            ),
        ]
        .into(),
        params: yaml_serde::from_str("{workers: 4, lr: 0.05}").unwrap(),
        cases: Vec::new(),
        labels: Vec::new(),
        table: TableSpec {
            rows: vec!["algorithm".into()],
            cols: None,
            value: "final_loss".into(),
            scale: None,
            paper: None,
            extra: Vec::new(),
            reference: None,
        },
        resolved: String::new(),
    }
}

/// An exclusion removes exactly the points with all its values, and
/// one naming a key the grid lacks, or no algorithm, is refused at plan
/// time.
#[test]
fn exclusions_remove_matching_points_and_name_typos() {
    let mut m = manifest();
    m.exclude = vec![yaml_serde::from_str("{algorithm: moniqua, seed: 1}").unwrap()];
    let runs = expand(&m, "smoke", Backend::Sim).unwrap();
    assert_eq!(runs.len(), 5);
    assert!(
        !runs
            .iter()
            .any(|r| r.point["algorithm"] == "moniqua" && r.point["seed"] == "1")
    );
    assert!(runs.iter().any(|r| r.point["seed"] == "1"));
    for (bad, says) in [
        ("{algo: moniqua}", "exclude[0].algo: not a grid key"),
        (
            "{algorithm: monqua}",
            "exclude[0].algorithm: `monqua` is no algorithm",
        ),
    ] {
        m.exclude = vec![yaml_serde::from_str(bad).unwrap()];
        let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn a_scale_can_replace_a_grid_axis() {
    let mut m = manifest();
    m.scales.insert(
        "small".into(),
        yaml_serde::from_str("{iterations: 5, grid.seed: [7]}").unwrap(),
    );
    let runs = expand(&m, "small", Backend::Sim).unwrap();
    assert_eq!(runs.len(), 2, "two algorithms, one seed");
    assert!(runs.iter().all(|r| r.point["seed"] == "7"));
    m.scales.insert(
        "bad".into(),
        yaml_serde::from_str("{grid.seed: 3}").unwrap(),
    );
    let err = expand(&m, "bad", Backend::Sim).unwrap_err().to_string();
    assert!(err.contains("scales.bad.grid.seed"), "{err}");
    m.scales.insert(
        "empty".into(),
        yaml_serde::from_str("{grid.seed: []}").unwrap(),
    );
    assert!(matches!(
        expand(&m, "empty", Backend::Sim),
        Err(DriverError::EmptyGrid { .. })
    ));
}

/// A case sets parameters for the matching grid points only, at its
/// scales; a `when` key that is not a grid key is an error naming it.
#[test]
fn cases_set_parameters_for_matching_points() {
    let mut m = manifest();
    m.scales.insert("other".into(), Mapping::new());
    m.cases = yaml_serde::from_str(
        "[{when: {algorithm: moniqua}, set: {lr: 0.5}},
          {when: {algorithm: moniqua, seed: 2}, set: {lr: 0.7}, scales: [smoke]}]",
    )
    .unwrap();
    let lr = |scale: &str| -> Vec<(String, String, f32)> {
        expand(&m, scale, Backend::Sim)
            .unwrap()
            .into_iter()
            .map(|r| match r.params {
                Params::Sim(p) => (r.point["algorithm"].clone(), r.point["seed"].clone(), p.lr),
                Params::Train(_) => unreachable!(),
            })
            .collect()
    };
    for (alg, seed, lr) in lr("smoke") {
        let want = match (alg.as_str(), seed.as_str()) {
            ("moniqua", "2") => 0.7,
            ("moniqua", _) => 0.5,
            _ => 0.05,
        };
        assert_eq!(lr, want, "{alg} {seed}");
    }
    assert!(
        lr("other")
            .iter()
            .all(|(a, _, lr)| *lr == if a == "moniqua" { 0.5 } else { 0.05 })
    );
    m.cases = yaml_serde::from_str("[{when: {bits: 1}, set: {lr: 0.5}}]").unwrap();
    let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
    assert!(
        err.contains("cases[0].when.bits") && err.contains("algorithm, seed"),
        "{err}"
    );
}

/// A label axis names variants: its cases set their parameters, the
/// runs keep the label, and the backend never sees it. A label that is
/// no grid key, shadows a parameter, or has a value no case maps is a
/// plan-time error.
#[test]
fn a_label_names_variants_that_cases_define() {
    let mut m = manifest();
    m.grid.remove("algorithm");
    m.grid.insert(
        "method".into(),
        vec![Value::from("plain"), Value::from("fast")],
    );
    m.labels = vec!["method".into()];
    m.cases = yaml_serde::from_str(
        "[{when: {method: plain}, set: {algorithm: d-psgd}},
          {when: {method: fast}, set: {algorithm: moniqua, lr: 0.5}}]",
    )
    .unwrap();
    let runs = expand(&m, "smoke", Backend::Sim).unwrap();
    assert_eq!(runs.len(), 6);
    for r in &runs {
        let Params::Sim(p) = &r.params else {
            unreachable!()
        };
        let want = match r.point["method"].as_str() {
            "plain" => ("d-psgd", 0.05),
            _ => ("moniqua", 0.5),
        };
        assert_eq!((p.algorithm.as_str(), p.lr), want, "{:?}", r.point);
        assert!(!r.point.contains_key("algorithm"));
    }
    let err = |m: &Manifest| expand(m, "smoke", Backend::Sim).unwrap_err().to_string();
    let mut bad = m.clone();
    bad.labels = vec!["variant".into()];
    assert!(
        err(&bad).contains("labels: `variant` is not a grid key"),
        "{}",
        err(&bad)
    );
    let mut bad = m.clone();
    bad.labels.push("seed".into());
    assert!(
        err(&bad).contains("labels: `seed` is a parameter"),
        "{}",
        err(&bad)
    );
    let mut bad = m.clone();
    bad.cases.truncate(1);
    assert!(
        err(&bad).contains("value `fast` has no case"),
        "{}",
        err(&bad)
    );
    // without the label the backend is handed `method`, and refuses it
    let mut bad = m.clone();
    bad.labels.clear();
    assert!(
        err(&bad).contains("`method`: unknown parameter"),
        "{}",
        err(&bad)
    );
}

#[test]
fn grid_expands_with_stable_distinct_ids() {
    let runs = expand(&manifest(), "smoke", Backend::Sim).unwrap();
    assert_eq!(runs.len(), 6);
    assert!(runs.iter().all(|r| match &r.params {
        Params::Sim(p) => p.iterations == 5 && p.workers == 4,
        Params::Train(_) => false,
    }));
    let mut ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 6);
    assert_eq!(runs, expand(&manifest(), "smoke", Backend::Sim).unwrap());
    // the same grid for the trainer: its config, its own ids
    let train = expand(&manifest(), "smoke", Backend::Mpi).unwrap();
    assert!(
        train
            .iter()
            .all(|r| matches!(&r.params, Params::Train(c) if c.run_id == r.id && c.workers == 4))
    );
    assert_ne!(train[0].id, runs[0].id);
    assert_eq!(runs[0].point["algorithm"], "d-psgd");
}

#[test]
fn bad_params_name_the_run_and_key() {
    let mut m = manifest();
    m.params.insert(Value::from("workerz"), Value::from(3));
    let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
    assert!(
        err.contains("workerz") && err.contains("algorithm=d-psgd"),
        "{err}"
    );
    let err = expand(&manifest(), "paper", Backend::Sim)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("has no scale `paper`") && err.contains("smoke"),
        "{err}"
    );
}

/// The knobs are flat manifest keys: a wrong value names its key, an
/// unknown key is still refused, and `theta: theorem3-step` reaches the
/// simulator and the trainer (refused at plan time for an
/// asynchronous algorithm, which has no warm-up).
#[test]
fn knobs_are_flat_keys_named_in_errors() {
    let mut m = manifest();
    m.params.insert(Value::from("bits"), Value::from("one"));
    let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
    assert!(err.contains("bits"), "{err}");
    let mut m = manifest();
    m.params.insert(Value::from("thetta"), Value::from(1.0));
    let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
    assert!(err.contains("thetta"), "{err}");
    let err = expand(&m, "smoke", Backend::Mpi).unwrap_err().to_string();
    assert!(err.contains("thetta"), "{err}");
    let mut m = manifest();
    m.params
        .insert(Value::from("theta"), Value::from("theorem3-step"));
    m.params.insert(Value::from("theta_warmup"), Value::from(3));
    let runs = expand(&m, "smoke", Backend::Sim).unwrap();
    assert!(runs.iter().all(|r| matches!(&r.params,
        Params::Sim(p) if p.knobs.theta == Theta::Theorem3Step && p.knobs.theta_warmup == 3)));
    let runs = expand(&m, "smoke", Backend::InProcess).unwrap();
    assert!(runs.iter().all(|r| matches!(&r.params,
        Params::Train(c) if c.knobs.theta == Theta::Theorem3Step && c.knobs.theta_warmup == 3)));
    let mut asynchronous = m.clone();
    asynchronous
        .grid
        .insert("algorithm".into(), vec![Value::from("moniqua-ad-psgd")]);
    let err = expand(&asynchronous, "smoke", Backend::Mpi)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("theta") && err.contains("asynchronous"),
        "{err}"
    );
    m.params.insert(Value::from("theta"), Value::from("often"));
    let err = expand(&m, "smoke", Backend::Sim).unwrap_err().to_string();
    assert!(
        err.contains("theta") && err.contains("theorem3-step"),
        "{err}"
    );
}

/// Ids hash the canonical parameters: a field at its default adds
/// nothing, so a new field that keeps its default keeps every id, and a
/// changed value changes it.
#[test]
fn run_ids_leave_out_defaults() {
    #[derive(Serialize, Default)]
    struct Old {
        a: u32,
    }
    #[derive(Serialize, Default)]
    struct New {
        a: u32,
        added: Option<f64>,
    }
    assert_eq!(
        run_id("sim", &Old { a: 3 }, None),
        run_id("sim", &New { a: 3, added: None }, None)
    );
    assert_ne!(
        run_id("sim", &Old { a: 3 }, None),
        run_id(
            "sim",
            &New {
                a: 3,
                added: Some(1.0)
            },
            None
        )
    );
    assert_ne!(
        run_id("sim", &Old { a: 3 }, None),
        run_id("mpi", &Old { a: 3 }, None)
    );
    // a manifest value equal to the default is the same run as no value
    let mut m = manifest();
    let plain = expand(&m, "smoke", Backend::Mpi).unwrap();
    m.params.insert(Value::from("bits"), Value::from(8));
    m.params.insert(Value::from("hash"), Value::from(true));
    assert_eq!(plain, expand(&m, "smoke", Backend::Mpi).unwrap());
}

/// A limit bounds a run without deciding its result: raising
/// `timeout_s` keeps every id and the manifest's hash, so the recorded
/// runs stay current; a parameter that decides the result changes both.
#[test]
fn a_timeout_is_not_part_of_a_run_id_or_the_manifest_hash() {
    let dir = std::env::temp_dir().join(format!("repro-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.yaml");
    std::fs::write(
        &path,
        "name: t\ntitle: t\nsource: s\nbackend: mpi\nscales:\n  smoke: { iterations: 5, timeout_s: 60 }\n\
         grid:\n  algorithm: [d-psgd, moniqua]\nparams:\n  workers: 2\n  timeout_s: 600\n\
         table: { rows: [algorithm], value: final_loss }\n",
    )
    .unwrap();
    let plan = |overrides: &[&str]| {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let m = manifest::load(&path, &o).unwrap();
        let runs = expand(&m, "smoke", Backend::Mpi).unwrap();
        let ids: Vec<String> = runs.iter().map(|r| r.id.clone()).collect();
        let timeouts: Vec<u64> = runs
            .iter()
            .map(|r| match &r.params {
                Params::Train(c) => c.timeout_s,
                Params::Sim(_) => 0,
            })
            .collect();
        (ids, m.hash("smoke", Backend::Mpi), timeouts)
    };
    let (ids, hash, timeouts) = plan(&[]);
    assert_eq!(timeouts, [60, 60]);
    let (raised, raised_hash, raised_timeouts) = plan(&["scales.smoke.timeout_s=601"]);
    assert_eq!(raised_timeouts, [601, 601], "the override must take effect");
    assert_eq!((&ids, &hash), (&raised, &raised_hash));
    let (other, other_hash, _) = plan(&["params.workers=3"]);
    assert_ne!(ids, other);
    assert_ne!(hash, other_hash);
    std::fs::remove_dir_all(&dir).unwrap();
}
