use super::*;

fn planned(algorithm: &str, lr: f32) -> PlannedRun {
    PlannedRun {
        id: "t".into(),
        point: Default::default(),
        params: Params::Sim(SimParams {
            algorithm: algorithm.into(),
            workers: 4,
            dim: 20,
            iterations: 30,
            lr,
            ..SimParams::default()
        }),
        network: None,
    }
}

/// The theta a run ends with reaches its summary (runs.csv's `theta_used`):
/// the one given, or the one `theta: theorem3-step` picked after its warm-up.
#[test]
fn the_theta_a_run_used_is_recorded() {
    let dir = std::env::temp_dir().join(format!("repro-sim-theta-{}", std::process::id()));
    let given = execute(
        &planned("moniqua", 0.05),
        "x",
        &Invocation::default(),
        &dir.join("given.jsonl"),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(given.theta, Some(2.0));
    let mut auto = planned("moniqua", 0.05);
    if let Params::Sim(p) = &mut auto.params {
        p.knobs.theta = repro_algos::Theta::Theorem3Step;
        p.knobs.theta_warmup = 5;
    }
    let picked = execute(
        &auto,
        "x",
        &Invocation::default(),
        &dir.join("auto.jsonl"),
        &mut |_| {},
    )
    .unwrap();
    assert!(
        picked.theta.is_some_and(|t| t > 0.0 && t != 2.0),
        "{:?}",
        picked.theta
    );
    let dpsgd = execute(
        &planned("d-psgd", 0.05),
        "x",
        &Invocation::default(),
        &dir.join("dpsgd.jsonl"),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(dpsgd.theta, None);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gaussian_each_starts_every_worker_apart_and_theorem1_takes_noise() {
    let p = SimParams {
        workers: 3,
        dim: 50,
        x0: "gaussian-each".into(),
        x0_scale: 0.5,
        ..SimParams::default()
    };
    let starts: Vec<Vec<f32>> = (0..3).map(|i| start(&p, 50, i)).collect();
    assert_ne!(starts[0], starts[1]);
    assert_ne!(starts[1], starts[2]);
    // drawn from x0_seed: the same again
    assert_eq!(starts[2], start(&p, 50, 2));
    let shared = SimParams {
        x0: "gaussian".into(),
        ..p.clone()
    };
    assert_eq!(start(&shared, 50, 0), start(&shared, 50, 2));
    // the simulator builds each worker from its own start
    let quadratic = objective(&p).unwrap();
    let sim = Simulator::with_starts(
        quadratic.as_ref(),
        topology(&p).unwrap(),
        &algorithm(&p).unwrap(),
        sim_config(&p, None),
        &|i| Cow::Owned(start(&p, 50, i)),
    )
    .unwrap();
    for (i, s) in starts.iter().enumerate() {
        assert_eq!(sim.model(i), s.as_slice(), "worker {i}");
    }
    // theorem1's gradients carry the run's noise: two draws differ,
    // and without noise they do not
    let gradient = |noise: f32, draw: u64| {
        let q = SimParams {
            objective: "theorem1".into(),
            noise,
            ..p.clone()
        };
        let o = objective(&q).unwrap();
        let mut g = vec![0.0f32; 50];
        o.gradient(
            0,
            &starts[0],
            &mut repro_algos::rng::Rng::new(1, draw),
            &mut g,
        );
        g
    };
    assert_eq!(gradient(0.0, 1), gradient(0.0, 2));
    assert_ne!(gradient(0.1, 1), gradient(0.1, 2));
}

#[test]
fn tiling_repeats_the_period_at_every_length() {
    let period = [1.0, 2.0, 3.0];
    for len in [0, 1, 2, 3, 4, 6, 7, 23, 100] {
        let v = tile(&period, len);
        let want: Vec<f32> = (0..len).map(|j| period[j % 3]).collect();
        assert_eq!(v, want, "length {len}");
    }
}

/// The summary's numbers are the ones the log's end record carries:
/// change the log and the summary follows.
#[test]
fn a_summary_is_read_from_the_log() {
    let dir = std::env::temp_dir().join(format!("repro-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("t.jsonl");
    let mut reported = Vec::new();
    let run = planned("moniqua", 0.05);
    let s = execute(&run, "x", &Invocation::default(), &path, &mut |k| {
        reported.push(k)
    })
    .unwrap();
    // the progress bar follows the iterations, and ends at the last
    let Params::Sim(p) = &run.params else {
        unreachable!()
    };
    assert_eq!(reported.last(), Some(&p.iterations), "{reported:?}");
    assert!(reported.windows(2).all(|w| w[0] < w[1]), "{reported:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    let log = repro_runlog::read_log(text.as_bytes()).unwrap();
    let m = log.end.as_ref().unwrap().metrics.clone().unwrap();
    assert_eq!(s.status, RunStatus::Completed);
    assert_eq!(s.final_loss, m.final_loss);
    assert_eq!(s.consensus, m.consensus);
    assert_eq!(s.bytes, m.bytes_sent);
    assert!(m.bytes_sent > 0);
    // the run's host time, split: iterations and metrics, both
    // measured, together within the run's wall time
    let (setup_s, iterations_s, metrics_s) = (
        m.setup_s.unwrap(),
        m.iterations_s.unwrap(),
        m.metrics_s.unwrap(),
    );
    assert!(setup_s > 0.0 && iterations_s > 0.0 && metrics_s > 0.0);
    assert!(
        setup_s + iterations_s + metrics_s <= s.wall_s,
        "{m:?} {}",
        s.wall_s
    );
    assert_eq!((s.setup_s, s.metrics_s), (m.setup_s, m.metrics_s));
    let mut edited = log.clone();
    if let Some(e) = edited.end.as_mut() {
        e.metrics.as_mut().unwrap().final_loss = Some(42.0);
    }
    assert_eq!(
        summarize(&edited, 4, 20, 0.0, "none".into()).final_loss,
        Some(42.0)
    );
    // a diverged run: no final loss, status diverged
    let s = execute(
        &planned("d-psgd", 1e6),
        "x",
        &Invocation::default(),
        &path,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(s.status, RunStatus::Diverged);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `threads` sizes the simulator's pool and changes no number.
#[test]
fn the_thread_count_changes_no_number() {
    let dir = std::env::temp_dir().join(format!("repro-sim-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut two = planned("moniqua", 0.05);
    if let Params::Sim(p) = &mut two.params {
        p.threads = 2;
    }
    let run = |r: &PlannedRun, name: &str| {
        let s = execute(r, "x", &Invocation::default(), &dir.join(name), &mut |_| {}).unwrap();
        (
            s.status,
            s.final_loss,
            s.local_loss,
            s.grad_norm_sq,
            s.consensus,
            s.bytes,
        )
    };
    assert_eq!(
        run(&planned("moniqua", 0.05), "a.jsonl"),
        run(&two, "b.jsonl")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `network` condition reaches the virtual clock typed: the same
/// run is slower on a 1 Mbit/s, 5 ms network than on none, and its
/// id differs.
#[test]
fn a_network_condition_slows_the_virtual_clock() {
    let dir = std::env::temp_dir().join(format!("repro-sim-net-{}", std::process::id()));
    let free = execute(
        &planned("moniqua", 0.05),
        "x",
        &Invocation::default(),
        &dir.join("a.jsonl"),
        &mut |_| {},
    )
    .unwrap();
    let mut slow = planned("moniqua", 0.05);
    let yaml = yaml_serde::from_str("{bandwidth: 1mbit, latency: 5ms}").unwrap();
    slow.network = crate::experiment::condition::Condition::from_yaml(&yaml, None).unwrap();
    let shaped = execute(
        &slow,
        "x",
        &Invocation::default(),
        &dir.join("b.jsonl"),
        &mut |_| {},
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(free.shaping, "none");
    assert_eq!(shaped.shaping, "sim (virtual clock)");
    let (t0, t1) = (free.virtual_s.unwrap(), shaped.virtual_s.unwrap());
    // 30 iterations, each at least one 5 ms latency
    assert!(t1 >= t0 + 30.0 * 5e-3, "{t0} -> {t1}");
    let Params::Sim(p) = &slow.params else {
        unreachable!()
    };
    assert_ne!(
        crate::experiment::plan::run_id("sim", p, None),
        crate::experiment::plan::run_id("sim", p, slow.network.as_ref())
    );
}

/// A version-1 log (no metrics in its end record) still reads: its
/// metrics are missing, not zero.
#[test]
fn a_version_1_log_still_reads() {
    let v1 = r#"{"type":"header","schema":1,"run_id":"a","rank":0,"world":4,"config":{},"provenance":{"git_commit":"x","version":"0","host":"h","device":"cpu","backend":"sim","network":"none"}}
{"type":"end","status":"completed","wall_s":1.5,"iterations":10}
"#;
    let log = repro_runlog::read_log(v1.as_bytes()).unwrap();
    let s = summarize(&log, 4, 20, 0.0, "none".into());
    assert_eq!(s.final_loss, None, "missing, not zero");
    assert_eq!(s.virtual_s, Some(1.5));
    assert_eq!(s.status, RunStatus::Completed);
}
