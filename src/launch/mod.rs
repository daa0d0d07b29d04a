//! Running a plan: the simulator and MPI backends, the shaped network, the
//! data a run reads, and the Slurm job a run directory was submitted as.

pub(crate) mod data;
pub(crate) mod net;
pub(crate) mod sim;
pub(crate) mod slurm;
pub(crate) mod summary;
pub(crate) mod train;
