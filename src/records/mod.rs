//! What a run leaves: its record (runs.csv, runs.parquet), its curves, the
//! results directory that holds them with its provenance, and the data
//! frames the reports read.

pub(crate) mod curves;
pub(crate) mod frames;
pub(crate) mod freshness;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod results;
pub(crate) mod results_dir;
