use super::*;
use crate::{CompressorSpec, Quadratic};
use repro_codec::{MoniquaConfig, Rounding, StochasticConfig};

/// The fused order (send for all, then gradient and receive per worker),
/// whole or a block at a time, gives the same models, bit for bit, as
/// the three separate phases.
#[test]
fn fused_iterations_equal_the_three_phases() {
    // several blocks of the block-major pass, the last one partial
    let (n, d) = (6, 4200);
    let targets: Vec<Vec<f32>> = (0..n)
        .map(|i| (0..d).map(|c| ((i * d + c) as f32 * 0.1).sin()).collect())
        .collect();
    let noisy = Quadratic::heterogeneous(targets.clone(), 0.3);
    let exact = Quadratic::heterogeneous(targets, 0.0);
    let specs = [
        AlgorithmSpec::DPsgd,
        AlgorithmSpec::Moniqua {
            codec: MoniquaConfig {
                bits: 2,
                theta: 2.0,
                rounding: Rounding::Stochastic,
                ..MoniquaConfig::default()
            },
            gamma: 0.5,
        },
        // Table 2's: 1 bit, an explicit modulus, no hash (updated in place)
        AlgorithmSpec::Moniqua {
            codec: MoniquaConfig {
                bits: 1,
                modulus: Some(0.5),
                hash: false,
                ..MoniquaConfig::default()
            },
            gamma: 0.2,
        },
        AlgorithmSpec::Naive(CompressorSpec::Stochastic(StochasticConfig {
            bits: 4,
            ..StochasticConfig::default()
        })),
    ];
    let tiny_theta = AlgorithmSpec::Moniqua {
        codec: MoniquaConfig {
            bits: 4,
            theta: 1e-3,
            ..MoniquaConfig::default()
        },
        gamma: 1.0,
    };
    for spec in specs.iter().chain([&tiny_theta]) {
        // theta `theorem3-step` sets theta, which an explicit modulus at 1 bit has no use for
        let explicit_modulus =
            matches!(spec, AlgorithmSpec::Moniqua { codec, .. } if codec.modulus.is_some());
        let warmups: &[Option<u64>] = if explicit_modulus {
            &[None]
        } else {
            &[None, Some(3)]
        };
        // momentum and weight decay on the noisy objective; plain SGD
        // on both (on the exact one, the step in the gradient's pass)
        let setups = [
            (
                &noisy,
                Sgd {
                    momentum: 0.9,
                    weight_decay: 1e-3,
                },
            ),
            (&noisy, Sgd::default()),
            (&exact, Sgd::default()),
        ];
        for (&warmup, (objective, sgd)) in warmups
            .iter()
            .flat_map(|w| setups.iter().map(move |s| (w, *s)))
        {
            let cfg = SimConfig {
                lr: 0.05,
                sgd,
                theta_warmup: warmup,
                theta_growth: Some(3.0),
                ..SimConfig::default()
            };
            let run = |fused: bool, blocks: bool| {
                let ring = Topology::ring(n).unwrap();
                let mut sim =
                    Simulator::new(objective, ring, spec, cfg.clone(), &vec![0.0; d]).unwrap();
                assert!(sim.fused, "{} sends without its step", spec.name());
                // several blocks, the last one partial
                sim.block = if blocks { 1024 } else { 0 };
                if !fused {
                    sim.fused = false;
                    for lane in &mut sim.lanes {
                        lane.delta = vec![0.0; d];
                    }
                }
                let reports = sim.run(12).unwrap();
                let models: Vec<Vec<f32>> = (0..n).map(|i| sim.model(i).to_vec()).collect();
                (reports, models)
            };
            let fused = run(true, true);
            assert_eq!(fused, run(true, false), "{} in blocks", spec.name());
            assert_eq!(fused, run(false, false), "{}", spec.name());
            if std::ptr::eq(spec, &tiny_theta) && warmup.is_none() {
                // theta grew mid-run, so early frames were thrown away and re-sent
                assert!(fused.0.iter().any(|r| r.mismatched > 0));
                assert!(fused.0.last().unwrap().mismatched == 0);
            }
        }
    }
}
