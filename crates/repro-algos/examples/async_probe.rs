//! AD-PSGD vs Moniqua on AD-PSGD on a heterogeneous (non-iid) quadratic with
//! one slow worker at 20 Mbps: both settle at a biased point, because fast
//! workers apply more gradients of their own objectives, and the faster
//! Moniqua exchanges make the imbalance (and the bias) larger. Prints the
//! excess loss of the average and of the local models every 200 updates.
//!
//!     cargo run --release -p repro-algos --example async_probe

use repro_algos::*;
use repro_codec::MoniquaConfig;
fn main() {
    let n = 6;
    let d = 20_000;
    let targets = (0..n)
        .map(|i| {
            (0..d)
                .map(|j| ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.5)
                .collect()
        })
        .collect();
    let objective = Quadratic::heterogeneous(targets, 0.05);
    let ring = Topology::ring(n).unwrap();
    let fstar = objective.loss(objective.minimizer());
    for (name, ex) in [
        ("full", AsyncExchange::Full),
        (
            "mq8",
            AsyncExchange::Moniqua(MoniquaConfig {
                bits: 8,
                theta: 1.0,
                ..MoniquaConfig::default()
            }),
        ),
        (
            "mq8th4",
            AsyncExchange::Moniqua(MoniquaConfig {
                bits: 8,
                theta: 4.0,
                ..MoniquaConfig::default()
            }),
        ),
    ] {
        let cfg = AsyncConfig {
            lr: 0.05,
            compute_s: 0.01,
            exchange: ex,
            speeds: vec![1.0, 1.0, 1.0, 1.0, 1.0, 3.0],
            network: Some(Network {
                bandwidth_bps: 20e6,
                latency_s: 0.15e-3,
            }),
            ..AsyncConfig::default()
        };
        let mut sim = AsyncSimulator::new(&objective, ring.clone(), cfg, &vec![0.0; d]).unwrap();
        for u in 0..=1200u64 {
            if u % 200 == 0 {
                let avg = sim.average_model();
                let local: f64 = (0..n)
                    .map(|i| objective.loss(sim.model(i)) - fstar)
                    .sum::<f64>()
                    / n as f64;
                println!(
                    "{name} {u} t={:.3}: avg excess {:.4} local excess {:.4}",
                    sim.clock(),
                    objective.loss(&avg) - fstar,
                    local
                );
                let _ = 0;
            }
            sim.step().unwrap();
        }
    }
}
