//! Property tests of the codec: Lemma 2's recovery bound, hash verification,
//! unbiasedness of stochastic rounding, packing round trips, and frame
//! decoding that never panics.

use proptest::prelude::*;
use repro_codec::frame::HEADER_LEN;
use repro_codec::pack::{pack, packed_len, unpack};
use repro_codec::{
    Compression, DecodeTarget, FixedCodec, FixedConfig, FullPrecision, MoniquaCodec, MoniquaConfig,
    Rounding, StochasticCodec, StochasticConfig, Verification,
};

fn moniqua_config() -> impl Strategy<Value = MoniquaConfig> {
    (1u32..=8, any::<bool>(), 0.01f64..10.0, any::<bool>()).prop_map(
        |(bits, nearest, theta, zstd)| {
            MoniquaConfig {
                bits,
                // 1-bit stochastic rounding has delta = 1/2 and no B_theta
                rounding: if nearest || bits == 1 {
                    Rounding::Nearest
                } else {
                    Rounding::Stochastic
                },
                theta,
                compression: if zstd {
                    Compression::Zstd { level: 1 }
                } else {
                    Compression::None
                },
                ..MoniquaConfig::default()
            }
        },
    )
}

/// A receiver model y and a sender model x with |x - y| < 0.999 theta.
fn models(theta: f64, n: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    let t = (0.999 * theta) as f32;
    proptest::collection::vec((-50.0f32..50.0, -1.0f32..1.0), n).prop_map(move |pairs| {
        let y: Vec<f32> = pairs.iter().map(|p| p.0).collect();
        let x: Vec<f32> = pairs.iter().map(|p| p.0 + p.1 * t).collect();
        (x, y)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Lemma 2: if |x - y| < theta then |x_hat - x| <= delta * B_theta, and the
    /// recovered integer codes hash to the sender's.
    #[test]
    fn lemma2_recovery_bound(
        (cfg, (x, y), seed, iteration) in moniqua_config().prop_flat_map(|cfg| {
            let theta = cfg.theta;
            (Just(cfg), (1usize..3000).prop_flat_map(move |n| models(theta, n)), any::<u64>(), any::<u64>())
        })
    ) {
        let codec = MoniquaCodec::new(&cfg, seed).unwrap();
        let mut frame = Vec::new();
        let mut own = vec![0.0; x.len()];
        let enc = codec.encode(&x, iteration, 3, Some(&mut own), &mut frame).unwrap();
        prop_assert_eq!(enc.header.frame_len(), frame.len());
        let mut x_hat = vec![0.0; x.len()];
        let d = codec.decode(&frame, &y, DecodeTarget::Out(&mut x_hat)).unwrap();
        prop_assert_eq!(d.verification, Verification::Verified);
        // f32 arithmetic on values up to ~60 adds a few ulps
        let bound = codec.error_bound() + 2e-5;
        for i in 0..x.len() {
            let err = f64::from((x_hat[i] - x[i]).abs());
            prop_assert!(err <= bound, "i={} x={} y={} x_hat={} err={} bound={}", i, x[i], y[i], x_hat[i], err, bound);
            // the receiver sees exactly the sender's local biased term
            prop_assert_eq!(x_hat[i], own[i]);
        }
    }

    /// A theta that is too small is caught: a coordinate farther than
    /// B/2 + 2 steps from the receiver's model is recovered in the wrong turn
    /// of the circle, and the hash says so.
    #[test]
    fn too_small_theta_is_caught_by_the_hash(
        cfg in moniqua_config(),
        n in 1usize..2000,
        at in any::<prop::sample::Index>(),
        turns in 0.0f64..20.0,
        negative in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let codec = MoniquaCodec::new(&cfg, seed).unwrap();
        let b = f64::from(codec.modulus());
        let y: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut x = y.clone();
        let i = at.index(n);
        let far = b / 2.0 + 2.0 * f64::from(codec.step()) + turns * b;
        x[i] += if negative { -far } else { far } as f32;
        let mut frame = Vec::new();
        codec.encode(&x, 0, 0, None, &mut frame).unwrap();
        let mut x_hat = vec![0.0; n];
        let d = codec.decode(&frame, &y, DecodeTarget::Out(&mut x_hat)).unwrap();
        prop_assert_eq!(d.verification, Verification::Mismatch);
        prop_assert!((x_hat[i] - x[i]).abs() > codec.modulus() / 4.0);
    }

    /// Packing round-trips for every width and length.
    #[test]
    fn packing_round_trips(bits in 1u32..=32, codes in proptest::collection::vec(any::<u32>(), 0..500)) {
        let mut bytes = vec![0u8; packed_len(codes.len(), bits)];
        pack(&codes, bits, &mut bytes);
        let mut back = vec![0u32; codes.len()];
        unpack(&bytes, bits, &mut back);
        let mask = ((1u64 << bits) - 1) as u32;
        for (a, b) in codes.iter().zip(&back) {
            prop_assert_eq!(a & mask, *b);
        }
        // exactly ceil(n b / 8) bytes with zero padding
        if let Some(last) = bytes.last() {
            let used = (codes.len() * bits as usize) % 8;
            if used != 0 {
                prop_assert_eq!(last >> used, 0);
            }
        }
    }

    /// The baselines' quantizer lands on its grid and round-trips through a frame.
    #[test]
    fn stochastic_round_trip(
        bits in 1u32..=8,
        bucket in 1usize..300,
        x in proptest::collection::vec(-1e3f32..1e3, 0..2000),
        zstd in any::<bool>(),
    ) {
        let cfg = StochasticConfig {
            bits,
            bucket,
            compression: if zstd { Compression::Zstd { level: 1 } } else { Compression::None },
        };
        let codec = StochasticCodec::new(&cfg, 9).unwrap();
        let mut frame = Vec::new();
        let mut own = vec![0.0; x.len()];
        codec.encode(&x, 1, 2, Some(&mut own), &mut frame).unwrap();
        if !zstd {
            prop_assert_eq!(frame.len(), codec.frame_len(x.len()));
        }
        let mut out = vec![0.0; x.len()];
        codec.decode(&frame, &mut out).unwrap();
        prop_assert_eq!(&out, &own);
        for (k, (xb, ob)) in x.chunks(bucket).zip(out.chunks(bucket)).enumerate() {
            let s = xb.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let width = 2.0 * s / ((1u32 << bits) - 1) as f32;
            for (v, o) in xb.iter().zip(ob) {
                prop_assert!((v - o).abs() <= width * 1.0001 + 1e-6, "bucket {} v={} o={} width={}", k, v, o, width);
                prop_assert!(o.abs() <= s * 1.0001);
            }
        }
    }

    /// The fixed-precision quantizer's error bound: inside its range every
    /// value lands on one of its two neighbouring levels, less than a step
    /// away, however large the values sent; beyond it, on the end level,
    /// and counted. It round-trips through a frame.
    #[test]
    fn fixed_precision_error_is_below_a_step_in_range(
        bits in 1u32..=8,
        step in 1e-3f32..10.0,
        scale in 1e-3f32..1e3,
        x in proptest::collection::vec(-1.5f32..1.5, 0..2000),
        zstd in any::<bool>(),
    ) {
        let cfg = FixedConfig {
            bits,
            step,
            compression: if zstd { Compression::Zstd { level: 1 } } else { Compression::None },
        };
        let codec = FixedCodec::new(&cfg, 5).unwrap();
        let x: Vec<f32> = x.iter().map(|v| v * scale).collect();
        let mut frame = Vec::new();
        let mut own = vec![0.0; x.len()];
        let e = codec.encode(&x, 4, 1, Some(&mut own), &mut frame).unwrap();
        if !zstd {
            prop_assert_eq!(frame.len(), codec.frame_len(x.len()));
        }
        let mut out = vec![0.0; x.len()];
        codec.decode(&frame, &mut out).unwrap();
        prop_assert_eq!(&out, &own);
        let r = codec.range();
        let mut beyond = 0;
        for (v, o) in x.iter().zip(&out) {
            // a level: (k + 1/2) step, within the range
            let k = o / step - 0.5;
            prop_assert!((k - k.round()).abs() < 1e-3, "{} is no level of step {}", o, step);
            prop_assert!(o.abs() <= r * 1.0001, "{} beyond the range {}", o, r);
            if v.abs() <= r {
                prop_assert!((v - o).abs() < step * 1.0001, "v={} o={} step={}", v, o, step);
            } else {
                beyond += 1;
                prop_assert_eq!(o.signum(), v.signum());
                prop_assert!((o.abs() - r).abs() <= r * 1e-4, "{} not the end level {}", o, r);
            }
        }
        prop_assert_eq!(e.saturated, beyond);
    }

    /// No input makes frame parsing or any decoder panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        repro_codec::fuzzing::frame_decode(&bytes);
    }

    /// Nor does a valid frame with arbitrary corruption: header fields that
    /// still parse, but lie about lengths, kinds, flags or scales.
    #[test]
    fn corrupted_frames_never_panic(
        kind in 0usize..=repro_codec::CODECS.len(),
        which in any::<prop::sample::Index>(),
        n in 0usize..300,
        zstd in any::<bool>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let x: Vec<f32> = (0..n).map(|i| (i as f32 * 0.1).cos()).collect();
        let compression = if zstd { Compression::Zstd { level: 1 } } else { Compression::None };
        let mut frame = Vec::new();
        // every registered codec's frames, and Moniqua's and the
        // entropy-coded ones, which the registry's codecs do not write
        let codecs = repro_codec::CODECS.get(kind).map_or(Vec::new(), |(_, c)| c(None));
        if zstd || codecs.is_empty() {
            let cfg = MoniquaConfig { bits: 3, compression, ..MoniquaConfig::default() };
            if kind % 2 == 0 {
                FullPrecision { compression }.encode(&x, 0, 0, &mut frame).unwrap();
            } else {
                MoniquaCodec::new(&cfg, 0).unwrap().encode(&x, 0, 0, None, &mut frame).unwrap();
            }
        } else {
            let codec = &codecs[which.index(codecs.len())];
            prop_assume!(codec.encode_frame(&x, 0, 0, None, &mut frame).is_ok());
        }
        for (at, byte) in edits {
            let i = at.index(frame.len());
            frame[i] = byte;
        }
        if truncate {
            frame.truncate(cut.index(frame.len() + 1));
        }
        repro_codec::fuzzing::frame_decode(&frame);
    }

    /// Full precision is bit-exact.
    #[test]
    fn sparsifiers_round_trip_and_contract(
        v in proptest::collection::vec(-1e3f32..1e3, 1..300),
        k in 1u32..40,
        top in any::<bool>(),
        iteration in 0u64..1000,
    ) {
        use repro_codec::{Keep, Select, SparseCodec, SparseConfig};
        let cfg = SparseConfig {
            select: if top { Select::Top } else { Select::Random },
            keep: Keep::Count(k),
            unbiased: false,
            compression: Compression::None,
        };
        let c = SparseCodec::new(&cfg, 5).unwrap();
        let (mut f, mut own, mut out) = (Vec::new(), vec![0f32; v.len()], vec![1f32; v.len()]);
        c.encode(&v, iteration, 3, Some(&mut own), &mut f).unwrap();
        prop_assert_eq!(f.len(), c.frame_len(v.len()));
        c.decode(&f, &mut out).unwrap();
        prop_assert_eq!(&out, &own);
        let kept = c.kept(v.len());
        prop_assert_eq!(kept, (k as usize).min(v.len()));
        // every output is the input or zero
        for (o, x) in out.iter().zip(&v) {
            prop_assert!(*o == *x || *o == 0.0);
        }
        let err: f64 = out.iter().zip(&v).map(|(o, x)| f64::from(o - x).powi(2)).sum();
        let norm: f64 = v.iter().map(|x| f64::from(*x).powi(2)).sum();
        if top {
            // top-k: the k largest, so at most (1 - k/d) of the squared norm is lost
            let bound = (1.0 - kept as f64 / v.len() as f64) * norm;
            prop_assert!(err <= bound * (1.0 + 1e-9) + 1e-9, "{} > {}", err, bound);
            let smallest_kept = out.iter().filter(|o| **o != 0.0).fold(f32::INFINITY, |m, o| m.min(o.abs()));
            let largest_dropped = out.iter().zip(&v).filter(|(o, _)| **o == 0.0).fold(0.0f32, |m, (_, x)| m.max(x.abs()));
            prop_assert!(kept == v.len() || smallest_kept == f32::INFINITY || largest_dropped <= smallest_kept);
        }
    }

    #[test]
        fn full_precision_round_trip(x in proptest::collection::vec(any::<f32>(), 0..500)) {
        let mut frame = Vec::new();
        FullPrecision::default().encode(&x, 0, 0, &mut frame).unwrap();
        let mut out = vec![0.0; x.len()];
        FullPrecision::default().decode(&frame, &mut out).unwrap();
        for (a, b) in x.iter().zip(&out) {
            prop_assert_eq!(a.to_bits(), b.to_bits());
        }
    }
}

/// Stochastic rounding is unbiased: averaged over many iterations (fresh
/// dither each), the dequantized value converges to the input. The tolerance
/// is five standard errors of the mean, so a biased rounding (for example
/// nearest, or a dither that is not uniform) fails.
#[test]
fn stochastic_rounding_is_unbiased() {
    let draws = 4000;
    let x: Vec<f32> = (0..257).map(|i| ((i as f32) * 0.731).sin() * 3.0).collect();
    for bits in [1u32, 2, 4, 8] {
        let cfg = StochasticConfig {
            bits,
            bucket: 64,
            compression: Compression::None,
        };
        let codec = StochasticCodec::new(&cfg, 17).unwrap();
        let mut sum = vec![0.0f64; x.len()];
        let mut frame = Vec::new();
        let mut out = vec![0.0; x.len()];
        for it in 0..draws {
            codec.encode(&x, it, 0, None, &mut frame).unwrap();
            codec.decode(&frame, &mut out).unwrap();
            for (s, o) in sum.iter_mut().zip(&out) {
                *s += f64::from(*o);
            }
        }
        for (k, xb) in x.chunks(64).enumerate() {
            let s = f64::from(xb.iter().fold(0.0f32, |m, v| m.max(v.abs())));
            let width = 2.0 * s / f64::from((1u32 << bits) - 1);
            let tol = 5.0 * (width / 2.0) / (draws as f64).sqrt() + 1e-6;
            for (j, v) in xb.iter().enumerate() {
                let mean = sum[k * 64 + j] / draws as f64;
                assert!(
                    (mean - f64::from(*v)).abs() <= tol,
                    "bits={bits} i={}: mean {mean} vs {v}, tol {tol}",
                    k * 64 + j
                );
            }
        }
    }
}

/// The fixed-precision quantizer is unbiased inside its range, at every
/// magnitude: the mean of many draws is the value, within five standard
/// errors (its variance is at most step^2 / 4).
#[test]
fn fixed_precision_rounding_is_unbiased_in_range() {
    let draws = 4000;
    for (bits, step) in [(1u32, 8.0f32), (2, 2.0), (4, 0.5), (8, 0.01)] {
        let cfg = FixedConfig {
            bits,
            step,
            compression: Compression::None,
        };
        let codec = FixedCodec::new(&cfg, 23).unwrap();
        let r = codec.range();
        let x: Vec<f32> = (0..257).map(|i| ((i as f32) * 0.731).sin() * r).collect();
        let mut sum = vec![0.0f64; x.len()];
        let mut frame = Vec::new();
        let mut out = vec![0.0; x.len()];
        for it in 0..draws {
            codec.encode(&x, it, 0, None, &mut frame).unwrap();
            codec.decode(&frame, &mut out).unwrap();
            for (s, o) in sum.iter_mut().zip(&out) {
                *s += f64::from(*o);
            }
        }
        let tol = 5.0 * (f64::from(step) / 2.0) / (draws as f64).sqrt() + 1e-6;
        for (i, v) in x.iter().enumerate() {
            let mean = sum[i] / draws as f64;
            assert!(
                (mean - f64::from(*v)).abs() <= tol,
                "bits={bits} i={i}: mean {mean} vs {v}, tol {tol}"
            );
        }
    }
}

/// Moniqua's stochastic rounding is unbiased too: with exact recovery,
/// E[x_hat] = x, while nearest rounding keeps a systematic error.
#[test]
fn moniqua_stochastic_recovery_is_unbiased() {
    let draws = 4000u64;
    let x: Vec<f32> = (0..100).map(|i| ((i as f32) * 0.917).cos()).collect();
    let y: Vec<f32> = x.iter().map(|v| v + 0.3).collect();
    let cfg = MoniquaConfig {
        bits: 2,
        theta: 1.0,
        ..MoniquaConfig::default()
    };
    let codec = MoniquaCodec::new(&cfg, 23).unwrap();
    let step = f64::from(codec.step());
    let mut sum = vec![0.0f64; x.len()];
    let mut frame = Vec::new();
    let mut x_hat = vec![0.0; x.len()];
    for it in 0..draws {
        codec.encode(&x, it, 0, None, &mut frame).unwrap();
        let d = codec
            .decode(&frame, &y, DecodeTarget::Out(&mut x_hat))
            .unwrap();
        assert_eq!(d.verification, Verification::Verified);
        for (s, v) in sum.iter_mut().zip(&x_hat) {
            *s += f64::from(*v);
        }
    }
    let tol = 5.0 * (step / 2.0) / (draws as f64).sqrt();
    for (i, v) in x.iter().enumerate() {
        let mean = sum[i] / draws as f64;
        assert!(
            (mean - f64::from(*v)).abs() <= tol,
            "i={i}: {mean} vs {v}, tol {tol}"
        );
    }
    // control: nearest rounding is biased on the same data, so the test can fail
    let nearest = MoniquaCodec::new(
        &MoniquaConfig {
            rounding: Rounding::Nearest,
            ..cfg
        },
        23,
    )
    .unwrap();
    nearest.encode(&x, 0, 0, None, &mut frame).unwrap();
    nearest
        .decode(&frame, &y, DecodeTarget::Out(&mut x_hat))
        .unwrap();
    let biased = x
        .iter()
        .zip(&x_hat)
        .filter(|(a, b)| f64::from((*a - *b).abs()) > tol)
        .count();
    assert!(
        biased > x.len() / 2,
        "nearest rounding should be visibly biased"
    );
}

/// The wire size is what the issue promises: header plus dense bits.
#[test]
fn frame_sizes_are_dense() {
    let x = vec![0.1f32; 270_000];
    for bits in 1..=8u32 {
        let cfg = MoniquaConfig {
            bits,
            rounding: Rounding::Nearest,
            ..MoniquaConfig::default()
        };
        let mut frame = Vec::new();
        MoniquaCodec::new(&cfg, 0)
            .unwrap()
            .encode(&x, 0, 0, None, &mut frame)
            .unwrap();
        assert_eq!(frame.len(), HEADER_LEN + 270_000 * bits as usize / 8);
    }
}

/// Regression (found by `cargo fuzz`, frame_decode): a zstd-flagged frame whose
/// header claimed ~2^31 values made every decoder allocate the implied body
/// (2.6 GB) before checking the length against its own buffers. The length is
/// now checked first, so the error is a length mismatch, not a decompression
/// failure after a huge allocation.
#[test]
fn regression_lying_length_is_rejected_before_decompression() {
    let cfg = MoniquaConfig {
        bits: 8,
        compression: Compression::Zstd { level: 1 },
        ..MoniquaConfig::default()
    };
    let codec = MoniquaCodec::new(&cfg, 0).unwrap();
    let x = vec![0.0f32; 1000];
    let mut frame = Vec::new();
    let e = codec.encode(&x, 0, 0, None, &mut frame).unwrap();
    assert!(e.header.compressed);
    frame[8..12].copy_from_slice(&(u32::MAX / 2).to_le_bytes());
    let mut out = vec![0.0; 1000];
    let err = codec
        .decode(&frame, &x, DecodeTarget::Out(&mut out))
        .unwrap_err();
    assert!(
        matches!(
            err,
            repro_codec::CodecError::LengthMismatch { what: "frame", .. }
        ),
        "{err:?}"
    );
    let full = FullPrecision {
        compression: Compression::Zstd { level: 1 },
    };
    full.encode(&x, 0, 0, &mut frame).unwrap();
    frame[8..12].copy_from_slice(&(u32::MAX / 2).to_le_bytes());
    assert!(matches!(
        full.decode(&frame, &mut out),
        Err(repro_codec::CodecError::LengthMismatch { .. })
    ));
}

/// Encoders reuse the caller's buffer without zeroing it, so they must write
/// every byte: a frame encoded into a dirty, larger buffer equals one encoded
/// into a fresh buffer.
#[test]
fn encoding_into_a_dirty_buffer_writes_every_byte() {
    for len in [0usize, 1, 7, 63, 64, 65, 1000, 4097] {
        let x: Vec<f32> = (0..len).map(|i| ((i as f32) * 0.71).sin()).collect();
        let check = |encode: &dyn Fn(&mut Vec<u8>)| {
            let mut fresh = Vec::new();
            encode(&mut fresh);
            let mut dirty = vec![0xA5u8; fresh.len() + 100];
            encode(&mut dirty);
            assert_eq!(fresh, dirty, "len {len}");
            let mut same = vec![0x5Au8; fresh.len()];
            encode(&mut same);
            assert_eq!(fresh, same, "len {len}");
        };
        for bits in 1..=8 {
            let cfg = MoniquaConfig {
                bits,
                rounding: Rounding::Nearest,
                ..MoniquaConfig::default()
            };
            let m = MoniquaCodec::new(&cfg, 1).unwrap();
            check(&|out| {
                m.encode(&x, 3, 1, None, out).unwrap();
            });
        }
        for (_, codecs) in repro_codec::CODECS {
            for codec in codecs(None) {
                if codec.encode_frame(&x, 3, 1, None, &mut Vec::new()).is_ok() {
                    check(&|out| codec.encode_frame(&x, 3, 1, None, out).unwrap());
                }
            }
        }
        check(&|out| {
            FullPrecision::default().encode(&x, 3, 1, out).unwrap();
        });
        let z = FullPrecision {
            compression: Compression::Zstd { level: 1 },
        };
        check(&|out| {
            z.encode(&x, 3, 1, out).unwrap();
        });
    }
}

/// Every codec [`repro_codec::CODECS`] registers decodes what it encodes to
/// the values it reported (`own`), in a frame of exactly its `frame_len`,
/// which is the header plus the row's body length: the sizes the
/// algorithms' footprint and the byte tables count are the frames sent.
#[test]
fn every_registered_codec_round_trips_at_its_frame_len() {
    let mut tried = 0;
    for &(kind, codecs) in repro_codec::CODECS {
        for codec in codecs(None) {
            for len in [1usize, 5, 64, 1000, 3001] {
                let x: Vec<f32> = (0..len).map(|i| ((i as f32) * 0.37).sin() * 3.0).collect();
                let (mut frame, mut own, mut back) = (Vec::new(), vec![0f32; len], vec![0f32; len]);
                codec
                    .encode_frame(&x, 4, 2, Some(&mut own), &mut frame)
                    .unwrap_or_else(|e| panic!("{codec:?} at {len}: {e}"));
                let header = codec.decode_frame(&frame, &mut back).unwrap();
                assert_eq!(header.kind, kind, "{codec:?}");
                assert_eq!(back, own, "{codec:?} at {len}");
                assert_eq!(frame.len(), codec.frame_len(len), "{codec:?} at {len}");
                assert_eq!(
                    frame.len(),
                    repro_codec::frame::HEADER_LEN + header.raw_body_len(),
                    "{codec:?} at {len}"
                );
                tried += 1;
            }
        }
    }
    assert!(tried >= 5 * 20, "{tried} encodings");
    // every kind has codecs registered, but Moniqua's (its own tests)
    for layout in repro_codec::KINDS {
        let registered = repro_codec::CODECS
            .iter()
            .filter(|(k, _)| *k == layout.kind)
            .count();
        let want = usize::from(layout.kind != repro_codec::Kind::Moniqua);
        assert_eq!(registered, want, "kind {} in CODECS", layout.name);
    }
}
