//! The trainer binary: where it is, and whether it was built from the
//! driver's source with the libtorch it needs.

use super::*;

/// How to build `repro` and the trainer beside it (what `bash ci/main.sh`
/// runs, after `source ~/.cache/repro/env.sh` for libtorch).
pub(super) const BUILD_BOTH: &str = "cargo build --release --locked -p repro -p repro-trainer";

/// The `repro-train` binary: `$REPRO_TRAIN`, else next to this executable.
pub(crate) fn train_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("REPRO_TRAIN") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().context("could not locate the repro executable")?;
    let sibling = exe.with_file_name("repro-train");
    if sibling.is_file() {
        return Ok(sibling);
    }
    bail!(
        "the trainer binary `repro-train` is not next to {} and REPRO_TRAIN is not set; \
         build it with `{BUILD_BOTH}` (it needs libtorch: source ~/.cache/repro/env.sh)",
        exe.display()
    )
}

/// Says (on stderr) when the trainer `train` was built from another source
/// than this `repro`: its runs' logs will name its build, and `repro
/// status` will call them stale.
///
/// A trainer that does not start (a loader error, a missing file) is an
/// error: every run would fail. With `resume` it is a warning, since
/// every run may be kept from earlier logs. With `user` (ranks dropped to
/// the `sudo` user), the question is asked as that user.
pub(crate) fn check_trainer_build(
    train: &Path,
    user: Option<RankUser>,
    resume: bool,
) -> Result<()> {
    let mut argv = user.map(|u| u.argv()).unwrap_or_default();
    argv.extend([train.display().to_string(), "--version".into()]);
    let asked = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output();
    if let Some(u) = user {
        let said = match &asked {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(String::from_utf8_lossy(&o.stderr).trim().to_string()),
            Err(e) => Some(format!("could not start setpriv: {e}")),
        };
        if let Some(said) = said {
            bail!(
                "the ranks run as uid {} (SUDO_UID), who cannot run {}: {said}; build where \
                 that user can read (and see libtorch), or run without sudo's SUDO_UID \
                 (`sudo -u root` or unset it) to run the ranks as root",
                u.uid,
                train.display()
            );
        }
    }
    let failed = match asked {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(first_line(&String::from_utf8_lossy(&o.stderr), o.status)),
        Err(e) => Err(e.to_string()),
    };
    let v = match failed {
        Ok(v) => v,
        Err(why) if resume => {
            eprintln!(
                "warning: the trainer {} does not start ({why}): a run --resume cannot keep \
                 will fail. {STARTS}",
                train.display()
            );
            return Ok(());
        }
        Err(why) => bail!(
            "the trainer {} does not start, so every run would fail: {why}. {STARTS}",
            train.display()
        ),
    };
    let first = v.lines().next().unwrap_or_default();
    if version_source(first) != Some(repro_build::BUILD.source) {
        eprintln!(
            "warning: {} is `{first}`, but this repro is {}: its runs will be stale; \
             rebuild both (`{BUILD_BOTH}`)",
            train.display(),
            repro_build::VERSION
        );
    }
    Ok(())
}

/// How to make a trainer that does not start start.
pub(super) const STARTS: &str = "Fix: rebuild it with `bash ci/main.sh` (its build records where libtorch \
     is), or `source ~/.cache/repro/env.sh` in this shell to put libtorch on LD_LIBRARY_PATH";

/// The first line a failed `--version` wrote, else how it ended.
pub(super) fn first_line(stderr: &str, status: std::process::ExitStatus) -> String {
    stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map_or_else(
            || format!("`--version` ended with {status}"),
            str::to_string,
        )
}

/// The source id in a `--version` text (`repro-train 0.1.0 (source <id>,
/// commit <c>; rustc ...)`): the same id is the same code, whatever commit
/// built it.
pub(super) fn version_source(version: &str) -> Option<&str> {
    let (_, rest) = version.split_once("(source ")?;
    rest.split([',', ';', ')']).next()
}
