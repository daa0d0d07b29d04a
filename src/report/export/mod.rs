//! Results in the tools researchers already look at: an experiment's runs
//! as one model ([`Exported`]), written as an MLflow file store
//! (`mlflow.rs`) or TensorBoard event files (`tensorboard.rs`). Both
//! writers read the same model, so a run says the same in either.

use std::path::Path;

use anyhow::Result;

use crate::experiment::manifest::Manifest;
use crate::experiment::plan::PlannedRun;
use crate::launch::summary::RunStatus;
use crate::records::curves::CurvePoint;
use crate::records::metrics::{self, Cell, Kind};
use crate::records::results::RunRecord;
use crate::records::results_dir::Entry;
use crate::records::results_dir::ResultsDir;

pub(crate) mod mlflow;
pub(crate) mod tensorboard;

/// One experiment at one scale, as exported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exported {
    pub name: String,
    pub scale: String,
    pub title: String,
    /// The results directory's table.md and claims.md (the claims'
    /// verdicts), as it has them.
    pub note: String,
    /// When the results were written (provenance.json), in ms since 1970;
    /// 0 when not recorded. Runs start here, so an export is the same
    /// every time.
    pub written_ms: i64,
    /// The experiment's own tags: source, backend, manifest hash.
    pub tags: Vec<(String, String)>,
    pub runs: Vec<ExportedRun>,
}

/// One run, as exported.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExportedRun {
    /// Its run id (12 hex digits).
    pub id: String,
    /// The run id and its grid point: "3f2a… algorithm=moniqua bits=1 seed=0".
    pub name: String,
    pub status: Option<RunStatus>,
    /// The grid point, then the resolved parameters that are not at their
    /// default (as the run id hashes them), each once.
    pub params: Vec<(String, String)>,
    /// The run id, then every text column: status, health and why,
    /// provenance, identity (named `repro.<column>`).
    pub tags: Vec<(String, String)>,
    /// Every number of its runs.csv row that is finite.
    pub metrics: Vec<(String, f64)>,
    /// The figure's curve of this run: its `y` and the points.
    pub curve: Option<(String, Vec<CurvePoint>)>,
}

impl ExportedRun {
    /// The run's length on its own clock (wall or virtual), seconds: its
    /// `wall_s`, else its curve's last point.
    pub(crate) fn seconds(&self) -> f64 {
        self.metrics
            .iter()
            .find(|(k, _)| k == "wall_s")
            .map(|(_, v)| *v)
            .or_else(|| {
                self.curve
                    .as_ref()
                    .and_then(|(_, p)| p.last().map(|p| p.wall_s))
            })
            .filter(|s| s.is_finite())
            .unwrap_or(0.0)
    }
}

/// The text of a JSON value as a parameter: a string as itself, anything
/// else as JSON.
fn param_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An experiment's results directory `out` at `scale` as exported: its
/// planned runs `rows` (health judged) with their parameters from `plan`,
/// and `curves`, the figure's curve of each run that has one.
pub(crate) fn experiment(
    m: &Manifest,
    out: &Path,
    scale: &str,
    rows: &[RunRecord],
    plan: &[PlannedRun],
    curves: &[crate::records::curves::RunCurve],
) -> Result<Exported> {
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    let note = [read(Entry::Table.name()), read(Entry::Claims.name())]
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let provenance = ResultsDir::new(out)
        .provenance_or_none()
        .unwrap_or_default();
    let written_ms = provenance.written_unix_s * 1000;
    let mut tags = vec![
        ("repro.experiment".to_string(), m.name.clone()),
        ("repro.scale".to_string(), scale.to_string()),
        ("repro.title".to_string(), m.title.clone()),
        ("repro.source".to_string(), m.source.clone()),
        ("repro.backend".to_string(), m.backend.name().to_string()),
    ];
    if !provenance.manifest_hash.is_empty() {
        tags.push(("repro.manifest_hash".into(), provenance.manifest_hash));
    }
    let y = m.figure.as_ref().map(|f| f.y.clone());
    let runs = rows
        .iter()
        .map(|r| {
            let planned = plan.iter().find(|p| p.id == r.run_id);
            let curve = curves
                .iter()
                .find(|(c, _)| c.run_id == r.run_id)
                .and_then(|(_, points)| y.clone().map(|y| (y, points.clone())));
            run(r, planned, curve)
        })
        .collect();
    Ok(Exported {
        name: m.name.clone(),
        scale: scale.to_string(),
        title: m.title.clone(),
        note,
        written_ms,
        tags,
        runs,
    })
}

/// One run's record as exported.
fn run(
    r: &RunRecord,
    planned: Option<&PlannedRun>,
    curve: Option<(String, Vec<CurvePoint>)>,
) -> ExportedRun {
    let mut params: Vec<(String, String)> = r
        .point
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let resolved = planned
        .map(|p| crate::experiment::plan::canonical_params(&p.params))
        .or_else(|| r.metrics.get("params").map(|c| c.text().to_string()))
        .and_then(|json| serde_json::from_str::<serde_json::Value>(&json).ok());
    if let Some(serde_json::Value::Object(fields)) = resolved {
        for (k, v) in fields {
            if !params.iter().any(|(p, _)| *p == k) {
                params.push((k, param_text(&v)));
            }
        }
    }
    let mut tags = vec![("repro.run_id".to_string(), r.run_id.clone())];
    let mut numbers = Vec::new();
    for m in metrics::columns() {
        let Some(cell) = r.metrics.get(m) else {
            continue;
        };
        match (metrics::kind(m), cell) {
            // the parameters are params already
            (_, _) if m == "params" => {}
            (Kind::Text, c) if !c.text().is_empty() => {
                tags.push((format!("repro.{m}"), c.text().to_string()));
            }
            (_, Cell::Number(Some(v))) if v.is_finite() => numbers.push((m.to_string(), *v)),
            (_, Cell::Count(n)) => numbers.push((m.to_string(), *n as f64)),
            _ => {}
        }
    }
    let point = r
        .point
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ");
    ExportedRun {
        id: r.run_id.clone(),
        name: format!("{} {point}", r.run_id),
        status: r.status(),
        params,
        tags,
        metrics: numbers,
        curve,
    }
}

/// An experiment of one diverged run, for the writers' tests.
#[cfg(test)]
pub(crate) fn sample() -> Exported {
    Exported {
        name: "quick".into(),
        scale: "smoke".into(),
        title: "A title".into(),
        note: "| a | b |\n".into(),
        written_ms: 1_700_000_000_000,
        tags: vec![("repro.experiment".into(), "quick".into())],
        runs: vec![ExportedRun {
            id: "0123456789ab".into(),
            name: "0123456789ab algorithm=moniqua seed=0".into(),
            status: Some(RunStatus::Diverged),
            params: vec![
                ("algorithm".into(), "moniqua".into()),
                ("lr".into(), "0.1".into()),
            ],
            tags: vec![("repro.health".into(), "diverged".into())],
            metrics: vec![("wall_s".into(), 2.5), ("bytes".into(), 1024.0)],
            curve: Some((
                "train_loss".into(),
                vec![
                    CurvePoint {
                        iteration: 0,
                        epoch: 0.0,
                        wall_s: 0.0,
                        value: 2.3,
                        bytes: None,
                    },
                    CurvePoint {
                        iteration: 10,
                        epoch: 0.1,
                        wall_s: 1.5,
                        value: f64::NAN,
                        bytes: None,
                    },
                ],
            )),
        }],
    }
}
