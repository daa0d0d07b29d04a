//! tuning.md and tuning.csv: the protocol, the search's table, its figure's
//! views, the findings and their warnings.

use super::*;

/// tuning.md's paragraph on the protocol: seeds, score, choice, second
/// look.
pub(super) fn protocol(spec: &TuneSpec, final_seeds: &[String]) -> String {
    let seeds: Vec<String> = spec.seeds.iter().map(plan::text).collect();
    format!(
        "Protocol: each method tried {} configurations (the same budget for every method) from its search space; \
         each ran on the tuning seeds [{}], which the final runs (seeds [{}]) never use, and was scored by `{}` ({} is better){}, \
         the mean over its tuning seeds by intention to treat: a run whose method failed (diverged, exploded, collapsed) counts with what it achieved (its value, or the worst the metric can take where it has none: chance accuracy, or last), a run that did not test the method (silent, unfinished) is left out. \
         The best score is chosen whatever its runs' health (ties go to fewer failed runs); a setting where no run trained{}, found no working configuration and has no final runs.{} \
         The choice of each method and setting ran on the final seeds. The test set chose nothing.\n\n",
        spec.budget,
        seeds.join(", "),
        final_seeds.join(", "),
        spec.metric,
        if higher(spec) { "higher" } else { "lower" },
        match spec.validation {
            Some(v) => format!(
                " on a validation split of {}% of the training images, held out of training in every run",
                short(v * 100.0)
            ),
            None => String::new(),
        },
        if crate::records::metrics::is_accuracy(&spec.metric) && spec.chance_margin >= 0.0 {
            format!(
                ", or whose best {} is within {} of chance",
                spec.metric,
                short(spec.chance_margin)
            )
        } else {
            String::new()
        },
        match &spec.confirm {
            Some(c) => format!(
                " The best {} of each method and setting by that score then ran on the further seeds [{}], and the choice was made among them over all their seeds.",
                c.best,
                c.seeds
                    .iter()
                    .map(plan::text)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => String::new(),
        },
    )
}

/// tuning.md: the protocol in words, every configuration's score and the
/// choices.
pub(crate) fn markdown(
    m: &Manifest,
    spec: &TuneSpec,
    final_seeds: &[String],
    s: &Selection,
    refused: &[String],
    figures: &[(String, std::path::PathBuf)],
) -> String {
    let mut out = format!("# Tuning: {}\n\n", m.title);
    out.push_str(&protocol(spec, final_seeds));
    out.push_str(&spaces(spec));
    out.push_str("- every other method: untuned (its manifest settings)\n\n");
    if spec.extend {
        out.push_str(
            "`tune.extend`: a first choice at the edge of a numeric axis was tried once more one step beyond it (a grid step, geometric for positive values; a quarter of a range's span beyond its bound), on every tuning seed, the same rule for every method, and the choice made again.\n\n",
        );
    }
    out.push_str(&format!(
        "| setting | configuration | {} (mean) | runs scored | health | second look | chosen |\n|---|---|---|---|---|---|---|\n",
        spec.metric
    ));
    for t in &s.tried {
        let method = t.group.get(&spec.key).map_or("", String::as_str);
        let beyond = !configs(spec, method).iter().any(|c| c.label == t.config);
        out.push_str(&format!(
            "| {} | {}{} | {} | {}/{} | {} | {} | {} |\n",
            group_text(&t.group),
            t.config,
            if beyond { " (beyond the space)" } else { "" },
            t.score.map_or_else(|| "-".into(), number),
            t.scored,
            t.runs,
            counts_text(&t.health),
            if t.confirmed { "yes" } else { "" },
            if t.chosen { "**yes**" } else { "" }
        ));
    }
    if !figures.is_empty() {
        out.push_str(&format!(
            "\nWhat the search saw, per setting: `{}` over each tuned value (the other values as drawn), each run a dot by health (a failed run, counted, a cross), a run that wrapped past the modulus ringed, each configuration's mean a bar, the choice circled, chance a grey line.\n\n",
            spec.metric
        ));
        for (setting, path) in figures {
            out.push_str(&format!(
                "![{setting}]({})\n\n",
                path.to_string_lossy().replace('\\', "/")
            ));
        }
    }
    out.push_str(&findings(spec, s, refused));
    out
}

/// The figures' view of each setting of the search: every run of `rows`
/// (the search's runs, judged) that belongs to it, each configuration's
/// mean, and the choice, over each numeric tuned value.
pub(crate) fn views(
    spec: &TuneSpec,
    s: &Selection,
    rows: &[RunRecord],
) -> Vec<crate::report::tune_figure::SearchView> {
    use crate::report::tune_figure::{ConfigPoint, RunPoint, SearchView};
    let accuracy = crate::records::metrics::is_accuracy(&spec.metric);
    let scale = if accuracy { 100.0 } else { 1.0 };
    let values = |label: &str| -> BTreeMap<String, f64> {
        label
            .split(' ')
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_string(), v.parse::<f64>().ok()?)))
            .collect()
    };
    let mut out = Vec::new();
    for g in s.groups() {
        let method = g.get(&spec.key).map_or("", String::as_str);
        let Some(space) = spec.space.get(method) else {
            continue;
        };
        let axes: Vec<(String, bool)> = space
            .iter()
            .filter_map(|(k, a)| match a {
                Axis::Range(r) => Some((k.clone(), r.scale == AxisScale::Log)),
                Axis::Values(v) => {
                    let nums: Vec<f64> = v.iter().filter_map(numeric).collect();
                    let lo = nums.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = nums.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    (nums.len() == v.len() && !nums.is_empty())
                        .then(|| (k.clone(), lo > 0.0 && hi >= 10.0 * lo))
                }
            })
            .collect();
        let mut chance = None;
        let runs: Vec<RunPoint> = rows
            .iter()
            .filter(|r| group(&r.point) == *g)
            .filter_map(|r| {
                chance = chance.or(r.chance().filter(|_| accuracy).map(|c| c * scale));
                let value = r.counted(&spec.metric, s.higher).number()?;
                Some(RunPoint {
                    at: values(r.point.get(CONFIG_KEY)?),
                    value: value * scale,
                    health: r.health().unwrap_or(Health::Unfinished),
                    premise: r.premise(),
                })
            })
            .collect();
        let configs = s
            .tried
            .iter()
            .filter(|t| t.group == *g)
            .filter_map(|t| {
                Some(ConfigPoint {
                    at: values(&t.config),
                    mean: t.score? * scale,
                    chosen: t.chosen,
                })
            })
            .collect();
        out.push(SearchView {
            setting: group_text(g),
            y_label: if accuracy {
                format!("{} (%)", spec.metric)
            } else {
                spec.metric.clone()
            },
            axes,
            runs,
            configs,
            chance,
        });
    }
    out
}

/// Writes what a search chose and saw into `out`: its figures
/// (`tuning-figures/`), tuning.md and tuning.csv. `rows` are the
/// search's runs, judged.
pub(crate) fn write_outputs(
    m: &Manifest,
    spec: &TuneSpec,
    out: &std::path::Path,
    final_seeds: &[String],
    s: &Selection,
    refused: &[String],
    rows: &[RunRecord],
) -> Result<()> {
    let figures = crate::report::tune_figure::write(out, &views(spec, s, rows))?;
    crate::util::atomic::write(
        &out.join(Entry::Tuning.name()),
        markdown(m, spec, final_seeds, s, refused, &figures),
    )?;
    crate::util::atomic::write(&out.join(Entry::TuningCsv.name()), csv(spec, s)?)
}

/// tuning.md's list of the search spaces, what each holds and how many
/// configurations the budget tried; unequal effort is said.
pub(super) fn spaces(spec: &TuneSpec) -> String {
    let mut out = String::from("Search spaces:\n\n");
    let mut tried = BTreeMap::new();
    for (method, space) in &spec.space {
        let ranged = space.values().any(|a| matches!(a, Axis::Range(_)));
        let n = configs(spec, method).len();
        tried.insert(method.clone(), n);
        let params: Vec<String> = space
            .iter()
            .map(|(k, a)| format!("{k} in {}", a.text()))
            .collect();
        let whole: usize = space.values().map(|a| a.values().len()).product();
        out.push_str(&format!(
            "- {method}: {} ({n} configurations{})\n",
            params.join(", "),
            if ranged {
                ", drawn by the Halton sequence".to_string()
            } else if whole > spec.budget {
                format!(" of {whole}, chosen by a fixed hash of their labels")
            } else if whole < spec.budget {
                "; the whole space, under the budget".to_string()
            } else {
                String::new()
            }
        ));
    }
    let fewest = tried.values().min().copied().unwrap_or(0);
    let most = tried.values().max().copied().unwrap_or(0);
    if fewest < most {
        let under: Vec<String> = tried
            .iter()
            .filter(|(_, n)| **n < most)
            .map(|(m, n)| format!("{m} {n}"))
            .collect();
        out.push_str(&format!(
            "- warning: unequal effort: {} tried fewer than {most} configurations (a grid smaller than the budget; a range draws the whole budget)\n",
            under.join(", ")
        ));
    }
    out
}

/// What tuning.md says below its table: per setting, how many
/// configurations trained and whether a working one was found (no final
/// runs without one), and the warnings: choices at the edge of their
/// space, and settings whose best is at chance.
pub(crate) fn findings(spec: &TuneSpec, s: &Selection, refused: &[String]) -> String {
    let mut out =
        String::from("\nConfigurations in which some run trained (health ok), by setting:\n\n");
    for g in s.groups() {
        let of: Vec<&Tried> = s.tried.iter().filter(|t| t.group == *g).collect();
        let trained = of.iter().filter(|t| t.trained()).count();
        let mut health: BTreeMap<Health, usize> = BTreeMap::new();
        for t in &of {
            for (h, n) in &t.health {
                *health.entry(*h).or_default() += n;
            }
        }
        let none = s.none.iter().find(|(ng, _)| ng == g).map(|(_, why)| why);
        out.push_str(&format!(
            "- {}: {trained} of {} (runs: {}){}\n",
            group_text(g),
            of.len(),
            counts_text(&health),
            match none {
                Some(NoChoice::NoneTrained) =>
                    ": no configuration trained, so this setting has no final runs".to_string(),
                Some(NoChoice::AtChance { .. }) =>
                    ": no working configuration found (below), so this setting has no final runs"
                        .to_string(),
                None => String::new(),
            }
        ));
    }
    let warnings = warnings(spec, s, refused);
    if !warnings.is_empty() {
        out.push_str("\nWarnings, and choices at the edge of the search space:\n\n");
        out.extend(warnings);
    }
    if !refused.is_empty() {
        out.push_str("\nSteps beyond the space the plan refused:\n\n");
        for r in refused {
            out.push_str(&format!("- {r}\n"));
        }
    }
    out
}

/// tuning.md's warnings: settings at chance, choices beyond the space
/// after `extend`, and choices at the edge of a numeric axis.
pub(super) fn warnings(spec: &TuneSpec, s: &Selection, refused: &[String]) -> Vec<String> {
    let mut warnings = Vec::new();
    for (g, why) in &s.none {
        if let NoChoice::AtChance { best, chance } = why {
            warnings.push(format!(
                "- warning: {}: no working configuration found: the best {} is {}, within {} of chance ({}); its comparisons read as for a method that did not train\n",
                group_text(g),
                spec.metric,
                number(*best),
                short(spec.chance_margin),
                number(*chance)
            ));
        }
    }
    for t in s.tried.iter().filter(|t| t.chosen) {
        let method = t.group.get(&spec.key).map_or("", String::as_str);
        if !configs(spec, method).iter().any(|c| c.label == t.config) {
            warnings.push(format!(
                "- warning: {}: {} (one step beyond the space) was chosen, at the edge after `extend`: the optimum may lie further out; widen the space\n",
                group_text(&t.group),
                t.config
            ));
            continue;
        }
        for (axis, edge, beyond) in edges(spec, method, &t.config) {
            let step = format!("{axis}={}", plan::text(&beyond));
            let tried_beyond = s
                .tried
                .iter()
                .any(|u| u.group == t.group && u.config.split(' ').any(|kv| kv == step));
            // a refusal reads "{group} {config}: why"
            let refused_beyond = refused.iter().any(|r| {
                r.strip_prefix(&format!("{} ", group_text(&t.group)))
                    .and_then(|r| r.split_once(": "))
                    .is_some_and(|(config, _)| config.split(' ').any(|kv| kv == step))
            });
            warnings.push(format!(
                "- {}: {axis}={} is at the edge of its space{}\n",
                group_text(&t.group),
                plan::text(&edge),
                if tried_beyond {
                    format!(" ({step} was tried beyond it and scored worse)")
                } else if refused_beyond {
                    format!("; the step beyond it, {step}, was refused (below)")
                } else {
                    format!("; the optimum may lie beyond it (next step: {step}; `tune.extend: true` tries it)")
                }
            ));
        }
    }
    warnings
}

/// tuning.csv: one line per configuration and setting.
pub(crate) fn csv(spec: &TuneSpec, s: &Selection) -> Result<String> {
    let keys: Vec<String> = s
        .tried
        .first()
        .map(|t| t.group.keys().cloned().collect())
        .unwrap_or_default();
    let header: Vec<String> = keys
        .iter()
        .cloned()
        .chain([
            CONFIG_KEY.to_string(),
            spec.metric.clone(),
            "runs_scored".into(),
            "runs".into(),
            "health".into(),
            "confirmed".into(),
            "chosen".into(),
        ])
        .collect();
    let rows = s.tried.iter().map(|t| {
        keys.iter()
            .map(|k| t.group.get(k).cloned().unwrap_or_default())
            .chain([
                t.config.clone(),
                t.score.map(|v| v.to_string()).unwrap_or_default(),
                t.scored.to_string(),
                t.runs.to_string(),
                counts_text(&t.health),
                t.confirmed.to_string(),
                t.chosen.to_string(),
            ])
            .collect::<Vec<_>>()
    });
    csv_text(std::iter::once(header).chain(rows))
}
