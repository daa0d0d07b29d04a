//! Helpers every stage uses; they import nothing else of the driver.

pub(crate) mod atomic;
pub(crate) mod process;
pub(crate) mod progress;
pub(crate) mod read;
pub(crate) mod signals;
pub(crate) mod sudo;
pub(crate) mod text;
pub(crate) mod time;
