//! What the records show: tables, figures, claims and their statistics,
//! tuning, and the HTML page.

pub(crate) mod claims;
pub(crate) mod html;
pub(crate) mod outputs;
pub(crate) mod plot;
pub mod stats;
pub(crate) mod table;
pub(crate) mod tune;
