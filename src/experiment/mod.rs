//! What to run: manifests (with their project and errors), network
//! conditions, data sets, the plan of runs a manifest makes, and what
//! the plan can tell about its runs' validity before they run.

pub(crate) mod condition;
pub(crate) mod data;
pub(crate) mod design;
pub(crate) mod errors;
pub(crate) mod manifest;
pub(crate) mod plan;
pub(crate) mod project;
