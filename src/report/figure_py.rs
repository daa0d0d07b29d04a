//! figure.py: a matplotlib script written beside each figure that draws
//! it again, for a researcher who wants to restyle it. A curves figure's
//! script recomputes every series from curves.parquet the way
//! `plot::panels` does (the runs of a series averaged at the iterations
//! they all have, the trailing moving average, the 95% t band kept in the
//! metric's range, the unit factor); a sweep or scaling figure's script
//! holds the points drawn. `python3 figure.py --check` recomputes and
//! compares with a sample of the numbers repro drew.

use serde_json::{Value, json};

use crate::experiment::manifest::{FigureKind, FigureSpec};
use crate::records::metrics::{self, Range};
use crate::report::plot::Panel;

/// The script's Python, with `@SPEC@` replaced by the figure's JSON.
const TEMPLATE: &str = include_str!("assets/figure.py");

/// The points of a series kept in the script for `--check`: about 20.
fn sample<T: Clone>(v: &[T]) -> Vec<(usize, T)> {
    let every = (v.len() / 20).max(1);
    v.iter().cloned().enumerate().step_by(every).collect()
}

/// figure.py for a figure titled `title` drawn from `spec` as `panels`
/// (after the unit factor `factor` and the clock's labels).
pub(crate) fn script(title: &str, spec: &FigureSpec, panels: &[Panel], factor: f64) -> String {
    let range = match metrics::range(&spec.y) {
        Range::Positive => "positive",
        Range::Fraction => "fraction",
        Range::Real => "real",
    };
    let xs: Vec<&str> = std::iter::once(spec.x.as_str())
        .chain(spec.also_x.iter().map(String::as_str))
        .collect();
    // against_each_x: the base panels, then the same again for each x
    let base = (panels.len() / xs.len().max(1)).max(1);
    let max_runs = panels
        .iter()
        .flat_map(|p| &p.series)
        .map(|s| s.runs)
        .max()
        .unwrap_or(1);
    // t* of the 95% interval for every number of runs a series can have
    let t95: serde_json::Map<String, Value> = (2..=max_runs.max(2))
        .map(|n| {
            (
                n.to_string(),
                json!(crate::report::stats::t_star((n - 1) as f64, 0.05)),
            )
        })
        .collect();
    let panels_json: Vec<Value> = panels
        .iter()
        .enumerate()
        .map(|(j, p)| {
            let key = panels.get(j % base).map_or("", |b| b.title.as_str());
            json!({
                "title": p.title,
                "key": key,
                "x": xs.get(j / base).copied().unwrap_or(&spec.x),
                "x_label": p.x_label,
                "y_label": p.y_label,
                "log_x": p.log_x,
                "series": p.series.iter().map(|s| json!({
                    "label": s.label,
                    "runs": s.runs,
                    "dashed": s.dashed,
                    // a curves series is recomputed; the others are drawn as held
                    "points": if spec.kind == FigureKind::Curves { json!(sample(&s.points)) } else { json!(s.points) },
                    "band": if spec.kind == FigureKind::Curves { json!(sample(&s.band)) } else { json!(s.band) },
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let spec_json = json!({
        "title": title,
        "kind": match spec.kind {
            FigureKind::Curves => "curves",
            FigureKind::Sweep => "sweep",
            FigureKind::Scaling => "scaling",
        },
        "y": spec.y,
        "panels_key": spec.panels,
        "series_key": spec.series,
        "smooth": spec.smooth,
        "log_y": spec.log_y,
        "x_range": spec.x_range,
        "y_range": spec.y_range,
        "range": range,
        "factor": factor,
        "t95": t95,
    });
    // the settings one per line, each panel on a line of its own
    let head = serde_json::to_string_pretty(&spec_json).unwrap_or_default();
    let head = head.trim_end().trim_end_matches('}').trim_end();
    let panels_text = panels_json
        .iter()
        .map(|p| format!("    {}", serde_json::to_string(p).unwrap_or_default()))
        .collect::<Vec<_>>()
        .join(",\n");
    TEMPLATE.replace(
        "@SPEC@",
        &format!("{head},\n  \"panels\": [\n{panels_text}\n  ]\n}}"),
    )
}
