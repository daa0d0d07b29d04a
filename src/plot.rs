//! Figures: per-step curves read back from the runs' logs, written to
//! curves.csv, grouped into panels and series as the manifest's `figure`
//! says, averaged over the other grid keys (seeds), and drawn as SVG with
//! plotters (its SVG backend needs no fonts on the host).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use plotters::prelude::*;
use repro_runlog::{Log, read_log};

use crate::manifest::FigureSpec;
use crate::net::{parse_bandwidth, parse_latency};
use crate::results::RunRecord;

/// One step of one run, averaged over its ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    pub iteration: u64,
    pub epoch: f64,
    /// When the slowest rank finished the step, in seconds since its first
    /// step began.
    pub wall_s: f64,
    /// The figure's `y`, mean over ranks: `train_loss` from the steps, or an
    /// evaluation metric from the evaluations.
    pub value: f64,
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

/// One logged point of one rank: (iteration, wall_s, value, epoch).
type RankPoint = (u64, f64, f64, f64);

/// Averages the ranks' points iteration by iteration (only the iterations
/// every rank logged). Time counts from the start of each rank's first step
/// (start-up and data loading left out), the slowest rank's.
fn average_ranks(logs: &[Log], points: impl Fn(&Log) -> Vec<RankPoint>) -> Vec<CurvePoint> {
    let mut by_iter: BTreeMap<u64, (f64, f64, f64, usize)> = BTreeMap::new();
    for log in logs {
        let t0 = log
            .steps
            .first()
            .map_or(0.0, |s| (s.wall_s - s.compute_s - s.comm_s).max(0.0));
        for (iteration, wall_s, value, epoch) in points(log) {
            let e = by_iter.entry(iteration).or_insert((0.0, 0.0, 0.0, 0));
            e.0 = e.0.max(wall_s - t0);
            e.1 += value;
            e.2 = epoch;
            e.3 += 1;
        }
    }
    by_iter
        .into_iter()
        .filter(|(_, v)| v.3 == logs.len())
        .map(|(iteration, (wall_s, sum, epoch, n))| CurvePoint {
            iteration,
            epoch,
            wall_s,
            value: sum / n as f64,
        })
        .collect()
}

/// The training loss of one run: the ranks' steps averaged iteration by
/// iteration (see [`average_ranks`]).
pub fn curve(logs: &[Log]) -> Vec<CurvePoint> {
    average_ranks(logs, |log| {
        log.steps
            .iter()
            .map(|s| (s.iteration, s.wall_s, s.train_loss, s.epoch))
            .collect()
    })
}

/// The `y` values a figure can draw: `train_loss` (every step), or a metric
/// of the evaluations (every `eval_every` steps).
pub const CURVE_METRICS: [&str; 5] = [
    "train_loss",
    "test_loss",
    "test_accuracy",
    "avg_test_loss",
    "avg_test_accuracy",
];

/// One run's curve of `y` (one of [`CURVE_METRICS`]): [`curve`] for the
/// training loss; for an evaluation metric, the ranks' evaluations averaged
/// at each evaluated iteration (the averaged model's are the same on every
/// rank), at the time of the slowest rank.
pub fn curve_of(logs: &[Log], y: &str) -> Result<Vec<CurvePoint>> {
    let pick: fn(&repro_runlog::Eval) -> Option<f64> = match y {
        "train_loss" => return Ok(curve(logs)),
        "test_loss" => |e| Some(e.test_loss),
        "test_accuracy" => |e| Some(e.test_accuracy),
        "avg_test_loss" => |e| e.avg_test_loss,
        "avg_test_accuracy" => |e| e.avg_test_accuracy,
        other => bail!(
            "figure.y `{other}` is not one of {}",
            CURVE_METRICS.join(", ")
        ),
    };
    Ok(average_ranks(logs, |log| {
        log.evals
            .iter()
            .filter_map(|e| Some((e.iteration, e.wall_s, pick(e)?, e.epoch)))
            .collect()
    }))
}

/// The curves of `y` of every run that left logs, in the order of `runs`.
pub fn load_curves(
    raw: &Path,
    runs: &[RunRecord],
    y: &str,
) -> Result<Vec<(RunRecord, Vec<CurvePoint>)>> {
    let mut out = Vec::new();
    for r in runs {
        let Ok(logs) = run_logs(raw, &r.run_id) else {
            continue;
        };
        let c = curve_of(&logs, y)?;
        if !c.is_empty() {
            out.push((r.clone(), c));
        }
    }
    Ok(out)
}

/// curves.csv: run id, grid keys, then one line per step.
pub fn write_curves_csv(
    path: &Path,
    y: &str,
    curves: &[(RunRecord, Vec<CurvePoint>)],
) -> Result<()> {
    let keys: Vec<String> = curves
        .first()
        .map(|(r, _)| r.point.keys().cloned().collect())
        .unwrap_or_default();
    let mut out = String::from("run_id");
    for k in &keys {
        out.push(',');
        out.push_str(k);
    }
    out.push_str(&format!(",iteration,epoch,wall_s,{y}\n"));
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
                r.run_id, p.iteration, p.epoch, p.wall_s, p.value
            ));
        }
    }
    std::fs::write(path, out).with_context(|| format!("could not write {}", path.display()))
}

/// One line of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub label: String,
    /// Runs averaged into it (into each point, for a sweep).
    pub runs: usize,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (a bound beside a measurement).
    pub dashed: bool,
}

/// One panel of a figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
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
pub fn panels(spec: &FigureSpec, curves: &[(RunRecord, Vec<CurvePoint>)]) -> Result<Vec<Panel>> {
    let x_of = |p: &CurvePoint| -> Result<f64> {
        Ok(match spec.x.as_str() {
            "wall_s" => p.wall_s,
            "iteration" => p.iteration as f64,
            "epoch" => p.epoch,
            other => bail!("figure.x `{other}` is not one of wall_s, iteration, epoch"),
        })
    };
    if !CURVE_METRICS.contains(&spec.y.as_str()) {
        bail!(
            "figure.y `{}` is not one of {}",
            spec.y,
            CURVE_METRICS.join(", ")
        );
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
                            ys[i] += pt.value / runs.len() as f64;
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
                        dashed: false,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Panel {
                title: p.clone(),
                x_label: axis_label(&spec.x).into(),
                y_label: axis_label(&spec.y).into(),
                log_x: false,
                series,
            })
        })
        .collect()
}

/// A network label (`100mbit/0.15ms`, `1mbit`, `1ms`) as (bit/s, seconds).
fn condition_of(label: &str) -> (Option<f64>, f64) {
    let mut bw = None;
    let mut lat = 0.0;
    for part in label.split('/') {
        if let Some(b) = parse_bandwidth(part).filter(|_| part.contains("bit")) {
            bw = Some(b);
        } else if let Some(l) = parse_latency(part) {
            lat = l;
        }
    }
    (bw, lat)
}

/// x, sum of y, sum of bound, runs: one point of a sweep being averaged.
type SweepAcc = (f64, f64, f64, usize);

/// A sweep, as in Tang et al. 2018's Figure 3: `y` (and the dashed `bound`)
/// of runs.csv against bandwidth, one panel per latency with two or more
/// bandwidths, then against latency, one panel per bandwidth with two or
/// more latencies; one series per value of `series`; seeds averaged.
pub fn sweep_panels(spec: &FigureSpec, rows: &[RunRecord]) -> Result<Vec<Panel>> {
    let net_key = spec.panels.clone().unwrap_or_else(|| "network".into());
    let mut pts = Vec::new();
    for r in rows {
        let label = r
            .point
            .get(&net_key)
            .with_context(|| format!("figure.panels `{net_key}` is not a grid key"))?;
        let series = r
            .point
            .get(&spec.series)
            .with_context(|| format!("figure.series `{}` is not a grid key", spec.series))?;
        let metric = |k: &str| {
            r.metrics
                .get(k)
                .and_then(crate::results::Cell::number)
                .unwrap_or(f64::NAN)
        };
        let (bw, lat) = condition_of(label);
        pts.push((
            series.clone(),
            bw,
            lat,
            metric(&spec.y),
            spec.bound.as_deref().map(metric),
        ));
    }
    let mut order: Vec<String> = Vec::new();
    for p in &pts {
        if !order.contains(&p.0) {
            order.push(p.0.clone());
        }
    }
    let mut lats: Vec<f64> = pts.iter().map(|p| p.2).collect();
    lats.sort_by(f64::total_cmp);
    lats.dedup();
    let mut bws: Vec<f64> = pts.iter().filter_map(|p| p.1).collect();
    bws.sort_by(f64::total_cmp);
    bws.dedup();
    let mut panels = Vec::new();
    let mut add = |title: String,
                   x_label: &str,
                   log_x: bool,
                   selected: Vec<(&String, f64, f64, Option<f64>)>| {
        let mut xs: Vec<u64> = selected.iter().map(|p| p.1.to_bits()).collect();
        xs.sort_unstable();
        xs.dedup();
        if xs.len() < 2 {
            return;
        }
        let mut series = Vec::new();
        for name in &order {
            let mut by_x: BTreeMap<u64, SweepAcc> = BTreeMap::new();
            for (s, x, y, b) in &selected {
                if *s == name {
                    let e = by_x.entry(x.to_bits()).or_insert((*x, 0.0, 0.0, 0));
                    e.1 += y;
                    e.2 += b.unwrap_or(f64::NAN);
                    e.3 += 1;
                }
            }
            let mut v: Vec<SweepAcc> = by_x.into_values().collect();
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            let runs = v.iter().map(|e| e.3).max().unwrap_or(0);
            let line = |f: &dyn Fn(&SweepAcc) -> f64| -> Vec<(f64, f64)> {
                v.iter()
                    .map(|e| (e.0, f(e) / e.3 as f64))
                    .filter(|p| p.1.is_finite())
                    .collect()
            };
            series.push(Series {
                label: name.clone(),
                runs,
                points: line(&|e| e.1),
                dashed: false,
            });
            if spec.bound.is_some() {
                series.push(Series {
                    label: format!("{name} (wire bound)"),
                    runs,
                    points: line(&|e| e.2),
                    dashed: true,
                });
            }
        }
        panels.push(Panel {
            title,
            x_label: x_label.into(),
            y_label: axis_label(&spec.y).into(),
            log_x,
            series,
        });
    };
    // epoch time against bandwidth, one panel per latency ...
    for &l in &lats {
        let sel = pts
            .iter()
            .filter(|p| p.2 == l)
            .filter_map(|p| Some((&p.0, p.1? / 1e6, p.3, p.4)))
            .collect();
        add(
            format!("latency {} ms", l * 1e3),
            "bandwidth (Mbit/s)",
            true,
            sel,
        );
    }
    // ... and against latency, one panel per bandwidth
    for &b in &bws {
        let sel = pts
            .iter()
            .filter(|p| p.1 == Some(b))
            .map(|p| (&p.0, p.2 * 1e3, p.3, p.4))
            .collect();
        add(
            format!("bandwidth {} Mbit/s", b / 1e6),
            "latency (ms)",
            false,
            sel,
        );
    }
    if panels.is_empty() {
        bail!("a sweep figure needs runs at two or more bandwidths or latencies");
    }
    Ok(panels)
}

fn axis_label(key: &str) -> &'static str {
    match key {
        "wall_s" => "wall-clock time (s)",
        "iteration" => "iteration",
        "epoch" => "epoch",
        "epoch_time_s" => "epoch time (s)",
        "wall_s_total" => "run time (s)",
        "test_loss" => "test loss (local models)",
        "test_accuracy" => "test accuracy (local models)",
        "avg_test_loss" => "test loss of the averaged model",
        "avg_test_accuracy" => "test accuracy of the averaged model",
        _ => "train loss",
    }
}

/// An axis label: at most four significant digits, no float noise
/// (`0.7`, not `0.70000000001`).
fn tick(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-3..1e5).contains(&v.abs()) {
        return format!("{v:.1e}");
    }
    let s = crate::results::number(v);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
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

/// An image format for figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Svg => "svg",
            ImageFormat::Png => "png",
        }
    }
}

/// The font every figure uses, compiled in so that drawing needs no
/// fontconfig and no fonts installed on the host (DejaVu Sans; its licence
/// is in src/assets/DejaVuSans.LICENSE).
static FONT: &[u8] = include_bytes!("assets/DejaVuSans.ttf");

fn register_font() -> Result<()> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        bail!("the compiled-in font could not be loaded (src/assets/DejaVuSans.ttf is corrupt)")
    }
}

/// The figure's size in pixels: panels side by side, two rows when there
/// are more than two.
fn layout(panels: usize) -> (usize, usize, (u32, u32)) {
    let cols = if panels > 2 {
        panels.div_ceil(2)
    } else {
        panels.max(1)
    };
    let rows = panels.div_ceil(cols).max(1);
    (rows, cols, (520 * cols as u32, 420 * rows as u32 + 40))
}

/// The figure's size, wide enough for its title (22 px type: about 12 px a
/// character).
fn size_for(panels: usize, title: &str) -> (u32, u32) {
    let (_, _, (w, h)) = layout(panels);
    (w.max(title.chars().count() as u32 * 12 + 40), h)
}

/// Draws the figure into `path` in the given format.
pub fn render(
    path: &Path,
    format: ImageFormat,
    title: &str,
    spec: &FigureSpec,
    panels: &[Panel],
) -> Result<()> {
    if panels.is_empty() {
        bail!("no curves to plot: no run left step records");
    }
    register_font()?;
    let size = size_for(panels.len(), title);
    // written beside the target and renamed, so a reader never sees half a
    // figure (the bitmap encoder picks its format from the last extension)
    let tmp = path.with_extension(format!("tmp.{}", format.extension()));
    match format {
        ImageFormat::Svg => draw(
            SVGBackend::new(&tmp, size).into_drawing_area(),
            path,
            title,
            spec,
            panels,
        )?,
        ImageFormat::Png => draw(
            BitMapBackend::new(&tmp, size).into_drawing_area(),
            path,
            title,
            spec,
            panels,
        )?,
    }
    std::fs::rename(&tmp, path).with_context(|| format!("could not write {}", path.display()))
}

/// Draws the panels on any plotters backend.
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    path: &Path,
    title: &str,
    spec: &FigureSpec,
    panels: &[Panel],
) -> Result<()> {
    let (rows, cols, _) = layout(panels.len());
    let err = |e: String| anyhow::anyhow!("could not draw {}: {e}", path.display());
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
        let (x_min, x_max) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
        let ys = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1));
        let (y_min, y_max) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
            (a.min(y), b.max(y))
        });
        let (x_min, x_max) = if x_min.is_finite() {
            (x_min, x_max.max(x_min * 1.01 + 1e-9))
        } else {
            (0.0, 1.0)
        };
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
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart.map_err(|e| err(e.to_string()))?;
                chart
                    .configure_mesh()
                    .x_desc(panel.x_label.as_str())
                    .y_desc(panel.y_label.as_str())
                    .x_label_formatter(&|v| tick(*v))
                    .y_label_formatter(&|v| tick(*v))
                    .label_style(("sans-serif", 13))
                    .draw()
                    .map_err(|e| err(e.to_string()))?;
                let mut color_of: Vec<&str> = Vec::new();
                for s in &panel.series {
                    // a bound shares its measurement's colour
                    let base = s.label.trim_end_matches(" (wire bound)");
                    let i = color_of.iter().position(|c| *c == base).unwrap_or_else(|| {
                        color_of.push(base);
                        color_of.len() - 1
                    });
                    let color = COLORS[i % COLORS.len()];
                    let style = color.stroke_width(2);
                    let drawn = if s.dashed {
                        chart.draw_series(DashedLineSeries::new(
                            s.points.iter().copied(),
                            6,
                            4,
                            style,
                        ))
                    } else {
                        chart.draw_series(LineSeries::new(s.points.iter().copied(), style))
                    };
                    let dashed = s.dashed;
                    drawn
                        .map_err(|e| err(e.to_string()))?
                        .label(s.label.clone())
                        .legend(move |(x, y)| {
                            let end = if dashed { x + 8 } else { x + 18 };
                            PathElement::new(vec![(x, y), (end, y)], style)
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
        let y_pad = (y_max - y_min) * 0.05;
        let log_y = spec.log_y && y_min > 0.0;
        let log_x = panel.log_x && x_min > 0.0;
        let x_lin = if panel.log_x {
            x_min.min(0.0)
        } else {
            0.0f64.min(x_min)
        }..x_max;
        match (log_x, log_y) {
            (false, false) => {
                draw!(chart.build_cartesian_2d(x_lin, (y_min - y_pad)..(y_max + y_pad)))
            }
            (false, true) => {
                draw!(chart.build_cartesian_2d(x_lin, (y_min * 0.9..y_max * 1.1).log_scale()))
            }
            (true, false) => draw!(chart.build_cartesian_2d(
                (x_min * 0.9..x_max * 1.1).log_scale(),
                (y_min - y_pad)..(y_max + y_pad)
            )),
            (true, true) => draw!(chart.build_cartesian_2d(
                (x_min * 0.9..x_max * 1.1).log_scale(),
                (y_min * 0.9..y_max * 1.1).log_scale()
            )),
        }
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::FigureKind;
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
                    compute_s: dt,
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

    /// Evaluation metrics make curves too: one point per evaluated
    /// iteration, averaged over the ranks that evaluated it.
    #[test]
    fn evaluations_make_curves_of_their_metrics() {
        let eval = |iteration: u64, loss: f64, avg: Option<f64>| repro_runlog::Eval {
            iteration,
            epoch: iteration as f64 / 10.0,
            wall_s: iteration as f64,
            test_loss: loss,
            test_accuracy: 0.5,
            avg_test_loss: avg,
            avg_test_accuracy: None,
            consensus_distance: None,
        };
        let mut a = log(0, &[1.0, 1.0], 1.0);
        let mut b = log(1, &[1.0, 1.0], 1.0);
        a.evals = vec![eval(1, 2.0, None), eval(2, 1.0, Some(0.8))];
        b.evals = vec![eval(1, 4.0, None), eval(2, 3.0, Some(0.8))];
        let c = curve_of(&[a.clone(), b.clone()], "test_loss").unwrap();
        assert_eq!(
            c.iter().map(|p| (p.iteration, p.value)).collect::<Vec<_>>(),
            [(1, 3.0), (2, 2.0)]
        );
        // the intermediate evaluations of AD-PSGD have no averaged model
        let c = curve_of(&[a.clone(), b.clone()], "avg_test_loss").unwrap();
        assert_eq!(c.len(), 1);
        assert!((c[0].value - 0.8).abs() < 1e-12);
        assert!(curve_of(&[a], "accuracy").is_err());
    }

    fn run(id: &str, point: &[(&str, &str)]) -> RunRecord {
        RunRecord {
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
        assert_eq!(c[1].value, 2.0);
        assert_eq!(c[1].wall_s, 2.0);
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
            kind: FigureKind::Curves,
            bound: None,
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
        render(&svg, ImageFormat::Svg, "test", &spec, &p).unwrap();
        let png = dir.join("f.png");
        render(&png, ImageFormat::Png, "test", &spec, &p).unwrap();
        assert_png_has_lines(&png, size_for(p.len(), "test"));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains("<svg")
                && text.contains("moniqua")
                && text.contains("wall-clock time (s)")
        );
        write_curves_csv(&dir.join("curves.csv"), "train_loss", &curves).unwrap();
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

    #[test]
    fn sweeps_make_a_panel_per_fixed_latency_and_bandwidth() {
        let row = |alg: &str, net: &str, seed: &str, t: f64, bound: f64| RunRecord {
            run_id: format!("{alg}{net}{seed}"),
            point: [("algorithm", alg), ("network", net), ("seed", seed)]
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            metrics: [("epoch_time_s", t), ("wire_bound_epoch_s", bound)]
                .iter()
                .map(|(k, v)| ((*k).into(), crate::results::Cell::Number(Some(*v))))
                .collect(),
        };
        let rows = vec![
            row("d-psgd", "10mbit/0.15ms", "0", 10.0, 9.0),
            row("d-psgd", "10mbit/0.15ms", "1", 12.0, 9.0),
            row("d-psgd", "100mbit/0.15ms", "0", 2.0, 0.9),
            row("moniqua", "10mbit/0.15ms", "0", 3.0, 2.5),
            row("moniqua", "100mbit/0.15ms", "0", 1.0, 0.25),
            row("d-psgd", "100mbit/5ms", "0", 4.0, 2.0),
            // a latency with a single bandwidth makes no bandwidth panel
            row("d-psgd", "1mbit/5ms", "0", 90.0, 80.0),
        ];
        let spec = FigureSpec {
            kind: FigureKind::Sweep,
            x: String::new(),
            y: "epoch_time_s".into(),
            bound: Some("wire_bound_epoch_s".into()),
            panels: None,
            series: "algorithm".into(),
            smooth: 1,
            log_y: true,
        };
        let p = sweep_panels(&spec, &rows).unwrap();
        let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            ["latency 0.15 ms", "latency 5 ms", "bandwidth 100 Mbit/s"]
        );
        insta::assert_debug_snapshot!("sweep_series", p[0]);
        assert_eq!(p[2].series[0].points, vec![(0.15, 2.0), (5.0, 4.0)]);
        let svg = std::env::temp_dir().join(format!("repro-sweep-{}.svg", std::process::id()));
        render(&svg, ImageFormat::Svg, "sweep", &spec, &p).unwrap();
        assert!(
            std::fs::read_to_string(&svg)
                .unwrap()
                .contains("bandwidth (Mbit/s)")
        );
    }

    /// Decodes a PNG and checks its size, that it is mostly white (a
    /// background, not noise), and that it holds the first series' colour
    /// and dark text pixels.
    fn assert_png_has_lines(path: &Path, size: (u32, u32)) {
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), size);
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
        let white = px.iter().filter(|p| p == &&[255, 255, 255]).count();
        let first = COLORS[0];
        let coloured = px
            .iter()
            .filter(|p| p == &&[first.0, first.1, first.2])
            .count();
        let dark = px.iter().filter(|p| p.iter().all(|c| *c < 80)).count();
        assert!(white * 2 > px.len(), "background is not white");
        assert!(coloured > 50, "no pixel of the first series' colour");
        assert!(dark > 500, "no text or axes drawn ({dark} dark pixels)");
    }

    #[test]
    fn ticks_have_no_float_noise() {
        assert_eq!(tick(0.700_000_000_000_1), "0.7");
        assert_eq!(tick(0.300_000_000_000_000_04), "0.3");
        assert_eq!(tick(250.0), "250");
        assert_eq!(tick(1000.0), "1000");
        assert_eq!(tick(0.13), "0.13");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(2e-5), "2.0e-5");
    }
}
