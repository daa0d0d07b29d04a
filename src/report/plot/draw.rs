//! Drawing: panels as SVG and PNG with plotters, the font compiled in.

use super::*;

pub(super) const COLORS: [RGBColor; 8] = [
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
pub(super) fn marker<DB: DrawingBackend>(
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
pub(super) static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

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
pub(super) fn layout(panels: usize) -> (usize, usize, (u32, u32)) {
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
pub(super) fn size_for(panels: usize, title: &str) -> (u32, u32) {
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
pub(super) fn series_order(panels: &[Panel]) -> Vec<&str> {
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

pub(super) fn draw<DB: DrawingBackend>(
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
pub(super) fn data_bounds(panel: &Panel, spec: &FigureSpec) -> ((f64, f64), (f64, f64)) {
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
pub(super) struct PanelStyle<'p> {
    pub(super) panel: &'p Panel,
    /// The series' labels in colour order ([`series_order`]).
    pub(super) color_of: &'p [&'p str],
    /// The y range drawn: bands are cut to it.
    pub(super) y_range: (f64, f64),
    /// Where the legend goes ([`legend_corner`]).
    pub(super) corner: SeriesLabelPosition,
}

impl PanelStyle<'_> {
    /// The colour index of a series: a bound shares its measurement's.
    pub(super) fn color(&self, s: &Series) -> usize {
        let base = s.label.trim_end_matches(" (wire bound)");
        self.color_of.iter().position(|c| *c == base).unwrap_or(0)
    }
}

/// What a series' legend entry adds when some of its points lie beyond
/// the y range drawn (`y_range`): which side, and whether all do.
pub(super) fn off_range(s: &Series, (lo, hi): (f64, f64)) -> &'static str {
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
pub(super) fn dash_of(s: &Series, i: usize) -> Option<(u32, u32)> {
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
pub(super) fn marker_points(len: usize, k: usize, n: usize) -> impl Iterator<Item = usize> {
    let every = (len / 8).max(1);
    let phase = (every * (2 * k + 1)) / (2 * n.max(1));
    (phase..len).step_by(every)
}

/// A panel's axis: f64 values, labelled by their own formatter (linear or
/// log). One name for the bound every drawing step below needs.
pub(super) trait Axis:
    Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>
{
}

impl<A: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>> Axis for A {}

/// Draws the panel's mesh, bands, series and legend on `chart`: the bands
/// first, under every line; then every line, and every marker above all
/// of them, so that a series under another still shows its markers.
pub(super) fn draw_panel<'a, DB, X, Y>(
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
pub(super) fn shown(s: &Series, (y_lo, y_hi): (f64, f64)) -> Vec<(f64, f64)> {
    s.points
        .iter()
        .map(|p| (p.0, p.1.clamp(y_lo, y_hi)))
        .collect()
}

/// Each series' band (its seeds' spread), filled, clipped to the y range.
pub(super) fn draw_bands<'a, DB, X, Y>(
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
pub(super) fn draw_lines<'a, DB, X, Y>(
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
pub(super) fn draw_beyond<'a, DB, X, Y>(
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
pub(super) fn draw_markers<'a, DB, X, Y>(
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
pub(super) fn legend_corner(
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
