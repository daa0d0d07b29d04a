//! Least privilege under sudo. When the driver runs as root on behalf of
//! another user (`SUDO_UID`), it reads only what that user could read, and
//! what it writes belongs to that user.

use std::path::Path;

/// The user sudo ran the driver for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Invoker {
    pub uid: u32,
    pub gid: u32,
}

/// The invoking user, when the driver is root through sudo for another
/// user; `None` otherwise (then the driver acts as itself).
pub(crate) fn invoker() -> Option<Invoker> {
    if !crate::util::process::is_root() {
        return None;
    }
    let id = |var: &str| std::env::var(var).ok()?.trim().parse::<u32>().ok();
    let uid = id("SUDO_UID").filter(|&u| u != 0)?;
    Some(Invoker {
        uid,
        gid: id("SUDO_GID").unwrap_or(uid),
    })
}

/// The mode bits that apply to `who` for a file with `meta`: the owner's,
/// the group's or the others' (supplementary groups and ACLs are not
/// consulted: where they alone would allow it, the file is refused, which
/// errs on the safe side).
fn bits(who: Invoker, meta: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::MetadataExt;
    let mode = meta.mode();
    if meta.uid() == who.uid {
        (mode >> 6) & 0o7
    } else if meta.gid() == who.gid {
        (mode >> 3) & 0o7
    } else {
        mode & 0o7
    }
}

/// Under sudo: refuses `path` unless the invoking user could read it
/// (and search every directory above it; a directory also needs search),
/// so nothing is read on their behalf that they could not read
/// themselves. Without sudo: nothing.
pub(crate) fn check_readable(path: &Path) -> Result<(), String> {
    let Some(who) = invoker() else {
        return Ok(());
    };
    let full = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    for dir in full.ancestors().skip(1) {
        if let Ok(m) = std::fs::metadata(dir)
            && bits(who, &m) & 0o1 == 0
        {
            return Err(format!(
                "{}: uid {} cannot enter {}; under sudo repro reads only what the invoking user can",
                path.display(),
                who.uid,
                dir.display()
            ));
        }
    }
    match std::fs::metadata(&full) {
        Ok(m) => {
            let need = if m.is_dir() { 0o5 } else { 0o4 };
            if bits(who, &m) & need == need {
                Ok(())
            } else {
                Err(format!(
                    "{} is not readable by uid {} (sudo's SUDO_UID); under sudo repro reads only what the invoking user can",
                    path.display(),
                    who.uid
                ))
            }
        }
        Err(_) => Ok(()),
    }
}

/// Runs `f` with this thread's filesystem ids set to the invoking user's
/// under sudo (Linux `setfsuid`/`setfsgid`): every file it opens or
/// creates is checked, and owned, as that user, and root's file
/// capabilities are off meanwhile. So a link the user planted leads a
/// write only where the user could write. Without sudo: `f` as is.
/// Child processes are not affected (exec resets the ids).
#[allow(unsafe_code)]
pub(crate) fn as_invoker<T>(f: impl FnOnce() -> T) -> T {
    let Some(who) = invoker() else {
        return f();
    };
    /// Restores the thread's filesystem ids, even when `f` panics.
    struct Restore(u32, u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: setfsuid and setfsgid change only this thread's
            // filesystem ids; they take and return plain integers
            unsafe {
                libc::setfsuid(self.0);
                libc::setfsgid(self.1);
            }
        }
    }
    // SAFETY: as above; each returns the thread's previous id
    let (gid, uid) = unsafe { (libc::setfsgid(who.gid), libc::setfsuid(who.uid)) };
    let _restore = Restore(uid as u32, gid as u32);
    f()
}

/// Under sudo: gives `path` and everything under it to the invoking user
/// (symbolic links themselves, never what they point at). Without sudo:
/// nothing. Failures are warnings: the results are written either way.
pub(crate) fn give(path: &Path) {
    let Some(who) = invoker() else {
        return;
    };
    if std::fs::symlink_metadata(path).is_err() {
        // nothing was written there (a dry run, an early error)
        return;
    }
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        if let Err(e) = std::os::unix::fs::lchown(&p, Some(who.uid), Some(who.gid)) {
            eprintln!(
                "warning: could not give {} to uid {}: {e}",
                p.display(),
                who.uid
            );
        }
        if let Ok(m) = std::fs::symlink_metadata(&p)
            && m.is_dir()
            && let Ok(entries) = std::fs::read_dir(&p)
        {
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
}

/// Under sudo: gives `path` alone (not what is under it) to the invoking
/// user.
pub(crate) fn give_one(path: &Path) {
    if let Some(who) = invoker() {
        let _ = std::os::unix::fs::lchown(path, Some(who.uid), Some(who.gid));
    }
}
