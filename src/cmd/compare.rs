//! `repro compare`: one metric over the runs of several experiments,
//! grouped by any keys, from their runs.parquet files alone.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use polars::prelude::{IntoLazy, lit};

use crate::cmd::table::TableFormat;
use crate::experiment::{manifest, project};
use crate::records::frames::{self, RunsFrame};
use crate::records::results_dir::Entry;
use crate::records::results_dir::ResultsDir;

/// Options of `repro compare`.
#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    /// Experiments (names, or directories holding a runs.parquet); every
    /// results directory of the project if none is given.
    pub experiments: Vec<String>,
    /// The metric to compare (a runs.csv column, e.g. avg_test_accuracy).
    #[arg(long)]
    pub value: String,
    /// The keys to group by, comma-separated: grid keys (algorithm, bits,
    /// seed, ...) or text columns (experiment, scale, device, ...).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "experiment,scale,algorithm"
    )]
    pub by: Vec<String>,
    /// Only the runs whose key KEY has the value VALUE (as the manifest
    /// writes it); repeat for several.
    #[arg(long = "where", value_name = "KEY=VALUE")]
    pub select: Vec<String>,
    /// Multiply the values by this (default: the metric's unit, as tables
    /// show it: 100 for an accuracy, 1 for the rest).
    #[arg(long)]
    pub factor: Option<f64>,
    /// The newest runs at this scale (runs/<name>/<scale>/latest) instead
    /// of the records (results/<name>).
    #[arg(long)]
    pub scale: Option<String>,
    /// Markdown (cells as a table prints them) or the tidy CSV.
    #[arg(long, value_enum, default_value = "md")]
    pub format: TableFormat,
    /// Also write the tidy CSV to this file (a new file or a regular one;
    /// `-`: the CSV alone, to standard output).
    #[arg(long, value_name = "FILE")]
    pub to: Option<PathBuf>,
}

/// The results directories to read: each one named (a directory, or an
/// experiment's results at the committed scale or `scale`), or every one
/// under results/ (or scratch/<scale>/) that holds a runs.parquet.
fn directories(args: &CompareArgs) -> Result<Vec<PathBuf>> {
    let root = project::root().unwrap_or_default();
    let (base, below) = match &args.scale {
        Some(s) => (root.join("runs"), PathBuf::from(s).join(project::LATEST)),
        None => (root.join("results"), PathBuf::new()),
    };
    if args.experiments.is_empty() {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&base)
            .with_context(|| format!("could not list {}", base.display()))?
            .filter_map(|e| e.ok().map(|e| e.path().join(&below)))
            .filter(|d| d.join(Entry::RunsParquet.name()).is_file())
            .collect();
        dirs.sort();
        if dirs.is_empty() {
            bail!(
                "no results under {}: run an experiment first, or name its directory",
                base.display()
            );
        }
        return Ok(dirs);
    }
    args.experiments
        .iter()
        .map(|e| {
            let given = Path::new(e);
            let dir = if given.is_dir() {
                given.to_path_buf()
            } else if base.join(e).join(&below).is_dir() {
                base.join(e).join(&below)
            } else {
                // a manifest's own results directory, at the scale asked
                let m = manifest::load(&manifest::locate(e)?, &[])?;
                m.default_out(&crate::report::recorded::read_scale(&m, &args.scale))
            };
            // one that is there but not a file (a FIFO) is named by the read
            if !dir.join(Entry::RunsParquet.name()).exists() {
                bail!(
                    "{} has no runs.parquet: run `{e}` first (or name a results directory)",
                    dir.display()
                );
            }
            Ok(dir)
        })
        .collect()
}

/// `repro compare`: reads every runs.parquet, puts the runs together with
/// their experiment and scale, keeps those `--where` selects, and prints
/// the metric grouped by `--by` (and writes the tidy CSV to `--to`).
pub(crate) fn compare(args: &CompareArgs) -> Result<()> {
    if let Some(f) = args.factor
        && !(f.is_finite() && f != 0.0)
    {
        bail!("--factor {f}: a factor is a finite number other than 0 (e.g. 100 for percent)");
    }
    let to_stdout = args.to.as_deref() == Some(Path::new("-"));
    if let Some(to) = args.to.as_ref().filter(|_| !to_stdout) {
        crate::util::atomic::check_target(to)?;
    }
    let selected = selections(args)?;
    let dirs = once_each(directories(args)?)?;
    let mut all = RunsFrame::concat(&read_all(args, &dirs)?)?;
    select(&mut all, args, &selected)?;
    let source = dirs
        .iter()
        .map(|d| d.join(Entry::RunsParquet.name()).display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let table = crate::report::table::compare(
        &format!("{} by {}", args.value, args.by.join(", ")),
        &source,
        &all,
        &args.by,
        &args.value,
        crate::report::table::factor(args.factor, &args.value),
    )?;
    let csv = table.csv()?;
    // a value read from a file reaches the terminal escaped
    let shown = crate::util::text::terminal;
    if to_stdout {
        print!("{}", shown(&csv));
        return Ok(());
    }
    if let Some(to) = &args.to {
        crate::util::atomic::write(to, csv.clone())
            .with_context(|| format!("could not write {}", to.display()))?;
    }
    match args.format {
        TableFormat::Md => print!("{}", shown(&table.markdown())),
        TableFormat::Latex => print!("{}", shown(&table.latex())),
        TableFormat::Csv => print!("{}", shown(&csv)),
    }
    Ok(())
}

/// The directories to read, each once: a directory named twice (or by
/// two paths) would count its runs twice.
fn once_each(dirs: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for d in dirs {
        let real =
            std::fs::canonicalize(&d).with_context(|| format!("could not read {}", d.display()))?;
        if seen.contains(&real) {
            crate::util::progress::note(&format!(
                "note: {} is named twice; its runs are read once",
                d.display()
            ));
            continue;
        }
        seen.push(real);
        out.push(d);
    }
    Ok(out)
}

/// `--where KEY=VALUE`, each as its key and value.
fn selections(args: &CompareArgs) -> Result<Vec<(String, String)>> {
    args.select
        .iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_string(), v.trim().to_string())),
            None => bail!("--where `{s}`: write KEY=VALUE (e.g. --where bits=1)"),
        })
        .collect()
}

/// Every directory's runs.parquet with its experiment and scale (the
/// file's metadata, else its folder and provenance.json); a note names
/// the files an older build wrote.
fn read_all(args: &CompareArgs, dirs: &[PathBuf]) -> Result<Vec<RunsFrame>> {
    let mut frames_read = Vec::new();
    let mut older = Vec::new();
    for dir in dirs {
        let path = dir.join(Entry::RunsParquet.name());
        let df = frames::read_parquet(&path)?;
        if df.column("health").is_err() || df.column("experiment").is_err() {
            older.push(path.display().to_string());
        }
        let meta = frames::read_metadata(&path)?;
        let meta = |k: &str| {
            meta.iter()
                .find(|(key, v)| key == &format!("repro.{k}") && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        let name = meta("experiment").unwrap_or_else(|| {
            dir.file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default()
        });
        let scale = meta("scale")
            .or_else(|| ResultsDir::new(dir).recorded_scale())
            .or_else(|| args.scale.clone())
            .unwrap_or_default();
        frames_read.push(RunsFrame::from_parquet(&df, &name, &scale)?);
    }
    check_distinct_runs(dirs, &frames_read)?;
    if !older.is_empty() {
        crate::util::progress::note(&format!(
            "note: {} of {} files were written by an older build, without the experiment, scale and health columns: their experiment is their folder's name, their scale provenance.json's, and a run counts as valid by its status alone (rerun them to have each judged): {}",
            older.len(),
            dirs.len(),
            older.join(", ")
        ));
    }
    Ok(frames_read)
}

/// Refuses runs counted twice: a run id in two of the files, or twice in
/// one (two directories holding copies of the same runs would double n).
fn check_distinct_runs(dirs: &[PathBuf], frames_read: &[RunsFrame]) -> Result<()> {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, f) in frames_read.iter().enumerate() {
        let ids =
            f.df.column("run_id")
                .context("a runs.parquet without run ids")?;
        let names =
            f.df.column("experiment")
                .context("runs without their experiment")?;
        let (ids, names) = (
            ids.str().context("run ids are text")?,
            names.str().context("experiment names are text")?,
        );
        for (id, name) in ids.iter().zip(names.iter()) {
            let (Some(id), name) = (id, name.unwrap_or("")) else {
                continue;
            };
            // a run is its experiment's run id
            if let Some(j) = seen.insert(format!("{name}\u{0}{id}"), i) {
                bail!(
                    "run `{}` is in {} and in {}: each run is counted once; compare directories \
                     that hold different runs",
                    crate::util::text::shown(id),
                    dirs[j].join(Entry::RunsParquet.name()).display(),
                    dirs[i].join(Entry::RunsParquet.name()).display()
                );
            }
        }
    }
    Ok(())
}

/// Keeps the runs `--where` selects, after checking that every `--by` and
/// `--where` key is a column.
fn select(all: &mut RunsFrame, args: &CompareArgs, selected: &[(String, String)]) -> Result<()> {
    let known: Vec<&str> = all
        .df
        .get_column_names()
        .iter()
        .map(|c| c.as_str())
        .collect();
    for k in args.by.iter().chain(selected.iter().map(|(k, _)| k)) {
        if !known.contains(&k.as_str()) {
            bail!(
                "`{k}` is not a column of these runs; grid keys: {}",
                all.keys().join(", ")
            );
        }
    }
    if !selected.is_empty() {
        let mut keep = lit(true);
        for (k, v) in selected {
            keep = keep.and(frames::key(&all.df, k).eq(lit(v.as_str())));
        }
        all.df = all.df.clone().lazy().filter(keep).collect()?;
    }
    Ok(())
}
