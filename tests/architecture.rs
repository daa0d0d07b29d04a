//! The driver's folders follow its data path, and the imports prove it:
//! a file imports only from its own folder or the folders before it, and
//! no two files import each other, directly or around a circle. The same
//! holds for every crate of the workspace: no import circle between its
//! files. Test code (a file's `#[cfg(test)]` module) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The folders of `src/`, in data-flow order.
const STAGES: [&str; 6] = ["util", "experiment", "launch", "records", "report", "cmd"];

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

/// A file's module path under `root`: `src/launch/net/mod.rs` is
/// `launch::net`.
fn module(root: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

/// Whether `file` is a test module of its own: a `tests.rs` (declared
/// `#[cfg(test)] mod tests;`) or a file in a `tests` folder under it.
fn is_test_file(file: &Path) -> bool {
    file.file_name().is_some_and(|n| n == "tests.rs")
        || file
            .parent()
            .is_some_and(|d| d.components().any(|c| c.as_os_str() == "tests"))
            && file.components().any(|c| c.as_os_str() == "src")
}

/// Where `text`, the text of `file`, starts its test code: a test file is
/// all test code; another file's test module comes last.
fn test_code_at(file: &Path, text: &str) -> Option<usize> {
    if is_test_file(file) {
        Some(0)
    } else {
        text.find("#[cfg(test)]\nmod ")
    }
}

/// The text of `file` without its test code.
fn code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    match test_code_at(file, &text) {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// `text` with each `crate::{a, b::c}` group written out as `crate::a`,
/// `crate::b::c` (one level of braces; a nested group keeps its head).
fn expand_groups(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::{") {
        out.push_str(&rest[..at]);
        let inner = &rest[at + "crate::{".len()..];
        let mut depth = 1;
        let mut end = inner.len();
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        for item in inner[..end].split(',') {
            out.push_str(&format!(" crate::{} ", item.trim()));
        }
        rest = &inner[(end + 1).min(inner.len())..];
    }
    out.push_str(rest);
    out
}

/// The modules `text` names by `crate::` paths (in the driver `use
/// crate::{..}` groups are refused: every import names its module in
/// full; in the other crates they are written out first).
fn imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    assert!(
        !text.contains("crate::{"),
        "write `use crate::a::b` per module, not `use crate::{{..}}`"
    );
    imports_of(text, modules)
}

fn imports_of(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
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

/// module -> the modules its code imports, for the driver.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let root = src();
    let all = files(&root);
    let modules: BTreeSet<String> = all.iter().map(|f| module(&root, f)).collect();
    all.iter()
        .map(|f| {
            let m = module(&root, f);
            let mut deps = imports(&code(f), &modules);
            deps.remove(&m);
            (m, deps)
        })
        .collect()
}

/// module -> the modules its code imports, for the crate whose sources
/// are in `root` (`crate::{..}` groups written out).
fn crate_graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let all: Vec<PathBuf> = files(root)
        .into_iter()
        .filter(|f| !f.starts_with(root.join("bin")))
        .collect();
    let modules: BTreeSet<String> = all.iter().map(|f| module(root, f)).collect();
    all.iter()
        .map(|f| {
            let m = module(root, f);
            let mut deps = imports_of(&expand_groups(&code(f)), &modules);
            deps.remove(&m);
            (m, deps)
        })
        .collect()
}

/// Every crate of the workspace but the driver: its name and its `src/`.
fn crates() -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                p.join("src"),
            )
        })
        .collect();
    out.sort();
    out
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

/// No crate of the workspace has an import circle between its files.
#[test]
fn no_crate_has_an_import_circle() {
    let all = crates();
    assert!(all.len() >= 6, "{all:?}");
    let mut found = Vec::new();
    for (name, root) in &all {
        if let Some(c) = circle(&crate_graph(root)) {
            found.push(format!("{name}: {}", c.join(" -> ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
    // groups are written out, so a circle through one is seen
    let modules: BTreeSet<String> = ["sim", "pairwise"].map(String::from).into();
    let deps = imports_of(
        &expand_groups("use crate::{pairwise::{Folded, PairSide}, sim::Network, AlgoError};"),
        &modules,
    );
    assert_eq!(deps, modules);
}

/// The checks above can fail: a made-up later import and a made-up circle.
#[test]
fn the_checks_see_a_wrong_import() {
    let modules: BTreeSet<String> = ["experiment::plan", "report::table", "report"]
        .map(String::from)
        .into();
    let deps = imports(
        "use crate::report::table::Table;\nfn f() { crate::experiment::plan::x() }",
        &modules,
    );
    assert_eq!(
        deps,
        ["report::table", "experiment::plan"]
            .map(String::from)
            .into()
    );
    assert!(stage("report::table") > stage("experiment::plan"));
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("experiment::plan", vec!["launch::data"]),
        ("launch::data", vec!["util::atomic", "experiment::plan"]),
        ("util::atomic", vec![]),
    ]
    .into_iter()
    .map(|(m, d)| (m.to_string(), d.into_iter().map(String::from).collect()))
    .collect();
    let c = circle(&g).unwrap();
    assert_eq!(c.first(), c.last());
    assert_eq!(c.len(), 3, "{c:?}");
}

/// Where `text` (a test's source) reads the committed `results/`: a line
/// that joins `results` onto the repository's own directory, or runs a
/// `repro` command that reads every experiment's committed results from
/// the repository (`status` without `--out`, `report --markdown NAME`).
/// The line numbers, from 1.
fn committed_results_reads(text: &str) -> Vec<usize> {
    let reads_all = |l: &str| {
        (l.contains("repro(&[\"status\"")
            || l.contains("repro_json(&[\"status\"")
            || l.contains("\"report\", \"--markdown\""))
            && !l.contains("--out")
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            (l.contains("CARGO_MANIFEST_DIR") && l.contains("join(\"results")) || reads_all(l)
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// No test reads the committed `results/` but the record's own checks
/// (tests/record.rs): the others read tests/fixtures/results or runs they
/// make, so a rerun committed in parts cannot break them. Test modules
/// of `src/` are held to it too.
#[test]
fn only_the_record_checks_read_the_committed_results() {
    // the rule finds what it is for
    let wrong = "let root = Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"results\");\n\
                 let o = repro(&[\"status\"]);\n\
                 common::repro_cmd(&[\"report\", \"--markdown\", &name])";
    assert_eq!(committed_results_reads(wrong), [1, 2, 3]);
    let right = "let root = Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"tests/fixtures/results\");\n\
                 let o = repro(&[\"status\", \"smoke\", \"--out\", out]);\n\
                 repro(&[\"report\", \"--markdown\", \"t\", \"--out\", \"results/t\"]);";
    assert!(committed_results_reads(right).is_empty());
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // test files, whole; source files, their test module (kept last)
    let mut whole: Vec<PathBuf> = files(&here.join("tests"))
        .into_iter()
        .filter(|f| !f.ends_with("tests/record.rs"))
        .collect();
    let mut sources = files(&here.join("src"));
    for (_, src) in crates() {
        let tests = src.with_file_name("tests");
        if tests.is_dir() {
            whole.extend(files(&tests));
        }
        sources.extend(files(&src));
    }
    let mut found = Vec::new();
    let mut report = |f: &Path, offset: usize, text: &str| {
        for line in committed_results_reads(text) {
            found.push(format!("{}:{}", f.display(), line + offset));
        }
    };
    for f in &whole {
        report(f, 0, &std::fs::read_to_string(f).unwrap());
    }
    for f in &sources {
        let text = std::fs::read_to_string(f).unwrap();
        if let Some(at) = test_code_at(f, &text) {
            report(f, text[..at].lines().count(), &text[at..]);
        }
    }
    assert!(
        found.is_empty(),
        "tests that read the committed results/ (read tests/fixtures/results, or a run the test makes): {found:?}"
    );
}

/// Only `cmd/` sees the command line: no other file of the driver names
/// clap (`cmd/values.rs` gives the other stages' types their `ValueEnum`).
#[test]
fn only_cmd_names_clap() {
    let mut named = Vec::new();
    for f in files(&src()) {
        let m = module(&src(), &f);
        if m == "main" || m == "cmd" || m.starts_with("cmd::") {
            continue;
        }
        if code(&f).contains("clap") {
            named.push(m);
        }
    }
    assert!(named.is_empty(), "clap below cmd/: {named:?}");
}

/// The most non-test functions over [`LONG`] lines the workspace keeps.
const MOST_LONG: usize = 4;
/// A function longer than this many lines says why, in a comment above it
/// that starts `// Long on purpose:`.
const LONG: usize = 80;

/// `text` with its comments, strings and character literals blanked
/// (newlines kept), so that a brace counts only where it is code.
fn blank(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = c.clone();
    let ident = |k: usize| c[k].is_alphanumeric() || c[k] == '_';
    let mut wipe = |from: usize, to: usize| {
        for ch in &mut out[from..to.min(c.len())] {
            if *ch != '\n' {
                *ch = ' ';
            }
        }
    };
    let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, x)| c.get(i + k) == Some(&x));
    let find = |from: usize, s: &str| (from..c.len()).find(|&k| at(k, s)).unwrap_or(c.len());
    let mut i = 0;
    while i < c.len() {
        let raw_start = c[i] == 'r'
            && (i == 0 || !ident(i - 1) || (c[i - 1] == 'b' && (i < 2 || !ident(i - 2))));
        let hashes = c[i + 1..].iter().take_while(|&&x| x == '#').count();
        let end = if at(i, "//") {
            find(i, "\n")
        } else if at(i, "/*") {
            find(i, "*/") + 2
        } else if raw_start && c.get(i + 1 + hashes) == Some(&'"') {
            let close = format!("\"{}", "#".repeat(hashes));
            find(i + 2 + hashes, &close) + close.len()
        } else if c[i] == '"' {
            let mut j = i + 1;
            while j < c.len() && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if c[i] == '\'' && c.get(i + 1) == Some(&'\\') {
            find(i + 2, "'") + 1
        } else if c[i] == '\'' && c.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            i += 1;
            continue;
        };
        wipe(i, end);
        i = end;
    }
    out.into_iter().collect()
}

/// Every function with a body in `text` (its test module left out): its
/// name, its first line (from 1), its length in lines, and whether the
/// comment above it says why it is long.
fn functions(text: &str) -> Vec<(String, usize, usize, bool)> {
    let text = match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    };
    let raw: Vec<&str> = text.lines().collect();
    let code: Vec<String> = blank(text).lines().map(str::to_string).collect();
    let mut out = Vec::new();
    for (k, line) in code.iter().enumerate() {
        let mut rest = line.trim_start();
        for head in [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "const ",
            "async ",
            "unsafe ",
        ] {
            rest = rest.strip_prefix(head).unwrap_or(rest).trim_start();
        }
        rest = rest.strip_prefix("extern ").map_or(rest, str::trim_start);
        let Some(name) = rest.strip_prefix("fn ") else {
            continue;
        };
        let name: String = name
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let above: Vec<&str> = raw[..k]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("//") || l.starts_with("#["))
            .collect();
        if above
            .iter()
            .any(|l| *l == "#[test]" || *l == "#[cfg(test)]")
        {
            continue;
        }
        let (mut depth, mut opened, mut end) = (0i64, false, None);
        'scan: for (j, l) in code.iter().enumerate().skip(k) {
            for ch in l.chars() {
                match ch {
                    '{' => (depth, opened) = (depth + 1, true),
                    '}' => depth -= 1,
                    ';' if !opened => break 'scan,
                    _ => {}
                }
                if opened && depth == 0 {
                    end = Some(j);
                    break 'scan;
                }
            }
        }
        if let Some(end) = end {
            let why = above.iter().any(|l| l.starts_with("// Long on purpose:"));
            out.push((name, k + 1, end - k + 1, why));
        }
    }
    out
}

/// The scan above measures what it should: a brace in a string, a
/// character literal, a lifetime or a comment is not code, a declaration
/// without a body is no function, and a test is left out.
#[test]
fn the_length_count_sees_a_long_function() {
    let body = "    let x = 1;\n".repeat(90);
    let text = format!(
        "fn short<'a>(s: &'a str) -> char {{\n    let _ = \"{{\"; // }}\n    let _ = r#\"}}\"#;\n    '{{'\n}}\n\
         trait T {{\n    fn declared(&self);\n}}\n\
         // Long on purpose: a test's reason.\npub(crate) fn long() {{\n{body}}}\n\
         /// Says nothing.\nfn unexplained() {{\n{body}}}\n\
         #[test]\nfn a_test() {{\n{body}}}\n"
    );
    let found = functions(&text);
    let lengths: Vec<(&str, usize, bool)> = found
        .iter()
        .map(|(n, _, l, w)| (n.as_str(), *l, *w))
        .collect();
    assert_eq!(
        lengths,
        [
            ("short", 5, false),
            ("long", 92, true),
            ("unexplained", 92, false)
        ]
    );
}

/// At most [`MOST_LONG`] non-test functions of the workspace run over
/// [`LONG`] lines, and each says why in a `// Long on purpose:` comment.
#[test]
fn long_functions_are_few_and_say_why() {
    let mut roots = vec![src()];
    roots.extend(crates().into_iter().map(|(_, src)| src));
    let mut long = Vec::new();
    let mut unexplained = Vec::new();
    for root in &roots {
        for f in files(root) {
            for (name, line, length, why) in functions(&code(&f)) {
                if length > LONG {
                    let at = format!("{}:{line} {name} ({length} lines)", f.display());
                    if !why {
                        unexplained.push(at.clone());
                    }
                    long.push(at);
                }
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "functions over {LONG} lines without a `// Long on purpose:` comment above them: split them into named steps, or say why they are one: {unexplained:?}"
    );
    assert!(
        long.len() <= MOST_LONG,
        "{} functions over {LONG} lines, at most {MOST_LONG} allowed: {long:?}",
        long.len()
    );
}

/// Every dependency (normal and build) of each of the workspace's crates,
/// from their Cargo.toml files: `repro` is the driver.
fn dependencies() -> BTreeSet<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut manifests = vec![("repro".to_string(), root.join("Cargo.toml"))];
    manifests.extend(
        crates()
            .into_iter()
            .map(|(name, src)| (name, src.with_file_name("Cargo.toml"))),
    );
    let mut edges = BTreeSet::new();
    for (name, toml) in &manifests {
        let text = std::fs::read_to_string(toml).unwrap();
        let mut section = "";
        for line in text.lines() {
            if line.starts_with('[') {
                section = line.trim();
                continue;
            }
            if section != "[dependencies]" && section != "[build-dependencies]" {
                continue;
            }
            let dep = line.split(['.', ' ', '=']).next().unwrap_or_default();
            if !dep.is_empty() && !dep.starts_with('#') && dep != name {
                edges.insert((name.clone(), dep.to_string()));
            }
        }
    }
    edges
}

/// The workspace's crates each depends on.
fn crate_edges() -> BTreeSet<(String, String)> {
    let mut names: BTreeSet<String> = crates().into_iter().map(|(n, _)| n).collect();
    names.insert("repro".into());
    dependencies()
        .into_iter()
        .filter(|(_, dep)| names.contains(dep))
        .collect()
}

/// Only the trainer links libtorch or MPI: the driver, the codec, the
/// algorithms and the rest build and run on a machine without either, and
/// the driver starts the trainer as a program, never as a library.
#[test]
fn only_the_trainer_links_torch_or_mpi() {
    let all = dependencies();
    assert!(
        all.contains(&("repro-trainer".into(), "tch".into())),
        "the check reads the trainer's dependencies: {all:?}"
    );
    let wrong: Vec<_> = all
        .iter()
        .filter(|(krate, dep)| {
            krate != "repro-trainer"
                && ["tch", "torch-sys", "mpi", "repro-trainer"].contains(&dep.as_str())
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:?}");
}

/// ARCHITECTURE.md's crate diagram draws every dependency between the
/// workspace's crates: on some line, the crate before an arrow and its
/// dependency after it.
#[test]
fn the_crate_diagram_draws_every_workspace_edge() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    let diagram = doc
        .split("```")
        .nth(1)
        .expect("a diagram in ARCHITECTURE.md");
    let drawn = |from: &str, to: &str| {
        let word = |seg: &str, w: &str| {
            seg.split(|c: char| !(c.is_alphanumeric() || c == '-'))
                .any(|x| x == w)
        };
        diagram.lines().any(|l| {
            let segs: Vec<&str> = l.split("──>").collect();
            (0..segs.len())
                .any(|i| word(segs[i], from) && segs[i + 1..].iter().any(|s| word(s, to)))
        })
    };
    let edges = crate_edges();
    assert!(
        edges.contains(&("repro-build".into(), "repro-runlog".into())),
        "{edges:?}"
    );
    let missing: Vec<String> = edges
        .iter()
        .filter(|(a, b)| !drawn(a, b))
        .map(|(a, b)| format!("{a} ──> {b}"))
        .collect();
    assert!(missing.is_empty(), "not drawn: {}", missing.join(", "));
}

/// The most lines a file of code (not a test module of its own) may have:
/// past it, a file holds several jobs and becomes a folder of them.
const MOST_LINES: usize = 800;

/// No file of code in `src/` or a crate's `src/` is over [`MOST_LINES`]
/// lines (its inline test module counted: a long one moves to `tests.rs`).
#[test]
fn no_file_of_code_is_over_800_lines() {
    let mut roots = vec![src()];
    roots.extend(crates().into_iter().map(|(_, src)| src));
    let mut over = Vec::new();
    let mut seen = 0;
    for root in &roots {
        for f in files(root).into_iter().filter(|f| !is_test_file(f)) {
            let lines = std::fs::read_to_string(&f).unwrap().lines().count();
            seen += 1;
            if lines > MOST_LINES {
                over.push(format!("{} ({lines} lines)", f.display()));
            }
        }
    }
    assert!(seen > 100, "{seen} files");
    assert!(over.is_empty(), "files over {MOST_LINES} lines: {over:?}");
}
