//! The choice: every run's score tallied per configuration, the best
//! viable one chosen per method and group, and why the others were not.

use super::*;

/// The group a run is chosen within: its grid point without the seed and
/// the configuration (one method at one setting of the other keys).
pub(super) fn group(point: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    point
        .iter()
        .filter(|(k, _)| *k != SEED_KEY && *k != CONFIG_KEY)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One configuration's score in one group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tried {
    pub group: BTreeMap<String, String>,
    pub config: String,
    /// The metric's mean over the runs on the tuning seeds that tested
    /// the method, a failed run counted with what it achieved (intention
    /// to treat, `health::counted`); None without any.
    pub score: Option<f64>,
    /// Runs scored, and runs on the tuning seeds in all.
    pub scored: usize,
    pub runs: usize,
    /// The runs by health.
    pub health: BTreeMap<Health, usize>,
    /// Whether it ran on `tune.confirm`'s seeds too (a finalist, or a
    /// step beyond the edge): the choice is made among these where any
    /// did.
    pub confirmed: bool,
    pub chosen: bool,
}

impl Tried {
    /// Its runs whose method failed (diverged, exploded, collapsed).
    pub(crate) fn failed(&self) -> usize {
        self.health
            .iter()
            .filter(|(h, _)| h.kind() == crate::records::health::Kind::MethodFailed)
            .map(|(_, n)| n)
            .sum()
    }

    /// Whether at least one of its runs trained (health ok).
    pub(crate) fn trained(&self) -> bool {
        self.health.get(&Health::Ok).is_some_and(|n| *n > 0)
    }
}

/// Why a setting got no final runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NoChoice {
    /// Every run of every configuration failed.
    NoneTrained,
    /// The best score is within `tune.chance_margin` of chance.
    AtChance { best: f64, chance: f64 },
}

/// The search's outcome: every configuration's score, and the chosen one
/// of each group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Selection {
    pub tried: Vec<Tried>,
    /// The settings that found no working configuration, and why.
    pub none: Vec<(BTreeMap<String, String>, NoChoice)>,
    /// Whether a larger score is better.
    pub higher: bool,
}

impl Selection {
    /// The groups in the order the search first met them.
    pub(crate) fn groups(&self) -> Vec<&BTreeMap<String, String>> {
        let mut groups: Vec<&BTreeMap<String, String>> = Vec::new();
        for t in &self.tried {
            if !groups.contains(&&t.group) {
                groups.push(&t.group);
            }
        }
        groups
    }

    /// The configurations of group `g` with a score, best first: by score,
    /// ties to fewer failed runs, then in the order tried.
    pub(crate) fn ranked(&self, g: &BTreeMap<String, String>) -> Vec<&Tried> {
        let mut of: Vec<&Tried> = self
            .tried
            .iter()
            .filter(|t| &t.group == g && t.score.is_some())
            .collect();
        of.sort_by(|a, b| {
            let (sa, sb) = (a.score.unwrap_or(0.0), b.score.unwrap_or(0.0));
            let by_score = if self.higher {
                sb.total_cmp(&sa)
            } else {
                sa.total_cmp(&sb)
            };
            by_score.then(a.failed().cmp(&b.failed()))
        });
        of
    }

    /// Each group's best `k` by the scores so far (the sort of
    /// [`Self::ranked`]), in groups where some run trained: `tune.confirm`'s
    /// finalists, as (group, configuration).
    pub(crate) fn finalists(&self, k: usize) -> Vec<(BTreeMap<String, String>, String)> {
        let mut out = Vec::new();
        for g in self.groups() {
            if !self.tried.iter().any(|t| &t.group == g && t.trained()) {
                continue;
            }
            for t in self.ranked(g).into_iter().take(k) {
                out.push((g.clone(), t.config.clone()));
            }
        }
        out
    }

    /// The configuration chosen for the group of `point`: a method without
    /// a space runs untuned; a group whose configurations all failed to be
    /// valid gets none (no final runs); `None` when the search never tried
    /// the group.
    pub(crate) fn chosen_for(
        &self,
        spec: &TuneSpec,
        point: &BTreeMap<String, String>,
    ) -> Option<Vec<Config>> {
        let method = point.get(&spec.key).map_or("", String::as_str);
        if !spec.space.contains_key(method) {
            return Some(configs(spec, method));
        }
        let g = group(point);
        if !self.tried.iter().any(|t| t.group == g) {
            return None;
        }
        let Some(t) = self.tried.iter().find(|t| t.chosen && t.group == g) else {
            return Some(Vec::new());
        };
        let found: Vec<Config> = configs_unbudgeted(spec, method)
            .into_iter()
            .filter(|c| c.label == t.config)
            .collect();
        if !found.is_empty() {
            return Some(found);
        }
        // a configuration of the extension: one axis stepped beyond
        Some(
            extended_config(spec, method, &t.config)
                .into_iter()
                .collect(),
        )
    }

    /// The groups that found no working configuration: no final runs.
    pub(crate) fn unviable(&self) -> Vec<&BTreeMap<String, String>> {
        self.none.iter().map(|(g, _)| g).collect()
    }
}

/// The configuration an extension label names: the base configuration
/// whose other axes it shares, with the one it steps beyond.
pub(super) fn extended_config(spec: &TuneSpec, method: &str, label: &str) -> Option<Config> {
    let pairs: Vec<(&str, &str)> = label
        .split(' ')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    for base in configs_unbudgeted(spec, method) {
        for (axis, _, beyond) in edges(spec, method, &base.label) {
            let c = replaced(spec, method, &base.label, &axis, &beyond)?;
            let theirs: Vec<(&str, &str)> = c
                .label
                .split(' ')
                .filter_map(|kv| kv.split_once('='))
                .collect();
            if theirs == pairs {
                return Some(c);
            }
        }
    }
    None
}

/// [`select`] over the recorded runs that belong to the search `tuning`,
/// each judged by `health`: runs an earlier search left in the same
/// directory do not choose.
pub(crate) fn select_planned(
    spec: &TuneSpec,
    tuning: &[PlannedRun],
    recorded: &[RunRecord],
    health: &HealthSpec,
) -> Selection {
    select(
        spec,
        &crate::records::results::planned(recorded, tuning, health),
    )
}

/// Chooses each group's configuration from the tuning runs: the best
/// mean of the metric over its tuning seeds by intention to treat (a
/// failed run counts with what it achieved, a run that did not test the
/// method is left out), whatever its runs' health; ties go to fewer
/// failed runs, then to the first tried. Where some configurations ran on
/// `tune.confirm`'s seeds, the choice is among those, over all their
/// seeds. A group gets no choice when no run of it trained, or when its
/// best score on an accuracy is within `tune.chance_margin` of chance.
pub(crate) fn select(spec: &TuneSpec, rows: &[RunRecord]) -> Selection {
    let (tried, chance) = tally(spec, rows);
    let mut s = Selection {
        tried,
        none: Vec::new(),
        higher: higher(spec),
    };
    let accuracy = crate::records::metrics::is_accuracy(&spec.metric);
    for g in s.groups().into_iter().cloned().collect::<Vec<_>>() {
        if !s.tried.iter().any(|t| t.group == g && t.trained()) {
            s.none.push((g, NoChoice::NoneTrained));
            continue;
        }
        let any_confirmed = s.tried.iter().any(|t| t.group == g && t.confirmed);
        let best = s
            .ranked(&g)
            .into_iter()
            .find(|t| t.confirmed || !any_confirmed)
            .map(|t| (t.config.clone(), t.score.unwrap_or(f64::NAN)));
        let Some((config, score)) = best else {
            s.none.push((g, NoChoice::NoneTrained));
            continue;
        };
        if let Some(c) = chance.get(&g).filter(|_| accuracy)
            && score <= c + spec.chance_margin
        {
            let why = NoChoice::AtChance {
                best: score,
                chance: *c,
            };
            s.none.push((g, why));
            continue;
        }
        if let Some(t) = s
            .tried
            .iter_mut()
            .find(|t| t.group == g && t.config == config)
        {
            t.chosen = true;
        }
    }
    s
}

/// Each configuration's score and runs by health, in the order the rows
/// first name them (none chosen yet), and each group's chance accuracy.
pub(super) type Tally = (Vec<Tried>, BTreeMap<BTreeMap<String, String>, f64>);

/// The rows counted per (group, configuration): see [`Tally`].
pub(super) fn tally(spec: &TuneSpec, rows: &[RunRecord]) -> Tally {
    let higher = higher(spec);
    let confirm_seeds: Vec<String> = spec
        .confirm
        .iter()
        .flat_map(|c| c.seeds.iter().map(plan::text))
        .collect();
    // (group, config) -> (the scored values, the runs by health, confirmed)
    type Key = (BTreeMap<String, String>, String);
    type Acc = (Vec<f64>, BTreeMap<Health, usize>, bool);
    let mut by: BTreeMap<Key, Acc> = BTreeMap::new();
    let mut order: Vec<Key> = Vec::new();
    let mut chance: BTreeMap<BTreeMap<String, String>, f64> = BTreeMap::new();
    for r in rows {
        let Some(config) = r.point.get(CONFIG_KEY) else {
            continue;
        };
        let k = (group(&r.point), config.clone());
        if !by.contains_key(&k) {
            order.push(k.clone());
        }
        if let Some(c) = r.chance() {
            chance.insert(k.0.clone(), c);
        }
        let e = by.entry(k).or_default();
        *e.1.entry(r.health().unwrap_or(Health::Unfinished))
            .or_default() += 1;
        if r.point
            .get(SEED_KEY)
            .is_some_and(|s| confirm_seeds.contains(s))
        {
            e.2 = true;
        }
        if let Some(v) = r.counted(&spec.metric, higher).number() {
            e.0.push(v);
        }
    }
    let tried = order
        .iter()
        .map(|k| {
            let (values, health, confirmed) = &by[k];
            let score =
                (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64);
            Tried {
                group: k.0.clone(),
                config: k.1.clone(),
                score,
                scored: values.len(),
                runs: health.values().sum(),
                health: health.clone(),
                confirmed: *confirmed,
                chosen: false,
            }
        })
        .collect();
    (tried, chance)
}

/// A setting as `key=value` pairs: "bits=1 method=moniqua".
pub(crate) fn group_text(g: &BTreeMap<String, String>) -> String {
    g.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The seeds of the final runs `grid`, sorted, once each: what tuning.md
/// says the tuning seeds are kept apart from.
pub(crate) fn final_seeds(grid: &[PlannedRun]) -> Vec<String> {
    let mut seeds: Vec<String> = grid
        .iter()
        .filter_map(|r| r.point.get(SEED_KEY).cloned())
        .collect();
    seeds.sort();
    seeds.dedup();
    seeds
}
