use super::*;
use crate::centred_mod;

fn codec(bits: u32, rounding: Rounding, theta: f64) -> MoniquaCodec {
    let cfg = MoniquaConfig {
        bits,
        rounding,
        theta,
        ..MoniquaConfig::default()
    };
    MoniquaCodec::new(&cfg, 11).unwrap()
}

#[test]
fn modulus_from_theta_and_bits() {
    // 1-bit nearest: delta = 1/4, B = 2 theta / (1 - 1/2) = 4 theta.
    assert_eq!(codec(1, Rounding::Nearest, 2.0).modulus(), 8.0);
    // 2-bit stochastic: delta = 1/4 as well.
    assert_eq!(codec(2, Rounding::Stochastic, 2.0).modulus(), 8.0);
    // 8-bit stochastic: delta = 1/256.
    let c = codec(8, Rounding::Stochastic, 2.0);
    assert!((f64::from(c.modulus()) - 4.0 / (1.0 - 2.0 / 256.0)).abs() < 1e-6);
    // 1-bit stochastic under the other readings of B_theta: the modulus
    // follows theta, the codec's delta stays the rounding's bound
    for (reading, modulus) in [(BTheta::HalfStep, 8.0), (BTheta::Lemma1, 4.0)] {
        let cfg = MoniquaConfig {
            bits: 1,
            theta: 2.0,
            b_theta: reading,
            ..MoniquaConfig::default()
        };
        let c = MoniquaCodec::new(&cfg, 0).unwrap();
        assert_eq!((c.modulus(), c.delta(), c.theta()), (modulus, 0.5, 2.0));
    }
}

#[test]
fn one_bit_stochastic_is_rejected_with_the_key_to_set() {
    let cfg = MoniquaConfig {
        bits: 1,
        ..MoniquaConfig::default()
    };
    let err = MoniquaCodec::new(&cfg, 0).unwrap_err();
    assert!(matches!(err, ConfigError::DeltaTooLarge { .. }));
    let msg = err.to_string();
    assert!(msg.contains("`rounding: nearest`"), "{msg}");
    assert!(msg.contains("`modulus`"), "{msg}");
    assert!(msg.contains("`b_theta: half-step`"), "{msg}");
    // ... and accepted with an explicit modulus.
    let cfg = MoniquaConfig {
        modulus: Some(1.0),
        ..cfg
    };
    let c = MoniquaCodec::new(&cfg, 0).unwrap();
    assert_eq!(c.theta(), 0.0, "no recovery guarantee at delta = 1/2");
}

#[test]
fn explicit_delta_must_not_undercut_the_quantizer() {
    let cfg = MoniquaConfig {
        bits: 2,
        rounding: Rounding::Nearest,
        delta: Some(0.01),
        ..MoniquaConfig::default()
    };
    let err = MoniquaCodec::new(&cfg, 0).unwrap_err();
    assert!(err.to_string().contains("remove `delta`"), "{err}");
    let cfg = MoniquaConfig {
        delta: Some(0.25),
        ..cfg
    };
    // looser than the derived 1/8: B = 2 * 2 / 0.5
    assert_eq!(MoniquaCodec::new(&cfg, 0).unwrap().modulus(), 8.0);
    let cfg = MoniquaConfig {
        delta: Some(f64::NAN),
        ..cfg
    };
    assert!(MoniquaCodec::new(&cfg, 0).is_err());
}

#[test]
fn bad_theta_and_modulus_are_rejected() {
    for theta in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let cfg = MoniquaConfig {
            theta,
            ..MoniquaConfig::default()
        };
        assert!(matches!(
            MoniquaCodec::new(&cfg, 0),
            Err(ConfigError::InvalidTheta { .. })
        ));
    }
    let cfg = MoniquaConfig {
        modulus: Some(-2.0),
        ..MoniquaConfig::default()
    };
    assert!(matches!(
        MoniquaCodec::new(&cfg, 0),
        Err(ConfigError::InvalidModulus { .. })
    ));
}

/// The paper's formulas evaluated in f64, coordinate by coordinate.
fn paper_recover(q: f64, b: f64, y: f64) -> f64 {
    centred_mod(q * b - y, b) + y
}

#[test]
fn decode_equals_paper_formula() {
    let c = codec(3, Rounding::Stochastic, 0.5);
    let b = f64::from(c.modulus());
    let x: Vec<f32> = (0..3001).map(|i| ((i as f32) * 0.7).sin() * 5.0).collect();
    let y: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(i, v)| v + ((i as f32) * 1.3).cos() * 0.45)
        .collect();
    let mut own = vec![0.0; x.len()];
    let mut frame = Vec::new();
    c.encode(&x, 4, 0, Some(&mut own), &mut frame).unwrap();
    let mut rec = vec![0.0; x.len()];
    let d = c.decode(&frame, &y, DecodeTarget::Out(&mut rec)).unwrap();
    assert_eq!(d.verification, Verification::Verified);
    // Reconstruct the sent codes and apply the paper's formulas.
    let parsed = frame::read_frame(&frame, u32::MAX).unwrap();
    let mut codes = vec![0u32; x.len()];
    crate::pack::unpack(&parsed.body, 3, &mut codes);
    for i in 0..x.len() {
        let q = f64::from(codes[i]) / 8.0;
        let want = paper_recover(q, b, f64::from(y[i]));
        assert!(
            (want - f64::from(rec[i])).abs() < 1e-4,
            "i={i}: {want} vs {}",
            rec[i]
        );
        // local biased term: q B - (x mod B) + x, with q the sender's own code
        let xi = f64::from(x[i]);
        let own_paper = q * b - centred_mod(xi, b) + xi;
        // equal up to whole turns of B that the receiver's mod removes
        let turns = (own_paper - f64::from(own[i])) / b;
        assert!((turns - turns.round()).abs() < 1e-4, "i={i}");
        assert!((f64::from(own[i]) - xi).abs() <= c.error_bound() + 1e-4);
        // and the receiver recovers exactly the sender's biased term
        assert_eq!(rec[i], own[i], "i={i}");
    }
}

#[test]
fn local_term_is_the_encoders_without_a_frame() {
    for rounding in [Rounding::Stochastic, Rounding::Nearest] {
        let c = codec(2, rounding, 1.0);
        let x: Vec<f32> = (0..1001).map(|i| (i as f32 * 0.7).sin() * 9.0).collect();
        let mut f = Vec::new();
        let mut own = vec![0.0; x.len()];
        c.encode(&x, 11, 3, Some(&mut own), &mut f).unwrap();
        let mut again = vec![1.0; x.len()];
        c.local_term(&x, 11, 3, 1.0, &mut again).unwrap();
        assert_eq!(again, own, "{rounding}");
        c.local_term(&x, 11, 3, -0.75, &mut again).unwrap();
        let scaled: Vec<f32> = own.iter().map(|v| -0.75 * v).collect();
        assert_eq!(again, scaled);
        if rounding == Rounding::Stochastic {
            // another iteration draws another dither
            c.local_term(&x, 12, 3, 1.0, &mut again).unwrap();
            assert_ne!(again, own);
        }
    }
    let c = codec(2, Rounding::Nearest, 1.0);
    let mut own = vec![0.0; 3];
    assert!(
        c.local_term(&[0.0, f32::NAN, 1.0], 0, 0, 1.0, &mut own)
            .is_err()
    );
    assert!(c.local_term(&[0.0, 1.0], 0, 0, 1.0, &mut own).is_err());
}

#[test]
fn mix_is_local_term_then_adding_decodes_bit_for_bit() {
    for (bits, rounding, hash) in [
        (2, Rounding::Stochastic, true),
        (8, Rounding::Nearest, false),
        (5, Rounding::Stochastic, true),
    ] {
        let cfg = MoniquaConfig {
            bits,
            rounding,
            theta: 1.0,
            hash,
            ..MoniquaConfig::default()
        };
        let c = MoniquaCodec::new(&cfg, 11).unwrap();
        // an odd length: a partial last chunk
        let d = 1000;
        let x: Vec<f32> = (0..d).map(|i| (i as f32 * 0.3).sin()).collect();
        let delta: Vec<f32> = (0..d).map(|i| (i as f32 * 0.7).cos() * 1e-2).collect();
        let neighbour = |shift: f32, sender: u32| {
            let y: Vec<f32> = x.iter().map(|v| v + shift).collect();
            let mut f = Vec::new();
            c.encode(&y, 4, sender, None, &mut f).unwrap();
            f
        };
        let (f1, f2, f3) = (neighbour(0.2, 1), neighbour(-0.1, 2), neighbour(0.05, 3));
        let inbox = [(&f1[..], 0.25f32), (&f2[..], 0.3), (&f3[..], 0.125)];
        let all = 0.25f32 + 0.3 + 0.125;
        let mut acc = vec![0.0; d];
        c.local_term(&x, 4, 0, -all, &mut acc).unwrap();
        for &(f, w) in &inbox {
            c.decode(
                f,
                &x,
                DecodeTarget::Add {
                    acc: &mut acc,
                    weight: w,
                },
            )
            .unwrap();
        }
        let want: Vec<f32> = x
            .iter()
            .zip(&acc)
            .zip(&delta)
            .map(|((x, a), d)| x + (a - d))
            .collect();
        let mut out = vec![0.0; d];
        let v = c
            .mix(
                MixTarget::Out {
                    x: &x,
                    out: &mut out,
                },
                4,
                0,
                &inbox,
                &delta,
                Prefetch::NONE,
            )
            .unwrap();
        assert_eq!(out, want, "bits={bits} {rounding}");
        // a prefetch hint never changes a result, whatever it names: a
        // live buffer, memory already freed, nothing
        let freed = Prefetch::of(&vec![1.0f32; 3 * d]);
        for next in [Prefetch::of(&delta), freed, Prefetch::NONE] {
            let mut again = vec![0.0; d];
            c.mix(
                MixTarget::Out {
                    x: &x,
                    out: &mut again,
                },
                4,
                0,
                &inbox,
                &delta,
                next,
            )
            .unwrap();
            assert_eq!(again, want, "bits={bits} {rounding} {next:?}");
            if !hash {
                let mut z = x.clone();
                c.mix(MixTarget::InPlace(&mut z), 4, 0, &inbox, &delta, next)
                    .unwrap();
                assert_eq!(z, want);
            }
        }
        let expected = if hash {
            Verification::Verified
        } else {
            Verification::Unchecked
        };
        assert_eq!(v, vec![expected; 3]);
    }
}

#[test]
fn mix_in_place_equals_mix_and_refuses_hashed_frames() {
    for hash in [false, true] {
        let cfg = MoniquaConfig {
            bits: 2,
            theta: 1.0,
            hash,
            ..MoniquaConfig::default()
        };
        let c = MoniquaCodec::new(&cfg, 5).unwrap();
        let x: Vec<f32> = (0..777).map(|i| (i as f32 * 0.21).cos()).collect();
        let y: Vec<f32> = x.iter().map(|v| v - 0.15).collect();
        let mut f = Vec::new();
        c.encode(&y, 9, 1, None, &mut f).unwrap();
        let delta = vec![0.003f32; x.len()];
        let mut out = vec![0.0; x.len()];
        c.mix(
            MixTarget::Out {
                x: &x,
                out: &mut out,
            },
            9,
            0,
            &[(&f, 0.5)],
            &delta,
            Prefetch::NONE,
        )
        .unwrap();
        let mut z = x.clone();
        let r = c.mix(
            MixTarget::InPlace(&mut z),
            9,
            0,
            &[(&f, 0.5)],
            &delta,
            Prefetch::NONE,
        );
        if hash {
            assert_eq!(r, Err(CodecError::HashInPlace));
            assert_eq!(z, x, "refused before touching x");
        } else {
            assert_eq!(r.unwrap(), vec![Verification::Unchecked]);
            assert_eq!(z, out);
        }
    }
}

/// Two workers interleaved block by block, with the right dither
/// tables, the wrong ones or none: each gets what the local step of
/// its whole model, `mix` in place, then `encode` at the next
/// iteration give, bit for bit, whatever the block.
#[test]
fn block_updates_equal_mix_in_place_then_encode() {
    let step = |at: usize, x: &[f32], delta: &mut [f32]| {
        for (j, (d, &v)) in delta.iter_mut().zip(x).enumerate() {
            *d = 0.01 * v + 1e-4 * ((at + j) % 7) as f32;
        }
    };
    for bits in 1..=8 {
        for rounding in [Rounding::Nearest, Rounding::Stochastic] {
            let cfg = MoniquaConfig {
                bits,
                rounding,
                theta: 1.0,
                modulus: (bits == 1).then_some(4.0),
                hash: false,
                ..MoniquaConfig::default()
            };
            let c = MoniquaCodec::new(&cfg, 5).unwrap();
            for len in [1, 64, 300, 1000] {
                let models: Vec<Vec<f32>> = (0..2)
                    .map(|w| {
                        (0..len)
                            .map(|i| ((i + 3 * w) as f32 * 0.21).cos())
                            .collect()
                    })
                    .collect();
                let mut frames = [Vec::new(), Vec::new()];
                for (s, f) in frames.iter_mut().enumerate() {
                    let y: Vec<f32> = models[0].iter().map(|v| v - 0.1 * s as f32).collect();
                    c.encode(&y, 9, 1 + s as u32, None, f).unwrap();
                }
                let neighbours = [(frames[0].as_slice(), 0.25), (&frames[1], 0.5)];
                let senders = [0u32, 7];
                let whole: Vec<(Vec<f32>, Vec<u8>)> = models
                    .iter()
                    .zip(senders)
                    .map(|(x, sender)| {
                        let mut delta = vec![0.0; len];
                        step(0, x, &mut delta);
                        let mut z = x.clone();
                        c.mix(
                            MixTarget::InPlace(&mut z),
                            9,
                            sender,
                            &neighbours,
                            &delta,
                            Prefetch::NONE,
                        )
                        .unwrap();
                        let mut sent = Vec::new();
                        c.encode(&z, 10, sender, None, &mut sent).unwrap();
                        (z, sent)
                    })
                    .collect();
                for block in [64, 128, 1024] {
                    let what = format!("{bits} bits {rounding:?} len {len} block {block}");
                    let mut xs = models.clone();
                    let mut nexts = vec![vec![7u8; 3], Vec::new()];
                    let mut updates: Vec<BlockUpdate> = senders
                        .iter()
                        .zip(&mut nexts)
                        .map(|(&s, next)| {
                            BlockUpdate::begin(&c, len, 9, s, &neighbours, Some(next))
                                .unwrap()
                                .unwrap()
                        })
                        .collect();
                    let (mut mix_t, mut enc_t) = (DitherTable::default(), DitherTable::default());
                    for (b, at) in (0..len).step_by(block).enumerate() {
                        let m = block.min(len - at);
                        // shared randomness: one table per block for both workers
                        // (every other block a stale one, which must be ignored)
                        let k = if b % 2 == 0 { 9 } else { 4 };
                        mix_t.fill(&c, k, 0, at, m);
                        enc_t.fill(&c, k + 1, 0, at, m);
                        for w in 0..2 {
                            let xb = &mut xs[w][at..at + m];
                            let mut delta = vec![0.0; m];
                            step(at, xb, &mut delta);
                            let tables = if b % 3 == 2 {
                                [None, None]
                            } else {
                                [Some(&mix_t), Some(&enc_t)]
                            };
                            updates[w]
                                .block(
                                    xb,
                                    at,
                                    [frames[0].as_slice(), &frames[1]].into_iter(),
                                    &delta,
                                    tables,
                                    Some(&mut nexts[w]),
                                    Prefetch::NONE,
                                )
                                .unwrap();
                        }
                    }
                    for (w, u) in updates.into_iter().enumerate() {
                        let done = u.finish(&xs[w], Some(&mut nexts[w])).unwrap();
                        assert!(matches!(done, Some(Ok(_))), "{what}");
                        assert_eq!(xs[w], whole[w].0, "{what} worker {w}");
                        assert_eq!(nexts[w], whole[w].1, "{what} worker {w}");
                    }
                }
            }
        }
    }
}

#[test]
fn block_updates_leave_hashes_and_compressed_frames_to_mix() {
    let x: Vec<f32> = (0..200).map(|i| (i as f32 * 0.3).sin()).collect();
    let plain_cfg = MoniquaConfig {
        bits: 2,
        theta: 1.0,
        hash: false,
        ..MoniquaConfig::default()
    };
    let hashed = MoniquaCodec::new(
        &MoniquaConfig {
            hash: true,
            ..plain_cfg.clone()
        },
        11,
    )
    .unwrap();
    let zstd = MoniquaCodec::new(
        &MoniquaConfig {
            compression: Compression::Zstd { level: 1 },
            ..plain_cfg.clone()
        },
        11,
    )
    .unwrap();
    let plain = MoniquaCodec::new(&plain_cfg, 11).unwrap();
    let zero = vec![0.0f32; 200];
    let (mut hf, mut zf, mut pf) = (Vec::new(), Vec::new(), Vec::new());
    hashed.encode(&x, 0, 1, None, &mut hf).unwrap();
    zstd.encode(&zero, 0, 1, None, &mut zf).unwrap();
    plain.encode(&x, 0, 1, None, &mut pf).unwrap();
    assert!(zf.len() < pf.len(), "a constant model compresses");
    assert!(
        BlockUpdate::begin(&hashed, 200, 0, 0, &[(&pf, 0.5)], None)
            .unwrap()
            .is_none()
    );
    assert!(
        BlockUpdate::begin(&plain, 200, 0, 0, &[(&hf, 0.5)], None)
            .unwrap()
            .is_none()
    );
    assert!(
        BlockUpdate::begin(&plain, 200, 0, 0, &[(&zf, 0.5)], None)
            .unwrap()
            .is_none()
    );
    let mut u = BlockUpdate::begin(&plain, 200, 0, 0, &[(&pf, 0.5)], None)
        .unwrap()
        .unwrap();
    let mut z = x.clone();
    for (at, len) in [(10, 64), (192, 64)] {
        let r = u.block(
            &mut z[..len],
            at,
            [pf.as_slice()].into_iter(),
            &zero[..len],
            [None, None],
            None,
            Prefetch::NONE,
        );
        assert_eq!(r, Err(CodecError::Block { at, len }));
    }
    let r = u.block(
        &mut z[..64],
        0,
        [&pf[..50]].into_iter(),
        &zero[..64],
        [None, None],
        None,
        Prefetch::NONE,
    );
    assert!(matches!(r, Err(CodecError::LengthMismatch { .. })), "{r:?}");
    assert_eq!(z, x);
}

#[test]
fn block_updates_keep_an_update_the_encoder_rejects() {
    let c = MoniquaCodec::new(
        &MoniquaConfig {
            bits: 4,
            theta: 1.0,
            hash: false,
            ..MoniquaConfig::default()
        },
        11,
    )
    .unwrap();
    let mut z = vec![0.5f32; 100];
    let mut next = Vec::new();
    // a step that sends one coordinate past what the codec encodes
    let huge = -2.0 * c.max_abs();
    let mut u = BlockUpdate::begin(&c, 100, 0, 0, &[], Some(&mut next))
        .unwrap()
        .unwrap();
    for at in [0, 64] {
        let m = 64.min(100 - at);
        let mut delta = vec![0.0; m];
        if at == 64 {
            delta[3] = huge;
        }
        u.block(
            &mut z[at..at + m],
            at,
            std::iter::empty(),
            &delta,
            [None, None],
            Some(&mut next),
            Prefetch::NONE,
        )
        .unwrap();
    }
    let done = u.finish(&z, Some(&mut next)).unwrap();
    assert!(
        matches!(
            done,
            Some(Err(CodecError::OutOfRange {
                count: 1,
                first: 67,
                ..
            }))
        ),
        "{done:?}"
    );
    assert_eq!(z[67], 0.5 - huge);
}

#[test]
fn mix_reports_the_neighbour_whose_recovery_fails() {
    let c = codec(4, Rounding::Nearest, 0.5);
    let x: Vec<f32> = (0..300).map(|i| (i as f32 * 0.1).sin()).collect();
    let mut near = Vec::new();
    c.encode(&x, 0, 1, None, &mut near).unwrap();
    // a neighbour far beyond theta: its recovery is wrong
    let far_model: Vec<f32> = x.iter().map(|v| v + 3.0).collect();
    let mut far = Vec::new();
    c.encode(&far_model, 0, 2, None, &mut far).unwrap();
    let delta = vec![0.0; 300];
    let mut out = vec![0.0; 300];
    let v = c
        .mix(
            MixTarget::Out {
                x: &x,
                out: &mut out,
            },
            0,
            0,
            &[(&near, 0.5), (&far, 0.5)],
            &delta,
            Prefetch::NONE,
        )
        .unwrap();
    assert_eq!(v, vec![Verification::Verified, Verification::Mismatch]);
    let short = vec![0.0; 10];
    assert!(
        c.mix(
            MixTarget::Out {
                x: &x,
                out: &mut out
            },
            0,
            0,
            &[(&near, 0.5)],
            &short,
            Prefetch::NONE
        )
        .is_err()
    );
    assert!(
        c.mix(
            MixTarget::Out {
                x: &x,
                out: &mut out
            },
            0,
            0,
            &[(&near[..20], 0.5)],
            &delta,
            Prefetch::NONE
        )
        .is_err()
    );
}

#[test]
fn an_adding_decode_equals_decode_then_axpy() {
    let c = codec(5, Rounding::Stochastic, 1.0);
    let x: Vec<f32> = (0..777).map(|i| (i as f32 * 0.3).sin()).collect();
    let y: Vec<f32> = x.iter().map(|v| v + 0.2).collect();
    let mut f = Vec::new();
    c.encode(&x, 3, 1, None, &mut f).unwrap();
    let mut rec = vec![0.0; x.len()];
    c.decode(&f, &y, DecodeTarget::Out(&mut rec)).unwrap();
    let mut acc: Vec<f32> = (0..777).map(|i| i as f32 * 0.01).collect();
    let want: Vec<f32> = acc.iter().zip(&rec).map(|(a, r)| a + 0.3 * r).collect();
    let d = c
        .decode(
            &f,
            &y,
            DecodeTarget::Add {
                acc: &mut acc,
                weight: 0.3,
            },
        )
        .unwrap();
    assert_eq!(d.verification, Verification::Verified);
    assert_eq!(acc, want);
}

#[test]
fn nearest_rounding_error_is_half_a_step() {
    let c = codec(4, Rounding::Nearest, 1.0);
    let x: Vec<f32> = (0..5000).map(|i| (i as f32 * 0.013).sin() * 3.0).collect();
    let mut frame = Vec::new();
    c.encode(&x, 0, 0, None, &mut frame).unwrap();
    let mut rec = vec![0.0; x.len()];
    c.decode(&frame, &x, DecodeTarget::Out(&mut rec)).unwrap();
    let worst = x
        .iter()
        .zip(&rec)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(f64::from(worst) <= c.error_bound() + 1e-6);
    assert!(
        f64::from(worst) > 0.9 * c.error_bound(),
        "the bound is tight on dense data"
    );
}

#[test]
fn shared_randomness_gives_equal_codes_for_equal_models() {
    let cfg = MoniquaConfig {
        bits: 2,
        ..MoniquaConfig::default()
    };
    let x: Vec<f32> = (0..100).map(|i| i as f32 * 0.01).collect();
    let enc = |cfg: &MoniquaConfig, sender| {
        let mut f = Vec::new();
        MoniquaCodec::new(cfg, 5)
            .unwrap()
            .encode(&x, 9, sender, None, &mut f)
            .unwrap();
        f[frame::HEADER_LEN..].to_vec()
    };
    assert_eq!(enc(&cfg, 0), enc(&cfg, 1));
    let private = MoniquaConfig {
        shared_randomness: false,
        ..cfg
    };
    assert_ne!(enc(&private, 0), enc(&private, 1));
}

#[test]
fn verification_outcomes_are_counted_apart() {
    let c = codec(4, Rounding::Nearest, 1.0);
    let x: Vec<f32> = (0..300).map(|i| (i as f32 * 0.1).sin()).collect();
    let near: Vec<f32> = x.iter().map(|v| v + 0.5).collect();
    let far: Vec<f32> = x.iter().map(|v| v + 3.0 * c.modulus()).collect();
    let mut f = Vec::new();
    let mut out = vec![0.0; x.len()];
    let mut stats = VerifyStats::default();
    c.encode(&x, 0, 0, None, &mut f).unwrap();
    stats.record(
        c.decode(&f, &near, DecodeTarget::Out(&mut out))
            .unwrap()
            .verification,
    );
    stats.record(
        c.decode(&f, &far, DecodeTarget::Out(&mut out))
            .unwrap()
            .verification,
    );
    stats.record(
        c.decode(&f, &far, DecodeTarget::Out(&mut out))
            .unwrap()
            .verification,
    );
    let unhashed = MoniquaCodec::new(
        &MoniquaConfig {
            bits: 4,
            rounding: Rounding::Nearest,
            theta: 1.0,
            hash: false,
            ..MoniquaConfig::default()
        },
        11,
    )
    .unwrap();
    unhashed.encode(&x, 0, 0, None, &mut f).unwrap();
    let d = c.decode(&f, &near, DecodeTarget::Out(&mut out)).unwrap();
    assert_eq!(d.header.hash, None);
    stats.record(d.verification);
    assert_eq!(
        stats,
        VerifyStats {
            verified: 1,
            mismatched: 2,
            unchecked: 1
        }
    );
}

#[test]
fn non_finite_input_is_an_error() {
    let c = codec(8, Rounding::Stochastic, 2.0);
    let mut x = vec![0.5f32; 10];
    x[3] = f32::NAN;
    x[7] = f32::INFINITY;
    let err = c.encode(&x, 0, 0, None, &mut Vec::new()).unwrap_err();
    assert_eq!(err, CodecError::NonFinite { count: 2, first: 3 });
}

#[test]
fn values_beyond_the_exact_range_are_an_error() {
    let c = codec(8, Rounding::Stochastic, 0.01);
    let limit = c.max_abs();
    assert!(limit > 100.0 && limit < 1000.0, "{limit}");
    let mut x = vec![0.5f32; 10];
    x[4] = limit * 1.01;
    x[6] = -limit * 2.0;
    let err = c.encode(&x, 0, 0, None, &mut Vec::new()).unwrap_err();
    assert!(
        matches!(
            err,
            CodecError::OutOfRange {
                count: 2,
                first: 4,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("raise `theta`"));
    x[4] = limit * 0.99;
    x[6] = -limit * 0.99;
    c.encode(&x, 0, 0, None, &mut Vec::new()).unwrap();
}

#[test]
fn decode_rejects_mismatched_configuration() {
    let a = codec(8, Rounding::Stochastic, 2.0);
    let b = codec(8, Rounding::Stochastic, 1.0);
    let c = codec(4, Rounding::Stochastic, 2.0);
    let x = vec![0.1f32; 16];
    let mut f = Vec::new();
    a.encode(&x, 0, 0, None, &mut f).unwrap();
    let mut out = vec![0.0; 16];
    assert!(matches!(
        b.decode(&f, &x, DecodeTarget::Out(&mut out)),
        Err(CodecError::ModulusMismatch { .. })
    ));
    assert!(matches!(
        c.decode(&f, &x, DecodeTarget::Out(&mut out)),
        Err(CodecError::BitsMismatch { .. })
    ));
    assert!(matches!(
        a.decode(&f, &x[..15], DecodeTarget::Out(&mut out)),
        Err(CodecError::LengthMismatch { .. })
    ));
}

#[test]
fn entropy_coding_shrinks_a_converged_model() {
    // Near consensus, high-order bits are redundant: zstd must shrink 8-bit codes
    // of a smooth model, and the receiver must recover the same values.
    let cfg = MoniquaConfig {
        compression: Compression::zstd(3).unwrap(),
        rounding: Rounding::Nearest,
        ..MoniquaConfig::default()
    };
    let c = MoniquaCodec::new(&cfg, 0).unwrap();
    let x: Vec<f32> = (0..50_000)
        .map(|i| 0.01 * ((i / 100) as f32).sin())
        .collect();
    let mut f = Vec::new();
    let e = c.encode(&x, 0, 0, None, &mut f).unwrap();
    assert!(e.header.compressed);
    assert!(f.len() < c.frame_len(x.len()) / 4, "{} bytes", f.len());
    let mut rec = vec![0.0; x.len()];
    let d = c.decode(&f, &x, DecodeTarget::Out(&mut rec)).unwrap();
    assert_eq!(d.verification, Verification::Verified);
    for (a, b) in x.iter().zip(&rec) {
        assert!(f64::from((a - b).abs()) <= c.error_bound() + 1e-6);
    }
}
