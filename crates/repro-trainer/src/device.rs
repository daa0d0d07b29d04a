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

/// Pins the calling thread to one CPU: the `rank`-th, modulo their number,
/// of the CPUs it may run on now (a launcher's binding or `taskset` is
/// respected). Threads it starts afterwards inherit the pin. Returns the
/// CPU, or why it could not pin.
#[allow(unsafe_code)]
pub fn pin_to_core(rank: usize) -> Result<usize, String> {
    let cpus = allowed_cpus()?;
    let Some(&cpu) = cpus.get(rank % cpus.len().max(1)) else {
        return Err("no CPU to run on".into());
    };
    // SAFETY: a zeroed cpu_set_t is the empty set, CPU_SET indexes below
    // CPU_SETSIZE (`cpu` came from the kernel's own set)
    let rc = unsafe {
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one)
    };
    if rc != 0 {
        return Err(format!(
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(cpu)
}

/// The CPUs the calling thread may run on.
#[allow(unsafe_code)]
pub fn allowed_cpus() -> Result<Vec<usize>, String> {
    // SAFETY: a zeroed cpu_set_t is the empty set; the kernel writes at most
    // its size into it, and CPU_ISSET indexes below CPU_SETSIZE
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!(
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
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

    /// A pinned thread runs on one CPU, the rank's modulo the CPUs it had;
    /// other threads keep theirs.
    #[test]
    fn a_pinned_thread_runs_on_one_cpu() {
        let before = super::allowed_cpus().unwrap();
        assert!(!before.is_empty());
        let (cpu, after) = std::thread::spawn(|| {
            let cpu = super::pin_to_core(3).unwrap();
            (cpu, super::allowed_cpus().unwrap())
        })
        .join()
        .unwrap();
        assert_eq!(cpu, before[3 % before.len()]);
        assert_eq!(after, vec![cpu]);
        assert_eq!(
            super::allowed_cpus().unwrap(),
            before,
            "this thread is not pinned"
        );
    }
}
