//! What to run: manifests (with their project and errors), network
//! conditions, data sets, and the plan of runs a manifest makes.

pub(crate) mod condition;
pub(crate) mod data;
pub(crate) mod errors;
pub(crate) mod manifest;
pub(crate) mod plan;
pub(crate) mod project;
