//! This process and others: whether it runs as root, when a process started.

/// Whether this process runs as root (uid 0).
pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// This machine's host name (for messages; [`boot_id`] tells machines apart).
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// This kernel's boot id: a pid means the same process only under it.
pub(crate) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|b| b.trim().to_string())
        .unwrap_or_default()
}

/// The start time of process `pid` (field 22 of its stat line, after the
/// command name in parentheses, which may hold spaces).
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    // after the name: field 3 (state) is the first; 22 is the 20th
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The memory this process may still take by its own limits, besides what
/// the machine has available: the address space left under RLIMIT_AS
/// (`ulimit -v`, less what is mapped now) and what its memory cgroup allows
/// beyond its use (v2 `memory.max`, v1 `memory.limit_in_bytes`). Each
/// with what it is; none where no limit is set.
pub(crate) fn memory_limits() -> Vec<(u64, String)> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let mut out = Vec::new();
    if let Some(left) = address_space_left(&read("/proc/self/limits"), &read("/proc/self/status")) {
        out.push((
            left,
            "the address space RLIMIT_AS leaves (ulimit -v)".to_string(),
        ));
    }
    for (max, used, what) in [
        (
            "/sys/fs/cgroup/memory.max",
            "/sys/fs/cgroup/memory.current",
            "memory.max",
        ),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
            "memory.limit_in_bytes",
        ),
    ] {
        if let Some(left) = cgroup_left(&read(max), &read(used)) {
            out.push((left, format!("the memory cgroup's {what}, less its use")));
        }
    }
    out
}

/// RLIMIT_AS's soft limit (a `/proc/self/limits` text) less the mapped
/// size (`VmSize` of a `/proc/self/status` text); none when unlimited.
fn address_space_left(limits: &str, status: &str) -> Option<u64> {
    let limit: u64 = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    let mapped_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    Some(limit.saturating_sub(mapped_kb * 1024))
}

/// A cgroup's limit less its use; none without a limit (`max`, or the
/// v1 value that stands for none, above 2^62).
fn cgroup_left(max: &str, used: &str) -> Option<u64> {
    let max: u64 = max.trim().parse().ok().filter(|&m| m < 1 << 62)?;
    let used: u64 = used.trim().parse().unwrap_or(0);
    Some(max.saturating_sub(used))
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn limits_are_read_from_proc_and_the_cgroup() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax address space         4096000000           unlimited            bytes\n";
        assert_eq!(
            address_space_left(limits, "VmSize:\t 1000 kB\n"),
            Some(4_096_000_000 - 1_024_000)
        );
        let none = "Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(address_space_left(none, ""), None);
        assert_eq!(cgroup_left("max\n", "5"), None);
        assert_eq!(cgroup_left("9223372036854771712", "5"), None);
        assert_eq!(cgroup_left("1000", "400"), Some(600));
    }
}
