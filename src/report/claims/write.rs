//! Writing the verdicts: claims.md and claims.csv, and the family's
//! verdict after Holm's adjustment.

use super::*;

/// A signed number for an effect.
pub(super) fn signed(x: f64) -> String {
    if x > 0.0 {
        format!("+{}", number(x))
    } else {
        number(x)
    }
}

pub(super) fn cell(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), number)
}

pub(super) fn p_text(p: Option<f64>) -> String {
    match p {
        None => "-".into(),
        Some(p) if p < 1e-4 => "<0.0001".into(),
        Some(p) => format!("{p:.4}"),
    }
}

/// Whether a verdict stands after Holm's adjustment: supported, with
/// the adjusted p below its level.
pub(crate) fn holds_after_holm(v: &Verdict) -> bool {
    v.outcome == Outcome::Supported && v.p_holm.is_some_and(|p| stats::below(p, v.level))
}

/// The verdict word of a family of claims (one experiment, one section
/// of the report), from the adjusted results: *reproduced* when every
/// claim holds after Holm, *not reproduced* when none does, *reproduced
/// in part* otherwise; with how many held, of how many.
pub(crate) fn family_verdict(verdicts: &[Verdict]) -> (&'static str, usize, usize) {
    let held = verdicts.iter().filter(|v| holds_after_holm(v)).count();
    let word = match held {
        0 => "not reproduced",
        h if h == verdicts.len() => "reproduced",
        _ => "reproduced in part",
    };
    (word, held, verdicts.len())
}

/// claims.md: one row per claim, the level stated, the notes below.
/// claims.md's paragraph on how every claim is tested, at the levels
/// `verdicts` use.
pub(super) fn method(verdicts: &[Verdict]) -> String {
    let mut levels: Vec<f64> = verdicts.iter().map(|v| v.level).collect();
    levels.dedup();
    let say = |f: &dyn Fn(f64) -> f64| {
        levels
            .iter()
            .map(|l| short(f(*l)))
            .collect::<Vec<_>>()
            .join("/")
    };
    format!(
        "Each claim is tested by intention to treat on every recorded run that tested the method: a run whose method failed (diverged, exploded, collapsed) counts with its recorded value, or at the worst value the metric can take where it has none (chance accuracy; last in a rank test); a run that did not test the method (silent, unfinished) is left out, and the notes name both. \
         A paired t-test where both sides ran the same seeds, Welch's t-test otherwise; exact tests for failure counts (every failure of the method counts). \
         Intervals are {}% t intervals of the method minus the baseline. \
         Verdicts at level {}: *supported* when the interval (or exact test) rules out the opposite, *contradicted* when it rules out the claim, *not supported* otherwise, *not testable* with too few runs, *no working configuration* when a side's tuning found none (no run trained, or the best score within `tune.chance_margin` of chance); \
         `within` claims are supported when the whole interval lies inside the margin (two one-sided tests). \
         Beside each p: Holm's adjustment over the family of this experiment's claims (one section of the reproduction report: each section answers one question of the paper, and its verdict below follows the adjusted results), the rank test of the same comparison (Wilcoxon signed-rank when paired, Mann-Whitney otherwise; exact), the exact permutation test of the means (where it takes at most 2^20 arrangements), *fragile* when leaving out one seed changes the verdict, and the verdict over the valid runs alone (*ok only*).\n\n",
        say(&|l| (1.0 - l) * 100.0),
        say(&|l| l)
    )
}

pub(crate) fn markdown(title: &str, verdicts: &[Verdict]) -> String {
    let mut s = format!("# Claims: {title}\n\n");
    s.push_str(&method(verdicts));
    s.push_str("| claim | test | n | method | baseline | effect [CI] | p | p (Holm) | rank test p | permutation p | fragile | ok only | verdict |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (i, v) in verdicts.iter().enumerate() {
        let n = if v.n_baseline > 0 {
            format!("{} / {}", v.n_method, v.n_baseline)
        } else {
            v.n_method.to_string()
        };
        let effect = match (v.effect, v.ci) {
            (Some(e), Some((lo, hi))) => format!("{} [{}, {}]", signed(e), number(lo), number(hi)),
            (Some(e), None) => signed(e),
            _ => "-".into(),
        };
        let claim = if v.note.is_empty() {
            v.claim.clone()
        } else {
            format!("{} ({})", v.claim, i + 1)
        };
        s.push_str(&format!(
            "| {claim} | {} | {n} | {} | {} | {effect} | {} | {} | {} | {} | {} | {} | **{}**{} |\n",
            if v.test.is_empty() { "-" } else { &v.test },
            cell(v.method_value),
            cell(v.baseline_value),
            p_text(v.p),
            p_text(v.p_holm),
            v.rank.map_or_else(|| "-".into(), |r| p_text(Some(r.p))),
            p_text(v.permutation),
            match v.fragile {
                Some(true) => "fragile",
                Some(false) => "no",
                None => "-",
            },
            match v.ok_only {
                Some(o) if o == v.outcome => "same".to_string(),
                Some(o) => format!("*{}*", o.word()),
                None => "-".into(),
            },
            v.outcome.word(),
            if v.protocol_sensitive {
                " *protocol-sensitive*"
            } else {
                ""
            }
        ));
    }
    let (word, held, of) = family_verdict(verdicts);
    s.push_str(&format!(
        "\nVerdict of this family, after Holm's adjustment: **{word}** ({held} of {of} claims supported at their level with the adjusted p).\n"
    ));
    let notes: Vec<String> = verdicts
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.note.is_empty())
        .map(|(i, v)| format!("{}. {}", i + 1, v.note))
        .collect();
    if !notes.is_empty() {
        s.push_str("\nNotes:\n\n");
        for n in notes {
            s.push_str(&n);
            s.push('\n');
        }
    }
    let sources: Vec<String> = verdicts
        .iter()
        .filter(|v| !v.source.is_empty())
        .map(|v| format!("- {}: {}", v.claim, v.source))
        .collect();
    if !sources.is_empty() {
        s.push_str("\nSources:\n\n");
        s.push_str(&sources.join("\n"));
        s.push('\n');
    }
    s
}

/// claims.csv: every field of every verdict, numbers unrounded.
pub(crate) fn csv(verdicts: &[Verdict]) -> Result<String> {
    let header = [
        "claim",
        "source",
        "test",
        "n_method",
        "n_baseline",
        "method",
        "baseline",
        "effect",
        "ci_low",
        "ci_high",
        "p",
        "p_holm",
        "rank_test",
        "p_rank",
        "p_permutation",
        "fragile",
        "ok_only",
        "level",
        "verdict",
        "protocol_sensitive",
        "note",
    ]
    .map(String::from)
    .to_vec();
    let opt = |x: Option<f64>| x.map_or_else(String::new, |x| x.to_string());
    let rows = verdicts.iter().map(|v| {
        vec![
            v.claim.clone(),
            v.source.clone(),
            v.test.clone(),
            v.n_method.to_string(),
            v.n_baseline.to_string(),
            opt(v.method_value),
            opt(v.baseline_value),
            opt(v.effect),
            opt(v.ci.map(|c| c.0)),
            opt(v.ci.map(|c| c.1)),
            opt(v.p),
            opt(v.p_holm),
            v.rank.map_or_else(String::new, |r| r.name.to_string()),
            opt(v.rank.map(|r| r.p)),
            opt(v.permutation),
            v.fragile.map_or_else(String::new, |f| f.to_string()),
            v.ok_only.map_or_else(String::new, |o| o.word().to_string()),
            v.level.to_string(),
            v.outcome.word().to_string(),
            v.protocol_sensitive.to_string(),
            v.note.clone(),
        ]
    });
    csv_text(std::iter::once(header).chain(rows))
}
