//! Simulated iterations per second, next to the time to stream every
//! worker's model through memory once (measured in the same run, on one
//! thread and on every core, as the simulator runs), and to read and write
//! back as much memory in place on every core (what an iteration cannot
//! avoid: every model is read and updated), and the ratios (medians over
//! rounds of one iteration and one of each reference).
//!
//!     cargo bench -p repro-algos --bench sim [-- --quick] [-- --algo moniqua|dpsgd|choco]
//!     cargo bench -p repro-algos --bench sim -- --n 1024 --d 100000   # one size
//!     cargo bench -p repro-algos --bench sim -- --bits 1,2,8            # widths (default 8)
//!     cargo bench -p repro-algos --bench sim -- --no-hash   # Moniqua without the code hash
//!
//! Moniqua and CHOCO round stochastically (Moniqua at 1 bit with an explicit
//! modulus, as in Table 2).
//!
//! Sizes: n in {8, 64, 1024} workers, d in {10k, 100k, 1M}. Those with
//! n d > 1.2e8 (the models alone 0.5 GB and more) run only when named with
//! `--n` and `--d`; otherwise their row says they were skipped, and why.

use std::hint::black_box;
use std::time::Instant;

use repro_algos::{AlgorithmSpec, CompressorSpec, Quadratic, SimConfig, Simulator, Topology};
use repro_codec::{MoniquaConfig, StochasticConfig};

fn spec(name: &str, bits: u32, hash: bool) -> AlgorithmSpec {
    match name {
        "dpsgd" => AlgorithmSpec::DPsgd,
        "choco" => AlgorithmSpec::Choco {
            compressor: CompressorSpec::Stochastic(StochasticConfig {
                bits,
                ..StochasticConfig::default()
            }),
            gamma: 0.5,
        },
        _ => AlgorithmSpec::Moniqua {
            codec: MoniquaConfig {
                bits,
                theta: 1.0,
                // stochastic rounding at 1 bit has delta = 1/2: no B_theta
                modulus: (bits == 1).then_some(4.0),
                hash,
                ..MoniquaConfig::default()
            },
            gamma: 1.0,
        },
    }
}

/// Seconds to read every worker's model once on one thread (on every core
/// it is `Simulator::stream_time`, the reference `repro run` records).
fn stream_time_one_thread(sim: &Simulator<'_>, n: usize) -> f64 {
    let t = Instant::now();
    let mut lanes = [0.0f32; 16];
    for i in 0..n {
        for chunk in sim.model(i).chunks_exact(16) {
            for (l, &v) in lanes.iter_mut().zip(chunk) {
                *l += v;
            }
        }
    }
    black_box(lanes);
    t.elapsed().as_secs_f64()
}

/// Seconds to read and write back `buf` in place (every value times
/// `scale`, 1.0 hidden from the compiler), split over `threads` threads:
/// the memory traffic an iteration cannot avoid, reading every model and
/// writing it back.
fn update_time(buf: &mut [f32], threads: usize, scale: f32) -> f64 {
    let per = buf.len().div_ceil(threads);
    let t = Instant::now();
    std::thread::scope(|s| {
        for part in buf.chunks_mut(per) {
            s.spawn(move || {
                for v in part.iter_mut() {
                    *v *= scale;
                }
            });
        }
    });
    t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let algo = args
        .iter()
        .position(|a| a == "--algo")
        .and_then(|i| args.get(i + 1))
        .map_or("moniqua", String::as_str);
    let only = |flag: &str| -> Option<usize> {
        let at = args.iter().position(|a| a == flag)?;
        let value = args.get(at + 1)?;
        Some(
            value
                .parse()
                .unwrap_or_else(|_| panic!("{flag} takes a number, got {value}")),
        )
    };
    let (only_n, only_d) = (only("--n"), only("--d"));
    let hash = !args.iter().any(|a| a == "--no-hash");
    let widths: Vec<u32> = match args.iter().position(|a| a == "--bits") {
        _ if algo == "dpsgd" => vec![32],
        None => vec![8],
        Some(at) => args
            .get(at + 1)
            .map(|list| {
                list.split(',')
                    .map(|b| {
                        b.parse()
                            .unwrap_or_else(|_| panic!("--bits takes 1..8, got {b}"))
                    })
                    .collect()
            })
            .unwrap_or_else(|| panic!("--bits takes a list such as 1,2,8")),
    };
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    println!(
        "{:<8} {:>4} {:>6} {:>9} {:>10} {:>10} {:>12} {:>8} {:>14} {:>8} {:>14} {:>8}",
        "algo",
        "bits",
        "n",
        "d",
        "iter/s",
        "ms/iter",
        "stream ms",
        "ratio",
        format!("stream ms x{cores}"),
        "ratio",
        format!("update ms x{cores}"),
        "ratio"
    );
    for (bits, n) in widths
        .iter()
        .flat_map(|&b| [8usize, 64, 1024].map(|n| (b, n)))
    {
        for d in [10_000usize, 100_000, 1_000_000] {
            if only_n.is_some_and(|m| m != n) || only_d.is_some_and(|m| m != d) {
                continue;
            }
            // the largest sizes run only when named: their models alone
            // are 4 GB, and the references stream as much again
            if n * d > 120_000_000 && (only_n.is_none() || only_d.is_none()) {
                println!(
                    "{algo:<8} {bits:>4} {n:>6} {d:>9}  skipped: the models alone take {:.1} GB; \
                     run it with --n {n} --d {d}",
                    (n * d * 4) as f64 / 1e9
                );
                continue;
            }
            // homogeneous, so the objective holds one target, not n
            // exact gradients: the bench measures the algorithm, not a noise generator
            let objective = Quadratic::homogeneous(n, vec![0.1; d], 0.0);
            let ring = Topology::ring(n).unwrap();
            let cfg = SimConfig {
                lr: 0.05,
                ..SimConfig::default()
            };
            let mut sim = Simulator::new(
                &objective,
                ring,
                &spec(algo, bits, hash),
                cfg,
                &vec![0.0; d],
            )
            .unwrap();
            sim.step().unwrap();
            let rounds = if quick {
                3
            } else {
                (2e8 / (n * d) as f64).clamp(7.0, 50.0) as usize
            };
            // each round: one iteration, then stream every model through
            // memory once (a sum over all of them) on one thread and on as
            // many as the simulator uses; medians of the times and of each
            // round's ratios, so a slow spell of a shared machine hits both
            // and read and write back as much memory in place
            let mut buf = vec![1.0f32; n * d];
            let (mut steps, mut one, mut all) = (Vec::new(), Vec::new(), Vec::new());
            let mut update = Vec::new();
            for _ in 0..rounds {
                let t = Instant::now();
                sim.step().unwrap();
                steps.push(t.elapsed().as_secs_f64());
                one.push(stream_time_one_thread(&sim, n));
                // the reference `repro run` records (`stream_s`), on the
                // simulator's own threads
                all.push(sim.stream_time());
                update.push(update_time(&mut buf, cores.min(n), black_box(1.0)));
            }
            let ratio =
                |streams: &[f64]| median(steps.iter().zip(streams).map(|(s, t)| s / t).collect());
            let (ratio_one, ratio_all, ratio_update) = (ratio(&one), ratio(&all), ratio(&update));
            let (per_iter, stream, stream_all) = (median(steps), median(one), median(all));
            println!(
                "{:<8} {:>4} {:>6} {:>9} {:>10.2} {:>10.3} {:>12.3} {:>8.1} {:>14.3} {:>8.1} {:>14.3} {:>8.1}",
                algo,
                bits,
                n,
                d,
                1.0 / per_iter,
                per_iter * 1e3,
                stream * 1e3,
                ratio_one,
                stream_all * 1e3,
                ratio_all,
                median(update) * 1e3,
                ratio_update
            );
        }
    }
}
