//! The record's own checks: the committed `results/` against the shipped
//! manifests and the documents. The only tests that read the committed
//! results (`architecture::only_the_record_checks_read_the_committed_results`
//! keeps it so). ci/test.sh runs them apart from the code's tests, and a
//! failure there is reported without failing CI: a rerun committed in
//! parts is inconsistent until it ends. The rerun's last commit runs
//! `cargo nextest run --test record`, which must pass.

use std::collections::BTreeMap;
use std::path::Path;

mod common;
use common::repro_json;

/// The shipped manifests' names.
fn shipped() -> Vec<String> {
    repro_json(&["list", "--json"])
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// Every committed results directory holds runs of the manifest of its
/// name, run as that manifest says (its provenance.json names it and the
/// recorded command sets no key), so the title above its table is what
/// its runs did. One directory holds another manifest's runs, as said.
#[test]
fn committed_results_are_runs_of_the_manifest_they_are_named_after() {
    // directory -> (the manifest it holds runs of, why it has another name)
    let aliases = BTreeMap::from([(
        "figure1-local",
        ("figure1", "figure1 on the in-process backend"),
    )]);
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let names = shipped();
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("results")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("provenance.json")) else {
            continue;
        };
        let p: serde_json::Value = serde_json::from_str(&text).unwrap();
        let name = dir.file_name().unwrap().to_str().unwrap();
        let experiment = p["experiment"].as_str().unwrap();
        let want = aliases.get(name).map_or(name, |(m, _)| *m);
        assert_eq!(
            experiment, want,
            "results/{name} holds runs of `{experiment}`: give them a manifest named {name} (extends: {experiment}) and rerun it"
        );
        assert!(
            names.iter().any(|n| n == want),
            "results/{name}: no manifest {want}"
        );
        let command = p["command"].as_str().unwrap_or_default();
        assert!(
            !command.contains("--set") && !command.split_whitespace().any(|w| w.contains('=')),
            "results/{name} was run with keys set on the command line ({command}): its manifest's title may not say what its runs did"
        );
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} results directories checked");
}

/// Phrases that say the committed results are being rerun.
const RERUN_UNDER_WAY: [&str; 4] = [
    "rerun in progress",
    "being rerun",
    "a rerun is under way",
    "rerun is in progress",
];

/// Phrases that say every committed result is current at this build.
const ALL_CURRENT: [&str; 3] = [
    "every result is current",
    "every committed result is current",
    "all results are current",
];

/// What in `text` contradicts `repro status`: a rerun said to be under
/// way while every result is current, or every result said current while
/// some are not.
fn contradiction(text: &str, all_current: bool) -> Option<&'static str> {
    let lower = text.to_lowercase();
    let said = |phrases: &[&'static str]| phrases.iter().copied().find(|p| lower.contains(p));
    if all_current {
        said(&RERUN_UNDER_WAY)
    } else {
        said(&ALL_CURRENT)
    }
}

/// README, REPRODUCTION.md and results/README.md say what `repro status`
/// says: no rerun under way while it calls every committed result
/// current, and not "every result is current" while some are stale or
/// missing.
#[test]
fn the_documents_say_what_status_says() {
    // the rule can fail either way
    assert_eq!(
        contradiction("**Status: a rerun in progress.**", true),
        Some("rerun in progress")
    );
    assert_eq!(
        contradiction("**Status: a rerun in progress.**", false),
        None
    );
    assert_eq!(
        contradiction("Every result is current at this build.", false),
        Some("every result is current")
    );
    assert_eq!(
        contradiction("Every result is current at this build.", true),
        None
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = repro_json(&["status", "--json"]);
    // the committed experiments: those with results at their scale
    let committed: Vec<&serde_json::Value> = status["experiments"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            let name = e["experiment"].as_str().unwrap_or_default();
            root.join("results").join(name).join("runs.csv").is_file()
        })
        .collect();
    assert!(committed.len() >= 10, "{status}");
    let all_current = committed.iter().all(|e| {
        e["counts"]["stale"].as_u64() == Some(0) && e["counts"]["missing"].as_u64() == Some(0)
    });
    for doc in ["README.md", "REPRODUCTION.md", "results/README.md"] {
        let said = contradiction(&read(doc), all_current);
        assert!(
            said.is_none(),
            "{doc} says {said:?}, but `repro status` calls {} committed result current",
            if all_current { "every" } else { "not every" }
        );
    }
}

/// REPRODUCTION.md's generated sections are what the tool generates from
/// the committed results, word for word: the report's numbers, health
/// findings, verdicts and tuning summaries come from `repro report
/// --markdown`, never from a hand edit or an older build.
#[test]
fn reproduction_sections_are_what_the_tool_generates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("REPRODUCTION.md")).unwrap();
    let open = "<!-- BEGIN generated by `repro report --markdown ";
    let mut checked = 0;
    let mut rest = text.as_str();
    while let Some(at) = rest.find(open) {
        let from = &rest[at..];
        let name: String = from[open.len()..]
            .chars()
            .take_while(|c| *c != '`')
            .collect();
        let close = format!("<!-- END generated by `repro report --markdown {name}` -->");
        let stop = from
            .find(&close)
            .unwrap_or_else(|| panic!("{name}'s section is not closed"));
        let committed = format!("{}\n", &from[..stop + close.len()]);
        let o = common::repro_cmd(&["report", "--markdown", &name])
            .output()
            .expect("run repro");
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let generated = String::from_utf8_lossy(&o.stdout);
        assert!(
            committed == generated,
            "REPRODUCTION.md's section of {name} differs from `repro report --markdown {name}` \
             (refresh it with `repro report --markdown {name} --into REPRODUCTION.md`):\n{generated}"
        );
        checked += 1;
        rest = &from[stop + close.len()..];
    }
    assert!(
        checked >= 10,
        "only {checked} generated sections in REPRODUCTION.md"
    );
}

/// Every results/*/figure.py is the template (src/report/assets/figure.py)
/// with a figure's data in place of `@SPEC@`; .gitattributes marks them
/// generated. A hand edit, or a template change the records were not
/// redrawn after, fails here. The data is JSON (`true`, `false` and `null`
/// are defined as Python names before it).
#[test]
fn committed_figure_scripts_are_the_template_around_their_data() {
    let template = read("src/report/assets/figure.py");
    let (before, after) = template
        .split_once("@SPEC@")
        .expect("the template holds @SPEC@");
    let mut checked = 0;
    for name in shipped() {
        let path = format!("results/{name}/figure.py");
        if !Path::new(env!("CARGO_MANIFEST_DIR")).join(&path).exists() {
            continue;
        }
        let text = read(&path);
        let data = text
            .strip_prefix(before)
            .and_then(|t| t.strip_suffix(after))
            .unwrap_or_else(|| panic!("{path} is not the template around its data"));
        serde_json::from_str::<serde_json::Value>(data)
            .unwrap_or_else(|e| panic!("{path}: its data is not JSON: {e}"));
        checked += 1;
    }
    assert!(checked >= 5, "{checked} scripts under results/");
}
