//! Results of an experiment: `runs.csv` (one row per run) and a Markdown
//! table rendered from it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::manifest::TableSpec;

/// One row of runs.csv: the grid point, then the measured columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub run_id: String,
    pub point: BTreeMap<String, String>,
    pub metrics: BTreeMap<String, String>,
}

/// The measured columns, in order.
pub const METRICS: [&str; 19] = [
    "status",
    "final_loss",
    "local_loss",
    "grad_norm_sq",
    "consensus",
    "bytes",
    "virtual_s",
    "hash_failures",
    "test_accuracy",
    "avg_test_accuracy",
    "wall_s",
    "epoch_time_s",
    "wire_bound_epoch_s",
    "time_over_bound",
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
pub fn write_csv(path: &Path, rows: &[Row]) -> Result<()> {
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
            out.push_str(&escape(r.metrics.get(m).map_or("", String::as_str)));
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
pub fn read_csv(path: &Path) -> Result<Vec<Row>> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "could not read {}; run the experiment first (`repro run`)",
            path.display()
        )
    })?;
    let mut lines = text.lines();
    let header = split_csv_line(lines.next().context("runs.csv is empty")?);
    if header.first().map(String::as_str) != Some("run_id") || header.len() < 1 + METRICS.len() {
        bail!(
            "{} does not look like a runs.csv written by repro",
            path.display()
        );
    }
    let grid = &header[1..header.len() - METRICS.len()];
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
            Ok(Row {
                run_id: f[0].clone(),
                point: grid
                    .iter()
                    .cloned()
                    .zip(f[1..1 + grid.len()].iter().cloned())
                    .collect(),
                metrics: METRICS
                    .iter()
                    .map(|m| m.to_string())
                    .zip(f[1 + grid.len()..].iter().cloned())
                    .collect(),
            })
        })
        .collect()
}

/// A Markdown table: `spec.rows` keys down, `spec.cols` values across, the
/// metric in the cells as `mean +- sd` over the remaining grid keys (seeds),
/// and `diverged` where any run diverged.
pub fn render_markdown(
    title: &str,
    source: &str,
    spec: &TableSpec,
    rows: &[Row],
) -> Result<String> {
    if !METRICS.contains(&spec.value.as_str()) {
        bail!(
            "table value `{}` is not a column of runs.csv ({})",
            spec.value,
            METRICS.join(", ")
        );
    }
    let row_key = |r: &Row| {
        spec.rows
            .iter()
            .map(|k| r.point.get(k).cloned().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    let col_key = |r: &Row| {
        spec.cols
            .as_ref()
            .and_then(|c| r.point.get(c).cloned())
            .unwrap_or_default()
    };
    let mut row_keys: Vec<Vec<String>> = Vec::new();
    let mut col_keys: Vec<String> = Vec::new();
    let mut cells: BTreeMap<(Vec<String>, String), Vec<&Row>> = BTreeMap::new();
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
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# {title}\n\nSource: {source}. Cells: `{}` (mean ± sd over runs).\n",
        spec.value
    );
    let col_title = spec.cols.clone().unwrap_or_default();
    let _ = write!(out, "| {} |", spec.rows.join(" / "));
    for c in &col_keys {
        let _ = write!(
            out,
            " {} |",
            if col_title.is_empty() {
                spec.value.clone()
            } else {
                format!("{col_title}={c}")
            }
        );
    }
    let _ = write!(out, "\n|{}", "---|".repeat(col_keys.len() + 1));
    for rk in &row_keys {
        let _ = write!(out, "\n| {} |", rk.join(" / "));
        for ck in &col_keys {
            let cell = match cells.get(&(rk.clone(), ck.clone())) {
                None => "-".to_string(),
                Some(runs)
                    if runs.iter().any(|r| {
                        r.metrics.get("status").map(String::as_str) == Some("diverged")
                    }) =>
                {
                    "diverged".to_string()
                }
                Some(runs) => {
                    let v: Vec<f64> = runs
                        .iter()
                        .filter_map(|r| r.metrics.get(&spec.value)?.parse().ok())
                        .collect();
                    mean_sd(&v)
                }
            };
            let _ = write!(out, " {cell} |");
        }
    }
    out.push('\n');
    Ok(out)
}

fn mean_sd(v: &[f64]) -> String {
    if v.is_empty() {
        return "-".into();
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    if v.len() == 1 {
        return format!("{mean:.4e}");
    }
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt();
    format!("{mean:.4e} ± {sd:.1e}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(alg: &str, seed: &str, loss: &str, status: &str) -> Row {
        Row {
            run_id: format!("{alg}{seed}"),
            point: [
                ("algorithm".to_string(), alg.to_string()),
                ("seed".to_string(), seed.to_string()),
            ]
            .into(),
            metrics: METRICS
                .iter()
                .map(|m| {
                    let v = match *m {
                        "status" => status.to_string(),
                        "final_loss" => loss.to_string(),
                        _ => "0".to_string(),
                    };
                    (m.to_string(), v)
                })
                .collect(),
        }
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
        };
        let md = render_markdown("T", "S", &spec, &back).unwrap();
        assert!(md.contains("| moniqua | 2.0000e0 ± 1.4e0 |"), "{md}");
        assert!(md.contains("| dcd,x | diverged |"), "{md}");
        let bad = TableSpec {
            value: "accuracy".into(),
            ..spec
        };
        assert!(render_markdown("T", "S", &bad, &back).is_err());
    }
}
