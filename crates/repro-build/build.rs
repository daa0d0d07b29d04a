//! Records which source this build is: the git commit, the id of the code
//! it contains, whether the code differed from it (and a hash of the
//! difference), and the compiler.
//!
//! The code is `CODE`, less `JUDGING`: what the binaries are compiled
//! from, less the modules that only judge and render recorded runs
//! (health, tuning scores, claims, statistics, tables, figures, the
//! report). Those have an id of their own, the judge id. Results, docs,
//! manifests and tests are neither, so committing a run's results, or
//! re-judging it with fixed claims, does not make the run stale.
//!
//! Cargo reruns this script when the commit, the index or any file of the
//! workspace's sources changes, so the recorded state is the one compiled.
//! Git runs with `--no-optional-locks`: a `git status` that refreshed the
//! index would change it, and the next build would rerun this script.

use std::path::PathBuf;

include!("src/ids.rs");

// Long on purpose: a build script's list of the facts it records, one
// `cargo:rustc-env` line each.
fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../..");
    // each file of the code git lists (tracked, or new and not ignored),
    // never a folder: cargo would scan a folder's ignored files too (the
    // fuzz target's build, a snapshot test's .snap.new) and rebuild every
    // binary while tests run from them; without git, the folders
    let listed = git(
        &root,
        &[
            &[
                "ls-files",
                "--cached",
                "--others",
                "--exclude-standard",
                "--",
            ][..],
            &CODE[..],
        ]
        .concat(),
    )
    .map(text);
    match &listed {
        Some(files) if !files.is_empty() => {
            for file in files.lines() {
                println!("cargo::rerun-if-changed={}", root.join(file).display());
            }
        }
        _ => {
            for tracked in CODE {
                println!("cargo::rerun-if-changed={}", root.join(tracked).display());
            }
        }
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
    let code = commit.as_ref().and_then(|_| code_id(&root, false));
    let judge = commit.as_ref().and_then(|_| code_id(&root, true));
    let judge = judge.and_then(|j| with_changes(&root, j, &JUDGING.map(String::from)));
    // code that differs from the commit, new files that git does not ignore
    // included (a new module is code before it is added)
    let source = code
        .as_ref()
        .and_then(|c| with_changes(&root, c.clone(), &pathspecs()));
    let dirty = source.as_ref().map(|s| s.contains("+dirty."));
    let source = source.unwrap_or_else(|| "unknown".to_string());
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
        "cargo::rustc-env=REPRO_BUILD_JUDGE={}",
        judge.as_deref().unwrap_or("unknown")
    );
    println!(
        "cargo::rustc-env=REPRO_BUILD_CODE={}",
        code.as_deref().unwrap_or("unknown")
    );
    println!("cargo::rustc-env=REPRO_BUILD_SOURCE={source}");
    println!("cargo::rustc-env=REPRO_BUILD_RUSTC={rustc}");
}
