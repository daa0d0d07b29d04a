//! The tuning protocol of a manifest's `tune` section. Every method gets
//! the same budget of configurations from its search space; each runs on
//! tuning seeds that the final grid never uses and is scored by a
//! validation metric (never a test-set one); the best configuration of
//! each method (per setting of the other grid keys) then runs on the
//! grid's seeds. `tuning.md` and `tuning.csv` record the search, the
//! choice and why.

use std::collections::BTreeMap;

use anyhow::Result;
use yaml_serde::{Mapping, Value};

use crate::experiment::manifest::{Axis, AxisScale, Backend, HealthSpec, Manifest, TuneSpec};
use crate::experiment::plan::{self, CONFIG_KEY, Config, Limits, PlannedRun, SEED_KEY};
use crate::records::health::{Health, counts_text};
use crate::records::metrics::{Kind, METRICS, kind};
use crate::records::results::{RunRecord, csv_text};
use crate::records::results_dir::Entry;
use crate::report::table::{number, short};

mod check;
mod extend;
mod select;
mod write;
pub(crate) use check::*;
pub(crate) use extend::*;
pub(crate) use select::*;
pub(crate) use write::*;

/// The configurations method `method` is tried in (a config's label is
/// its `key=value` pairs): with a range in its space, `budget` points
/// drawn by the Halton sequence ([`sampled`]); a grid of values alone,
/// its cartesian product cut to the budget by a fixed pseudo-random
/// choice (the order of the labels' hashes); "untuned" alone for a method
/// without a space.
pub(crate) fn configs(spec: &TuneSpec, method: &str) -> Vec<Config> {
    let mut configs = configs_unbudgeted(spec, method);
    if configs.len() > spec.budget {
        configs.sort_by_key(|c| xxhash_rust::xxh3::xxh3_64(c.label.as_bytes()));
        configs.truncate(spec.budget);
        configs.sort_by(|a, b| a.label.cmp(&b.label));
    }
    configs
}

/// Every configuration of `method`'s space ("untuned" alone without one):
/// a grid's whole cartesian product, or a range's draws.
fn configs_unbudgeted(spec: &TuneSpec, method: &str) -> Vec<Config> {
    let Some(space) = spec.space.get(method) else {
        return vec![Config {
            label: "untuned".into(),
            set: Mapping::new(),
        }];
    };
    if space.values().any(|a| matches!(a, Axis::Range(_))) {
        return sampled(space, spec.budget);
    }
    let mut all: Vec<Vec<(String, Value)>> = vec![Vec::new()];
    for (k, axis) in space {
        all = all
            .into_iter()
            .flat_map(|c| {
                axis.values().iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((k.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    all.into_iter().map(config_of).collect()
}

/// The configuration of `pairs`, labelled by them in order.
fn config_of(pairs: Vec<(String, Value)>) -> Config {
    Config {
        label: pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", plan::text(v)))
            .collect::<Vec<_>>()
            .join(" "),
        set: pairs
            .into_iter()
            .map(|(k, v)| (Value::String(k), v))
            .collect(),
    }
}

/// The first primes: the Halton sequence's base for each axis of a
/// space, in the space's order.
const HALTON_BASES: [u64; 8] = [2, 3, 5, 7, 11, 13, 17, 19];

/// The most axes a space with a range may have.
pub(crate) const MAX_AXES: usize = HALTON_BASES.len();

/// Point `index` (from 1) of the Halton sequence in base `base`: the
/// radical inverse of `index`, a share in (0, 1).
pub(crate) fn halton(index: u64, base: u64) -> f64 {
    let (mut share, mut inverse, mut i) = (1.0, 0.0, index);
    while i > 0 {
        share /= base as f64;
        inverse += share * (i % base) as f64;
        i /= base;
    }
    inverse
}

/// `n` configurations of a space with a range: points 1..=n of the
/// Halton sequence, one prime base per axis in the space's order, each
/// share mapped onto its axis (a range in its scale, a list of values by
/// index). Deterministic, and the same points for every method: equal
/// coverage for equal budgets. Two draws that round to the same label are
/// kept once.
fn sampled(space: &std::collections::BTreeMap<String, Axis>, n: usize) -> Vec<Config> {
    let mut out: Vec<Config> = Vec::new();
    for i in 1..=n as u64 {
        let pairs: Vec<(String, Value)> = space
            .iter()
            .zip(HALTON_BASES)
            .map(|((k, axis), base)| {
                let u = halton(i, base);
                let v = match axis {
                    Axis::Range(r) => Value::from(r.at(u)),
                    Axis::Values(values) => {
                        let at = ((u * values.len() as f64) as usize).min(values.len() - 1);
                        values[at].clone()
                    }
                };
                (k.clone(), v)
            })
            .collect();
        let c = config_of(pairs);
        if !out.iter().any(|o| o.label == c.label) {
            out.push(c);
        }
    }
    out
}

/// The tuning runs: every grid point of a method with a search space, on
/// the tuning seeds, once per configuration.
pub(crate) fn tuning_runs(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    limits: Limits,
) -> Result<Vec<PlannedRun>, crate::experiment::errors::DriverError> {
    let runs = plan::expand_configured(m, scale, backend, limits, Some(&spec.seeds), &|p| {
        Some(configs(spec, p.get(&spec.key).map_or("", String::as_str)))
    })?;
    Ok(runs
        .into_iter()
        .filter(|r| {
            r.point
                .get(&spec.key)
                .is_some_and(|method| spec.space.contains_key(method))
        })
        .collect())
}

/// The runs `m` plans at `scale` for `backend` with its results in `out`:
/// a tuned experiment's follow from its recorded tuning
/// ([`final_runs`]), any other's from its grid. What `repro status`,
/// `repro table` and `repro plot` hold recorded runs against.
pub(crate) fn recorded_plan(
    m: &Manifest,
    scale: &str,
    backend: Backend,
    out: &std::path::Path,
) -> Result<Vec<PlannedRun>> {
    match &m.tune {
        Some(spec) => final_runs(m, spec, scale, backend, out),
        None => Ok(plan::expand(m, scale, backend)?),
    }
}

/// The grid's runs as a tuned experiment runs them: each method with the
/// configuration its tuning runs recorded in `out/tuning/runs.csv` choose
/// (none recorded: its first configuration, which `repro status` then
/// reports missing). The tuning runs of this plan only count.
pub(crate) fn final_runs(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    out: &std::path::Path,
) -> Result<Vec<PlannedRun>> {
    let csv = out.join(Entry::TuningDir.name()).join(Entry::Runs.name());
    let recorded = if csv.is_file() {
        crate::records::results::read_csv(&csv)?
    } else {
        Vec::new()
    };
    let (_, selection, _) = search(m, spec, scale, backend, &recorded)?;
    Ok(plan::expand_configured(
        m,
        scale,
        backend,
        Limits::default(),
        None,
        &|p| {
            Some(selection.chosen_for(spec, p).unwrap_or_else(|| {
                configs(spec, p.get(&spec.key).map_or("", String::as_str))
                    .into_iter()
                    .take(1)
                    .collect()
            }))
        },
    )?)
}

/// The whole search as `recorded` holds it: the tuning runs (with the
/// second wave the first choice asks for: `tune.confirm`'s finalists on
/// their seeds, and under `tune.extend` the steps beyond an edge), the
/// choice among them, and the steps beyond the space the plan refused.
pub(crate) fn search(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    recorded: &[RunRecord],
) -> Result<(Vec<PlannedRun>, Selection, Vec<String>)> {
    let mut tuning = tuning_runs(m, spec, scale, backend, Limits::default())?;
    let first = select_planned(spec, &tuning, recorded, &m.health);
    let (extra, refused) = second_wave(m, spec, scale, backend, &first);
    if extra.is_empty() {
        return Ok((tuning, first, refused));
    }
    tuning.extend(extra);
    let selection = select_planned(spec, &tuning, recorded, &m.health);
    Ok((tuning, selection, refused))
}

/// A recorded search as claims read it: the choice and every tuning run,
/// judged.
#[derive(Debug, Clone)]
pub(crate) struct TuningRecord {
    pub selection: Selection,
    pub runs: Vec<RunRecord>,
    /// How many configurations of each side a protocol check compares:
    /// `tune.confirm.best`, else 3.
    pub best: usize,
    /// The tuning directory, whose raw/ logs hold the runs' curves where
    /// they were kept (a time-to-target check reads them).
    pub dir: Option<std::path::PathBuf>,
}

impl TuningRecord {
    /// A search recorded as `rows` (its runs, judged) chose `selection`.
    pub(crate) fn new(spec: &TuneSpec, selection: Selection, rows: Vec<RunRecord>) -> Self {
        TuningRecord {
            selection,
            runs: rows,
            best: spec.confirm.as_ref().map_or(3, |c| c.best),
            dir: None,
        }
    }

    /// The record with its runs' logs under `dir` (the tuning directory).
    pub(crate) fn in_dir(mut self, dir: std::path::PathBuf) -> Self {
        self.dir = Some(dir);
        self
    }

    /// The runs of the settings that found no working configuration:
    /// what a claim decides from in their place.
    pub(crate) fn unworking(&self) -> Vec<RunRecord> {
        let none = self.selection.unviable();
        self.runs
            .iter()
            .filter(|r| none.contains(&&group(&r.point)))
            .cloned()
            .collect()
    }

    /// The best `self.best` configurations of the one setting whose runs
    /// `wanted` selects, by the search's score, each with its runs; empty
    /// when the runs span no setting or several.
    pub(crate) fn best_of(
        &self,
        wanted: &dyn Fn(&RunRecord) -> bool,
    ) -> Vec<(String, Vec<&RunRecord>)> {
        let runs: Vec<&RunRecord> = self.runs.iter().filter(|r| wanted(r)).collect();
        let mut groups: Vec<BTreeMap<String, String>> =
            runs.iter().map(|r| group(&r.point)).collect();
        groups.sort();
        groups.dedup();
        let [g] = groups.as_slice() else {
            return Vec::new();
        };
        self.selection
            .ranked(g)
            .into_iter()
            .take(self.best)
            .map(|t| {
                let of: Vec<&RunRecord> = runs
                    .iter()
                    .filter(|r| r.point.get(CONFIG_KEY) == Some(&t.config))
                    .copied()
                    .collect();
                (t.config.clone(), of)
            })
            .collect()
    }
}

/// The search recorded in `out/tuning/runs.csv` for `m` at `scale` on
/// `backend` (none without a search or a record): what claims read.
pub(crate) fn recorded_tuning(
    m: &Manifest,
    scale: &str,
    backend: Backend,
    out: &std::path::Path,
) -> Result<Option<TuningRecord>> {
    let csv = out.join(Entry::TuningDir.name()).join(Entry::Runs.name());
    let Some(spec) = m.tune.as_ref().filter(|_| csv.is_file()) else {
        return Ok(None);
    };
    let recorded = crate::records::results::read_csv(&csv)?;
    let (tuning, selection, _) = search(m, spec, scale, backend, &recorded)?;
    let judged = crate::records::results::planned(&recorded, &tuning, &m.health);
    let dir = out.join(Entry::TuningDir.name());
    Ok(Some(TuningRecord::new(spec, selection, judged).in_dir(dir)))
}

#[cfg(test)]
mod tests;
