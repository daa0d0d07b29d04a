//! Sweep of the low-bit regime on a heterogeneous quadratic (ring of 8,
//! d = 200): every algorithm at 1 and 2 bits, CHOCO / DeepSqueeze / Moniqua
//! over their gamma (and Moniqua over theta). Prints the local models' mean
//! excess loss, the consensus distance and Moniqua's hash mismatches.
//!
//!     H=0.1 BUCKET=16 cargo run --release -p repro-algos --example low_bits -- [lr] [iterations]
//!
//! `H` scales the workers' disagreement (their minimizers spread over
//! `[-H, H]`), `BUCKET` is the baselines' quantizer bucket.

use repro_algos::*;
use repro_codec::{MoniquaConfig, Rounding, StochasticConfig};

// Long on purpose: an example, read top to bottom like a script.
fn main() {
    let n = 8;
    let d = 200;
    let h: f32 = std::env::var("H").map_or(0.5, |s| s.parse().unwrap());
    let bucket: usize = std::env::var("BUCKET").map_or(200, |s| s.parse().unwrap());
    let targets = (0..n)
        .map(|i| {
            (0..d)
                .map(|j| h * (((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.5) * 2.0)
                .collect()
        })
        .collect();
    let obj = Quadratic::heterogeneous(targets, 0.1);
    let ring = Topology::ring(n).unwrap();
    let args: Vec<String> = std::env::args().collect();
    let lr: f32 = args.get(1).map_or(0.05, |s| s.parse().unwrap());
    let iters: u64 = args.get(2).map_or(2000, |s| s.parse().unwrap());
    for bits in [1u32, 2] {
        let q = CompressorSpec::Stochastic(StochasticConfig {
            bits,
            bucket,
            ..StochasticConfig::default()
        });
        let mut specs = vec![
            ("dpsgd".to_string(), AlgorithmSpec::DPsgd),
            ("dcd".into(), AlgorithmSpec::Dcd(q.clone())),
            ("ecd".into(), AlgorithmSpec::Ecd(q.clone())),
            ("naive".into(), AlgorithmSpec::Naive(q.clone())),
        ];
        let scaled = CompressorSpec::Scaled {
            inner: Box::new(q.clone()),
            factor: 1.0 / (1.0 + bucket as f32),
        };
        for g in [0.5, 0.2, 0.05] {
            specs.push((
                format!("choco scaled g={g}"),
                AlgorithmSpec::Choco {
                    compressor: scaled.clone(),
                    gamma: g,
                },
            ));
        }
        for g in [1.0, 0.5, 0.2, 0.05] {
            specs.push((
                format!("choco g={g}"),
                AlgorithmSpec::Choco {
                    compressor: q.clone(),
                    gamma: g,
                },
            ));
            specs.push((
                format!("dsq g={g}"),
                AlgorithmSpec::DeepSqueeze {
                    compressor: q.clone(),
                    gamma: g,
                },
            ));
        }
        for theta in [0.05, 0.1, 0.2, 0.5] {
            for g in [1.0, 0.5, 0.2, 0.05] {
                let rounding = if bits == 1 {
                    Rounding::Nearest
                } else {
                    Rounding::Stochastic
                };
                specs.push((
                    format!("moniqua th={theta} g={g}"),
                    AlgorithmSpec::Moniqua {
                        codec: MoniquaConfig {
                            bits,
                            theta,
                            rounding,
                            ..MoniquaConfig::default()
                        },
                        gamma: g,
                    },
                ));
            }
        }
        if bits == 1 {
            // 1-bit stochastic rounding (delta = 1/2: only with an explicit
            // modulus) and no hash: at 1 bit some coordinate of every frame
            // recovers in the wrong turn, so a whole-frame hash rejects all.
            for modulus in [0.2, 0.5, 1.0] {
                for g in [0.5, 0.2, 0.1, 0.05] {
                    specs.push((
                        format!("mq1-stoch B={modulus} g={g}"),
                        AlgorithmSpec::Moniqua {
                            codec: MoniquaConfig {
                                bits: 1,
                                rounding: Rounding::Stochastic,
                                modulus: Some(modulus),
                                hash: false,
                                ..MoniquaConfig::default()
                            },
                            gamma: g,
                        },
                    ));
                }
            }
        }
        for (name, spec) in specs {
            let cfg = SimConfig {
                lr,
                seed: 1,
                ..SimConfig::default()
            };
            let mut sim = Simulator::new(&obj, ring.clone(), &spec, cfg, &vec![0.0; d]).unwrap();
            let mut status = String::new();
            for _ in 0..iters {
                if let Err(e) = sim.step() {
                    status = format!("error: {e}");
                    break;
                }
            }
            let fstar = obj.loss(obj.minimizer());
            let loss = (0..n).map(|i| obj.loss(sim.model(i)) - fstar).sum::<f64>() / n as f64;
            println!(
                "{bits}b {name:<24} local excess {loss:>12.4e} max deviation {:>10.3e} mism {} {status}",
                sim.consensus().max_deviation,
                sim.mismatched()
            );
        }
    }
}
