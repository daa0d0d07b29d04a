//! Whether the tuning protocol decided a claim: its direction on the
//! tuning runs of each side's best configurations (protocol-sensitive).

use super::*;

/// Whether the tuning protocol, not only the method, decides a `better`,
/// `within` or `faster_to` claim: its direction on the tuning runs, on
/// the claim's own metric (a time to the target from the tuning runs'
/// curves), for each pair of the best configurations of each side (a
/// side without a search at its final runs). Diagnostic only: nothing is
/// chosen on it. Where the direction changes with the configuration, the
/// verdict is marked protocol-sensitive and its note says in how many
/// pairs the claim holds.
pub(super) fn protocol_check(
    c: &Claim<'_>,
    rows: &[RunRecord],
    t: &TuningRecord,
    v: &mut Verdict,
    (curves, smooth): (Curves<'_>, usize),
) {
    if matches!(c.kind, Kind::Diverges { .. }) || c.baseline.is_none() {
        return;
    }
    let Some(score) = side_score(c, t, curves, smooth) else {
        add_note(
            &mut v.note,
            "whether the protocol decided it was not checked: the tuning runs' curves are not recorded (their raw/ logs)",
        );
        return;
    };
    let side = |by_baseline: bool| -> (Vec<f64>, bool) {
        let s = c.selection(by_baseline);
        let best = t.best_of(&|r| matches(&r.point, &s));
        if best.is_empty() {
            let finals: Vec<&RunRecord> = rows.iter().filter(|r| matches(&r.point, &s)).collect();
            return (score(&finals).into_iter().collect(), false);
        }
        let means = best.iter().filter_map(|(_, runs)| score(runs)).collect();
        (means, true)
    };
    let ((mine, tuned_mine), (theirs, tuned_theirs)) = (side(false), side(true));
    if !(tuned_mine || tuned_theirs) {
        return;
    }
    let holds = |m: f64, b: f64| match c.kind {
        Kind::Within(margin) => (m - b).abs() <= margin,
        Kind::FasterTo { .. } => m < b,
        _ if c.higher => m > b,
        _ => m < b,
    };
    let pairs: Vec<bool> = mine
        .iter()
        .flat_map(|m| theirs.iter().map(move |b| holds(*m, *b)))
        .collect();
    let k = pairs.iter().filter(|h| **h).count();
    if pairs.len() < 2 || k == 0 || k == pairs.len() {
        return;
    }
    v.protocol_sensitive = true;
    let described = |n: usize, tuned: bool, who: &str| {
        if tuned {
            format!("the best {n} configurations of {who}")
        } else {
            format!("{who}'s final runs")
        }
    };
    let what = match &c.kind {
        Kind::FasterTo { metric, by, .. } => format!("{by} to the {metric} target"),
        _ => c.metric.clone().unwrap_or_default(),
    };
    add_note(
        &mut v.note,
        &format!(
            "protocol-sensitive: on the tuning runs' {what} (diagnostic only: nothing was chosen on it), over {} against {}, the claim holds in {k} of {} pairs",
            described(mine.len(), tuned_mine, &c.method),
            described(
                theirs.len(),
                tuned_theirs,
                c.baseline.as_deref().unwrap_or_default()
            ),
            pairs.len()
        ),
    );
}

/// Where a claim reads its runs' curves of a metric.
pub(super) type Curves<'c> = &'c mut dyn FnMut(&str) -> Result<Vec<RunCurve>>;

/// A side's score from its runs (see [`side_score`]).
pub(super) type Score<'a> = Box<dyn Fn(&[&RunRecord]) -> Option<f64> + 'a>;

/// A side's score for [`protocol_check`]: the mean of the claim's metric
/// over runs by intention to treat, scaled; for a `faster_to` claim the
/// mean time to its target (a run that never got there at its last
/// point), from the final runs' and the tuning runs' curves. `None` for
/// a `faster_to` claim whose tuning runs left no curves.
pub(super) fn side_score<'a>(
    c: &'a Claim<'_>,
    t: &TuningRecord,
    curves: &mut dyn FnMut(&str) -> Result<Vec<RunCurve>>,
    smooth: usize,
) -> Option<Score<'a>> {
    let mean = |xs: Vec<f64>| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    let Kind::FasterTo { metric, target, by } = &c.kind else {
        let metric = c.metric.clone().unwrap_or_default();
        return Some(Box::new(move |runs: &[&RunRecord]| {
            let xs = runs
                .iter()
                .filter_map(|r| r.counted(&metric, c.higher).number())
                .filter(|x| x.is_finite())
                .map(|x| x * c.scale)
                .collect();
            mean(xs)
        }));
    };
    let tuned = t
        .dir
        .as_ref()
        .and_then(|d| {
            crate::records::curves::load_curves(
                &d.join(crate::records::results_dir::Entry::Raw.name()),
                &t.runs,
                metric,
            )
            .ok()
        })
        .filter(|c| !c.is_empty())?;
    let finals = curves(metric).unwrap_or_default();
    let by_id: BTreeMap<String, Vec<CurvePoint>> = tuned
        .into_iter()
        .chain(finals)
        .map(|(r, p)| (r.run_id, p))
        .collect();
    let (target, by, metric) = (*target, by.clone(), metric.clone());
    Some(Box::new(move |runs: &[&RunRecord]| {
        let ids: BTreeMap<&str, &[CurvePoint]> = by_id
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        let reach = TimeTo {
            metric: &metric,
            target,
            by: &by,
            smooth,
        };
        let (s, _) = reach_side(c, runs, &ids, &reach);
        mean(s.numbers())
    }))
}

/// A side of a claim without final runs whose tuning found no working
/// configuration (`tuning` holds only such settings' runs: no run
/// trained, or the best score was at chance) takes those tuning runs in
/// their place; what was substituted, in words.
pub(super) fn untrained_sides<'r>(
    c: &Claim<'_>,
    tuning: &'r [RunRecord],
    (mine, theirs): (&mut Vec<&'r RunRecord>, &mut Vec<&'r RunRecord>),
) -> Vec<String> {
    let mut said = Vec::new();
    let base = c.baseline.clone().unwrap_or_default();
    for (by_baseline, side, who) in [(false, mine, &c.method), (true, theirs, &base)] {
        if !side.is_empty() || (by_baseline && c.baseline.is_none()) {
            continue;
        }
        let s = c.selection(by_baseline);
        let tried: Vec<&RunRecord> = tuning.iter().filter(|r| matches(&r.point, &s)).collect();
        if tried.is_empty() {
            continue;
        }
        let failed =
            |r: &&RunRecord| r.health().map(Health::kind) == Some(HealthKind::MethodFailed);
        let counts = counts_text(&by_health(tried.iter().copied()));
        said.push(if tried.iter().all(failed) {
            format!(
                "{who}: no configuration trained, every one of its {} tuning runs failed ({counts})",
                tried.len()
            )
        } else {
            format!(
                "{who}: no working configuration found, its best tuning score within `tune.chance_margin` of chance ({} tuning runs: {counts})",
                tried.len()
            )
        });
        *side = tried;
    }
    said
}
