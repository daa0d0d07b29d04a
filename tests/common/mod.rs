//! Helpers the `repro` binary's test files share.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

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
