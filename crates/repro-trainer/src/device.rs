//! Which device a rank trains on.

use repro_runlog::DeviceChoice;
use tch::Device;

/// The device of one rank and how libtorch's threads are set for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DevicePlan {
    pub device: Device,
    /// Intra-op threads for libtorch (one per rank on CPU, so that several
    /// ranks can share a few cores without oversubscription).
    pub threads: i32,
}

/// The device of a worker: with `gpus` visible GPUs, CUDA device `slot %
/// gpus` unless `choice` is `cpu`; else the CPU (an error for `cuda`).
/// `slot` is the worker's index among those sharing this machine's GPUs:
/// its rank in process, its local rank over MPI ([`local_rank`]). One
/// intra-op libtorch thread either way, so that workers sharing a few
/// cores are not oversubscribed.
pub fn plan_device(slot: usize, gpus: usize, choice: DeviceChoice) -> Result<DevicePlan, String> {
    let device = match (choice, gpus) {
        (DeviceChoice::Cpu, _) | (DeviceChoice::Auto, 0) => Device::Cpu,
        (DeviceChoice::Cuda, 0) => {
            return Err(format!(
                "`device: cuda`, but libtorch sees no CUDA device ({}); use `device: auto` or \
                 `cpu`, or build against a CUDA libtorch (docs/cluster.md)",
                if tch::utils::has_cuda() {
                    "it was built with CUDA: is a GPU visible (CUDA_VISIBLE_DEVICES, nvidia-smi)?"
                } else {
                    "the libtorch loaded was built without CUDA"
                }
            ));
        }
        (DeviceChoice::Auto | DeviceChoice::Cuda, gpus) => Device::Cuda(slot % gpus),
    };
    Ok(DevicePlan { device, threads: 1 })
}

/// A device as logs and runs.csv name it: `cpu`, `cuda:0`, ...
pub fn device_name(device: Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(i) => format!("cuda:{i}"),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// The variables launchers set to a process's rank among those on its
/// node, first match wins: Open MPI's `mpirun`, Slurm's `srun`, MPICH's
/// and Intel MPI's Hydra, MVAPICH2, PMIx.
pub const LOCAL_RANK_VARIABLES: [&str; 5] = [
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "SLURM_LOCALID",
    "MPI_LOCALRANKID",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "PMIX_LOCAL_RANK",
];

/// This process's rank among the processes of its node, as the launcher
/// says it through `env` (one of [`LOCAL_RANK_VARIABLES`]), with the
/// variable it came from; `None` when no launcher said it.
pub fn local_rank(env: impl Fn(&str) -> Option<String>) -> Option<(usize, &'static str)> {
    LOCAL_RANK_VARIABLES
        .iter()
        .find_map(|&v| Some((env(v)?.trim().parse().ok()?, v)))
}

/// The libtorch this process loaded: its version (from the `version.py` of
/// a pip torch, or the `build-version` of a libtorch archive, beside its
/// `lib/`) and the library file, as `/proc/self/maps` names it.
pub fn loaded_libtorch() -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let lib = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            std::path::Path::new(p)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libtorch_cpu"))
        })?;
    let root = std::path::Path::new(lib).parent()?.parent()?;
    let version = std::fs::read_to_string(root.join("version.py"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("__version__ = "))
                .map(|v| v.trim().trim_matches(['\'', '"']).to_string())
        })
        .or_else(|| {
            std::fs::read_to_string(root.join("build-version"))
                .ok()
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "version unknown".into());
    Some(format!("{version} ({lib})"))
}

/// What the trainer was built against and what it loaded, libtorch and
/// CUDA, as `repro-train --version` prints them after its first line:
///
/// ```text
/// libtorch: built for 2.13.0+cu130 (tch 0.26.0, CUDA 13.0); loaded 2.13.0+cu130 (/.../libtorch_cpu.so)
/// cuda: 1 device visible, CUDA runtime 13000, cuDNN 91300
/// ```
pub fn torch_report() -> String {
    let built = format!(
        "libtorch: built for {} (tch {}, CUDA {}); loaded {}",
        env!("REPRO_TORCH_BUILT"),
        env!("REPRO_TCH"),
        env!("REPRO_TORCH_CUDA"),
        loaded_libtorch().unwrap_or_else(|| "none found in this process".into())
    );
    let gpus = tch::Cuda::device_count();
    let cuda = if gpus > 0 {
        format!(
            "cuda: {gpus} device{} visible, CUDA runtime {}, cuDNN {}",
            if gpus == 1 { "" } else { "s" },
            tch::utils::version_cudart(),
            tch::utils::version_cudnn()
        )
    } else if tch::utils::has_cuda() {
        "cuda: libtorch has CUDA, but no device is visible".into()
    } else {
        "cuda: no device visible (the loaded libtorch has no usable CUDA, or this machine no GPU)"
            .into()
    };
    format!("{built}\n{cuda}")
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
    fn workers_round_robin_over_gpus() {
        let plan = |slot, gpus, choice| plan_device(slot, gpus, choice).map(|p| p.device);
        assert_eq!(plan(5, 4, DeviceChoice::Auto), Ok(Device::Cuda(1)));
        assert_eq!(plan(5, 4, DeviceChoice::Cuda), Ok(Device::Cuda(1)));
        assert_eq!(plan(5, 4, DeviceChoice::Cpu), Ok(Device::Cpu));
        assert_eq!(plan(3, 0, DeviceChoice::Auto), Ok(Device::Cpu));
        assert_eq!(plan_device(3, 0, DeviceChoice::Auto).unwrap().threads, 1);
        let err = plan(3, 0, DeviceChoice::Cuda).unwrap_err();
        assert!(err.contains("no CUDA device"), "{err}");
    }

    #[test]
    fn devices_have_their_log_names() {
        assert_eq!(device_name(Device::Cpu), "cpu");
        assert_eq!(device_name(Device::Cuda(3)), "cuda:3");
    }

    /// The first launcher variable set wins; one that is not a number is
    /// passed over.
    #[test]
    fn local_rank_comes_from_the_launcher() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(local_rank(env(&[])), None);
        assert_eq!(
            local_rank(env(&[("SLURM_LOCALID", "3")])),
            Some((3, "SLURM_LOCALID"))
        );
        assert_eq!(
            local_rank(env(&[
                ("SLURM_LOCALID", "3"),
                ("OMPI_COMM_WORLD_LOCAL_RANK", "1")
            ])),
            Some((1, "OMPI_COMM_WORLD_LOCAL_RANK"))
        );
        assert_eq!(
            local_rank(env(&[
                ("OMPI_COMM_WORLD_LOCAL_RANK", "x"),
                ("MPI_LOCALRANKID", "2")
            ])),
            Some((2, "MPI_LOCALRANKID"))
        );
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
