//! Which device a rank trains on.

use tch::Device;

/// The device of one rank and how libtorch's threads are set for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePlan {
    pub device: Device,
    /// Intra-op threads for libtorch (one per rank on CPU, so that several
    /// ranks can share a few cores without oversubscription).
    pub threads: i32,
}

/// CUDA device `rank % gpus` when CUDA is available, else the CPU with one
/// intra-op thread. `cuda_devices` is the number of visible GPUs.
pub fn plan_device(rank: usize, cuda_devices: usize) -> DevicePlan {
    if cuda_devices > 0 {
        DevicePlan {
            device: Device::Cuda(rank % cuda_devices),
            threads: 1,
        }
    } else {
        DevicePlan {
            device: Device::Cpu,
            threads: 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_round_robin_over_gpus() {
        assert_eq!(plan_device(5, 4).device, Device::Cuda(1));
        assert_eq!(plan_device(3, 0).device, Device::Cpu);
        assert_eq!(plan_device(3, 0).threads, 1);
    }
}
