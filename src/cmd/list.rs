//! `repro list`: every experiment, its scales and the runs each plans.

use anyhow::Result;
use clap::Args;

use std::collections::BTreeMap;

use crate::report::tune;
use crate::spec::condition::ShapingMode;
use crate::spec::manifest::{self, Backend};
use crate::spec::plan;

/// Options of `repro list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// One JSON document instead of text: every experiment with its
    /// path, title, source, backend and, per scale, the runs it plans.
    #[arg(long)]
    pub json: bool,
}

/// One scale of an experiment in `repro list`: its runs, or why it is
/// invalid.
#[derive(Debug, serde::Serialize)]
struct ListedScale {
    runs: Option<usize>,
    tuning_runs: Option<usize>,
    cost: Option<String>,
    error: Option<String>,
}

/// Each scale of `m`: the runs it plans (and tunes first), its cost, or
/// why it is invalid.
fn scales_of(m: &manifest::Manifest) -> BTreeMap<String, ListedScale> {
    m.scales
        .keys()
        .map(|s| {
            let cost = m.cost.get(s).cloned();
            let listed = match plan::expand(m, s, m.backend) {
                // a tuned experiment runs its search first
                Ok(runs) => ListedScale {
                    runs: Some(runs.len()),
                    tuning_runs: m.tune.as_ref().and_then(|t| {
                        tune::tuning_runs(m, t, s, m.backend, plan::Limits::default())
                            .ok()
                            .map(|t| t.len())
                    }),
                    cost,
                    error: None,
                },
                Err(e) => ListedScale {
                    runs: None,
                    tuning_runs: None,
                    cost,
                    error: Some(format!("{e:#}")),
                },
            };
            (s.clone(), listed)
        })
        .collect()
}

/// `m`'s three lines of `repro list`.
fn print_text(m: &manifest::Manifest, scales: &BTreeMap<String, ListedScale>, shaped: bool) {
    let text: Vec<String> = scales
        .iter()
        .map(|(s, l)| match l.runs {
            Some(runs) => format!(
                "{s}{}: {runs} runs{}{}",
                if m.default_scale.as_ref() == Some(s) {
                    " (default)"
                } else {
                    ""
                },
                l.tuning_runs
                    .map(|t| format!(" after {t} tuning runs"))
                    .unwrap_or_default(),
                l.cost
                    .as_ref()
                    .map(|c| format!(", {c}"))
                    .unwrap_or_default()
            ),
            None => format!("{s}: invalid"),
        })
        .collect();
    println!(
        "{:<20} {}\n{:<20} {}\n{:<20} {}{}{}",
        m.name,
        m.title,
        "",
        m.source,
        "",
        text.join("; "),
        if shaped {
            "; shapes the network (root)"
        } else {
            ""
        },
        if m.then.is_empty() {
            String::new()
        } else {
            format!("; then {}", m.then.join(", "))
        }
    );
}

/// `repro list`.
pub(crate) fn list(args: &ListArgs) -> Result<()> {
    let mut listed = Vec::new();
    let mut invalid_text = 0;
    for path in manifest::all_manifests()? {
        let m = match manifest::load(&path, &[]) {
            Ok(m) => m,
            Err(e) => {
                if args.json {
                    listed.push(serde_json::json!({
                        "path": path.display().to_string(),
                        "error": format!("{e:#}"),
                    }));
                } else {
                    println!("{:<20} invalid manifest: {e}", path.display());
                    invalid_text += 1;
                }
                continue;
            }
        };
        let scales = scales_of(&m);
        invalid_text += scales.values().filter(|l| l.error.is_some()).count();
        let shaped = m.backend == Backend::Mpi
            && m.shaping != ShapingMode::None
            && m.grid.contains_key("network");
        if args.json {
            listed.push(serde_json::json!({
                "name": m.name,
                "path": path.display().to_string(),
                "title": m.title,
                "source": m.source,
                "backend": m.backend.name(),
                "shapes_network": shaped,
                "default_scale": m.default_scale,
                "then": m.then,
                "scales": scales,
            }));
            continue;
        }
        print_text(&m, &scales, shaped);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&listed)?);
    }
    let invalid = listed.iter().filter(|l| l.get("error").is_some()).count() + invalid_text;
    if invalid > 0 {
        anyhow::bail!("{invalid} manifests or scales in the project are invalid (above)");
    }
    Ok(())
}
