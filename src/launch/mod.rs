//! Running a plan: the simulator and MPI backends, the shaped network, and
//! the data a run reads.

pub(crate) mod data;
pub(crate) mod net;
pub(crate) mod sim;
pub(crate) mod summary;
pub(crate) mod train;
