//! From frames to panels: each series of each panel, seeds averaged by
//! group-by, for curves, sweeps, scaling and metric figures.

use super::*;

/// The distinct values of String expression `e` over `lf`, in the order
/// the rows first have them.
pub(super) fn in_order(lf: LazyFrame, e: Expr) -> Result<Vec<String>> {
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
pub(super) fn curve_series(
    spec: &FigureSpec,
    line: &DataFrame,
    label: &str,
    runs: f64,
) -> Result<Series> {
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
pub(super) fn check_curve_axes(spec: &FigureSpec) -> Result<()> {
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
pub(super) fn mean_points(
    spec: &FigureSpec,
    curves: &CurvesFrame,
    panel: &Expr,
    series: &Expr,
) -> LazyFrame {
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
pub(super) fn averaged_series(
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
pub(super) fn valid_runs(spec: &FigureSpec, runs: &RunsFrame) -> Result<LazyFrame> {
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
pub(super) fn metric_panel(
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
pub(super) struct Grouped {
    pub(super) x: Vec<Option<f64>>,
    pub(super) y: Vec<Option<f64>>,
    pub(super) b: Vec<Option<f64>>,
    pub(super) n: Vec<Option<f64>>,
    pub(super) sd: Vec<Option<f64>>,
}

impl Grouped {
    pub(super) fn read(points: &DataFrame) -> Result<Self> {
        Ok(Self {
            x: frames::numbers(points, "__x")?,
            y: frames::numbers(points, "__y")?,
            b: frames::numbers(points, "__bound")?,
            n: frames::numbers(points, "__n")?,
            sd: frames::numbers(points, "__sd")?,
        })
    }

    /// Series `name`'s measured line with its band, and its bound's line.
    pub(super) fn series(
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
pub(super) fn mean_bound(
    column: &str,
    x: &[Option<f64>],
    b: &[Option<f64>],
    n: &[Option<f64>],
) -> Series {
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
pub(super) fn bound_label(column: &str) -> &str {
    match column {
        "wire_bound_epoch_s" => "wire bound",
        "stream_s" => "reading every model once",
        other => other,
    }
}
