//! Records which source this build is: the git commit, the id of the code
//! it contains, whether the code differed from it (and a hash of the
//! difference), and the compiler.
//!
//! The code is `CODE`, less `PRESENTATION`: what the binaries are compiled
//! from, less the modules that only read recorded runs (tables, figures,
//! claims, the report). Results, docs, manifests and tests are not code
//! either, so committing a run's results, or redrawing its figure with a
//! fixed plot, does not make the run stale.
//!
//! Cargo reruns this script when the commit, the index or any file of the
//! workspace's sources changes, so the recorded state is the one compiled.
//! Git runs with `--no-optional-locks`: a `git status` that refreshed the
//! index would change it, and the next build would rerun this script.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn git(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("--no-optional-locks")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// The paths the binaries are compiled from.
const CODE: [&str; 4] = ["src", "crates", "Cargo.toml", "Cargo.lock"];

/// The driver's modules that only read recorded runs and render them; a
/// run's logs and runs.csv row never depend on them. The subcommands here
/// only read results (`repro report`, `plot`, `table`, `compare`,
/// `export`); `repro run` is code.
const PRESENTATION: [&str; 16] = [
    "src/report/plot.rs",
    "src/report/figure_py.rs",
    "src/report/export",
    "src/report/table.rs",
    "src/report/claims.rs",
    "src/report/stats.rs",
    "src/report/html.rs",
    "src/report/outputs.rs",
    "src/report/section.rs",
    "src/report/assets",
    "src/report/snapshots",
    "src/cmd/report.rs",
    "src/cmd/plot.rs",
    "src/cmd/table.rs",
    "src/cmd/compare.rs",
    "src/cmd/export.rs",
];

/// Whether `path` (relative to the root) is presentation.
fn presentation(path: &str) -> bool {
    PRESENTATION
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
}

/// `CODE` as git pathspecs, less `PRESENTATION`.
fn pathspecs() -> Vec<String> {
    CODE.iter()
        .map(|c| c.to_string())
        .chain(PRESENTATION.iter().map(|p| format!(":(exclude){p}")))
        .collect()
}

/// Git's object id of the commit's recursive listing of `CODE` less the
/// `PRESENTATION` paths (`git ls-tree -r HEAD src crates Cargo.toml
/// Cargo.lock`, those lines dropped, `| git hash-object --stdin`): two
/// commits with the same code have the same id.
fn code_id(root: &Path) -> Option<String> {
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
        if !presentation(path) {
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

// Long on purpose: a build script's list of the facts it records, one
// `cargo:rustc-env` line each.
fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../..");
    for tracked in CODE {
        println!("cargo::rerun-if-changed={}", root.join(tracked).display());
    }
    let git_dir = git(&root, &["rev-parse", "--absolute-git-dir"]).map(text);
    if let Some(dir) = &git_dir {
        for file in ["HEAD", "index", "refs", "packed-refs"] {
            let path = Path::new(dir).join(file);
            if path.exists() {
                println!("cargo::rerun-if-changed={}", path.display());
            }
        }
    }
    let commit = git(&root, &["rev-parse", "HEAD"]).map(text);
    let code = commit.as_ref().and_then(|_| code_id(&root));
    // code that differs from the commit, new files that git does not ignore
    // included (a new module is code before it is added)
    let specs = pathspecs();
    let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
    let dirty = code
        .as_ref()
        .and_then(|_| {
            git(
                &root,
                &[&["status", "--porcelain", "--"][..], &specs[..]].concat(),
            )
        })
        .map(|s| !s.is_empty());
    let source = match (&code, dirty) {
        (Some(c), Some(false)) => c.clone(),
        (Some(c), Some(true)) => {
            let mut state = git(
                &root,
                &[&["diff", "HEAD", "--binary", "--"][..], &specs[..]].concat(),
            )
            .unwrap_or_default();
            let untracked = git(
                &root,
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
            format!("{c}+dirty.{:016x}", xxhash_rust::xxh3::xxh3_64(&state))
        }
        _ => "unknown".to_string(),
    };
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|o| text(o.stdout))
        .unwrap_or_else(|| "unknown".into());
    let dirty = match dirty {
        Some(true) => "true",
        Some(false) => "false",
        None => "",
    };
    println!(
        "cargo::rustc-env=REPRO_BUILD_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
    println!("cargo::rustc-env=REPRO_BUILD_DIRTY={dirty}");
    println!(
        "cargo::rustc-env=REPRO_BUILD_PRESENTATION={}",
        PRESENTATION.join(",")
    );
    println!(
        "cargo::rustc-env=REPRO_BUILD_CODE={}",
        code.as_deref().unwrap_or("unknown")
    );
    println!("cargo::rustc-env=REPRO_BUILD_SOURCE={source}");
    println!("cargo::rustc-env=REPRO_BUILD_RUSTC={rustc}");
}
