//! The claims' tests on tuning runs: the protocol-sensitive mark and a
//! method that trained in no configuration.

use super::*;

/// A run of `alg` with these cells (and a `config` where given).
fn scored(alg: &str, config: Option<&str>, seed: &str, cells: &[(&str, f64)]) -> RunRecord {
    let mut r = row(alg, seed, "1.0", "completed");
    if let Some(c) = config {
        r.point.insert("config".into(), c.into());
    }
    for (k, v) in cells {
        r.metrics
            .insert((*k).into(), crate::records::metrics::Cell::Number(Some(*v)));
    }
    r
}

/// Tuning runs of `alg`: per configuration its validation accuracy
/// (which the search ranks by) and its test accuracy (which the claim
/// reads), on seeds 100 and 101.
fn tuned(alg: &str, configs: &[(&str, f64, f64)]) -> Vec<RunRecord> {
    configs
        .iter()
        .flat_map(|(c, val, test)| {
            ["100", "101"].map(|seed| {
                scored(
                    alg,
                    Some(c),
                    seed,
                    &[("val_accuracy", *val), ("avg_test_accuracy", *test)],
                )
            })
        })
        .collect()
}

/// A claim whose direction on the tuning runs changes with the
/// configuration is marked protocol-sensitive, with how many pairs of
/// the sides' best configurations it holds in; a claim stable over
/// them is not, and neither is one about untuned methods.
#[test]
fn a_claim_the_protocol_decides_is_marked() {
    let finals: Vec<RunRecord> = ["moniqua", "choco"]
        .iter()
        .flat_map(|alg| {
            (0..4).map(move |seed| {
                let acc = if *alg == "moniqua" { 0.86 } else { 0.84 };
                scored(
                    alg,
                    None,
                    &seed.to_string(),
                    &[("avg_test_accuracy", acc + 0.001 * seed as f64)],
                )
            })
        })
        .collect();
    let spec = claims("[{better: moniqua, than: choco, metric: avg_test_accuracy}]");
    let verdict = |tuning: Vec<RunRecord>| {
        evaluate(
            &spec,
            &table(),
            &finals,
            Some(&searched(tuning)),
            &mut no_curves,
            1,
        )
        .unwrap()
        .remove(0)
    };
    // moniqua's second-best configuration trails choco's best
    let mut sensitive = tuned(
        "moniqua",
        &[("a", 0.86, 0.86), ("b", 0.85, 0.80), ("c", 0.5, 0.5)],
    );
    sensitive.extend(tuned("choco", &[("x", 0.84, 0.83), ("y", 0.83, 0.82)]));
    let v = verdict(sensitive);
    assert_eq!(v.outcome, Outcome::Supported, "{v:?}");
    assert!(v.protocol_sensitive, "{v:?}");
    assert!(
        v.note.contains("protocol-sensitive: on the tuning runs' avg_test_accuracy (diagnostic only: nothing was chosen on it), over the best 3 configurations of moniqua against the best 2 configurations of choco, the claim holds in 2 of 6 pairs"),
        "{}",
        v.note
    );
    let md = markdown("t", &[v]);
    assert!(md.contains("**supported** *protocol-sensitive* |"), "{md}");
    // every one of moniqua's best is ahead of every one of choco's
    let mut stable = tuned(
        "moniqua",
        &[("a", 0.86, 0.86), ("b", 0.85, 0.85), ("c", 0.5, 0.845)],
    );
    stable.extend(tuned("choco", &[("x", 0.84, 0.83), ("y", 0.83, 0.82)]));
    let v = verdict(stable);
    assert!(!v.protocol_sensitive, "{v:?}");
    assert!(!v.note.contains("protocol"), "{}", v.note);
    // no search at all: nothing to check
    let v = evaluate(&spec, &table(), &finals, None, &mut no_curves, 1)
        .unwrap()
        .remove(0);
    assert!(!v.protocol_sensitive);
}

/// A search over `runs` (tuning runs with a `config` key) by
/// validation accuracy, as claims read a recorded one.
fn searched(runs: Vec<RunRecord>) -> TuningRecord {
    let spec: crate::experiment::manifest::TuneSpec = yaml_serde::from_str(
        "{metric: val_accuracy, budget: 3, seeds: [100, 101], validation: 0.1, space: {}}",
    )
    .unwrap();
    let selection = crate::report::tune::select(&spec, &runs);
    TuningRecord::new(&spec, selection, runs)
}

/// A method whose every tuning configuration failed has no final runs:
/// its failure claims are decided from its tuning runs, and a
/// comparison with it says no configuration trained.
#[test]
fn a_method_that_trained_in_no_configuration() {
    let rows = runs("moniqua", &["1.0", "1.1", "0.9"], "completed");
    let mut tuning = Vec::new();
    for config in ["lr=0.1", "lr=0.2", "lr=0.4"] {
        for seed in ["100", "101"] {
            let mut r = row("ecd", seed, "NaN", "diverged");
            r.run_id = format!("ecd-{config}-{seed}");
            r.point.insert("config".into(), config.into());
            tuning.push(r);
        }
    }
    // one run of moniqua's tuning: it trained, so nothing is said of it
    let mut r = row("moniqua", "100", "1.0", "completed");
    r.point.insert("config".into(), "lr=0.1".into());
    tuning.push(r);
    let specs = claims(
        "[{diverges: ecd}, {better: moniqua, than: ecd, metric: final_loss}, {diverges: moniqua}, {diverges: dcd}]",
    );
    let v = evaluate(
        &specs,
        &table(),
        &rows,
        Some(&searched(tuning)),
        &mut no_curves,
        1,
    )
    .unwrap();
    // 6 of 6 diverged: p = 1/64 against a rate of one half
    assert_eq!(v[0].outcome, Outcome::Supported, "{:?}", v[0]);
    assert_eq!(v[0].n_method, 6);
    assert!(
        v[0].note.contains(
            "ecd: no configuration trained, every one of its 6 tuning runs failed (6 diverged)"
        ),
        "{}",
        v[0].note
    );
    assert!(
        v[0].note.contains("decided from the tuning runs"),
        "{}",
        v[0].note
    );
    assert_eq!(v[1].outcome, Outcome::NoConfiguration, "{:?}", v[1]);
    assert_eq!(v[1].outcome.word(), "no working configuration");
    assert_eq!(v[2].n_method, 3);
    assert_eq!(v[3].outcome, Outcome::NotTestable);
    assert!(
        v[3].note.contains("no recorded runs of dcd"),
        "{}",
        v[3].note
    );
    // a method whose tuning runs trained, at chance: no working
    // configuration; its comparison reads so, and says why
    let at_chance: Vec<RunRecord> = ["100", "101"]
        .iter()
        .map(|seed| {
            let mut r = row("choco", seed, "2.2", "completed");
            r.point.insert("config".into(), "gamma=0.1".into());
            for (k, v) in [("val_accuracy", 0.11), ("chance_accuracy", 0.1)] {
                r.metrics
                    .insert(k.into(), crate::records::metrics::Cell::Number(Some(v)));
            }
            r
        })
        .collect();
    let v = evaluate(
        &claims("[{better: moniqua, than: choco, metric: final_loss}]"),
        &table(),
        &rows,
        Some(&searched(at_chance)),
        &mut no_curves,
        1,
    )
    .unwrap();
    assert_eq!(v[0].outcome, Outcome::NoConfiguration, "{:?}", v[0]);
    assert!(
        v[0].note.contains(
            "choco: no working configuration found, its best tuning score within `tune.chance_margin` of chance (2 tuning runs: 2 ok)"
        ),
        "{}",
        v[0].note
    );
    // without the tuning runs, nothing can be said of ecd
    let v = evaluate(&specs, &table(), &rows, None, &mut no_curves, 1).unwrap();
    assert_eq!(v[0].outcome, Outcome::NotTestable);
}
