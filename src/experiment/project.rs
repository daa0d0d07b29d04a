//! The project a command works in: the directory whose `experiments/`
//! holds the manifests. Named experiments are found only there, never in
//! the checkout the binary was compiled in. The record of a manifest's
//! committed scale is `results/<name>/` there, written only by `repro run
//! --record`. Every other run gets a directory of its own,
//! `runs/<name>/<scale>/<time>/`, with `latest` linked to the newest, so a
//! user's rerun never touches committed files.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::experiment::errors::DriverError;

/// The experiment `repro run` and `repro verify` take when none is named.
pub(crate) const DEFAULT_EXPERIMENT: &str = "quickstart";

/// The `--project` given on the command line, if any.
static GIVEN: OnceLock<PathBuf> = OnceLock::new();

/// Sets the project from `--project DIR` (before any command runs). The
/// directory must hold `experiments/`.
pub(crate) fn set(dir: &Path) -> Result<(), DriverError> {
    if !dir.join("experiments").is_dir() {
        return Err(DriverError::NoProject {
            looked: format!("{} (from --project)", dir.display()),
        });
    }
    let _ = GIVEN.set(dir.to_path_buf());
    Ok(())
}

/// The project's root: `--project`, else the nearest of the working
/// directory and its parents that holds `experiments/`. Relative to the
/// working directory where it is the working directory or above it
/// (`""`, `..`), so messages name short paths.
pub(crate) fn root() -> Result<PathBuf, DriverError> {
    if let Some(dir) = GIVEN.get() {
        return Ok(dir.clone());
    }
    let mut up = PathBuf::new();
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut dir = Some(cwd.as_path());
    while let Some(d) = dir {
        if d.join("experiments").is_dir() {
            return Ok(up);
        }
        up.push("..");
        dir = d.parent();
    }
    Err(DriverError::NoProject {
        looked: format!("{} and its parents", cwd.display()),
    })
}

/// The record of experiment `name`: `results/<name>/` in the project
/// (under the working directory outside one).
pub(crate) fn record_dir(name: &str) -> PathBuf {
    root().unwrap_or_default().join("results").join(name)
}

/// Where the runs of `name` at `scale` get their directories:
/// `runs/<name>/<scale>/` in the project.
pub(crate) fn runs_dir(name: &str, scale: &str) -> PathBuf {
    root()
        .unwrap_or_default()
        .join("runs")
        .join(name)
        .join(scale)
}

/// The name of the link to the newest run directory.
pub(crate) const LATEST: &str = "latest";

/// The newest run directory of `name` at `scale` (its `latest` link),
/// where there is one.
pub(crate) fn latest_run(name: &str, scale: &str) -> Option<PathBuf> {
    let link = runs_dir(name, scale).join(LATEST);
    link.is_dir().then_some(link)
}

/// A new run directory for `name` at `scale`, named for the time now
/// (with `-2`, `-3`... where one of that second exists). Not created.
pub(crate) fn new_run_dir(name: &str, scale: &str) -> PathBuf {
    let base = runs_dir(name, scale);
    let stamp = crate::util::time::stamp(crate::util::time::now_unix_s());
    let mut dir = base.join(&stamp);
    let mut k = 2;
    while dir.exists() {
        dir = base.join(format!("{stamp}-{k}"));
        k += 1;
    }
    dir
}

/// Creates a new run directory for `name` at `scale` and returns it:
/// [`new_run_dir`]'s name, made with `mkdir` (which fails where it
/// exists), so two runs started in the same second each get their own
/// (`-2` for the second).
pub(crate) fn claim_run_dir(name: &str, scale: &str) -> anyhow::Result<PathBuf> {
    use anyhow::Context as _;
    let base = runs_dir(name, scale);
    crate::util::atomic::create_dir_all(&base)?;
    let stamp = crate::util::time::stamp(crate::util::time::now_unix_s());
    for k in 1..10_000 {
        let dir = if k == 1 {
            base.join(&stamp)
        } else {
            base.join(format!("{stamp}-{k}"))
        };
        match crate::util::sudo::as_invoker(|| std::fs::create_dir(&dir)) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| format!("could not create {}", dir.display()));
            }
        }
    }
    anyhow::bail!(
        "could not create a new run directory under {}: 10,000 of this second exist",
        base.display()
    )
}

/// Points `runs/<name>/<scale>/latest` at `dir` (one of its
/// directories), replacing the link in one step.
pub(crate) fn link_latest(dir: &Path) -> std::io::Result<()> {
    let (Some(base), Some(name)) = (dir.parent(), dir.file_name()) else {
        return Ok(());
    };
    let tmp = base.join(format!(".{LATEST}.{}", std::process::id()));
    crate::util::sudo::as_invoker(|| {
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(name, &tmp)?;
        std::fs::rename(&tmp, base.join(LATEST))
    })
}

/// Where a reader (`repro table`, `plot`, `status`...) finds the results
/// of `name` at `scale` when no directory is given: the record at the
/// committed scale, else the newest run directory at that scale.
pub(crate) fn default_out(name: &str, scale: &str, committed: Option<&str>) -> PathBuf {
    if committed == Some(scale) {
        record_dir(name)
    } else {
        runs_dir(name, scale).join(LATEST)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_find_the_record_at_its_scale_and_the_newest_run_elsewhere() {
        let committed = default_out("quickstart", "cpu", Some("cpu"));
        assert!(committed.ends_with("results/quickstart"), "{committed:?}");
        let smoke = default_out("quickstart", "smoke", Some("cpu"));
        assert!(smoke.ends_with("runs/quickstart/smoke/latest"), "{smoke:?}");
        assert!(!smoke.components().any(|c| c.as_os_str() == "results"));
        // a manifest with no committed scale has no record
        let none = default_out("smoke", "smoke", None);
        assert!(none.ends_with("runs/smoke/smoke/latest"), "{none:?}");
    }

    /// Two runs started in the same second each claim a directory of
    /// their own: mkdir decides, not a look first.
    #[test]
    fn two_runs_in_one_second_claim_two_directories() {
        let name = format!("unit-claim-{}", std::process::id());
        let (a, b) = (
            claim_run_dir(&name, "smoke").unwrap(),
            claim_run_dir(&name, "smoke").unwrap(),
        );
        assert_ne!(a, b);
        assert!(a.is_dir() && b.is_dir());
        let _ = std::fs::remove_dir_all(runs_dir(&name, "smoke").parent().unwrap());
    }

    #[test]
    fn new_run_directories_never_reuse_a_name_and_latest_follows() {
        let base = std::env::temp_dir().join(format!("repro-project-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let first = base.join("2026-11-29T070000Z");
        std::fs::create_dir_all(&first).unwrap();
        link_latest(&first).unwrap();
        let second = base.join("2026-11-29T070001Z");
        std::fs::create_dir_all(&second).unwrap();
        link_latest(&second).unwrap();
        let link = std::fs::read_link(base.join(LATEST)).unwrap();
        assert_eq!(link, std::path::Path::new("2026-11-29T070001Z"));
        let _ = std::fs::remove_dir_all(&base);
    }
}
