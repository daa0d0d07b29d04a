//! Decentralized SGD algorithms over flat parameter buffers, and the
//! virtual-clock simulator. Nothing here calls MPI or torch: workers turn
//! models into frames and frames into models; a transport (the simulator's
//! memory, or MPI in the trainer) carries the bytes.
//!
//! - [`Topology`]: communication graphs and their mixing matrices.
//! - [`Worker`] and [`AlgorithmSpec`]: the algorithms, one file each in `algos/`.
//! - [`Simulator`]: n workers in one process with a virtual clock;
//!   [`AsyncSimulator`]: AD-PSGD and Moniqua on AD-PSGD, event-driven.
//! - [`objective`]: objectives with analytic gradients for tests and studies;
//!   [`data`]: least squares and logistic regression on LIBSVM or generated data.

pub mod algorithm;
pub mod algos;
pub mod compress;
pub mod consensus;
pub mod data;
mod errors;
pub mod flat;
pub mod memory;
pub mod minimize;
pub mod objective;
pub mod optim;
pub mod pairwise;
pub mod rng;
pub mod schedule;
mod scratch;
pub mod sim;
pub mod sim_async;
pub mod topology;

pub use algorithm::{Blockwise, Pattern, Received, Worker};
pub use algos::{
    ALGORITHM_NAMES, ASYNC_ALGORITHM_NAMES, AlgorithmSpec, Knobs, Theta, moniqua_config,
};
pub use compress::{Compressor, CompressorSpec};
pub use consensus::{Consensus, Deviation};
pub use data::{DataError, Dataset, LinearModel, Loss, Split};
pub use errors::{AlgoError, TopologyError, unless_diverged};
pub use memory::{Footprint, Shape};
pub use objective::{Objective, Quadratic, Separable};
pub use optim::Sgd;
pub use pairwise::{Folded, PairSide};
pub use schedule::{LrSchedule, SCHEDULES, Schedule};
pub use sim::{Network, Recovery, SimConfig, Simulator, StepReport};
pub use sim_async::{AsyncConfig, AsyncExchange, AsyncReport, AsyncSimulator};
pub use topology::{Spectrum, Topology};
