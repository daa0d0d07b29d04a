//! An experiment's table: the runs frame grouped as the manifest's `table`
//! says, with the paper's numbers beside ours, as Markdown, LaTeX and CSV.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use polars::prelude::{DataFrame, DataType, Expr, col, len, lit};

use crate::experiment::manifest::TableSpec;
use crate::experiment::plan::SEED_KEY;
use crate::launch::summary::RunStatus;
use crate::records::frames::{self, RunsFrame};
use crate::records::health::{Health, Premise, counts_text, premise_text};
use crate::records::metrics::METRICS;
use crate::records::results::{csv_rows, csv_text};

mod groups;
mod stats;
use groups::*;
pub(crate) use stats::*;

/// Checks `spec` against the runs' grid `keys` before anything runs:
/// the value and extra columns are run metrics, and the row, column and
/// reference keys are grid keys (a typo would fold the table into one
/// cell). The error is the key's path in the manifest and what is wrong.
pub(crate) fn check_spec(spec: &TableSpec, keys: &[String]) -> Result<(), (String, String)> {
    let metric = |path: String, v: &str| {
        if METRICS.contains(&v) {
            Ok(())
        } else {
            Err((
                path,
                format!(
                    "`{v}` is not a run metric; use one of {}",
                    METRICS.join(", ")
                ),
            ))
        }
    };
    let grid = |path: String, k: &str| {
        if keys.iter().any(|g| g == k) {
            Ok(())
        } else {
            Err((
                path,
                format!("`{k}` is not a grid key; grid keys: {}", keys.join(", ")),
            ))
        }
    };
    metric("table.value".into(), &spec.value)?;
    for (i, k) in spec.rows.iter().enumerate() {
        grid(format!("table.rows[{i}]"), k)?;
    }
    if let Some(c) = &spec.cols {
        grid("table.cols".into(), c)?;
    }
    for k in spec.reference.iter().flat_map(|r| r.keys()) {
        if !spec.rows.contains(k) {
            return Err((
                format!("table.reference.{k}"),
                format!(
                    "`{k}` is not a row key; the reference names a row by {}",
                    spec.rows.join(", ")
                ),
            ));
        }
    }
    for (i, e) in spec.extra.iter().enumerate() {
        metric(format!("table.extra[{i}].value"), &e.value)?;
        for k in e.relative_to.iter().flat_map(|r| r.keys()) {
            grid(format!("table.extra[{i}].relative_to.{k}"), k)?;
        }
        for k in e.select.keys() {
            grid(format!("table.extra[{i}].where.{k}"), k)?;
        }
    }
    Ok(())
}

/// The factor `metric` is shown multiplied by: the manifest's `scale`,
/// else the metric's unit ([`crate::records::metrics::unit_factor`]).
pub(crate) fn factor(scale: Option<f64>, metric: &str) -> f64 {
    scale.unwrap_or_else(|| crate::records::metrics::unit_factor(metric))
}

/// A rendered table: a header and rows of formatted cells.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub title: String,
    pub source: String,
    /// The metric in the cells.
    pub value: String,
    /// The reference row's label, when the table has difference rows.
    pub reference: Option<String>,
    /// Whether the rows have extra columns (means over valid runs).
    pub extras: bool,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// The same cells in tidy form (table.csv): one line per cell with
    /// its keys and its numbers ([`TIDY_STATS`]), then one per extra
    /// column of each row.
    pub tidy: Vec<Vec<String>>,
    /// Per column, the row with the best mean over at least two valid
    /// runs and how far ahead of the next it is (markdown's last line).
    pub best: Vec<String>,
}

/// One row's value of an extra column: the mean over its valid runs with
/// a value (or relative to the reference row's), and the paper's text.
#[derive(Debug, Clone, PartialEq)]
struct ExtraCell {
    value: Option<f64>,
    n: usize,
    paper: Option<String>,
}

/// The rows of a paper CSV (column -> value), read for `table.paper`.
pub(crate) type PaperRows = Vec<BTreeMap<String, String>>;

/// Reads `spec.paper`'s CSV, a path inside the project (relative, no
/// `..`): the paper's numbers are the project's data, never a file
/// elsewhere on the machine.
pub(crate) fn load_paper(spec: &TableSpec) -> Result<Option<PaperRows>> {
    let Some(p) = &spec.paper else {
        return Ok(None);
    };
    let file = Path::new(&p.file);
    if file.is_absolute()
        || file
            .components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        anyhow::bail!(
            "table.paper.file `{}`: give a path inside the project, relative and without `..` (e.g. paper/moniqua_table2.csv)",
            p.file.escape_default()
        );
    }
    let path = crate::experiment::project::root()
        .map(|r| r.join(file))
        .unwrap_or_else(|_| file.to_path_buf());
    crate::util::sudo::check_readable(&path).map_err(anyhow::Error::msg)?;
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("could not read the paper's numbers {}", path.display()))?;
    let mut lines = csv_rows(&text)
        .with_context(|| format!("{} is not valid CSV", path.display()))?
        .into_iter();
    let header = lines.next().unwrap_or_default();
    for col in p
        .keys
        .values()
        .chain([&p.value])
        .chain(p.sd.iter())
        .chain(p.diverged.iter())
    {
        if !header.contains(col) {
            bail!(
                "{} has no column `{col}` (table.paper names it)",
                path.display()
            );
        }
    }
    Ok(Some(
        lines
            .filter(|l| l.iter().any(|f| !f.trim().is_empty()))
            .map(|l| header.iter().cloned().zip(l).collect())
            .collect(),
    ))
}

/// The paper's cell for a group of runs, by `spec.paper.keys`: its value
/// (± sd, or "diverge"), or column `column` as written.
fn paper_cell(
    spec: &TableSpec,
    paper: &PaperRows,
    point: &BTreeMap<String, String>,
    column: Option<&String>,
) -> String {
    let Some(p) = &spec.paper else {
        return String::new();
    };
    let found = paper.iter().find(|prow| {
        p.keys.iter().all(|(ours, col)| {
            let v = point.get(ours).or_else(|| p.defaults.get(ours));
            v.is_some() && prow.get(col) == v
        })
    });
    match found {
        None => "-".into(),
        Some(prow) if column.is_some() => column
            .and_then(|c| prow.get(c))
            .filter(|v| !v.is_empty())
            .cloned()
            .unwrap_or_else(|| "-".into()),
        Some(prow) => {
            if p.diverged
                .as_ref()
                .and_then(|c| prow.get(c))
                .map(String::as_str)
                == Some("true")
            {
                return "diverge".into();
            }
            let v = prow.get(&p.value).map_or("", String::as_str);
            match p
                .sd
                .as_ref()
                .and_then(|c| prow.get(c))
                .filter(|s| !s.is_empty())
            {
                Some(sd) if !v.is_empty() => format!("{v} ± {sd}"),
                _ if v.is_empty() => "-".into(),
                _ => v.to_string(),
            }
        }
    }
}

/// Groups the runs into the table `spec` asks for: one row per value of the
/// row keys, one column per value of the column key, each cell the mean ±
/// sd of `spec.value` over its valid runs (health `ok`; seeds), with the
/// other runs counted by health ("2 ok, 1 collapsed"), "failed" if every
/// run failed, "-" if there is no run. The groups are
/// polars group-by queries on the runs frame.
pub(crate) fn build_table(
    title: &str,
    source: &str,
    spec: &TableSpec,
    runs: &RunsFrame,
    paper: Option<&PaperRows>,
) -> Result<Table> {
    for (what, value) in std::iter::once(("table value", &spec.value))
        .chain(spec.extra.iter().map(|e| ("table.extra value", &e.value)))
    {
        if !METRICS.contains(&value.as_str()) {
            bail!(
                "{what} `{value}` is not a column of runs.csv ({})",
                METRICS.join(", ")
            );
        }
    }
    let g = Groups::new(spec, runs, paper.filter(|_| spec.paper.is_some()));
    let cells = g.cells()?;
    let extras = g.extras()?;
    let mut body: Vec<Vec<String>> = cells
        .rows
        .iter()
        .map(|rk| {
            let mut line = vec![rk.join(" / ")];
            for ck in &cells.cols {
                match cells.text.get(&(rk.clone(), ck.clone())) {
                    Some(texts) => line.extend(texts.iter().cloned()),
                    None => {
                        line.push("-".into());
                        line.extend(g.paper.map(|_| "-".to_string()));
                    }
                }
            }
            for e in extras.get(rk).into_iter().flatten() {
                line.push(e.value.map_or_else(|| "-".into(), number));
                line.extend(e.paper.clone());
            }
            line
        })
        .collect();
    let reference = match &spec.reference {
        Some(r) => {
            let (label, rows) = g.differences(r, &cells)?;
            let width = body.first().map_or(0, Vec::len);
            body.extend(rows.into_iter().map(|mut r| {
                r.resize(width, "-".into());
                r
            }));
            Some(label)
        }
        None => None,
    };
    let tidy = g.tidy(&cells, &extras);
    let best = g.best(&cells)?;
    Ok(Table {
        title: title.to_string(),
        source: source.to_string(),
        value: spec.value.clone(),
        reference,
        extras: !spec.extra.is_empty(),
        header: g.header(&cells.cols),
        rows: body,
        tidy,
        best,
    })
}

/// A cell's place: its row keys' values and its column key's value.
pub(crate) type CellKey = (Vec<String>, String);

/// The cells of the table `spec` asks for, each with its statistics, in
/// the table's order.
pub(crate) fn cell_stats(spec: &TableSpec, runs: &RunsFrame) -> Result<Vec<(CellKey, CellStats)>> {
    let cells = Groups::new(spec, runs, None).cells()?;
    let mut out = Vec::new();
    for rk in &cells.rows {
        for ck in &cells.cols {
            if let Some((stats, _)) = cells.stats.get(&(rk.clone(), ck.clone())) {
                out.push(((rk.clone(), ck.clone()), stats.clone()));
            }
        }
    }
    Ok(out)
}

/// Whether a larger value of `metric` is better, by its name (a claim
/// may say otherwise): an accuracy is; losses, times, bytes and distances
/// are not. A table's ranking and a claim's default read it.
pub(crate) fn higher_is_better(metric: &str) -> bool {
    crate::records::metrics::is_accuracy(metric)
}

/// `value` times `factor` over the runs of `frame` (often of several
/// experiments) grouped by the keys `by`, grid keys or text columns such as
/// `experiment` and `scale`, a group per combination in the order the runs
/// first have it: a table whose cells are the valid runs' mean and
/// interval (as [`build_table`]'s are) and whose tidy form has the keys,
/// the metric, the factor and [`TIDY_STATS`].
pub(crate) fn compare(
    title: &str,
    source: &str,
    frame: &RunsFrame,
    by: &[String],
    value: &str,
    factor: f64,
) -> Result<Table> {
    if !METRICS.contains(&value) {
        bail!(
            "`{value}` is not a run metric; use one of {}",
            METRICS.join(", ")
        );
    }
    let df = &frame.df;
    let names: Vec<String> = (0..by.len()).map(|i| format!("__by{i}")).collect();
    let exprs: Vec<Expr> = by
        .iter()
        .zip(&names)
        .map(|(k, n)| frames::key(df, k).alias(n.as_str()))
        .collect();
    let groups = frame
        .lazy()
        .group_by_stable(exprs)
        .agg(cell_aggregates(df, value, factor))
        .collect()
        .context("could not group the runs")?;
    let mut header = by.to_vec();
    header.push(value.to_string());
    let mut tidy_header = by.to_vec();
    tidy_header.extend(["metric", "factor"].map(String::from));
    tidy_header.extend(TIDY_STATS.map(String::from));
    let mut rows = Vec::new();
    let mut tidy = vec![tidy_header];
    let keys_of = |i: usize| -> Result<Vec<String>> {
        names
            .iter()
            .map(|n| frames::text_at(&groups, n, i))
            .collect()
    };
    let keys: Vec<Vec<String>> = (0..groups.height()).map(keys_of).collect::<Result<_>>()?;
    for i in nested_order(&keys) {
        let keys = keys[i].clone();
        let stats = CellStats::of(&groups, i)?;
        let mut row = keys.clone();
        row.push(stats.text());
        rows.push(row);
        let mut line = keys;
        line.extend([value.to_string(), factor.to_string()]);
        line.extend(stats.tidy());
        tidy.push(line);
    }
    Ok(Table {
        title: title.to_string(),
        source: source.to_string(),
        value: value.to_string(),
        reference: None,
        extras: false,
        header,
        rows,
        tidy,
        best: Vec::new(),
    })
}

impl Table {
    /// GitHub Markdown, with the title and the source above.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# {}\n\nSource: {}. Cells: `{}`, mean ± the half-width of its 95% t interval over every run that tested the method (intention to treat: a run whose method failed counts with its recorded value, or at chance accuracy where it has none), and their number n; a cell with runs that are not ok counts them by health (\"2 ok, 1 collapsed\") and gives the valid runs' figure beside (\"ok only\"); runs that did not test the method (silent, unfinished) are left out.{}{}\n",
            self.title,
            self.source,
            self.value,
            if self.header.iter().any(|h| h.contains("(paper: ")) {
                " The paper's cells are as printed (mean ± sd)."
            } else {
                ""
            },
            match &self.reference {
                Some(r) => format!(
                    " Rows `Δ a − b`: a's runs minus the reference row's ({r}) in the same column, paired by seed where both ran the same seeds (Welch otherwise), mean ± 95% t half-width, by intention to treat."
                ),
                None => String::new(),
            }
        );
        if self.extras {
            // inside the same paragraph
            out.truncate(out.trim_end().len());
            let _ = writeln!(
                out,
                " The columns after the cells are means over the valid runs alone.\n"
            );
        }
        // a value with `|` or a line break cannot forge a cell or a row
        let line = |cells: &[String]| {
            cells
                .iter()
                .map(|c| crate::util::text::markdown_cell(c))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let _ = writeln!(out, "| {} |", line(&self.header));
        let _ = writeln!(out, "|{}", "---|".repeat(self.header.len()));
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", line(r));
        }
        if !self.best.is_empty() {
            let _ = writeln!(
                out,
                "\n{} mean per column (rows with at least two valid runs{}): {}.",
                if higher_is_better(&self.value) {
                    "Highest"
                } else {
                    "Lowest"
                },
                match &self.reference {
                    Some(r) => format!(", the reference {r} left out"),
                    None => String::new(),
                },
                self.best.join("; ")
            );
        }
        out
    }

    /// A LaTeX `tabular` (booktabs) with the title as a comment.
    pub(crate) fn latex(&self) -> String {
        // one character at a time, so no replacement is escaped again
        let esc = |s: &str| {
            s.chars()
                .map(|c| match c {
                    '\\' => "\\textbackslash{}".to_string(),
                    '~' => "\\textasciitilde{}".to_string(),
                    '^' => "\\textasciicircum{}".to_string(),
                    '&' | '%' | '$' | '#' | '_' | '{' | '}' => format!("\\{c}"),
                    '±' => "$\\pm$".to_string(),
                    c => c.to_string(),
                })
                .collect::<String>()
        };
        // a comment ends at a line break: none gets into the LaTeX
        let comment = |s: &str| s.replace(['\n', '\r'], " ");
        let mut out = String::new();
        let _ = writeln!(
            out,
            "% {}\n% Source: {}",
            comment(&self.title),
            comment(&self.source)
        );
        let _ = writeln!(
            out,
            "\\begin{{tabular}}{{l{}}}",
            "r".repeat(self.header.len() - 1)
        );
        let _ = writeln!(out, "\\toprule");
        let line = |cells: &[String]| cells.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" & ");
        let _ = writeln!(out, "{} \\\\", line(&self.header));
        let _ = writeln!(out, "\\midrule");
        for r in &self.rows {
            let _ = writeln!(out, "{} \\\\", line(r));
        }
        let _ = writeln!(out, "\\bottomrule\n\\end{{tabular}}");
        out
    }

    /// The tidy CSV (see [`Table::tidy`]).
    pub(crate) fn csv(&self) -> Result<String> {
        csv_text(&self.tidy)
    }
}

/// A number for a table: four significant digits, plain where that reads
/// well, scientific otherwise.
pub(crate) fn number(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    if a == 0.0 {
        return "0".into();
    }
    if (1e-3..1e5).contains(&a) {
        let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{x:.decimals$}")
    } else {
        format!("{x:.3e}")
    }
}

/// A number as a person writes it: [`number`] without trailing zeros
/// (`1`, `0.5`, `50`).
pub(crate) fn short(x: f64) -> String {
    let s = number(x);
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests;
