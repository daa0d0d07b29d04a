//! What a plan can tell about its runs' validity before any of them runs:
//! warnings, not errors (the run may still be what its author wants).
//!
//! - A network condition under which one message of the run takes longer
//!   on the wire than the run's time budget per iteration (its timeout
//!   over its iterations): its exchanges cannot keep up, so the run times
//!   out, or an asynchronous one trains without gossip.
//! - Moniqua whose quantizer has delta = 1/2 (1 bit, stochastic rounding):
//!   Lemma 2 bounds no recovery, so the modulus is a plain
//!   hyper-parameter.

use std::collections::BTreeMap;

use repro_algos::AlgorithmSpec;
use repro_runlog::{Knobs, TrainConfig};

use crate::experiment::plan::{Params, PlannedRun};

/// The plan's design warnings, each once with the number of runs it
/// concerns, in a stable order.
pub(crate) fn warnings(runs: &[PlannedRun]) -> Vec<String> {
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    for run in runs {
        for w in message_too_long(run)
            .into_iter()
            .chain(unbounded_moniqua(run))
        {
            *found.entry(w).or_default() += 1;
        }
    }
    found
        .into_iter()
        .map(|(w, n)| format!("{w} ({n} run{})", if n == 1 { "" } else { "s" }))
        .collect()
}

/// The spec of a trainer run's algorithm, the asynchronous ones as the
/// frames they send (AD-PSGD full models, Moniqua on AD-PSGD Moniqua's).
fn spec_of(algorithm: &str, knobs: &Knobs) -> Option<AlgorithmSpec> {
    let name = match algorithm {
        "ad-psgd" => "d-psgd",
        "moniqua-ad-psgd" => "moniqua",
        other => other,
    };
    AlgorithmSpec::from_name(name, knobs).ok()
}

/// One message takes longer on the wire than the run's time per
/// iteration.
fn message_too_long(run: &PlannedRun) -> Option<String> {
    let Params::Train(c) = &run.params else {
        return None;
    };
    let condition = run.network.as_ref()?;
    let bandwidth = condition.bandwidth_bps?;
    let bytes = message_bytes(c)?;
    let wire_s = bytes as f64 * 8.0 / bandwidth + condition.latency_s;
    let budget_s = c.timeout_s as f64 / c.iterations.max(1) as f64;
    (wire_s > budget_s).then(|| {
        format!(
            "network {}: one {} message of {:.2} MB takes {:.1} s on the wire, longer than the run's {:.1} s per iteration (timeout_s {} over {} iterations): its exchanges cannot keep up",
            condition.label,
            c.algorithm,
            bytes as f64 / 1e6,
            wire_s,
            budget_s,
            c.timeout_s,
            c.iterations
        )
    })
}

/// The bytes of one frame a trainer run sends, where its model's size is
/// known.
fn message_bytes(c: &TrainConfig) -> Option<u64> {
    let d = repro_runlog::model_parameters(&c.model, &c.dataset)?;
    Some(spec_of(&c.algorithm, &c.knobs)?.frame_bytes(usize::try_from(d).ok()?))
}

/// Moniqua with delta = 1/2: no Lemma 2 bound.
fn unbounded_moniqua(run: &PlannedRun) -> Option<String> {
    let (algorithm, knobs) = match &run.params {
        Params::Train(c) => (&c.algorithm, &c.knobs),
        Params::Sim(p) => (&p.algorithm, &p.knobs),
    };
    if !algorithm.starts_with("moniqua") {
        return None;
    }
    let rounding = repro_algos::moniqua_config(knobs).ok()?.rounding;
    let delta = repro_codec::circle_delta(knobs.bits, rounding).ok()?;
    let modulus = match knobs.modulus {
        Some(_) => "The modulus is a hyper-parameter here".to_string(),
        None => format!(
            "B comes from theta by the `b_theta: {}` reading",
            knobs.b_theta
        ),
    };
    (delta >= 0.5).then(|| {
        format!(
            "{algorithm} at {} bit with {} rounding: delta = {delta}, so Lemma 2 bounds no recovery (B_theta = 2 theta / (1 - 2 delta) is infinite). {modulus}; the wrapped coordinates are measured (wrap_rate; `premise: wrapped` beside health)",
            knobs.bits, knobs.rounding
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::condition::Condition;

    fn trainer(algorithm: &str, knobs: Knobs, network: Option<Condition>) -> PlannedRun {
        PlannedRun {
            id: "t".into(),
            point: BTreeMap::new(),
            params: Params::Train(TrainConfig {
                algorithm: algorithm.into(),
                model: "resnet110".into(),
                dataset: "cifar10".into(),
                iterations: 13_000,
                timeout_s: 172_800,
                knobs,
                ..TrainConfig::default()
            }),
            network,
        }
    }

    fn condition(text: &str) -> Condition {
        Condition::from_label(text).unwrap()
    }

    /// Figure 2(b) at the cpu scale's 713 kbit/s, with the paper's
    /// ResNet110 (6.9 MB a message): 77 s a message against 13.3 s an
    /// iteration. At 20 Mbit/s it fits.
    #[test]
    fn a_message_longer_than_an_iteration_is_said() {
        let slow = trainer(
            "ad-psgd",
            Knobs::default(),
            Some(condition("713kbit/0.15ms")),
        );
        let w = warnings(&[slow.clone(), slow]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("network 713kbit/0.15ms: one ad-psgd message of 6.91 MB takes 77.6 s"),
            "{}",
            w[0]
        );
        assert!(w[0].ends_with("(2 runs)"), "{}", w[0]);
        let fast = trainer(
            "ad-psgd",
            Knobs::default(),
            Some(condition("20mbit/0.15ms")),
        );
        assert!(warnings(&[fast]).is_empty());
        assert!(warnings(&[trainer("ad-psgd", Knobs::default(), None)]).is_empty());
    }

    /// 1 bit stochastic has delta 1/2; 2 bits, or nearest rounding, do not.
    #[test]
    fn moniqua_without_a_bound_is_said() {
        let knobs = |bits: u32, rounding: &str| Knobs {
            bits,
            rounding: repro_codec::Rounding::from_name(rounding).unwrap(),
            ..Knobs::default()
        };
        let w = warnings(&[trainer("moniqua", knobs(1, "stochastic"), None)]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("delta = 0.5, so Lemma 2 bounds no recovery"),
            "{}",
            w[0]
        );
        for (bits, rounding) in [(2, "stochastic"), (1, "nearest")] {
            assert!(warnings(&[trainer("moniqua", knobs(bits, rounding), None)]).is_empty());
        }
        assert!(warnings(&[trainer("choco", knobs(1, "stochastic"), None)]).is_empty());
    }
}
