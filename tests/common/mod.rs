//! Helpers the `repro` binary's test files share.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A fresh directory under the system's temporary one for test `name`.
pub fn temp_out(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("repro-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// The rows of a CSV file, each a map from its header's names.
pub fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            header
                .iter()
                .map(String::from)
                .zip(rec.iter().map(String::from))
                .collect()
        })
        .collect()
}

/// A run record's `key` as a number, naming the key when it is not one.
pub fn number(row: &std::collections::HashMap<String, String>, key: &str) -> f64 {
    row[key]
        .parse()
        .unwrap_or_else(|_| panic!("{key} = {:?}", row[key]))
}

/// The trainer binary next to `repro` (cargo test --workspace builds it), or
/// built now.
/// The trainer beside this build's `repro`, built from the same source:
/// when it is missing or says another build, cargo builds it (once per
/// test binary).
pub fn train_binary() -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let sibling = PathBuf::from(env!("CARGO_BIN_EXE_repro")).with_file_name("repro-train");
    BUILT.call_once(|| {
        let version = |exe: &Path| {
            let o = Command::new(exe).arg("--version").output().ok()?;
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            Some(text.split_once(' ')?.1.trim().to_string())
        };
        let ours = version(Path::new(env!("CARGO_BIN_EXE_repro")));
        if ours.is_some() && version(&sibling) == ours {
            return;
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "repro-trainer", "--bin", "repro-train"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo build");
        assert!(status.success(), "could not build repro-train");
    });
    sibling
}

/// `repro` with the trainer binary of this build (`REPRO_TRAIN`), run from
/// the source tree.
pub fn repro_cmd(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_repro"));
    cmd.args(args)
        .env("REPRO_TRAIN", train_binary())
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

/// The cells of a tidy table.csv as `repro compare --format csv` writes
/// them: the lines of the table's own metric (not its extra columns),
/// without the `quantity` and `paper` columns.
pub fn cells_of_tidy_table(tidy: &str) -> String {
    let mut r = csv::Reader::from_reader(tidy.as_bytes());
    let header = r.headers().unwrap().clone();
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (quantity, metric) = (at("quantity"), at("metric"));
    let keep: Vec<usize> = (0..header.len())
        .filter(|&i| i != quantity && Some(i) != header.iter().position(|h| h == "paper"))
        .collect();
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(keep.iter().map(|&i| &header[i])).unwrap();
    for rec in r.records() {
        let rec = rec.unwrap();
        if rec[quantity] == rec[metric] {
            w.write_record(keep.iter().map(|&i| &rec[i])).unwrap();
        }
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

pub fn repro(args: &[&str]) -> Output {
    repro_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

/// Splits one line of runs.csv (fields may be quoted).
pub fn fields(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// runs.csv as one map per run.
pub fn read_runs(out: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let csv = std::fs::read_to_string(out.join("runs.csv")).unwrap();
    let mut lines = csv.lines();
    let header = fields(lines.next().unwrap());
    lines
        .map(|l| header.iter().cloned().zip(fields(l)).collect())
        .collect()
}

/// Whether the root-only tests run: they need root (namespaces, tc); CI runs
/// as root and sets REPRO_REQUIRE_ROOT_TESTS=1, so there they cannot skip.
pub fn as_root() -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if !root {
        assert!(
            std::env::var_os("REPRO_REQUIRE_ROOT_TESTS").is_none(),
            "REPRO_REQUIRE_ROOT_TESTS is set but the tests do not run as root"
        );
        skipped("needs root (network namespaces and tc)");
    }
    root
}

/// Says on the terminal, past the test harness's capture, that the calling
/// test skipped and why, and appends the same to the file
/// `REPRO_SKIPPED_LOG` names, where `ci/test.sh` counts them.
pub fn skipped(why: &str) {
    use std::io::Write;
    let test = std::env::var("NEXTEST_TEST_NAME").unwrap_or_else(|_| {
        std::thread::current()
            .name()
            .unwrap_or("a test")
            .to_string()
    });
    let line = format!("{test}: {why}\n");
    let _ = std::io::stderr().write_all(format!("\nSKIPPED: {line}").as_bytes());
    // nextest shows no output of a passing test: ci/test.sh reads this file
    if let Some(path) = std::env::var_os("REPRO_SKIPPED_LOG") {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .expect("REPRO_SKIPPED_LOG opens for appending");
        file.write_all(line.as_bytes()).unwrap();
    }
}

/// Keeps this process's tests that start ranks or shape a network apart
/// under plain `cargo test`, which runs a binary's tests on threads side by
/// side. nextest runs each test in its own process and keeps them apart
/// with its `network` test group (.config/nextest.toml).
/// Under nextest, a test that calls this and is not in that group fails.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    if let Ok(group) = std::env::var("NEXTEST_TEST_GROUP") {
        assert_eq!(
            group, "network",
            "this test starts ranks or shapes a network: put it in the `network` test group of .config/nextest.toml"
        );
    }
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits until a `repro-train` whose command line names `out` runs under
/// the driver `child`; returns its pid.
pub fn wait_for_trainer(child: &mut std::process::Child, out: &Path) -> u32 {
    let train = train_binary().to_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let found = processes_naming(out)
            .into_iter()
            .find_map(|(pid, cmd)| cmd.starts_with(&train).then_some(pid));
        if let Some(pid) = found {
            return pid;
        }
        assert!(Instant::now() < deadline, "no rank started");
        assert!(
            child.try_wait().unwrap().is_none(),
            "repro exited before its ranks started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The processes whose command line names `path`: (pid, command line).
pub fn processes_naming(path: &Path) -> Vec<(u32, String)> {
    let marker = path.to_str().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(marker).then_some((pid, cmd))
        })
        .collect()
}

/// Sends `signal` (e.g. `-TERM`) to `pid`.
pub fn kill(signal: &str, pid: u32) {
    assert!(
        Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
}

/// Waits for the driver to exit: (exit code, stderr).
pub fn finish(mut child: std::process::Child) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "repro did not stop");
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    (status.code(), stderr)
}

/// What `repro ARGS` prints as JSON, run in the repository.
pub fn repro_json(args: &[&str]) -> serde_json::Value {
    let o = repro(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A project directory for test `name`: the shipped manifests
/// (`experiments/`, linked) and a copy of the results fixture
/// (tests/fixtures/results) as its `results/`, so a command that reads
/// every experiment's results reads these, never the committed ones.
pub fn fixture_project(name: &str) -> PathBuf {
    let root = temp_out(name);
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(here.join("experiments"), root.join("experiments")).unwrap();
    copy_tree(&here.join("tests/fixtures/results"), &root.join("results"));
    root
}

/// Copies the tree at `src` to `dst`, file by file.
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap().flatten() {
        let (from, to) = (e.path(), dst.join(e.file_name()));
        if from.is_dir() {
            copy_tree(&from, &to);
        } else {
            std::fs::copy(&from, &to).unwrap();
        }
    }
}

/// `repro` with `args`, run in `dir`.
pub fn repro_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run repro")
}

/// `s` with each run directory's stamp (`2026-11-29T093749Z`, `-2`...)
/// written `<stamp>`: two dry runs a second apart plan the same runs into
/// differently named new directories.
pub fn unstamped(s: &str) -> String {
    let b = s.as_bytes();
    let shape = b"dddd-dd-ddTddddddZ";
    let (mut out, mut i) = (String::new(), 0);
    while i < b.len() {
        let fits = b.len() - i >= shape.len()
            && shape.iter().zip(&b[i..]).all(|(p, c)| match p {
                b'd' => c.is_ascii_digit(),
                p => p == c,
            });
        if fits {
            out.push_str("<stamp>");
            i += shape.len();
            if b.get(i) == Some(&b'-') && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                i += 1;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
        } else {
            let c = s[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}
