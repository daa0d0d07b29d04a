//! Runs a planned run as `repro-train` ranks under `mpirun`, then summarizes
//! the ranks' logs. Commands are argument vectors, never shell strings; the
//! job runs in its own process group, which is terminated (TERM, then KILL)
//! when it outlives its timeout, so mpirun's daemons and ranks go too.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use repro_runlog::{Status, TrainConfig, read_log};

use crate::plan::{Params, PlannedRun};
use crate::sim_backend::Summary;

/// The `repro-train` binary: `$REPRO_TRAIN`, else next to this executable.
pub fn train_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("REPRO_TRAIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("could not locate the repro executable")?;
    let sibling = exe.with_file_name("repro-train");
    if sibling.is_file() {
        return Ok(sibling);
    }
    bail!(
        "the trainer binary `repro-train` is not next to {} and REPRO_TRAIN is not set; \
         build it with `cargo build --release -p repro-trainer` (it needs libtorch: source ~/.cache/repro/env.sh)",
        exe.display()
    )
}

/// TERM to the process group, then KILL after a grace period.
fn terminate_group(pgid: u32) {
    let group = format!("-{pgid}");
    let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
    std::thread::sleep(Duration::from_secs(3));
    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
}

/// Runs `run` with `workers` ranks; logs go to `dir/rank-<r>.jsonl`.
pub fn execute(run: &PlannedRun, dir: &Path) -> Result<Summary> {
    let Params::Train(cfg) = &run.params else {
        bail!("run {} is not a trainer run", run.id);
    };
    let workers = if cfg.workers == 0 { 8 } else { cfg.workers };
    let cfg = TrainConfig {
        workers,
        ..cfg.clone()
    };
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    let config = dir.join("run.json");
    std::fs::write(&config, serde_json::to_string_pretty(&cfg)?)
        .with_context(|| format!("could not write {}", config.display()))?;
    let train = train_binary()?;
    // mpirun's and the ranks' stderr go to a file: a pipe nobody reads while
    // we wait could fill up and stall the job
    let stderr_path = dir.join("mpirun.stderr");
    let stderr_file = std::fs::File::create(&stderr_path)
        .with_context(|| format!("could not create {}", stderr_path.display()))?;
    let mut cmd = Command::new("mpirun");
    cmd.args(["-np", &workers.to_string(), "--oversubscribe"]);
    if crate::doctor::is_root() {
        cmd.arg("--allow-run-as-root");
    }
    cmd.arg(&train)
        .arg("--config")
        .arg(&config)
        .arg("--log-dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr_file))
        .process_group(0);
    let mut child = cmd
        .spawn()
        .context("could not start mpirun; install OpenMPI (ci/setup.sh does)")?;
    let deadline = Instant::now() + Duration::from_secs(cfg.timeout_s);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            terminate_group(child.id());
            let _ = child.wait();
            bail!(
                "run {} exceeded its timeout of {} s and was terminated",
                run.id,
                cfg.timeout_s
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let logs = (0..workers)
        .map(|r| {
            let path = dir.join(format!("rank-{r}.jsonl"));
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("rank {r} left no log at {}", path.display()))?;
            read_log(text.as_bytes())
                .with_context(|| format!("rank {r}'s log {} is unreadable", path.display()))
        })
        .collect::<Result<Vec<_>>>();
    let logs = match logs {
        Ok(l) => l,
        Err(e) => bail!("mpirun exited with {status}: {}\n{e:#}", stderr.trim()),
    };
    // exit code 4: the run diverged, which the logs record
    if !status.success() && status.code() != Some(4) {
        bail!("mpirun exited with {status}: {}", stderr.trim());
    }
    let diverged = logs.iter().any(|l| {
        matches!(
            l.end.as_ref().map(|e| &e.status),
            Some(Status::Diverged { .. })
        )
    });
    let last = |f: &dyn Fn(&repro_runlog::Eval) -> Option<f64>| {
        let v: Vec<f64> = logs
            .iter()
            .filter_map(|l| l.evals.last().and_then(f))
            .collect();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    Ok(Summary {
        status: if diverged {
            "diverged".into()
        } else {
            "completed".into()
        },
        final_loss: last(&|e| e.avg_test_loss),
        local_loss: last(&|e| Some(e.test_loss)),
        grad_norm_sq: f64::NAN,
        consensus: last(&|e| e.consensus_distance),
        bytes: logs
            .iter()
            .flat_map(|l| l.steps.iter().map(|s| s.bytes_sent))
            .sum(),
        virtual_s: logs
            .iter()
            .filter_map(|l| l.end.as_ref().map(|e| e.wall_s))
            .fold(0.0, f64::max),
        hash_failures: logs
            .iter()
            .flat_map(|l| l.steps.iter().map(|s| s.hash_failures))
            .sum(),
        test_accuracy: last(&|e| Some(e.test_accuracy)),
        avg_test_accuracy: last(&|e| e.avg_test_accuracy),
    })
}
