//! The second look: where the best configuration sits at a range's edge,
//! the space extended beyond it, and the confirming runs.

use super::*;

/// A value of a numeric axis, as a number.
pub(super) fn numeric(v: &Value) -> Option<f64> {
    v.as_f64().or_else(|| v.as_i64().map(|i| i as f64))
}

/// How far beyond a range's bound `tune.extend` steps: this share of
/// the range's span (in its scale).
pub(super) const BEYOND_RANGE: f64 = 0.25;

/// Where `config` of `method` sits at the edge of its space, with the
/// value one step beyond, per numeric axis. A grid axis of two or more
/// values: the chosen value is its smallest or largest, and the step is
/// one grid step (geometric for positive values, else arithmetic; whole
/// numbers stay whole); zero, the bound of an axis of non-negative
/// values, is no edge. A range: the chosen value is the smallest or
/// largest drawn, and the step lands a quarter of the range's span
/// beyond its bound.
pub(super) fn edges(spec: &TuneSpec, method: &str, config: &str) -> Vec<(String, Value, Value)> {
    let Some(space) = spec.space.get(method) else {
        return Vec::new();
    };
    let chosen: BTreeMap<&str, &str> = config
        .split(' ')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let mut out = Vec::new();
    for (axis, a) in space {
        let Some(at) = chosen
            .get(axis.as_str())
            .and_then(|t| t.parse::<f64>().ok())
        else {
            continue;
        };
        let found = match a {
            Axis::Values(values) => grid_edge(values, at),
            Axis::Range(r) => {
                let drawn: Vec<f64> = configs(spec, method)
                    .iter()
                    .filter_map(|c| c.set.get(axis.as_str()).and_then(numeric))
                    .collect();
                let lowest = drawn.iter().copied().fold(f64::INFINITY, f64::min);
                let highest = drawn.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let bound = match at {
                    _ if lowest == highest => None,
                    _ if at == lowest => Some(r.range[0]),
                    _ if at == highest => Some(r.range[1]),
                    _ => None,
                };
                bound.map(|b| (Value::from(at), Value::from(r.beyond(b, BEYOND_RANGE))))
            }
        };
        if let Some((edge, beyond)) = found {
            out.push((axis.clone(), edge, beyond));
        }
    }
    out
}

/// A grid axis's edge at the chosen value `at`, and the value one step
/// beyond it (see [`edges`]).
pub(super) fn grid_edge(values: &[Value], at: f64) -> Option<(Value, Value)> {
    let mut nums: Vec<f64> = values.iter().filter_map(numeric).collect();
    if nums.len() != values.len() || nums.len() < 2 {
        return None;
    }
    nums.sort_by(f64::total_cmp);
    nums.dedup();
    // zero bounds an axis of non-negative values (an unscaled
    // compressor, no momentum): nothing lies beyond it
    if nums.len() < 2 || (at == 0.0 && nums[0] >= 0.0) {
        return None;
    }
    let (edge, inner) = if at == nums[0] {
        (nums[0], nums[1])
    } else if at == nums[nums.len() - 1] {
        (nums[nums.len() - 1], nums[nums.len() - 2])
    } else {
        return None;
    };
    let mut beyond = if nums[0] > 0.0 {
        edge * (edge / inner)
    } else {
        edge + (edge - inner)
    };
    let whole = values.iter().all(|v| v.as_i64().is_some());
    beyond = if whole {
        beyond.round()
    } else {
        // four significant digits: 0.08, not 0.08000000000000002
        format!("{beyond:.3e}").parse().unwrap_or(beyond)
    };
    let value = if whole {
        Value::from(beyond as i64)
    } else {
        Value::from(beyond)
    };
    let edge_value = values
        .iter()
        .find(|v| numeric(v) == Some(edge))
        .cloned()
        .unwrap_or(Value::from(edge));
    Some((edge_value, value))
}

/// The configuration `config` of `method` with `axis` set to `value`.
pub(super) fn replaced(
    spec: &TuneSpec,
    method: &str,
    config: &str,
    axis: &str,
    value: &Value,
) -> Option<Config> {
    let base = configs_unbudgeted(spec, method)
        .into_iter()
        .find(|c| c.label == config)?;
    let mut set = base.set.clone();
    set.insert(Value::String(axis.to_string()), value.clone());
    let label = set
        .iter()
        .map(|(k, v)| format!("{}={}", plan::text(k), plan::text(v)))
        .collect::<Vec<_>>()
        .join(" ");
    Some(Config { label, set })
}

/// The runs the first choice `first` adds, and the steps beyond the
/// space the plan refused (said in words). `tune.confirm`: the best
/// `best` configurations of each setting (that trained at all) on the
/// confirm seeds. `tune.extend`: for each setting whose first choice sits
/// at the edge of a numeric axis, that configuration with the axis one
/// step beyond, on every tuning seed (the first and the confirm ones), so
/// a step beyond is judged on as many seeds as the finalists, never on
/// one seed's luck.
pub(crate) fn second_wave(
    m: &Manifest,
    spec: &TuneSpec,
    scale: &str,
    backend: Backend,
    first: &Selection,
) -> (Vec<PlannedRun>, Vec<String>) {
    let (mut runs, mut refused) = (Vec::new(), Vec::new());
    let confirm_seeds: Vec<Value> = spec
        .confirm
        .as_ref()
        .map(|c| c.seeds.clone())
        .unwrap_or_default();
    if let Some(c) = &spec.confirm {
        let finalists = first.finalists(c.best);
        let planned =
            plan::expand_configured(m, scale, backend, Limits::default(), Some(&c.seeds), &|p| {
                let g = group(p);
                let method = p.get(&spec.key).map_or("", String::as_str);
                Some(
                    configs(spec, method)
                        .into_iter()
                        .filter(|c| finalists.iter().any(|(fg, fc)| *fg == g && *fc == c.label))
                        .collect(),
                )
            });
        match planned {
            Ok(r) => runs.extend(r),
            Err(e) => refused.push(format!("the confirm runs: {e}")),
        }
    }
    if !spec.extend {
        return (runs, refused);
    }
    let every_seed: Vec<Value> = spec.seeds.iter().chain(&confirm_seeds).cloned().collect();
    for t in first.tried.iter().filter(|t| t.chosen && t.score.is_some()) {
        let method = t.group.get(&spec.key).map_or("", String::as_str);
        for (axis, _, beyond) in edges(spec, method, &t.config) {
            let Some(c) = replaced(spec, method, &t.config, &axis, &beyond) else {
                continue;
            };
            let planned = plan::expand_configured(
                m,
                scale,
                backend,
                Limits::default(),
                Some(&every_seed),
                &|p| {
                    Some(if group(p) == t.group {
                        vec![c.clone()]
                    } else {
                        Vec::new()
                    })
                },
            );
            match planned {
                Ok(r) => runs.extend(r),
                Err(e) => refused.push(format!("{} {}: {e}", group_text(&t.group), c.label)),
            }
        }
    }
    (runs, refused)
}
