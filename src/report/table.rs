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

/// The order of groups whose keys are `keys` (in the order the runs first
/// have each combination), nested by the first key: every group of the
/// first key's first value, then of its second, each set in its own
/// order. A table with one row key and its column key lists its cells so.
fn nested_order(keys: &[Vec<String>]) -> Vec<usize> {
    let mut firsts: Vec<&str> = Vec::new();
    for k in keys {
        let first = k.first().map_or("", String::as_str);
        if !firsts.contains(&first) {
            firsts.push(first);
        }
    }
    let rank = |k: &Vec<String>| {
        let first = k.first().map_or("", String::as_str);
        firsts.iter().position(|f| *f == first)
    };
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| rank(&keys[i]));
    order
}

/// How a table groups the runs frame: row keys and column key as String
/// expressions, and the paper's keys of each group's first run.
struct Groups<'a> {
    spec: &'a TableSpec,
    runs: &'a RunsFrame,
    paper: Option<&'a PaperRows>,
    /// The result columns of the row keys (`__row0`, ...).
    row_names: Vec<String>,
    row_exprs: Vec<Expr>,
    /// The paper's keys that are columns of the frame.
    paper_keys: Vec<&'a String>,
}

/// The cells of a table: rows and columns in the order the runs first
/// have them, and each cell's texts (ours, then the paper's).
struct Cells {
    rows: Vec<Vec<String>>,
    cols: Vec<String>,
    text: BTreeMap<(Vec<String>, String), Vec<String>>,
    /// Each cell's statistics, and the paper's text when the table has
    /// the paper's numbers.
    stats: BTreeMap<(Vec<String>, String), (CellStats, Option<String>)>,
}

impl<'a> Groups<'a> {
    fn new(spec: &'a TableSpec, runs: &'a RunsFrame, paper: Option<&'a PaperRows>) -> Self {
        let df = &runs.df;
        let row_names: Vec<String> = (0..spec.rows.len()).map(|i| format!("__row{i}")).collect();
        let row_exprs = spec
            .rows
            .iter()
            .zip(&row_names)
            .map(|(k, n)| frames::key(df, k).alias(n.as_str()))
            .collect();
        let paper_keys = spec
            .paper
            .iter()
            .flat_map(|p| p.keys.keys())
            .filter(|k| df.column(k.as_str()).is_ok())
            .collect();
        Self {
            spec,
            runs,
            paper,
            row_names,
            row_exprs,
            paper_keys,
        }
    }

    /// Aggregates of the paper's keys: their value in a group's first run.
    fn firsts(&self) -> impl Iterator<Item = Expr> + '_ {
        self.paper_keys
            .iter()
            .map(|k| col(k.as_str()).first().alias(format!("__first_{k}")))
    }

    /// The paper's keys of group `i` of `g` (from [`firsts`](Self::firsts)).
    fn point_of(&self, g: &DataFrame, i: usize) -> Result<BTreeMap<String, String>> {
        let mut point = BTreeMap::new();
        for k in &self.paper_keys {
            if let Some(v) = g.column(&format!("__first_{k}"))?.str()?.get(i) {
                point.insert(k.to_string(), v.to_string());
            }
        }
        Ok(point)
    }

    /// The row key of group `i` of `g`.
    fn row_of(&self, g: &DataFrame, i: usize) -> Result<Vec<String>> {
        self.row_names
            .iter()
            .map(|n| frames::text_at(g, n, i))
            .collect()
    }

    /// One group per cell: its runs' statuses and the value over its
    /// completed runs.
    fn cells(&self) -> Result<Cells> {
        let df = &self.runs.df;
        let mut aggs = cell_aggregates(
            df,
            &self.spec.value,
            factor(self.spec.scale, &self.spec.value),
        );
        aggs.extend(self.firsts());
        let col_expr = match &self.spec.cols {
            Some(c) => frames::key(df, c),
            None => lit(""),
        };
        let mut by = self.row_exprs.clone();
        by.push(col_expr.alias("__col"));
        let groups = self
            .runs
            .lazy()
            .group_by_stable(by)
            .agg(aggs)
            .collect()
            .context("could not group the runs into the table's cells")?;
        let mut cells = Cells {
            rows: Vec::new(),
            cols: Vec::new(),
            text: BTreeMap::new(),
            stats: BTreeMap::new(),
        };
        for i in 0..groups.height() {
            let (rk, ck) = (
                self.row_of(&groups, i)?,
                frames::text_at(&groups, "__col", i)?,
            );
            if !cells.rows.contains(&rk) {
                cells.rows.push(rk.clone());
            }
            if !cells.cols.contains(&ck) {
                cells.cols.push(ck.clone());
            }
            let stats = CellStats::of(&groups, i)?;
            let point = self.point_of(&groups, i)?;
            let theirs = self.paper.map(|p| paper_cell(self.spec, p, &point, None));
            cells.text.insert(
                (rk.clone(), ck.clone()),
                std::iter::once(stats.text())
                    .chain(theirs.clone())
                    .collect(),
            );
            cells.stats.insert((rk, ck), (stats, theirs));
        }
        Ok(cells)
    }

    /// The extra columns of each row: means over the row's runs (every
    /// column), optionally relative to a reference row's, with the
    /// paper's text beside each that has one.
    fn extras(&self) -> Result<BTreeMap<Vec<String>, Vec<ExtraCell>>> {
        let df = &self.runs.df;
        let of = |e: &crate::experiment::manifest::ExtraColumn| {
            let v = frames::number(df, &e.value);
            let mut keep = frames::valid().and(v.clone().is_finite());
            for (k, want) in &e.select {
                keep = keep.and(frames::key(df, k).eq(lit(crate::experiment::plan::text(want))));
            }
            (v * lit(factor(e.scale, &e.value))).filter(keep)
        };
        let mut aggs: Vec<Expr> = Vec::new();
        for (j, e) in self.spec.extra.iter().enumerate() {
            aggs.push(of(e).mean().alias(format!("__extra{j}")));
            aggs.push(
                of(e)
                    .count()
                    .cast(DataType::Float64)
                    .alias(format!("__extra_n{j}")),
            );
        }
        aggs.extend(self.firsts());
        let by_row = self
            .runs
            .lazy()
            .group_by_stable(self.row_exprs.clone())
            .agg(aggs)
            .collect()
            .context("could not group the runs into the table's rows")?;
        let mut extras = BTreeMap::new();
        for i in 0..by_row.height() {
            let rk = self.row_of(&by_row, i)?;
            let mut out = Vec::new();
            for (j, e) in self.spec.extra.iter().enumerate() {
                let v = frames::number_at(&by_row, &format!("__extra{j}"), i)?;
                let n = frames::number_at(&by_row, &format!("__extra_n{j}"), i)?.unwrap_or(0.0);
                let value = match &e.relative_to {
                    None => v,
                    Some(reference) => match (v, self.reference_mean(&e.value, reference, &rk)?) {
                        // both sides scaled alike
                        (Some(x), Some(b)) if b != 0.0 => Some(x / (b * factor(e.scale, &e.value))),
                        _ => None,
                    },
                };
                let paper = match (self.paper, &e.paper) {
                    (Some(paper), Some(c)) => {
                        let point = self.point_of(&by_row, i)?;
                        Some(paper_cell(self.spec, paper, &point, Some(c)))
                    }
                    _ => None,
                };
                out.push(ExtraCell {
                    value,
                    n: n as usize,
                    paper,
                });
            }
            extras.insert(rk, out);
        }
        Ok(extras)
    }

    /// The mean of `metric` over the runs of `reference` (grid key ->
    /// value) that share row `rk`'s values for the row keys the reference
    /// leaves free.
    fn reference_mean(
        &self,
        metric: &str,
        reference: &BTreeMap<String, String>,
        rk: &[String],
    ) -> Result<Option<f64>> {
        let df = &self.runs.df;
        let mut matches = lit(true);
        for (k, v) in reference {
            matches = matches.and(frames::key(df, k).eq(lit(v.as_str())));
        }
        for (k, v) in self.spec.rows.iter().zip(rk) {
            if !reference.contains_key(k) {
                matches = matches.and(frames::key(df, k).eq(lit(v.as_str())));
            }
        }
        let v = frames::number(df, metric);
        let usable = frames::valid().and(v.clone().is_finite());
        let mean = self
            .runs
            .lazy()
            .filter(matches)
            .select([v.filter(usable).mean().alias("__mean")])
            .collect()
            .context("could not compute a table's reference row")?;
        frames::number_at(&mean, "__mean", 0)
    }

    /// Every run's value as a comparison counts it (intention to treat,
    /// [`frames::counted`]), by (row, column): its seed (or run id) and
    /// value, for [`Self::differences`] and [`Self::best`].
    fn seeded_cells(
        &self,
    ) -> Result<BTreeMap<(Vec<String>, String), crate::report::stats::Seeded>> {
        let df = &self.runs.df;
        let value = frames::counted(
            df,
            &self.spec.value,
            factor(self.spec.scale, &self.spec.value),
            higher_is_better(&self.spec.value),
        );
        let mut select = self.row_exprs.clone();
        select.push(
            match &self.spec.cols {
                Some(c) => frames::key(df, c),
                None => lit(""),
            }
            .alias("__col"),
        );
        select.push(frames::key(df, SEED_KEY).alias("__seed"));
        select.push(frames::key(df, "run_id").alias("__id"));
        select.push(value.alias("__v"));
        let runs = self
            .runs
            .lazy()
            .select(select)
            .collect()
            .context("could not select the runs for the table's differences")?;
        let values = frames::numbers(&runs, "__v")?;
        let mut by_cell: BTreeMap<(Vec<String>, String), crate::report::stats::Seeded> =
            BTreeMap::new();
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v.filter(|v| !v.is_nan()) else {
                continue;
            };
            let seed = match frames::text_at(&runs, "__seed", i)? {
                s if s.is_empty() => frames::text_at(&runs, "__id", i)?,
                s => s,
            };
            by_cell
                .entry((self.row_of(&runs, i)?, frames::text_at(&runs, "__col", i)?))
                .or_default()
                .push((seed, v));
        }
        Ok(by_cell)
    }

    /// The reference row's value of each row key (`None`: any value).
    fn reference_values(
        &self,
        reference: &BTreeMap<String, yaml_serde::Value>,
    ) -> Vec<Option<String>> {
        self.spec
            .rows
            .iter()
            .map(|k| reference.get(k).map(crate::experiment::plan::text))
            .collect()
    }

    /// The rows of differences to the reference row: for every other row
    /// and column, its completed runs' values minus the reference's in the
    /// same column, paired by seed where both ran the same seeds (Welch
    /// otherwise), as mean ± the half-width of the 95% t interval. The
    /// reference's label and the rows (row label and one cell a column).
    fn differences(
        &self,
        reference: &BTreeMap<String, yaml_serde::Value>,
        cells: &Cells,
    ) -> Result<(String, Vec<Vec<String>>)> {
        let by_cell = self.seeded_cells()?;
        let wanted = self.reference_values(reference);
        let base = cells.rows.iter().find(|rk| is_row(&wanted, rk)).cloned();
        let label = wanted
            .iter()
            .zip(&self.spec.rows)
            .filter_map(|(w, k)| w.as_ref().map(|w| format!("{k}={w}")))
            .collect::<Vec<_>>()
            .join(", ");
        let Some(base) = base else {
            return Ok((format!("{label} (no runs)"), Vec::new()));
        };
        let mut rows = Vec::new();
        for rk in cells.rows.iter().filter(|rk| **rk != base) {
            let mut line = vec![format!("Δ {} − {}", rk.join(" / "), base.join(" / "))];
            for ck in &cells.cols {
                let get = |r: &Vec<String>| {
                    by_cell
                        .get(&(r.clone(), ck.clone()))
                        .cloned()
                        .unwrap_or_default()
                };
                let d = crate::report::stats::difference(&get(rk), &get(&base));
                line.push(d.as_ref().map_or("-".into(), difference_text));
                line.extend(self.paper.map(|_| "-".to_string()));
            }
            rows.push(line);
        }
        Ok((label, rows))
    }

    /// The best row of each column among rows that differ in the last row
    /// key only (per setting of the others), the reference row left out:
    /// the one with the best mean over at least two valid runs, and its
    /// difference to the next best (paired by seed where both ran the
    /// same seeds, Welch otherwise).
    fn best(&self, cells: &Cells) -> Result<Vec<String>> {
        let by_cell = self.seeded_cells()?;
        let higher = higher_is_better(&self.spec.value);
        let reference = self
            .spec
            .reference
            .as_ref()
            .map(|r| self.reference_values(r));
        let is_reference = |rk: &Vec<String>| reference.as_ref().is_some_and(|w| is_row(w, rk));
        // rows grouped by every row key but the last, in table order
        let mut groups: Vec<(&[String], Vec<&Vec<String>>)> = Vec::new();
        for rk in cells.rows.iter().filter(|rk| !is_reference(rk)) {
            let head = &rk[..rk.len().saturating_sub(1)];
            match groups.iter_mut().find(|(h, _)| *h == head) {
                Some((_, members)) => members.push(rk),
                None => groups.push((head, vec![rk])),
            }
        }
        let mut out = Vec::new();
        for (head, members) in &groups {
            for ck in &cells.cols {
                let mut ranked: Vec<(&Vec<String>, f64, usize)> = members
                    .iter()
                    .filter_map(|rk| {
                        let (stats, _) = cells.stats.get(&((*rk).clone(), ck.clone()))?;
                        let c = &stats.counted;
                        let mean = c.mean.filter(|m| m.is_finite() && c.n >= 2)?;
                        Some((*rk, mean, c.n))
                    })
                    .collect();
                if ranked.len() < 2 {
                    continue;
                }
                ranked.sort_by(|a, b| {
                    let o = a.1.total_cmp(&b.1);
                    if higher { o.reverse() } else { o }
                });
                let ((first, mean, n), (second, ..)) = (ranked[0], ranked[1]);
                let get = |r: &Vec<String>| {
                    by_cell
                        .get(&(r.clone(), ck.clone()))
                        .cloned()
                        .unwrap_or_default()
                };
                let ahead = crate::report::stats::difference(&get(first), &get(second))
                    .map_or_else(|| "-".into(), |d| difference_text(&d));
                let mut at: Vec<String> = self.spec.rows[..head.len()]
                    .iter()
                    .zip(head.iter())
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                if let Some(c) = &self.spec.cols {
                    at.push(format!("{c}={ck}"));
                }
                let at = if at.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", at.join(", "))
                };
                let key = self.spec.rows.last().map_or("", String::as_str);
                let last = |r: &Vec<String>| format!("{key}={}", r.last().map_or("", |v| v));
                out.push(format!(
                    "{at}{} {} (n={n}); minus the next, {}: {ahead}",
                    last(first),
                    number(mean),
                    last(second),
                ));
            }
        }
        Ok(out)
    }

    /// The tidy table: a header, then a line per cell (its row and column
    /// keys, the metric, the factor it is multiplied by and [`TIDY_STATS`]) and a line per
    /// extra column of each row (its label, the mean over the row's runs
    /// and their number), with the paper's text last where the table has
    /// the paper's numbers.
    fn tidy(
        &self,
        cells: &Cells,
        extras: &BTreeMap<Vec<String>, Vec<ExtraCell>>,
    ) -> Vec<Vec<String>> {
        let spec = self.spec;
        let mut header: Vec<String> = spec.rows.clone();
        header.extend(spec.cols.clone());
        header.extend(["quantity", "metric", "factor"].map(String::from));
        header.extend(TIDY_STATS.map(String::from));
        if self.paper.is_some() {
            header.push("paper".into());
        }
        let scale = |s: Option<f64>, metric: &str| factor(s, metric).to_string();
        let mut lines = vec![header];
        for rk in &cells.rows {
            for ck in &cells.cols {
                let Some((stats, paper)) = cells.stats.get(&(rk.clone(), ck.clone())) else {
                    continue;
                };
                let mut line = rk.clone();
                line.extend(spec.cols.as_ref().map(|_| ck.clone()));
                line.extend([
                    spec.value.clone(),
                    spec.value.clone(),
                    scale(spec.scale, &spec.value),
                ]);
                line.extend(stats.tidy());
                line.extend(self.paper.map(|_| paper.clone().unwrap_or_default()));
                lines.push(line);
            }
        }
        for rk in &cells.rows {
            for (e, cell) in spec.extra.iter().zip(extras.get(rk).into_iter().flatten()) {
                let mut line = rk.clone();
                line.extend(spec.cols.as_ref().map(|_| String::new()));
                line.extend([e.label.clone(), e.value.clone(), scale(e.scale, &e.value)]);
                line.extend([String::new(), cell.n.to_string(), tidy_number(cell.value)]);
                line.extend((3..TIDY_STATS.len()).map(|_| String::new()));
                line.extend(self.paper.map(|_| cell.paper.clone().unwrap_or_default()));
                lines.push(line);
            }
        }
        lines
    }

    /// The header: the row keys, each column (and the paper's beside it),
    /// then the extra columns.
    fn header(&self, cols: &[String]) -> Vec<String> {
        let spec = self.spec;
        let paper_label = spec
            .paper
            .as_ref()
            .filter(|_| self.paper.is_some())
            .map(|p| &p.label);
        let mut header = vec![spec.rows.join(" / ")];
        for c in cols {
            let name = match &spec.cols {
                Some(t) if !t.is_empty() => format!("{t}={c}"),
                _ => spec.value.clone(),
            };
            match paper_label {
                Some(label) => {
                    header.push(format!("{name} (measured)"));
                    header.push(format!("{name} (paper: {label})"));
                }
                None => header.push(name),
            }
        }
        for e in &spec.extra {
            header.push(e.label.clone());
            if let (Some(label), Some(_)) = (paper_label, &e.paper) {
                header.push(format!("{} (paper: {label})", e.label));
            }
        }
        header
    }
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

/// The aggregates that [`CellStats::of`] reads from a group-by of runs:
/// the runs by health, failed and refused, and `metric` times `factor`
/// over the runs that tested the method (intention to treat,
/// [`frames::counted`]) and over the valid runs alone (health `ok`): each
/// mean, sample sd and count. `df` is the runs frame (for the columns it
/// has).
pub(crate) fn cell_aggregates(df: &DataFrame, metric: &str, factor: f64) -> Vec<Expr> {
    let counted = frames::counted(df, metric, factor, higher_is_better(metric));
    let ok = (frames::number(df, metric) * lit(factor)).filter(frames::valid());
    let mut aggs: Vec<Expr> = Health::ALL
        .iter()
        .map(|h| {
            frames::health()
                .eq(lit(h.text()))
                .cast(DataType::Float64)
                .sum()
                .alias(format!("__health_{}", h.text()))
        })
        .collect();
    aggs.extend([
        len().cast(DataType::Float64).alias("__runs"),
        col("status")
            .eq(lit(RunStatus::Failed.text()))
            .cast(DataType::Float64)
            .sum()
            .alias("__failed"),
        frames::text(df, "premise")
            .eq(lit(Premise::Wrapped.text()))
            .fill_null(lit(false))
            .cast(DataType::Float64)
            .sum()
            .alias("__premise_wrapped"),
        // a run refused at plan time: the memory it would have needed
        frames::number(df, "memory_mb")
            .filter(col("status").eq(lit(RunStatus::Refused.text())))
            .max()
            .alias("__refused_mb"),
    ]);
    for (values, prefix) in [(counted, "__"), (ok, "__ok_")] {
        aggs.extend([
            unoverflowed(&values, |v| v.mean()).alias(format!("{prefix}mean")),
            unoverflowed(&values, |v| v.std(1)).alias(format!("{prefix}sd")),
            values
                .count()
                .cast(DataType::Float64)
                .alias(format!("{prefix}n")),
        ]);
    }
    aggs
}

/// `stat` of `values` (a mean or sd), taken on the values scaled down by
/// the largest where finite values overflow it (ten of 1e308 have the
/// mean 1e308, not ∞); values with an infinity keep their infinite mean.
fn unoverflowed(values: &Expr, stat: impl Fn(Expr) -> Expr) -> Expr {
    let plain = stat(values.clone());
    let (hi, lo) = (values.clone().max(), lit(0.0) - values.clone().min());
    let big = polars::prelude::when(hi.clone().gt_eq(lo.clone()))
        .then(hi)
        .otherwise(lo);
    let scaled = stat(values.clone() / big.clone()) * big;
    polars::prelude::when(
        plain
            .clone()
            .is_finite()
            .or(values.clone().is_finite().all(true).not()),
    )
    .then(plain)
    .otherwise(scaled)
}

/// The columns [`CellStats::tidy`] fills, in order: a cell's runs; the
/// number of runs counted by intention to treat, their mean, sample sd
/// and the mean's 95% t interval; the same over the valid runs alone;
/// and the runs counted by health.
pub(crate) const TIDY_STATS: [&str; 12] = [
    "runs",
    "n",
    "mean",
    "sd",
    "ci_low",
    "ci_high",
    "ok_n",
    "ok_mean",
    "ok_sd",
    "ok_ci_low",
    "ok_ci_high",
    "health",
];

/// A sample's mean, sample sd and size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample {
    pub n: usize,
    pub mean: Option<f64>,
    pub sd: Option<f64>,
}

impl Sample {
    /// The 95% t interval of the mean; none below two values or without
    /// a finite sd.
    pub(crate) fn interval(&self) -> Option<(f64, f64)> {
        let (Some(m), Some(sd)) = (self.mean, self.sd) else {
            return None;
        };
        if self.n < 2 || !sd.is_finite() || !m.is_finite() {
            return None;
        }
        let half =
            crate::report::stats::t_star((self.n - 1) as f64, 0.05) * sd / (self.n as f64).sqrt();
        Some((m - half, m + half))
    }

    /// "0.81 ± 0.02 (n=3)", "0.8 (n=1)", "∞ (n=3)" where a failed run
    /// of an unbounded metric has no value, or "-" without a value.
    pub(crate) fn text(&self) -> String {
        match (self.n, self.mean) {
            (0, _) | (_, None) => "-".into(),
            (n, Some(m)) if m.is_infinite() => {
                format!("{}∞ (n={n})", if m < 0.0 { "-" } else { "" })
            }
            (1, Some(m)) => format!("{} (n=1)", number(m)),
            (n, Some(m)) => format!(
                "{} ± {} (n={n})",
                number(m),
                self.interval()
                    .map_or_else(|| "-".into(), |(lo, hi)| number((hi - lo) / 2.0))
            ),
        }
    }

    fn tidy(&self) -> Vec<String> {
        let (lo, hi) = self.interval().unzip();
        vec![
            self.n.to_string(),
            tidy_number(self.mean),
            tidy_number(self.sd),
            tidy_number(lo),
            tidy_number(hi),
        ]
    }
}

/// One cell of runs: how many there are by health, and the statistics of
/// the value by intention to treat (every run that tested the method, a
/// failed one with what it achieved) and over the valid runs alone. The
/// one definition of a cell, for the formatted tables and the tidy CSV.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CellStats {
    pub runs: usize,
    pub failed: usize,
    /// The most memory a refused run would have needed (MB).
    pub refused_mb: Option<f64>,
    pub by_health: BTreeMap<Health, usize>,
    /// Runs whose method's premise failed (`premise` wrapped), whatever
    /// their health.
    pub wrapped: usize,
    /// Every run that tested the method ([`frames::counted`]).
    pub counted: Sample,
    /// The valid runs (health `ok`) with a value.
    pub ok: Sample,
}

impl CellStats {
    /// Group `i` of a group-by with [`cell_aggregates`].
    pub(crate) fn of(groups: &DataFrame, i: usize) -> Result<Self> {
        let count = |n: &str| -> Result<usize> {
            Ok(frames::number_at(groups, n, i)?.unwrap_or(0.0) as usize)
        };
        let mut by_health = BTreeMap::new();
        for h in Health::ALL {
            by_health.insert(h, count(&format!("__health_{}", h.text()))?);
        }
        let sample = |prefix: &str| -> Result<Sample> {
            Ok(Sample {
                n: count(&format!("{prefix}n"))?,
                mean: frames::number_at(groups, &format!("{prefix}mean"), i)?,
                sd: frames::number_at(groups, &format!("{prefix}sd"), i)?,
            })
        };
        Ok(Self {
            runs: count("__runs")?,
            failed: count("__failed")?,
            refused_mb: frames::number_at(groups, "__refused_mb", i)?,
            by_health,
            wrapped: count("__premise_wrapped")?,
            counted: sample("__")?,
            ok: sample("__ok_")?,
        })
    }

    /// The cell as a table prints it: the mean by intention to treat, the
    /// half-width of its interval and n; where some runs are not ok, the
    /// valid runs' figure beside it and the runs counted by health;
    /// "refused" or "failed" when no run has a result.
    pub(crate) fn text(&self) -> String {
        let premise = premise_text(self.wrapped, self.runs);
        match self.outcome_text() {
            text if premise.is_empty() => text,
            text => format!("{text}; {premise}"),
        }
    }

    /// [`Self::text`] without the premise.
    fn outcome_text(&self) -> String {
        let ok = self.by_health[&Health::Ok];
        if ok == self.runs {
            return self.counted.text();
        }
        if ok == 0
            && self.by_health[&Health::Unfinished] == self.runs
            && let Some(mb) = self.refused_mb
        {
            return format!("refused: needs {:.1} GB", mb / 1e3);
        }
        if ok == 0 && self.failed == self.runs {
            return RunStatus::Failed.text().to_string();
        }
        let counts = counts_text(&self.by_health);
        match (self.counted.n, ok) {
            (0, _) => counts,
            (_, 0) => format!("{}; {counts}", self.counted.text()),
            _ => format!(
                "{}; ok only {}; {counts}",
                self.counted.text(),
                self.ok.text()
            ),
        }
    }

    /// The cell's [`TIDY_STATS`] columns: numbers in full precision
    /// (empty where there is none).
    pub(crate) fn tidy(&self) -> Vec<String> {
        std::iter::once(self.runs.to_string())
            .chain(self.counted.tidy())
            .chain(self.ok.tidy())
            .chain([counts_text(&self.by_health)])
            .collect()
    }
}

/// A number in a tidy CSV: every digit (the shortest text that reads
/// back as the same f64, with an exponent where that is shorter), empty
/// for none or not a number.
pub(crate) fn tidy_number(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(String::new, |v| format!("{v:?}"))
}

/// Whether row `rk` has every value `wanted` names.
fn is_row(wanted: &[Option<String>], rk: &[String]) -> bool {
    wanted
        .iter()
        .zip(rk)
        .all(|(w, v)| w.as_ref().is_none_or(|w| w == v))
}

/// A difference as a table cell: mean ± the half-width of its 95%
/// interval, the test and the smaller n.
fn difference_text(d: &crate::report::stats::Difference) -> String {
    let (lo, hi) = d.interval(0.05);
    let sign = if d.effect > 0.0 { "+" } else { "" };
    format!(
        "{sign}{} ± {} ({}, n={})",
        number(d.effect),
        number((hi - lo) / 2.0),
        d.test.name(),
        d.n_a.min(d.n_b)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::metrics::Cell;
    use crate::records::results::tests::row;

    /// Groups first seen column-major (lr=0.5 of every method, then
    /// lr=0.1) list row by row, as the table does; within a row, in the
    /// order the runs first have them.
    #[test]
    fn compare_nests_groups_by_the_first_key() {
        let keys: Vec<Vec<String>> = [
            ("naive", "0.5"),
            ("moniqua", "0.5"),
            ("naive", "0.1"),
            ("moniqua", "0.1"),
            ("fine", "0.1"),
        ]
        .iter()
        .map(|(m, lr)| vec![m.to_string(), lr.to_string()])
        .collect();
        assert_eq!(nested_order(&keys), [0, 2, 1, 3, 4]);
        assert_eq!(nested_order(&keys[..1]), [0]);
        assert!(nested_order(&[]).is_empty());
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

    /// A table of `final_loss` with a row per algorithm.
    fn by_algorithm(extra: Vec<crate::experiment::manifest::ExtraColumn>) -> TableSpec {
        TableSpec {
            rows: vec!["algorithm".into()],
            cols: None,
            value: "final_loss".into(),
            scale: None,
            paper: None,
            extra,
            reference: None,
        }
    }

    #[test]
    fn tables_aggregate_seeds() {
        let rows = vec![
            row("moniqua", "0", "1.0", "completed"),
            row("moniqua", "1", "3.0", "completed"),
            row("dcd,x", "0", "NaN", "diverged"),
        ];
        let frame = RunsFrame::new(&rows).unwrap();
        let spec = by_algorithm(Vec::new());
        let md = build_table("T", "S", &spec, &frame, None)
            .unwrap()
            .markdown();
        // mean 2, sd 1.414, half-width 12.706 * 1.414 / sqrt(2) = 12.71
        assert!(md.contains("| moniqua | 2.000 ± 12.71 (n=2) |"), "{md}");
        // a diverged run without a loss counts at the worst, unbounded
        assert!(md.contains("| dcd,x | ∞ (n=1); 1 diverged |"), "{md}");
        // a cell with runs that are not valid results: a failed run counts
        // with its value (intention to treat), the valid runs' figure
        // beside it, and their health counted; a silent run is left out
        let mut mixed = rows.clone();
        mixed.push(row("moniqua", "2", "0.1", "completed"));
        mixed[3]
            .metrics
            .insert("health".into(), Cell::Text("collapsed".into()));
        mixed.push(row("moniqua", "3", "50", "completed"));
        mixed[4]
            .metrics
            .insert("health".into(), Cell::Text("silent".into()));
        let t = build_table("T", "S", &spec, &RunsFrame::new(&mixed).unwrap(), None).unwrap();
        // 1, 3 and 0.1: mean 1.367, sd 1.484, half-width 4.303 * 1.484 / sqrt(3)
        assert_eq!(
            t.rows[0],
            [
                "moniqua",
                "1.367 ± 3.687 (n=3); ok only 2.000 ± 12.71 (n=2); 2 ok, 1 collapsed, 1 silent"
            ]
        );
        let table = build_table("T_1", "S", &spec, &frame, None).unwrap();
        insta::assert_snapshot!("table_md", table.markdown());
        insta::assert_snapshot!("table_latex", table.latex());
        insta::assert_snapshot!("table_csv", table.csv().unwrap());
        // an extra column over the runs of one setting only
        let seed0 = by_algorithm(vec![crate::experiment::manifest::ExtraColumn {
            value: "final_loss".into(),
            label: "seed 0".into(),
            paper: None,
            relative_to: None,
            select: [("seed".to_string(), yaml_serde::Value::from(0))].into(),
            scale: Some(2.0),
        }]);
        let t = build_table("T", "S", &seed0, &frame, None).unwrap();
        assert_eq!(t.rows[0], ["moniqua", "2.000 ± 12.71 (n=2)", "2.000"]);
        let bad = TableSpec {
            value: "accuracy".into(),
            ..spec
        };
        assert!(build_table("T", "S", &bad, &frame, None).is_err());
    }

    /// Finite values whose sum overflows have their mean and sd (ten of
    /// 1e308: 1e308, not ∞); a `|` in a value cannot open a cell.
    #[test]
    fn huge_values_keep_their_mean_and_cells_stay_cells() {
        let rows: Vec<_> = (0..10)
            .map(|i| row("a|b", &i.to_string(), "1e308", "completed"))
            .collect();
        let t = build_table(
            "T",
            "S",
            &by_algorithm(Vec::new()),
            &RunsFrame::new(&rows).unwrap(),
            None,
        )
        .unwrap();
        assert_eq!(t.rows[0][1], format!("{} ± 0 (n=10)", number(1e308)));
        assert!(t.markdown().contains("| a\\|b | "), "{}", t.markdown());
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
        let spec = by_algorithm(vec![crate::experiment::manifest::ExtraColumn {
            value: "bytes".into(),
            label: "bytes / allreduce".into(),
            paper: None,
            relative_to: Some([("algorithm".to_string(), "allreduce".to_string())].into()),
            select: BTreeMap::new(),
            scale: None,
        }]);
        let t = build_table("T", "S", &spec, &RunsFrame::new(&rows).unwrap(), None).unwrap();
        // mean of the reference's runs: 2000
        assert_eq!(t.rows[0][2], "1.000");
        assert_eq!(t.rows[1][2], "0.02500");
        let missing = TableSpec {
            extra: vec![crate::experiment::manifest::ExtraColumn {
                relative_to: Some([("algorithm".to_string(), "none".to_string())].into()),
                ..spec.extra[0].clone()
            }],
            ..spec
        };
        let t = build_table("T", "S", &missing, &RunsFrame::new(&rows).unwrap(), None).unwrap();
        assert_eq!(t.rows[1][2], "-", "no reference runs: no ratio");
    }

    /// Difference rows: each row's runs minus the reference row's, paired
    /// by seed where the seeds match, Welch's test where they do not.
    #[test]
    fn a_reference_row_gives_paired_differences() {
        let rows = vec![
            row("d-psgd", "0", "1.0", "completed"),
            row("d-psgd", "1", "2.0", "completed"),
            row("d-psgd", "2", "3.0", "completed"),
            row("moniqua", "0", "1.5", "completed"),
            row("moniqua", "1", "2.4", "completed"),
            row("moniqua", "2", "3.6", "completed"),
            row("choco", "5", "1.0", "completed"),
            row("choco", "6", "2.0", "completed"),
        ];
        let spec = TableSpec {
            reference: Some([("algorithm".to_string(), "d-psgd".into())].into()),
            ..by_algorithm(Vec::new())
        };
        let t = build_table("T", "S", &spec, &RunsFrame::new(&rows).unwrap(), None).unwrap();
        assert_eq!(t.reference.as_deref(), Some("algorithm=d-psgd"));
        // differences 0.5, 0.4, 0.6: mean 0.5, sd 0.1, 4.303 * 0.1 / sqrt(3)
        assert_eq!(
            t.rows[3],
            ["Δ moniqua − d-psgd", "+0.5000 ± 0.2484 (paired t, n=3)"]
        );
        // other seeds: Welch, 1.5 - 2.0
        assert!(
            t.rows[4][1].starts_with("-0.5000 ± ") && t.rows[4][1].contains("Welch t"),
            "{:?}",
            t.rows[4]
        );
        assert_eq!(t.rows.len(), 5);
        assert!(t.markdown().contains("paired by seed"));
        // the lowest loss, the reference left out, and its difference to
        // the next by Welch's test
        assert_eq!(t.best.len(), 1, "{:?}", t.best);
        assert!(
            t.best[0].starts_with(
                "algorithm=choco 1.500 (n=2); minus the next, algorithm=moniqua: -1.000 ± "
            ) && t.best[0].ends_with("(Welch t, n=2)"),
            "{:?}",
            t.best
        );
        assert!(t.markdown().contains(
            "\nLowest mean per column (rows with at least two valid runs, the reference \
             algorithm=d-psgd left out): algorithm=choco 1.500"
        ));
        // the reference names a row by its row keys
        let bad = TableSpec {
            reference: Some([("seed".to_string(), "0".into())].into()),
            ..spec
        };
        let (path, _) = check_spec(&bad, &["algorithm".into(), "seed".into()]).unwrap_err();
        assert_eq!(path, "table.reference.seed");
    }

    /// With two row keys the best is chosen among the rows that share the
    /// first: one line per network, never a method of one network against
    /// another's.
    #[test]
    fn the_best_row_is_chosen_per_setting_of_the_other_row_keys() {
        let mut rows = Vec::new();
        for (net, alg, losses) in [
            ("fast", "a", ["1.0", "1.1"]),
            ("fast", "b", ["2.0", "2.1"]),
            ("slow", "a", ["9.0", "9.1"]),
            ("slow", "b", ["5.0", "5.2"]),
        ] {
            for (seed, loss) in losses.iter().enumerate() {
                let mut r = row(alg, &seed.to_string(), loss, "completed");
                r.run_id = format!("{net}{alg}{seed}");
                r.point.insert("network".into(), net.into());
                rows.push(r);
            }
        }
        let spec = TableSpec {
            rows: vec!["network".into(), "algorithm".into()],
            ..by_algorithm(Vec::new())
        };
        let t = build_table("T", "S", &spec, &RunsFrame::new(&rows).unwrap(), None).unwrap();
        assert_eq!(t.best.len(), 2, "{:?}", t.best);
        assert!(
            t.best[0].starts_with(
                "network=fast: algorithm=a 1.050 (n=2); minus the next, algorithm=b: -1.000"
            ),
            "{:?}",
            t.best
        );
        assert!(
            t.best[1].starts_with(
                "network=slow: algorithm=b 5.100 (n=2); minus the next, algorithm=a: -3.950"
            ),
            "{:?}",
            t.best
        );
    }

    /// LaTeX's special characters are escaped once each, and a line break
    /// in a title cannot end its comment.
    #[test]
    fn latex_escapes_every_special_character_once() {
        let t = Table {
            title: "a\n\\input{x}".into(),
            source: "s".into(),
            value: "v".into(),
            reference: None,
            extras: false,
            header: vec!["a_b".into(), "{c}".into()],
            rows: vec![vec!["\\x".into(), "1 ± 2 & 50% ~^".into()]],
            tidy: Vec::new(),
            best: Vec::new(),
        };
        let tex = t.latex();
        assert!(tex.starts_with("% a \\input{x}\n"), "{tex}");
        assert!(tex.contains("a\\_b & \\{c\\}"), "{tex}");
        assert!(
            tex.contains(
                "\\textbackslash{}x & 1 $\\pm$ 2 \\& 50\\% \\textasciitilde{}\\textasciicircum{}"
            ),
            "{tex}"
        );
    }

    #[test]
    fn the_papers_numbers_sit_beside_ours() {
        // a path inside the project (the tests run in the source tree):
        // scratch/, which git ignores
        let dir =
            std::path::PathBuf::from("scratch").join(format!("test-paper-{}", std::process::id()));
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
        let t = build_table(
            "T",
            "S",
            &spec,
            &RunsFrame::new(&rows).unwrap(),
            Some(&paper),
        )
        .unwrap();
        insta::assert_snapshot!("table_with_paper", t.markdown());
        // the tidy CSV keeps the paper's text beside each cell and extra
        insta::assert_snapshot!("table_with_paper_csv", t.csv().unwrap());
        // sd 7.071 over 2 runs: half-width 12.706 * 7.071 / sqrt(2) = 63.53
        assert_eq!(
            t.rows[0],
            ["moniqua", "85.00 ± 63.53 (n=2)", "91.08 ± 0.19"]
        );
        // a diverged run with a finite value counts with it
        assert_eq!(t.rows[1], ["dcd", "10.00 (n=1); 1 diverged", "diverge"]);
        assert_eq!(t.rows[2], ["choco", "70.00 (n=1)", "-"]);
        let bad: TableSpec = yaml_serde::from_str(&format!(
            "{{rows: [algorithm], value: final_loss, paper: {{file: {}, keys: {{bits: budget}}, value: acc, label: x}}}}",
            csv.display()
        ))
        .unwrap();
        let err = load_paper(&bad).unwrap_err().to_string();
        assert!(err.contains("no column `budget`"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        // a path outside the project is refused, before it is read
        for outside in ["/etc/passwd", "../x.csv"] {
            let spec: TableSpec = yaml_serde::from_str(&format!(
                "{{rows: [algorithm], value: final_loss, paper: {{file: \"{outside}\", keys: {{bits: bits}}, value: acc, label: x}}}}"
            ))
            .unwrap();
            let err = load_paper(&spec).unwrap_err().to_string();
            assert!(err.contains("inside the project"), "{outside}: {err}");
        }
    }
}
