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

/// The start time of process `pid` (field 22 of its stat line, after the
/// command name in parentheses, which may hold spaces).
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    // after the name: field 3 (state) is the first; 22 is the 20th
    after.split_whitespace().nth(19)?.parse().ok()
}
