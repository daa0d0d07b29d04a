//! The runs grouped into the table's rows and columns: the nested order of
//! the row keys, each cell's values, and the rendered rows.

use super::*;

/// The order of groups whose keys are `keys` (in the order the runs first
/// have each combination), nested by the first key: every group of the
/// first key's first value, then of its second, each set in its own
/// order. A table with one row key and its column key lists its cells so.
pub(super) fn nested_order(keys: &[Vec<String>]) -> Vec<usize> {
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
pub(super) struct Groups<'a> {
    pub(super) spec: &'a TableSpec,
    pub(super) runs: &'a RunsFrame,
    pub(super) paper: Option<&'a PaperRows>,
    /// The result columns of the row keys (`__row0`, ...).
    pub(super) row_names: Vec<String>,
    pub(super) row_exprs: Vec<Expr>,
    /// The paper's keys that are columns of the frame.
    pub(super) paper_keys: Vec<&'a String>,
}

/// The cells of a table: rows and columns in the order the runs first
/// have them, and each cell's texts (ours, then the paper's).
pub(super) struct Cells {
    pub(super) rows: Vec<Vec<String>>,
    pub(super) cols: Vec<String>,
    pub(super) text: BTreeMap<(Vec<String>, String), Vec<String>>,
    /// Each cell's statistics, and the paper's text when the table has
    /// the paper's numbers.
    pub(super) stats: BTreeMap<(Vec<String>, String), (CellStats, Option<String>)>,
}

impl<'a> Groups<'a> {
    pub(super) fn new(
        spec: &'a TableSpec,
        runs: &'a RunsFrame,
        paper: Option<&'a PaperRows>,
    ) -> Self {
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
    pub(super) fn firsts(&self) -> impl Iterator<Item = Expr> + '_ {
        self.paper_keys
            .iter()
            .map(|k| col(k.as_str()).first().alias(format!("__first_{k}")))
    }

    /// The paper's keys of group `i` of `g` (from [`firsts`](Self::firsts)).
    pub(super) fn point_of(&self, g: &DataFrame, i: usize) -> Result<BTreeMap<String, String>> {
        let mut point = BTreeMap::new();
        for k in &self.paper_keys {
            if let Some(v) = g.column(&format!("__first_{k}"))?.str()?.get(i) {
                point.insert(k.to_string(), v.to_string());
            }
        }
        Ok(point)
    }

    /// The row key of group `i` of `g`.
    pub(super) fn row_of(&self, g: &DataFrame, i: usize) -> Result<Vec<String>> {
        self.row_names
            .iter()
            .map(|n| frames::text_at(g, n, i))
            .collect()
    }

    /// One group per cell: its runs' statuses and the value over its
    /// completed runs.
    pub(super) fn cells(&self) -> Result<Cells> {
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
    pub(super) fn extras(&self) -> Result<BTreeMap<Vec<String>, Vec<ExtraCell>>> {
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
    pub(super) fn reference_mean(
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
    pub(super) fn seeded_cells(
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
    pub(super) fn reference_values(
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
    pub(super) fn differences(
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
    pub(super) fn best(&self, cells: &Cells) -> Result<Vec<String>> {
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
    pub(super) fn tidy(
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
    pub(super) fn header(&self, cols: &[String]) -> Vec<String> {
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
