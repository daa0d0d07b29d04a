//! Per-step curves read back from the runs' logs: each run's ranks
//! averaged iteration by iteration, and written to curves.csv.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use repro_runlog::{Log, read_log};

use crate::records::metrics::{CURVE_METRICS, Curve, metric};
use crate::records::results::RunRecord;

/// One step of one run, averaged over its ranks.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CurvePoint {
    pub iteration: u64,
    pub epoch: f64,
    /// When the slowest rank finished the step, in seconds since its first
    /// step began.
    pub wall_s: f64,
    /// The figure's `y`, mean over ranks: `train_loss` from the steps, or an
    /// evaluation metric from the evaluations.
    pub value: f64,
    /// Bytes each worker had sent by then, mean over ranks: its steps'
    /// frames through this step, or before this evaluation. None in curves
    /// read from a file written before bytes were recorded.
    pub bytes: Option<f64>,
}

/// One run and its curve.
pub(crate) type RunCurve = (RunRecord, Vec<CurvePoint>);

/// The logs of one run: `raw/<id>/rank-*.jsonl` (MPI) or `raw/<id>.jsonl` (simulator).
fn run_logs(raw: &Path, id: &str) -> Result<Vec<Log>> {
    let single = raw.join(format!("{id}.jsonl"));
    let mut paths: Vec<PathBuf> = if single.is_file() {
        vec![single]
    } else {
        let dir = raw.join(id);
        let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("no logs for run {id} in {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("rank-") && n.ends_with(".jsonl"))
            })
            .collect();
        v.sort();
        v
    };
    paths.dedup();
    paths
        .iter()
        .map(|p| {
            let f = std::fs::File::open(p)
                .with_context(|| format!("could not open {}", p.display()))?;
            read_log(std::io::BufReader::new(f))
                .with_context(|| format!("{} is unreadable", p.display()))
        })
        .collect()
}

/// One logged point of one rank: (iteration, wall_s, value, epoch, and
/// the number of its steps done by then). The value is `None` where the
/// rank logged the point without the metric (the averaged model's scores,
/// which rank 0 alone measures).
type RankPoint = (u64, f64, Option<f64>, f64, u64);

/// A rank's running total of bytes sent: `(iteration, bytes through it)`
/// for each of its steps, in order.
fn bytes_through(log: &Log) -> Vec<(u64, f64)> {
    log.steps
        .iter()
        .scan(0.0, |sent, s| {
            *sent += s.bytes_sent as f64;
            Some((s.iteration, *sent))
        })
        .collect()
}

/// The bytes a rank had sent in its steps before iteration `done`.
fn sent_before(through: &[(u64, f64)], done: u64) -> f64 {
    match through.partition_point(|(i, _)| *i < done) {
        0 => 0.0,
        k => through[k - 1].1,
    }
}

/// Averages the ranks' points iteration by iteration (only the iterations
/// every rank logged, the value over the ranks that measured it, at least
/// one). Time counts from the start of each rank's first step (start-up
/// and data loading left out), the slowest rank's.
fn average_ranks(logs: &[Log], points: impl Fn(&Log) -> Vec<RankPoint>) -> Vec<CurvePoint> {
    #[derive(Default)]
    struct Sum {
        wall_s: f64,
        value: f64,
        epoch: f64,
        bytes: f64,
        ranks: usize,
        valued: usize,
    }
    let mut by_iter: BTreeMap<u64, Sum> = BTreeMap::new();
    for log in logs {
        let t0 = log
            .steps
            .first()
            .map_or(0.0, |s| (s.wall_s - s.compute_s - s.comm_s).max(0.0));
        let through = bytes_through(log);
        for (iteration, wall_s, value, epoch, steps) in points(log) {
            let sent = sent_before(&through, steps);
            let e = by_iter.entry(iteration).or_default();
            e.wall_s = e.wall_s.max(wall_s - t0);
            if let Some(v) = value {
                e.value += v;
                e.valued += 1;
            }
            e.epoch = epoch;
            e.bytes += sent;
            e.ranks += 1;
        }
    }
    by_iter
        .into_iter()
        .filter(|(_, v)| v.ranks == logs.len() && v.valued > 0)
        .map(|(iteration, s)| CurvePoint {
            iteration,
            epoch: s.epoch,
            wall_s: s.wall_s,
            value: s.value / s.valued as f64,
            bytes: Some(s.bytes / s.ranks as f64),
        })
        .collect()
}

/// The training loss of one run: the ranks' steps averaged iteration by
/// iteration (see [`average_ranks`]).
pub(crate) fn curve(logs: &[Log]) -> Vec<CurvePoint> {
    average_ranks(logs, |log| {
        log.steps
            .iter()
            .map(|s| {
                (
                    s.iteration,
                    s.wall_s,
                    Some(s.train_loss),
                    s.epoch,
                    s.iteration + 1,
                )
            })
            .collect()
    })
}

/// One run's curve of `y` (one of `metrics::CURVE_METRICS`): [`curve`] for the
/// training loss; for an evaluation metric, the ranks' evaluations averaged
/// at each iteration every rank evaluated, over the ranks that measured it
/// (rank 0 alone scores the averaged model, the same on every rank), at
/// the time of the slowest rank.
pub(crate) fn curve_of(logs: &[Log], y: &str) -> Result<Vec<CurvePoint>> {
    let pick = match metric(y).and_then(|m| m.curve) {
        Some(Curve::TrainLoss) => return Ok(curve(logs)),
        Some(Curve::Eval(pick)) => pick,
        None => bail!("figure.y `{y}` is not one of {}", CURVE_METRICS.join(", ")),
    };
    Ok(average_ranks(logs, |log| {
        log.evals
            .iter()
            .map(|e| (e.iteration, e.wall_s, pick(e), e.epoch, e.iteration))
            .collect()
    }))
}

/// Point `p`'s coordinate on axis `x` (one of `plot::CURVE_X`): None for
/// bytes a file did not record.
pub(crate) fn x_of(p: &CurvePoint, x: &str) -> Option<f64> {
    match x {
        "iteration" => Some(p.iteration as f64),
        "epoch" => Some(p.epoch),
        "bytes" => p.bytes,
        _ => Some(p.wall_s),
    }
}

/// When a curve first reaches `target` (at or above it when `higher` is
/// better, at or below otherwise), on axis `x`: `Ok(x)`, or `Err(last)`
/// with the curve's last x when it never does (None: no points).
pub(crate) fn first_reach(
    points: &[CurvePoint],
    target: f64,
    higher: bool,
    x: &str,
) -> Result<f64, Option<f64>> {
    let reached = |p: &&CurvePoint| {
        if higher {
            p.value >= target
        } else {
            p.value <= target
        }
    };
    match points.iter().find(reached).and_then(|p| x_of(p, x)) {
        Some(hit) => Ok(hit),
        None => Err(points.last().and_then(|p| x_of(p, x))),
    }
}

/// The curves of `y` of every run that left logs, in the order of `runs`.
pub(crate) fn load_curves(raw: &Path, runs: &[RunRecord], y: &str) -> Result<Vec<RunCurve>> {
    let mut out = Vec::new();
    for r in runs {
        let Ok(logs) = run_logs(raw, &r.run_id) else {
            continue;
        };
        let c = curve_of(&logs, y)?;
        if !c.is_empty() {
            out.push((r.clone(), c));
        }
    }
    Ok(out)
}

/// curves.csv: run id, grid keys, then one line per step.
pub(crate) fn write_curves_csv(path: &Path, y: &str, curves: &[RunCurve]) -> Result<()> {
    let keys: Vec<String> = curves
        .first()
        .map(|(r, _)| r.point.keys().cloned().collect())
        .unwrap_or_default();
    let header: Vec<String> = std::iter::once("run_id".to_string())
        .chain(keys.iter().cloned())
        .chain(["iteration", "epoch", "wall_s", "bytes", y].map(String::from))
        .collect();
    let lines = curves.iter().flat_map(|(r, points)| {
        let prefix: Vec<String> = std::iter::once(r.run_id.clone())
            .chain(
                keys.iter()
                    .map(|k| r.point.get(k).cloned().unwrap_or_default()),
            )
            .collect();
        points.iter().map(move |p| {
            prefix
                .iter()
                .cloned()
                .chain([
                    p.iteration.to_string(),
                    p.epoch.to_string(),
                    p.wall_s.to_string(),
                    p.bytes.map(|b| b.to_string()).unwrap_or_default(),
                    p.value.to_string(),
                ])
                .collect::<Vec<_>>()
        })
    });
    crate::util::atomic::write(
        path,
        crate::records::results::csv_text(std::iter::once(header).chain(lines))?,
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use repro_runlog::{Header, Provenance, Step};

    /// A rank's log with one step per loss, each `dt` seconds long.
    pub(crate) fn log(rank: u32, losses: &[f64], dt: f64) -> Log {
        Log {
            header: Header {
                schema: 1,
                run_id: "r".into(),
                rank,
                world: 2,
                config: serde_json::Value::Null,
                provenance: Provenance::default(),
            },
            steps: losses
                .iter()
                .enumerate()
                .map(|(i, &l)| Step {
                    iteration: i as u64,
                    epoch: i as f64 / 10.0,
                    wall_s: (i + 1) as f64 * dt + f64::from(rank) * 0.01,
                    compute_s: dt,
                    comm_s: 0.0,
                    train_loss: l,
                    bytes_sent: 0,
                    bytes_received: 0,
                    hash_failures: 0,
                    hash_verified: 0,
                    phases: None,
                })
                .collect(),
            evals: Vec::new(),
            end: None,
        }
    }

    #[test]
    fn ranks_average_into_a_curve() {
        // rank 1 logged one step fewer (killed): only common steps count
        let c = curve(&[log(0, &[2.0, 1.0, 0.5], 1.0), log(1, &[4.0, 3.0], 1.0)]);
        assert_eq!(c.len(), 2);
        assert_eq!(c[1].value, 2.0);
        assert_eq!(c[1].wall_s, 2.0);
    }

    /// Evaluation metrics make curves too: one point per evaluated
    /// iteration, averaged over the ranks that evaluated it.
    #[test]
    fn evaluations_make_curves_of_their_metrics() {
        let eval = |iteration: u64, loss: f64, avg: Option<f64>| repro_runlog::Eval {
            iteration,
            epoch: iteration as f64 / 10.0,
            wall_s: iteration as f64,
            test_loss: Some(loss),
            test_accuracy: Some(0.5),
            avg_test_loss: avg,
            avg_test_accuracy: None,
            consensus_distance: None,
            max_deviation: None,
            model_norm: None,
            recovered: None,
            wrapped: None,
            val_loss: None,
            val_accuracy: None,
            objective: None,
            subopt: None,
        };
        let mut a = log(0, &[1.0, 1.0], 1.0);
        let mut b = log(1, &[1.0, 1.0], 1.0);
        a.evals = vec![eval(1, 2.0, None), eval(2, 1.0, Some(0.8))];
        b.evals = vec![eval(1, 4.0, None), eval(2, 3.0, Some(0.8))];
        let c = curve_of(&[a.clone(), b.clone()], "test_loss").unwrap();
        assert_eq!(
            c.iter().map(|p| (p.iteration, p.value)).collect::<Vec<_>>(),
            [(1, 3.0), (2, 2.0)]
        );
        // the intermediate evaluations of AD-PSGD have no averaged model
        let c = curve_of(&[a.clone(), b.clone()], "avg_test_loss").unwrap();
        assert_eq!(c.len(), 1);
        assert!((c[0].value - 0.8).abs() < 1e-12);
        // rank 0 alone scores the averaged model: its value is the point's,
        // at the slowest rank's time; an iteration a rank did not evaluate
        // at all has no point
        b.evals = vec![eval(1, 4.0, None), eval(2, 3.0, None)];
        b.evals[1].wall_s = 5.0;
        let c = curve_of(&[a.clone(), b.clone()], "avg_test_loss").unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].iteration, 2);
        assert!((c[0].wall_s - 4.99).abs() < 1e-9, "{c:?}");
        assert!((c[0].value - 0.8).abs() < 1e-12);
        b.evals.pop();
        assert!(
            curve_of(&[a.clone(), b], "avg_test_loss")
                .unwrap()
                .is_empty()
        );
        assert!(curve_of(&[a], "accuracy").is_err());
    }
}
