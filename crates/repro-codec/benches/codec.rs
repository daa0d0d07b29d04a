//! Encode / decode throughput of the codec next to `memcpy` of the same buffer,
//! measured in the same run on one core (memcpy again beside each codec).
//!
//!     cargo bench -p repro-codec                       # table on stdout
//!     cargo bench -p repro-codec -- --json out.json    # also machine-readable
//!     cargo bench -p repro-codec -- --quick            # fewer repetitions
//!
//! Throughput is GB/s of f32 input (4 d bytes per call). Sizes are the
//! parameter counts of ResNet20 (~270k) and ResNet110 (~1.7M). The SIMD level
//! can be capped with `REPRO_CODEC_SIMD=baseline|avx2|avx512`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use repro_codec::simd;
use repro_codec::{
    DecodeTarget, MixTarget, MoniquaCodec, MoniquaConfig, Prefetch, Rounding, StochasticCodec,
    StochasticConfig,
};

const SIZES: [(&str, usize); 2] = [("resnet20", 270_000), ("resnet110", 1_700_000)];
const BITS: [u32; 3] = [1, 2, 8];

/// Median seconds per call of `f`, over `reps` timed batches after warm-up.
fn time<F: FnMut()>(mut f: F, reps: usize) -> f64 {
    for _ in 0..3 {
        f();
    }
    // batch enough calls to make one sample ~2 ms
    let t = Instant::now();
    f();
    let one = t.elapsed().max(Duration::from_nanos(100));
    let batch = (2e-3 / one.as_secs_f64()).ceil().max(1.0) as usize;
    let mut samples: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                f();
            }
            t.elapsed().as_secs_f64() / batch as f64
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

struct Row {
    model: &'static str,
    d: usize,
    codec: String,
    bits: u32,
    memcpy: f64,
    encode: f64,
    decode: f64,
}

fn gbps(d: usize, secs: f64) -> f64 {
    (4 * d) as f64 / secs / 1e9
}

/// Moniqua's receive with two neighbours (a ring): `MoniquaCodec::mix` in
/// one pass against the separate passes it replaces (an encode for the
/// local term, two accumulating decodes, the update), GB/s of model.
fn receive_table(reps: usize) {
    println!();
    println!(
        "{:<10} {:>9} {:<26} {:>4} {:>10} {:>10} {:>7}",
        "model", "d", "moniqua receive, 2 nbrs", "bits", "mix GB/s", "sep. GB/s", "ratio"
    );
    for (model, d) in SIZES {
        let x: Vec<f32> = (0..d).map(|i| ((i as f32) * 0.001).sin() * 0.5).collect();
        let delta = vec![1e-3f32; d];
        for bits in BITS {
            let cfg = MoniquaConfig {
                bits,
                rounding: Rounding::Stochastic,
                modulus: (bits == 1).then_some(4.0),
                ..MoniquaConfig::default()
            };
            let codec = MoniquaCodec::new(&cfg, 1).unwrap();
            let (mut f1, mut f2) = (Vec::new(), Vec::new());
            codec.encode(&x, 1, 1, None, &mut f1).unwrap();
            codec.encode(&x, 1, 2, None, &mut f2).unwrap();
            let inbox = [(&f1[..], 1.0f32 / 3.0), (&f2[..], 1.0 / 3.0)];
            let mut out = vec![0f32; d];
            let mut acc = vec![0f32; d];
            let mut own_frame = Vec::new();
            let mix = time(
                || {
                    codec
                        .mix(
                            MixTarget::Out {
                                x: black_box(&x),
                                out: &mut out,
                            },
                            1,
                            0,
                            &inbox,
                            &delta,
                            Prefetch::NONE,
                        )
                        .unwrap();
                },
                reps,
            );
            let separate = time(
                || {
                    // encode builds the local term (and a frame, unused)
                    codec
                        .encode(black_box(&x), 1, 0, Some(&mut acc), &mut own_frame)
                        .unwrap();
                    acc.iter_mut().for_each(|a| *a *= -2.0 / 3.0);
                    for &(f, w) in &inbox {
                        codec
                            .decode(
                                f,
                                &x,
                                DecodeTarget::Add {
                                    acc: &mut acc,
                                    weight: w,
                                },
                            )
                            .unwrap();
                    }
                    for ((o, &x), (&a, &d)) in out.iter_mut().zip(&x).zip(acc.iter().zip(&delta)) {
                        *o = x + (a - d);
                    }
                },
                reps,
            );
            println!(
                "{:<10} {:>9} {:<26} {:>4} {:>10.2} {:>10.2} {:>7.2}",
                model,
                d,
                "moniqua-stochastic",
                bits,
                gbps(d, mix),
                gbps(d, separate),
                separate / mix
            );
        }
    }
}

/// The memory floor of a decode at each size: `memcpy` next to the
/// cheapest loop that reads one buffer and writes another with ordinary
/// stores (`out = 2 x`), which any decode does at least (it reads the local
/// model and writes the recovered one). `memcpy` can move the bytes faster:
/// at these sizes it writes whole cache lines without first reading them
/// (`rep movsb`), which a store of computed values cannot do.
fn floor_table(reps: usize) {
    println!();
    println!(
        "{:<10} {:>9} {:>12} {:>12} {:>14}",
        "model", "d", "memcpy GB/s", "x2 GB/s", "x2 / memcpy"
    );
    for (model, d) in SIZES {
        let x: Vec<f32> = (0..d).map(|i| i as f32).collect();
        let mut out = vec![0f32; d];
        let mut pairs: Vec<(f64, f64)> = (0..5)
            .map(|_| {
                let m = time(|| out.copy_from_slice(black_box(&x)), reps);
                let s = time(
                    || {
                        for (o, &v) in out.iter_mut().zip(black_box(&x)) {
                            *o = v * 2.0;
                        }
                    },
                    reps,
                );
                black_box(&out);
                (m, s)
            })
            .collect();
        pairs.sort_by(|a, b| (a.0 / a.1).total_cmp(&(b.0 / b.1)));
        let (m, s) = pairs[pairs.len() / 2];
        println!(
            "{:<10} {:>9} {:>12.2} {:>12.2} {:>14.2}",
            model,
            d,
            gbps(d, m),
            gbps(d, s),
            m / s
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let reps = if args.iter().any(|a| a == "--quick") {
        7
    } else {
        31
    };
    println!(
        "simd level: {} (detected: {})",
        simd::level().name(),
        simd::detected().name()
    );
    let mut rows = Vec::new();
    for (model, d) in SIZES {
        // a model and a neighbour within theta of it
        let x: Vec<f32> = (0..d).map(|i| ((i as f32) * 0.001).sin() * 0.5).collect();
        let y: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, v)| v + ((i % 97) as f32 - 48.0) * 1e-3)
            .collect();
        let mut copy = vec![0f32; d];
        // memcpy again beside every codec, so a slow spell of a shared
        // machine slows both sides of the ratio
        let mut memcpy = || {
            let t = time(|| copy.copy_from_slice(black_box(&x)), reps);
            black_box(&copy);
            t
        };
        let mut frame = Vec::new();
        let mut out = vec![0f32; d];
        let mut it = 0u64;
        for bits in BITS {
            for hash in [true, false] {
                let cfg = MoniquaConfig {
                    bits,
                    // 1-bit stochastic rounding has delta = 1/2: no B_theta
                    rounding: if bits == 1 {
                        Rounding::Nearest
                    } else {
                        Rounding::Stochastic
                    },
                    hash,
                    ..MoniquaConfig::default()
                };
                let codec = MoniquaCodec::new(&cfg, 1).unwrap();
                let memcpy = memcpy();
                let encode = time(
                    || {
                        it += 1;
                        codec
                            .encode(black_box(&x), it, 0, None, &mut frame)
                            .unwrap();
                    },
                    reps,
                );
                let decode = time(
                    || {
                        codec
                            .decode(black_box(&frame), &y, DecodeTarget::Out(&mut out))
                            .unwrap();
                    },
                    reps,
                );
                let name = format!(
                    "moniqua-{}{}",
                    cfg.rounding,
                    if hash { "+hash" } else { "" }
                );
                rows.push(Row {
                    model,
                    d,
                    codec: name,
                    bits,
                    memcpy,
                    encode,
                    decode,
                });
            }

            let scfg = StochasticConfig {
                bits,
                ..StochasticConfig::default()
            };
            let sc = StochasticCodec::new(&scfg, 1).unwrap();
            let memcpy = memcpy();
            let encode = time(
                || {
                    it += 1;
                    sc.encode(black_box(&x), it, 0, None, &mut frame).unwrap();
                },
                reps,
            );
            let decode = time(
                || {
                    sc.decode(black_box(&frame), &mut out).unwrap();
                },
                reps,
            );
            let codec = "stochastic-bucket1024".to_string();
            rows.push(Row {
                model,
                d,
                codec,
                bits,
                memcpy,
                encode,
                decode,
            });
        }
    }
    println!(
        "{:<10} {:>9} {:<26} {:>4} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "model", "d", "codec", "bits", "memcpy", "encode", "decode", "enc+dec", "enc+dec /"
    );
    println!(
        "{:<10} {:>9} {:<26} {:>4} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "", "", "", "", "GB/s", "GB/s", "GB/s", "GB/s", "memcpy"
    );
    for r in &rows {
        let both = gbps(r.d, r.encode + r.decode);
        println!(
            "{:<10} {:>9} {:<26} {:>4} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2}",
            r.model,
            r.d,
            r.codec,
            r.bits,
            gbps(r.d, r.memcpy),
            gbps(r.d, r.encode),
            gbps(r.d, r.decode),
            both,
            both / gbps(r.d, r.memcpy)
        );
    }
    receive_table(reps);
    floor_table(reps);
    if let Some(path) = json {
        let body: Vec<String> = rows
            .iter()
            .map(|r| {
                format!(
                    "  {{\"model\": \"{}\", \"d\": {}, \"codec\": \"{}\", \"bits\": {}, \"memcpy_s\": {:e}, \"encode_s\": {:e}, \"decode_s\": {:e}, \"simd\": \"{}\"}}",
                    r.model,
                    r.d,
                    r.codec,
                    r.bits,
                    r.memcpy,
                    r.encode,
                    r.decode,
                    simd::level().name()
                )
            })
            .collect();
        std::fs::write(&path, format!("[\n{}\n]\n", body.join(",\n"))).expect("write --json file");
        eprintln!("wrote {path}");
    }
}
