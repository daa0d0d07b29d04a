//! What the docs say about the shipped manifests holds: read from the
//! manifests themselves (`repro list --json`), not from a list kept here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

mod common;
use common::repro_json;

/// Each shipped experiment: its backend and its scales.
fn shipped() -> BTreeMap<String, (String, Vec<String>)> {
    let list = repro_json(&["list", "--json"]);
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

/// The manifest resolved at `scale` (`repro show NAME --scale S`).
fn show_at(name: &str, scale: &str) -> serde_json::Value {
    let o = Command::new(env!("CARGO_BIN_EXE_repro"))
        .args(["show", name, "--scale", scale])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .expect("run repro show");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    yaml_serde::from_slice(&o.stdout).unwrap()
}

/// A title says what every scale's runs do: a number of workers ("4 MPI
/// ranks", "8 workers") is the `workers` parameter at each scale, and a
/// data set it names is each scale's `dataset`.
#[test]
fn titles_say_what_the_runs_do_at_every_scale() {
    let datasets = [
        ("fashion-mnist", "fashion-mnist"),
        ("cifar-10", "cifar10"),
        ("synthetic", "synthetic"),
    ];
    let mut checked = 0;
    for (name, (_, scales)) in shipped() {
        for scale in scales {
            let m = show_at(&name, &scale);
            let params = &m["params"];
            let title = m["title"].as_str().unwrap().to_lowercase();
            let words: Vec<&str> = title
                .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
                .filter(|w| !w.is_empty())
                .collect();
            for w in words.windows(3) {
                let counted = ["ranks", "workers", "worker", "rank"].contains(&w[1])
                    || (w[1] == "mpi" && w[2].starts_with("rank"));
                if let (Ok(n), true) = (w[0].parse::<i64>(), counted) {
                    let workers = params["workers"].as_i64();
                    assert_eq!(
                        workers,
                        Some(n),
                        "{name} at {scale}: the title says {n} workers ({title:?}), its runs have {workers:?}"
                    );
                    checked += 1;
                }
            }
            for (said, dataset) in datasets {
                if title.contains(said) {
                    assert_eq!(
                        params["dataset"].as_str(),
                        Some(dataset),
                        "{name} at {scale}: the title names {said} ({title:?})"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 5, "only {checked} title statements checked");
}

/// One unit per metric: an accuracy reads in percent in every table,
/// extra column, claim and figure (the default, `metrics::unit_factor`),
/// so no shipped manifest sets another factor on one.
#[test]
fn accuracies_read_in_percent_everywhere() {
    let mut checked = 0;
    for name in shipped().keys() {
        let o = Command::new(env!("CARGO_BIN_EXE_repro"))
            .args(["show", name])
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
            .output()
            .expect("run repro show");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let m: serde_json::Value = yaml_serde::from_slice(&o.stdout).unwrap();
        let mut shown: Vec<(String, &serde_json::Value)> = Vec::new();
        let table = &m["table"];
        shown.push(("table".into(), table));
        for (i, e) in table["extra"].as_array().into_iter().flatten().enumerate() {
            shown.push((format!("table.extra[{i}]"), e));
        }
        shown.push(("figure".into(), &m["figure"]));
        for (i, c) in m["claims"].as_array().into_iter().flatten().enumerate() {
            shown.push((format!("claims[{i}]"), c));
        }
        for (at, v) in shown {
            let metric = v["value"]
                .as_str()
                .or(v["y"].as_str())
                .or(v["metric"].as_str());
            if metric.is_some_and(|m| m.contains("accuracy")) {
                let scale = v["scale"].as_f64();
                assert!(
                    scale.is_none_or(|s| s == 100.0),
                    "{name}: {at} shows {metric:?} multiplied by {scale:?}, not in percent"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "only {checked} accuracies checked");
}

/// Where `text` names an issue number ("issue 44", "issues 24 and 44"):
/// the line's text.
fn issue_numbers(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| {
            let lower = line.to_lowercase();
            lower.match_indices("issue").any(|(i, _)| {
                let rest = lower[i + "issue".len()..].trim_start_matches('s');
                let rest = rest.trim_start_matches([' ', '#']);
                rest.starts_with(|c: char| c.is_ascii_digit())
            })
        })
        .map(str::to_string)
        .collect()
}

/// No user-facing document refers to an issue number: the tracker is the
/// developers', and a reader cannot follow it. Manifests' titles and
/// sources reach tables and the report, so they count too.
#[test]
fn user_facing_documents_name_no_issue() {
    assert_eq!(issue_numbers("see issue 44 for it").len(), 1);
    assert_eq!(issue_numbers("(issues 24 and 44)").len(), 1);
    assert!(issue_numbers("an issue with it; issues remain").is_empty());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs: Vec<String> = ["README.md", "REPRODUCTION.md", "results/README.md"]
        .map(String::from)
        .to_vec();
    for dir in ["docs", "experiments"] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if matches!(p.extension().and_then(|x| x.to_str()), Some("md" | "yaml")) {
                docs.push(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut found = Vec::new();
    for d in &docs {
        let text = read(d);
        let shown: String = if d.ends_with(".yaml") {
            // what a manifest shows a reader: its title and source
            text.lines()
                .filter(|l| l.starts_with("title:") || l.starts_with("source:"))
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            text
        };
        found.extend(
            issue_numbers(&shown)
                .into_iter()
                .map(|l| format!("{d}: {l}")),
        );
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The verdict word a REPRODUCTION.md section's prose gives
/// ("**Verdict: reproduced in part.**"), if any.
fn prose_verdict(section: &str) -> Option<&str> {
    let at = section.find("**Verdict: ")? + "**Verdict: ".len();
    let rest = &section[at..];
    let end = rest.find(['.', '*', '(', ':', ';']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// The family verdict a section's generated claims give ("Verdict of this
/// family, after Holm's adjustment: **not reproduced**").
fn family_verdict(section: &str) -> Option<&str> {
    let key = "Verdict of this family, after Holm's adjustment: **";
    let at = section.find(key)? + key.len();
    let rest = &section[at..];
    Some(&rest[..rest.find("**")?])
}

/// Each REPRODUCTION.md section's verdict word follows its claims after
/// Holm's adjustment, as its generated block states them.
#[test]
fn section_verdicts_follow_the_adjusted_claims() {
    let text = read("REPRODUCTION.md");
    let mut sections: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, _) in text.match_indices("\n#") {
        sections.push(&text[start..i]);
        start = i + 1;
    }
    sections.push(&text[start..]);
    let mut checked = 0;
    for s in sections {
        let (Some(family), Some(prose)) = (family_verdict(s), prose_verdict(s)) else {
            continue;
        };
        let title = s.lines().next().unwrap_or_default();
        assert!(
            prose.starts_with(family) && !prose[family.len()..].trim_start().starts_with("in part"),
            "{title}: the prose says \"{prose}\", the claims after Holm's adjustment \"{family}\""
        );
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} sections have both verdicts");
    assert_eq!(
        prose_verdict("**Verdict: reproduced in part.** x"),
        Some("reproduced in part")
    );
    assert_eq!(
        family_verdict(
            "Verdict of this family, after Holm's adjustment: **not reproduced** (0 of 5"
        ),
        Some("not reproduced")
    );
}

/// Every file of the repository (relative paths, `/`-separated) and every
/// folder, build outputs, raw logs and git's own files left out.
fn repository_paths() -> (Vec<String>, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (mut files, mut dirs) = (Vec::new(), Vec::new());
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() {
                if ["target", ".git", "raw", "scratch", "runs", "node_modules"]
                    .contains(&name.as_str())
                {
                    continue;
                }
                dirs.push(rel);
                stack.push(p);
            } else {
                files.push(rel);
            }
        }
    }
    (files, dirs)
}

/// The names of every function, module, type and constant in the
/// workspace's Rust sources, by the module that defines them (a file's
/// stem: `health` for `src/records/health.rs` and `tests/health.rs`; a
/// folder's name for its `mod.rs`): what a `module::item` path in a
/// document may end with.
fn rust_items(files: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut items: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files.iter().filter(|f| f.ends_with(".rs")) {
        let mut stem = f.rsplit('/').next().unwrap().trim_end_matches(".rs");
        let dir = f.rsplit('/').nth(1).unwrap_or_default();
        if stem == "mod" || stem == "lib" || stem == "main" {
            stem = dir;
        }
        // a folder module's files are its own parts too: its mod.rs
        // imports each (`use part::*`), and `tests.rs` holds its tests
        // (the folder's module file is `dir/mod.rs`, `dir/main.rs` or
        // `dir.rs` beside it)
        let part_of = f
            .rsplit_once('/')
            .filter(|(d, _)| {
                stem != dir
                    && [
                        format!("{d}/mod.rs"),
                        format!("{d}/main.rs"),
                        format!("{d}.rs"),
                    ]
                    .iter()
                    .any(|m| files.contains(m))
            })
            .map(|_| dir.to_string());
        let mut found = BTreeSet::from([stem.to_string()]);
        let text = std::fs::read_to_string(root.join(f)).unwrap_or_default();
        for line in text.lines() {
            for key in [
                "fn ", "mod ", "const ", "static ", "struct ", "enum ", "trait ", "type ",
            ] {
                for (i, _) in line.match_indices(key) {
                    if i > 0 && line.as_bytes()[i - 1].is_ascii_alphanumeric() {
                        continue;
                    }
                    let name: String = line[i + key.len()..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.insert(name);
                    }
                }
            }
        }
        items
            .entry(stem.to_string())
            .or_default()
            .extend(found.iter().cloned());
        if let Some(dir) = part_of {
            items.entry(dir).or_default().extend(found);
        }
        items
            .entry(dir.to_string())
            .or_default()
            .insert(stem.to_string());
    }
    items
}

/// A heading's anchor as GitHub makes it: lower case, spaces to hyphens,
/// punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => {
                Some(c.to_lowercase().next().unwrap())
            }
            _ => None,
        })
        .collect()
}

/// Files and folders the tool writes when it runs, which documents name
/// but the repository does not hold: a run's logs and records under
/// `raw/`, runs under `runs/`, tries under `scratch/`, and the set-up's
/// environment file.
const GENERATED: [&str; 9] = [
    "raw",
    "shaping.json",
    "job.json",
    "run.json",
    "launch.txt",
    "env.sh",
    "scratch",
    "runs",
    "index.html",
];

/// What the repository holds, for [`dangling`]: its files and folders,
/// and the items of its Rust sources.
struct Repo {
    files: Vec<String>,
    dirs: Vec<String>,
    items: BTreeMap<String, BTreeSet<String>>,
}

impl Repo {
    fn new() -> Self {
        let (files, dirs) = repository_paths();
        let items = rust_items(&files);
        Repo { files, dirs, items }
    }

    /// Whether `p` is a file or folder, named in full or by its tail.
    fn exists(&self, p: &str) -> bool {
        let p = p.trim_end_matches('/');
        self.files
            .iter()
            .chain(&self.dirs)
            .any(|f| f == p || f.ends_with(&format!("/{p}")))
    }

    /// Whether the path `a::b::name` names an item: `name` defined in a
    /// module called as its last lower-case segment before it (`tests`
    /// skipped), or, where no module has that name (a crate, a type), in
    /// any module.
    fn names_item(&self, path: &str) -> bool {
        let mut segments: Vec<&str> = path.split("::").collect();
        let name = segments.pop().unwrap_or_default();
        let owner = segments
            .iter()
            .rev()
            .find(|s| **s != "tests")
            .filter(|s| s.chars().next().is_some_and(|c| c.is_ascii_lowercase()));
        match owner.and_then(|o| self.items.get(*o)) {
            Some(defined) => defined.contains(name),
            None => self.items.values().any(|d| d.contains(name)),
        }
    }
}

/// What in `text` (the document `doc`) names something that does not
/// exist: a file or folder in backticks or a link, a test or item path in
/// backticks (`module::name`), an in-page anchor, or a README section.
fn dangling(doc: &str, text: &str, repo: &Repo) -> Vec<String> {
    let mut found = dangling_quotes(doc, text, repo);
    found.extend(dangling_links(doc, text, repo));
    found.extend(dangling_sections(doc, text));
    found
}

/// Backticked paths and `module::item` paths of `text` that name nothing.
fn dangling_quotes(doc: &str, text: &str, repo: &Repo) -> Vec<String> {
    let plain = |t: &str| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_alphanumeric() || "/._-:".contains(c))
            && !t.contains("://")
    };
    let extensions = [
        ".rs", ".md", ".yaml", ".sh", ".py", ".toml", ".csv", ".json", ".txt", ".ttf", ".snap",
    ];
    let mut found = Vec::new();
    for t in quoted(text).into_iter().filter(|t| plain(t)) {
        if t.contains("::") {
            let last = t.rsplit("::").next().unwrap_or_default();
            let snake = last.chars().next().is_some_and(|c| c.is_ascii_lowercase());
            if snake && !repo.names_item(t) {
                found.push(format!("{doc}: `{t}` names no item of the workspace"));
            }
            continue;
        }
        let looks_like_path = (t.contains('/') && !t.starts_with('/') && !t.starts_with("--"))
            || extensions.iter().any(|e| t.ends_with(e));
        let generated = t.split('/').any(|c| GENERATED.contains(&c));
        if looks_like_path && !t.starts_with("results/") && !generated && !repo.exists(t) {
            found.push(format!("{doc}: `{t}` is no file or folder"));
        }
    }
    found
}

/// Links of `text` to an in-page heading or a file that do not exist.
fn dangling_links(doc: &str, text: &str, repo: &Repo) -> Vec<String> {
    let headings: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    let mut found = Vec::new();
    for (i, _) in text.match_indices("](") {
        let rest = &text[i + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = &rest[..end];
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        if let Some(a) = target.strip_prefix('#') {
            if !headings.iter().any(|h| h == a) {
                found.push(format!("{doc}: link to #{a}, no such heading"));
            }
        } else {
            let path = target.split('#').next().unwrap_or_default();
            if !path.is_empty() && !repo.exists(path) {
                found.push(format!("{doc}: link to {path}, no such file"));
            }
        }
    }
    found
}

/// `README "Section"` references of `text` to no heading of README.md.
fn dangling_sections(doc: &str, text: &str) -> Vec<String> {
    let readme = read("README.md");
    let sections: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect();
    let mut found = Vec::new();
    for (i, _) in text.match_indices("README \"") {
        let rest = &text[i + "README \"".len()..];
        let name = &rest[..rest.find('"').unwrap_or(0)];
        if !sections.contains(&name) {
            found.push(format!(
                "{doc}: README \"{name}\" is no section of README.md"
            ));
        }
    }
    found
}

/// ARCHITECTURE.md, README and REPRODUCTION.md name only what exists: every
/// path, test name, item, in-page link and README section they cite.
#[test]
fn documents_name_only_what_exists() {
    let repo = Repo::new();
    // the rule can fail
    let bad = dangling(
        "x",
        "`src/nowhere.rs`, `cli::no_such_test`, [a](#nowhere), README \"Nowhere\", \
         `health::only_cmd_names_clap`",
        &repo,
    );
    assert_eq!(bad.len(), 5, "{bad:?}");
    assert!(dangling("x", "`src/records/health.rs`, `health::judge`", &repo).is_empty());
    let mut found = Vec::new();
    for doc in ["ARCHITECTURE.md", "README.md", "REPRODUCTION.md"] {
        found.extend(dangling(doc, &read(doc), &repo));
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The `unsafe` blocks of `text` (a Rust file): the keyword followed by a
/// brace, outside comments.
fn unsafe_blocks(text: &str) -> usize {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .map(|code| code.matches("unsafe {").count())
        .sum()
}

/// ARCHITECTURE.md's "Unsafe code, by file" lists every file of the
/// workspace with an `unsafe` block and their number, and nothing else.
#[test]
fn every_unsafe_block_is_listed_by_file() {
    assert_eq!(
        unsafe_blocks("let a = unsafe { f() };\n// unsafe { no }\n"),
        1
    );
    let (files, _) = repository_paths();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found: BTreeMap<String, usize> = files
        .iter()
        .filter(|f| f.ends_with(".rs") && (f.starts_with("src/") || f.starts_with("crates/")))
        .map(|f| {
            (
                f.clone(),
                unsafe_blocks(&std::fs::read_to_string(root.join(f)).unwrap()),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    let doc = read("ARCHITECTURE.md");
    let section = doc
        .split("## Unsafe code, by file")
        .nth(1)
        .expect("ARCHITECTURE.md has a section \"Unsafe code, by file\"");
    let section = section.split("\n## ").next().unwrap_or_default();
    let listed: BTreeMap<String, usize> = section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| {
            let (path, rest) = l.split_once("`: ")?;
            let n = rest.split_whitespace().next()?.parse().ok()?;
            Some((path.to_string(), n))
        })
        .collect();
    assert!(!found.is_empty());
    assert_eq!(
        listed, found,
        "ARCHITECTURE.md lists these, the code has those"
    );
}

/// The compressor table of docs/convex.md has a row for every compressor
/// the `compressor` knob names, and none for a name it does not.
#[test]
fn every_compressor_has_a_row_in_the_convex_guide() {
    let guide = read("docs/convex.md");
    let section = guide
        .split("\n## ")
        .find(|s| s.starts_with("Compressors"))
        .expect("docs/convex.md has a section `## Compressors`");
    let rows: BTreeSet<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .filter(|name| *name != "compressor")
        .collect();
    let names: BTreeSet<&str> = repro_runlog::CompressorKind::ALL
        .iter()
        .map(|c| c.name())
        .collect();
    assert_eq!(rows, names, "docs/convex.md's compressor table");
}

/// The names of every test function of the workspace: a `fn` whose
/// attributes include `#[test]` (proptest's cases too), in any Rust file
/// of [`repository_paths`].
fn test_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for f in repository_paths().0.iter().filter(|f| f.ends_with(".rs")) {
        let mut attributed = false;
        for line in read(f).lines().map(str::trim) {
            if line == "#[test]" {
                attributed = true;
            } else if attributed && let Some(rest) = line.strip_prefix("fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
                attributed = false;
            } else if !(line.starts_with("#[") || line.starts_with("//")) {
                attributed = false;
            }
        }
    }
    names
}

/// Every invariant ARCHITECTURE.md states names a test that keeps it
/// true (a test function, as `module::name`, or a CI script that runs the
/// check); `documents_name_only_what_exists` checks that the names exist.
#[test]
fn every_invariant_names_its_test() {
    let doc = read("ARCHITECTURE.md");
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Invariants"))
        .expect("ARCHITECTURE.md has a section `## Invariants`");
    let tests = test_names();
    assert!(tests.len() > 400, "{} tests found", tests.len());
    let mut bullets: Vec<String> = Vec::new();
    for line in section.lines().skip(1) {
        if let Some(rest) = line.strip_prefix("- ") {
            bullets.push(rest.to_string());
        } else if let Some(last) = bullets.last_mut() {
            last.push(' ');
            last.push_str(line.trim());
        }
    }
    assert!(bullets.len() >= 20, "{} invariants", bullets.len());
    let untested: Vec<String> = bullets
        .iter()
        .filter(|b| {
            !quoted(b).iter().any(|q| {
                let last = q.rsplit("::").next().unwrap_or(q);
                tests.contains(last) || (q.starts_with("ci/") && q.ends_with(".sh"))
            })
        })
        .map(|b| b.chars().take(70).collect())
        .collect();
    assert!(
        untested.is_empty(),
        "invariants that name no test:\n{}",
        untested.join("\n")
    );
}
