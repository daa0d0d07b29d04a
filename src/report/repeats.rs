//! Repeated runs of a whole experiment: `results/<name>/repeats/<k>/`, each
//! a results directory of the same plan, run again (`repro run <name>
//! --out results/<name>/repeats/<k>`). A claim whose verdict changes
//! between runs of one build is not reproduced by any one of them; the
//! report says how often each claim held.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::experiment::manifest::Manifest;
use crate::records::metrics::Cell;
use crate::records::results::RunRecord;
use crate::records::results_dir::Entry;
use crate::report::claims::{Outcome, Verdict, holds_after_holm};

/// The folder of a results directory that holds its repeats.
pub(crate) const REPEATS: &str = "repeats";

/// One repeat: its directory, its recorded runs of the plan (health
/// judged) and the verdicts of the experiment's claims on them, in the
/// manifest's order.
pub(crate) struct Repeat {
    pub dir: PathBuf,
    pub rows: Vec<RunRecord>,
    pub verdicts: Vec<Verdict>,
}

impl Repeat {
    /// The repeat in `dir`, its claims judged as the record's are.
    pub(crate) fn judged(m: &Manifest, dir: PathBuf, rows: Vec<RunRecord>) -> Result<Repeat> {
        let verdicts = crate::report::outputs::verdicts(m, &dir, &rows, None)?;
        Ok(Repeat {
            dir,
            rows,
            verdicts,
        })
    }
}

/// The results directories under `out/repeats/` (those with a runs.csv),
/// by name.
pub(crate) fn dirs(out: &Path) -> Result<Vec<PathBuf>> {
    let root = out.join(REPEATS);
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in
        std::fs::read_dir(&root).with_context(|| format!("could not list {}", root.display()))?
    {
        let path = entry?.path();
        if path.join(Entry::Runs.name()).is_file() {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// The builds (`source`) the runs were made by.
fn sources<'a>(rows: impl Iterator<Item = &'a RunRecord>) -> BTreeSet<String> {
    rows.filter_map(|r| r.metrics.get("source").map(Cell::text))
        .filter(|s| !s.is_empty())
        .map(|s| s.get(..8).unwrap_or(s).to_string())
        .collect()
}

/// The paragraph on repeated runs: each claim's verdict in the record and
/// in each repeat, and how often it was supported, at its level and after
/// Holm's adjustment within each run. `record` and each repeat's
/// verdicts are those of the same claims, in order.
pub(crate) fn paragraph(
    record: &[Verdict],
    record_rows: &[RunRecord],
    repeats: &[Repeat],
) -> String {
    let names: Vec<String> = repeats
        .iter()
        .map(|r| {
            r.dir
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().to_string())
        })
        .collect();
    let builds = sources(
        record_rows
            .iter()
            .chain(repeats.iter().flat_map(|r| r.rows.iter())),
    );
    let builds = match builds.len() {
        0 => "builds not recorded".to_string(),
        1 => format!(
            "one build, {}",
            builds.iter().next().unwrap_or(&String::new())
        ),
        _ => format!(
            "several builds ({}): not one build's spread",
            builds.into_iter().collect::<Vec<_>>().join(", ")
        ),
    };
    let total = repeats.len() + 1;
    let mut s = format!(
        "\n**Repeated runs.** The whole experiment ran {} more time{} ({builds}; `{}/`: {}), each judged as the record. How often each claim held:\n\n",
        repeats.len(),
        if repeats.len() == 1 { "" } else { "s" },
        REPEATS,
        names.join(", ")
    );
    s.push_str(
        "| claim | the record | each repeat | supported | after Holm |\n|---|---|---|---|---|\n",
    );
    let mut unstable = 0;
    for (i, v) in record.iter().enumerate() {
        let others: Vec<&Verdict> = repeats.iter().filter_map(|r| r.verdicts.get(i)).collect();
        let all: Vec<&Verdict> = std::iter::once(v).chain(others.iter().copied()).collect();
        let supported = all
            .iter()
            .filter(|x| x.outcome == Outcome::Supported)
            .count();
        let held = all.iter().filter(|x| holds_after_holm(x)).count();
        if supported != 0 && supported != all.len() {
            unstable += 1;
        }
        s.push_str(&format!(
            "| {} ({}) | {} | {} | {supported} of {total} | {held} of {total} |\n",
            v.claim,
            i + 1,
            v.outcome.word(),
            others
                .iter()
                .map(|x| x.outcome.word())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    s.push_str(&match unstable {
        0 => "\nEvery claim got the same verdict in every run.\n".to_string(),
        k => format!(
            "\n{k} claim{} supported in some runs and not in others: unstable, so no single run reproduces {}.\n",
            if k == 1 { " was" } else { "s were" },
            if k == 1 { "it" } else { "them" }
        ),
    });
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(claim: &str, outcome: Outcome, p_holm: f64) -> Verdict {
        Verdict {
            claim: claim.into(),
            source: String::new(),
            test: "paired t".into(),
            n_method: 10,
            n_baseline: 10,
            method_value: None,
            baseline_value: None,
            effect: None,
            ci: None,
            p: Some(p_holm),
            p_holm: Some(p_holm),
            rank: None,
            permutation: None,
            ok_only: None,
            fragile: None,
            protocol_sensitive: false,
            level: 0.05,
            outcome,
            note: String::new(),
        }
    }

    #[test]
    fn a_claim_whose_verdict_changes_between_runs_is_counted_unstable() {
        let record = vec![
            verdict("a is faster", Outcome::Supported, 0.001),
            verdict("b is faster", Outcome::Supported, 0.01),
        ];
        let each = [
            vec![
                verdict("a is faster", Outcome::Supported, 0.002),
                verdict("b is faster", Outcome::Contradicted, 0.9),
            ],
            vec![
                verdict("a is faster", Outcome::Supported, 0.003),
                // supported at its level, not after Holm
                verdict("b is faster", Outcome::Supported, 0.07),
            ],
        ];
        let repeats = |take: usize| -> Vec<Repeat> {
            ["2", "3"]
                .iter()
                .zip(&each)
                .map(|(k, vs)| Repeat {
                    dir: PathBuf::from("r/repeats").join(k),
                    rows: Vec::new(),
                    verdicts: vs[..take].to_vec(),
                })
                .collect()
        };
        let text = paragraph(&record, &[], &repeats(2));
        assert!(text.contains("ran 2 more times (builds not recorded; `repeats/`: 2, 3)"));
        assert!(
            text.contains(
                "| a is faster (1) | supported | supported, supported | 3 of 3 | 3 of 3 |"
            )
        );
        assert!(text.contains(
            "| b is faster (2) | supported | contradicted, supported | 2 of 3 | 1 of 3 |"
        ));
        assert!(text.contains("1 claim was supported in some runs and not in others: unstable"));
        // the same verdicts everywhere: nothing unstable
        let same = paragraph(&record[..1], &[], &repeats(1));
        assert!(same.contains("Every claim got the same verdict in every run."));
    }

    #[test]
    fn repeats_are_the_folders_with_runs_under_repeats() {
        let dir = std::env::temp_dir().join(format!("repro-repeats-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert!(dirs(&dir).unwrap().is_empty());
        for k in ["3", "2", "empty"] {
            std::fs::create_dir_all(dir.join(REPEATS).join(k)).unwrap();
        }
        for k in ["3", "2"] {
            std::fs::write(dir.join(REPEATS).join(k).join("runs.csv"), "run_id\n").unwrap();
        }
        let found = dirs(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found, vec![dir.join("repeats/2"), dir.join("repeats/3")]);
    }
}
