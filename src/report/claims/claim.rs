//! What a claim says: its kind and sides from the manifest's `claims`,
//! checked against the grid before anything runs.

use super::*;

/// What a claim says, resolved from its spec.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    /// The method's metric is better than the baseline's.
    Better,
    /// The method's metric is within the margin of the baseline's.
    Within(f64),
    /// The method diverges in more than `rate` of its runs (or, with a
    /// baseline, more often than it).
    Diverges { rate: f64 },
    /// The method's curve of `metric` reaches `target` at a smaller `by`
    /// than the baseline's.
    FasterTo {
        metric: String,
        target: f64,
        by: String,
    },
}

/// A claim, checked: what it compares.
#[derive(Debug, Clone)]
pub(super) struct Claim<'a> {
    pub(super) spec: &'a ClaimSpec,
    pub(super) kind: Kind,
    pub(super) method: String,
    pub(super) baseline: Option<String>,
    /// `better`, `within`: the runs.csv column compared.
    pub(super) metric: Option<String>,
    /// A larger value of the metric is better.
    pub(super) higher: bool,
    pub(super) scale: f64,
}

/// `v`, or a claim error naming `field` as missing.
pub(super) fn need(field: &str, v: &Option<String>) -> Result<String, (String, String)> {
    v.clone()
        .ok_or_else(|| (field.to_string(), "missing: name the method".to_string()))
}

/// The claim's `metric`: a numeric column of runs.csv.
pub(super) fn numeric_metric(spec: &ClaimSpec) -> Result<String, (String, String)> {
    let m = spec.metric.clone().ok_or_else(|| {
        (
            "metric".to_string(),
            "missing: name a column of runs.csv".to_string(),
        )
    })?;
    if !METRICS.contains(&m.as_str()) || kind(&m) == Column::Text {
        return Err((
            "metric".into(),
            format!(
                "`{m}` is not a numeric run metric; use one of {}",
                METRICS
                    .iter()
                    .filter(|m| kind(m) != Column::Text)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(m)
}

/// A `faster_to` claim's kind: one curve metric, its target, and the x
/// it is timed by.
pub(super) fn faster_to(spec: &ClaimSpec) -> Result<Kind, (String, String)> {
    let err = |k: &str, m: String| Err((k.to_string(), m));
    let targets = spec.faster_to.as_ref().expect("one kind");
    let Some((metric, target)) = targets.iter().next().filter(|_| targets.len() == 1) else {
        return err(
            "faster_to",
            "give one metric and its target: `{train_loss: 0.6}`".into(),
        );
    };
    if !CURVE_METRICS.contains(&metric.as_str()) {
        return err(
            &format!("faster_to.{metric}"),
            format!(
                "not a curve metric; use one of {}",
                CURVE_METRICS.join(", ")
            ),
        );
    }
    let by = spec.by.clone().unwrap_or_else(|| "wall_s".into());
    if !crate::report::plot::CURVE_X.contains(&by.as_str()) {
        return err(
            "by",
            format!(
                "`{by}` is not one of {}",
                crate::report::plot::CURVE_X.join(", ")
            ),
        );
    }
    Ok(Kind::FasterTo {
        metric: metric.clone(),
        target: *target,
        by,
    })
}

impl<'a> Claim<'a> {
    /// The claim `spec` says, or the manifest path of what is wrong in it
    /// (relative to the claim) and why.
    pub(super) fn resolve(
        spec: &'a ClaimSpec,
        table: &TableSpec,
    ) -> Result<Self, (String, String)> {
        let err = |k: &str, m: String| Err((k.to_string(), m));
        let kinds = [
            spec.better.is_some(),
            spec.within.is_some(),
            spec.diverges.is_some(),
            spec.faster_to.is_some(),
        ];
        if kinds.iter().filter(|k| **k).count() != 1 {
            return err(
                "",
                "say exactly one of `better`, `within`, `diverges`, `faster_to`".into(),
            );
        }
        if !(spec.level > 0.0 && spec.level < 0.5) {
            return err("level", format!("{} is not in (0, 0.5)", spec.level));
        }
        let (kind, method, baseline, metric) = if let Some(m) = &spec.better {
            (
                Kind::Better,
                m.clone(),
                Some(need("than", &spec.than)?),
                Some(numeric_metric(spec)?),
            )
        } else if let Some(margin) = spec.within {
            if !(margin > 0.0 && margin.is_finite()) {
                return err("within", format!("{margin} is not a positive margin"));
            }
            (
                Kind::Within(margin),
                need("method", &spec.method)?,
                Some(need("of", &spec.of)?),
                Some(numeric_metric(spec)?),
            )
        } else if let Some(m) = &spec.diverges {
            let rate = spec.rate.unwrap_or(0.5);
            if !(rate > 0.0 && rate < 1.0) {
                return err("rate", format!("{rate} is not in (0, 1)"));
            }
            (Kind::Diverges { rate }, m.clone(), spec.than.clone(), None)
        } else {
            (
                faster_to(spec)?,
                need("method", &spec.method)?,
                Some(need("than", &spec.than)?),
                None,
            )
        };
        let named = metric.clone().or_else(|| match &kind {
            Kind::FasterTo { metric, .. } => Some(metric.clone()),
            _ => None,
        });
        let higher = spec.higher_is_better.unwrap_or_else(|| {
            named
                .as_deref()
                .is_some_and(crate::report::table::higher_is_better)
        });
        let scale = match &metric {
            Some(m) if *m == table.value && spec.scale.is_none() => {
                crate::report::table::factor(table.scale, m)
            }
            Some(m) => crate::report::table::factor(spec.scale, m),
            None => spec.scale.unwrap_or(1.0),
        };
        Ok(Self {
            spec,
            kind,
            method,
            baseline,
            metric,
            higher,
            scale,
        })
    }

    /// The grid values that select the method's runs (`by_baseline`:
    /// the baseline's).
    pub(super) fn selection(&self, by_baseline: bool) -> BTreeMap<String, String> {
        let mut s: BTreeMap<String, String> = self
            .spec
            .select
            .iter()
            .map(|(k, v)| (k.clone(), plan::text(v)))
            .collect();
        if by_baseline {
            for (k, v) in &self.spec.baseline_where {
                s.insert(k.clone(), plan::text(v));
            }
        }
        let name = if by_baseline {
            self.baseline.clone().unwrap_or_default()
        } else {
            self.method.clone()
        };
        s.insert(self.spec.key.clone(), name);
        s
    }

    /// The claim in words.
    pub(super) fn text(&self) -> String {
        if let Some(t) = &self.spec.claim {
            return t.clone();
        }
        let base = self.baseline.as_deref().unwrap_or("");
        let said = match &self.kind {
            Kind::Better => format!(
                "{} has a {} {} than {base}",
                self.method,
                if self.higher { "higher" } else { "lower" },
                self.metric.as_deref().unwrap_or("")
            ),
            Kind::Within(m) => format!(
                "{}'s {} is within {} of {base}'s",
                self.method,
                self.metric.as_deref().unwrap_or(""),
                short(*m)
            ),
            Kind::Diverges { rate } => match &self.baseline {
                Some(b) => format!("{} diverges more often than {b}", self.method),
                None => format!(
                    "{} diverges in more than {}% of runs",
                    self.method,
                    short(rate * 100.0)
                ),
            },
            Kind::FasterTo { metric, target, by } => format!(
                "{} reaches {metric} {} {} at a smaller {by} than {base}",
                self.method,
                if self.higher { ">=" } else { "<=" },
                short(*target)
            ),
        };
        let show = |m: &BTreeMap<String, String>| {
            m.iter()
                .filter(|(k, _)| **k != self.spec.key)
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (mine, theirs) = (show(&self.selection(false)), show(&self.selection(true)));
        match (mine.is_empty(), mine == theirs || self.baseline.is_none()) {
            (true, true) => said,
            (false, true) => format!("{said} ({mine})"),
            (_, false) => format!(
                "{said} ({}: {}; {base}: {theirs})",
                self.method,
                if mine.is_empty() { "all" } else { &mine }
            ),
        }
    }
}

/// Whether a run's grid point matches every entry of `selection`.
pub(super) fn matches(
    point: &BTreeMap<String, String>,
    selection: &BTreeMap<String, String>,
) -> bool {
    selection.iter().all(|(k, v)| point.get(k) == Some(v))
}

/// One side of a claim (the method's, or with `by_baseline` the
/// baseline's) names a known method, and selects runs that differ only in
/// their seed; the error's key is relative to the claim.
pub(super) fn check_side(
    spec: &ClaimSpec,
    claim: &Claim<'_>,
    by_baseline: bool,
    points: &[BTreeMap<String, String>],
    keys: &[&String],
) -> Result<(), (&'static str, String)> {
    let selection = claim.selection(by_baseline);
    let name = &selection[&spec.key];
    // a name that is no method is a typo: with `algorithm` as the
    // key, any algorithm the suite knows is fine (a subset rerun may
    // plan none of its runs)
    let known = if spec.key == "algorithm" {
        repro_algos::ALGORITHM_NAMES
            .iter()
            .chain(&repro_algos::ASYNC_ALGORITHM_NAMES)
            .any(|a| a == name)
    } else {
        points.iter().any(|p| p.get(&spec.key) == Some(name))
    };
    if !known {
        return Err((
            "",
            format!("`{name}` is no value of grid key `{}`", spec.key),
        ));
    }
    // the runs selected may differ in their seed only
    let chosen: Vec<&BTreeMap<String, String>> =
        points.iter().filter(|p| matches(p, &selection)).collect();
    for k in keys.iter().filter(|k| k.as_str() != SEED_KEY) {
        let mut values: Vec<&str> = chosen
            .iter()
            .map(|p| p.get(*k).map_or("", String::as_str))
            .collect();
        values.sort_unstable();
        values.dedup();
        if values.len() > 1 {
            return Err((
                if by_baseline && claim.baseline.is_some() {
                    "baseline_where"
                } else {
                    "where"
                },
                format!(
                    "the runs of `{name}` it selects differ in `{k}` ({}): fix `{k}` in `where`",
                    values.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// The first value of a restricted grid key that `spec` reads and
/// `kept` does not hold (`kept`: each restricted key's remaining
/// values), as `key=value`; None where it reads only what is kept, or
/// where it does not resolve (the plan-time check says why).
pub(crate) fn reads_left_out(
    spec: &ClaimSpec,
    table: &TableSpec,
    kept: &BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Option<String> {
    let claim = Claim::resolve(spec, table).ok()?;
    let sides = if claim.baseline.is_some() {
        vec![claim.selection(false), claim.selection(true)]
    } else {
        vec![claim.selection(false)]
    };
    sides.into_iter().flatten().find_map(|(k, v)| {
        kept.get(&k)
            .filter(|values| !values.contains(&v))
            .map(|_| format!("{k}={v}"))
    })
}

/// Checks the manifest's claims against the planned runs' grid points
/// before anything runs: each resolves, names grid keys and known methods,
/// and selects runs that differ only in their seed. The error is the path
/// in the manifest and what is wrong.
pub(crate) fn check_specs(
    claims: &[ClaimSpec],
    table: &TableSpec,
    points: &[BTreeMap<String, String>],
) -> Result<(), (String, String)> {
    let keys: Vec<&String> = points
        .first()
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    for (i, spec) in claims.iter().enumerate() {
        let at = |k: &str| {
            if k.is_empty() {
                format!("claims[{i}]")
            } else {
                format!("claims[{i}].{k}")
            }
        };
        let claim = Claim::resolve(spec, table).map_err(|(k, m)| (at(&k), m))?;
        let grid_key = |path: String, k: &String| {
            if keys.contains(&k) {
                Ok(())
            } else {
                Err((
                    path,
                    format!(
                        "`{k}` is not a grid key; grid keys: {}",
                        keys.iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ))
            }
        };
        grid_key(at("key"), &spec.key)?;
        for k in spec.select.keys() {
            grid_key(at(&format!("where.{k}")), k)?;
        }
        for k in spec.baseline_where.keys() {
            grid_key(at(&format!("baseline_where.{k}")), k)?;
        }
        let sides = [(false, "method"), (true, "baseline")];
        for (by_baseline, _) in sides.iter().filter(|(b, _)| !b || claim.baseline.is_some()) {
            check_side(spec, &claim, *by_baseline, points, &keys).map_err(|(k, m)| (at(k), m))?;
        }
    }
    Ok(())
}
