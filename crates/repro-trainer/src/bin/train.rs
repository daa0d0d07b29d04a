//! `repro-train`: one MPI rank of a training run, or every worker of it as
//! threads of one process.
//!
//!     mpirun -np 8 repro-train --config run.json --log-dir results/x/raw/ID
//!     repro-train --in-process 8 --config run.json --log-dir results/x/raw/ID
//!
//! Each rank writes `rank-<r>.jsonl` (the run-log schema of `repro-runlog`)
//! into the log directory. `--in-process N` runs the N workers as threads
//! exchanging frames through memory, timed by a virtual clock
//! (`virtual_bandwidth_bps` and `latency_ms` of the config model the
//! network; see `transport::LocalTransport`). Exit codes: 0 completed, 4
//! diverged (a result, recorded in the log), 1 failed, 2 bad usage.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use repro_runlog::Status;
use repro_trainer::run::run as train;
use repro_trainer::train::{TrainConfig, TrainError};
use repro_trainer::transport::{Transport, local_world};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn report(rank: usize, e: &TrainError) {
    eprintln!("repro-train: rank {rank}: {e}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        eprintln!("  caused by: {s}");
        source = s.source();
    }
}

fn log_file(dir: &Path, rank: usize) -> Result<std::io::BufWriter<std::fs::File>, String> {
    let path = dir.join(format!("rank-{rank}.jsonl"));
    std::fs::File::create(&path)
        .map(std::io::BufWriter::new)
        .map_err(|e| format!("could not create {}: {e}", path.display()))
}

/// Every worker as a thread of this process. A worker that fails or
/// diverges drops its transport, so the others stop with `PeerLeft`
/// instead of waiting; their errors are not the cause and are not reported.
fn in_process(n: usize, cfg: &TrainConfig, dir: &Path) -> ExitCode {
    if n == 0 {
        eprintln!("repro-train: --in-process needs at least 1 worker");
        return ExitCode::from(2);
    }
    let bandwidth = cfg.virtual_bandwidth_bps;
    if !(bandwidth >= 0.0 && bandwidth.is_finite()) {
        eprintln!(
            "repro-train: virtual_bandwidth_bps must be >= 0 (0: unlimited), got {bandwidth}"
        );
        return ExitCode::from(2);
    }
    let network = (bandwidth > 0.0).then_some(repro_algos::sim::Network {
        bandwidth_bps: bandwidth,
        latency_s: 0.0,
    });
    let outcomes: Vec<Result<Status, (TrainError, bool)>> = std::thread::scope(|s| {
        let handles: Vec<_> = local_world(n, network)
            .into_iter()
            .map(|mut t| {
                s.spawn(move || {
                    let rank = t.rank();
                    let file = log_file(dir, rank).map_err(|e| (TrainError::Config(e), false))?;
                    train(cfg, &mut t, file).map_err(|e| {
                        let consequence = matches!(
                            e,
                            TrainError::Transport(
                                repro_trainer::transport::TransportError::PeerLeft { .. }
                            )
                        );
                        (e, consequence)
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err((
                        TrainError::Config("the worker's thread panicked".into()),
                        false,
                    ))
                })
            })
            .collect()
    });
    let mut failed = false;
    for (rank, o) in outcomes.iter().enumerate() {
        if let Err((e, false)) = o {
            report(rank, e);
            failed = true;
        }
    }
    let diverged = outcomes
        .iter()
        .any(|o| matches!(o, Ok(Status::Diverged { .. })));
    if diverged {
        ExitCode::from(4)
    } else if failed || outcomes.iter().any(Result::is_err) {
        if !failed {
            eprintln!("repro-train: workers stopped waiting for one another");
        }
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(feature = "mpi")]
fn over_mpi(cfg: &TrainConfig, dir: &Path) -> ExitCode {
    use repro_trainer::transport::{MpiTransport, abort_job, abort_on_panic};
    let mut transport = match MpiTransport::init() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("repro-train: {e}");
            return ExitCode::from(1);
        }
    };
    abort_on_panic();
    let rank = transport.rank();
    let file = match log_file(dir, rank) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("repro-train: {e}");
            abort_job(1)
        }
    };
    match train(cfg, &mut transport, file) {
        Ok(Status::Completed) => ExitCode::SUCCESS,
        // diverged: the log says so; the other ranks would wait forever for
        // this rank's next frame, so the whole job stops here
        Ok(_) if transport.size() > 1 => abort_job(4),
        Ok(_) => ExitCode::from(4),
        Err(e) => {
            report(rank, &e);
            // one rank failing must not leave the others waiting
            abort_job(1)
        }
    }
}

#[cfg(not(feature = "mpi"))]
fn over_mpi(_: &TrainConfig, _: &Path) -> ExitCode {
    eprintln!(
        "repro-train: built without the `mpi` feature; run with --in-process N, or rebuild with MPI"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--version") {
        // the driver compares the first line with its own: both from one
        // build; then the libtorch and CUDA it was built for and loaded
        println!("repro-train {}", repro_build::VERSION);
        println!("{}", repro_trainer::torch_report());
        return ExitCode::SUCCESS;
    }
    if let Err(e) = repro_codec::simd::check_cap_env() {
        eprintln!("repro-train: {e}");
        return ExitCode::from(2);
    }
    let (Some(config), Some(log_dir)) = (arg(&args, "--config"), arg(&args, "--log-dir")) else {
        eprintln!("usage: repro-train [--in-process N] --config RUN.json --log-dir DIR");
        return ExitCode::from(2);
    };
    let workers = match arg(&args, "--in-process").map(|n| n.parse::<usize>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(e)) => {
            eprintln!("repro-train: --in-process takes a number of workers: {e}");
            return ExitCode::from(2);
        }
    };
    let cfg: TrainConfig = match std::fs::read_to_string(&config)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("repro-train: could not read config {config}: {e}");
            return ExitCode::from(1);
        }
    };
    if workers.is_none() && cfg.virtual_bandwidth_bps != 0.0 {
        eprintln!(
            "repro-train: virtual_bandwidth_bps models the network of in-process runs; pass \
             --in-process N, or shape a real network for MPI ranks"
        );
        return ExitCode::from(2);
    }
    let dir = PathBuf::from(log_dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("repro-train: could not create {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    match workers {
        Some(n) => in_process(n, &cfg, &dir),
        None => over_mpi(&cfg, &dir),
    }
}
