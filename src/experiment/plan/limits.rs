//! Limits a run must keep: sizes, latencies and bandwidths in range, the
//! simulator's choices consistent, and no more workers than the machine
//! holds.

use super::*;

/// The run's worker count is in range, and its algorithm builds with
/// these knobs on its topology (what every rank checks first).
/// The largest simulator dimension and sample count a plan accepts
/// (2^31: far beyond this machine's memory, small enough that no size
/// computed from them overflows).
pub(crate) const MAX_SIZE: usize = 1 << 31;
/// The longest latency a network condition, or a simulated step's
/// compute, may have: longer ones are typos that would hang a run.
pub(crate) const MAX_LATENCY_S: f64 = 10.0;
/// The slowest bandwidth accepted, bits per second.
pub(crate) const MIN_BANDWIDTH_BPS: f64 = 1_000.0;

/// A run's range checks: each error names the run and the key.
pub(super) struct Ranges<'r> {
    pub(super) run: &'r str,
}

impl Ranges<'_> {
    pub(super) fn bad(&self, key: &str, message: String) -> DriverError {
        DriverError::RunParams {
            run: self.run.to_string(),
            key: key.into(),
            message,
        }
    }

    pub(super) fn at_least_one(&self, key: &str, v: u64) -> Result<(), DriverError> {
        if v == 0 {
            Err(self.bad(key, "must be at least 1".into()))
        } else {
            Ok(())
        }
    }

    pub(super) fn within(&self, key: &str, v: f64, lo: f64, hi: f64) -> Result<(), DriverError> {
        if (lo..=hi).contains(&v) {
            Ok(())
        } else {
            Err(self.bad(key, format!("{v} is outside {lo} ..= {hi}")))
        }
    }
}

/// Every numeric parameter within its valid range: a run that cannot do
/// what it is asked is refused at plan time, naming the key.
pub(super) fn check_ranges(
    run: &str,
    params: &Params,
    network: Option<&Condition>,
) -> Result<(), DriverError> {
    let r = Ranges { run };
    match params {
        Params::Sim(p) => sim_ranges(&r, p)?,
        Params::Train(c) => train_ranges(&r, c)?,
    }
    if let Some(c) = network {
        r.within("network.latency", c.latency_s, 0.0, MAX_LATENCY_S)?;
        if let Some(b) = c.bandwidth_bps {
            r.within("network.bandwidth", b, MIN_BANDWIDTH_BPS, 1e15)?;
        }
    }
    Ok(())
}

/// [`check_ranges`] of the simulator's parameters.
pub(super) fn sim_ranges(r: &Ranges<'_>, p: &SimParams) -> Result<(), DriverError> {
    r.at_least_one("iterations", p.iterations)?;
    r.at_least_one("batch", p.batch as u64)?;
    r.at_least_one("dim", p.dim as u64)?;
    for (key, v) in [("dim", p.dim), ("samples", p.samples)] {
        if v > MAX_SIZE {
            return Err(r.bad(key, format!("{v} is more than the limit of {MAX_SIZE}")));
        }
    }
    r.within("compute_ms", p.compute_ms, 0.0, MAX_LATENCY_S * 1e3)?;
    r.within("lr", f64::from(p.lr), 0.0, 1e6)?;
    r.within("momentum", f64::from(p.momentum), 0.0, 1.0)?;
    r.within("weight_decay", f64::from(p.weight_decay), 0.0, 1e6)?;
    r.within("eval_every", p.eval_every, 0.0, 1e9)?;
    r.within("noise", f64::from(p.noise), 0.0, 1e6)?;
    r.within("heterogeneity", f64::from(p.heterogeneity), 0.0, 1e6)?;
    r.within("x0_scale", p.x0_scale, 0.0, 1e6)?;
    if p.threads > 4096 {
        return Err(r.bad("threads", format!("{} is more than 4096", p.threads)));
    }
    Ok(())
}

/// [`check_ranges`] of the trainer's parameters.
pub(super) fn train_ranges(r: &Ranges<'_>, c: &TrainConfig) -> Result<(), DriverError> {
    r.at_least_one("iterations", c.iterations)?;
    r.at_least_one("batch", c.batch as u64)?;
    r.at_least_one("timeout_s", c.timeout_s)?;
    r.within("lr", c.lr, 0.0, 1e6)?;
    r.within("momentum", f64::from(c.momentum), 0.0, 1.0)?;
    r.within("weight_decay", f64::from(c.weight_decay), 0.0, 1e6)?;
    r.within("latency_ms", c.latency_ms, 0.0, MAX_LATENCY_S * 1e3)?;
    r.within("validation", c.validation, 0.0, 0.9)?;
    r.within("warmup_epochs", c.warmup_epochs, 0.0, 1e6)?;
    r.within("dirichlet_alpha", c.dirichlet_alpha, 1e-6, 1e6)?;
    if c.synthetic_samples > MAX_SIZE {
        return Err(r.bad(
            "synthetic_samples",
            format!(
                "{} is more than the limit of {MAX_SIZE}",
                c.synthetic_samples
            ),
        ));
    }
    if c.virtual_bandwidth_bps != 0.0 {
        r.within(
            "virtual_bandwidth_bps",
            c.virtual_bandwidth_bps,
            MIN_BANDWIDTH_BPS,
            1e15,
        )?;
    }
    // a directory that is there must be one of data files; one that
    // is not is the trainer's to report (a cluster's data may live
    // where the planning machine has none)
    if let Some(dir) = &c.data_dir
        && std::fs::symlink_metadata(dir).is_ok()
    {
        crate::experiment::data::check_data_path(std::path::Path::new(dir), true)
            .map_err(|m| r.bad("data_dir", m))?;
    }
    Ok(())
}

/// The simulator's objective, split, initial point, schedule and data
/// file are ones it knows, and fit together.
pub(super) fn sim_choices(r: &Ranges<'_>, p: &SimParams) -> Result<(), DriverError> {
    for (key, value, allowed) in [
        ("objective", &p.objective, &OBJECTIVES[..]),
        ("split", &p.split, &SPLITS[..]),
        ("x0", &p.x0, &["zero", "gaussian", "gaussian-each"][..]),
    ] {
        if !allowed.contains(&value.as_str()) {
            return Err(r.bad(
                key,
                format!("unknown {key} `{value}`; use one of {}", allowed.join(", ")),
            ));
        }
    }
    repro_algos::Schedule::parse(
        &p.schedule,
        1.0,
        &p.milestones,
        p.decay_a,
        p.decay_tau,
        f64::from(p.weight_decay),
    )
    .map_err(|m| r.bad("schedule", m))?;
    if let Some(path) = &p.data {
        if !matches!(p.objective.as_str(), "logistic" | "least-squares") {
            return Err(r.bad(
                "data",
                format!(
                    "a data file is for `logistic` or `least-squares`, not `{}`",
                    p.objective
                ),
            ));
        }
        let file = std::path::Path::new(path);
        // a set `repro data fetch` knows: generated, or asked for
        // before the first run (`data_cmd::prepare`)
        if file.exists() || crate::experiment::data::known(file).is_none() {
            crate::experiment::data::check_data_path(file, false).map_err(|m| r.bad("data", m))?;
        }
    }
    Ok(())
}

/// The run's workers, topology and algorithm fit together, within the
/// limits, with a sample of data each; and the simulator's named choices
/// are ones it knows.
pub(super) fn check_workers(run: &str, params: &Params, limits: Limits) -> Result<(), DriverError> {
    let r = Ranges { run };
    let bad = |key: &str, message: String| r.bad(key, message);
    let (workers, topology, algorithm, knobs) = match params {
        Params::Sim(p) => (p.workers, p.topology.as_str(), &p.algorithm, &p.knobs),
        // `workers: 0` asks the trainer for the paper's 8
        Params::Train(c) => (
            if c.workers == 0 { 8 } else { c.workers },
            c.topology.as_str(),
            &c.algorithm,
            &c.knobs,
        ),
    };
    if workers == 0 {
        return Err(bad("workers", "a run needs at least 1 worker".into()));
    }
    if let Params::Sim(p) = params {
        sim_choices(&r, p)?;
    }
    // every worker needs a sample of the data sets the plan sizes (a data
    // file is checked when it is read)
    let samples = match params {
        Params::Sim(p)
            if p.data.is_none() && matches!(p.objective.as_str(), "logistic" | "least-squares") =>
        {
            Some(("samples", p.samples))
        }
        Params::Train(c) if c.dataset == "synthetic" => {
            Some(("synthetic_samples", c.synthetic_samples))
        }
        _ => None,
    };
    if let Some((key, n)) = samples.filter(|&(_, n)| n < workers) {
        return Err(bad(
            key,
            format!("{n} samples for {workers} workers; every worker needs at least one"),
        ));
    }
    if workers > limits.max_workers {
        return Err(bad(
            "workers",
            format!(
                "{workers} workers is more than the limit of {}; pass --max-workers {workers} if you mean it",
                limits.max_workers
            ),
        ));
    }
    if repro_algos::ASYNC_ALGORITHM_NAMES.contains(&algorithm.as_str()) {
        return Ok(());
    }
    let topology = repro_algos::Topology::by_name(topology, workers)
        .map_err(|e| bad("topology", e.to_string()))?;
    // an algorithm's error names the knob it is about
    let knob = |e: repro_algos::AlgoError| {
        let message = e.to_string();
        bad(&knob_named_in(&message, "algorithm"), message)
    };
    let spec = repro_algos::AlgorithmSpec::from_name(algorithm, knobs).map_err(knob)?;
    // worker 0 on a small model: its constructor checks what the run's would
    spec.build(0, &topology, 0, &[0.0; 64]).map_err(knob)?;
    Ok(())
}
