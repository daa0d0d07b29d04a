//! What the records show: tables, figures, claims and their statistics,
//! tuning, the HTML page, a reproduction report's generated sections, a
//! rerun checked against the record (`verify.rs`), and
//! exports to MLflow and TensorBoard.

pub(crate) mod claims;
pub(crate) mod export;
pub(crate) mod figure_py;
pub(crate) mod html;
pub(crate) mod outputs;
pub(crate) mod plot;
pub(crate) mod recorded;
pub(crate) mod repeats;
pub(crate) mod section;
pub mod stats;
pub(crate) mod subset;
pub(crate) mod table;
pub(crate) mod tune;
pub(crate) mod tune_figure;
pub(crate) mod verify;
