//! Figures: per-step curves read back from the runs' logs, written to
//! curves.csv, grouped into panels and series as the manifest's `figure`
//! says, averaged over the other grid keys (seeds), and drawn as SVG with
//! plotters (its SVG backend needs no fonts on the host).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use plotters::prelude::*;
use repro_runlog::{Log, read_log};
use serde::Deserialize;

use crate::results::Row;

/// What a figure shows (the manifest's `figure`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureSpec {
    /// `wall_s` (seconds), `iteration` or `epoch`.
    #[serde(default = "default_x")]
    pub x: String,
    /// `train_loss`.
    #[serde(default = "default_y")]
    pub y: String,
    /// A grid key: one panel per value (none: one panel).
    #[serde(default)]
    pub panels: Option<String>,
    /// A grid key: one line per value.
    pub series: String,
    /// Moving-average window over steps (1: raw).
    #[serde(default = "default_smooth")]
    pub smooth: usize,
    /// Logarithmic y axis.
    #[serde(default)]
    pub log_y: bool,
}

fn default_x() -> String {
    "wall_s".into()
}
fn default_y() -> String {
    "train_loss".into()
}
fn default_smooth() -> usize {
    10
}

/// One step of one run, averaged over its ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    pub iteration: u64,
    pub epoch: f64,
    /// When the slowest rank finished the step.
    pub wall_s: f64,
    /// Mean over ranks.
    pub train_loss: f64,
}

/// The logs of one run: `raw/<id>/rank-*.jsonl` (MPI) or `raw/<id>.jsonl` (simulator).
fn run_logs(raw: &Path, id: &str) -> Result<Vec<Log>> {
    let single = raw.join(format!("{id}.jsonl"));
    let mut paths: Vec<PathBuf> = if single.is_file() {
        vec![single]
    } else {
        let dir = raw.join(id);
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("no logs for run {id} in {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rank-") && n.ends_with(".jsonl"))
            })
            .collect();
        v.sort();
        v
    };
    paths.dedup();
    paths
        .iter()
        .map(|p| {
            let f = std::fs::File::open(p)
                .with_context(|| format!("could not open {}", p.display()))?;
            read_log(std::io::BufReader::new(f))
                .with_context(|| format!("{} is unreadable", p.display()))
        })
        .collect()
}

/// Averages the ranks' steps of one run, iteration by iteration (only the
/// iterations every rank logged).
pub fn curve(logs: &[Log]) -> Vec<CurvePoint> {
    let mut by_iter: BTreeMap<u64, (f64, f64, f64, usize)> = BTreeMap::new();
    for log in logs {
        for s in &log.steps {
            let e = by_iter.entry(s.iteration).or_insert((0.0, 0.0, 0.0, 0));
            e.0 = e.0.max(s.wall_s);
            e.1 += s.train_loss;
            e.2 = s.epoch;
            e.3 += 1;
        }
    }
    by_iter
        .into_iter()
        .filter(|(_, v)| v.3 == logs.len())
        .map(|(iteration, (wall_s, loss, epoch, n))| CurvePoint {
            iteration,
            epoch,
            wall_s,
            train_loss: loss / n as f64,
        })
        .collect()
}

/// The curves of every run that left logs, in the order of `runs`.
pub fn load_curves(raw: &Path, runs: &[Row]) -> Vec<(Row, Vec<CurvePoint>)> {
    runs.iter()
        .filter_map(|r| {
            let logs = run_logs(raw, &r.run_id).ok()?;
            let c = curve(&logs);
            (!c.is_empty()).then(|| (r.clone(), c))
        })
        .collect()
}

/// curves.csv: run id, grid keys, then one line per step.
pub fn write_curves_csv(path: &Path, curves: &[(Row, Vec<CurvePoint>)]) -> Result<()> {
    let keys: Vec<String> = curves
        .first()
        .map(|(r, _)| r.point.keys().cloned().collect())
        .unwrap_or_default();
    let mut out = String::from("run_id");
    for k in &keys {
        out.push(',');
        out.push_str(k);
    }
    out.push_str(",iteration,epoch,wall_s,train_loss\n");
    for (r, points) in curves {
        let prefix: String = keys
            .iter()
            .map(|k| {
                format!(
                    ",{}",
                    r.point.get(k).map_or("", String::as_str).replace(',', ";")
                )
            })
            .collect();
        for p in points {
            out.push_str(&format!(
                "{}{prefix},{},{},{},{}\n",
                r.run_id, p.iteration, p.epoch, p.wall_s, p.train_loss
            ));
        }
    }
    std::fs::write(path, out).with_context(|| format!("could not write {}", path.display()))
}

/// One line of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    /// Runs averaged into it.
    pub runs: usize,
    pub points: Vec<(f64, f64)>,
}

/// One panel of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
}

fn smooth(values: &[f64], window: usize) -> Vec<f64> {
    let w = window.max(1);
    (0..values.len())
        .map(|i| {
            let lo = (i + 1).saturating_sub(w);
            let s = &values[lo..=i];
            s.iter().sum::<f64>() / s.len() as f64
        })
        .collect()
}

/// Groups curves into panels and series; runs that differ only in other
/// grid keys (seeds) are averaged step by step (over their common steps).
pub fn panels(spec: &FigureSpec, curves: &[(Row, Vec<CurvePoint>)]) -> Result<Vec<Panel>> {
    let x_of = |p: &CurvePoint| -> Result<f64> {
        Ok(match spec.x.as_str() {
            "wall_s" => p.wall_s,
            "iteration" => p.iteration as f64,
            "epoch" => p.epoch,
            other => bail!("figure.x `{other}` is not one of wall_s, iteration, epoch"),
        })
    };
    if spec.y != "train_loss" {
        bail!("figure.y `{}` is not train_loss", spec.y);
    }
    let mut groups: BTreeMap<String, BTreeMap<String, Vec<&Vec<CurvePoint>>>> = BTreeMap::new();
    let mut panel_order: Vec<String> = Vec::new();
    let mut series_order: Vec<String> = Vec::new();
    for (run, points) in curves {
        let panel = match &spec.panels {
            Some(k) => run
                .point
                .get(k)
                .cloned()
                .with_context(|| format!("figure.panels `{k}` is not a grid key"))?,
            None => String::new(),
        };
        let series = run
            .point
            .get(&spec.series)
            .cloned()
            .with_context(|| format!("figure.series `{}` is not a grid key", spec.series))?;
        if !panel_order.contains(&panel) {
            panel_order.push(panel.clone());
        }
        if !series_order.contains(&series) {
            series_order.push(series.clone());
        }
        groups
            .entry(panel)
            .or_default()
            .entry(series)
            .or_default()
            .push(points);
    }
    panel_order
        .iter()
        .map(|p| {
            let g = &groups[p];
            let series = series_order
                .iter()
                .filter_map(|s| g.get(s).map(|runs| (s, runs)))
                .map(|(label, runs)| {
                    let len = runs.iter().map(|c| c.len()).min().unwrap_or(0);
                    let mut xs = vec![0.0; len];
                    let mut ys = vec![0.0; len];
                    for c in runs {
                        for (i, pt) in c.iter().take(len).enumerate() {
                            xs[i] += x_of(pt)? / runs.len() as f64;
                            ys[i] += pt.train_loss / runs.len() as f64;
                        }
                    }
                    let ys = smooth(&ys, spec.smooth);
                    Ok(Series {
                        label: label.clone(),
                        runs: runs.len(),
                        points: xs
                            .into_iter()
                            .zip(ys)
                            .filter(|(_, y)| y.is_finite())
                            .collect(),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Panel {
                title: p.clone(),
                series,
            })
        })
        .collect()
}

fn axis_label(key: &str) -> &'static str {
    match key {
        "wall_s" => "wall-clock time (s)",
        "iteration" => "iteration",
        "epoch" => "epoch",
        _ => "train loss",
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// Draws the panels side by side (two rows when there are more than two) into an SVG file.
pub fn render_svg(path: &Path, title: &str, spec: &FigureSpec, panels: &[Panel]) -> Result<()> {
    if panels.is_empty() {
        bail!("no curves to plot: no run left step records");
    }
    let cols = if panels.len() > 2 {
        panels.len().div_ceil(2)
    } else {
        panels.len()
    };
    let rows = panels.len().div_ceil(cols);
    let size = (520 * cols as u32, 420 * rows as u32 + 40);
    let err = |e: String| anyhow::anyhow!("could not draw {}: {e}", path.display());
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let root = root
        .titled(title, ("sans-serif", 22))
        .map_err(|e| err(e.to_string()))?;
    let areas = root.split_evenly((rows, cols));
    for (panel, area) in panels.iter().zip(&areas) {
        let xs = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0));
        let ys = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1));
        let x_max = xs.fold(0.0f64, f64::max).max(1e-9);
        let (y_min, y_max) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(y), b.max(y))
        });
        let (y_min, y_max) = if y_min.is_finite() {
            (y_min, y_max.max(y_min * 1.01 + 1e-9))
        } else {
            (0.0, 1.0)
        };
        let mut chart = ChartBuilder::on(area);
        chart
            .caption(&panel.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60);
        let x_desc = axis_label(&spec.x);
        let y_desc = axis_label(&spec.y);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(|e| err(e.to_string()))?;
                chart
                    .configure_mesh()
                    .x_desc(x_desc)
                    .y_desc(y_desc)
                    .label_style(("sans-serif", 13))
                    .draw()
                    .map_err(|e| err(e.to_string()))?;
                for (i, s) in panel.series.iter().enumerate() {
                    let color = COLORS[i % COLORS.len()];
                    chart
                        .draw_series(LineSeries::new(
                            s.points.iter().copied(),
                            color.stroke_width(2),
                        ))
                        .map_err(|e| err(e.to_string()))?
                        .label(s.label.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                        });
                }
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .label_font(("sans-serif", 13))
                    .position(SeriesLabelPosition::UpperRight)
                    .draw()
                    .map_err(|e| err(e.to_string()))?;
            }};
        }
        if spec.log_y && y_min > 0.0 {
            draw!(chart.build_cartesian_2d(0.0..x_max, (y_min * 0.9..y_max * 1.1).log_scale()));
        } else {
            let pad = (y_max - y_min) * 0.05;
            draw!(chart.build_cartesian_2d(0.0..x_max, (y_min - pad)..(y_max + pad)));
        }
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_runlog::{Header, Provenance, Step};

    fn log(rank: u32, losses: &[f64], dt: f64) -> Log {
        Log {
            header: Header {
                schema: 1,
                run_id: "r".into(),
                rank,
                world: 2,
                config: serde_json::Value::Null,
                provenance: Provenance {
                    git_commit: String::new(),
                    version: String::new(),
                    host: String::new(),
                    device: String::new(),
                    backend: String::new(),
                    network: String::new(),
                },
            },
            steps: losses
                .iter()
                .enumerate()
                .map(|(i, &l)| Step {
                    iteration: i as u64,
                    epoch: i as f64 / 10.0,
                    wall_s: (i + 1) as f64 * dt + f64::from(rank) * 0.01,
                    compute_s: 0.0,
                    comm_s: 0.0,
                    train_loss: l,
                    bytes_sent: 0,
                    bytes_received: 0,
                    hash_failures: 0,
                })
                .collect(),
            evals: Vec::new(),
            end: None,
        }
    }

    fn run(id: &str, point: &[(&str, &str)]) -> Row {
        Row {
            run_id: id.into(),
            point: point
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            metrics: BTreeMap::new(),
        }
    }

    #[test]
    fn ranks_average_into_a_curve_and_seeds_into_a_series() {
        // rank 1 logged one step fewer (killed): only common steps count
        let c = curve(&[log(0, &[2.0, 1.0, 0.5], 1.0), log(1, &[4.0, 3.0], 1.0)]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].train_loss, 2.0);
        assert_eq!(c[1].wall_s, 2.01);
        let curves = vec![
            (
                run(
                    "a",
                    &[
                        ("algorithm", "moniqua"),
                        ("network", "1mbit"),
                        ("seed", "0"),
                    ],
                ),
                curve(&[log(0, &[3.0, 2.0, 1.0], 1.0)]),
            ),
            (
                run(
                    "b",
                    &[
                        ("algorithm", "moniqua"),
                        ("network", "1mbit"),
                        ("seed", "1"),
                    ],
                ),
                curve(&[log(0, &[1.0, 0.0, 1.0], 3.0)]),
            ),
            (
                run(
                    "c",
                    &[("algorithm", "d-psgd"), ("network", "1mbit"), ("seed", "0")],
                ),
                curve(&[log(0, &[5.0, 4.0], 2.0)]),
            ),
            (
                run(
                    "d",
                    &[("algorithm", "d-psgd"), ("network", "9mbit"), ("seed", "0")],
                ),
                curve(&[log(0, &[5.0], 0.5)]),
            ),
        ];
        let spec = FigureSpec {
            x: "wall_s".into(),
            y: "train_loss".into(),
            panels: Some("network".into()),
            series: "algorithm".into(),
            smooth: 2,
            log_y: false,
        };
        let p = panels(&spec, &curves).unwrap();
        insta::assert_debug_snapshot!("figure_series", p);
        let dir = std::env::temp_dir().join(format!("repro-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let svg = dir.join("f.svg");
        render_svg(&svg, "test", &spec, &p).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains("<svg")
                && text.contains("moniqua")
                && text.contains("wall-clock time (s)")
        );
        write_curves_csv(&dir.join("curves.csv"), &curves).unwrap();
        let csv = std::fs::read_to_string(dir.join("curves.csv")).unwrap();
        assert!(csv.starts_with("run_id,algorithm,network,seed,iteration,epoch,wall_s,train_loss\na,moniqua,1mbit,0,0,0,1,3\n"), "{csv}");
        let bad = FigureSpec {
            series: "colour".into(),
            ..spec
        };
        assert!(
            panels(&bad, &curves)
                .unwrap_err()
                .to_string()
                .contains("figure.series `colour`")
        );
    }
}
