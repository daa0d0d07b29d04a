//! The trainer: one worker's model, data and optimizer, exchanging framed
//! messages with its neighbours (issue "Trainer: real models, real data, MPI
//! transport, run logs").
//!
//! This crate links libtorch through `tch`; the driver (`repro`) never
//! depends on it. So far it holds the bridge between a `tch` model and the
//! codec's flat `f32` buffer, the choice of device per rank, and the data
//! sets (Fashion-MNIST, CIFAR-10) with their partitions across workers.

pub mod data;
mod device;
mod errors;
mod flat;
mod local;
pub mod models;
pub mod run;
mod setup;
pub mod train;
mod train_async;
pub mod transport;

pub use device::{DevicePlan, device_name, loaded_libtorch, local_rank, plan_device, torch_report};
pub use errors::TrainerError;
pub use flat::FlatParams;
pub use models::{ImageShape, ModelSpec};
pub use repro_algos::{LrSchedule, Schedule};
