//! The `repro` driver as a library. Its folders follow the data path, and
//! each imports only from the folders before it:
//!
//! - `util`: files written whole, progress, signals, sudo, processes.
//! - `experiment`: manifests, conditions, data sets and the plan of runs.
//! - `launch`: the backends, the shaped network, data preparation.
//! - `records`: a run's log as a record: runs.csv, curves, frames.
//! - `report`: tables, figures, claims, statistics, tuning, the HTML page.
//! - `cmd`: one file per subcommand; only here is the command line seen.
//!
//! `main.rs` only calls [`main`]. The statistics are public for the tests.

mod cmd;
mod experiment;
mod launch;
mod records;
pub mod report;
mod util;

pub use cmd::main;
