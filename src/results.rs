//! Results of an experiment: `runs.csv` (one row per run) and a Markdown
//! table rendered from it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::manifest::TableSpec;
use crate::sim_backend::Summary;

/// One run's record: its id, its grid point and its typed metrics (a row
/// of runs.csv). Built from the run's Summary, which is read from its logs
/// ([`RunRecord::of`]), or from a committed runs.csv.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    pub point: BTreeMap<String, String>,
    /// The measured columns a run has ([`METRICS`]); a failed run has only
    /// its status.
    pub metrics: BTreeMap<String, Cell>,
}

/// How runs.csv writes a metric column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Count,
    /// A number in scientific notation, every digit kept.
    Sci,
    /// A number with this many decimals.
    Fixed(usize),
}

/// The kind of metric column `metric`: the one place it is defined.
pub fn kind(metric: &str) -> Kind {
    match metric {
        "status" | "shaping" | "bytes_check" => Kind::Text,
        "bytes" | "hash_failures" => Kind::Count,
        "wall_s" => Kind::Fixed(3),
        "time_over_bound" | "comm_fraction" | "kernel_over_counted" => Kind::Fixed(4),
        _ => Kind::Sci,
    }
}

/// One metric of one run, typed by its column.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Text(String),
    Count(u64),
    /// `None`: not measured, or not a number.
    Number(Option<f64>),
}

impl Cell {
    /// The value as a number, if it is one.
    pub fn number(&self) -> Option<f64> {
        match self {
            Cell::Number(v) => *v,
            Cell::Count(n) => Some(*n as f64),
            Cell::Text(_) => None,
        }
    }

    /// The text of a text cell ("" for others).
    pub fn text(&self) -> &str {
        match self {
            Cell::Text(t) => t,
            _ => "",
        }
    }

    /// The cell as runs.csv writes it in column `metric` (a missing number
    /// as `NaN`).
    pub fn csv(&self, metric: &str) -> String {
        match (self, kind(metric)) {
            (Cell::Text(t), _) => t.clone(),
            (Cell::Count(n), _) => n.to_string(),
            (Cell::Number(None), _) => "NaN".into(),
            (Cell::Number(Some(v)), Kind::Fixed(d)) => format!("{v:.d$}"),
            (Cell::Number(Some(v)), _) => format!("{v:e}"),
        }
    }

    /// A runs.csv cell of column `metric` read back: the one place text
    /// becomes a cell. An empty cell is no cell.
    pub fn parse(metric: &str, text: &str) -> Option<Cell> {
        if text.is_empty() {
            return None;
        }
        let number = || Cell::Number(text.parse::<f64>().ok().filter(|v| !v.is_nan()));
        Some(match kind(metric) {
            Kind::Text => Cell::Text(text.to_string()),
            Kind::Count => text.parse().map_or_else(|_| number(), Cell::Count),
            Kind::Sci | Kind::Fixed(_) => number(),
        })
    }
}

impl RunRecord {
    /// The run's status (`completed`, `diverged`, `failed`, ...).
    pub fn status(&self) -> &str {
        self.metrics.get("status").map_or("", Cell::text)
    }

    /// The row of planned run `run`: its summary's metrics as runs.csv
    /// writes them, or `status: failed` without one. The one place a
    /// summary's fields get their column names.
    pub fn of(run: &crate::plan::PlannedRun, summary: Option<&Summary>) -> RunRecord {
        let mut metrics = BTreeMap::new();
        match summary {
            None => {
                metrics.insert("status".into(), Cell::Text("failed".into()));
            }
            Some(s) => {
                for (k, v) in [
                    ("status", Cell::Text(s.status.clone())),
                    ("final_loss", Cell::Number(s.final_loss)),
                    ("train_loss", Cell::Number(s.train_loss)),
                    ("local_loss", Cell::Number(s.local_loss)),
                    ("grad_norm_sq", Cell::Number(s.grad_norm_sq)),
                    ("consensus", Cell::Number(s.consensus)),
                    ("bytes", Cell::Count(s.bytes)),
                    ("virtual_s", Cell::Number(s.virtual_s)),
                    ("hash_failures", Cell::Count(s.hash_failures)),
                    ("test_accuracy", Cell::Number(s.test_accuracy)),
                    ("avg_test_accuracy", Cell::Number(s.avg_test_accuracy)),
                    ("wall_s", Cell::Number(repro_runlog::finite(s.wall_s))),
                    ("extra_memory_mb", Cell::Number(s.extra_memory_mb)),
                    ("peak_rss_mb", Cell::Number(s.peak_rss_mb)),
                    ("epoch_time_s", Cell::Number(s.epoch_time_s)),
                    ("wire_bound_epoch_s", Cell::Number(s.wire_bound_epoch_s)),
                    (
                        "time_over_bound",
                        Cell::Number(s.epoch_time_s.zip(s.wire_bound_epoch_s).map(|(t, b)| t / b)),
                    ),
                    ("comm_fraction", Cell::Number(s.comm_fraction)),
                    ("shaping", Cell::Text(s.shaping.clone())),
                    (
                        "counted_bytes_per_worker",
                        Cell::Number(s.counted_bytes_per_worker),
                    ),
                    (
                        "kernel_bytes_per_worker",
                        Cell::Number(s.kernel_bytes_per_worker),
                    ),
                    ("kernel_over_counted", Cell::Number(s.kernel_over_counted())),
                    (
                        "bytes_check",
                        Cell::Text(if s.kernel_over_counted().is_none() {
                            String::new()
                        } else if s.bytes_flagged() {
                            "flagged".into()
                        } else {
                            "ok".into()
                        }),
                    ),
                ] {
                    metrics.insert(k.to_string(), v);
                }
            }
        }
        RunRecord {
            run_id: run.id.clone(),
            point: run.point.clone(),
            metrics,
        }
    }
}

/// The measured columns, in order.
pub const METRICS: [&str; 23] = [
    "status",
    "final_loss",
    "train_loss",
    "local_loss",
    "grad_norm_sq",
    "consensus",
    "bytes",
    "virtual_s",
    "hash_failures",
    "test_accuracy",
    "avg_test_accuracy",
    "wall_s",
    "extra_memory_mb",
    "peak_rss_mb",
    "epoch_time_s",
    "wire_bound_epoch_s",
    "time_over_bound",
    "comm_fraction",
    "shaping",
    "counted_bytes_per_worker",
    "kernel_bytes_per_worker",
    "kernel_over_counted",
    "bytes_check",
];

fn escape(field: &str) -> String {
    if field.contains([',', '"', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_string()
    }
}

/// Writes runs.csv: `run_id`, the grid keys (sorted), then [`METRICS`].
pub fn write_csv(path: &Path, rows: &[RunRecord]) -> Result<()> {
    let keys: Vec<&String> = rows
        .first()
        .map(|r| r.point.keys().collect())
        .unwrap_or_default();
    let mut out = String::from("run_id");
    for k in &keys {
        out.push(',');
        out.push_str(&escape(k));
    }
    for m in METRICS {
        out.push(',');
        out.push_str(m);
    }
    out.push('\n');
    for r in rows {
        out.push_str(&escape(&r.run_id));
        for k in &keys {
            out.push(',');
            out.push_str(&escape(r.point.get(*k).map_or("", String::as_str)));
        }
        for m in METRICS {
            out.push(',');
            out.push_str(&escape(
                &r.metrics.get(m).map_or(String::new(), |c| c.csv(m)),
            ));
        }
        out.push('\n');
    }
    std::fs::write(path, out).with_context(|| format!("could not write {}", path.display()))
}

fn split_csv_line(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

/// Reads runs.csv back.
pub fn read_csv(path: &Path) -> Result<Vec<RunRecord>> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "could not read {}; run the experiment first (`repro run`)",
            path.display()
        )
    })?;
    let mut lines = text.lines();
    let header = split_csv_line(lines.next().context("runs.csv is empty")?);
    // grid keys sit between run_id and the first metric; metrics are read by
    // name, so a runs.csv written before a metric existed still loads (the
    // new metric empty)
    let first_metric = header.iter().position(|h| h == METRICS[0]);
    let (true, Some(first_metric)) = (
        header.first().map(String::as_str) == Some("run_id"),
        first_metric,
    ) else {
        bail!(
            "{} does not look like a runs.csv written by repro",
            path.display()
        );
    };
    let grid = &header[1..first_metric];
    lines
        .enumerate()
        .map(|(i, line)| {
            let f = split_csv_line(line);
            if f.len() != header.len() {
                bail!(
                    "{} line {}: {} fields, expected {}",
                    path.display(),
                    i + 2,
                    f.len(),
                    header.len()
                );
            }
            let cell = |name: &str| {
                header[first_metric..]
                    .iter()
                    .position(|h| h == name)
                    .map(|j| f[first_metric + j].clone())
                    .unwrap_or_default()
            };
            Ok(RunRecord {
                run_id: f[0].clone(),
                point: grid
                    .iter()
                    .cloned()
                    .zip(f[1..first_metric].iter().cloned())
                    .collect(),
                metrics: METRICS
                    .iter()
                    .filter_map(|m| Some((m.to_string(), Cell::parse(m, &cell(m))?)))
                    .collect(),
            })
        })
        .collect()
}

/// A Markdown table: `spec.rows` keys down, `spec.cols` values across, the
/// metric in the cells as `mean +- sd` over the remaining grid keys (seeds),
/// and `diverged` where any run diverged.
/// A rendered table: a header and rows of formatted cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: String,
    pub source: String,
    /// The metric in the cells.
    pub value: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Groups `rows` into the table `spec` asks for: one row per value of the
/// row keys, one column per value of the column key, each cell the mean ±
/// sd of `spec.value` over its runs (seeds), "diverged" if any run diverged,
/// "failed" if every run failed, "-" if there is no run.
/// The rows of a paper CSV (column -> value), read for `table.paper`.
pub type PaperRows = Vec<BTreeMap<String, String>>;

/// Reads `spec.paper`'s CSV: from the working directory, else from this
/// source tree.
pub fn load_paper(spec: &TableSpec) -> Result<Option<PaperRows>> {
    let Some(p) = &spec.paper else {
        return Ok(None);
    };
    let local = Path::new(&p.file).to_path_buf();
    let path = if local.is_file() {
        local
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(&p.file)
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("could not read the paper's numbers {}", path.display()))?;
    let mut lines = text.lines();
    let header = split_csv_line(lines.next().unwrap_or_default());
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
            .filter(|l| !l.trim().is_empty())
            .map(|l| header.iter().cloned().zip(split_csv_line(l)).collect())
            .collect(),
    ))
}

/// The paper's cell for a group of runs, by `spec.paper.keys`: its value
/// (± sd, or "diverge"), or column `column` as written.
fn paper_cell(
    spec: &TableSpec,
    paper: &PaperRows,
    run: &RunRecord,
    column: Option<&String>,
) -> String {
    let Some(p) = &spec.paper else {
        return String::new();
    };
    let found = paper.iter().find(|prow| {
        p.keys.iter().all(|(ours, col)| {
            let v = run.point.get(ours).or_else(|| p.defaults.get(ours));
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

pub fn build_table(
    title: &str,
    source: &str,
    spec: &TableSpec,
    rows: &[RunRecord],
    paper: Option<&PaperRows>,
) -> Result<Table> {
    if !METRICS.contains(&spec.value.as_str()) {
        bail!(
            "table value `{}` is not a column of runs.csv ({})",
            spec.value,
            METRICS.join(", ")
        );
    }
    let row_key = |r: &RunRecord| {
        spec.rows
            .iter()
            .map(|k| r.point.get(k).cloned().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    let col_key = |r: &RunRecord| {
        spec.cols
            .as_ref()
            .and_then(|c| r.point.get(c).cloned())
            .unwrap_or_default()
    };
    let mut row_keys: Vec<Vec<String>> = Vec::new();
    let mut col_keys: Vec<String> = Vec::new();
    let mut cells: BTreeMap<(Vec<String>, String), Vec<&RunRecord>> = BTreeMap::new();
    for r in rows {
        let (rk, ck) = (row_key(r), col_key(r));
        if !row_keys.contains(&rk) {
            row_keys.push(rk.clone());
        }
        if !col_keys.contains(&ck) {
            col_keys.push(ck.clone());
        }
        cells.entry((rk, ck)).or_default().push(r);
    }
    let col_title = spec.cols.clone().unwrap_or_default();
    let mut header = vec![spec.rows.join(" / ")];
    for c in &col_keys {
        let name = if col_title.is_empty() {
            spec.value.clone()
        } else {
            format!("{col_title}={c}")
        };
        if let (Some(p), Some(_)) = (&spec.paper, paper) {
            header.push(format!("{name} (measured)"));
            header.push(format!("{name} (paper: {})", p.label));
        } else {
            header.push(name);
        }
    }
    for e in &spec.extra {
        if !METRICS.contains(&e.value.as_str()) {
            bail!(
                "table.extra value `{}` is not a column of runs.csv",
                e.value
            );
        }
        header.push(e.label.clone());
        if let (Some(p), Some(_), Some(_)) = (&spec.paper, paper, &e.paper) {
            header.push(format!("{} (paper: {})", e.label, p.label));
        }
    }
    let scale = spec.scale.unwrap_or(1.0);
    let status = |r: &RunRecord| r.status().to_string();
    let body = row_keys
        .iter()
        .map(|rk| {
            let mut line = vec![rk.join(" / ")];
            for ck in &col_keys {
                let group = cells.get(&(rk.clone(), ck.clone()));
                line.push(match group {
                    None => "-".to_string(),
                    Some(runs) if runs.iter().any(|r| status(r) == "diverged") => {
                        "diverged".to_string()
                    }
                    Some(runs) if runs.iter().all(|r| status(r) != "completed") => {
                        "failed".to_string()
                    }
                    Some(runs) => {
                        let v: Vec<f64> = runs
                            .iter()
                            .filter(|r| status(r) == "completed")
                            .filter_map(|r| r.metrics.get(&spec.value)?.number())
                            .map(|x| x * scale)
                            .collect();
                        mean_sd(&v)
                    }
                });
                if let Some(paper) = paper.filter(|_| spec.paper.is_some()) {
                    line.push(
                        group
                            .and_then(|g| g.first())
                            .map_or_else(|| "-".into(), |r| paper_cell(spec, paper, r, None)),
                    );
                }
            }
            let in_row: Vec<&RunRecord> = rows.iter().filter(|r| &row_key(r) == rk).collect();
            let mean_of = |runs: &[&RunRecord], metric: &str| -> Option<f64> {
                let v: Vec<f64> = runs
                    .iter()
                    .filter(|r| status(r) != "failed")
                    .filter_map(|r| r.metrics.get(metric)?.number())
                    .filter(|x| x.is_finite())
                    .collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            };
            for e in &spec.extra {
                let v = mean_of(&in_row, &e.value);
                let v = match &e.relative_to {
                    None => v,
                    Some(reference) => {
                        // the reference shares this row's values for the other row keys
                        let matches = |r: &&RunRecord| {
                            spec.rows.iter().zip(rk).all(|(k, val)| {
                                reference.contains_key(k) || r.point.get(k) == Some(val)
                            }) && reference.iter().all(|(k, val)| r.point.get(k) == Some(val))
                        };
                        let base: Vec<&RunRecord> = rows.iter().filter(matches).collect();
                        match (v, mean_of(&base, &e.value)) {
                            (Some(x), Some(b)) if b != 0.0 => Some(x / b),
                            _ => None,
                        }
                    }
                };
                line.push(v.map_or_else(|| "-".into(), number));
                if let (Some(paper), Some(col)) = (paper.filter(|_| spec.paper.is_some()), &e.paper)
                {
                    line.push(
                        in_row
                            .first()
                            .map_or_else(|| "-".into(), |r| paper_cell(spec, paper, r, Some(col))),
                    );
                }
            }
            line
        })
        .collect();
    Ok(Table {
        title: title.to_string(),
        source: source.to_string(),
        value: spec.value.clone(),
        header,
        rows: body,
    })
}

impl Table {
    /// GitHub Markdown, with the title and the source above.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# {}\n\nSource: {}. Cells: `{}` (mean ± sd over seeds; \"diverged\" if a run diverged).\n",
            self.title, self.source, self.value
        );
        let _ = writeln!(out, "| {} |", self.header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(self.header.len()));
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        out
    }

    /// A LaTeX `tabular` (booktabs) with the title as a comment.
    pub fn latex(&self) -> String {
        let esc = |s: &str| {
            s.replace('\\', "\\textbackslash{}")
                .replace('&', "\\&")
                .replace('%', "\\%")
                .replace('$', "\\$")
                .replace('#', "\\#")
                .replace('_', "\\_")
                .replace('{', "\\{")
                .replace('}', "\\}")
                .replace('±', "$\\pm$")
        };
        let mut out = String::new();
        let _ = writeln!(out, "% {}\n% Source: {}", self.title, self.source);
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

    /// CSV: the header, then one line per row.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        for r in std::iter::once(&self.header).chain(&self.rows) {
            let _ = writeln!(
                out,
                "{}",
                r.iter().map(|c| escape(c)).collect::<Vec<_>>().join(",")
            );
        }
        out
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

fn mean_sd(v: &[f64]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    if v.len() == 1 {
        return number(mean);
    }
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
    format!("{} ± {}", number(mean), number(sd))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(alg: &str, seed: &str, loss: &str, status: &str) -> RunRecord {
        RunRecord {
            run_id: format!("{alg}{seed}"),
            point: [
                ("algorithm".to_string(), alg.to_string()),
                ("seed".to_string(), seed.to_string()),
            ]
            .into(),
            metrics: METRICS
                .iter()
                .filter_map(|m| {
                    let v = match *m {
                        "status" => status.to_string(),
                        "final_loss" => loss.to_string(),
                        _ => "0".to_string(),
                    };
                    Some((m.to_string(), Cell::parse(m, &v)?))
                })
                .collect(),
        }
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(number(0.9123456), "0.9123");
        assert_eq!(number(91.08), "91.08");
        assert_eq!(number(1234.4), "1234");
        assert_eq!(number(3.2e-7), "3.200e-7");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(f64::NAN), "NaN");
    }

    #[test]
    fn csv_round_trips_and_table_aggregates_seeds() {
        let rows = vec![
            row("moniqua", "0", "1.0", "completed"),
            row("moniqua", "1", "3.0", "completed"),
            row("dcd,x", "0", "NaN", "diverged"),
        ];
        let path = std::env::temp_dir().join(format!("repro-runs-{}.csv", std::process::id()));
        write_csv(&path, &rows).unwrap();
        let back = read_csv(&path).unwrap();
        assert_eq!(back, rows);
        let spec = TableSpec {
            rows: vec!["algorithm".into()],
            cols: None,
            value: "final_loss".into(),
            scale: None,
            paper: None,
            extra: Vec::new(),
        };
        let md = build_table("T", "S", &spec, &back, None)
            .unwrap()
            .markdown();
        assert!(md.contains("| moniqua | 2.000 ± 1.414 |"), "{md}");
        assert!(md.contains("| dcd,x | diverged |"), "{md}");
        let table = build_table("T_1", "S", &spec, &back, None).unwrap();
        insta::assert_snapshot!("table_md", table.markdown());
        insta::assert_snapshot!("table_latex", table.latex());
        insta::assert_snapshot!("table_csv", table.csv());
        let bad = TableSpec {
            value: "accuracy".into(),
            ..spec
        };
        assert!(build_table("T", "S", &bad, &back, None).is_err());
    }

    #[test]
    fn an_extra_column_relative_to_a_reference_row() {
        let mut rows = vec![
            row("allreduce", "0", "1", "completed"),
            row("allreduce", "1", "1", "completed"),
            row("pqasgd", "0", "1", "completed"),
        ];
        for (r, bytes) in rows.iter_mut().zip(["1000", "3000", "50"]) {
            r.metrics
                .insert("bytes".into(), Cell::parse("bytes", bytes).unwrap());
        }
        let spec = TableSpec {
            rows: vec!["algorithm".into()],
            cols: None,
            value: "final_loss".into(),
            scale: None,
            paper: None,
            extra: vec![crate::manifest::ExtraColumn {
                value: "bytes".into(),
                label: "bytes / allreduce".into(),
                paper: None,
                relative_to: Some([("algorithm".to_string(), "allreduce".to_string())].into()),
            }],
        };
        let t = build_table("T", "S", &spec, &rows, None).unwrap();
        // mean of the reference's runs: 2000
        assert_eq!(t.rows[0][2], "1.000");
        assert_eq!(t.rows[1][2], "0.02500");
        let missing = TableSpec {
            extra: vec![crate::manifest::ExtraColumn {
                relative_to: Some([("algorithm".to_string(), "none".to_string())].into()),
                ..spec.extra[0].clone()
            }],
            ..spec
        };
        let t = build_table("T", "S", &missing, &rows, None).unwrap();
        assert_eq!(t.rows[1][2], "-", "no reference runs: no ratio");
    }

    #[test]
    fn runs_csv_from_before_a_metric_existed_still_loads() {
        // the header of session 2's runs.csv: no train_loss, no comm_fraction
        let old = "run_id,algorithm,status,final_loss,local_loss,grad_norm_sq,consensus,bytes,\
                   virtual_s,hash_failures,test_accuracy,avg_test_accuracy,wall_s,extra_memory_mb,\
                   peak_rss_mb,epoch_time_s,wire_bound_epoch_s,time_over_bound,shaping,\
                   counted_bytes_per_worker,kernel_bytes_per_worker,kernel_over_counted,bytes_check\n\
                   a1,dcd,completed,0.5,0.6,NaN,NaN,10,1,0,0.8,0.9,3.5,0.4,200,NaN,NaN,NaN,none,NaN,NaN,NaN,\n";
        let path = std::env::temp_dir().join(format!("repro-old-{}.csv", std::process::id()));
        std::fs::write(&path, old).unwrap();
        let rows = read_csv(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].point["algorithm"], "dcd");
        assert_eq!(rows[0].metrics["wall_s"], Cell::Number(Some(3.5)));
        assert_eq!(rows[0].metrics["shaping"], Cell::Text("none".into()));
        // written before the column existed: no cell, not zero
        assert_eq!(rows[0].metrics.get("train_loss"), None);
        assert_eq!(rows[0].metrics.get("comm_fraction"), None);
    }

    #[test]
    fn the_papers_numbers_sit_beside_ours() {
        let dir = std::env::temp_dir().join(format!("repro-paper-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("p.csv");
        std::fs::write(
            &csv,
            "model,bits,alg,acc,sd,div\nresnet20,1,moniqua,91.08,0.19,false\nresnet20,1,dcd,,,true\nresnet110,1,moniqua,92.97,0.23,false\n",
        )
        .unwrap();
        let mut rows = vec![
            row("moniqua", "0", "0.9", "completed"),
            row("moniqua", "1", "0.8", "completed"),
            row("dcd", "0", "0.1", "diverged"),
            row("choco", "0", "0.7", "completed"),
        ];
        for r in &mut rows {
            r.point.insert("bits".into(), "1".into());
        }
        let spec: TableSpec = yaml_serde::from_str(&format!(
            "{{rows: [algorithm], cols: bits, value: final_loss, scale: 100, paper: {{file: {}, keys: {{model: model, bits: bits, algorithm: alg}}, defaults: {{model: resnet20}}, value: acc, sd: sd, diverged: div, label: ResNet20}}}}",
            csv.display()
        ))
        .unwrap();
        let paper = load_paper(&spec).unwrap().unwrap();
        let t = build_table("T", "S", &spec, &rows, Some(&paper)).unwrap();
        insta::assert_snapshot!("table_with_paper", t.markdown());
        assert_eq!(t.rows[0], ["moniqua", "85.00 ± 7.071", "91.08 ± 0.19"]);
        assert_eq!(t.rows[1], ["dcd", "diverged", "diverge"]);
        assert_eq!(t.rows[2], ["choco", "70.00", "-"]);
        let bad: TableSpec = yaml_serde::from_str(&format!(
            "{{rows: [algorithm], value: final_loss, paper: {{file: {}, keys: {{bits: budget}}, value: acc, label: x}}}}",
            csv.display()
        ))
        .unwrap();
        let err = load_paper(&bad).unwrap_err().to_string();
        assert!(err.contains("no column `budget`"), "{err}");
    }
}
