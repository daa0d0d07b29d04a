//! What a tuning search saw, drawn: one figure per method and setting,
//! one panel per tuned value, the validation score of every tuning run
//! over that value (its health and its premise shown), each
//! configuration's mean, and the choice marked. tuning.md embeds them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use plotters::prelude::*;

use crate::records::health::{Health, Kind, Premise};

/// One tuning run as its figure draws it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunPoint {
    /// The run's configuration: its value of each tuned axis.
    pub at: BTreeMap<String, f64>,
    /// Its score as the choice counted it (a failed run with what it
    /// achieved), scaled.
    pub value: f64,
    pub health: Health,
    pub premise: Option<Premise>,
}

/// One configuration's mean score.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ConfigPoint {
    pub at: BTreeMap<String, f64>,
    pub mean: f64,
    pub chosen: bool,
}

/// One setting's search.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SearchView {
    /// The setting, "bits=1 method=moniqua".
    pub setting: String,
    /// The y axis: the metric and its unit.
    pub y_label: String,
    /// The tuned axes, each drawn on a log scale or not.
    pub axes: Vec<(String, bool)>,
    pub runs: Vec<RunPoint>,
    pub configs: Vec<ConfigPoint>,
    /// Chance, scaled, where the metric is an accuracy.
    pub chance: Option<f64>,
}

impl SearchView {
    /// The figure's file name: the setting with only letters, digits,
    /// dots and dashes ("bits-1_method-moniqua.svg").
    pub(crate) fn file_name(&self) -> String {
        let slug: String = self
            .setting
            .chars()
            .map(|c| match c {
                '=' => '-',
                c if c.is_ascii_alphanumeric() || c == '.' || c == '-' => c,
                _ => '_',
            })
            .collect();
        format!("{slug}.svg")
    }
}

/// The directory of the figures, beside tuning.md.
pub(crate) const DIR: &str = "tuning-figures";

/// Draws each view into `out/tuning-figures/`, replacing what an earlier
/// search drew there; each setting drawn and its path, relative to `out`.
pub(crate) fn write(out: &Path, views: &[SearchView]) -> Result<Vec<(String, PathBuf)>> {
    let dir = out.join(DIR);
    if dir.is_dir() {
        std::fs::remove_dir_all(&dir)?;
    }
    if views.is_empty() {
        return Ok(Vec::new());
    }
    crate::util::atomic::create_dir_all(&dir)?;
    let mut written = Vec::new();
    for v in views.iter().filter(|v| !v.axes.is_empty()) {
        let rel = Path::new(DIR).join(v.file_name());
        render(&out.join(&rel), v)?;
        written.push((v.setting.clone(), rel));
    }
    Ok(written)
}

/// The colour and word of a run's health.
fn health_style(h: Health) -> (RGBColor, &'static str) {
    match h.kind() {
        Kind::Ok => (RGBColor(31, 119, 180), "ok run"),
        Kind::MethodFailed => (RGBColor(214, 39, 40), "failed run (counted)"),
        Kind::NotTested => (RGBColor(127, 127, 127), "run that tested nothing"),
    }
}

/// Draws one view as an SVG: one panel per tuned axis, side by side.
fn render(path: &Path, v: &SearchView) -> Result<()> {
    crate::report::plot::register_font()?;
    let panels = v.axes.len().max(1);
    let size = (460 * panels as u32, 420);
    let (file, tmp) = crate::util::atomic::create_temp(path)?;
    drop(file);
    let drawn = crate::util::sudo::as_invoker(|| {
        let root = SVGBackend::new(&tmp, size).into_drawing_area();
        draw(root, v).map_err(|e| anyhow::anyhow!("could not draw {}: {e}", path.display()))
    });
    crate::util::atomic::finish(&tmp, path, drawn)
}

/// A value on an axis drawn in log10 where `log`.
fn on_axis(x: f64, log: bool) -> f64 {
    if log { x.log10() } else { x }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    v: &SearchView,
) -> std::result::Result<(), String> {
    let e = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root
        .titled(&format!("tuning: {}", v.setting), ("sans-serif", 18))
        .map_err(e)?;
    let areas = root.split_evenly((1, v.axes.len().max(1)));
    let (v, log_y) = on_log_y(v);
    let values: Vec<f64> = v
        .runs
        .iter()
        .map(|r| r.value)
        .chain(v.configs.iter().map(|c| c.mean))
        .chain(v.chance)
        .filter(|y| y.is_finite())
        .collect();
    let y = bounds(&values);
    for ((axis, log), area) in v.axes.iter().zip(&areas) {
        draw_axis(area, &v, axis, (*log, log_y), y)?;
    }
    root.present().map_err(e)
}

/// The view with its scores in log10 where they are all positive and
/// span more than two decades (a loss that blew up beside ones that did
/// not), and whether they are.
fn on_log_y(v: &SearchView) -> (SearchView, bool) {
    let ys: Vec<f64> = v
        .runs
        .iter()
        .map(|r| r.value)
        .chain(v.configs.iter().map(|c| c.mean))
        .filter(|y| y.is_finite())
        .collect();
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut out = v.clone();
    if !(lo > 0.0 && hi > 100.0 * lo) {
        return (out, false);
    }
    for r in &mut out.runs {
        r.value = r.value.log10();
    }
    for c in &mut out.configs {
        c.mean = c.mean.log10();
    }
    out.chance = out.chance.filter(|c| *c > 0.0).map(f64::log10);
    out.y_label = format!("{} (log scale)", v.y_label);
    (out, true)
}

/// One panel: the search over one tuned value.
fn draw_axis<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    v: &SearchView,
    axis: &str,
    (log, log_y): (bool, bool),
    (y_lo, y_hi): (f64, f64),
) -> std::result::Result<(), String> {
    let e = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let xs: Vec<f64> = v
        .runs
        .iter()
        .filter_map(|r| r.at.get(axis))
        .map(|x| on_axis(*x, log))
        .filter(|x| x.is_finite())
        .collect();
    let (x_lo, x_hi) = bounds(&xs);
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(52)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_labels(6)
        .y_labels(6)
        .x_desc(if log {
            format!("{axis} (log scale)")
        } else {
            axis.to_string()
        })
        .y_desc(v.y_label.as_str())
        .x_label_formatter(&|x| {
            if log {
                three_digits(10f64.powf(*x))
            } else {
                crate::report::plot::tick(*x)
            }
        })
        .y_label_formatter(&|y| {
            if log_y {
                crate::report::plot::tick(10f64.powf(*y))
            } else {
                crate::report::plot::tick(*y)
            }
        })
        .label_style(("sans-serif", 12))
        .draw()
        .map_err(e)?;
    if let Some(c) = v.chance {
        let grey = RGBColor(127, 127, 127);
        chart
            .draw_series(LineSeries::new(
                [(x_lo, c), (x_hi, c)],
                grey.stroke_width(1),
            ))
            .map_err(e)?
            .label("chance")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 14, y)], grey));
    }
    let at = |p: &BTreeMap<String, f64>| p.get(axis).map(|x| on_axis(*x, log));
    let mut said = std::collections::BTreeSet::new();
    draw_runs(&mut chart, v, &at, &mut said)?;
    draw_configs(&mut chart, v, &at, &mut said)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 11))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())
}

/// A panel's chart: x and y in data units (x in log10 on a log axis).
type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Each run a dot by health (a failed one a cross), ringed where it
/// wrapped past the modulus; each word in the legend once (`said`).
fn draw_runs<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    v: &SearchView,
    at: &dyn Fn(&BTreeMap<String, f64>) -> Option<f64>,
    said: &mut std::collections::BTreeSet<&'static str>,
) -> std::result::Result<(), String> {
    let e = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    for r in &v.runs {
        let Some(x) = at(&r.at) else { continue };
        let (color, word) = health_style(r.health);
        let point = (x, r.value);
        let s = chart
            .draw_series(std::iter::once(match r.health.kind() {
                Kind::MethodFailed => Cross::new(point, 4, color.stroke_width(2)).into_dyn(),
                _ => Circle::new(point, 3, color.filled()).into_dyn(),
            }))
            .map_err(e)?;
        if said.insert(word) {
            let s = s.label(word);
            if r.health.kind() == Kind::MethodFailed {
                s.legend(move |(x, y)| Cross::new((x + 7, y), 4, color.stroke_width(2)));
            } else {
                s.legend(move |(x, y)| Circle::new((x + 7, y), 3, color.filled()));
            }
        }
        if r.premise == Some(Premise::Wrapped) {
            let orange = RGBColor(255, 127, 14);
            let s = chart
                .draw_series(std::iter::once(Circle::new(
                    point,
                    7,
                    orange.stroke_width(1),
                )))
                .map_err(e)?;
            let word = "wrapped past the modulus (premise)";
            if said.insert(word) {
                s.label(word)
                    .legend(move |(x, y)| Circle::new((x + 7, y), 6, orange.stroke_width(1)));
            }
        }
    }
    Ok(())
}

/// Each configuration's mean a short bar, the chosen one circled.
fn draw_configs<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    v: &SearchView,
    at: &dyn Fn(&BTreeMap<String, f64>) -> Option<f64>,
    said: &mut std::collections::BTreeSet<&'static str>,
) -> std::result::Result<(), String> {
    let e = |e: plotters::drawing::DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    for c in &v.configs {
        let Some(x) = at(&c.at) else { continue };
        // the bar drawn in pixels around its point
        let s = chart
            .draw_series(std::iter::once(
                EmptyElement::at((x, c.mean))
                    + PathElement::new([(-7, 0), (7, 0)], BLACK.stroke_width(2)),
            ))
            .map_err(e)?;
        if said.insert("configuration's mean") {
            s.label("configuration's mean")
                .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLACK.stroke_width(2)));
        }
        if c.chosen {
            let green = RGBColor(44, 160, 44);
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((x, c.mean))
                        + Circle::new((0, 0), 10, green.stroke_width(3))
                        + Text::new("chosen", (12, -14), ("sans-serif", 13).into_font()),
                ))
                .map_err(e)?
                .label("chosen")
                .legend(move |(x, y)| Circle::new((x + 7, y), 6, green.stroke_width(3)));
        }
    }
    Ok(())
}

/// A tick of a log axis to three significant digits: 0.00316, 3.16, 316.
fn three_digits(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return format!("{v}");
    }
    let decimals = (2 - v.log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// The range `values` span, padded by a tenth (0 to 1 without a value; a
/// single value a unit wide).
fn bounds(values: &[f64]) -> (f64, f64) {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let pad = if hi > lo { (hi - lo) * 0.1 } else { 0.5 };
    (lo - pad, hi + pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> SearchView {
        let at = |g: f64, b: f64| -> BTreeMap<String, f64> {
            [("gamma".to_string(), g), ("modulus".to_string(), b)].into()
        };
        SearchView {
            setting: "bits=1 method=moniqua".into(),
            y_label: "val_accuracy (%)".into(),
            axes: vec![("gamma".into(), true), ("modulus".into(), true)],
            runs: vec![
                RunPoint {
                    at: at(0.1, 4.0),
                    value: 80.0,
                    health: Health::Ok,
                    premise: Some(Premise::Wrapped),
                },
                RunPoint {
                    at: at(0.005, 8.0),
                    value: 10.0,
                    health: Health::Collapsed,
                    premise: Some(Premise::Held),
                },
            ],
            configs: vec![
                ConfigPoint {
                    at: at(0.1, 4.0),
                    mean: 80.0,
                    chosen: true,
                },
                ConfigPoint {
                    at: at(0.005, 8.0),
                    mean: 10.0,
                    chosen: false,
                },
            ],
            chance: Some(10.0),
        }
    }

    /// The figure shows each run by health, the premise, the means and
    /// the choice, one panel per tuned value, in a file named for the
    /// setting.
    #[test]
    fn a_search_is_drawn_with_its_choice_marked() {
        let v = view();
        assert_eq!(v.file_name(), "bits-1_method-moniqua.svg");
        assert_eq!(
            [0.0031623, 3.1623, 316.23].map(three_digits),
            ["0.00316", "3.16", "316"]
        );
        let out = std::env::temp_dir().join(format!("repro-tune-figure-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let written = write(&out, &[v]).unwrap();
        assert_eq!(
            written,
            [(
                "bits=1 method=moniqua".to_string(),
                Path::new(DIR).join("bits-1_method-moniqua.svg")
            )]
        );
        let svg = std::fs::read_to_string(out.join(&written[0].1)).unwrap();
        for word in [
            "tuning: bits=1 method=moniqua",
            "gamma (log scale)",
            "modulus (log scale)",
            "ok run",
            "failed run (counted)",
            "wrapped past the modulus (premise)",
            "configuration&apos;s mean",
            "chosen",
            "chance",
        ] {
            assert!(
                svg.contains(word) || svg.contains(&word.replace("&apos;", "'")),
                "{word}"
            );
        }
        // scores over many decades are drawn on a log scale
        let mut wide = view();
        wide.chance = None;
        wide.runs[1].value = 1e60;
        let (logged, log_y) = on_log_y(&wide);
        assert!(log_y && logged.y_label.ends_with("(log scale)"));
        assert_eq!(logged.runs[1].value, 60.0);
        assert!(!on_log_y(&view()).1);
        // a search without a view leaves no folder behind
        assert!(write(&out, &[]).unwrap().is_empty());
        assert!(!out.join(DIR).exists());
        let _ = std::fs::remove_dir_all(&out);
    }
}
