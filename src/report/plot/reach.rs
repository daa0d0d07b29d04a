//! Time to target: when each series first reaches each of the figure's
//! targets, as targets.md and targets.csv.

use super::*;

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
