//! Who owns a shaped network. Before a run (or a probe) makes any name of
//! tag `t`, it creates `/run/repro/net/<t>.owner` (create-new: one owner
//! per tag) holding its pid, its start time and its command line; the file
//! goes when the network does. A network whose owner is alive is never
//! touched by another run or by `repro net down` (without `--force`); one
//! whose owner is gone, or that has no owner record, is a leftover.

use std::io::Write;
use std::path::PathBuf;

use super::NetError;
use crate::util::process::start_time;

/// A process, as its owner record names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Owner {
    pub pid: u32,
    /// Clock ticks after boot at which it started (`/proc/<pid>/stat`
    /// field 22): with the pid, it tells a reused pid apart.
    pub start: u64,
    pub command: String,
}

impl Owner {
    /// This process.
    pub(crate) fn me() -> Self {
        let pid = std::process::id();
        Self {
            pid,
            start: start_time(pid).unwrap_or(0),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }

    /// Whether the process is still the one that wrote the record.
    pub(crate) fn alive(&self) -> bool {
        start_time(self.pid).is_some_and(|s| s == self.start)
    }

    fn text(&self) -> String {
        format!("{}\n{}\n{}\n", self.pid, self.start, self.command)
    }

    /// Reads a record written by [`Owner::text`].
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut lines = text.lines();
        Some(Self {
            pid: lines.next()?.trim().parse().ok()?,
            start: lines.next()?.trim().parse().ok()?,
            command: lines.next().unwrap_or("").to_string(),
        })
    }
}

/// Where owner records live (`REPRO_NET_OWNERS` overrides it, for tests).
pub(crate) fn dir() -> PathBuf {
    std::env::var_os("REPRO_NET_OWNERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/repro/net"))
}

fn path(tag: &str) -> PathBuf {
    dir().join(format!("{tag}.owner"))
}

/// The owner record of tag `tag`, if there is one.
pub(crate) fn of(tag: &str) -> Option<Owner> {
    Owner::parse(&std::fs::read_to_string(path(tag)).ok()?)
}

/// Records this process as the owner of `tag`. `Ok(false)`: another
/// record is there (a live owner, or a dead one whose leftovers
/// [`super::reclaim`] removes).
pub(crate) fn claim(tag: &str) -> Result<bool, NetError> {
    let io = |source| NetError::Start {
        program: format!("owner record {}", path(tag).display()),
        source,
    };
    std::fs::create_dir_all(dir()).map_err(io)?;
    // written whole, then linked into place: the record appears with its
    // content or not at all, and a link never replaces another's record
    let tmp = dir().join(format!(".{tag}.{}.tmp", std::process::id()));
    std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(Owner::me().text().as_bytes()))
        .map_err(io)?;
    let claimed = link(&tmp, tag);
    let _ = std::fs::remove_file(&tmp);
    claimed.map_err(io)
}

/// [`claim`]'s link of the written record `tmp` to `tag`'s record.
fn link(tmp: &std::path::Path, tag: &str) -> std::io::Result<bool> {
    for _ in 0..2 {
        match std::fs::hard_link(tmp, path(tag)) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // a record whose process is gone is stale: the caller made
                // sure no name of the tag is left, so it can go
                match of(tag) {
                    Some(o) if o.alive() => return Ok(false),
                    _ => release(tag),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// Removes the owner record of `tag` (after its network is gone).
pub(crate) fn release(tag: &str) {
    let _ = std::fs::remove_file(path(tag));
}

/// Whether the network `tag` belongs to a live process.
pub(crate) fn live(tag: &str) -> bool {
    of(tag).is_some_and(|o| o.alive())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not() {
        let me = Owner::me();
        assert!(me.start > 0);
        assert!(me.alive());
        assert_eq!(Owner::parse(&me.text()), Some(me.clone()));
        let reused = Owner {
            start: me.start + 1,
            ..me.clone()
        };
        assert!(!reused.alive());
        let gone = Owner {
            pid: 999_999_999,
            ..me
        };
        assert!(!gone.alive());
    }
}
