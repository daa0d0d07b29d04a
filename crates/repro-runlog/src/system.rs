//! What a process reads about its machine: the host's name and its own
//! resident memory from /proc.

/// This machine's host name, as the kernel has it (`$HOSTNAME` is a
/// shell variable, unset in most non-interactive processes); `unknown`
/// where it cannot be read.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// A field of this process's `/proc/self/status` in kB (`VmHWM`: the
/// peak resident memory, `VmRSS`: now), as bytes; `None` off Linux.
pub fn resident_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status
        .lines()
        .find(|l| l.strip_prefix(field).is_some_and(|r| r.starts_with(':')))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets this process's peak resident memory (`VmHWM`) to what it holds
/// now (`5` into `/proc/self/clear_refs`), so a later peak is of the work
/// since; `false` where the kernel refuses.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
