// Which of the workspace's paths a build's ids cover, and the ids: shared
// by build.rs (`include!`) and the library (its tests), one list and one
// rule. Git runs with `--no-optional-locks`: a `git status` that
// refreshed the index would change it, and the next build would rerun
// build.rs.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

/// The paths the binaries are compiled from.
pub const CODE: [&str; 4] = ["src", "crates", "Cargo.toml", "Cargo.lock"];

/// The driver's code that only judges and renders recorded runs: health,
/// freshness, tuning scores and choices, claims, statistics, tables,
/// figures, verify, the report and exports, and the commands that only
/// read results. A run's logs and the cells it measured never depend on
/// it (runs.csv's health columns are its judgement, which `repro table`
/// applies again), so a change here re-judges records and never makes a
/// run stale; what it changes in a plan (a tuning choice, a
/// planned run's parameters) changes that run's id, and the run is then
/// stale or missing by its id. `repro run` is code.
pub const JUDGING: [&str; 10] = [
    "src/report",
    "src/records/health.rs",
    "src/records/freshness.rs",
    "src/cmd/report.rs",
    "src/cmd/plot.rs",
    "src/cmd/table.rs",
    "src/cmd/compare.rs",
    "src/cmd/export.rs",
    "src/cmd/verify.rs",
    "src/cmd/status.rs",
];

/// Whether `path` (relative to the workspace's root) is judging code.
pub fn judging(path: &str) -> bool {
    JUDGING
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// `git --no-optional-locks -C root ARGS`'s output, when it succeeds.
pub fn git(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("--no-optional-locks")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

/// Command output as trimmed text.
pub fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// `CODE` as git pathspecs, less `JUDGING`.
pub fn pathspecs() -> Vec<String> {
    CODE.iter()
        .map(|c| c.to_string())
        .chain(JUDGING.iter().map(|p| format!(":(exclude){p}")))
        .collect()
}

/// Git's object id of the commit's recursive listing of `CODE` less the
/// `JUDGING` paths (`git ls-tree -r HEAD src crates Cargo.toml
/// Cargo.lock`, those lines dropped, `| git hash-object --stdin`): two
/// commits with the same code have the same id. With `judge`, the
/// listing of the `JUDGING` paths alone: the judge id.
pub fn code_id(root: &Path, judge: bool) -> Option<String> {
    let full = git(
        root,
        &[&["ls-tree", "-r", "HEAD", "--"][..], &CODE[..]].concat(),
    )?;
    let mut listing = Vec::new();
    for line in full.split_inclusive(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let path = text
            .trim_end_matches('\n')
            .rsplit('\t')
            .next()
            .unwrap_or("");
        if judging(path) == judge {
            listing.extend_from_slice(line);
        }
    }
    let mut hasher = Command::new("git")
        .args(["--no-optional-locks", "-C"])
        .arg(root)
        .args(["hash-object", "--stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    hasher.stdin.take()?.write_all(&listing).ok()?;
    let out = hasher.wait_with_output().ok()?;
    out.status.success().then(|| text(out.stdout))
}

/// `id` where the paths `specs` hold what the commit holds; else
/// `id+dirty.<hash of their difference and their new files>`; None where
/// git cannot say.
pub fn with_changes(root: &Path, id: String, specs: &[String]) -> Option<String> {
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let status = git(
        root,
        &[&["status", "--porcelain", "--"][..], &specs[..]].concat(),
    )?;
    if status.is_empty() {
        return Some(id);
    }
    let mut state = git(
        root,
        &[&["diff", "HEAD", "--binary", "--"][..], &specs[..]].concat(),
    )
    .unwrap_or_default();
    let untracked = git(
        root,
        &[
            &["ls-files", "--others", "--exclude-standard", "-z", "--"][..],
            &specs[..],
        ]
        .concat(),
    )
    .unwrap_or_default();
    for name in untracked.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        state.extend_from_slice(name.as_bytes());
        state.push(0);
        state.extend(std::fs::read(root.join(&name)).unwrap_or_default());
        state.push(0);
    }
    Some(format!(
        "{id}+dirty.{:016x}",
        xxhash_rust::xxh3::xxh3_64(&state)
    ))
}
