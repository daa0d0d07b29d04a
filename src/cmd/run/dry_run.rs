//! `repro run --dry-run`: the plan printed, with every launch's command.

use super::*;

/// `--dry-run` of one experiment: the plan (and the tuning's), the
/// commands each MPI run would execute, and the runs refused for memory;
/// the JSON summary with `--json`.
pub(super) fn plan_only(
    x: Job<'_>,
    runs: &[PlannedRun],
    tuning: Option<&(&manifest::TuneSpec, Vec<PlannedRun>)>,
    launcher: Launcher,
) -> Result<Option<serde_json::Value>> {
    let recorder = std::sync::Arc::new(crate::launch::net::DryRun::planning());
    let net = net_context(x.cfg, x.m, launcher, Box::new(recorder.clone()));
    check_congestion(x.backend, runs, &net, true)?;
    let json = x.cfg.json;
    let say = |line: String| {
        if !json {
            println!("{line}");
        }
    };
    let (tuning_listed, refused) = if let Some((_, tuning)) = &tuning {
        say(format!(
            "tuning: {} runs into {}",
            tuning.len(),
            x.tuning_dir().display()
        ));
        let refused = refusals(x.cfg, tuning)?;
        let dir = x.tuning_dir();
        let listed = dry_run(x.into_dir(&dir), tuning, &net, &recorder, &refused)?;
        say_grid_after_tuning(x.cfg.chunk, runs, x.out, &say);
        (Some((listed, tuning.len())), refused.len())
    } else {
        (None, 0)
    };
    let (listed, refused) = match &tuning_listed {
        // the grid's runs are known only once the tuning has chosen
        Some(_) => (
            runs.iter()
                .map(|r| serde_json::json!({ "point": r.point }))
                .collect(),
            refused,
        ),
        None => {
            let refused = refusals(x.cfg, runs)?;
            let listed = dry_run(x, runs, &net, &recorder, &refused)?;
            (listed, refused.len())
        }
    };
    let planned = tuning_listed.as_ref().map_or(runs.len(), |(_, n)| *n);
    if refused > 0 && refused == planned {
        anyhow::bail!(
            "every one of the plan's {planned} runs is refused for memory (above); give fewer or smaller runs, or --max-memory"
        );
    }
    let summary = json.then(|| {
        serde_json::json!({
            "experiment": x.m.name,
            "scale": x.scale,
            "backend": x.backend.name(),
            "out": x.out.display().to_string(),
            "dry_run": true,
            "tuning_runs": tuning_listed.map(|(l, _)| l),
            "runs": listed,
            "refused": refused,
        })
    });
    Ok(summary)
}

/// A YAML scalar as a manifest would write it.
pub(super) fn yaml_text(v: &yaml_serde::Value) -> String {
    yaml_serde::to_string(v)
        .map(|t| t.trim().to_string())
        .unwrap_or_default()
}

/// The dry run's header of one experiment: its title, the parameters
/// every run shares, and its cases at this scale.
pub(super) fn plan_header(x: Job<'_>, runs: &[PlannedRun]) -> String {
    let mut text = String::new();
    macro_rules! outln {
        ($($arg:tt)*) => {{
            text.push_str(&format!($($arg)*));
            text.push('\n');
        }};
    }
    outln!(
        "{}: {} at scale `{}`, {} runs (backend {})",
        x.m.name,
        x.m.title,
        x.scale,
        runs.len(),
        x.backend.name()
    );
    // the resolved parameters every run shares (the trainer's config of the
    // first run without its grid keys), so a cluster user sees what runs
    if let Some(plan::Params::Train(cfg)) = runs.first().map(|r| &r.params) {
        let first = &runs[0];
        if let Ok(serde_json::Value::Object(map)) = serde_json::to_value(cfg) {
            let common: Vec<String> = map
                .iter()
                .filter(|(k, _)| *k != "run_id" && !first.point.contains_key(*k))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            outln!("  parameters: {}", common.join(" "));
        }
    }
    for case in
        x.m.cases
            .iter()
            .filter(|c| c.scales.is_empty() || c.scales.iter().any(|s| s == x.scale))
    {
        let when: Vec<String> = case
            .when
            .iter()
            .map(|(k, v)| format!("{k}={}", yaml_text(v)))
            .collect();
        let set: Vec<String> = case
            .set
            .iter()
            .map(|(k, v)| format!("{}={}", yaml_text(k), yaml_text(v)))
            .collect();
        outln!("  where {}: {}", when.join(" "), set.join(" "));
    }
    text
}

/// The commands an MPI run would execute, network setup and teardown
/// included, from the real launch code with every command recorded;
/// each also goes to `text` as a line.
pub(super) fn mpi_commands(
    x: Job<'_>,
    r: &PlannedRun,
    net: &NetContext,
    recorder: &crate::launch::net::DryRun,
    text: &mut String,
) -> Result<Vec<String>> {
    let invocation = freshness::invocation(x.m, x.scale, x.backend);
    let train =
        train_backend::train_binary().unwrap_or_else(|_| std::path::PathBuf::from("repro-train"));
    let repro = std::env::current_exe().unwrap_or_else(|_| "repro".into());
    macro_rules! outln {
        ($($arg:tt)*) => {{
            text.push_str(&format!($($arg)*));
            text.push('\n');
        }};
    }
    let mut commands = Vec::new();
    // the real run's code, with every command recorded instead of run
    recorder.take();
    // the job runs in a working directory that replaces raw/<id> at its end
    let dir = crate::util::atomic::working_dir(&x.out.join(Entry::Raw.name()).join(&r.id));
    let prepared = train_backend::prepare(r, &dir, net, &invocation, &train, &repro)?;
    if let Some(h) = &prepared.hosts {
        outln!("    # {} (if every node has netem)", h.describe());
    }
    if let Some(f) = &prepared.fabric {
        outln!("    # {}", f.describe());
    }
    for c in recorder.take() {
        outln!("    {c}");
        commands.push(c.to_string());
    }
    outln!("    {}", prepared.launch.display());
    commands.push(prepared.launch.display().to_string());
    drop(prepared);
    for c in recorder.take() {
        outln!("    {c}");
        commands.push(c.to_string());
    }
    Ok(commands)
}

/// `--dry-run`: the plan, and for MPI runs the exact commands (network
/// setup and mpirun) each run would execute.
pub(super) fn dry_run(
    x: Job<'_>,
    runs: &[PlannedRun],
    net: &NetContext,
    recorder: &crate::launch::net::DryRun,
    refused: &BTreeMap<String, f64>,
) -> Result<Vec<serde_json::Value>> {
    let json = x.cfg.json;
    let mut listed = Vec::new();
    let entry = |r: &PlannedRun| {
        serde_json::json!({
            "id": r.id,
            "point": r.point,
            "params": serde_json::from_str::<serde_json::Value>(&plan::canonical_params(&r.params))
                .unwrap_or_default(),
            // a limit, not a parameter (left out of `params` and the id)
            "timeout_s": match &r.params {
                plan::Params::Train(c) => Some(c.timeout_s),
                plan::Params::Sim(_) => None,
            },
            "network": r.network.as_ref().map(|c| c.label.clone()),
            "refused": refused.contains_key(&r.id),
        })
    };
    let mut text = String::new();
    macro_rules! outln {
        ($($arg:tt)*) => {{
            text.push_str(&format!($($arg)*));
            text.push('\n');
        }};
    }
    text.push_str(&plan_header(x, runs));
    for r in runs {
        if let plan::Params::Sim(p) = &r.params {
            let need = sim_backend::footprint(p)?.total() as f64 / 1e9;
            let refused = if refused.contains_key(&r.id) {
                ": refused"
            } else {
                ""
            };
            outln!(
                "  {}  {}  (memory {need:.3} GB{refused})",
                r.id,
                plan::describe(r)
            );
            let mut e = entry(r);
            e["memory_gb"] = serde_json::json!(need);
            listed.push(e);
            continue;
        }
        outln!("  {}  {}", r.id, plan::describe(r));
        let commands = mpi_commands(x, r, net, recorder, &mut text)?;
        let mut e = entry(r);
        e["commands"] = serde_json::json!(commands);
        listed.push(e);
    }
    if !json {
        std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes())
            .context("could not write to stdout")?;
    }
    Ok(listed)
}
