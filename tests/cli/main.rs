//! The `repro` binary end to end: experiments run in the simulator, results
//! land in runs.csv and table.md, and bad input gives clear errors and the
//! documented exit codes. One file per command (or group of them).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "../common/mod.rs"]
mod common;
use common::{
    as_root, csv_rows, fields, finish, kill, number, read_runs, repro, repro_cmd, repro_json,
    skipped, temp_out, train_binary, wait_for_trainer,
};

/// `repro ARGS` is refused: exit code 1, and standard error holds `said`
/// (a clear message, not a panic or a usage dump). Returns standard error.
fn refused(args: &[&str], said: &str) -> String {
    let o = repro(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains(said), "{args:?} said: {err}");
    err
}

mod host;
mod plan;
mod report;
mod run;
mod submit;
mod tune;
