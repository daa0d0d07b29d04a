//! The run records of an experiment: one per run, typed, written to and
//! read back from `runs.csv`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::experiment::condition::Condition;
use crate::experiment::manifest::HealthSpec;
use crate::launch::summary::{RunStatus, Summary};
use crate::records::health::{self, Health};
use crate::records::metrics::{Cell, From, METRICS, REGISTRY, columns};
use crate::records::results_dir::Entry;

/// One run's record: its id, its grid point and its typed metrics (a row
/// of runs.csv). Built from the run's Summary, which is read from its logs
/// ([`RunRecord::of`]), or from a committed runs.csv.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunRecord {
    pub run_id: String,
    pub point: BTreeMap<String, String>,
    /// The measured columns a run has ([`METRICS`]); a failed run has only
    /// its status.
    pub metrics: BTreeMap<String, Cell>,
}

/// The cells of a run that produced no summary: `failed`, and why in one
/// line of at most 2000 characters (a cell, not a log).
fn error_cells(error: &str) -> Vec<(&'static str, Cell)> {
    // one line, at most 2000 characters: a cell, not a log
    let mut line: String = error
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" | ");
    if let Some((cut, _)) = line.char_indices().nth(2000) {
        line.truncate(cut);
        line.push_str(" ...");
    }
    vec![
        ("status", Cell::Text(RunStatus::Failed.text().into())),
        ("error", Cell::Text(line)),
    ]
}

/// A run's summary as runs.csv's cells: the registry's columns that come
/// from a summary, then the run's provenance.
fn summary_cells(s: &Summary) -> Vec<(&'static str, Cell)> {
    REGISTRY
        .iter()
        .filter_map(|m| match m.column?.from {
            From::Summary(of) => Some((m.name, of(s))),
            From::Network | From::Failure | From::Judged => None,
        })
        .chain(
            s.provenance
                .as_ref()
                .map(provenance_cells)
                .unwrap_or_default(),
        )
        .collect()
}

impl RunRecord {
    /// How the run ended; `None` where runs.csv has no status it knows.
    pub(crate) fn status(&self) -> Option<RunStatus> {
        RunStatus::parse(self.metrics.get("status").map_or("", Cell::text))
    }

    /// The record of a run refused at plan time for the `memory_mb` it
    /// would need.
    pub(crate) fn refused(run: &crate::experiment::plan::PlannedRun, memory_mb: f64) -> RunRecord {
        let mut metrics = BTreeMap::from([
            (
                "status".into(),
                Cell::Text(RunStatus::Refused.text().into()),
            ),
            ("memory_mb".into(), Cell::Number(Some(memory_mb))),
        ]);
        metrics.extend(condition_cells(run.network.as_ref()));
        RunRecord {
            run_id: run.id.clone(),
            point: run.point.clone(),
            metrics,
        }
    }

    /// The run's health: its `health` cell, else (a record never judged)
    /// what its status implies; `None` with neither.
    pub(crate) fn health(&self) -> Option<Health> {
        Health::parse(self.metrics.get("health").map_or("", Cell::text))
            .or_else(|| self.status().map(Health::of_status))
    }

    /// Whether its method's premise held (`premise`), where judged.
    pub(crate) fn premise(&self) -> Option<health::Premise> {
        health::Premise::parse(self.metrics.get("premise").map_or("", Cell::text))
    }

    /// The record with its `health` judged from its other cells by the one
    /// rule ([`health::judge`]).
    pub(crate) fn judged(
        mut self,
        params: &crate::experiment::plan::Params,
        spec: &HealthSpec,
    ) -> Self {
        let verdict = health::judge(params, &self.metrics, spec);
        self.metrics
            .insert("health".into(), Cell::Text(verdict.health.text().into()));
        self.metrics
            .insert("health_note".into(), Cell::Text(verdict.why));
        self.metrics.insert(
            "health_kind".into(),
            Cell::Text(verdict.health.kind().text().into()),
        );
        let (premise, why) = health::premise(&self.metrics, spec)
            .map_or(("", String::new()), |(p, why)| (p.text(), why));
        self.metrics
            .insert("premise".into(), Cell::Text(premise.into()));
        self.metrics.insert("premise_note".into(), Cell::Text(why));
        let chance = health::chance(params);
        self.metrics
            .insert("chance_accuracy".into(), Cell::Number(chance));
        self
    }

    /// The chance accuracy of the run's data, as judged (none without
    /// classes, or for a record never judged).
    pub(crate) fn chance(&self) -> Option<f64> {
        self.metrics.get("chance_accuracy").and_then(Cell::number)
    }

    /// What the run counts as in a comparison of `metric`, by intention
    /// to treat ([`health::counted`]), before any scaling.
    pub(crate) fn counted(&self, metric: &str, higher: bool) -> health::Counted {
        let value = self.metrics.get(metric).and_then(Cell::number);
        health::counted(self.health(), value, metric, self.chance(), higher)
    }

    /// Whether the run ended with a result (completed or diverged): not
    /// failed, interrupted or refused.
    pub(crate) fn finished(&self) -> bool {
        self.status().is_some_and(RunStatus::finished)
    }

    /// The record with what makes its identity (see `metrics::IDENTITY`): the
    /// experiment and scale it was planned for, its data and parameters.
    pub(crate) fn identified(
        mut self,
        experiment: &str,
        scale: &str,
        run: &crate::experiment::plan::PlannedRun,
    ) -> Self {
        let (dataset, checksum) = crate::launch::data::identity(&run.params);
        for (k, v) in [
            ("experiment", experiment.to_string()),
            ("scale", scale.to_string()),
            ("data_source", dataset),
            ("data_checksum", checksum),
            (
                "params",
                crate::experiment::plan::canonical_params(&run.params),
            ),
        ] {
            self.metrics.insert(k.to_string(), Cell::Text(v));
        }
        self
    }

    /// The record of a run this invocation did not finish (interrupted).
    pub(crate) fn not_run(run: &crate::experiment::plan::PlannedRun) -> RunRecord {
        RunRecord {
            run_id: run.id.clone(),
            point: run.point.clone(),
            metrics: BTreeMap::from([(
                "status".into(),
                Cell::Text(RunStatus::NotRun.text().into()),
            )]),
        }
    }

    /// The row of planned run `run`: its summary's metrics as runs.csv
    /// writes them, or `status: failed` without one. The one place a
    /// summary's fields get their column names.
    pub(crate) fn of(
        run: &crate::experiment::plan::PlannedRun,
        summary: Result<&Summary, String>,
    ) -> RunRecord {
        let mut metrics: BTreeMap<String, Cell> = match summary {
            Err(error) => error_cells(&error),
            Ok(s) => summary_cells(s),
        }
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        metrics.extend(condition_cells(run.network.as_ref()));
        RunRecord {
            run_id: run.id.clone(),
            point: run.point.clone(),
            metrics,
        }
    }
}

/// Runs counted by health (a record never judged by what its status
/// implies, one without either as unfinished).
pub(crate) fn by_health<'a>(
    runs: impl IntoIterator<Item = &'a RunRecord>,
) -> BTreeMap<Health, usize> {
    let mut by = BTreeMap::new();
    for r in runs {
        *by.entry(r.health().unwrap_or(Health::Unfinished))
            .or_default() += 1;
    }
    by
}

/// The typed network condition of a run, as its `bandwidth_bps` and
/// `latency_s` columns (none when unshaped; no bandwidth when unlimited).
pub(crate) fn condition_cells(c: Option<&Condition>) -> Vec<(String, Cell)> {
    let Some(c) = c else {
        return Vec::new();
    };
    let mut cells = vec![("latency_s".to_string(), Cell::Number(Some(c.latency_s)))];
    if let Some(b) = c.bandwidth_bps {
        cells.push(("bandwidth_bps".to_string(), Cell::Number(Some(b))));
    }
    cells
}

/// Refuses to mix: the runs already recorded in a results directory
/// (`previous`; `recorded_scale` from its provenance.json for rows written
/// before runs had a `scale` column) must be runs of `experiment` at
/// `scale`. Two scales never share a table.
pub(crate) fn check_identity(
    dir: &Path,
    previous: &[RunRecord],
    recorded_scale: Option<&str>,
    experiment: &str,
    scale: &str,
) -> Result<()> {
    let text = |r: &RunRecord, k: &str| r.metrics.get(k).map(|c| c.text().to_string());
    for r in previous {
        let theirs_scale = text(r, "scale").or_else(|| recorded_scale.map(str::to_string));
        let theirs_experiment = text(r, "experiment");
        let (what, theirs, ours) = match (&theirs_experiment, &theirs_scale) {
            (Some(e), _) if e != experiment => ("experiment", e.clone(), experiment),
            (_, Some(s)) if s != scale => ("scale", s.clone(), scale),
            _ => continue,
        };
        bail!(
            "{} holds runs of {what} `{theirs}` (run {}); this run is of {what} `{ours}`. \
             A results directory holds one experiment at one scale, so their tables never mix: \
             pass --out DIR with a new directory, or remove {}",
            dir.display(),
            r.run_id,
            dir.display()
        );
    }
    Ok(())
}

/// The rows of `rows` that are runs of `plan` (same run id), in their
/// recorded order, each judged by `health`: what a table, figure or claim
/// of that plan reads.
pub(crate) fn planned(
    rows: &[RunRecord],
    plan: &[crate::experiment::plan::PlannedRun],
    health: &HealthSpec,
) -> Vec<RunRecord> {
    let ids: std::collections::HashSet<&str> = plan.iter().map(|p| p.id.as_str()).collect();
    let rows = rows.iter().filter(|r| ids.contains(r.run_id.as_str()));
    judged(rows.cloned().collect(), plan, health)
}

/// `rows` with a `first_loss` where they had none (a runs.csv from before
/// the column) and `curves_csv` (the committed curves, averaged over
/// ranks per step) has the run's train loss: its first step's, the same
/// number. So committed runs are judged again without their logs.
pub(crate) fn with_first_losses(
    mut rows: Vec<RunRecord>,
    curves_csv: &Path,
) -> Result<Vec<RunRecord>> {
    if rows.iter().all(|r| r.metrics.contains_key("first_loss")) || !curves_csv.is_file() {
        return Ok(rows);
    }
    let text = crate::util::read::text(curves_csv, crate::util::read::MAX_CSV)
        .with_context(|| format!("could not read {}", curves_csv.display()))?;
    let table = csv_rows(&text)?;
    let Some(header) = table.first() else {
        return Ok(rows);
    };
    let at = |name: &str| header.iter().position(|h| h == name);
    let (Some(id), Some(it), Some(loss)) = (at("run_id"), at("iteration"), at("train_loss")) else {
        return Ok(rows);
    };
    // run id -> (the first iteration, its train loss)
    let mut first: HashMap<&str, (u64, f64)> = HashMap::new();
    for line in &table[1..] {
        let (Some(k), Some(i), Some(v)) = (
            line.get(id),
            line.get(it).and_then(|t| t.parse::<u64>().ok()),
            line.get(loss).and_then(|t| t.parse::<f64>().ok()),
        ) else {
            continue;
        };
        let e = first.entry(k.as_str()).or_insert((i, v));
        if i < e.0 {
            *e = (i, v);
        }
    }
    for r in rows
        .iter_mut()
        .filter(|r| !r.metrics.contains_key("first_loss"))
    {
        if let Some((_, v)) = first.get(r.run_id.as_str()) {
            r.metrics
                .insert("first_loss".into(), Cell::Number(Some(*v)));
        }
    }
    Ok(rows)
}

/// `rows` with the runs of `plan` judged by `health` (the others as they
/// were): what runs.csv holds.
pub(crate) fn judged(
    rows: Vec<RunRecord>,
    plan: &[crate::experiment::plan::PlannedRun],
    health: &HealthSpec,
) -> Vec<RunRecord> {
    let by_id: HashMap<&str, &crate::experiment::plan::PlannedRun> =
        plan.iter().map(|p| (p.id.as_str(), p)).collect();
    rows.into_iter()
        .map(|r| match by_id.get(r.run_id.as_str()) {
            Some(p) => r.judged(&p.params, health),
            None => r,
        })
        .collect()
}

/// The provenance columns of a run whose log header says `p`.
fn provenance_cells(p: &repro_runlog::Provenance) -> Vec<(&'static str, Cell)> {
    let text = |s: &str| Cell::Text(s.to_string());
    let or_none = |s: &Option<String>| text(s.as_deref().unwrap_or("none"));
    vec![
        ("git_commit", text(&p.git_commit)),
        (
            "git_dirty",
            text(match p.git_dirty {
                Some(true) => "true",
                Some(false) => "false",
                None => "unknown",
            }),
        ),
        ("source", text(&p.source)),
        ("rustc", text(&p.rustc)),
        ("version", text(&p.version)),
        ("host", text(&p.host)),
        ("device", text(&p.device)),
        ("libtorch", or_none(&p.libtorch)),
        ("mpi", or_none(&p.mpi)),
        ("command", or_none(&p.command)),
        ("manifest_hash", or_none(&p.manifest_hash)),
    ]
}

/// Rows of fields as CSV text (quoted where a field needs it), through
/// the `csv` crate: the one CSV writer of the driver.
pub(crate) fn csv_text<R, F>(rows: impl IntoIterator<Item = R>) -> Result<String>
where
    R: IntoIterator<Item = F>,
    F: AsRef<[u8]>,
{
    let mut w = csv::WriterBuilder::new()
        .flexible(true)
        .from_writer(Vec::new());
    for row in rows {
        w.write_record(row)
            .context("could not write a CSV record")?;
    }
    let bytes = w.into_inner().context("could not finish the CSV text")?;
    String::from_utf8(bytes).context("CSV text is not UTF-8")
}

/// CSV text as rows of fields, through the `csv` crate: a quoted field
/// may hold commas, quotes and newlines.
pub(crate) fn csv_rows(text: &str) -> Result<Vec<Vec<String>>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| {
            r.map(|r| r.iter().map(str::to_string).collect())
                .context("not valid CSV")
        })
        .collect()
}

/// What [`merge`] made of a directory's rows: the rows, the failed
/// attempts kept apart, and how many rows it kept, replaced and added.
#[derive(Debug, Default)]
pub(crate) struct Merged {
    pub rows: Vec<RunRecord>,
    /// Failed reruns of finished runs, for `attempts.csv`.
    pub attempts: Vec<RunRecord>,
    /// Earlier rows left as they were.
    pub kept: usize,
    /// Earlier rows this invocation's run of the same id replaced.
    pub replaced: usize,
    /// Rows of ids runs.csv did not hold.
    pub added: usize,
    /// Of the added, those at a grid point where an earlier row of other
    /// parameters (another id) stays beside them.
    pub beside: usize,
}

/// The runs of an earlier invocation (`previous`, from its runs.csv)
/// updated by this one's (`new`, planned as `plan`). Rows are keyed by
/// run id, the hash of a run's resolved parameters.
///
/// - An earlier run whose id is in the plan takes the plan's grid point,
///   so a grid key added since keeps it (with the key's value).
/// - A new run replaces the earlier one of its id, unless it was not run
///   (interrupted), or it failed where the earlier one had finished: a
///   failure never replaces a result. Such failures are kept apart, for
///   `attempts.csv`.
/// - A run of other parameters at an earlier run's grid point is added
///   beside it: a change of parameters never replaces a row in silence.
/// - Earlier runs elsewhere stay, in their order; new ones follow. Nothing
///   is dropped: rows without one of the grid keys leave it empty.
pub(crate) fn merge(
    previous: Vec<RunRecord>,
    new: Vec<RunRecord>,
    plan: &[crate::experiment::plan::PlannedRun],
) -> Merged {
    let mut m = Merged {
        kept: previous.len(),
        rows: previous,
        ..Merged::default()
    };
    for r in &mut m.rows {
        if let Some(p) = plan.iter().find(|p| p.id == r.run_id) {
            r.point = p.point.clone();
        }
    }
    let earlier = m.rows.len();
    for run in new {
        match m.rows.iter().position(|r| r.run_id == run.run_id) {
            Some(_) if run.status() == Some(RunStatus::NotRun) => {}
            Some(i) if !run.finished() && m.rows[i].finished() => m.attempts.push(run),
            Some(i) => {
                m.rows[i] = run;
                m.replaced += 1;
                m.kept -= 1;
            }
            None => {
                let taken = m.rows[..earlier].iter().any(|r| r.point == run.point);
                if taken && run.status() == Some(RunStatus::NotRun) {
                    // interrupted before it ran: nothing to add beside
                    continue;
                }
                m.beside += usize::from(taken);
                m.rows.push(run);
                m.added += 1;
            }
        }
    }
    m
}

/// Appends the failed `attempts` to `dir/attempts.csv` (run id, grid
/// point, status, error, when): runs that failed while an earlier result
/// of theirs stayed in runs.csv. Their logs are in raw/attempts/.
pub(crate) fn record_attempts(dir: &Path, attempts: &[RunRecord]) -> Result<()> {
    if attempts.is_empty() {
        return Ok(());
    }
    let path = dir.join(Entry::Attempts.name());
    let mut rows = match crate::util::read::text(&path, crate::util::read::MAX_CSV) {
        Ok(text) => csv_rows(&text)?,
        Err(_) => vec![
            ["run_id", "point", "status", "error", "recorded_unix_s"]
                .map(str::to_string)
                .to_vec(),
        ],
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for a in attempts {
        rows.push(vec![
            a.run_id.clone(),
            a.point
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
            a.status().map_or("", RunStatus::text).to_string(),
            a.metrics.get("error").map_or("", Cell::text).to_string(),
            now.to_string(),
        ]);
    }
    crate::util::atomic::write(&path, csv_text(rows)?)
}

/// The grid keys of `rows`: every row's, sorted (runs.csv's columns
/// after `run_id`).
pub(crate) fn grid_keys(rows: &[RunRecord]) -> Vec<&String> {
    rows.iter()
        .flat_map(|r| r.point.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Writes runs.csv: `run_id`, the grid keys (every row's, sorted; a row
/// without one leaves it empty), then [`columns`].
pub(crate) fn write_csv(path: &Path, rows: &[RunRecord]) -> Result<()> {
    let keys = grid_keys(rows);
    let header: Vec<String> = std::iter::once("run_id".to_string())
        .chain(keys.iter().map(|k| k.to_string()))
        .chain(columns().map(str::to_string))
        .collect();
    let lines = rows.iter().map(|r| {
        std::iter::once(r.run_id.clone())
            .chain(
                keys.iter()
                    .map(|k| r.point.get(*k).cloned().unwrap_or_default()),
            )
            .chain(columns().map(|m| r.metrics.get(m).map_or(String::new(), |c| c.csv(m))))
            .collect::<Vec<_>>()
    });
    crate::util::atomic::write(path, csv_text(std::iter::once(header).chain(lines))?)
}

/// runs.csv's text, with an error that says why it could not be read.
fn read_text(path: &Path) -> Result<String> {
    // as the invoking user under sudo: a link they planted reads nothing
    // they could not read
    match crate::util::read::text(path, crate::util::read::MAX_CSV) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(e).with_context(|| {
            format!(
                "could not read {}; run the experiment first (`repro run`)",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(e).with_context(|| {
            format!(
                "could not read {} (under sudo it is read as the invoking user)",
                path.display()
            )
        }),
        Err(e) => Err(anyhow::anyhow!("{e}")).with_context(|| {
            format!(
                "could not read {}: it is not a runs.csv repro wrote (restore it, or move it away)",
                path.display()
            )
        }),
    }
}

/// Reads runs.csv back, checked as it is read: every record has the
/// header's fields, a number column holds numbers (or `NaN`, `inf`), an
/// id or grid value holds no control character, and a run id appears
/// once. A run id written twice with the same cells is counted once, with
/// a note; twice with different cells is refused, naming both records.
pub(crate) fn read_csv(path: &Path) -> Result<Vec<RunRecord>> {
    let text = read_text(path)?;
    let mut lines = csv_rows(&text)
        .with_context(|| format!("{} is not valid CSV", path.display()))?
        .into_iter();
    let header = lines.next().context("runs.csv is empty")?;
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
    let mut rows: Vec<RunRecord> = Vec::new();
    let mut seen: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
    let mut repeated = 0;
    for (i, f) in lines.enumerate() {
        let record = i + 2;
        check_record(path, &header, first_metric, record, &f)?;
        if let Some((first, cells)) = seen.get(&f[0]) {
            if *cells != f {
                bail!(
                    "{} records run `{}` twice with different results (records {first} and \
                     {record}): one run has one result; remove the one that is wrong",
                    path.display(),
                    crate::util::text::shown(&f[0])
                );
            }
            repeated += 1;
            continue;
        }
        seen.insert(f[0].clone(), (record, f.clone()));
        rows.push(record_of(&header, first_metric, grid, f));
    }
    if repeated > 0 {
        crate::util::progress::note(&format!(
            "note: {} repeats {repeated} record(s) cell for cell; each run is counted once",
            path.display()
        ));
    }
    Ok(rows)
}

/// Refuses a runs.csv record that is not one a run writes: its field
/// count, a control character in its id or grid values, text in a number
/// column.
fn check_record(
    path: &Path,
    header: &[String],
    first_metric: usize,
    record: usize,
    f: &[String],
) -> Result<()> {
    if f.len() != header.len() {
        bail!(
            "{} record {record}: {} fields, expected {}",
            path.display(),
            f.len(),
            header.len()
        );
    }
    if let Some(j) = (0..first_metric).find(|&j| crate::util::text::has_control(&f[j])) {
        bail!(
            "{} record {record}: `{}` is `{}`, with a control character; an id or grid value \
             is one printable line",
            path.display(),
            header[j],
            crate::util::text::shown(&f[j])
        );
    }
    for (name, v) in header.iter().zip(f).skip(first_metric) {
        // a column this build knows, as it writes it (an unknown one,
        // from a newer build, is not read)
        let numeric = columns().any(|c| c == name)
            && !matches!(
                crate::records::metrics::kind(name),
                crate::records::metrics::Kind::Text
            );
        if numeric && !v.is_empty() && v.parse::<f64>().is_err() {
            bail!(
                "{} record {record}: `{name}` is `{}`, not a number",
                path.display(),
                crate::util::text::shown(v)
            );
        }
    }
    Ok(())
}

/// One checked runs.csv record as a run's record.
fn record_of(header: &[String], first_metric: usize, grid: &[String], f: Vec<String>) -> RunRecord {
    let cell = |name: &str| {
        header[first_metric..]
            .iter()
            .position(|h| h == name)
            .map(|j| f[first_metric + j].clone())
            .unwrap_or_default()
    };
    // a key the row's run did not have is written empty (rows of an older
    // grid beside a newer one): not a key of its point
    let point: BTreeMap<String, String> = grid
        .iter()
        .cloned()
        .zip(f[1..first_metric].iter().cloned())
        .filter(|(_, v)| !v.is_empty())
        .collect();
    let mut metrics: BTreeMap<String, Cell> = columns()
        .filter_map(|m| Some((m.to_string(), Cell::parse(m, &cell(m))?)))
        .collect();
    if !header.iter().any(|h| h == "latency_s") {
        // written before the condition had columns: from its label
        let label = point.get("network").map_or("", String::as_str);
        metrics.extend(condition_cells(Condition::from_label(label).as_ref()));
    }
    RunRecord {
        run_id: f[0].clone(),
        point,
        metrics,
    }
}

/// The columns of a runs.csv that `needed` names and it lacks: a table's
/// metric or grouping key removed is said, never read as missing values.
pub(crate) fn missing_columns(path: &Path, needed: &[&str]) -> Result<Vec<String>> {
    let text = read_text(path)?;
    let header = csv_rows(text.lines().next().unwrap_or(""))?
        .into_iter()
        .next()
        .unwrap_or_default();
    Ok(needed
        .iter()
        .filter(|n| !header.iter().any(|h| h == *n))
        .map(|n| n.to_string())
        .collect())
}

#[cfg(test)]
pub(crate) mod tests;
