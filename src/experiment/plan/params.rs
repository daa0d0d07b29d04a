//! A grid point's parameters: the manifest's params merged with the
//! point's values, typed for its backend, with errors naming the key.

use super::*;

/// One grid point resolved into a run: the base parameters, the point's
/// values and the matching cases, deserialized into the backend's config,
/// with its id.
pub(super) fn resolve(
    point: Vec<(String, Value)>,
    base: &Mapping,
    cases: &[&crate::experiment::manifest::Case],
    labels: &[String],
    config: Option<&Config>,
    backend: Backend,
    limits: Limits,
) -> Result<PlannedRun, DriverError> {
    let mut map = merged_params(&point, base, cases, config);
    // a label names the variant; its cases set the parameters
    for l in labels {
        map.remove(l.as_str());
    }
    let mut label: BTreeMap<String, String> =
        point.iter().map(|(k, v)| (k.clone(), text(v))).collect();
    if let Some(c) = config {
        label.insert(CONFIG_KEY.to_string(), c.label.clone());
    }
    let run = label
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    // how errors name this run
    let run = if run.is_empty() {
        "(no grid)".to_string()
    } else {
        run
    };
    let fail = |e| param_error(e, &run, backend);
    let ours = model_size(&map, backend);
    let network = match map.remove("network") {
        Some(v) => {
            Condition::from_yaml(&v, ours).map_err(|(key, message)| DriverError::RunParams {
                run: run.clone(),
                key: if key.is_empty() {
                    "network".into()
                } else {
                    format!("network.{key}")
                },
                message,
            })?
        }
        None => None,
    };
    if let Some(l) = label.get_mut("network") {
        *l = network
            .as_ref()
            .map_or_else(|| "none".to_string(), |c| c.label.clone());
    }
    if let Some(key) = non_finite(&Value::Mapping(map.clone()), "") {
        return Err(DriverError::RunParams {
            run: run.clone(),
            key,
            message: "not a finite number; every number of a run must be finite".into(),
        });
    }
    // the knobs are flattened into both configs, where serde loses
    // the key of a bad value: check them alone first, so the error
    // names it
    knob_errors(&map).map_err(fail)?;
    let (id, params) = typed_params(map, backend, network.as_ref(), &run)?;
    check_algorithm(&run, &params, backend)?;
    check_ranges(&run, &params, network.as_ref())?;
    check_workers(&run, &params, limits)?;
    Ok(PlannedRun {
        id,
        point: label,
        params,
        network,
    })
}

/// The base parameters with the point's values and the matching cases'
/// and tuned configuration's settings on top.
pub(super) fn merged_params(
    point: &[(String, Value)],
    base: &Mapping,
    cases: &[&crate::experiment::manifest::Case],
    config: Option<&Config>,
) -> Mapping {
    let mut map: Mapping = base.clone();
    for (k, v) in point {
        map.insert(Value::String(k.clone()), v.clone());
    }
    for case in cases {
        let matches = case
            .when
            .iter()
            .all(|(k, want)| point.iter().any(|(pk, pv)| pk == k && pv == want));
        if matches {
            for (k, v) in &case.set {
                map.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(c) = config {
        for (k, v) in &c.set {
            map.insert(k.clone(), v.clone());
        }
    }
    map
}

/// A parameter error of run `run`, naming its key.
pub(super) fn param_error(
    e: serde_path_to_error::Error<yaml_serde::Error>,
    run: &str,
    backend: Backend,
) -> DriverError {
    let message = e.inner().to_string();
    // a flattened struct loses the path of an unknown key (`.`): name
    // the key from the message, and list the valid ones
    match message
        .strip_prefix("unknown field `")
        .and_then(|m| m.split('`').next())
    {
        // a network condition is one key, for every backend
        Some(field @ ("bandwidth" | "latency")) => DriverError::RunParams {
            run: run.to_string(),
            key: field.to_string(),
            message: "a network condition is the `network` key, in params or the grid: \
                      `network: {bandwidth: 100mbit, latency: 1ms}`"
                .into(),
        },
        Some(field) if matches!(e.path().to_string().as_str(), "." | "") => {
            DriverError::RunParams {
                run: run.to_string(),
                key: field.to_string(),
                message: format!(
                    "unknown parameter of the {} backend; valid: {}",
                    backend.name(),
                    parameter_names(backend).join(", ")
                ),
            }
        }
        _ => DriverError::RunParams {
            run: run.to_string(),
            key: e.path().to_string(),
            message,
        },
    }
}

/// The run's model size in parameters: the trainer's model on its
/// images, or the simulator's dimension.
pub(super) fn model_size(map: &Mapping, backend: Backend) -> Option<u64> {
    let text_of = |k: &str, default: String| {
        map.get(k)
            .and_then(|v| v.as_str())
            .map_or(default, str::to_string)
    };
    match backend {
        Backend::Sim => Some(
            map.get("dim")
                .and_then(Value::as_u64)
                .unwrap_or(SimParams::default().dim as u64),
        ),
        Backend::Mpi | Backend::InProcess => {
            let d = TrainConfig::default();
            repro_runlog::model_parameters(
                &text_of("model", d.model),
                &text_of("dataset", d.dataset),
            )
        }
    }
}

/// The merged parameters as the backend's typed config, and its run id.
pub(super) fn typed_params(
    map: Mapping,
    backend: Backend,
    network: Option<&Condition>,
    run: &str,
) -> Result<(String, Params), DriverError> {
    let fail = |e| param_error(e, run, backend);
    let typed = match backend {
        Backend::Sim => {
            // the simulator's virtual clock models the condition, typed
            // (`PlannedRun::network`), not printed into its parameters
            let p: SimParams =
                serde_path_to_error::deserialize(Value::Mapping(map)).map_err(fail)?;
            if p.knobs.theta == Theta::Theorem2 {
                return Err(DriverError::RunParams {
                    run: run.to_string(),
                    key: "theta".into(),
                    message: "`theta: theorem2` tracks the stochastic gradients of the trainer's \
                              warm-up; the simulator tracks the local step: use `theta: theorem3-step` or \
                              a number"
                        .into(),
                });
            }
            (run_id("sim", &p, network), Params::Sim(p))
        }
        Backend::Mpi | Backend::InProcess => {
            let mut p: TrainConfig =
                serde_path_to_error::deserialize(Value::Mapping(map)).map_err(fail)?;
            if p.knobs.theta.warms_up()
                && repro_algos::ASYNC_ALGORITHM_NAMES.contains(&p.algorithm.as_str())
            {
                return Err(DriverError::RunParams {
                    run: run.to_string(),
                    key: "theta".into(),
                    message: format!(
                        "`theta: theorem3-step` and `theta: theorem2` need a synchronous algorithm's warm-up; {} is asynchronous: give theta a number",
                        p.algorithm
                    ),
                });
            }
            p.run_id = String::new();
            // the same config in process (virtual clock) and over
            // MPI (real time) are different runs
            let id = run_id(backend.name(), &p, network);
            p.run_id = id.clone();
            (id, Params::Train(p))
        }
    };
    Ok(typed)
}

/// The run's algorithm is one this build knows, on a backend that runs it.
pub(super) fn check_algorithm(
    run: &str,
    params: &Params,
    backend: Backend,
) -> Result<(), DriverError> {
    let algorithm = match &params {
        Params::Sim(p) => &p.algorithm,
        Params::Train(c) => &c.algorithm,
    };
    let is_async = repro_algos::ASYNC_ALGORITHM_NAMES.contains(&algorithm.as_str());
    if algorithm == "allreduce-mpi" && backend != Backend::Mpi {
        return Err(DriverError::RunParams {
            run: run.to_string(),
            key: "algorithm".into(),
            message: "`allreduce-mpi` sums with the MPI library's MPI_Allreduce: the mpi backend only (`allreduce` is the ring everywhere)".into(),
        });
    }
    if is_async && backend != Backend::Mpi {
        return Err(DriverError::RunParams {
            run: run.to_string(),
            key: "algorithm".into(),
            message: format!("`{algorithm}` runs on the mpi backend only (`--backend mpi`)"),
        });
    }
    if !is_async && !repro_algos::ALGORITHM_NAMES.contains(&algorithm.as_str()) {
        return Err(DriverError::RunParams {
            run: run.to_string(),
            key: "algorithm".into(),
            message: format!(
                "unknown algorithm `{algorithm}`; known: {}, {}",
                repro_algos::ALGORITHM_NAMES.join(", "),
                repro_algos::ASYNC_ALGORITHM_NAMES.join(", ")
            ),
        });
    }
    Ok(())
}
