//! Which source a `repro` binary was built from, recorded at build time by
//! `build.rs`: the git commit, the id of its code (`src`, `crates`,
//! `Cargo.toml`, `Cargo.lock`), whether the code differed from it, an id of
//! the exact source, the compiler and the version. The driver and the
//! trainer both depend on this crate, so both say what built them; nothing
//! else does, so an edit rebuilds only them.

mod ids;
pub use ids::{CODE, JUDGING, code_id, git, judging, pathspecs, text, with_changes};

/// The build of this binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Build {
    /// `git rev-parse HEAD`, or `unknown` outside a git checkout.
    pub commit: &'static str,
    /// Git's object id of `commit`'s recursive listing of the code less
    /// [`JUDGING`] (`git ls-tree -r HEAD src crates Cargo.toml
    /// Cargo.lock`, those paths' lines dropped, `| git hash-object
    /// --stdin`), `unknown` without git. Commits that change only results,
    /// docs, manifests, tests or judging code keep it.
    pub code: &'static str,
    /// The same of the [`JUDGING`] paths alone, with `+dirty.<hash>` where
    /// they differ from `commit`: which code judged and rendered a
    /// record's runs. A change to it re-judges records and never makes a
    /// run stale.
    pub judge: &'static str,
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

/// This binary's build.
pub const BUILD: Build = Build {
    commit: env!("REPRO_BUILD_COMMIT"),
    code: env!("REPRO_BUILD_CODE"),
    judge: env!("REPRO_BUILD_JUDGE"),
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
        let (mut kept, mut judged) = (String::new(), String::new());
        for line in String::from_utf8(listing).unwrap().lines() {
            let path = line.rsplit('\t').next().unwrap();
            let into = if judging(path) {
                &mut judged
            } else {
                &mut kept
            };
            into.push_str(line);
            into.push('\n');
        }
        assert!(
            judged.contains("\tsrc/report/claims/mod.rs\n")
                && judged.contains("\tsrc/records/health.rs\n")
        );
        assert!(kept.contains("\tsrc/cmd/run/mod.rs\n") && kept.contains("\tCargo.lock\n"));
        assert!(kept.contains("\tcrates/repro-codec/src/moniqua.rs\n"));
        let id = git(&["hash-object", "--stdin"], kept.as_bytes());
        assert_eq!(String::from_utf8(id).unwrap().trim(), b.code);
        let id = git(&["hash-object", "--stdin"], judged.as_bytes());
        let id = String::from_utf8(id).unwrap();
        assert!(b.judge.starts_with(id.trim()), "{} is not {id}", b.judge);
    }

    /// In a repository of its own: a commit that changes only a judging
    /// module keeps the code id (the records' runs stay current) and
    /// changes the judge id (they are re-judged); one that changes an
    /// algorithm changes the code id (its runs are stale) and keeps the
    /// judge id. An uncommitted change marks the id it falls under.
    #[test]
    fn a_judging_change_keeps_the_code_id_and_an_algorithm_change_does_not() {
        let root = std::env::temp_dir().join(format!("repro-build-ids-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |path: &str, text: &str| {
            let p = root.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        let commit = || {
            let ok = |args: &[&str]| {
                let o = std::process::Command::new("git")
                    .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
                    .arg(&root)
                    .args(args)
                    .output()
                    .unwrap();
                assert!(o.status.success(), "git {args:?}");
            };
            ok(&["add", "-A"]);
            ok(&["commit", "-q", "-m", "x"]);
        };
        write("src/records/health.rs", "// health\n");
        write("src/report/claims.rs", "// claims\n");
        write("crates/repro-algos/src/moniqua.rs", "// moniqua\n");
        write("Cargo.toml", "[workspace]\n");
        write("Cargo.lock", "");
        assert!(git(&root, &["init", "-q"]).is_some());
        commit();
        let ids = || {
            (
                code_id(&root, false).unwrap(),
                code_id(&root, true).unwrap(),
            )
        };
        let (code0, judge0) = ids();
        write("src/records/health.rs", "// health, a new rule\n");
        let judge_dirty = with_changes(&root, judge0.clone(), &JUDGING.map(String::from)).unwrap();
        assert!(
            judge_dirty.starts_with(&format!("{judge0}+dirty.")),
            "{judge_dirty}"
        );
        assert_eq!(
            with_changes(&root, code0.clone(), &pathspecs()),
            Some(code0.clone())
        );
        commit();
        let (code1, judge1) = ids();
        assert_eq!(code1, code0, "a judging change made the runs stale");
        assert_ne!(judge1, judge0, "a judging change was not seen");
        write(
            "crates/repro-algos/src/moniqua.rs",
            "// moniqua, another step\n",
        );
        commit();
        let (code2, judge2) = ids();
        assert_ne!(code2, code1, "an algorithm change left the runs current");
        assert_eq!(judge2, judge1);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// What judges and renders recorded runs is judging code; what
    /// computes a run (trainer, algorithms, codec, launch, what a run
    /// records) is code.
    #[test]
    fn judging_code_is_what_only_reads_recorded_runs() {
        for p in [
            "src/records/health.rs",
            "src/report/tune.rs",
            "src/report/claims.rs",
            "src/report/stats.rs",
            "src/report/plot.rs",
            "src/cmd/table.rs",
            "src/cmd/status.rs",
        ] {
            assert!(judging(p), "{p}");
        }
        for p in [
            "crates/repro-algos/src/moniqua.rs",
            "crates/repro-codec/src/moniqua.rs",
            "crates/repro-trainer/src/main.rs",
            "src/launch/sim.rs",
            "src/records/results.rs",
            "src/records/metrics.rs",
            "src/cmd/run.rs",
            "src/experiment/plan.rs",
            "src/reporting.rs",
            "Cargo.lock",
        ] {
            assert!(!judging(p), "{p}");
        }
    }
}
