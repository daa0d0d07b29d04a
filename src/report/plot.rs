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

/// The distinct values of String expression `e` over `lf`, in the order
/// the rows first have them.
fn in_order(lf: LazyFrame, e: Expr) -> Result<Vec<String>> {
    let df = lf
        .group_by_stable([e.alias("__v")])
        .agg([])
        .collect()
        .context("could not group the figure's runs")?;
    (0..df.height())
        .map(|i| frames::text_at(&df, "__v", i))
        .collect()
}

/// One series of a curves panel from its averaged `line` (`__x`, `__y`,
/// `__sd` per iteration) over `runs` runs: smoothed, cut to the x range,
/// with its confidence band.
fn curve_series(spec: &FigureSpec, line: &DataFrame, label: &str, runs: f64) -> Result<Series> {
    let column = |n: &str| -> Result<Vec<f64>> {
        Ok(frames::numbers(line, n)?
            .into_iter()
            .map(|v| v.unwrap_or(f64::NAN))
            .collect())
    };
    let ys = smooth(&column("__y")?, spec.smooth);
    let xs = column("__x")?;
    let halves: Vec<f64> = frames::numbers(line, "__sd")?
        .into_iter()
        .map(|sd| half_width(sd, runs).unwrap_or(f64::NAN))
        .collect();
    let halves = smooth(&halves, spec.smooth);
    let shown =
        |x: &f64| x.is_finite() && spec.x_range.is_none_or(|[lo, hi]| (lo..=hi).contains(x));
    Ok(Series {
        label: label.to_string(),
        runs: runs as usize,
        points: xs
            .iter()
            .zip(&ys)
            .filter(|(x, y)| shown(x) && y.is_finite())
            .map(|(x, y)| (*x, *y))
            .collect(),
        band: xs
            .iter()
            .zip(ys.iter().zip(&halves))
            .filter(|(x, (y, h))| shown(x) && y.is_finite() && h.is_finite())
            .map(|(x, (y, h))| {
                let (lo, hi) = band_within(crate::records::metrics::range(&spec.y), *y, *h);
                (*x, lo, hi)
            })
            .collect(),
        dashed: false,
    })
}

/// A curves figure's x and y are columns the curves have.
fn check_curve_axes(spec: &FigureSpec) -> Result<()> {
    if !CURVE_X.contains(&spec.x.as_str()) {
        bail!("figure.x `{}` is not one of {}", spec.x, CURVE_X.join(", "));
    }
    if !CURVE_METRICS.contains(&spec.y.as_str()) {
        bail!(
            "figure.y `{}` is not one of {}",
            spec.y,
            CURVE_METRICS.join(", ")
        );
    }
    Ok(())
}

/// Groups curves into panels and series; runs that differ only in other
/// grid keys (seeds) are averaged iteration by iteration, over the
/// iterations every one of them has.
pub(crate) fn panels(spec: &FigureSpec, curves: &CurvesFrame) -> Result<Vec<Panel>> {
    check_curve_axes(spec)?;
    let df = &curves.df;
    if df.height() == 0 {
        return Ok(Vec::new());
    }
    let panel = match &spec.panels {
        Some(k) if df.column(k).is_err() => bail!("figure.panels `{k}` is not a grid key"),
        Some(k) => frames::key(df, k),
        None => lit(""),
    };
    if df.column(&spec.series).is_err() {
        bail!("figure.series `{}` is not a grid key", spec.series);
    }
    let series = frames::key(df, &spec.series);
    let panel_order = in_order(curves.lazy(), panel.clone())?;
    let series_order = in_order(curves.lazy(), series.clone())?;
    let points = mean_points(spec, curves, &panel, &series);
    let keys = (&panel, &series);
    panel_order
        .iter()
        .map(|p| {
            let mut out = Vec::new();
            for s in &series_order {
                out.extend(averaged_series(spec, curves, &points, keys, (p, s))?);
            }
            if spec.x == "bytes" && out.iter().all(|s| s.points.is_empty()) {
                bail!(
                    "figure.x `bytes`: these curves record no bytes (curves.parquet written before bytes were logged); rerun the experiment"
                );
            }
            // a bare number ("1") says nothing alone: name its key
            let title = match &spec.panels {
                Some(k) if p.parse::<f64>().is_ok() => format!("{k} = {p}"),
                _ => p.clone(),
            };
            Ok(Panel {
                title,
                x_label: axis_label(&spec.x),
                y_label: axis_label(&spec.y),
                log_x: spec.log_x,
                series: out,
            })
        })
        .collect()
}

/// Every (panel, series, iteration): the mean of x and y over its runs,
/// y's standard deviation, and how many runs.
fn mean_points(spec: &FigureSpec, curves: &CurvesFrame, panel: &Expr, series: &Expr) -> LazyFrame {
    curves
        .lazy()
        .group_by([
            panel.clone().alias("__panel"),
            series.clone().alias("__series"),
            col("iteration"),
        ])
        .agg([
            col(spec.x.as_str())
                .cast(DataType::Float64)
                .mean()
                .alias("__x"),
            col(curves.y.as_str()).mean().alias("__y"),
            col(curves.y.as_str()).std(1).alias("__sd"),
            col("run_id")
                .n_unique()
                .cast(DataType::Float64)
                .alias("__n"),
        ])
        .sort(["iteration"], Default::default())
}

/// Series `s` of panel `p` (whose values the expressions `keys` give),
/// averaged over its runs on the iterations every run has; `None` when it
/// has no run.
fn averaged_series(
    spec: &FigureSpec,
    curves: &CurvesFrame,
    points: &LazyFrame,
    (panel, series): (&Expr, &Expr),
    (p, s): (&str, &str),
) -> Result<Option<Series>> {
    let this = |e: Expr, f: Expr| e.eq(lit(p)).and(f.eq(lit(s)));
    let runs = curves
        .lazy()
        .filter(this(panel.clone(), series.clone()))
        .select([col("run_id").n_unique().cast(DataType::Float64)])
        .collect()
        .context("could not count the figure's runs")?;
    let runs = frames::number_at(&runs, "run_id", 0)?.unwrap_or(0.0);
    if runs == 0.0 {
        return Ok(None);
    }
    let line = points
        .clone()
        .filter(this(col("__panel"), col("__series")))
        .filter(col("__n").eq(lit(runs)))
        .collect()
        .context("could not average the figure's runs")?;
    Ok(Some(curve_series(spec, &line, s, runs)?))
}

/// A sweep, as in Tang et al. 2018's Figure 3: `y` (and the dashed `bound`)
/// of the valid runs against bandwidth, one panel per latency with two
/// or more bandwidths, then against latency, one panel per bandwidth with
/// two or more latencies; one series per value of `series`; seeds averaged.
pub(crate) fn sweep_panels(spec: &FigureSpec, runs: &RunsFrame) -> Result<Vec<Panel>> {
    let df = &runs.df;
    let done = valid_runs(spec, runs)?.with_columns([
        frames::number(df, "bandwidth_bps").alias("__bw"),
        frames::number(df, "latency_s")
            .fill_null(lit(0.0))
            .alias("__lat"),
    ]);
    let order = in_order(done.clone(), col("__series"))?;
    let distinct = |name: &str| -> Result<Vec<f64>> {
        let d = done
            .clone()
            .select([col(name)])
            .drop_nulls(None)
            .unique(None, Default::default())
            .sort([name], Default::default())
            .collect()
            .context("could not list the sweep's conditions")?;
        Ok(frames::numbers(&d, name)?.into_iter().flatten().collect())
    };
    let mut panels = Vec::new();
    // epoch time against bandwidth, one panel per latency ...
    for l in distinct("__lat")? {
        panels.extend(metric_panel(
            spec,
            &done,
            &order,
            format!("latency {} ms", l * 1e3),
            ("bandwidth (Mbit/s)", true),
            col("__lat").eq(lit(l)).and(col("__bw").is_not_null()),
            col("__bw") / lit(1e6),
            false,
        )?);
    }
    // ... and against latency, one panel per bandwidth
    for b in distinct("__bw")? {
        panels.extend(metric_panel(
            spec,
            &done,
            &order,
            format!("bandwidth {} Mbit/s", b / 1e6),
            ("latency (ms)", false),
            col("__bw").eq(lit(b)),
            col("__lat") * lit(1e3),
            false,
        )?);
    }
    if panels.is_empty() {
        bail!("a sweep figure needs runs at two or more bandwidths or latencies");
    }
    Ok(panels)
}

/// A scaling figure: runs.csv column `y` against column `x` (a metric or
/// a numeric grid key; both axes logarithmic when the spec asks), one
/// panel per value of `panels`, seeds averaged; the `bound` column, the
/// same for every series at an x (the time to read every model once), one
/// dashed line.
pub(crate) fn scaling_panels(spec: &FigureSpec, runs: &RunsFrame) -> Result<Vec<Panel>> {
    let df = &runs.df;
    let panel = match &spec.panels {
        Some(k) => frames::key(df, k),
        None => lit(""),
    };
    let x = match runs.keys().iter().any(|k| k == &spec.x) {
        true => frames::key_number(df, &spec.x),
        false => frames::number(df, &spec.x),
    };
    let done = valid_runs(spec, runs)?.with_columns([panel.alias("__panel"), x.alias("__xv")]);
    let order = in_order(done.clone(), col("__series"))?;
    let mut panels = Vec::new();
    for p in in_order(done.clone(), col("__panel"))? {
        let title = match &spec.panels {
            Some(k) => format!("{k} = {p}"),
            None => String::new(),
        };
        panels.extend(metric_panel(
            spec,
            &done,
            &order,
            title,
            (&column_label(&spec.x), spec.log_x),
            col("__panel").eq(lit(p.as_str())),
            col("__xv"),
            true,
        )?);
    }
    // none with fewer than two values of x (a one-size rerun): the
    // caller draws no figure
    Ok(panels)
}

/// The valid runs (health `ok`) of a runs.csv figure: the series key, `y` and the
/// bound as numbers (NaN where a run has none).
fn valid_runs(spec: &FigureSpec, runs: &RunsFrame) -> Result<LazyFrame> {
    let df = &runs.df;
    if df.column(&spec.series).is_err() {
        bail!("figure.series `{}` is not a grid key", spec.series);
    }
    let nan = |e: Expr| e.fill_null(lit(f64::NAN));
    Ok(runs.lazy().filter(frames::valid()).with_columns([
        frames::key(df, &spec.series).alias("__series"),
        nan(frames::number(df, &spec.y)).alias("__y"),
        nan(match &spec.bound {
            Some(b) => frames::number(df, b),
            None => lit(f64::NAN),
        })
        .alias("__bound"),
    ]))
}

/// One panel of a runs.csv figure: the runs of `done` that `keep`
/// selects, `x` against y, seeds averaged, a series per value of the
/// series key in `order` (and its bound dashed, or with `one_bound`, a
/// scaling figure's, the bound's mean over every series at each x as one
/// line, and no series without points); `None` with fewer than two values
/// of x.
#[allow(clippy::too_many_arguments)]
fn metric_panel(
    spec: &FigureSpec,
    done: &LazyFrame,
    order: &[String],
    title: String,
    (x_label, log_x): (&str, bool),
    keep: Expr,
    x: Expr,
    one_bound: bool,
) -> Result<Option<Panel>> {
    let points = done
        .clone()
        .filter(keep)
        .group_by([col("__series"), x.alias("__x")])
        .agg([
            col("__y").mean(),
            col("__y").std(1).alias("__sd"),
            col("__bound").mean(),
            len().cast(DataType::Float64).alias("__n"),
        ])
        .sort(["__x"], Default::default())
        .collect()
        .context("could not average the figure's runs")?;
    let c = Grouped::read(&points)?;
    let (x, b, n) = (&c.x, &c.b, &c.n);
    let mut xs: Vec<u64> = x.iter().flatten().map(|v| v.to_bits()).collect();
    xs.sort_unstable();
    xs.dedup();
    if xs.len() < 2 {
        return Ok(None);
    }
    let mut series = Vec::new();
    for name in order {
        let (measured, bound) = c.series(&points, name, crate::records::metrics::range(&spec.y))?;
        let runs = measured.runs;
        // a scaling panel lists only the series it has (a sweep keeps
        // every series' place)
        if one_bound && measured.points.is_empty() {
            continue;
        }
        series.push(measured);
        if let Some(b) = spec.bound.as_ref().filter(|_| !one_bound) {
            series.push(Series {
                label: format!("{name} ({})", bound_label(b)),
                runs,
                points: bound,
                band: Vec::new(),
                dashed: true,
            });
        }
    }
    if let Some(column) = spec.bound.as_ref().filter(|_| one_bound) {
        series.push(mean_bound(column, x, b, n));
    }
    Ok(Some(Panel {
        title,
        x_label: x_label.into(),
        y_label: column_label(&spec.y),
        log_x,
        series,
    }))
}

/// A metric panel's averaged points, a column each: x, mean y, mean
/// bound, runs, and y's standard deviation.
struct Grouped {
    x: Vec<Option<f64>>,
    y: Vec<Option<f64>>,
    b: Vec<Option<f64>>,
    n: Vec<Option<f64>>,
    sd: Vec<Option<f64>>,
}

impl Grouped {
    fn read(points: &DataFrame) -> Result<Self> {
        Ok(Self {
            x: frames::numbers(points, "__x")?,
            y: frames::numbers(points, "__y")?,
            b: frames::numbers(points, "__bound")?,
            n: frames::numbers(points, "__n")?,
            sd: frames::numbers(points, "__sd")?,
        })
    }

    /// Series `name`'s measured line with its band, and its bound's line.
    fn series(
        &self,
        points: &DataFrame,
        name: &str,
        range: crate::records::metrics::Range,
    ) -> Result<(Series, Vec<(f64, f64)>)> {
        let (mut line, mut bound, mut band, mut runs) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for i in 0..points.height() {
            if frames::text_at(points, "__series", i)? != *name {
                continue;
            }
            let xi = self.x[i].unwrap_or(f64::NAN);
            let ni = self.n[i].unwrap_or(0.0);
            runs = runs.max(ni as usize);
            if let Some(yi) = self.y[i].filter(|y| y.is_finite()) {
                line.push((xi, yi));
                if let Some(h) = half_width(self.sd[i], ni) {
                    let (lo, hi) = band_within(range, yi, h);
                    band.push((xi, lo, hi));
                }
            }
            bound.extend(self.b[i].filter(|y| y.is_finite()).map(|y| (xi, y)));
        }
        let measured = Series {
            label: name.to_string(),
            runs,
            points: line,
            band,
            dashed: false,
        };
        Ok((measured, bound))
    }
}

/// A scaling figure's one bound line: at each x, the mean of the bound
/// column `b` over every series' runs (`n` of them).
fn mean_bound(column: &str, x: &[Option<f64>], b: &[Option<f64>], n: &[Option<f64>]) -> Series {
    // every series' runs at an x, averaged
    let mut at: Vec<(f64, f64, usize)> = Vec::new();
    for (xi, bi) in x.iter().zip(b) {
        let (Some(xi), Some(bi)) = (*xi, bi.filter(|v| v.is_finite())) else {
            continue;
        };
        match at.iter_mut().find(|(v, _, _)| *v == xi) {
            Some((_, sum, k)) => {
                *sum += bi;
                *k += 1;
            }
            None => at.push((xi, bi, 1)),
        }
    }
    at.sort_by(|a, b| a.0.total_cmp(&b.0));
    Series {
        label: bound_label(column).to_string(),
        runs: n.iter().flatten().map(|&v| v as usize).sum(),
        points: at
            .into_iter()
            .map(|(xi, sum, k)| (xi, sum / k as f64))
            .collect(),
        band: Vec::new(),
        dashed: true,
    }
}

/// How a figure's bound column is named in its legend.
fn bound_label(column: &str) -> &str {
    match column {
        "wire_bound_epoch_s" => "wire bound",
        "stream_s" => "reading every model once",
        other => other,
    }
}

/// One row of a time-to-target table: a series of a panel, one target.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reach {
    pub panel: String,
    pub series: String,
    pub target: f64,
    /// Runs that reached it, of all the series' runs.
    pub reached: usize,
    pub runs: usize,
    /// Mean x at the first point reaching it over the runs that did, and
    /// the half-width of its 95% t interval.
    pub mean: Option<f64>,
    pub half: Option<f64>,
}

/// The time (the figure's x) each series takes to reach each of the
/// figure's `targets` of y: a run's first point of its [`smoothed`] curve
/// at or below the target (at or above for an accuracy), its mean over
/// the runs that reached it.
pub(crate) fn reaches(
    spec: &FigureSpec,
    curves: &[crate::records::curves::RunCurve],
) -> Vec<Reach> {
    let higher = crate::records::metrics::is_accuracy(&spec.y);
    let key = |r: &crate::records::results::RunRecord, k: Option<&String>| {
        k.and_then(|k| r.point.get(k)).cloned().unwrap_or_default()
    };
    let mut order: Vec<(String, String)> = Vec::new();
    for (r, _) in curves {
        let g = (key(r, spec.panels.as_ref()), key(r, Some(&spec.series)));
        if !order.contains(&g) {
            order.push(g);
        }
    }
    let mut out = Vec::new();
    for (panel, series) in order {
        let mine: Vec<&crate::records::curves::RunCurve> = curves
            .iter()
            .filter(|(r, _)| {
                key(r, spec.panels.as_ref()) == panel && key(r, Some(&spec.series)) == series
            })
            .collect();
        for &target in &spec.targets {
            // each run's curve under the figure's moving average:
            // claims.md's `faster_to` tests these same times
            let hits: Vec<f64> = mine
                .iter()
                .filter_map(|(_, p)| {
                    let p = smoothed(p, spec.smooth);
                    crate::records::curves::first_reach(&p, target, higher, &spec.x).ok()
                })
                .collect();
            let m = crate::report::stats::mean_ci(&hits, 0.05);
            out.push(Reach {
                panel: panel.clone(),
                series: series.clone(),
                target,
                reached: hits.len(),
                runs: mine.len(),
                mean: (m.n > 0).then_some(m.mean),
                half: m.half.is_finite().then_some(m.half),
            });
        }
    }
    out
}

/// targets.md: one row per panel and series, one column per target.
pub(crate) fn reaches_markdown(title: &str, spec: &FigureSpec, rows: &[Reach]) -> String {
    let mut s = format!(
        "# Time to target: {title}\n\n{} at the first logged point where {} (each run's own curve, as claims.md's `faster_to` claims test it; the figure draws a moving average over {} points) reaches each target ({} it): mean ± the half-width of the 95% t interval over the runs that reached it, and how many of the runs did.\n\n",
        axis_label(&spec.x),
        axis_label(&spec.y),
        spec.smooth.max(1),
        if crate::records::metrics::is_accuracy(&spec.y) {
            "at or above"
        } else {
            "at or below"
        }
    );
    let head: Vec<String> = spec
        .targets
        .iter()
        .map(|t| format!("{} {}", spec.y, tick(*t)))
        .collect();
    let panelled = spec.panels.is_some();
    s.push_str(&format!(
        "| {}{} | {} |\n|---|{}{}\n",
        if panelled { "panel | " } else { "" },
        spec.series,
        head.join(" | "),
        if panelled { "---|" } else { "" },
        "---|".repeat(head.len())
    ));
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        let g = (r.panel.as_str(), r.series.as_str());
        if seen.contains(&g) {
            continue;
        }
        seen.push(g);
        let cells: Vec<String> = rows
            .iter()
            .filter(|x| (x.panel.as_str(), x.series.as_str()) == g)
            .map(|x| match (x.mean, x.half) {
                (Some(m), Some(h)) => format!(
                    "{} ± {} ({}/{})",
                    crate::report::table::number(m),
                    crate::report::table::number(h),
                    x.reached,
                    x.runs
                ),
                (Some(m), None) => {
                    format!(
                        "{} ({}/{})",
                        crate::report::table::number(m),
                        x.reached,
                        x.runs
                    )
                }
                _ => format!("never (0/{})", x.runs),
            })
            .collect();
        s.push_str(&format!(
            "| {}{} | {} |\n",
            if panelled {
                format!("{} | ", r.panel)
            } else {
                String::new()
            },
            r.series,
            cells.join(" | ")
        ));
    }
    s
}

/// targets.csv: every row unrounded.
pub(crate) fn reaches_csv(rows: &[Reach]) -> Result<String> {
    let header = [
        "panel", "series", "target", "reached", "runs", "mean", "ci_half",
    ]
    .map(String::from);
    let opt = |x: Option<f64>| x.map_or_else(String::new, |x| x.to_string());
    let lines = rows.iter().map(|r| {
        vec![
            r.panel.clone(),
            r.series.clone(),
            r.target.to_string(),
            r.reached.to_string(),
            r.runs.to_string(),
            opt(r.mean),
            opt(r.half),
        ]
    });
    crate::records::results::csv_text(std::iter::once(header.to_vec()).chain(lines))
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

/// Series `i`'s marker at `at` (pixels from its anchor): a filled
/// circle, triangle, square or cross, then the same hollow.
fn marker<DB: DrawingBackend>(
    at: (i32, i32),
    i: usize,
    color: RGBColor,
) -> DynElement<'static, DB, (i32, i32)> {
    let style = if (i / 4).is_multiple_of(2) {
        color.filled()
    } else {
        color.stroke_width(2)
    };
    let (x, y) = at;
    match i % 4 {
        0 => Circle::new(at, 4, style).into_dyn(),
        1 => TriangleMarker::new(at, 5, style).into_dyn(),
        2 => Rectangle::new([(x - 4, y - 4), (x + 4, y + 4)], style).into_dyn(),
        _ => Cross::new(at, 4, color.stroke_width(2)).into_dyn(),
    }
}

/// An image format for figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    /// Its file extension, and its name on the command line.
    pub(crate) fn extension(self) -> &'static str {
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

pub(crate) fn register_font() -> Result<()> {
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
pub(crate) fn render(
    path: &Path,
    format: ImageFormat,
    title: &str,
    spec: &FigureSpec,
    panels: &[Panel],
) -> Result<()> {
    if panels.is_empty() {
        bail!(
            "no curves to plot: no run left step records in raw/, and no curves.parquet holds these runs"
        );
    }
    register_font()?;
    let size = size_for(panels.len(), title);
    // written beside the target and renamed, so a reader never sees half a
    // figure (the bitmap encoder picks its format from the last extension)
    // the name is taken exclusively first; the backends open it by name,
    // as the invoking user under sudo
    let (file, tmp) = crate::util::atomic::create_temp(path)?;
    drop(file);
    let drawn = crate::util::sudo::as_invoker(|| match format {
        ImageFormat::Svg => draw(
            SVGBackend::new(&tmp, size).into_drawing_area(),
            path,
            title,
            spec,
            panels,
        ),
        ImageFormat::Png => draw(
            BitMapBackend::new(&tmp, size).into_drawing_area(),
            path,
            title,
            spec,
            panels,
        ),
    });
    crate::util::atomic::finish(&tmp, path, drawn)
}

/// Draws the panels on any plotters backend.
/// Every series label of the figure (a bound counts as its measurement),
/// each panel's order kept: a label missing from the list goes right after
/// the label before it in its panel. A series keeps one colour and marker
/// in every panel, including panels where others are missing.
fn series_order(panels: &[Panel]) -> Vec<&str> {
    let mut order: Vec<&str> = Vec::new();
    for panel in panels {
        let mut at = 0;
        for s in &panel.series {
            let base = s.label.trim_end_matches(" (wire bound)");
            match order.iter().position(|l| *l == base) {
                Some(i) => at = i + 1,
                None => {
                    order.insert(at, base);
                    at += 1;
                }
            }
        }
    }
    order
}

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
    let color_of = series_order(panels);
    for (panel, area) in panels.iter().zip(&areas) {
        let ((x_min, x_max), (y_min, y_max)) = data_bounds(panel, spec);
        let mut chart = ChartBuilder::on(area);
        chart
            .caption(&panel.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60);
        let y_pad = (y_max - y_min) * 0.05;
        // a log axis needs positive values, and a decade to label
        let log_y = spec.log_y && y_min > 0.0 && y_max >= 10.0 * y_min;
        let log_x = panel.log_x && x_min > 0.0 && x_max >= 10.0 * x_min;
        let (x_min, x_max) = match spec.x_range {
            Some([lo, hi])
                if lo < hi && spec.kind == crate::experiment::manifest::FigureKind::Curves =>
            {
                (lo, hi)
            }
            _ => (x_min, x_max),
        };
        // the axes' ranges as drawn below; a linear x axis starts at 0
        // unless the range says otherwise
        let x_axis = match (log_x, spec.x_range) {
            (true, _) => [x_min * 0.9, x_max * 1.1],
            (false, Some(_)) => [x_min, x_max],
            (false, None) => [x_min.min(0.0), x_max],
        };
        let y_axis = if log_y {
            [y_min * 0.9, y_max * 1.1]
        } else {
            [y_min - y_pad, y_max + y_pad]
        };
        let corner = legend_corner(&panel.series, x_axis, y_axis, (log_x, log_y));
        let (x_lin, y_lin) = (x_axis[0]..x_axis[1], y_axis[0]..y_axis[1]);
        let how = PanelStyle {
            panel,
            color_of: &color_of,
            y_range: (y_min, y_max),
            corner,
        };
        let e = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        match (log_x, log_y) {
            (false, false) => chart
                .build_cartesian_2d(x_lin, y_lin)
                .map_err(e)
                .and_then(|c| draw_panel(c, &how)),
            (false, true) => chart
                .build_cartesian_2d(x_lin, y_lin.log_scale())
                .map_err(e)
                .and_then(|c| draw_panel(c, &how)),
            (true, false) => chart
                .build_cartesian_2d(x_lin.log_scale(), y_lin)
                .map_err(e)
                .and_then(|c| draw_panel(c, &how)),
            (true, true) => chart
                .build_cartesian_2d(x_lin.log_scale(), y_lin.log_scale())
                .map_err(e)
                .and_then(|c| draw_panel(c, &how)),
        }
        .map_err(err)?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

/// The x and y ranges `panel`'s points and bands span (y as the
/// figure's `y_range` sets it, cut at the lowest positive point on a log
/// axis); a range with no finite value is 0 to 1.
fn data_bounds(panel: &Panel, spec: &FigureSpec) -> ((f64, f64), (f64, f64)) {
    let xs = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0));
    let (x_min, x_max) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    // the bands are part of what is shown
    let ys = panel.series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.1)
            .chain(s.band.iter().flat_map(|b| [b.1, b.2]))
    });
    let (y_min, y_max) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), y| {
        (a.min(y), b.max(y))
    });
    // on a log axis a band reaching 0 or below is cut at the lowest point
    let floor = panel
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| *y > 0.0)
        .fold(f64::INFINITY, f64::min);
    let y_min = if spec.log_y && y_min <= 0.0 && floor.is_finite() {
        floor
    } else {
        y_min
    };
    let (y_min, y_max) = match spec.y_range {
        Some([lo, hi]) if lo < hi => (lo, hi),
        _ => (y_min, y_max),
    };
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
    ((x_min, x_max), (y_min, y_max))
}

/// How one panel is drawn on its chart.
struct PanelStyle<'p> {
    panel: &'p Panel,
    /// The series' labels in colour order ([`series_order`]).
    color_of: &'p [&'p str],
    /// The y range drawn: bands are cut to it.
    y_range: (f64, f64),
    /// Where the legend goes ([`legend_corner`]).
    corner: SeriesLabelPosition,
}

impl PanelStyle<'_> {
    /// The colour index of a series: a bound shares its measurement's.
    fn color(&self, s: &Series) -> usize {
        let base = s.label.trim_end_matches(" (wire bound)");
        self.color_of.iter().position(|c| *c == base).unwrap_or(0)
    }
}

/// What a series' legend entry adds when some of its points lie beyond
/// the y range drawn (`y_range`): which side, and whether all do.
fn off_range(s: &Series, (lo, hi): (f64, f64)) -> &'static str {
    let above = s.points.iter().filter(|p| p.1 > hi).count();
    let below = s.points.iter().filter(|p| p.1 < lo).count();
    let all = s.points.len();
    match (above, below) {
        (0, 0) => "",
        (a, 0) if a == all => " (above the range shown)",
        (_, 0) => " (partly above the range shown)",
        (0, b) if b == all => " (below the range shown)",
        _ => " (partly beyond the range shown)",
    }
}

/// Series `s`'s dash pattern (on, off pixels), by its colour index `i`:
/// solid, dashed, dotted, long dashes in turn, so lines that lie on each
/// other stay apart; a bound is dashed.
fn dash_of(s: &Series, i: usize) -> Option<(u32, u32)> {
    if s.dashed {
        return Some((6, 4));
    }
    match i % 4 {
        0 => None,
        1 => Some((8, 4)),
        2 => Some((2, 3)),
        _ => Some((14, 5)),
    }
}

/// The points of the `k`-th of `n` series that get a marker: eight along
/// it, each series shifted by its share of the spacing, so no two series
/// of equal length put a marker on the same point.
fn marker_points(len: usize, k: usize, n: usize) -> impl Iterator<Item = usize> {
    let every = (len / 8).max(1);
    let phase = (every * (2 * k + 1)) / (2 * n.max(1));
    (phase..len).step_by(every)
}

/// A panel's axis: f64 values, labelled by their own formatter (linear or
/// log). One name for the bound every drawing step below needs.
trait Axis: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64> {}

impl<A: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>> Axis for A {}

/// Draws the panel's mesh, bands, series and legend on `chart`: the bands
/// first, under every line; then every line, and every marker above all
/// of them, so that a series under another still shows its markers.
fn draw_panel<'a, DB, X, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>,
    how: &PanelStyle<'_>,
) -> std::result::Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Axis,
    Y: Axis,
{
    let panel = how.panel;
    chart
        .configure_mesh()
        .x_labels(8)
        .y_labels(8)
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .x_label_formatter(&|v| tick(*v))
        .y_label_formatter(&|v| tick(*v))
        .label_style(("sans-serif", 13))
        .draw()
        .map_err(|e| e.to_string())?;
    draw_bands(&mut chart, how)?;
    draw_lines(&mut chart, how)?;
    draw_beyond(&mut chart, how)?;
    draw_markers(&mut chart, how)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .position(how.corner.clone())
        .draw()
        .map_err(|e| e.to_string())
}

/// A series' points, those beyond the y range drawn on its edge (and
/// marked by [`draw_beyond`]).
fn shown(s: &Series, (y_lo, y_hi): (f64, f64)) -> Vec<(f64, f64)> {
    s.points
        .iter()
        .map(|p| (p.0, p.1.clamp(y_lo, y_hi)))
        .collect()
}

/// Each series' band (its seeds' spread), filled, clipped to the y range.
fn draw_bands<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    how: &PanelStyle<'_>,
) -> std::result::Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Axis,
    Y: Axis,
{
    let (y_lo, y_hi) = how.y_range;
    let clip = |y: f64| y.clamp(y_lo, y_hi);
    for s in how.panel.series.iter().filter(|s| s.band.len() >= 2) {
        let outline: Vec<(f64, f64)> = s
            .band
            .iter()
            .map(|b| (b.0, clip(b.2)))
            .chain(s.band.iter().rev().map(|b| (b.0, clip(b.1))))
            .collect();
        let fill = COLORS[how.color(s) % COLORS.len()].mix(0.18).filled();
        chart
            .draw_series(std::iter::once(Polygon::new(outline, fill)))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Each series' line, in its colour and dash pattern, with its legend entry.
fn draw_lines<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    how: &PanelStyle<'_>,
) -> std::result::Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Axis,
    Y: Axis,
{
    for s in &how.panel.series {
        let i = how.color(s);
        let color = COLORS[i % COLORS.len()];
        let style = color.stroke_width(2);
        let dash = dash_of(s, i);
        let points = shown(s, how.y_range);
        let drawn = match dash {
            None => chart.draw_series(LineSeries::new(points, style)),
            Some((on, off)) => chart.draw_series(DashedLineSeries::new(points, on, off, style)),
        };
        let drawn = drawn.map_err(|e| e.to_string())?;
        drawn
            .label(format!("{}{}", s.label, off_range(s, how.y_range)))
            .legend(move |(x, y)| {
                let end = if dash.is_some() { x + 8 } else { x + 18 };
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, 0), (end - x, 0)], style)
                    + marker((9, 0), i, color)
            });
    }
    Ok(())
}

/// A point beyond the y range drawn: an open triangle on the edge it
/// crossed, so a series pinned there is not read as a value.
fn draw_beyond<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    how: &PanelStyle<'_>,
) -> std::result::Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Axis,
    Y: Axis,
{
    let (y_lo, y_hi) = how.y_range;
    for s in &how.panel.series {
        let color = COLORS[how.color(s) % COLORS.len()];
        let beyond: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter(|p| p.1 > y_hi || p.1 < y_lo)
            .map(|p| (p.0, p.1.clamp(y_lo, y_hi)))
            .collect();
        let every = (beyond.len() / 8).max(1);
        chart
            .draw_series(beyond.iter().step_by(every).map(|p| {
                let up = p.1 >= y_hi;
                EmptyElement::at(*p)
                    + TriangleMarker::new((0, if up { 4 } else { -4 }), 6, color.stroke_width(2))
            }))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The markers of every solid series, each placed where no other series
/// has one (its own phase).
fn draw_markers<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    how: &PanelStyle<'_>,
) -> std::result::Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Axis,
    Y: Axis,
{
    let n = how.panel.series.len().max(1);
    for (k, s) in how
        .panel
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.dashed)
    {
        let i = how.color(s);
        let color = COLORS[i % COLORS.len()];
        let points = shown(s, how.y_range);
        chart
            .draw_series(
                marker_points(points.len(), k, n)
                    .map(|at| EmptyElement::at(points[at]) + marker((0, 0), i, color)),
            )
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The corner of the plot area that the fewest lines and bands cross, for
/// the legend: upper right unless data lie there. Each line is sampled
/// along its segments, in the axes' own (linear or log) coordinates.
fn legend_corner(
    series: &[Series],
    x: [f64; 2],
    y: [f64; 2],
    (log_x, log_y): (bool, bool),
) -> SeriesLabelPosition {
    let to = |v: f64, [lo, hi]: [f64; 2], log: bool| {
        let f = |v: f64| if log { v.max(1e-300).ln() } else { v };
        let (lo, hi) = (f(lo), f(hi));
        if hi > lo {
            (f(v) - lo) / (hi - lo)
        } else {
            0.5
        }
    };
    let mut samples = Vec::new();
    for s in series {
        let band = s.band.iter().flat_map(|b| [(b.0, b.1), (b.0, b.2)]);
        let lines = [s.points.clone(), band.collect::<Vec<_>>()];
        for (k, pts) in lines.iter().enumerate() {
            let pts: Vec<(f64, f64)> = pts
                .iter()
                .map(|p| (to(p.0, x, log_x), to(p.1, y, log_y)))
                .collect();
            // band edges come in lo/hi pairs: join each edge along x
            let step = if k == 1 { 2 } else { 1 };
            for edge in 0..step {
                let edge: Vec<_> = pts.iter().skip(edge).step_by(step).collect();
                samples.extend(edge.first().map(|p| **p));
                for w in edge.windows(2) {
                    for i in 1..=16 {
                        let t = f64::from(i) / 16.0;
                        samples.push((
                            w[0].0 + (w[1].0 - w[0].0) * t,
                            w[0].1 + (w[1].1 - w[0].1) * t,
                        ));
                    }
                }
            }
        }
    }
    // the legend box covers about this share of the area in each direction
    let (wide, tall) = (0.4, 0.4);
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let mut best = (usize::MAX, SeriesLabelPosition::UpperRight);
    for (corner, right, upper) in corners {
        let hits = samples
            .iter()
            .filter(|(px, py)| {
                let in_x = if right {
                    *px >= 1.0 - wide
                } else {
                    *px <= wide
                };
                let in_y = if upper {
                    *py >= 1.0 - tall
                } else {
                    *py <= tall
                };
                in_x && in_y
            })
            .count();
        if hits < best.0 {
            best = (hits, corner);
        }
    }
    best.1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::manifest::FigureKind;
    use crate::records::curves::tests::log;
    use crate::records::curves::{curve, write_curves_csv};
    use crate::records::results::RunRecord;
    use std::collections::BTreeMap;

    #[test]
    fn the_legend_goes_to_the_corner_no_line_crosses() {
        let line = |pts: &[(f64, f64)]| Series {
            label: "a".into(),
            runs: 1,
            points: pts.to_vec(),
            band: vec![],
            dashed: false,
        };
        let corner = |s: &[Series]| legend_corner(s, [0.0, 8.0], [0.0, 1.0], (false, false));
        // rising to the upper right: the legend moves to the lower right
        let rising = [line(&[(1.0, 0.2), (2.0, 0.9), (8.0, 0.95)])];
        assert!(matches!(corner(&rising), SeriesLabelPosition::LowerRight));
        // a falling loss curve leaves the upper right free
        let falling = [line(&[(0.0, 1.0), (1.0, 0.3), (8.0, 0.1)])];
        assert!(matches!(corner(&falling), SeriesLabelPosition::UpperRight));
        // a band counts as data too
        let mut banded = line(&[(0.0, 0.5), (8.0, 0.5)]);
        banded.band = vec![(0.0, 0.45, 0.55), (8.0, 0.0, 1.0)];
        assert!(matches!(
            corner(&[banded]),
            SeriesLabelPosition::UpperLeft | SeriesLabelPosition::LowerLeft
        ));
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

    /// A series keeps its colour in a panel where another is missing (all
    /// of DCD's runs diverged at 2 bits in convex).
    #[test]
    fn a_series_keeps_its_place_across_panels() {
        let panel = |labels: &[&str]| Panel {
            title: String::new(),
            x_label: String::new(),
            y_label: String::new(),
            log_x: false,
            series: labels
                .iter()
                .map(|l| Series {
                    label: (*l).into(),
                    runs: 1,
                    points: Vec::new(),
                    band: Vec::new(),
                    dashed: false,
                })
                .collect(),
        };
        let panels = [
            panel(&["d-psgd", "choco", "ecd", "moniqua"]),
            panel(&["d-psgd", "choco", "dcd", "ecd", "moniqua (wire bound)"]),
        ];
        assert_eq!(
            series_order(&panels),
            ["d-psgd", "choco", "dcd", "ecd", "moniqua"]
        );
    }

    #[test]
    fn bands_stay_inside_the_metrics_range() {
        use crate::records::metrics::{Range, range};
        assert_eq!(range("avg_test_loss"), Range::Positive);
        assert_eq!(range("avg_test_accuracy"), Range::Fraction);
        assert_eq!(range("objective"), Range::Real);
        // figure 2(a)'s case: a test loss whose symmetric band went below 0
        let (lo, hi) = band_within(Range::Positive, 0.6, 1.4);
        assert!(lo > 0.0 && hi > 0.6 + 1.4, "{lo} {hi}");
        let (lo, hi) = band_within(Range::Fraction, 0.95, 0.1);
        assert!(lo < 0.95 && hi < 1.0, "{lo} {hi}");
        assert_eq!(band_within(Range::Real, -1.0, 2.0), (-3.0, 1.0));
        // a small interval is nearly the symmetric one
        let (lo, hi) = band_within(Range::Positive, 10.0, 0.1);
        assert!((lo - 9.9).abs() < 1e-3 && (hi - 10.1).abs() < 1e-3);
        // at the edge: cut
        assert_eq!(band_within(Range::Fraction, 1.0, 0.2), (0.8, 1.0));
    }

    #[test]
    fn seeds_average_into_a_series() {
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
            title: None,
            kind: FigureKind::Curves,
            bound: None,
            x: "wall_s".into(),
            y: "train_loss".into(),
            panels: Some("network".into()),
            series: "algorithm".into(),
            smooth: 2,
            log_y: false,
            log_x: false,
            x_range: None,
            y_range: None,
            targets: Vec::new(),
            also_x: Vec::new(),
            scale: None,
        };
        let frame = CurvesFrame::new("train_loss", &curves).unwrap();
        let p = panels(&spec, &frame).unwrap();
        insta::assert_debug_snapshot!("figure_series", p);
        // the band of a loss (positive): the t interval of log m, m = 2,
        // half-width t(1) * sd / sqrt(2) = 12.7 for the values 3 and 1,
        // so 2 e^(-h/2) to 2 e^(h/2), where 2 -+ h would reach -10.7
        let half = 12.7062 * 2f64.sqrt() / 2f64.sqrt();
        let (x, lo, hi) = p[0].series[0].band[0];
        let (want_lo, want_hi) = (2.0 * (-half / 2.0).exp(), 2.0 * (half / 2.0).exp());
        assert!(x == 2.0 && (lo - want_lo).abs() < 1e-5 && (hi / want_hi - 1.0).abs() < 1e-4);
        assert!(
            p.iter()
                .flat_map(|p| &p.series)
                .flat_map(|s| &s.band)
                .all(|b| b.1 > 0.0)
        );
        assert!(p[0].series[1].band.is_empty(), "one run: no band");
        // time to a target: both moniqua runs first reach 1.5 at 3 s, the
        // d-psgd runs never do
        let timed = FigureSpec {
            targets: vec![1.5],
            ..spec.clone()
        };
        let r = reaches(&timed, &curves);
        assert_eq!(r.len(), 3);
        assert_eq!(
            (r[0].series.as_str(), r[0].mean, r[0].reached, r[0].runs),
            ("moniqua", Some(3.0), 2, 2)
        );
        assert_eq!((r[1].reached, r[1].mean), (0, None));
        let md = reaches_markdown("T", &timed, &r);
        assert!(md.contains("| 1mbit | moniqua | 3.000 ± 0 (2/2) |"), "{md}");
        assert!(md.contains("| 1mbit | d-psgd | never (0/1) |"), "{md}");
        // an x range shows only its part of each series
        let first = FigureSpec {
            x_range: Some([0.0, 4.0]),
            ..spec.clone()
        };
        let cut = panels(&first, &frame).unwrap();
        assert_eq!(cut[0].series[0].points.len(), 2);
        assert!(cut[0].series[0].band.iter().all(|b| b.0 <= 4.0));
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
        assert!(csv.starts_with("run_id,algorithm,network,seed,iteration,epoch,wall_s,bytes,train_loss\na,moniqua,1mbit,0,0,0,1,0,3\n"), "{csv}");
        let bad = FigureSpec {
            series: "colour".into(),
            ..spec
        };
        assert!(
            panels(&bad, &frame)
                .unwrap_err()
                .to_string()
                .contains("figure.series `colour`")
        );
    }

    #[test]
    fn sweeps_make_a_panel_per_fixed_latency_and_bandwidth() {
        use crate::experiment::condition::Condition;
        use crate::records::metrics::Cell;
        use crate::records::results::condition_cells;

        let row = |alg: &str, net: &str, seed: &str, t: f64, bound: f64| RunRecord {
            run_id: format!("{alg}{net}{seed}"),
            point: [("algorithm", alg), ("network", net), ("seed", seed)]
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            metrics: [("epoch_time_s", t), ("wire_bound_epoch_s", bound)]
                .iter()
                .map(|(k, v)| ((*k).into(), Cell::Number(Some(*v))))
                .chain([("status".into(), Cell::Text("completed".into()))])
                .chain(condition_cells(Condition::from_label(net).as_ref()))
                .collect(),
        };
        let mut failed = row("moniqua", "10mbit/5ms", "0", 1.0, 1.0);
        failed
            .metrics
            .insert("status".into(), Cell::Text("failed".into()));
        let rows = vec![
            // only completed runs count: no panel of 5 ms has moniqua
            failed,
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
            title: None,
            kind: FigureKind::Sweep,
            x: String::new(),
            y: "epoch_time_s".into(),
            bound: Some("wire_bound_epoch_s".into()),
            panels: None,
            series: "algorithm".into(),
            smooth: 1,
            log_y: true,
            log_x: false,
            x_range: None,
            y_range: None,
            targets: Vec::new(),
            also_x: Vec::new(),
            scale: None,
        };
        let p = sweep_panels(&spec, &RunsFrame::new(&rows).unwrap()).unwrap();
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

    /// A scaling figure: a panel per value of the panel key, each series
    /// y against x with seeds averaged and points in x order, and the bound
    /// one dashed line averaged over the series at each x.
    #[test]
    fn scaling_figures_draw_y_against_x_with_one_reference() {
        use crate::records::metrics::Cell;
        let row = |alg: &str, bits: &str, n: &str, seed: &str, x: f64, t: f64, s: f64| RunRecord {
            run_id: format!("{alg}{bits}{n}{seed}"),
            point: [
                ("algorithm", alg),
                ("bits", bits),
                ("workers", n),
                ("seed", seed),
            ]
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect(),
            metrics: [("coordinates", x), ("iteration_s", t), ("stream_s", s)]
                .iter()
                .map(|(k, v)| ((*k).into(), Cell::Number(Some(*v))))
                .chain([("status".into(), Cell::Text("completed".into()))])
                .collect(),
        };
        let rows = vec![
            row("moniqua", "1", "64", "0", 6.4e6, 0.004, 0.002),
            row("moniqua", "1", "8", "0", 8e5, 0.0006, 0.0002),
            row("moniqua", "1", "8", "1", 8e5, 0.0008, 0.0004),
            row("d-psgd", "1", "8", "0", 8e5, 0.002, 0.0003),
            row("d-psgd", "1", "64", "0", 6.4e6, 0.02, 0.002),
            // one size only: no panel
            row("moniqua", "8", "8", "0", 8e5, 0.001, 0.0003),
            // two sizes of one series: a panel of it alone
            row("choco", "2", "8", "0", 8e5, 0.001, 0.0003),
            row("choco", "2", "64", "0", 6.4e6, 0.01, 0.003),
        ];
        let spec = FigureSpec {
            title: None,
            kind: FigureKind::Scaling,
            x: "coordinates".into(),
            y: "iteration_s".into(),
            bound: Some("stream_s".into()),
            panels: Some("bits".into()),
            series: "algorithm".into(),
            smooth: 1,
            log_y: true,
            log_x: true,
            x_range: None,
            y_range: None,
            targets: Vec::new(),
            also_x: Vec::new(),
            scale: None,
        };
        let p = scaling_panels(&spec, &RunsFrame::new(&rows).unwrap()).unwrap();
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].title, "bits = 1");
        let labels: Vec<&str> = p[1].series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["choco", "reading every model once"]);
        let labels: Vec<&str> = p[0].series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["moniqua", "d-psgd", "reading every model once"]);
        let close = |a: &[(f64, f64)], b: &[(f64, f64)]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(p, q)| p.0 == q.0 && (p.1 - q.1).abs() < 1e-12)
        };
        assert!(
            close(&p[0].series[0].points, &[(8e5, 0.0007), (6.4e6, 0.004)]),
            "{p:?}"
        );
        assert!(
            close(&p[0].series[1].points, &[(8e5, 0.002), (6.4e6, 0.02)]),
            "{p:?}"
        );
        // 8e5: moniqua's seeds average 0.0003, d-psgd's 0.0003; 6.4e6: 0.002
        assert!(
            close(&p[0].series[2].points, &[(8e5, 0.0003), (6.4e6, 0.002)]),
            "{p:?}"
        );
        assert!(p[0].series[2].dashed && p[0].log_x);
        // against a numeric grid key: the series' points at each bits
        let by_bits = FigureSpec {
            title: None,
            x: "bits".into(),
            bound: None,
            panels: Some("workers".into()),
            log_x: false,
            ..spec.clone()
        };
        let p = scaling_panels(&by_bits, &RunsFrame::new(&rows).unwrap()).unwrap();
        assert_eq!(p[0].title, "workers = 64");
        // axes in words; a key without words is named as it is, never as
        // another metric
        assert_eq!(p[0].x_label, "bits per coordinate");
        assert_eq!(p[0].y_label, "seconds per iteration (host)");
        assert_eq!(column_label("bytes"), "bytes sent, all workers");
        assert_eq!(axis_label("bytes"), "bytes sent per worker");
        assert_eq!(axis_label("gamma"), "gamma");
        assert!(
            close(&p[0].series[0].points, &[(1.0, 0.004)]) && p[0].series[1].label == "d-psgd",
            "{p:?}"
        );
        assert!(
            close(&p[1].series[0].points, &[(1.0, 0.0007), (8.0, 0.001)]),
            "{p:?}"
        );
        assert_eq!(
            check_spec(
                &by_bits,
                &["bits".into(), "workers".into(), "algorithm".into()]
            ),
            Ok(())
        );
        let bad = FigureSpec {
            title: None,
            x: "nothing".into(),
            ..by_bits
        };
        let (path, why) =
            check_spec(&bad, &["bits".into(), "workers".into(), "algorithm".into()]).unwrap_err();
        assert_eq!(path, "figure.x");
        assert!(
            why.contains("or a grid key (bits, workers, algorithm)"),
            "{why}"
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

    /// A one-panel figure of the train loss per iteration.
    fn train_loss_by_iteration(y_range: Option<[f64; 2]>) -> FigureSpec {
        FigureSpec {
            title: None,
            kind: FigureKind::Curves,
            bound: None,
            x: "iteration".into(),
            y: "train_loss".into(),
            panels: None,
            series: "algorithm".into(),
            smooth: 1,
            log_y: false,
            log_x: false,
            x_range: None,
            y_range,
            targets: Vec::new(),
            also_x: Vec::new(),
            scale: None,
        }
    }

    /// Figure 1's defect: series that lie on each other (DCD and ECD under
    /// CHOCO, DeepSqueeze and Moniqua). Five series with the same points:
    /// each still shows many pixels of its own colour (its markers, on top
    /// of every line at places of its own), not just its legend entry.
    #[test]
    fn no_series_hides_under_another() {
        let points: Vec<(f64, f64)> = (0..200).map(|i| (i as f64, i as f64 / 200.0)).collect();
        let series: Vec<Series> = (0..5)
            .map(|k| Series {
                label: format!("s{k}"),
                runs: 1,
                points: points.clone(),
                band: Vec::new(),
                dashed: false,
            })
            .collect();
        let panel = Panel {
            title: "p".into(),
            x_label: "iteration".into(),
            y_label: "train loss".into(),
            log_x: false,
            series,
        };
        let spec = train_loss_by_iteration(None);
        let path = std::env::temp_dir().join(format!("repro-hidden-{}.png", std::process::id()));
        render(&path, ImageFormat::Png, "t", &spec, &[panel]).unwrap();
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        let px: Vec<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
        let counts: Vec<usize> = COLORS[..5]
            .iter()
            .map(|c| px.iter().filter(|p| p == &&[c.0, c.1, c.2]).count())
            .collect();
        // a legend entry alone is under 100 pixels
        assert!(
            counts.iter().all(|&c| c >= 250),
            "pixels of each series' colour: {counts:?}"
        );
        let _ = std::fs::remove_file(&path);
    }

    /// The quickstart's defect: DCD and ECD above `y_range`, pinned on the
    /// top edge as if that were their value. Their legend says so, and
    /// open triangles mark the edge.
    #[test]
    fn values_beyond_the_y_range_are_marked() {
        let series = |label: &str, ys: &[f64]| Series {
            label: label.into(),
            runs: 1,
            points: ys.iter().enumerate().map(|(i, y)| (i as f64, *y)).collect(),
            band: Vec::new(),
            dashed: false,
        };
        let s = [
            series("inside", &[0.5, 0.4, 0.3]),
            series("partly", &[3.0, 0.9, 0.8]),
            series("above", &[5.0, 4.0, 3.0]),
        ];
        assert_eq!(off_range(&s[0], (0.0, 1.0)), "");
        assert_eq!(
            off_range(&s[1], (0.0, 1.0)),
            " (partly above the range shown)"
        );
        assert_eq!(off_range(&s[2], (0.0, 1.0)), " (above the range shown)");
        let panel = Panel {
            title: "p".into(),
            x_label: "iteration".into(),
            y_label: "train loss".into(),
            log_x: false,
            series: s.to_vec(),
        };
        let spec = train_loss_by_iteration(Some([0.0, 1.0]));
        let path = std::env::temp_dir().join(format!("repro-clipped-{}.svg", std::process::id()));
        render(&path, ImageFormat::Svg, "t", &spec, &[panel]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("above (above the range shown)"), "{svg}");
        assert!(svg.contains("partly (partly above the range shown)"));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_fraction_is_drawn_in_percent_as_tables_show_it() {
        let panel = Panel {
            title: String::new(),
            x_label: "bits".into(),
            y_label: axis_label("avg_test_accuracy"),
            log_x: false,
            series: vec![Series {
                label: "a".into(),
                runs: 2,
                points: vec![(1.0, 0.85)],
                band: vec![(1.0, 0.8, 0.9)],
                dashed: false,
            }],
        };
        let p = scaled(
            panel,
            crate::report::table::factor(None, "avg_test_accuracy"),
        );
        assert_eq!(p.y_label, "test accuracy of the averaged model (%)");
        assert_eq!(p.series[0].points, [(1.0, 85.0)]);
        assert_eq!(p.series[0].band, [(1.0, 80.0, 90.0)]);
    }

    #[test]
    fn time_axes_name_the_clock_of_the_backend() {
        use crate::experiment::manifest::Backend;
        let panel = Panel {
            title: String::new(),
            x_label: axis_label("wall_s"),
            y_label: axis_label("train_loss"),
            log_x: false,
            series: Vec::new(),
        };
        assert_eq!(
            on_clock_of(panel.clone(), Backend::Mpi).x_label,
            "wall-clock time (s)"
        );
        let local = on_clock_of(panel.clone(), Backend::InProcess);
        assert!(local.x_label.starts_with("virtual time") && local.y_label == "train loss");
        assert!(
            on_clock_of(panel, Backend::Sim)
                .x_label
                .contains("simulated")
        );
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
