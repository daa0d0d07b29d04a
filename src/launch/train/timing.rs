//! An iteration's time on the shaped network: the latency rounds and the
//! bytes each phase sends, from the run's config.

use super::*;

/// Seconds per iteration measured and the wire-time bound for it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct IterationTiming {
    /// Mean over iterations of the slowest rank's compute + communication.
    pub step_s: f64,
    /// Mean over iterations of the slowest rank's `bytes on the wire /
    /// bandwidth + latency x rounds`, where a round is a set of messages
    /// sent together (one for a gossip exchange or an all-gather, 2 (n - 1)
    /// one after the other for a ring all-reduce).
    pub bound_s: f64,
    pub iters_per_epoch: f64,
}

/// Sequential message rounds per communicating iteration of `cfg`'s
/// algorithm on `n` ranks: the ring all-reduce's 2 (n - 1) for the
/// algorithms that sum f32 frames, recursive halving and doubling's
/// `2 log2 n` (two more when n is no power of two) for `allreduce-rhd`,
/// one otherwise (every message of a gossip exchange or an all-gather
/// leaves at once).
pub(crate) fn latency_rounds(cfg: &TrainConfig, n: usize) -> u32 {
    match cfg.algorithm.as_str() {
        "allreduce" | "psgd" | "rsgd" => 2 * (n.max(1) as u32 - 1),
        "allreduce-rhd" => repro_algos::topology::halving_doubling_rounds(n),
        _ => 1,
    }
}

/// Timing of the iterations every rank logged, the first fifth (at most 5)
/// left out as warm-up. `wire_ratio` scales counted payload bytes to bytes
/// on the wire (the run's kernel/counted ratio; 1 when unknown); `rounds`
/// is [`latency_rounds`].
pub(crate) fn iteration_timing(
    logs: &[repro_runlog::Log],
    condition: Option<&Condition>,
    wire_ratio: f64,
    rounds: u32,
) -> IterationTiming {
    let mut per_iter: std::collections::BTreeMap<u64, (f64, u64, usize, f64)> =
        std::collections::BTreeMap::new();
    for l in logs {
        for s in &l.steps {
            let e = per_iter.entry(s.iteration).or_insert((0.0, 0, 0, 0.0));
            e.0 = e.0.max(s.compute_s + s.comm_s);
            e.1 = e.1.max(s.bytes_sent);
            e.2 += 1;
            e.3 = s.epoch;
        }
    }
    let complete: Vec<(u64, (f64, u64, usize, f64))> = per_iter
        .into_iter()
        .filter(|(_, v)| v.2 == logs.len())
        .collect();
    let warm = (complete.len() / 5).min(5);
    let used = &complete[warm..];
    let nan = IterationTiming {
        step_s: f64::NAN,
        bound_s: f64::NAN,
        iters_per_epoch: f64::NAN,
    };
    if used.is_empty() {
        return nan;
    }
    let ratio = if wire_ratio.is_finite() {
        wire_ratio
    } else {
        1.0
    };
    let bound = |bytes: u64| -> f64 {
        let Some(c) = condition else {
            return 0.0;
        };
        let wire = c
            .bandwidth_bps
            .map_or(0.0, |bps| bytes as f64 * ratio * 8.0 / bps);
        wire + if bytes > 0 {
            c.latency_s * f64::from(rounds)
        } else {
            0.0
        }
    };
    let n = used.len() as f64;
    let (k, epoch) = complete
        .iter()
        .rev()
        .find(|(k, v)| *k > 0 && v.3 > 0.0)
        .map_or((0, 0.0), |(k, v)| (*k, v.3));
    IterationTiming {
        step_s: used.iter().map(|(_, v)| v.0).sum::<f64>() / n,
        bound_s: used.iter().map(|(_, v)| bound(v.1)).sum::<f64>() / n,
        iters_per_epoch: if epoch > 0.0 {
            k as f64 / epoch
        } else {
            f64::NAN
        },
    }
}
