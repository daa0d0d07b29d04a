//! The check every algorithm passes when its compression is the identity
//! (`compressor: full`, consensus step 1): its models equal full-precision
//! gossip, either D-PSGD's order (`x <- W x - lr g`) or gossip after the
//! local step (`x <- W (x - lr g)`), or the algorithm is listed with the
//! reason it has no such form. A new name in `ALGORITHM_NAMES` fails this
//! test until it is classified here: that is how a new algorithm is checked
//! against D-PSGD (docs/extending.md).

use repro_algos::{
    ALGORITHM_NAMES, AlgorithmSpec, Knobs, Objective, Quadratic, SimConfig, Simulator, Topology,
};

/// What an algorithm reduces to without compression.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    /// D-PSGD: gossip, then the local gradient step.
    DPsgd,
    /// The local step, then gossip (CHOCO-SGD, DeepSqueeze).
    GossipAfterStep,
    /// Exact averaging every iteration (all-reduce SGD).
    AllReduce,
    /// No identity form; why.
    None(&'static str),
}

/// Every algorithm `AlgorithmSpec::from_name` knows, classified.
const FORMS: &[(&str, Form)] = &[
    ("allreduce", Form::AllReduce),
    ("allreduce-mpi", Form::AllReduce),
    ("allreduce-rhd", Form::AllReduce),
    ("d-psgd", Form::DPsgd),
    ("naive", Form::DPsgd),
    (
        "naive-grid",
        Form::None("Theorem 1's grid quantizer is its point; it has no `full`"),
    ),
    (
        "moniqua",
        Form::None("modulo quantization is its own codec, not the `compressor` knob"),
    ),
    ("dcd", Form::DPsgd),
    ("ecd", Form::DPsgd),
    ("choco", Form::GossipAfterStep),
    ("deepsqueeze", Form::GossipAfterStep),
    (
        "d2",
        Form::None("D² corrects with the previous iterate and gradient: another algorithm"),
    ),
    ("moniqua-d2", Form::None("Moniqua's codec on D²")),
    (
        "psgd",
        Form::None("averages every `period` iterations, not every one"),
    ),
    (
        "pqasgd",
        Form::None("averages every `period` iterations, not every one"),
    ),
    (
        "rsgd",
        Form::None("averages one slice of the model per iteration"),
    ),
    (
        "qsgd",
        Form::None("its gradient quantizer is QSGD at `levels`; `compressor` does not reach it"),
    ),
    (
        "terngrad",
        Form::None("its ternary gradient quantizer is fixed"),
    ),
];

const N: usize = 6;
const D: usize = 30;
const STEPS: usize = 100;
const LR: f32 = 0.1;

fn objective() -> Quadratic {
    let targets = (0..N)
        .map(|i| {
            (0..D)
                .map(|j| ((i * 7 + j * 3) % 11) as f32 / 11.0 - 0.5)
                .collect()
        })
        .collect();
    // no gradient noise: the references below are deterministic
    Quadratic::heterogeneous(targets, 0.0)
}

/// The models after `STEPS` of `spec`.
fn models(spec: &AlgorithmSpec, objective: &Quadratic, ring: &Topology) -> Vec<Vec<f64>> {
    let cfg = SimConfig {
        lr: LR,
        seed: 4,
        ..SimConfig::default()
    };
    let mut sim = Simulator::new(objective, ring.clone(), spec, cfg, &[0.3; D]).unwrap();
    sim.run(STEPS as u64).unwrap();
    (0..N)
        .map(|i| sim.model(i).iter().map(|&v| f64::from(v)).collect())
        .collect()
}

/// The reference of `form`, computed directly in f64.
fn reference(form: Form, objective: &Quadratic, ring: &Topology) -> Vec<Vec<f64>> {
    let mut x = vec![vec![0.3f64; D]; N];
    let mut rng = repro_algos::rng::Rng::new(0, 0);
    let grad = |i: usize, x: &[f64], rng: &mut repro_algos::rng::Rng| -> Vec<f64> {
        let xi: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut g = vec![0f32; D];
        objective.gradient(i, &xi, rng, &mut g);
        g.into_iter().map(f64::from).collect()
    };
    let mix = |x: &[Vec<f64>]| -> Vec<Vec<f64>> {
        (0..N)
            .map(|i| {
                (0..D)
                    .map(|k| (0..N).map(|j| ring.weight(i, j) * x[j][k]).sum())
                    .collect()
            })
            .collect()
    };
    let lr = f64::from(LR);
    for _ in 0..STEPS {
        let g: Vec<Vec<f64>> = (0..N).map(|i| grad(i, &x[i], &mut rng)).collect();
        x = match form {
            Form::DPsgd => mix(&x)
                .into_iter()
                .zip(&g)
                .map(|(xi, gi)| xi.iter().zip(gi).map(|(a, b)| a - lr * b).collect())
                .collect(),
            Form::GossipAfterStep => mix(&x
                .iter()
                .zip(&g)
                .map(|(xi, gi)| xi.iter().zip(gi).map(|(a, b)| a - lr * b).collect())
                .collect::<Vec<Vec<f64>>>()),
            Form::AllReduce => {
                let mean: Vec<f64> = (0..D)
                    .map(|k| (0..N).map(|i| x[i][k] - lr * g[i][k]).sum::<f64>() / N as f64)
                    .collect();
                vec![mean; N]
            }
            Form::None(_) => unreachable!(),
        };
    }
    x
}

fn worst(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn every_algorithm_without_compression_is_full_precision_gossip() {
    for name in ALGORITHM_NAMES {
        assert!(
            FORMS.iter().any(|(n, _)| *n == name),
            "`{name}` is not classified: add it to FORMS in tests/identity.rs with the form it \
             reduces to without compression (or why it has none)"
        );
    }
    let objective = objective();
    let ring = Topology::ring(N).unwrap();
    let knobs = Knobs {
        compressor: repro_runlog::CompressorKind::Full,
        gamma: 1.0,
        ..Knobs::default()
    };
    for &(name, form) in FORMS {
        if let Form::None(why) = form {
            assert!(!why.is_empty());
            continue;
        }
        let spec = AlgorithmSpec::from_name(name, &knobs).unwrap();
        let got = models(&spec, &objective, &ring);
        let want = reference(form, &objective, &ring);
        let err = worst(&got, &want);
        assert!(
            err < 1e-5,
            "{name} is not {form:?} without compression: {err}"
        );
        // and the reference is not trivially close to the other orders
        for other in [Form::DPsgd, Form::GossipAfterStep, Form::AllReduce] {
            if other != form {
                let apart = worst(&got, &reference(other, &objective, &ring));
                assert!(
                    apart > 1e-3,
                    "{name}: {form:?} and {other:?} agree ({apart})"
                );
            }
        }
    }
}
