//! Which source a `repro` binary was built from, recorded at build time by
//! `build.rs`: the git commit, whether the tree differed from it, an id of
//! the exact source, the compiler and the version. The driver and the
//! trainer both depend on this crate, so both say what built them; nothing
//! else does, so an edit rebuilds only them.

/// The build of this binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Build {
    /// `git rev-parse HEAD`, or `unknown` outside a git checkout.
    pub commit: &'static str,
    /// Whether tracked files differed from `commit` (`None`: unknown).
    pub dirty: Option<bool>,
    /// The exact source: `commit` when clean, `commit+dirty.<hash of the
    /// diff>` when not, `unknown` without git. Two builds with the same id
    /// ran the same code; results from another id are stale.
    pub source: &'static str,
    /// `rustc --version` of the compiler that built it.
    pub rustc: &'static str,
    /// The workspace's version.
    pub version: &'static str,
}

/// `--version`'s text: `0.1.0 (<source id>; rustc 1.x ...)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("REPRO_BUILD_SOURCE"),
    "; ",
    env!("REPRO_BUILD_RUSTC"),
    ")"
);

/// This binary's build.
pub const BUILD: Build = Build {
    commit: env!("REPRO_BUILD_COMMIT"),
    dirty: match env!("REPRO_BUILD_DIRTY").as_bytes() {
        b"true" => Some(true),
        b"false" => Some(false),
        _ => None,
    },
    source: env!("REPRO_BUILD_SOURCE"),
    rustc: env!("REPRO_BUILD_RUSTC"),
    version: env!("CARGO_PKG_VERSION"),
};

impl Build {
    /// A run log's provenance from this build, on this host; the caller
    /// says how the run ran and fills what only it knows (libtorch, MPI,
    /// the command line, the manifest).
    pub fn provenance(
        &self,
        device: &str,
        backend: &str,
        network: String,
    ) -> repro_runlog::Provenance {
        repro_runlog::Provenance {
            git_commit: self.commit.into(),
            git_dirty: self.dirty,
            source: self.source.into(),
            rustc: self.rustc.into(),
            version: self.version.into(),
            host: repro_runlog::host_name(),
            device: device.into(),
            backend: backend.into(),
            network,
            ..repro_runlog::Provenance::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_names_its_source() {
        let b = BUILD;
        match b.dirty {
            Some(false) => assert_eq!(b.source, b.commit),
            Some(true) => assert!(b.source.starts_with(&format!("{}+dirty.", b.commit))),
            None => assert_eq!(b.source, "unknown"),
        }
        assert!(b.rustc.starts_with("rustc "), "{}", b.rustc);
        assert!(VERSION.starts_with(b.version) && VERSION.contains(b.source));
    }
}
