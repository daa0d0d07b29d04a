//! Which source a `repro` binary was built from, recorded at build time by
//! `build.rs`: the git commit, the id of its code (`src`, `crates`,
//! `Cargo.toml`, `Cargo.lock`), whether the code differed from it, an id of
//! the exact source, the compiler and the version. The driver and the
//! trainer both depend on this crate, so both say what built them; nothing
//! else does, so an edit rebuilds only them.

/// The build of this binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Build {
    /// `git rev-parse HEAD`, or `unknown` outside a git checkout.
    pub commit: &'static str,
    /// Git's object id of `commit`'s recursive listing of the code less
    /// [`PRESENTATION`] (`git ls-tree -r HEAD src crates Cargo.toml
    /// Cargo.lock`, those paths' lines dropped, `| git hash-object
    /// --stdin`), `unknown` without git. Commits that change only results,
    /// docs, manifests, tests or presentation keep it.
    pub code: &'static str,
    /// Whether the code differed from `commit` (`None`: unknown).
    pub dirty: Option<bool>,
    /// The exact source: `code` when clean, `code+dirty.<hash of the
    /// diff>` when not, `unknown` without git. Two builds with the same id
    /// ran the same code; results from another id are stale.
    pub source: &'static str,
    /// `rustc --version` of the compiler that built it.
    pub rustc: &'static str,
    /// The workspace's version.
    pub version: &'static str,
}

/// `--version`'s text: `0.1.0 (source <source id>, commit <commit>; rustc
/// 1.x ...)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (source ",
    env!("REPRO_BUILD_SOURCE"),
    ", commit ",
    env!("REPRO_BUILD_COMMIT"),
    "; ",
    env!("REPRO_BUILD_RUSTC"),
    ")"
);

/// The driver's modules that only read recorded runs and render them
/// (tables, figures, claims, the report), comma-separated: left out of the
/// code id, so redrawing a figure with fixed code keeps its runs current.
pub const PRESENTATION: &str = env!("REPRO_BUILD_PRESENTATION");

/// This binary's build.
pub const BUILD: Build = Build {
    commit: env!("REPRO_BUILD_COMMIT"),
    code: env!("REPRO_BUILD_CODE"),
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
            Some(false) => assert_eq!(b.source, b.code),
            Some(true) => assert!(b.source.starts_with(&format!("{}+dirty.", b.code))),
            None => assert_eq!(b.source, "unknown"),
        }
        assert!(b.rustc.starts_with("rustc "), "{}", b.rustc);
        assert!(VERSION.starts_with(b.version) && VERSION.contains(b.source));
        assert!(VERSION.contains(b.commit));
    }

    /// The code id is the documented git command's, run on the build's
    /// commit: only the code's paths enter it, less presentation.
    #[test]
    fn the_code_id_is_the_listing_of_the_code_paths() {
        let b = BUILD;
        if b.code == "unknown" {
            return;
        }
        let git = |args: &[&str], input: &[u8]| {
            use std::io::Write;
            let mut child = std::process::Command::new("git")
                .args(args)
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(input).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "git {args:?}");
            out.stdout
        };
        let root = git(&["rev-parse", "--show-toplevel"], b"");
        let root = String::from_utf8(root).unwrap();
        let listing = git(
            &[
                "-C",
                root.trim(),
                "ls-tree",
                "-r",
                b.commit,
                "--",
                "src",
                "crates",
                "Cargo.toml",
                "Cargo.lock",
            ],
            b"",
        );
        let shown: Vec<&str> = PRESENTATION.split(',').collect();
        assert!(shown.contains(&"src/report/plot.rs") && shown.contains(&"src/report/table.rs"));
        let is_shown = |path: &str| {
            shown
                .iter()
                .any(|p| path == *p || path.starts_with(&format!("{p}/")))
        };
        let mut kept = String::new();
        let mut dropped = 0;
        for line in String::from_utf8(listing).unwrap().lines() {
            let path = line.rsplit('\t').next().unwrap();
            if is_shown(path) {
                dropped += 1;
            } else {
                kept.push_str(line);
                kept.push('\n');
            }
        }
        assert!(dropped >= 5, "the presentation modules are in the tree");
        assert!(kept.contains("\tsrc/cmd/run.rs\n") && kept.contains("\tCargo.lock\n"));
        assert!(kept.contains("\tcrates/repro-codec/src/moniqua.rs\n"));
        let id = git(&["hash-object", "--stdin"], kept.as_bytes());
        assert_eq!(String::from_utf8(id).unwrap().trim(), b.code);
    }
}
