//! Files that are whole or absent, and one writer per results directory.
//! Every results file is written to a temporary file of its own beside the
//! target, flushed to disk, and renamed into place: a reader, or a driver
//! killed mid-write, never leaves half a file. A results directory is
//! locked for the whole of a `repro run`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result};

/// A number no other process can predict: a hash, under the process's
/// random hash keys, of a counter and the time.
fn unpredictable() -> u64 {
    use std::hash::{BuildHasher as _, Hash as _, Hasher as _};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    COUNTER.fetch_add(1, Ordering::Relaxed).hash(&mut h);
    std::time::SystemTime::now().hash(&mut h);
    h.finish()
}

/// A temporary path beside `path`, unique to this process and call and
/// not predictable: `.<name>.<pid>-<random>.tmp.<ext>` (the extension stays
/// last, for writers that pick a format from it).
pub(crate) fn temp_name(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{stem}.{}-{}.tmp{ext}",
        std::process::id(),
        unpredictable()
    ))
}

/// Creates `path` as a new file: never an existing file, never through a
/// link (`O_EXCL`, `O_NOFOLLOW`), and under sudo as the invoking user. The
/// one way the driver creates a file it writes in place (a log).
pub(crate) fn create_new(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    crate::util::sudo::as_invoker(|| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
    })
    .with_context(|| format!("could not create {} (a new file)", path.display()))
}

/// A new temporary file beside `path` ([`create_new`] under an
/// unpredictable name), to be moved into place by [`finish`].
pub(crate) fn create_temp(path: &Path) -> Result<(std::fs::File, PathBuf)> {
    let tmp = temp_name(path);
    Ok((create_new(&tmp)?, tmp))
}

/// Moves a finished temporary file into place (flushed first), or
/// removes it if `result` says writing it failed. The rename replaces
/// whatever `path` was, a link included, and never writes through it.
pub(crate) fn finish(tmp: &Path, path: &Path, result: Result<()>) -> Result<()> {
    let done = result.and_then(|()| {
        crate::util::sudo::as_invoker(|| {
            std::fs::File::open(tmp)
                .and_then(|f| f.sync_all())
                .with_context(|| format!("could not flush {}", tmp.display()))?;
            std::fs::rename(tmp, path)
                .with_context(|| format!("could not write {}", path.display()))
        })
    });
    if done.is_err() {
        let _ = crate::util::sudo::as_invoker(|| std::fs::remove_file(tmp));
    }
    done
}

/// Writes `bytes` to `path` whole (see the module's doc).
pub(crate) fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    let (mut file, tmp) = create_temp(path)?;
    let written = file
        .write_all(bytes.as_ref())
        .with_context(|| format!("could not write {}", tmp.display()));
    drop(file);
    finish(&tmp, path, written)
}

/// Refuses `path` as a file a command writes where the user named it
/// (`--to`, `--into`): where something is already there, it must be a
/// regular file. A rename over a device (`/dev/full`), a FIFO, a
/// directory or a link would replace it with a file, or write where
/// the link leads.
pub(crate) fn check_target(path: &Path) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if meta.is_file() {
        return Ok(());
    }
    let what = crate::util::read::kind(&meta);
    anyhow::bail!(
        "{} is {what}: repro writes only to a new path or over a regular file (name another \
         file, or `-` for standard output where the option takes it)",
        path.display()
    )
}

/// Creates `dir` and its missing parents, under sudo as the invoking
/// user (so each one created is theirs, and only where they may write).
pub(crate) fn create_dir_all(dir: &Path) -> Result<()> {
    crate::util::sudo::as_invoker(|| std::fs::create_dir_all(dir))
        .with_context(|| format!("could not create {}", dir.display()))
}

/// The hidden working directory beside `dir` in which a run writes what
/// will replace `dir`: `.<name>.running`. One results directory has one
/// writer (its lock), so the name need not be unique.
pub(crate) fn working_dir(dir: &Path) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.with_file_name(format!(".{name}.running"))
}

/// Puts the finished directory `work` in place of `dir`. The earlier `dir`
/// is first renamed aside (`.<name>.replaced`) and removed only once `work`
/// is in place, so a driver killed in between loses neither.
pub(crate) fn replace_dir(work: &Path, dir: &Path) -> Result<()> {
    crate::util::sudo::as_invoker(|| {
        let aside = working_dir(dir).with_extension("replaced");
        if aside.exists() {
            std::fs::remove_dir_all(&aside)
                .with_context(|| format!("could not remove {}", aside.display()))?;
        }
        if dir.exists() {
            std::fs::rename(dir, &aside)
                .with_context(|| format!("could not move {} aside", dir.display()))?;
        }
        std::fs::rename(work, dir)
            .with_context(|| format!("could not move {} to {}", work.display(), dir.display()))?;
        if aside.exists() {
            std::fs::remove_dir_all(&aside)
                .with_context(|| format!("could not remove {}", aside.display()))?;
        }
        Ok(())
    })
}

/// The files and directories a results directory may hold, besides
/// hidden temporaries: what [`lock`] may tidy lives only in such a
/// directory. (`records::results_dir::Entry` names each; its test checks
/// these are among them.)
pub(crate) const RESULTS_ENTRIES: [&str; 11] = [
    "runs.csv",
    "submit.sbatch",
    "chunks.sbatch",
    "chunks",
    "job.json",
    "provenance.json",
    "raw",
    "tuning",
    "attempts.csv",
    "runs.parquet",
    ".lock",
];

/// Refuses `dir` as a results directory when it exists, is not empty and
/// holds none of a results directory's files: `--out` pointed at another
/// directory must never have its files tidied or mixed with ours.
pub(crate) fn check_results_dir(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if names.is_empty() || names.iter().any(|n| RESULTS_ENTRIES.contains(&n.as_str())) {
        return Ok(());
    }
    anyhow::bail!(
        "{} is not empty and is not a results directory (it holds no runs.csv, provenance.json or raw/): \
         pass --out with a new or empty directory, or an earlier run's results directory",
        dir.display()
    )
}

/// Where the logs of a failed attempt of run `id` go when an earlier
/// result of that run stays: `raw/attempts/<id>-<unix ms>[.<ext>]`.
pub(crate) fn attempt_path(raw: &Path, id: &str, ext: &str) -> PathBuf {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let name = if ext.is_empty() {
        format!("{id}-{ms}")
    } else {
        format!("{id}-{ms}.{ext}")
    };
    raw.join("attempts").join(name)
}

/// The lock of a results directory, released when dropped.
#[derive(Debug)]
pub(crate) struct DirLock {
    path: PathBuf,
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = crate::util::sudo::as_invoker(|| std::fs::remove_file(&self.path));
    }
}

/// Locks `dir` (creating it) for this process: `dir/.lock` holds our pid
/// and command line. A second locker is refused with the holder's; a lock
/// whose process is gone (a killed driver) is taken over. A lock taken on
/// another machine (a shared file system; its boot id differs) is never
/// taken over: its process cannot be seen from here.
pub(crate) fn lock(dir: &Path) -> Result<DirLock> {
    create_dir_all(dir)?;
    let path = dir.join(".lock");
    // pid, command line, start time: a reused pid is not the holder; the
    // host and boot id: a pid names a process only on its own machine
    let me = format!(
        "{}\n{}\n{}\n{} {}\n",
        std::process::id(),
        std::env::args().collect::<Vec<_>>().join(" "),
        crate::util::process::start_time(std::process::id()).unwrap_or(0),
        crate::util::process::hostname(),
        crate::util::process::boot_id(),
    );
    for _ in 0..2 {
        match crate::util::sudo::as_invoker(|| {
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
        }) {
            Ok(mut f) => {
                f.write_all(me.as_bytes())
                    .with_context(|| format!("could not write {}", path.display()))?;
                let held = DirLock { path };
                crate::util::sudo::as_invoker(|| {
                    recover(dir)?;
                    recover(&dir.join("raw"))
                })?;
                return Ok(held);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                match holder(dir) {
                    Some(Holder::Elsewhere(what)) => anyhow::bail!(
                        "{} is locked by a repro on {what}, which cannot be checked from here; \
                         wait for it, or remove {} once it has ended",
                        dir.display(),
                        path.display()
                    ),
                    Some(Holder::Here(what)) => anyhow::bail!(
                        "{} is in use by another repro ({what}); wait for it to finish, or pass another --out",
                        dir.display(),
                    ),
                    None => {}
                }
                // its process is gone: a stale lock
                let _ = crate::util::sudo::as_invoker(|| std::fs::remove_file(&path));
            }
            Err(e) => {
                return Err(e).with_context(|| format!("could not create {}", path.display()));
            }
        }
    }
    anyhow::bail!(
        "could not lock {}: another process keeps taking it",
        dir.display()
    )
}

/// Who holds a results directory's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Holder {
    /// A live process on this machine: "pid 123: repro run ...".
    Here(String),
    /// A process on another machine (a shared file system), which cannot
    /// be checked from here: "host boot (pid 123: repro run ...)".
    Elsewhere(String),
}

/// Who is writing `dir` now ([`lock`] held by a live process), if anyone.
/// A lock whose process is gone holds nothing. Readers ask it before
/// reading records a run is still writing.
pub(crate) fn holder(dir: &Path) -> Option<Holder> {
    let text = std::fs::read_to_string(dir.join(".lock")).ok()?;
    let line = |i: usize| text.lines().nth(i).unwrap_or("").trim();
    let (pid, command) = (line(0), crate::util::text::shown(line(1)));
    let started = line(2).parse::<u64>().ok();
    let machine = line(3);
    if machine
        .split_once(' ')
        .is_some_and(|(_, boot)| boot != crate::util::process::boot_id())
    {
        return Some(Holder::Elsewhere(format!(
            "{machine} (pid {pid}: {command})"
        )));
    }
    let alive = match (pid.parse::<u32>(), started) {
        (Ok(p), Some(s)) => crate::util::process::start_time(p) == Some(s),
        (Ok(p), None) => crate::util::process::start_time(p).is_some(),
        _ => false,
    };
    alive.then(|| Holder::Here(format!("pid {pid}: {command}")))
}

/// Refuses to read `dir` while a run writes it: its records are not yet
/// whole (`what` says what the reader would have done).
pub(crate) fn check_not_written(dir: &Path, what: &str) -> Result<()> {
    let mine = format!("pid {}:", std::process::id());
    match holder(dir).filter(|h| !matches!(h, Holder::Here(w) if w.starts_with(&mine))) {
        Some(Holder::Here(h) | Holder::Elsewhere(h)) => anyhow::bail!(
            "{} is being written by a repro run ({h}): {what} once it has ended",
            dir.display()
        ),
        None => Ok(()),
    }
}

/// Puts `dir` (one level, not recursive) back in order after a writer that
/// was killed: a directory moved aside by [`replace_dir`] goes back if its
/// replacement never arrived and is removed if it did; working directories
/// and the temporary files of processes that are gone are removed. Called
/// with the lock held, so no run of ours is writing there.
fn recover(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(hidden) = name.strip_prefix('.') else {
            continue;
        };
        let path = entry.path();
        let removed = if let Some(of) = hidden.strip_suffix(".replaced") {
            let original = dir.join(of);
            if original.exists() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::rename(&path, &original)
            }
        } else if hidden
            .strip_suffix(".running")
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            // a run's working directory: named after its hex run id
            std::fs::remove_dir_all(&path)
        } else if temp_owner(hidden).is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
            std::fs::remove_file(&path)
        } else {
            Ok(())
        };
        removed.with_context(|| format!("could not tidy {}", path.display()))?;
    }
    Ok(())
}

/// The pid in a [`temp_name`] (without its leading dot):
/// `<stem>.<pid>-<n>.tmp[.<ext>]`.
fn temp_owner(name: &str) -> Option<&str> {
    let parts: Vec<&str> = name.split('.').collect();
    parts.windows(2).find_map(|w| {
        let (pid, n) = w[0].split_once('-')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        (w[1] == "tmp" && digits(pid) && digits(n)).then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("repro-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("runs.csv");
        write(&path, "a\n").unwrap();
        write(&path, "b\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "b\n");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["runs.csv"]);
        // two temporaries of one path differ, and keep the extension last
        let (a, b) = (temp_name(&path), temp_name(&path));
        assert_ne!(a, b);
        assert!(a.to_string_lossy().ends_with(".tmp.csv"), "{}", a.display());
        // a write into a missing directory fails and leaves nothing
        assert!(write(&dir.join("no/such.csv"), "x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_replaced_in_place_and_a_killed_writer_tidied_up() {
        let dir = std::env::temp_dir().join(format!("repro-replace-{}", std::process::id()));
        let raw = dir.join("raw");
        let run = raw.join("abc");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join("rank-0.jsonl"), "old").unwrap();
        let work = working_dir(&run);
        assert_eq!(work, raw.join(".abc.running"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(work.join("rank-0.jsonl"), "new").unwrap();
        replace_dir(&work, &run).unwrap();
        assert_eq!(
            std::fs::read_to_string(run.join("rank-0.jsonl")).unwrap(),
            "new"
        );
        assert!(!work.exists() && !raw.join(".abc.replaced").exists());
        // what a writer killed at each point leaves behind
        let mkdir = |name: &str| {
            std::fs::create_dir_all(raw.join(name)).unwrap();
            std::fs::write(raw.join(name).join("f"), name).unwrap();
        };
        mkdir(".gone.replaced"); // killed between the two renames
        mkdir(".abc.replaced"); // killed before removing the old one
        mkdir(".0f1e.running"); // killed during the run
        mkdir(".notes.running"); // not a run's: left alone
        let mine = format!(".runs.{}-0.tmp.csv", std::process::id());
        for file in [
            ".runs.999999999-3.tmp.csv",
            ".figure.999999999-0.tmp",
            &mine,
        ] {
            std::fs::write(raw.join(file), "x").unwrap();
        }
        std::fs::write(raw.join(".keep.me"), "x").unwrap();
        let held = lock(&dir).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(&raw)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".keep.me", ".notes.running", mine.as_str(), "abc", "gone"]
        );
        assert_eq!(
            std::fs::read_to_string(raw.join("gone/f")).unwrap(),
            ".gone.replaced"
        );
        assert_eq!(
            std::fs::read_to_string(run.join("rank-0.jsonl")).unwrap(),
            "new"
        );
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_results_directory_has_one_writer() {
        let dir = std::env::temp_dir().join(format!("repro-lock-{}", std::process::id()));
        let held = lock(&dir).unwrap();
        let err = lock(&dir).unwrap_err().to_string();
        assert!(err.contains("in use by another repro"), "{err}");
        assert!(err.contains(&std::process::id().to_string()), "{err}");
        drop(held);
        // released on drop
        let again = lock(&dir).unwrap();
        drop(again);
        // a lock left by a process that is gone is taken over
        std::fs::write(dir.join(".lock"), "999999999\nrepro run x\n").unwrap();
        let taken = lock(&dir).unwrap();
        drop(taken);
        assert!(!dir.join(".lock").exists());
        // a lock taken on another machine (another boot id) is never taken
        // over, whatever pid it names: its process cannot be seen from here
        std::fs::write(
            dir.join(".lock"),
            "999999999\nrepro run x\n1\nnode7 00000000-another-boot\n",
        )
        .unwrap();
        let err = lock(&dir).unwrap_err().to_string();
        assert!(err.contains("locked by a repro on node7"), "{err}");
        assert!(dir.join(".lock").exists());
        // on this machine, its own boot id: judged by its pid
        let here = format!(
            "999999999\nrepro run x\n1\nhere {}\n",
            crate::util::process::boot_id()
        );
        std::fs::write(dir.join(".lock"), here).unwrap();
        drop(lock(&dir).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
