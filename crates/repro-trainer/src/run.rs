//! One rank's run, the trainer's entry point: the synchronous loop
//! ([`crate::train::train`]) or, for the asynchronous algorithms
//! (`ad-psgd`, `moniqua-ad-psgd`), [`crate::train_async::train_async`].
//! Both loops share their set-up and local step through [`crate::setup`]
//! and [`crate::local`]; only this module knows both, so neither imports
//! the other.

use std::io::Write;

use repro_runlog::{Status, TrainConfig};

use crate::setup::TrainError;
use crate::transport::Transport;

/// Trains one rank; writes its log to `log`. Returns how the run ended.
pub fn run<T: Transport>(
    cfg: &TrainConfig,
    t: &mut T,
    log: impl Write + Send,
) -> Result<Status, TrainError> {
    if repro_algos::ASYNC_ALGORITHM_NAMES.contains(&cfg.algorithm.as_str()) {
        crate::train_async::train_async(cfg, t, log)
    } else {
        crate::train::train(cfg, t, log)
    }
}
