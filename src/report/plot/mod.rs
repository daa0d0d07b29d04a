//! Figures: the panels and series the manifest's `figure` asks for,
//! computed from the curves and runs frames (seeds averaged by group-by),
//! and drawn as SVG and PNG with plotters (the font is compiled in).

use std::path::Path;

use anyhow::{Context, Result, bail};
use plotters::prelude::*;
use polars::prelude::{DataFrame, DataType, Expr, LazyFrame, col, len, lit};

use crate::experiment::manifest::FigureSpec;
use crate::records::frames::{self, CurvesFrame, RunsFrame};
use crate::records::metrics::CURVE_METRICS;

mod draw;
mod panels;
mod reach;
pub(crate) use draw::*;
pub(crate) use panels::*;
pub(crate) use reach::*;

#[cfg(test)]
mod tests;

/// One line of a panel.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub label: String,
    /// Runs averaged into it (into each point, for a sweep).
    pub runs: usize,
    pub points: Vec<(f64, f64)>,
    /// The 95% t interval of the mean over the runs at each x, `(x, lo,
    /// hi)`, drawn as a shaded band; empty for a single run.
    pub band: Vec<(f64, f64, f64)>,
    /// Drawn dashed (a bound beside a measurement).
    pub dashed: bool,
}

/// The half-width of the 95% t interval of a mean of `n` values with
/// sample sd `sd`; None for fewer than two.
fn half_width(sd: Option<f64>, n: f64) -> Option<f64> {
    (n >= 2.0)
        .then(|| sd.filter(|s| s.is_finite()))
        .flatten()
        .map(|sd| crate::report::stats::t_star(n - 1.0, 0.05) * sd / n.sqrt())
}

/// The band of a mean `m` whose 95% t interval has half-width `h`, kept
/// inside the metric's range: for a positive quantity the interval of
/// log m (delta method: se(log m) = se(m) / m), `m e^(-h/m)` to `m e^(h/m)`;
/// for a fraction that of logit m (se = se(m) / (m (1 - m))); else
/// `m - h` to `m + h`. Where the transform is undefined (m at or beyond
/// the range's edge) the symmetric interval is cut at the edge.
pub(crate) fn band_within(range: crate::records::metrics::Range, m: f64, h: f64) -> (f64, f64) {
    use crate::records::metrics::Range;
    match range {
        Range::Positive if m > 0.0 => (m * (-h / m).exp(), m * (h / m).exp()),
        Range::Positive => ((m - h).max(0.0), m + h),
        Range::Fraction if m > 0.0 && m < 1.0 => {
            let logit = (m / (1.0 - m)).ln();
            let se = h / (m * (1.0 - m));
            let sigmoid = |v: f64| 1.0 / (1.0 + (-v).exp());
            (sigmoid(logit - se), sigmoid(logit + se))
        }
        Range::Fraction => ((m - h).max(0.0), (m + h).min(1.0)),
        Range::Real => (m - h, m + h),
    }
}

/// One panel of a figure.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Panel {
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

/// A run's curve as the figure draws it: each value the mean of the last
/// `window` logged ones (trailing, so a point never looks ahead). Its
/// time to a target is when this curve gets there, not when one noisy
/// minibatch did: `targets.md` and `faster_to` claims read it.
pub(crate) fn smoothed(
    points: &[crate::records::curves::CurvePoint],
    window: usize,
) -> Vec<crate::records::curves::CurvePoint> {
    let values: Vec<f64> = points.iter().map(|p| p.value).collect();
    points
        .iter()
        .zip(smooth(&values, window))
        .map(|(p, value)| crate::records::curves::CurvePoint { value, ..p.clone() })
        .collect()
}

/// What a curves figure can draw its `y` against: seconds since the first
/// step, steps, epochs, or bytes each worker had sent.
pub(crate) const CURVE_X: [&str; 4] = ["wall_s", "iteration", "epoch", "bytes"];

/// Checks `spec` against the runs' grid `keys` before anything runs: the
/// series and panel keys are grid keys, and x and y are what the figure's
/// kind can draw. The error is the key's path in the manifest and what is
/// wrong.
pub(crate) fn check_spec(spec: &FigureSpec, keys: &[String]) -> Result<(), (String, String)> {
    let grid = |path: &str, k: &str| {
        if keys.iter().any(|g| g == k) {
            Ok(())
        } else {
            Err((
                path.to_string(),
                format!("`{k}` is not a grid key; grid keys: {}", keys.join(", ")),
            ))
        }
    };
    let one_of = |path: &str, v: &str, allowed: &[&str]| {
        if allowed.contains(&v) {
            Ok(())
        } else {
            Err((
                path.to_string(),
                format!("`{v}` is not one of {}", allowed.join(", ")),
            ))
        }
    };
    grid("figure.series", &spec.series)?;
    match spec.kind {
        crate::experiment::manifest::FigureKind::Curves => {
            if let Some(p) = &spec.panels {
                grid("figure.panels", p)?;
            }
            one_of("figure.x", &spec.x, &CURVE_X)?;
            for (i, x) in spec.also_x.iter().enumerate() {
                one_of(&format!("figure.also_x[{i}]"), x, &CURVE_X)?;
            }
            one_of("figure.y", &spec.y, &CURVE_METRICS)?;
        }
        crate::experiment::manifest::FigureKind::Sweep => {
            grid("figure.panels", spec.panels.as_deref().unwrap_or("network"))?;
            one_of("figure.y", &spec.y, &crate::records::metrics::METRICS)?;
            if let Some(b) = &spec.bound {
                one_of("figure.bound", b, &crate::records::metrics::METRICS)?;
            }
        }
        crate::experiment::manifest::FigureKind::Scaling => {
            if let Some(p) = &spec.panels {
                grid("figure.panels", p)?;
            }
            // a runs.csv column or a numeric grid key (bits)
            let x = |path: &str, v: &str| match grid(path, v) {
                Ok(()) => Ok(()),
                Err(_) => one_of(path, v, &crate::records::metrics::METRICS)
                    .map_err(|(p, e)| (p, format!("{e}, or a grid key ({})", keys.join(", ")))),
            };
            x("figure.x", &spec.x)?;
            for (i, v) in spec.also_x.iter().enumerate() {
                x(&format!("figure.also_x[{i}]"), v)?;
            }
            one_of("figure.y", &spec.y, &crate::records::metrics::METRICS)?;
            if let Some(b) = &spec.bound {
                one_of("figure.bound", b, &crate::records::metrics::METRICS)?;
            }
        }
    }
    Ok(())
}

/// The axis label of a curve's x or y, or of a runs.csv column: a name
/// in words where there is one, else the key itself.
fn axis_label(key: &str) -> String {
    // a curve's x axis (`bytes` there is per worker, where runs.csv's
    // `bytes` column sums the workers), then a metric's own label, then
    // the grid keys figures sweep
    let known = match key {
        "iteration" => "iteration",
        "epoch" => "epoch",
        "bytes" => "bytes sent per worker",
        "wall_s" => "wall-clock time (s)",
        _ => match crate::records::metrics::metric(key) {
            Some(m) => m.label,
            None => match key {
                "wall_s_total" => "run time (s)",
                "bits" => "bits per coordinate",
                "modulus" => "modulus B",
                _ => key,
            },
        },
    };
    known.to_string()
}

/// `panel` with its y values (points, bands) multiplied by `factor`, and
/// the y label saying so: "(%)" for 100.
pub(crate) fn scaled(mut panel: Panel, factor: f64) -> Panel {
    if factor == 1.0 {
        return panel;
    }
    for s in &mut panel.series {
        for p in &mut s.points {
            p.1 *= factor;
        }
        for b in &mut s.band {
            b.1 *= factor;
            b.2 *= factor;
        }
    }
    panel.y_label = if factor == 100.0 {
        format!("{} (%)", panel.y_label)
    } else {
        format!("{} (x {})", panel.y_label, tick(factor))
    };
    panel
}

/// `panel` with its time axes named for the clock of `backend`'s runs:
/// MPI ranks' seconds are wall-clock time; the simulator's and the
/// in-process backend's are a virtual clock (measured compute, modelled
/// network), and an axis saying "wall-clock" there would be false.
pub(crate) fn on_clock_of(
    mut panel: Panel,
    backend: crate::experiment::manifest::Backend,
) -> Panel {
    use crate::experiment::manifest::Backend;
    let wall = axis_label("wall_s");
    let clock = match backend {
        Backend::Mpi => return panel,
        Backend::Sim => "virtual time (s; simulated compute and network)",
        Backend::InProcess => "virtual time (s; measured compute, modelled network)",
    };
    for label in [&mut panel.x_label, &mut panel.y_label] {
        if *label == wall {
            *label = clock.to_string();
        }
    }
    panel
}

/// The label of runs.csv column `key` on a runs.csv figure's axis: its
/// `bytes` is every worker's, where a curve's is one worker's.
fn column_label(key: &str) -> String {
    match key {
        "bytes" => "bytes sent, all workers".into(),
        _ => axis_label(key),
    }
}

/// An axis label: at most four significant digits, no float noise
/// (`0.7`, not `0.70000000001`).
pub(crate) fn tick(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-3..1e5).contains(&v.abs()) {
        return format!("{v:.1e}");
    }
    crate::report::table::short(v)
}
