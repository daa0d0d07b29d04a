//! `repro list`: every experiment, its scales and the runs each plans.

use anyhow::Result;
use clap::Args;

use std::collections::BTreeMap;

use crate::experiment::condition::ShapingMode;
use crate::experiment::manifest::{self, Backend};
use crate::experiment::plan;
use crate::report::tune;

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
    /// The manifest's `cost` text.
    cost: Option<String>,
    /// Its estimate in seconds: "about 22 min" is 1320, "under a minute"
    /// 60 (the bound); none where it gives no total ("25 s per run", a
    /// scale "not run").
    cost_s: Option<f64>,
    /// The time it says was measured: "(1294 s measured ...)" is 1294.
    measured_s: Option<f64>,
    error: Option<String>,
}

/// The seconds in a cost text: its estimate ("about N min", "about a
/// minute", "under N s") and what it says was measured ("N s measured").
/// A scale that was "not run" describes a run's compute: its estimate is
/// only a total said to be one ("about 3.5 h in all").
pub(crate) fn cost_seconds(text: &str) -> (Option<f64>, Option<f64>) {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ';'))
        .filter(|w| !w.is_empty())
        .collect();
    let unit = |w: &str| -> Option<f64> {
        match w {
            "s" | "sec" | "second" | "seconds" => Some(1.0),
            "min" | "mins" | "minute" | "minutes" => Some(60.0),
            "h" | "hour" | "hours" => Some(3600.0),
            _ => None,
        }
    };
    if text.trim_start().starts_with("not run") {
        let total = words.windows(5).find_map(|w| {
            let n = w[1].parse::<f64>().ok()?;
            (w[0] == "about" && w[3] == "in" && w[4] == "all").then_some(n * unit(w[2])?)
        });
        return (total, None);
    }
    let mut estimate = None;
    for (i, w) in words.iter().enumerate() {
        if !matches!(*w, "about" | "under") {
            continue;
        }
        let amount = match words.get(i + 1) {
            Some(&"a") | Some(&"an") => Some(1.0),
            Some(n) => n.parse::<f64>().ok(),
            None => None,
        };
        let per = unit(words.get(i + 2).copied().unwrap_or_default());
        // "25 s per run" is no total
        if let (Some(a), Some(u), false) = (amount, per, words.get(i + 3) == Some(&"per")) {
            estimate = Some(a * u);
            break;
        }
    }
    let measured = words
        .windows(3)
        .find(|w| w[1] == "s" && w[2] == "measured")
        .and_then(|w| w[0].parse::<f64>().ok());
    (estimate, measured)
}

/// Each scale of `m`: the runs it plans (and tunes first), its cost, or
/// why it is invalid.
fn scales_of(m: &manifest::Manifest) -> BTreeMap<String, ListedScale> {
    m.scales
        .keys()
        .map(|s| {
            let cost = m.cost.get(s).cloned();
            let (cost_s, measured_s) = cost.as_deref().map(cost_seconds).unwrap_or_default();
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
                    cost_s,
                    measured_s,
                    error: None,
                },
                Err(e) => ListedScale {
                    runs: None,
                    tuning_runs: None,
                    cost,
                    cost_s,
                    measured_s,
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
        // the title as the committed (else default) scale's tables show it
        let m = match crate::experiment::plan::titled(
            &m,
            &crate::report::recorded::read_scale(&m, &None),
        ) {
            Ok(t) => t,
            Err(_) => m,
        };
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

#[cfg(test)]
mod tests {
    use super::cost_seconds;

    #[test]
    fn cost_texts_give_seconds() {
        assert_eq!(
            cost_seconds("about 22 min, 60 runs (1294 s measured on 2 cores at dd5b0c6)"),
            (Some(1320.0), Some(1294.0))
        );
        assert_eq!(cost_seconds("about a minute"), (Some(60.0), None));
        assert_eq!(
            cost_seconds("under a second (0.8 s measured)"),
            (Some(1.0), Some(0.8))
        );
        assert_eq!(cost_seconds("about 2.5 min, 72 runs"), (Some(150.0), None));
        assert_eq!(cost_seconds("about 10 s"), (Some(10.0), None));
        assert_eq!(cost_seconds("about 25 s per in-process run"), (None, None));
        assert_eq!(cost_seconds("not measured"), (None, None));
        assert_eq!(
            cost_seconds("not run; about 1.5 min of compute a run"),
            (None, None)
        );
        assert_eq!(
            cost_seconds("not run; 36 runs, about 1.5 min of compute each, about 3.5 h in all"),
            (Some(12_600.0), None)
        );
    }
}
