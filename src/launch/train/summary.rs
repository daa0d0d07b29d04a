//! A run's summary from its ranks' logs: losses, accuracies, traffic,
//! timing and memory.

use super::*;

/// The ranks' mean training loss over their last tenth of steps (at least
/// one step each; NaN without steps).
pub(crate) fn final_train_loss(logs: &[repro_runlog::Log]) -> f64 {
    let per_rank: Vec<f64> = logs
        .iter()
        .filter(|l| !l.steps.is_empty())
        .map(|l| {
            let k = (l.steps.len() / 10).max(1);
            let tail = &l.steps[l.steps.len() - k..];
            tail.iter().map(|s| s.train_loss).sum::<f64>() / k as f64
        })
        .collect();
    if per_rank.is_empty() {
        f64::NAN
    } else {
        per_rank.iter().sum::<f64>() / per_rank.len() as f64
    }
}

/// The share of the ranks' steps in which a gossip frame arrived (a
/// synchronous algorithm's every step; an asynchronous one's as often as
/// its exchanges complete); `None` without steps.
pub(super) fn exchange_share(logs: &[repro_runlog::Log]) -> Option<f64> {
    let steps = logs.iter().flat_map(|l| &l.steps);
    let (with, all) = steps.fold((0u64, 0u64), |(w, a), s| {
        (w + u64::from(s.bytes_received > 0), a + 1)
    });
    (all > 0).then(|| with as f64 / all as f64)
}

/// The share of the coordinates the ranks recovered at their evaluations
/// that wrapped around Moniqua's modulus; `None` where none was checked.
pub(super) fn wrap_rate(logs: &[repro_runlog::Log]) -> Option<f64> {
    let evals = logs.iter().flat_map(|l| &l.evals);
    let (wrapped, recovered) = evals.fold((0u64, 0u64), |(w, r), e| {
        (w + e.wrapped.unwrap_or(0), r + e.recovered.unwrap_or(0))
    });
    (recovered > 0).then(|| wrapped as f64 / recovered as f64)
}

/// The ranks' mean training loss at their first logged step.
pub(super) fn first_train_loss(logs: &[repro_runlog::Log]) -> f64 {
    mean(
        logs.iter()
            .filter_map(|l| l.steps.first().map(|s| s.train_loss)),
    )
}

/// Share of step time spent communicating, over every step of every rank.
pub(crate) fn comm_fraction(logs: &[repro_runlog::Log]) -> f64 {
    let (comm, total) = logs
        .iter()
        .flat_map(|l| &l.steps)
        .fold((0.0, 0.0), |(c, t), s| {
            (c + s.comm_s, t + s.compute_s + s.comm_s)
        });
    if total > 0.0 { comm / total } else { f64::NAN }
}

/// The mean of `v`; NaN for none.
pub(super) fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = v.collect();
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Payload bytes each rank handed to the transport, the mean over ranks;
/// NaN unless every rank counted.
pub(super) fn counted_per_worker(logs: &[repro_runlog::Log]) -> f64 {
    let counted: Vec<Option<u64>> = logs
        .iter()
        .map(|l| l.end.as_ref().and_then(|e| e.transport_bytes_sent))
        .collect();
    if counted.iter().all(Option::is_some) {
        mean(counted.iter().flatten().map(|&b| b as f64))
    } else {
        f64::NAN
    }
}

/// The run's seconds (the job's `wall_s`, or for workers in one process
/// their virtual clock: the job's own duration says how long the model
/// took to compute, not the run) and the slowest rank's clock.
pub(super) fn run_seconds(logs: &[repro_runlog::Log], wall_s: f64) -> (f64, f64) {
    let virtual_s = logs
        .iter()
        .filter_map(|l| l.end.as_ref().map(|e| e.wall_s))
        .fold(0.0, f64::max);
    let in_process = logs
        .iter()
        .any(|l| l.header.provenance.backend == Backend::InProcess.name());
    (if in_process { virtual_s } else { wall_s }, virtual_s)
}

/// The summary of a run from its ranks' logs and its kernel counters:
/// how it ended and where it ran, then its evaluations, its traffic, its
/// timing and its memory.
pub(super) fn summarize(
    run: &PlannedRun,
    logs: &[repro_runlog::Log],
    kernel: &[QdiscStats],
    shaping: String,
    shaped: bool,
    wall_s: f64,
) -> Summary {
    let (wall_s, virtual_s) = run_seconds(logs, wall_s);
    let mut s = Summary {
        status: RunStatus::of_logs(logs),
        provenance: logs.first().map(|l| repro_runlog::Provenance {
            device: devices(logs),
            ..l.header.provenance.clone()
        }),
        shaping,
        wall_s,
        virtual_s: repro_runlog::finite(virtual_s),
        workers: Some(logs.len()),
        theta: logs.first().and_then(|l| l.end.as_ref()?.theta),
        modulus: logs.first().and_then(|l| l.end.as_ref()?.modulus),
        ..Summary::default()
    };
    summarize_evaluations(&mut s, logs);
    summarize_traffic(&mut s, logs, kernel);
    summarize_timing(&mut s, run, logs, shaped);
    summarize_memory(&mut s, logs);
    s
}

/// The losses and accuracies: the training loss's first and last, and the
/// mean over ranks of each one's last evaluation.
pub(super) fn summarize_evaluations(s: &mut Summary, logs: &[repro_runlog::Log]) {
    let some = repro_runlog::finite;
    let last = |f: fn(&repro_runlog::Eval) -> Option<f64>| {
        some(mean(logs.iter().filter_map(|l| l.evals.last().and_then(f))))
    };
    s.train_loss = some(final_train_loss(logs));
    s.first_loss = some(first_train_loss(logs));
    s.final_loss = last(|e| e.avg_test_loss);
    s.local_loss = last(|e| e.test_loss);
    s.consensus = last(|e| e.consensus_distance);
    s.max_deviation = last(|e| e.max_deviation);
    s.model_norm = last(|e| e.model_norm);
    s.test_accuracy = last(|e| e.test_accuracy);
    s.avg_test_accuracy = last(|e| e.avg_test_accuracy);
    s.val_loss = last(|e| e.val_loss);
    s.val_accuracy = last(|e| e.val_accuracy);
    s.wrap_rate = wrap_rate(logs);
}

/// The bytes: counted by the ranks, seen by the kernel's qdiscs, and the
/// frames' hashes.
pub(super) fn summarize_traffic(
    s: &mut Summary,
    logs: &[repro_runlog::Log],
    kernel: &[QdiscStats],
) {
    let some = repro_runlog::finite;
    let total = |f: fn(&repro_runlog::Step) -> u64| -> u64 {
        logs.iter().flat_map(|l| l.steps.iter().map(f)).sum()
    };
    s.bytes = total(|s| s.bytes_sent);
    s.hash_failures = total(|s| s.hash_failures);
    s.hash_verified = total(|s| s.hash_verified);
    s.exchange_share = exchange_share(logs);
    s.counted_bytes_per_worker = some(counted_per_worker(logs));
    s.gossip_bytes_per_worker =
        (!logs.is_empty()).then(|| total(|s| s.bytes_sent) as f64 / logs.len() as f64);
    s.kernel_bytes_per_worker = some(mean(kernel.iter().map(|k| k.bytes as f64)));
}

/// The time of a step and an epoch (and the wire's bound on it when
/// shaped), the communication's share and the algorithm's encode and
/// decode. Needs [`summarize_traffic`]'s bytes.
pub(super) fn summarize_timing(
    s: &mut Summary,
    run: &PlannedRun,
    logs: &[repro_runlog::Log],
    shaped: bool,
) {
    let some = repro_runlog::finite;
    let kernel_ratio = s.kernel_bytes_per_worker.unwrap_or(f64::NAN)
        / s.counted_bytes_per_worker.unwrap_or(f64::NAN);
    let rounds = match &run.params {
        Params::Train(cfg) => latency_rounds(cfg, logs.len()),
        Params::Sim(_) => 1,
    };
    let network = run.network.as_ref().filter(|_| shaped);
    let timing = iteration_timing(logs, network, kernel_ratio, rounds);
    s.comm_fraction = some(comm_fraction(logs));
    s.epoch_time_s = some(timing.step_s * timing.iters_per_epoch);
    s.wire_bound_epoch_s = shaped
        .then(|| some(timing.bound_s * timing.iters_per_epoch))
        .flatten();
    let steps = || logs.iter().flat_map(|l| l.steps.iter());
    s.compute_step_s = some(mean(steps().map(|s| s.compute_s)));
    s.algorithm_step_s = some(mean(
        steps().filter_map(|s| s.phases.map(|p| p.encode_s + p.decode_s)),
    ));
}

/// The algorithm's extra memory (the ranks' mean) and the largest peak
/// resident set.
pub(super) fn summarize_memory(s: &mut Summary, logs: &[repro_runlog::Log]) {
    let ends = || logs.iter().filter_map(|l| l.end.as_ref());
    s.extra_memory_mb = repro_runlog::finite(mean(
        ends()
            .filter_map(|e| e.extra_memory_bytes)
            .map(|b| b as f64 / 1e6),
    ));
    s.peak_rss_mb = repro_runlog::finite(
        ends()
            .filter_map(|e| e.peak_rss_bytes)
            .map(|b| b as f64 / 1e6)
            .fold(f64::NAN, f64::max),
    );
}

/// The ranks' devices, as their log headers name them: one name when all
/// are the same (`cpu`, `cuda:0`), else each rank's in rank order
/// (`cuda:0,cuda:1,cuda:0,cuda:1`).
pub(super) fn devices(logs: &[repro_runlog::Log]) -> String {
    let mut names: Vec<(u32, &str)> = logs
        .iter()
        .map(|l| (l.header.rank, l.header.provenance.device.as_str()))
        .collect();
    names.sort_unstable();
    let first = names.first().map_or("", |&(_, d)| d);
    if names.iter().all(|&(_, d)| d == first) {
        first.to_string()
    } else {
        names.iter().map(|&(_, d)| d).collect::<Vec<_>>().join(",")
    }
}
