//! An MLflow file store (the `mlruns` layout MLflow's own client writes):
//! an experiment per exported experiment and scale, a run per run, its
//! parameters as params, its text columns as tags, its numbers as metrics
//! (step 0) and the figure's curve as the metric history `curve/<y>`
//! (step = iteration, timestamp = start + the run's own clock). The table
//! and claims are the experiment's description (`mlflow.note.content`).
//!
//! MLflow 3 opens a file store read-only only with
//! `MLFLOW_ALLOW_FILE_STORE=true` (or after `mlflow migrate-filestore`).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::{Exported, ExportedRun};
use crate::launch::summary::RunStatus;

/// The longest values MLflow accepts: a param's, a run tag's and an
/// experiment tag's.
const MAX_PARAM: usize = 6000;
const MAX_RUN_TAG: usize = 8000;
const MAX_EXPERIMENT_TAG: usize = 20000;

/// The experiment id of `e`: a number from its name and scale, so the
/// same experiment has the same id in every export.
pub(crate) fn experiment_id(e: &Exported) -> String {
    let h = xxhash_rust::xxh3::xxh3_64(format!("repro:{}:{}", e.name, e.scale).as_bytes());
    (h >> 2).to_string()
}

/// The run id of run `r` of `e`: 32 hex digits, unique across the store
/// (one run id can be in two experiments).
pub(crate) fn run_uuid(e: &Exported, r: &ExportedRun) -> String {
    let h =
        xxhash_rust::xxh3::xxh3_128(format!("repro:{}:{}:{}", e.name, e.scale, r.id).as_bytes());
    format!("{h:032x}")
}

/// MLflow's run status code in meta.yaml: FINISHED 3 (a result,
/// diverged included), FAILED 4, KILLED 5 (interrupted).
fn status_code(s: Option<RunStatus>) -> u8 {
    match s {
        Some(RunStatus::Completed | RunStatus::Diverged) => 3,
        Some(RunStatus::NotRun) => 5,
        Some(RunStatus::Failed | RunStatus::Refused) | None => 4,
    }
}

/// A YAML string in single quotes.
fn quoted(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''").replace(['\n', '\r'], " "))
}

/// `s` cut to at most `max` bytes (at a character boundary), saying so.
fn at_most(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let tail = " … (cut: see the results directory)";
    let mut end = max - tail.len();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{tail}", &s[..end])
}

/// Writes `files` (relative path -> text) under `dir`.
fn write_all(dir: &Path, files: &[(String, String)]) -> Result<()> {
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("could not create {}", parent.display()))?;
        }
        std::fs::write(&path, text)
            .with_context(|| format!("could not write {}", path.display()))?;
    }
    Ok(())
}

/// The files of experiment `e`, relative to its directory (`<id>` in the
/// store; `uri` is the store's file URI).
fn experiment_files(e: &Exported, uri: &str) -> Vec<(String, String)> {
    let id = experiment_id(e);
    let mut files = vec![(
        "meta.yaml".to_string(),
        format!(
            "artifact_location: {}\ncreation_time: {t}\nexperiment_id: {}\nlast_update_time: {t}\nlifecycle_stage: active\nname: {}\n",
            quoted(&format!("{uri}/{id}")),
            quoted(&id),
            quoted(&format!("{} ({})", e.name, e.scale)),
            t = e.written_ms,
        ),
    )];
    let mut tags = e.tags.clone();
    tags.push((
        "mlflow.note.content".into(),
        format!("# {}\n\n{}", e.title, e.note),
    ));
    for (k, v) in tags {
        files.push((format!("tags/{k}"), at_most(&v, MAX_EXPERIMENT_TAG)));
    }
    for r in &e.runs {
        files.extend(run_files(e, r, &id, uri));
    }
    files
}

/// The files of run `r` of `e`, relative to the experiment's directory.
fn run_files(e: &Exported, r: &ExportedRun, id: &str, uri: &str) -> Vec<(String, String)> {
    let run = run_uuid(e, r);
    let dir = run.clone();
    let start = e.written_ms;
    let end = start + (r.seconds() * 1000.0).round() as i64;
    let mut files = vec![
        (
            format!("{dir}/meta.yaml"),
            format!(
                "artifact_uri: {}\nend_time: {end}\nentry_point_name: ''\nexperiment_id: {}\nlifecycle_stage: active\nrun_id: {run}\nrun_name: {}\nrun_uuid: {run}\nsource_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: {start}\nstatus: {}\ntags: []\nuser_id: repro\n",
                quoted(&format!("{uri}/{id}/{run}/artifacts")),
                quoted(id),
                quoted(&r.name),
                status_code(r.status),
            ),
        ),
        (format!("{dir}/tags/mlflow.runName"), r.name.clone()),
    ];
    for (k, v) in &r.params {
        files.push((format!("{dir}/params/{k}"), at_most(v, MAX_PARAM)));
    }
    for (k, v) in &r.tags {
        files.push((format!("{dir}/tags/{k}"), at_most(v, MAX_RUN_TAG)));
    }
    for (k, v) in &r.metrics {
        files.push((format!("{dir}/metrics/{k}"), format!("{end} {v:?} 0\n")));
    }
    if let Some((y, points)) = &r.curve {
        let mut lines = String::new();
        for p in points.iter().filter(|p| p.value.is_finite()) {
            let t = start + (p.wall_s.max(0.0) * 1000.0).round() as i64;
            let _ = writeln!(lines, "{t} {:?} {}", p.value, p.iteration);
        }
        if !lines.is_empty() {
            files.push((format!("{dir}/metrics/curve/{y}"), lines));
        }
    }
    files
}

/// Writes `experiments` into the MLflow file store at `dir` (created if
/// needed). An experiment already there is replaced whole; others are
/// left as they are. The store's default experiment (`0`) is written when
/// missing, as MLflow's client would.
pub(crate) fn write(dir: &Path, experiments: &[Exported]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let abs = std::fs::canonicalize(dir)
        .with_context(|| format!("could not resolve {}", dir.display()))?;
    let uri = format!("file://{}", abs.display());
    if !abs.join("0/meta.yaml").is_file() {
        write_all(
            &abs,
            &[(
                "0/meta.yaml".into(),
                format!(
                    "artifact_location: {}\ncreation_time: 0\nexperiment_id: '0'\nlast_update_time: 0\nlifecycle_stage: active\nname: Default\n",
                    quoted(&format!("{uri}/0"))
                ),
            )],
        )?;
    }
    for e in experiments {
        let id = experiment_id(e);
        // written beside, then swapped in: a reader never sees half an
        // experiment
        let target = abs.join(&id);
        let tmp = crate::util::atomic::working_dir(&target);
        let _ = std::fs::remove_dir_all(&tmp);
        write_all(&tmp, &experiment_files(e, &uri))?;
        for r in &e.runs {
            let artifacts = tmp.join(run_uuid(e, r)).join("artifacts");
            std::fs::create_dir_all(&artifacts)
                .with_context(|| format!("could not create {}", artifacts.display()))?;
        }
        crate::util::atomic::replace_dir(&tmp, &target)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::export::sample;

    #[test]
    fn a_store_has_the_layout_mlflow_reads() {
        let dir = std::env::temp_dir().join(format!("repro-mlflow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let e = sample();
        write(&dir, std::slice::from_ref(&e)).unwrap();
        let id = experiment_id(&e);
        let run = run_uuid(&e, &e.runs[0]);
        let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).unwrap();
        assert!(read("0/meta.yaml").contains("name: Default"));
        let meta = read(&format!("{id}/meta.yaml"));
        assert!(meta.contains("name: 'quick (smoke)'"), "{meta}");
        assert!(meta.contains(&format!("experiment_id: '{id}'")), "{meta}");
        let run_meta = read(&format!("{id}/{run}/meta.yaml"));
        // a diverged run finished; its health tag says it diverged
        assert!(run_meta.contains("status: 3\n"), "{run_meta}");
        assert!(run_meta.contains("end_time: 1700000002500\n"), "{run_meta}");
        assert!(run_meta.contains(&format!("run_id: {run}\n")), "{run_meta}");
        assert_eq!(read(&format!("{id}/{run}/params/lr")), "0.1");
        assert_eq!(read(&format!("{id}/{run}/tags/repro.health")), "diverged");
        assert_eq!(
            read(&format!("{id}/{run}/metrics/bytes")),
            "1700000002500 1024.0 0\n"
        );
        // the curve's non-finite point is left out
        assert_eq!(
            read(&format!("{id}/{run}/metrics/curve/train_loss")),
            "1700000000000 2.3 0\n"
        );
        assert!(
            read(&format!("{id}/tags/mlflow.note.content")).starts_with("# A title\n\n| a | b |")
        );
        assert!(dir.join(format!("{id}/{run}/artifacts")).is_dir());
        // an export again replaces the experiment whole
        let mut fewer = e.clone();
        fewer.runs[0].params.pop();
        write(&dir, &[fewer]).unwrap();
        assert!(!dir.join(format!("{id}/{run}/params/lr")).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn long_values_are_cut_at_a_character_boundary() {
        let s = "é".repeat(5000);
        let cut = at_most(&s, MAX_PARAM);
        assert!(cut.len() <= MAX_PARAM && cut.ends_with("results directory)"));
        assert_eq!(at_most("short", MAX_PARAM), "short");
    }
}
