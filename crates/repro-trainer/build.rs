//! Links libtorch's CUDA library when the libtorch found at build time has
//! one. The linker drops `libtorch_cuda.so` otherwise (nothing references
//! it directly, it registers the CUDA backend when loaded), and then
//! `tch::Cuda::is_available()` is false on a GPU machine. With a CPU-only
//! libtorch (this project's CI) nothing is added.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LD_LIBRARY_PATH");
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(l) = std::env::var_os("LIBTORCH") {
        dirs.push(PathBuf::from(l).join("lib"));
    }
    if let Some(p) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    if let Some(dir) = dirs.iter().find(|d| d.join("libtorch_cuda.so").is_file()) {
        println!("cargo:rustc-link-search=native={}", dir.display());
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        println!("cargo:warning=linking libtorch_cuda from {}", dir.display());
    }
}
