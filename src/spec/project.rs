//! The project a command works in: the directory whose `experiments/`
//! holds the manifests. Named experiments are found only there, never in
//! the checkout the binary was compiled in. Results of a manifest's
//! committed scale go to `results/<name>/` there; every other scale goes to
//! `scratch/<scale>/<name>/`, so a try never touches committed files.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::spec::errors::DriverError;

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

/// Where results go when `--out` is not given: the project's
/// `results/<name>/` at the manifest's committed scale, else
/// `scratch/<scale>/<name>/` (git ignores it). Outside a project (a
/// manifest given by path), the same paths under the working directory.
pub(crate) fn default_out(name: &str, scale: &str, committed: Option<&str>) -> PathBuf {
    let root = root().unwrap_or_default();
    if committed == Some(scale) {
        root.join("results").join(name)
    } else {
        root.join("scratch").join(scale).join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_committed_scale_writes_under_results() {
        let committed = default_out("quickstart", "cpu", Some("cpu"));
        assert!(committed.ends_with("results/quickstart"), "{committed:?}");
        let smoke = default_out("quickstart", "smoke", Some("cpu"));
        assert!(smoke.ends_with("scratch/smoke/quickstart"), "{smoke:?}");
        assert!(!smoke.components().any(|c| c.as_os_str() == "results"));
        // a manifest with no committed scale never writes under results/
        let none = default_out("smoke", "smoke", None);
        assert!(none.ends_with("scratch/smoke/smoke"), "{none:?}");
    }
}
