//! The `repro` driver as a library: manifests, plans, backends, shaping,
//! results, tables and figures. `main.rs` only calls [`cli::main`].

pub mod atomic;
pub mod claims;
pub mod cli;
pub mod curves;
pub mod data_cmd;
pub mod demo;
pub mod doctor;
pub mod errors;
pub mod frames;
pub mod manifest;
pub mod net;
pub mod net_cmd;
pub mod plan;
pub mod plot;
pub mod progress;
pub mod project;
pub mod report;
pub mod results;
pub mod run;
pub mod signals;
pub mod sim_backend;
pub mod stats;
pub mod status;
pub mod sudo;
pub mod table;
pub mod train_backend;
pub mod tune;
