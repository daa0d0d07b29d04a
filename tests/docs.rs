//! What the docs say about the shipped manifests holds: read from the
//! manifests themselves (`repro list --json`), not from a list kept here.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Each shipped experiment: its backend and its scales.
fn shipped() -> BTreeMap<String, (String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(["list", "--json"])
        .current_dir(root)
        .output()
        .expect("run repro list");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let scales = e["scales"].as_object().unwrap().keys().cloned().collect();
            (
                e["name"].as_str().unwrap().to_string(),
                (e["backend"].as_str().unwrap().to_string(), scales),
            )
        })
        .collect()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The words between backticks in `text`.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// experiments/README.md has a row per manifest, and its backend column
/// starts with the manifest's backend as a manifest spells it.
#[test]
fn the_experiments_table_lists_every_manifest_with_its_backend() {
    let text = read("experiments/README.md");
    let rows: BTreeMap<&str, &str> = text
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            Some((quoted(cells.get(1)?).first().copied()?, *cells.get(3)?))
        })
        .collect();
    for (name, (backend, _)) in shipped() {
        let Some(column) = rows.get(name.as_str()) else {
            panic!("experiments/README.md has no row for `{name}`");
        };
        assert!(
            column.starts_with(backend.as_str()),
            "`{name}` runs on {backend}, experiments/README.md says {column}"
        );
    }
    assert!(
        !text.contains("| local"),
        "the in-process backend is `in-process`"
    );
}

/// docs/usage.md's list of what ships names every manifest under its
/// backend, and every manifest has the `smoke` scale it promises.
#[test]
fn the_usage_guide_lists_every_manifest_under_its_backend() {
    let text = read("docs/usage.md");
    let start = text.find("Shipped: ").expect("the list of what ships");
    let end = start + text[start..].find("Each has").expect("its end");
    // groups like "`a`, `b` (sim)" separated by ";"
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    let mut names: Vec<String> = Vec::new();
    for piece in text[start..end].split_inclusive(')') {
        let (before, label) = piece.rsplit_once('(').unwrap_or((piece, ""));
        names.extend(quoted(before).iter().map(|s| s.to_string()));
        let backend = label.split([';', ')']).next().unwrap_or("").trim();
        if !backend.is_empty() && !names.is_empty() {
            for n in names.drain(..) {
                listed.insert(n, backend.to_string());
            }
        }
    }
    for (name, (backend, scales)) in shipped() {
        assert_eq!(
            listed.get(&name),
            Some(&backend),
            "docs/usage.md's list of what ships: `{name}` ({backend})"
        );
        assert!(
            scales.iter().any(|s| s == "smoke"),
            "`{name}` has no smoke scale"
        );
    }
}

/// A figure's title never names another metric than the one it draws
/// (the quickstart's once said "test accuracy" over a train-loss axis).
#[test]
fn figure_titles_name_the_metric_they_draw() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for name in shipped().keys() {
        let o = Command::new(env!("CARGO_BIN_EXE_repro"))
            .args(["show", name])
            .current_dir(root)
            .output()
            .expect("run repro show");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let m: serde_json::Value = yaml_serde::from_slice(&o.stdout).unwrap();
        let Some(figure) = m.get("figure") else {
            continue;
        };
        let y = figure["y"].as_str().unwrap_or("train_loss");
        let title = figure["title"]
            .as_str()
            .or(m["title"].as_str())
            .unwrap()
            .to_lowercase();
        for (word, other) in [("accuracy", "loss"), ("loss", "accuracy")] {
            if y.contains(word) {
                assert!(
                    !title.contains(other),
                    "{name}: the figure draws {y}, its title says {title:?}"
                );
            }
        }
    }
}
