//! The results engine: the runs and the curves as polars data frames, built
//! once from the run records. Tables (`table::build_table`) and figures
//! (`plot::panels`, `plot::sweep_panels`) are group-by queries on them, and
//! they are exported as `runs.parquet` and `curves.parquet`.
//!
//! In the frames, grid keys are String columns holding the values as the
//! manifest wrote them, so a table's labels are the manifest's. Metric
//! columns are typed by their kind (`metrics::kind`): String, Int64 or
//! Float64, null where a run has no value or no number (the loss of a
//! diverged run). On export, a grid-key column becomes Int64 when every
//! non-empty value is an integer, Float64 when every one is a number.

use std::path::Path;

use anyhow::{Context, Result};
use polars::prelude::{
    Column, CompatLevel, DataFrame, DataType, Expr, IntoColumn, IntoLazy, LazyFrame, NamedFrom,
    SchemaExt, Series, col, lit, when,
};
use polars_io::SerReader;
use polars_io::parquet::read::ParquetReader;
use polars_io::parquet::write::{KeyValueMetadata, ParquetWriter};

use crate::records::curves::{CurvePoint, RunCurve};
use crate::records::metrics::{self, Cell, Kind, kind};
use crate::records::results::{self, RunRecord};
use crate::records::results_dir::Entry;

/// One column from its cells, with the inferred type.
fn column(name: &str, cells: &[Option<&str>]) -> Column {
    let present = || cells.iter().flatten().filter(|c| !c.is_empty());
    let name = name.into();
    let any = present().next().is_some();
    if any && present().all(|c| c.parse::<i64>().is_ok()) {
        let v: Vec<Option<i64>> = cells
            .iter()
            .map(|c| c.and_then(|c| c.parse().ok()))
            .collect();
        Series::new(name, v).into_column()
    } else if any && present().all(|c| c.parse::<f64>().is_ok()) {
        let v: Vec<Option<f64>> = cells
            .iter()
            .map(|c| c.and_then(|c| c.parse().ok()))
            .collect();
        Series::new(name, v).into_column()
    } else {
        text_column(name.as_str(), cells)
    }
}

/// A flag's text as a boolean: none where it is not known ("unknown").
fn flag(text: Option<&str>) -> Option<bool> {
    match text {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    }
}

/// A String column; an empty cell is null.
fn text_column(name: &str, cells: &[Option<&str>]) -> Column {
    let v: Vec<Option<&str>> = cells.iter().map(|c| c.filter(|c| !c.is_empty())).collect();
    Series::new(name.into(), v).into_column()
}

/// The grid keys of a set of runs, sorted (the first run's: every run of
/// an experiment has the same keys).
fn grid_keys(rows: &[&RunRecord]) -> Vec<String> {
    rows.first()
        .map(|r| r.point.keys().cloned().collect())
        .unwrap_or_default()
}

/// `run_id` and the grid keys of `rows`, each repeated `times(i)` times.
fn id_and_keys(
    rows: &[&RunRecord],
    keys: &[String],
    times: &dyn Fn(usize) -> usize,
) -> Vec<Column> {
    let repeat = |f: &dyn Fn(&RunRecord) -> Option<&str>| -> Vec<Option<&str>> {
        rows.iter()
            .enumerate()
            .flat_map(|(i, r)| std::iter::repeat_n(f(r), times(i)))
            .collect()
    };
    let mut columns = vec![text_column("run_id", &repeat(&|r| Some(&r.run_id)))];
    for k in keys {
        columns.push(text_column(
            k,
            &repeat(&|r| r.point.get(k).map(String::as_str)),
        ));
    }
    columns
}

/// Grid-key columns retyped for export ([`column`]'s inference).
fn typed_keys(df: &DataFrame, keys: &[String]) -> Result<DataFrame> {
    let mut out = df.clone();
    for k in keys {
        let text = df.column(k)?.str()?.clone();
        let cells: Vec<Option<&str>> = text.iter().collect();
        out.replace(k, column(k, &cells))?;
    }
    Ok(out)
}

/// A grid key (or any column) as a String expression: "" where a run
/// lacks it, and for a key no run has.
pub(crate) fn key(frame: &DataFrame, k: &str) -> Expr {
    if frame.column(k).is_ok() {
        col(k).cast(DataType::String).fill_null(lit(""))
    } else {
        lit("")
    }
}

/// Grid key `k`'s values as numbers (`bits: 2` is the text "2"): null
/// where a value is not a number or the frame has no such key.
pub(crate) fn key_number(frame: &DataFrame, k: &str) -> Expr {
    if frame.column(k).is_ok() {
        col(k).cast(DataType::Float64)
    } else {
        lit(polars::prelude::Null {}).cast(DataType::Float64)
    }
}

/// A column as a Float64 expression: null for a text column, and for a
/// column the frame does not have.
pub(crate) fn number(frame: &DataFrame, name: &str) -> Expr {
    match frame.column(name).map(|c| c.dtype().clone()) {
        Ok(DataType::Float64 | DataType::Int64) => col(name).cast(DataType::Float64),
        _ => lit(polars::prelude::Null {}).cast(DataType::Float64),
    }
}

/// Column `name` of `frame` as text, or null where the frame has no such
/// text column (a record written before the column existed).
pub(crate) fn text(frame: &DataFrame, name: &str) -> Expr {
    match frame.column(name).map(|c| c.dtype().clone()) {
        Ok(DataType::String) => col(name),
        _ => lit(polars::prelude::Null {}).cast(DataType::String),
    }
}

/// Each run's health word: its `health` cell, else (a record never
/// judged) what its status implies (`Health::of_status`).
pub(crate) fn health() -> Expr {
    use crate::launch::summary::RunStatus;
    use crate::records::health::Health;
    let from_status = RunStatus::ALL
        .iter()
        .fold(lit(Health::Unfinished.text()), |otherwise, s| {
            when(col("status").eq(lit(s.text())))
                .then(lit(Health::of_status(*s).text()))
                .otherwise(otherwise)
        });
    col("health").fill_null(from_status)
}

/// Whether a run is a valid result (`health` ok): the runs a table's
/// value, a claim and a tuning choice stand on.
pub(crate) fn valid() -> Expr {
    health().eq(lit(crate::records::health::Health::Ok.text()))
}

/// Each run's health kind (`Health::kind`), from its health word.
pub(crate) fn health_kind() -> Expr {
    use crate::records::health::{Health, Kind};
    Health::ALL
        .iter()
        .fold(lit(Kind::NotTested.text()), |otherwise, h| {
            when(health().eq(lit(h.text())))
                .then(lit(h.kind().text()))
                .otherwise(otherwise)
        })
}

/// `value` (column `metric` times `factor`) as a comparison counts each
/// run by intention to treat, the frame form of `health::counted`: a
/// valid run's value; a failed run's value where finite, else the worst
/// the metric can take for it (its chance accuracy, scaled, or an
/// infinity); null for a run left out.
pub(crate) fn counted(df: &DataFrame, metric: &str, factor: f64, higher: bool) -> Expr {
    use crate::records::health::{self, Kind};
    let value = number(df, metric) * lit(factor);
    let finite = value.clone().is_finite().fill_null(lit(false));
    let unbounded = health::worst(metric, None, higher);
    let worst = if metrics::is_accuracy(metric) {
        (number(df, "chance_accuracy") * lit(factor)).fill_null(lit(unbounded))
    } else {
        lit(unbounded)
    };
    let kind = health_kind();
    when(kind.clone().eq(lit(Kind::Ok.text())).and(finite.clone()))
        .then(value.clone())
        .when(kind.eq(lit(Kind::MethodFailed.text())))
        .then(when(finite).then(value).otherwise(worst))
        .otherwise(lit(polars::prelude::Null {}).cast(DataType::Float64))
}

/// String cell `i` of column `name` of a query's result ("" when null).
pub(crate) fn text_at(df: &DataFrame, name: &str, i: usize) -> Result<String> {
    Ok(df
        .column(name)?
        .str()?
        .get(i)
        .unwrap_or_default()
        .to_string())
}

/// Column `name` of a query's result as numbers, cast once.
pub(crate) fn numbers(df: &DataFrame, name: &str) -> Result<Vec<Option<f64>>> {
    let column = df.column(name)?.cast(&DataType::Float64)?;
    Ok(column.f64()?.iter().collect())
}

/// Number cell `i` of column `name` of a query's result.
pub(crate) fn number_at(df: &DataFrame, name: &str, i: usize) -> Result<Option<f64>> {
    Ok(df.column(name)?.cast(&DataType::Float64)?.f64()?.get(i))
}

/// The runs: `run_id`, the grid keys (sorted), then [`metrics::columns`], one row
/// per run.
#[derive(Debug, Clone)]
pub(crate) struct RunsFrame {
    pub df: DataFrame,
    keys: Vec<String>,
}

impl RunsFrame {
    pub(crate) fn new(rows: &[RunRecord]) -> Result<Self> {
        let rows: Vec<&RunRecord> = rows.iter().collect();
        let keys = grid_keys(&rows);
        let mut columns = id_and_keys(&rows, &keys, &|_| 1);
        // metric columns are typed by their kind, not inferred from text
        for m in metrics::columns() {
            let cells = rows.iter().map(|r| r.metrics.get(m));
            let name = m.into();
            columns.push(match kind(m) {
                // a flag: true, false, or null where it is not known
                Kind::Text if m == "git_dirty" => {
                    let v: Vec<Option<bool>> = cells.map(|c| flag(c.map(Cell::text))).collect();
                    Series::new(name, v).into_column()
                }
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
        let df = DataFrame::new(rows.len(), columns)
            .context("could not assemble the runs into a data frame")?;
        Ok(Self { df, keys })
    }

    pub(crate) fn lazy(&self) -> LazyFrame {
        self.df.clone().lazy()
    }

    /// The grid keys, sorted.
    pub(crate) fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The frame as runs.parquet holds it (grid keys typed).
    pub(crate) fn export(&self) -> Result<DataFrame> {
        typed_keys(&self.df, &self.keys)
    }

    /// A runs.parquet read back as the frame it was exported from: grid
    /// keys as text again, every registry column in its kind's type (all
    /// null where the file lacks it, as a file from an older build does),
    /// and `experiment` and `scale` set to `experiment` and `scale` where
    /// the file has no value.
    pub(crate) fn from_parquet(df: &DataFrame, experiment: &str, scale: &str) -> Result<Self> {
        let height = df.height();
        let known: Vec<&str> = metrics::columns().collect();
        let mut keys: Vec<String> = df
            .get_column_names()
            .iter()
            .map(|c| c.to_string())
            .filter(|c| c != "run_id" && !known.contains(&c.as_str()))
            .collect();
        keys.sort();
        let text = |name: &str| -> Result<Column> { Ok(df.column(name)?.cast(&DataType::String)?) };
        let mut columns = vec![text("run_id")?];
        for k in &keys {
            columns.push(text(k)?);
        }
        for m in known {
            let want = match (m, kind(m)) {
                ("git_dirty", _) => DataType::Boolean,
                (_, Kind::Text) => DataType::String,
                (_, Kind::Count) => DataType::Int64,
                (_, Kind::Sci | Kind::Fixed(_)) => DataType::Float64,
            };
            let fallback = match m {
                "experiment" => Some(experiment),
                "scale" => Some(scale),
                _ => None,
            };
            let c = match df.column(m) {
                // an older file's "true"/"false" text
                Ok(c) if want == DataType::Boolean && c.dtype() == &DataType::String => {
                    let v: Vec<Option<bool>> = c.str()?.iter().map(flag).collect();
                    Series::new(m.into(), v).into_column()
                }
                Ok(c) => c.cast(&want)?,
                Err(_) => Column::full_null(m.into(), height, &want),
            };
            let c = match fallback {
                Some(f) => {
                    let v: Vec<String> = c
                        .str()?
                        .iter()
                        .map(|t| t.filter(|t| !t.is_empty()).unwrap_or(f).to_string())
                        .collect();
                    Series::new(m.into(), v).into_column()
                }
                None => c,
            };
            columns.push(c);
        }
        let df = DataFrame::new(height, columns).context("could not rebuild a runs frame")?;
        Ok(Self { df, keys })
    }

    /// The runs of several frames in one, in order: the union of their
    /// grid keys (null where a frame lacks one).
    pub(crate) fn concat(frames: &[RunsFrame]) -> Result<Self> {
        let mut keys: Vec<String> = frames.iter().flat_map(|f| f.keys.clone()).collect();
        keys.sort();
        keys.dedup();
        let mut order: Vec<String> = vec!["run_id".into()];
        order.extend(keys.iter().cloned());
        order.extend(metrics::columns().map(String::from));
        let mut out: Option<DataFrame> = None;
        for f in frames {
            let mut df = f.df.clone();
            for k in &keys {
                if df.column(k).is_err() {
                    df.with_column(Column::full_null(
                        k.as_str().into(),
                        df.height(),
                        &DataType::String,
                    ))?;
                }
            }
            let df = df.select(order.iter().map(String::as_str))?;
            out = Some(match out {
                None => df,
                Some(mut all) => {
                    all.vstack_mut(&df)
                        .context("could not put the runs of several files together")?;
                    all
                }
            });
        }
        let df = match out {
            Some(df) => df,
            None => RunsFrame::new(&[])?.df,
        };
        Ok(Self { df, keys })
    }
}

/// The averaged curves of one figure: `run_id`, the grid keys, then
/// `iteration, epoch, wall_s, bytes` and the figure's `y`, one row per
/// point.
#[derive(Debug, Clone)]
pub(crate) struct CurvesFrame {
    pub df: DataFrame,
    keys: Vec<String>,
    /// The column holding the figure's `y`.
    pub y: String,
}

impl CurvesFrame {
    pub(crate) fn new(y: &str, curves: &[RunCurve]) -> Result<Self> {
        let rows: Vec<&RunRecord> = curves.iter().map(|(r, _)| r).collect();
        let keys = grid_keys(&rows);
        let height: usize = curves.iter().map(|(_, p)| p.len()).sum();
        let mut columns = id_and_keys(&rows, &keys, &|i| curves[i].1.len());
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
        ] {
            columns
                .push(Series::new(name.into(), points().map(f).collect::<Vec<_>>()).into_column());
        }
        columns.push(
            Series::new(
                "bytes".into(),
                points().map(|p| p.bytes).collect::<Vec<_>>(),
            )
            .into_column(),
        );
        columns.push(
            Series::new(y.into(), points().map(|p| p.value).collect::<Vec<_>>()).into_column(),
        );
        let df = DataFrame::new(height, columns)
            .context("could not assemble the curves into a data frame")?;
        Ok(Self {
            df,
            keys,
            y: y.to_string(),
        })
    }

    pub(crate) fn lazy(&self) -> LazyFrame {
        self.df.clone().lazy()
    }

    /// The frame as curves.parquet holds it (grid keys typed).
    pub(crate) fn export(&self) -> Result<DataFrame> {
        typed_keys(&self.df, &self.keys)
    }
}

/// The curves of `y` that a curves.parquet written by [`CurvesFrame::export`]
/// holds for `runs`, in the order of `runs` (a run it lacks is left out).
/// This is how a figure is drawn from committed results, whose raw logs are
/// not kept. A file written before bytes were recorded has no `bytes`.
pub(crate) fn read_curves(path: &Path, y: &str, runs: &[RunRecord]) -> Result<Vec<RunCurve>> {
    let df = read_parquet(path)?;
    if df.column(y).is_err() {
        anyhow::bail!(
            "{} holds no `{y}` curves (its columns: {}); rerun the experiment to draw `{y}`",
            path.display(),
            df.get_column_names()
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let bad = |c: &str| format!("{} has no readable `{c}` column", path.display());
    let ids = df
        .column("run_id")
        .and_then(|c| c.str().cloned())
        .with_context(|| bad("run_id"))?;
    let floats = |c: &str| -> Result<Vec<Option<f64>>> { numbers(&df, c).with_context(|| bad(c)) };
    let (iteration, epoch, wall_s, value) = (
        floats("iteration")?,
        floats("epoch")?,
        floats("wall_s")?,
        floats(y)?,
    );
    let bytes = match df.column("bytes") {
        Ok(_) => floats("bytes")?,
        Err(_) => vec![None; df.height()],
    };
    let mut by_run: std::collections::HashMap<&str, Vec<CurvePoint>> = Default::default();
    for (i, id) in ids.iter().enumerate() {
        let (Some(id), Some(it)) = (id, iteration[i]) else {
            anyhow::bail!("{}: row {i} has no run id or iteration", path.display());
        };
        by_run.entry(id).or_default().push(CurvePoint {
            iteration: it as u64,
            epoch: epoch[i].unwrap_or(f64::NAN),
            wall_s: wall_s[i].unwrap_or(f64::NAN),
            value: value[i].unwrap_or(f64::NAN),
            bytes: bytes[i],
        });
    }
    Ok(runs
        .iter()
        .filter_map(|r| Some((r.clone(), by_run.remove(r.run_id.as_str())?)))
        .collect())
}

/// Writes `df` to `path` as Parquet (zstd), through a temporary file renamed
/// into place, so a reader never sees half a file.
///
/// The file's Arrow schema names plain (large) strings, not the string views
/// polars uses inside: pyarrow reads views but cannot filter on them, and
/// pandas and older readers need the plain type. The column data is the same
/// either way (a Parquet string column).
pub(crate) fn write_parquet(
    path: &Path,
    mut df: DataFrame,
    metadata: Vec<(String, String)>,
) -> Result<()> {
    let (file, tmp) = crate::util::atomic::create_temp(path)?;
    let schema = df.schema().to_arrow(CompatLevel::oldest());
    let arrow_schema = polars_parquet::write::schema_to_metadata_key(&schema);
    let mut pairs = vec![(arrow_schema.key, arrow_schema.value.unwrap_or_default())];
    pairs.extend(metadata);
    let metadata = KeyValueMetadata::from_static(pairs);
    let written = ParquetWriter::new(std::io::BufWriter::new(file))
        .with_key_value_metadata(Some(metadata))
        .finish(&mut df)
        .map(|_| ())
        .with_context(|| format!("could not write {}", tmp.display()));
    crate::util::atomic::finish(&tmp, path, written)
}

/// The key-value metadata of a Parquet file of `rows`, so a file read
/// alone says what it holds: `repro.experiment`, `repro.scale` and
/// `repro.source` (the source ids of the builds that ran the rows; each
/// distinct non-empty value once, in order, joined by ", "), and
/// `repro.written_by`, the build that wrote the file.
pub(crate) fn metadata(rows: &[RunRecord]) -> Vec<(String, String)> {
    let distinct = |name: &str| {
        let mut seen: Vec<&str> = Vec::new();
        for r in rows {
            if let Some(v) = r.metrics.get(name).map(Cell::text)
                && !v.is_empty()
                && !seen.contains(&v)
            {
                seen.push(v);
            }
        }
        seen.join(", ")
    };
    let mut pairs: Vec<(String, String)> = ["experiment", "scale", "source"]
        .iter()
        .map(|k| (format!("repro.{k}"), distinct(k)))
        .collect();
    pairs.push(("repro.written_by".into(), repro_build::VERSION.to_string()));
    pairs
}

/// The key-value metadata of a Parquet file (the Arrow schema left out).
pub(crate) fn read_metadata(path: &Path) -> Result<Vec<(String, String)>> {
    let file = crate::util::read::open(path, crate::util::read::MAX_PARQUET)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("could not open {}", path.display()))?;
    let mut reader = ParquetReader::new(file);
    let meta = reader
        .get_metadata()
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))?;
    Ok(meta
        .key_value_metadata()
        .iter()
        .flatten()
        .filter(|kv| kv.key != "ARROW:schema")
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect())
}

/// Reads a Parquet file back into a frame.
pub(crate) fn read_parquet(path: &Path) -> Result<DataFrame> {
    let file = crate::util::read::open(path, crate::util::read::MAX_PARQUET)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("could not open {}", path.display()))?;
    ParquetReader::new(file)
        .finish()
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))
}

/// Writes every run of a results directory, `merged`, as its runs.csv and
/// runs.parquet.
pub(crate) fn write_runs(out: &Path, merged: &[RunRecord]) -> Result<()> {
    results::write_csv(&out.join(Entry::Runs.name()), merged)?;
    write_parquet(
        &out.join(Entry::RunsParquet.name()),
        RunsFrame::new(merged)?.export()?,
        metadata(merged),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

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
        let df = RunsFrame::new(&rows).unwrap().export().unwrap();
        assert_eq!(df.height(), 2);
        assert_eq!(df.width(), 1 + 2 + metrics::columns().count());
        let dir = std::env::temp_dir().join(format!("repro-frames-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.parquet");
        write_parquet(&path, df, Vec::new()).unwrap();
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
                    bytes: Some(i as f64 * 100.0),
                })
                .collect::<Vec<_>>()
        };
        let curves = vec![
            (row("a1", "moniqua", "0", "completed", "1"), pts(3)),
            (row("b2", "d-psgd", "0", "completed", "1"), pts(2)),
        ];
        let df = CurvesFrame::new("train_loss", &curves).unwrap().df;
        assert_eq!(df.height(), 5);
        let ids = df.column("run_id").unwrap().str().unwrap();
        assert_eq!(ids.get(3), Some("b2"));
        let alg = df.column("algorithm").unwrap().str().unwrap();
        assert_eq!(alg.get(2), Some("moniqua"));
        let it = df.column("iteration").unwrap().i64().unwrap();
        assert_eq!(it.get(4), Some(1));
        let loss = df.column("train_loss").unwrap().f64().unwrap();
        assert_eq!(loss.get(1), Some(1.9));
        // curves.parquet gives the same curves back, in the runs' order,
        // without the runs it was not asked for
        let dir = std::env::temp_dir().join(format!("repro-curves-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("curves.parquet");
        let frame = CurvesFrame::new("train_loss", &curves).unwrap();
        write_parquet(&path, frame.export().unwrap(), Vec::new()).unwrap();
        let runs = [curves[1].0.clone(), row("c3", "dcd", "0", "completed", "1")];
        let back = read_curves(&path, "train_loss", &runs).unwrap();
        assert_eq!(back, vec![curves[1].clone()]);
        let all = [curves[0].0.clone(), curves[1].0.clone()];
        assert_eq!(read_curves(&path, "train_loss", &all).unwrap(), curves);
        let err = read_curves(&path, "test_loss", &runs).unwrap_err();
        assert!(
            format!("{err:#}").contains("holds no `test_loss` curves"),
            "{err:#}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_column_of_empty_cells_is_a_null_string_column() {
        let c = column("bytes_check", &[Some(""), None]);
        assert_eq!(c.dtype(), &DataType::String);
        assert_eq!(c.null_count(), 2);
        let mixed = column("x", &[Some("1"), Some("2.5"), Some("")]);
        assert_eq!(mixed.dtype(), &DataType::Float64);
    }
}
