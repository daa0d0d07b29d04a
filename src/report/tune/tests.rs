use super::*;
use crate::records::metrics::Cell;

fn spec(yaml: &str) -> TuneSpec {
    yaml_serde::from_str(yaml).unwrap()
}

#[test]
fn every_method_gets_the_same_budget() {
    let s = spec(
        "{metric: val_accuracy, budget: 3, seeds: [9], validation: 0.1,
          space: {moniqua: {gamma: [0.1, 0.2], theta: [0.5, 1, 2]}, choco: {gamma: [0.1, 0.5]}}}",
    );
    let m = configs(&s, "moniqua");
    assert_eq!(m.len(), 3, "six cut to the budget");
    assert_eq!(m, configs(&s, "moniqua"), "the same three every time");
    assert!(
        m.iter()
            .all(|c| c.label.starts_with("gamma=") && c.set.len() == 2)
    );
    let c = configs(&s, "choco");
    assert_eq!(
        c.iter().map(|c| c.label.as_str()).collect::<Vec<_>>(),
        ["gamma=0.1", "gamma=0.5"]
    );
    assert_eq!(configs(&s, "d-psgd")[0].label, "untuned");
}

fn points() -> Vec<BTreeMap<String, String>> {
    ["moniqua", "choco"]
        .iter()
        .flat_map(|a| {
            ["0", "1"].map(|s| {
                [("algorithm", *a), ("seed", s)]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .into()
            })
        })
        .collect()
}

#[test]
fn the_protocol_is_checked_before_anything_runs() {
    let ok = "{metric: val_accuracy, budget: 2, seeds: [9], validation: 0.1, space: {moniqua: {gamma: [0.1]}}}";
    assert!(check(&spec(ok), Backend::Mpi, &points()).is_ok());
    let cases = [
        (
            ok.replace("val_accuracy", "avg_test_accuracy"),
            Backend::Mpi,
            "tune.metric",
            "test set",
        ),
        (
            ok.replace("seeds: [9]", "seeds: [1]"),
            Backend::Mpi,
            "tune.seeds",
            "also a final seed",
        ),
        (
            ok.replace("budget: 2", "budget: 0"),
            Backend::Mpi,
            "tune.budget",
            "at least one",
        ),
        (
            ok.replace(", validation: 0.1", ""),
            Backend::Mpi,
            "tune.validation",
            "give its fraction",
        ),
        (ok.to_string(), Backend::Sim, "tune.validation", "no data"),
        (
            ok.replace("moniqua:", "monqua:"),
            Backend::Mpi,
            "tune.space.monqua",
            "no value",
        ),
        (
            ok.replace("[0.1]", "[]"),
            Backend::Mpi,
            "tune.space.moniqua.gamma",
            "no values",
        ),
    ];
    let ranged = "{metric: val_accuracy, budget: 12, seeds: [9], validation: 0.1, confirm: {best: 3, seeds: [10, 11]}, compare_with: {experiment: sweep, method: moniqua}, space: {moniqua: {gamma: {range: [0.002, 1.0], stated: 0.005}, modulus: {range: [0.02, 20.0]}}}}";
    assert!(check(&spec(ranged), Backend::Mpi, &points()).is_ok());
    let cases = cases.into_iter().chain([
        (
            ranged.replace("stated: 0.005", "stated: 0.001"),
            Backend::Mpi,
            "tune.space.moniqua.gamma",
            "lies outside [0.002, 1]",
        ),
        (
            ranged.replace("[0.02, 20.0]", "[0.0, 20.0]"),
            Backend::Mpi,
            "tune.space.moniqua.modulus",
            "must be positive",
        ),
        (
            ranged.replace("[0.02, 20.0]", "[20.0, 0.02]"),
            Backend::Mpi,
            "tune.space.moniqua.modulus",
            "is not a range",
        ),
        (
            ranged.replace("budget: 12", "budget: 11"),
            Backend::Mpi,
            "tune.budget",
            "at least 12 configurations",
        ),
        (
            ranged.replace("seeds: [10, 11]", "seeds: [9, 11]"),
            Backend::Mpi,
            "tune.confirm.seeds",
            "also in tune.seeds",
        ),
        (
            ranged.replace("seeds: [10, 11]", "seeds: [1]"),
            Backend::Mpi,
            "tune.confirm.seeds",
            "also a final seed",
        ),
        (
            ranged.replace("best: 3", "best: 0"),
            Backend::Mpi,
            "tune.confirm.best",
            "at least one",
        ),
        (
            ranged.replace("method: moniqua}", "method: choco}"),
            Backend::Mpi,
            "tune.compare_with.method",
            "no search space",
        ),
        (
            ranged.replace("experiment: sweep", "experiment: ../etc/x"),
            Backend::Mpi,
            "tune.compare_with.experiment",
            "not an experiment's name",
        ),
        (
            ranged.replace("validation: 0.1,", "validation: 0.1, chance_margin: 1.5,"),
            Backend::Mpi,
            "tune.chance_margin",
            "not a share",
        ),
    ]);
    for (yaml, backend, path, says) in cases {
        let (p, m) = check(&spec(&yaml), backend, &points()).unwrap_err();
        assert_eq!(p, path, "{yaml}: {m}");
        assert!(m.contains(says), "{yaml}: {m}");
    }
    let unseeded: Vec<_> = points()
        .into_iter()
        .map(|mut p| {
            p.remove("seed");
            p
        })
        .collect();
    let (p, _) = check(&spec(ok), Backend::Mpi, &unseeded).unwrap_err();
    assert_eq!(p, "tune.seeds");
}

fn run(alg: &str, config: &str, seed: &str, status: &str, acc: Option<f64>) -> RunRecord {
    RunRecord {
        run_id: format!("{alg}-{config}-{seed}"),
        point: [
            ("algorithm", alg),
            ("config", config),
            ("seed", seed),
            ("bits", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into(),
        metrics: [
            ("status".to_string(), Cell::Text(status.into())),
            ("val_accuracy".to_string(), Cell::Number(acc)),
            ("chance_accuracy".to_string(), Cell::Number(Some(0.1))),
        ]
        .into(),
    }
}

fn chosen(sel: &Selection) -> Vec<(&str, &str)> {
    sel.tried
        .iter()
        .filter(|t| t.chosen)
        .map(|t| (t.group["algorithm"].as_str(), t.config.as_str()))
        .collect()
}

fn with_health(mut r: RunRecord, health: &str) -> RunRecord {
    r.metrics.insert("health".into(), Cell::Text(health.into()));
    r
}

/// The best mean over the tuning seeds wins, a failed run counted with
/// what it achieved (chance accuracy without a value).
#[test]
fn selection_is_by_the_validation_mean() {
    let s = spec("{metric: val_accuracy, budget: 3, seeds: [8, 9], validation: 0.1, space: {}}");
    let rows = vec![
        run("moniqua", "g=1", "8", "completed", Some(0.80)),
        run("moniqua", "g=1", "9", "completed", Some(0.84)),
        run("moniqua", "g=2", "8", "completed", Some(0.90)),
        run("moniqua", "g=2", "9", "diverged", None),
        run("moniqua", "g=3", "8", "completed", Some(0.83)),
        run("moniqua", "g=3", "9", "completed", Some(0.83)),
        run("choco", "g=1", "8", "completed", Some(0.70)),
        run("choco", "g=1", "9", "completed", Some(0.70)),
    ];
    let sel = select(&s, &rows);
    assert_eq!(chosen(&sel), [("moniqua", "g=3"), ("choco", "g=1")]);
    let g2 = sel.tried.iter().find(|t| t.config == "g=2").unwrap();
    // 0.90 and the diverged run at chance: (0.9 + 0.1) / 2
    assert_eq!((g2.scored, g2.runs, g2.failed()), (2, 2, 1));
    assert!((g2.score.unwrap() - 0.5).abs() < 1e-12, "{g2:?}");
    assert_eq!(counts_text(&g2.health), "1 ok, 1 diverged");
    // a silent run did not test the method: left out of the score
    let mut rows = rows.clone();
    rows.push(with_health(
        run("choco", "g=1", "10", "completed", Some(0.1)),
        "silent",
    ));
    let sel = select(&s, &rows);
    let choco = sel
        .tried
        .iter()
        .find(|t| t.group["algorithm"] == "choco")
        .unwrap();
    assert_eq!((choco.score, choco.scored, choco.runs), (Some(0.7), 2, 3));
    // lower is better for a loss
    let loss = spec("{metric: val_loss, budget: 3, seeds: [8], validation: 0.1, space: {}}");
    let rows: Vec<RunRecord> = [("a", 0.5), ("b", 0.2), ("c", 0.9)]
        .iter()
        .map(|(c, v)| {
            let mut r = run("moniqua", c, "8", "completed", None);
            r.metrics.insert("val_loss".into(), Cell::Number(Some(*v)));
            r
        })
        .collect();
    let sel = select(&loss, &rows);
    assert_eq!(sel.tried.iter().find(|t| t.chosen).unwrap().config, "b");
}

/// The audit's case: the best-scoring configuration has runs that are
/// not ok, and it is chosen all the same (no veto by health). Equal
/// scores go to fewer failed runs. A setting where no run trained gets
/// no choice.
#[test]
fn the_best_score_is_chosen_whatever_its_health() {
    let s = spec("{metric: val_accuracy, budget: 3, seeds: [8, 9], validation: 0.1, space: {}}");
    let rows = vec![
        // B 0.4, gamma 0.5 in v4: the best mean, one run failed
        run("moniqua", "b=0.4", "8", "completed", Some(0.62)),
        with_health(
            run("moniqua", "b=0.4", "9", "completed", Some(0.25)),
            "exploded",
        ),
        // B 8, gamma 5e-3: every run ok, a lower mean
        run("moniqua", "b=8", "8", "completed", Some(0.16)),
        run("moniqua", "b=8", "9", "completed", Some(0.14)),
    ];
    let sel = select(&s, &rows);
    assert_eq!(chosen(&sel), [("moniqua", "b=0.4")], "{sel:?}");
    // a tie: the one with fewer failed runs, though tried later
    let tie = vec![
        run("choco", "a", "8", "completed", Some(0.9)),
        with_health(run("choco", "a", "9", "completed", Some(0.5)), "exploded"),
        run("choco", "b", "8", "completed", Some(0.7)),
        run("choco", "b", "9", "completed", Some(0.7)),
    ];
    assert_eq!(chosen(&select(&s, &tie)), [("choco", "b")]);
    // no run trained: no choice, and the setting says why
    let none = vec![
        with_health(run("ecd", "a", "8", "completed", Some(0.3)), "collapsed"),
        run("ecd", "b", "8", "diverged", None),
    ];
    let sel = select(&s, &none);
    assert!(chosen(&sel).is_empty());
    assert_eq!(sel.none.len(), 1);
    assert_eq!(sel.none[0].1, NoChoice::NoneTrained);
    assert_eq!(sel.unviable().len(), 1);
}

/// A setting whose best score is within `tune.chance_margin` of chance
/// found no working configuration: no choice, and tuning.md warns. A
/// setting that trains is left alone.
#[test]
fn a_best_score_at_chance_is_no_working_configuration() {
    let s = spec("{metric: val_accuracy, budget: 3, seeds: [8, 9], validation: 0.1, space: {}}");
    let mut rows = vec![
        run("moniqua", "b=160", "8", "completed", Some(0.13)),
        run("moniqua", "b=160", "9", "completed", Some(0.14)),
        run("moniqua", "b=8", "8", "completed", Some(0.11)),
    ];
    let sel = select(&s, &rows);
    assert!(chosen(&sel).is_empty(), "{sel:?}");
    assert!(matches!(
        sel.none[0].1,
        NoChoice::AtChance { best, chance } if (best - 0.135).abs() < 1e-12 && chance == 0.1
    ));
    let said = findings(&s, &sel, &[]);
    assert!(
        said.contains("warning: algorithm=moniqua bits=1: no working configuration found: the best val_accuracy is 0.1350, within 0.05 of chance (0.1000)"),
        "{said}"
    );
    // a configuration that trains: chosen, and no warning
    rows.push(run("moniqua", "b=2", "8", "completed", Some(0.82)));
    let sel = select(&s, &rows);
    assert_eq!(chosen(&sel), [("moniqua", "b=2")]);
    assert!(
        !findings(&s, &sel, &[]).contains("no working configuration"),
        "{sel:?}"
    );
    // a loss has no chance level: never judged so
    let loss = spec("{metric: val_loss, budget: 3, seeds: [8], validation: 0.1, space: {}}");
    let mut r = run("moniqua", "a", "8", "completed", None);
    r.metrics.insert("val_loss".into(), Cell::Number(Some(0.1)));
    assert_eq!(chosen(&select(&loss, &[r])), [("moniqua", "a")]);
}

/// Halton's radical inverse, against its first values by hand.
#[test]
fn the_halton_sequence() {
    let base2: Vec<f64> = (1..=4).map(|i| halton(i, 2)).collect();
    assert_eq!(base2, [0.5, 0.25, 0.75, 0.125]);
    let base3: Vec<f64> = (1..=4).map(|i| halton(i, 3)).collect();
    for (got, want) in base3
        .iter()
        .zip([1.0 / 3.0, 2.0 / 3.0, 1.0 / 9.0, 4.0 / 9.0])
    {
        assert!((got - want).abs() < 1e-15, "{base3:?}");
    }
}

const MONIQUA_RANGES: &str = "{metric: val_accuracy, budget: 12, seeds: [8, 9], validation: 0.1,
    space: {moniqua: {modulus: {range: [0.05, 20], stated: 8.0}, gamma: {range: [0.002, 1], stated: 0.005}},
            choco: {gamma: {range: [0.01, 1]}, compressor_scale: [0, 1]}}}";

/// A range draws exactly the budget, the same points for every run of
/// the tool, spread over the whole range in its scale; a list axis
/// beside a range is drawn from by index, both values taken.
#[test]
fn a_range_draws_the_budget_evenly() {
    let s = spec(MONIQUA_RANGES);
    let m = configs(&s, "moniqua");
    assert_eq!(m.len(), 12);
    assert_eq!(m, configs(&s, "moniqua"), "deterministic");
    let axis = |cs: &[Config], k: &str| -> Vec<f64> {
        cs.iter()
            .map(|c| numeric(c.set.get(k).unwrap()).unwrap())
            .collect()
    };
    // gamma is the first axis (base 2): log-even over [0.002, 1]
    let gamma = axis(&m, "gamma");
    assert!(gamma.iter().all(|g| (0.002..=1.0).contains(g)), "{gamma:?}");
    let below = |x: f64| gamma.iter().filter(|g| **g < x).count();
    // half the draws below the log-midpoint 0.0447
    assert_eq!(below(0.0447), 6, "{gamma:?}");
    assert_eq!(m[0].label, "gamma=0.0447 modulus=0.368", "{:?}", m[0]);
    let c = configs(&s, "choco");
    assert_eq!(c.len(), 12);
    let scales = axis(&c, "compressor_scale");
    assert_eq!(
        scales.iter().filter(|v| **v == 0.0).count(),
        6,
        "{scales:?}"
    );
}

/// The v4 failure: Moniqua's working region at 1 bit (B 0.5-2, gamma
/// 0.05-0.2 in the sensitivity sweep) lies between the grid's values,
/// so the grid never tries it; the range does, and the choice lands
/// in it on a score that peaks there.
#[test]
fn a_working_region_between_grid_values_is_found_by_the_range() {
    let works = |b: f64, g: f64| (0.3..=3.0).contains(&b) && (0.02..=0.3).contains(&g);
    let score = |b: f64, g: f64| if works(b, g) { 0.83 } else { 0.15 };
    let grid = spec(
        "{metric: val_accuracy, budget: 6, seeds: [8], validation: 0.1,
          space: {moniqua: {modulus: [0.02, 0.4, 8.0], gamma: [0.005, 0.5]}}}",
    );
    let ranged = spec(MONIQUA_RANGES);
    let rows = |s: &TuneSpec| -> Vec<RunRecord> {
        configs(s, "moniqua")
            .iter()
            .map(|c| {
                let b = numeric(c.set.get("modulus").unwrap()).unwrap();
                let g = numeric(c.set.get("gamma").unwrap()).unwrap();
                run("moniqua", &c.label, "8", "completed", Some(score(b, g)))
            })
            .collect()
    };
    let in_region = |label: &str| {
        let kv: BTreeMap<&str, f64> = label
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k, v.parse().unwrap()))
            .collect();
        works(kv["modulus"], kv["gamma"])
    };
    assert!(
        !configs(&grid, "moniqua")
            .iter()
            .any(|c| in_region(&c.label))
    );
    // the grid's best is at chance: no working configuration
    assert!(chosen(&select(&grid, &rows(&grid))).is_empty());
    let sel = select(&ranged, &rows(&ranged));
    let picked = chosen(&sel);
    assert_eq!(picked.len(), 1, "{sel:?}");
    assert!(in_region(picked[0].1), "{picked:?}");
}

/// `tune.confirm`: the best few run on more seeds and the choice is
/// made among them over all their seeds; a step beyond the edge that
/// won on one lucky seed does not win over five.
#[test]
fn extend_on_one_lucky_seed_is_not_taken() {
    let s = spec(
        "{metric: val_accuracy, budget: 3, seeds: [8, 9], validation: 0.1, extend: true,
          confirm: {best: 2, seeds: [10, 11, 12]}, space: {}}",
    );
    let mut rows = vec![
        run("moniqua", "a", "8", "completed", Some(0.80)),
        run("moniqua", "a", "9", "completed", Some(0.80)),
        run("moniqua", "b", "8", "completed", Some(0.79)),
        run("moniqua", "b", "9", "completed", Some(0.79)),
        run("moniqua", "c", "8", "completed", Some(0.60)),
        run("moniqua", "c", "9", "completed", Some(0.60)),
    ];
    let first = select(&s, &rows);
    assert_eq!(first.finalists(2).len(), 2);
    assert_eq!(first.finalists(2)[1].1, "b");
    // the second look: a and b on three more seeds; the step beyond,
    // e, on all five, lucky on one of them
    for (c, values) in [
        ("a", [0.78, 0.78, 0.78]),
        ("b", [0.80, 0.80, 0.80]),
        ("e", [0.95, 0.70, 0.70]),
    ] {
        for (seed, v) in ["10", "11", "12"].iter().zip(values) {
            rows.push(run("moniqua", c, seed, "completed", Some(v)));
        }
    }
    rows.push(run("moniqua", "e", "8", "completed", Some(0.70)));
    rows.push(run("moniqua", "e", "9", "completed", Some(0.70)));
    let sel = select(&s, &rows);
    // b: 0.794 over five seeds; a: 0.788; e: 0.75; c, never
    // confirmed, is out of the running
    assert_eq!(chosen(&sel), [("moniqua", "b")], "{sel:?}");
    let e = sel.tried.iter().find(|t| t.config == "e").unwrap();
    assert!(e.confirmed && e.scored == 5);
    // one seed alone would have taken the step beyond
    let one_seed: Vec<RunRecord> = rows
        .iter()
        .filter(|r| r.point["seed"] == "10")
        .cloned()
        .collect();
    assert_eq!(chosen(&select(&s, &one_seed)), [("moniqua", "e")]);
}

/// A choice at an edge whose step beyond the plan refused says so; one
/// never tried beyond suggests `tune.extend`.
#[test]
fn an_edge_whose_step_beyond_was_refused_says_so() {
    let s = spec(
        "{metric: val_accuracy, budget: 3, seeds: [9], validation: 0.1, extend: true,
          space: {choco: {gamma: [0.25, 0.5, 1.0]}}}",
    );
    let rows = vec![
        run("choco", "gamma=0.5", "9", "completed", Some(0.80)),
        run("choco", "gamma=1.0", "9", "completed", Some(0.90)),
    ];
    let sel = select(&s, &rows);
    let refused = ["algorithm=choco bits=1 gamma=2.0: gamma must be at most 1".to_string()];
    let said = findings(&s, &sel, &refused);
    assert!(
        said.contains(
            "algorithm=choco bits=1: gamma=1.0 is at the edge of its space; \
             the step beyond it, gamma=2.0, was refused (below)"
        ),
        "{said}"
    );
    assert!(!said.contains("tries it"), "{said}");
    let said = findings(&s, &sel, &[]);
    assert!(
        said.contains("next step: gamma=2.0; `tune.extend: true` tries it"),
        "{said}"
    );
}

/// A choice at the smallest or largest value of a numeric axis is at
/// its edge; the step beyond is geometric for positive values,
/// arithmetic otherwise, and whole for whole numbers.
#[test]
fn edges_and_the_step_beyond() {
    let s = spec(
        "{metric: val_accuracy, budget: 9, seeds: [9], validation: 0.1,
          space: {dcd: {lr: [0.02, 0.05, 0.1], compressor_scale: [1, 0.25]}, choco: {gamma: [-1.0, 0.0, 1.0], bucket: [256, 512]}}}",
    );
    let at = |m: &str, c: &str| {
        edges(&s, m, c)
            .into_iter()
            .map(|(a, e, b)| format!("{a}: {} -> {}", plan::text(&e), plan::text(&b)))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        at("dcd", "compressor_scale=1 lr=0.1"),
        ["compressor_scale: 1 -> 4.0", "lr: 0.1 -> 0.2"]
    );
    assert_eq!(
        at("dcd", "compressor_scale=0.25 lr=0.05"),
        ["compressor_scale: 0.25 -> 0.0625"]
    );
    assert_eq!(
        at("dcd", "compressor_scale=0.25 lr=0.02"),
        ["compressor_scale: 0.25 -> 0.0625", "lr: 0.02 -> 0.008"]
    );
    assert_eq!(at("choco", "bucket=512 gamma=0.0"), ["bucket: 512 -> 1024"]);
    let zero = spec(
        "{metric: val_accuracy, budget: 9, seeds: [9], validation: 0.1, space: {choco: {compressor_scale: [0, 1]}}}",
    );
    assert!(edges(&zero, "choco", "compressor_scale=0").is_empty());
    assert_eq!(edges(&zero, "choco", "compressor_scale=1").len(), 1);
    assert_eq!(
        at("choco", "bucket=256 gamma=-1.0"),
        ["bucket: 256 -> 128", "gamma: -1.0 -> -2.0"]
    );
    assert!(at("d-psgd", "untuned").is_empty());
    // the configuration beyond, and back from its label
    let c = replaced(
        &s,
        "dcd",
        "compressor_scale=1 lr=0.1",
        "lr",
        &Value::from(0.2),
    )
    .unwrap();
    assert_eq!(c.label, "compressor_scale=1 lr=0.2");
    assert_eq!(
        extended_config(&s, "dcd", "compressor_scale=1 lr=0.2"),
        Some(c)
    );
}
