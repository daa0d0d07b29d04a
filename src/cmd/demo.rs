//! `repro demo`: one exchange between two neighbouring workers, through every
//! codec, with real frames. Every number printed is measured on the frames
//! the codecs produced.

use std::time::Instant;

use anyhow::{Context, Result, ensure};
use clap::Args;
use repro_codec::{
    Compression, DecodeTarget, FullPrecision, MoniquaCodec, MoniquaConfig, Rounding,
    StochasticCodec, StochasticConfig, Verification,
};

/// Options of `repro demo`.
#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Model size d (ResNet20 has ~270k parameters, ResNet110 ~1.7M).
    #[arg(long, default_value_t = 270_000)]
    pub d: usize,
    /// Moniqua's a priori consensus bound theta (the paper uses 2.0).
    #[arg(long, default_value_t = 2.0)]
    pub theta: f64,
    /// How far apart the two workers' models are, as a fraction of theta.
    #[arg(long, default_value_t = 0.5)]
    pub spread: f64,
    /// Seed of the synthetic models and of the shared dither.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Also entropy-code the payloads with zstd at this level.
    #[arg(long)]
    pub zstd: Option<i32>,
}

/// A deterministic pseudo-random model: smooth structure plus noise, like
/// trained weights.
fn synthetic_model(d: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..d)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let noise = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            0.2 * ((i as f32) * 1e-3).sin() + 0.1 * noise
        })
        .collect()
}

struct Line {
    codec: String,
    bytes: usize,
    max_err: f32,
    bound: Option<f64>,
    check: &'static str,
    micros: f64,
}

/// The largest coordinate-wise difference of `a` and `b`.
fn max_err(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max)
}

/// Sends `sender` through every codec once and decodes it at `receiver`:
/// a line per codec.
fn exchange(
    args: &DemoArgs,
    compression: Compression,
    sender: &[f32],
    receiver: &[f32],
) -> Result<Vec<Line>> {
    let mut lines = Vec::new();
    let mut frame = Vec::new();
    let mut out = vec![0f32; args.d];

    let full = FullPrecision { compression };
    let t = Instant::now();
    full.encode(sender, 0, 0, &mut frame)?;
    full.decode(&frame, &mut out)?;
    lines.push(Line {
        codec: "f32 (D-PSGD, AllReduce)".into(),
        bytes: frame.len(),
        max_err: max_err(sender, &out),
        bound: Some(0.0),
        check: "-",
        micros: t.elapsed().as_secs_f64() * 1e6,
    });

    for bits in [1u32, 2, 8] {
        let rounding = if bits == 1 {
            Rounding::Nearest
        } else {
            Rounding::Stochastic
        };
        let cfg = MoniquaConfig {
            bits,
            rounding,
            theta: args.theta,
            compression,
            ..MoniquaConfig::default()
        };
        let codec =
            MoniquaCodec::new(&cfg, args.seed).with_context(|| format!("moniqua {bits}-bit"))?;
        let t = Instant::now();
        codec.encode(sender, 0, 0, None, &mut frame)?;
        let d = codec.decode(&frame, receiver, DecodeTarget::Out(&mut out))?;
        lines.push(Line {
            codec: format!("moniqua {bits}-bit {rounding}"),
            bytes: frame.len(),
            max_err: max_err(sender, &out),
            bound: Some(codec.error_bound()),
            check: match d.verification {
                Verification::Verified => "verified",
                Verification::Mismatch => "MISMATCH",
                Verification::Unchecked => "-",
            },
            micros: t.elapsed().as_secs_f64() * 1e6,
        });
    }
    for bits in [1u32, 2, 8] {
        let cfg = StochasticConfig {
            bits,
            compression,
            ..StochasticConfig::default()
        };
        let codec = StochasticCodec::new(&cfg, args.seed)?;
        let t = Instant::now();
        codec.encode(sender, 0, 0, None, &mut frame)?;
        codec.decode(&frame, &mut out)?;
        lines.push(Line {
            codec: format!("baseline {bits}-bit stochastic"),
            bytes: frame.len(),
            max_err: max_err(sender, &out),
            bound: None,
            check: "-",
            micros: t.elapsed().as_secs_f64() * 1e6,
        });
    }

    Ok(lines)
}

/// The table of `lines` for a model of `d` values.
fn print_lines(lines: &[Line], d: usize) {
    println!(
        "{:<32} {:>11} {:>11} {:>11} {:>11} {:>9} {:>10}",
        "codec", "wire bytes", "bits/value", "max |err|", "bound", "hash", "enc+dec us"
    );
    for l in lines {
        println!(
            "{:<32} {:>11} {:>11.3} {:>11.5} {:>11} {:>9} {:>10.0}",
            l.codec,
            l.bytes,
            l.bytes as f64 * 8.0 / d as f64,
            l.max_err,
            l.bound.map_or("-".to_string(), |b| format!("{b:.5}")),
            l.check,
            l.micros
        );
    }
}

pub(crate) fn run(args: &DemoArgs) -> Result<()> {
    ensure!(args.d > 0, "--d must be positive");
    ensure!(
        args.spread >= 0.0 && args.spread.is_finite(),
        "--spread must be a non-negative number"
    );
    let compression = match args.zstd {
        Some(level) => Compression::zstd(level).context("invalid --zstd")?,
        None => Compression::None,
    };
    let sender = synthetic_model(args.d, args.seed);
    let noise = synthetic_model(args.d, args.seed ^ 0xABCD);
    // receiver's model: within spread * theta of the sender's, coordinate-wise
    let receiver: Vec<f32> = sender
        .iter()
        .zip(&noise)
        .map(|(x, n)| {
            x + (2.0 * n / 0.3).clamp(-1.0, 1.0) * (args.spread * args.theta) as f32 * 0.999
        })
        .collect();
    let lines = exchange(args, compression, &sender, &receiver)?;
    println!(
        "one exchange of a d = {} model; receiver within {} x theta (theta = {}){}",
        args.d,
        args.spread,
        args.theta,
        if args.zstd.is_some() { ", zstd" } else { "" }
    );
    print_lines(&lines, args.d);
    if args.spread >= 1.0 {
        println!(
            "spread >= 1: the models are farther apart than theta, so Moniqua's recovery is not guaranteed;"
        );
        println!("the hash column shows whether the receiver caught it.");
    }
    Ok(())
}
