//! Decentralized SGD algorithms over flat parameter buffers, and the
//! virtual-clock simulator (issue "Algorithms and the virtual-clock
//! simulator"). Nothing here calls MPI or torch.
//!
//! So far: [`Topology`], the communication graphs and their mixing matrices.

mod errors;
pub mod topology;

pub use errors::TopologyError;
pub use topology::{Spectrum, Topology};
