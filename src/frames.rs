//! The results as polars data frames: `runs.parquet` (one row per run, the
//! same columns as runs.csv) and `curves.parquet` (one row per averaged step,
//! the same columns as curves.csv), typed so that a researcher can load them
//! with `pl.read_parquet` and filter or aggregate without parsing strings.
//!
//! Metric columns are typed by their kind (`results::kind`): String, Int64
//! or Float64, with null where a run has no value or no number (the loss of
//! a diverged run). Grid-key columns are inferred: Int64 when every
//! non-empty value is an integer, Float64 when every one is a number,
//! String otherwise; an empty cell is null.

use std::path::Path;

use anyhow::{Context, Result};
use polars::prelude::{Column, DataFrame, IntoColumn, NamedFrom, ParquetWriter, Series};
#[cfg(test)]
use polars::prelude::{ParquetReader, SerReader};

use crate::plot::CurvePoint;
use crate::results::{Cell, Kind, METRICS, RunRecord, kind};

/// One column from its cells, with the inferred type.
fn column(name: &str, cells: &[&str]) -> Column {
    let present = || cells.iter().filter(|c| !c.is_empty());
    let name = name.into();
    if present().all(|c| c.parse::<i64>().is_ok()) && present().next().is_some() {
        let v: Vec<Option<i64>> = cells.iter().map(|c| c.parse().ok()).collect();
        Series::new(name, v).into_column()
    } else if present().all(|c| c.parse::<f64>().is_ok()) && present().next().is_some() {
        let v: Vec<Option<f64>> = cells.iter().map(|c| c.parse().ok()).collect();
        Series::new(name, v).into_column()
    } else {
        let v: Vec<Option<&str>> = cells
            .iter()
            .map(|c| (!c.is_empty()).then_some(*c))
            .collect();
        Series::new(name, v).into_column()
    }
}

/// runs.csv's rows as a frame: `run_id`, the grid keys (sorted), then [`METRICS`].
pub fn runs_frame(rows: &[RunRecord]) -> Result<DataFrame> {
    let keys: Vec<&String> = rows
        .first()
        .map(|r| r.point.keys().collect())
        .unwrap_or_default();
    let mut columns = vec![column(
        "run_id",
        &rows.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(),
    )];
    for k in keys {
        let cells: Vec<&str> = rows
            .iter()
            .map(|r| r.point.get(k).map_or("", String::as_str))
            .collect();
        columns.push(column(k, &cells));
    }
    // metric columns are typed by their kind, not inferred from text
    for m in METRICS {
        let cells = rows.iter().map(|r| r.metrics.get(m));
        let name = m.into();
        columns.push(match kind(m) {
            Kind::Text => {
                let v: Vec<Option<&str>> = cells.map(|c| c.map(Cell::text)).collect();
                Series::new(name, v).into_column()
            }
            Kind::Count => {
                let v: Vec<Option<i64>> = cells
                    .map(|c| c.and_then(Cell::number).map(|n| n as i64))
                    .collect();
                Series::new(name, v).into_column()
            }
            Kind::Sci | Kind::Fixed(_) => {
                let v: Vec<Option<f64>> = cells.map(|c| c.and_then(Cell::number)).collect();
                Series::new(name, v).into_column()
            }
        });
    }
    DataFrame::new(rows.len(), columns).context("could not assemble the runs into a data frame")
}

/// The averaged curves as a frame: `run_id`, the grid keys, then
/// `iteration, epoch, wall_s` and the figure's `y`, one row per point.
pub fn curves_frame(y: &str, curves: &[(RunRecord, Vec<CurvePoint>)]) -> Result<DataFrame> {
    let keys: Vec<&String> = curves
        .first()
        .map(|(r, _)| r.point.keys().collect())
        .unwrap_or_default();
    let per_step = |f: &dyn Fn(&RunRecord) -> String| -> Vec<String> {
        curves
            .iter()
            .flat_map(|(r, pts)| std::iter::repeat_n(f(r), pts.len()))
            .collect()
    };
    let height: usize = curves.iter().map(|(_, p)| p.len()).sum();
    let ids = per_step(&|r| r.run_id.clone());
    let mut columns = vec![column(
        "run_id",
        &ids.iter().map(String::as_str).collect::<Vec<_>>(),
    )];
    for k in keys {
        let cells = per_step(&|r| r.point.get(k).cloned().unwrap_or_default());
        columns.push(column(
            k,
            &cells.iter().map(String::as_str).collect::<Vec<_>>(),
        ));
    }
    let points = || curves.iter().flat_map(|(_, p)| p.iter());
    columns.push(
        Series::new(
            "iteration".into(),
            points().map(|p| p.iteration as i64).collect::<Vec<_>>(),
        )
        .into_column(),
    );
    for (name, f) in [
        (
            "epoch",
            (|p: &CurvePoint| p.epoch) as fn(&CurvePoint) -> f64,
        ),
        ("wall_s", |p| p.wall_s),
        (y, |p| p.value),
    ] {
        columns.push(Series::new(name.into(), points().map(f).collect::<Vec<_>>()).into_column());
    }
    DataFrame::new(height, columns).context("could not assemble the curves into a data frame")
}

/// Writes `df` to `path` as Parquet (zstd), through a temporary file renamed
/// into place, so a reader never sees half a file.
pub fn write_parquet(path: &Path, df: &mut DataFrame) -> Result<()> {
    let tmp = path.with_extension("parquet.tmp");
    let file = std::fs::File::create(&tmp)
        .with_context(|| format!("could not create {}", tmp.display()))?;
    ParquetWriter::new(file)
        .finish(df)
        .with_context(|| format!("could not write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("could not write {}", path.display()))
}

/// Reads a Parquet file back into a frame (the tests' check of what was written).
#[cfg(test)]
pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    let file =
        std::fs::File::open(path).with_context(|| format!("could not open {}", path.display()))?;
    ParquetReader::new(file)
        .finish()
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use polars::prelude::DataType;

    use super::*;

    fn row(id: &str, alg: &str, seed: &str, status: &str, loss: &str) -> RunRecord {
        let point = BTreeMap::from([
            ("algorithm".to_string(), alg.to_string()),
            ("seed".to_string(), seed.to_string()),
        ]);
        let metrics: BTreeMap<String, Cell> =
            [("status", status), ("final_loss", loss), ("bytes", "4096")]
                .iter()
                .filter_map(|(m, v)| Some((m.to_string(), Cell::parse(m, v)?)))
                .collect();
        RunRecord {
            run_id: id.into(),
            point,
            metrics,
        }
    }

    #[test]
    fn runs_round_trip_through_parquet_with_typed_columns() {
        let rows = vec![
            row("a1", "moniqua", "0", "completed", "0.25"),
            row("b2", "dcd", "1", "diverged", "NaN"),
        ];
        let mut df = runs_frame(&rows).unwrap();
        assert_eq!(df.height(), 2);
        assert_eq!(df.width(), 1 + 2 + METRICS.len());
        let dir = std::env::temp_dir().join(format!("repro-frames-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.parquet");
        write_parquet(&path, &mut df).unwrap();
        let back = read_parquet(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.height(), 2);
        let dtype = |c: &str| back.column(c).unwrap().dtype().clone();
        assert_eq!(dtype("seed"), DataType::Int64);
        assert_eq!(dtype("bytes"), DataType::Int64);
        assert_eq!(dtype("final_loss"), DataType::Float64);
        assert_eq!(dtype("algorithm"), DataType::String);
        assert_eq!(dtype("status"), DataType::String);
        let loss = back.column("final_loss").unwrap().f64().unwrap();
        assert_eq!(loss.get(0), Some(0.25));
        assert_eq!(
            loss.get(1),
            None,
            "a diverged run's loss is no number: null"
        );
        let status = back.column("status").unwrap().str().unwrap();
        assert_eq!(status.get(1), Some("diverged"));
        // an empty cell is null, not zero
        assert_eq!(back.column("wall_s").unwrap().null_count(), 2);
    }

    #[test]
    fn curves_have_one_row_per_step() {
        let pts = |n: u64| {
            (0..n)
                .map(|i| CurvePoint {
                    iteration: i,
                    epoch: i as f64 / 10.0,
                    wall_s: i as f64 * 0.5,
                    value: 2.0 - i as f64 * 0.1,
                })
                .collect::<Vec<_>>()
        };
        let curves = vec![
            (row("a1", "moniqua", "0", "completed", "1"), pts(3)),
            (row("b2", "d-psgd", "0", "completed", "1"), pts(2)),
        ];
        let df = curves_frame("train_loss", &curves).unwrap();
        assert_eq!(df.height(), 5);
        let ids = df.column("run_id").unwrap().str().unwrap();
        assert_eq!(ids.get(3), Some("b2"));
        let alg = df.column("algorithm").unwrap().str().unwrap();
        assert_eq!(alg.get(2), Some("moniqua"));
        let it = df.column("iteration").unwrap().i64().unwrap();
        assert_eq!(it.get(4), Some(1));
        let loss = df.column("train_loss").unwrap().f64().unwrap();
        assert_eq!(loss.get(1), Some(1.9));
    }

    #[test]
    fn a_column_of_empty_cells_is_a_null_string_column() {
        let c = column("bytes_check", &["", ""]);
        assert_eq!(c.dtype(), &DataType::String);
        assert_eq!(c.null_count(), 2);
        let mixed = column("x", &["1", "2.5", ""]);
        assert_eq!(mixed.dtype(), &DataType::Float64);
    }
}
