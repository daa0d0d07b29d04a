//! What the trainer is built against, checked and recorded.
//!
//! 1. The libtorch it links: `$LIBTORCH`, else the directory above the
//!    first `lib/` on `LD_LIBRARY_PATH` with `libtorch_cpu.so` (a pip
//!    torch's, as `LIBTORCH_USE_PYTORCH` builds use); its version from
//!    the `version.py` of a pip torch or the `build-version` of a libtorch
//!    archive there, and its CUDA from `version.py`. The
//!    build stops, naming the fix, when that version is not the one the
//!    `tch` in Cargo.lock pins (`libtorch-versions`, the one table of
//!    them); `LIBTORCH_BYPASS_VERSION_CHECK` skips the check, as it does
//!    torch-sys's. `repro-train --version` prints what was found.
//! 2. libtorch's CUDA library, linked when that libtorch has one. The
//!    linker drops `libtorch_cuda.so` otherwise (nothing references it
//!    directly, it registers the CUDA backend when loaded), and then
//!    `tch::Cuda::is_available()` is false on a GPU machine.
//! 3. A run path to that libtorch's `lib/` (RUNPATH), so the trainer
//!    starts in a shell that never sourced `env.sh`. `LD_LIBRARY_PATH`
//!    still wins where it is set (another libtorch on purpose).

use std::path::{Path, PathBuf};

/// `libtorch-versions`: (libtorch, tch) rows, the default first.
fn versions() -> Vec<(String, String)> {
    include_str!("libtorch-versions")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.to_string()))
        })
        .collect()
}

/// The version of package `name` in the workspace's Cargo.lock.
fn locked(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("name = \"{name}\"") {
            let v = lines.next()?.trim().strip_prefix("version = ")?;
            return Some(v.trim_matches('"').to_string());
        }
    }
    None
}

/// A `version.py`'s value of `key` (`__version__`, `cuda`), with or
/// without a type annotation (`cuda: Optional[str] = '13.0'`).
fn py_value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        let k = k.split(':').next().unwrap_or(k);
        (k.trim() == key).then(|| v.trim().trim_matches(['\'', '"']).to_string())
    })
}

/// The version and CUDA of the libtorch at `root` (above its `lib/`).
fn libtorch_at(root: &Path) -> (Option<String>, Option<String>) {
    if let Ok(text) = std::fs::read_to_string(root.join("version.py")) {
        let cuda = py_value(&text, "cuda").filter(|c| c != "None");
        return (py_value(&text, "__version__"), cuda);
    }
    let version = std::fs::read_to_string(root.join("build-version"))
        .ok()
        .map(|v| v.trim().to_string());
    (version, None)
}

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LD_LIBRARY_PATH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_BYPASS_VERSION_CHECK");
    println!("cargo:rerun-if-changed=libtorch-versions");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let lock_path = manifest.join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let tch = std::fs::read_to_string(&lock_path)
        .ok()
        .and_then(|lock| locked(&lock, "tch"));

    // the libtorch: `$LIBTORCH`, else the directory above the first
    // `lib/` on LD_LIBRARY_PATH with libtorch_cpu.so (a pip torch's)
    let root: Option<PathBuf> = std::env::var_os("LIBTORCH").map(PathBuf::from).or_else(|| {
        let path = std::env::var_os("LD_LIBRARY_PATH")?;
        std::env::split_paths(&path)
            .find(|d| d.join("libtorch_cpu.so").is_file())
            .map(|d| d.parent().map_or_else(|| d.clone(), Path::to_path_buf))
    });
    let (version, cuda) = root.as_deref().map_or((None, None), libtorch_at);
    let lib = root.as_ref().map(|r| r.join("lib"));
    let table = versions();
    let wanted = tch
        .as_deref()
        .and_then(|t| table.iter().find(|(_, tc)| tc == t))
        .map(|(lt, _)| lt.clone());
    if let (Some(found), Some(wanted), Some(root)) = (&version, &wanted, &root) {
        let base = found.split('+').next().unwrap_or(found);
        if base != wanted && std::env::var_os("LIBTORCH_BYPASS_VERSION_CHECK").is_none() {
            panic!(
                "the trainer's tch {} needs libtorch {wanted}, but the libtorch in {} is {found}. \
                 Build for it with `REPRO_TORCH={base} bash ci/setup.sh` (the versions it knows: \
                 crates/repro-trainer/libtorch-versions), or put libtorch {wanted} first",
                tch.as_deref().unwrap_or("?"),
                root.display()
            );
        }
    }
    println!(
        "cargo:rustc-env=REPRO_TORCH_BUILT={}",
        version.as_deref().unwrap_or("unknown")
    );
    println!(
        "cargo:rustc-env=REPRO_TORCH_CUDA={}",
        cuda.as_deref().unwrap_or("none")
    );
    println!(
        "cargo:rustc-env=REPRO_TCH={}",
        tch.as_deref().unwrap_or("unknown")
    );

    if let Some(dir) = lib.as_ref().filter(|d| d.join("libtorch_cpu.so").is_file()) {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,{}", dir.display());
    }
    if let Some(dir) = lib.filter(|d| d.join("libtorch_cuda.so").is_file()) {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        println!("cargo:warning=linking libtorch_cuda from {}", dir.display());
    }
}
