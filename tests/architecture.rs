//! The driver's folders follow its data path, and the imports prove it:
//! a file imports only from its own folder or the folders before it, and
//! no two files import each other, directly or around a circle. Test code
//! (a file's `#[cfg(test)]` module) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The folders of `src/`, in data-flow order.
const STAGES: [&str; 6] = ["util", "spec", "launch", "records", "report", "cmd"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// A file's module path: `src/launch/net/mod.rs` is `launch::net`.
fn module(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// The text of `file` without its test module (which every file keeps last).
fn code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    match text.find("#[cfg(test)]\nmod ") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// The modules `text` names by `crate::` paths (`use crate::{..}` groups
/// are refused: every import names its module in full).
fn imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    assert!(
        !text.contains("crate::{"),
        "write `use crate::a::b` per module, not `use crate::{{..}}`"
    );
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let path: String = text[at + "crate::".len()..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        // the longest prefix of the path that is a module of ours
        let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        if let Some(m) = (1..=parts.len())
            .rev()
            .map(|n| parts[..n].join("::"))
            .find(|m| modules.contains(m))
        {
            out.insert(m);
        }
    }
    out
}

fn stage(module: &str) -> Option<usize> {
    let top = module.split("::").next()?;
    STAGES.iter().position(|s| *s == top)
}

/// module -> the modules its code imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let all = files(&src());
    let modules: BTreeSet<String> = all.iter().map(|f| module(f)).collect();
    all.iter()
        .map(|f| {
            let m = module(f);
            let mut deps = imports(&code(f), &modules);
            deps.remove(&m);
            (m, deps)
        })
        .collect()
}

#[test]
fn every_file_lives_in_a_stage_folder() {
    for m in graph().keys() {
        assert!(
            m.is_empty() || m == "main" || stage(m).is_some(),
            "src/{m} is in no stage folder ({STAGES:?})"
        );
    }
}

#[test]
fn no_stage_imports_from_a_later_one() {
    let mut wrong = Vec::new();
    for (m, deps) in graph() {
        let Some(mine) = stage(&m) else { continue };
        for d in deps {
            if stage(&d).is_some_and(|theirs| theirs > mine) {
                wrong.push(format!("{m} imports {d}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the data path:\n{}",
        wrong.join("\n")
    );
}

/// A circle of imports in `g`, if there is one.
fn circle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // depth-first search with colours: on the stack (1), done (2)
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        colour: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match colour.get(m) {
            Some(2) => return None,
            Some(1) => {
                let from = stack.iter().position(|s| s == m).unwrap();
                let mut circle = stack[from..].to_vec();
                circle.push(m.to_string());
                return Some(circle);
            }
            _ => {}
        }
        colour.insert(m.to_string(), 1);
        stack.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            // a folder's mod.rs and the files in it name each other
            // (`mod x;` and `super::`): not a circle between stages of work
            if d.starts_with(&format!("{m}::")) || m.starts_with(&format!("{d}::")) {
                continue;
            }
            if let Some(c) = visit(d, g, colour, stack) {
                return Some(c);
            }
        }
        stack.pop();
        colour.insert(m.to_string(), 2);
        None
    }
    let mut colour = BTreeMap::new();
    g.keys()
        .find_map(|m| visit(m, g, &mut colour, &mut Vec::new()))
}

#[test]
fn no_module_imports_itself_around_a_circle() {
    if let Some(c) = circle(&graph()) {
        panic!("an import circle: {}", c.join(" -> "));
    }
}

/// The checks above can fail: a made-up later import and a made-up circle.
#[test]
fn the_checks_see_a_wrong_import() {
    let modules: BTreeSet<String> = ["spec::plan", "report::table", "report"]
        .map(String::from)
        .into();
    let deps = imports(
        "use crate::report::table::Table;\nfn f() { crate::spec::plan::x() }",
        &modules,
    );
    assert_eq!(
        deps,
        ["report::table", "spec::plan"].map(String::from).into()
    );
    assert!(stage("report::table") > stage("spec::plan"));
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("spec::plan", vec!["launch::data"]),
        ("launch::data", vec!["util::atomic", "spec::plan"]),
        ("util::atomic", vec![]),
    ]
    .into_iter()
    .map(|(m, d)| (m.to_string(), d.into_iter().map(String::from).collect()))
    .collect();
    let c = circle(&g).unwrap();
    assert_eq!(c.first(), c.last());
    assert_eq!(c.len(), 3, "{c:?}");
}
