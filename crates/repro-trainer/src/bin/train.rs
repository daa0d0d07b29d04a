//! `repro-train`: one MPI rank of a training run.
//!
//!     mpirun -np 8 repro-train --config run.json --log-dir results/x/raw/ID
//!
//! Each rank writes `rank-<r>.jsonl` (the run-log schema of `repro-runlog`)
//! into the log directory. Exit codes: 0 completed, 4 diverged (a result,
//! recorded in the log), 1 failed.

use std::path::PathBuf;
use std::process::ExitCode;

use repro_trainer::train::{TrainConfig, train};
use repro_trainer::transport::{MpiTransport, Transport, abort_job, abort_on_panic};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(config), Some(log_dir)) = (arg(&args, "--config"), arg(&args, "--log-dir")) else {
        eprintln!("usage: repro-train --config RUN.json --log-dir DIR");
        return ExitCode::from(2);
    };
    let mut transport = match MpiTransport::init() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("repro-train: {e}");
            return ExitCode::from(1);
        }
    };
    abort_on_panic();
    let rank = transport.rank();
    let cfg: TrainConfig = match std::fs::read_to_string(&config)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("repro-train: rank {rank}: could not read config {config}: {e}");
            return ExitCode::from(1);
        }
    };
    let dir = PathBuf::from(log_dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("repro-train: could not create {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    let path = dir.join(format!("rank-{rank}.jsonl"));
    let file = match std::fs::File::create(&path) {
        Ok(f) => std::io::BufWriter::new(f),
        Err(e) => {
            eprintln!("repro-train: could not create {}: {e}", path.display());
            return ExitCode::from(1);
        }
    };
    match train(&cfg, &mut transport, file) {
        Ok(repro_runlog::Status::Completed) => ExitCode::SUCCESS,
        // diverged: the log says so; the other ranks would wait forever for
        // this rank's next frame, so the whole job stops here
        Ok(_) if transport.size() > 1 => abort_job(4),
        Ok(_) => ExitCode::from(4),
        Err(e) => {
            eprintln!("repro-train: rank {rank}: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            // one rank failing must not leave the others waiting
            abort_job(1)
        }
    }
}
