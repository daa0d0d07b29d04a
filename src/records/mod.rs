//! What a run leaves: its record (runs.csv, runs.parquet), its curves, and
//! the data frames the reports read.

pub(crate) mod curves;
pub(crate) mod frames;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod results;
