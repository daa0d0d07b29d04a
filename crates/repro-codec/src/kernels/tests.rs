use super::*;
use crate::simd::levels;

/// Moniqua's kernel parameters for a modulus of 5, hashed, dither
/// hashed (no table).
fn test_params(bits: u32, rounding: Rounding, dither: Dither) -> ModParams<'static> {
    let levels = 1i32 << bits;
    ModParams {
        table: &[],
        bits,
        levels,
        scale: levels as f32 / 5.0,
        step: 5.0 / levels as f32,
        rounding,
        dither,
        hash: true,
    }
}

#[test]
fn every_simd_level_fills_the_dither_as_the_portable_code() {
    let d = Dither::new(3, 0, 9);
    for (start, len) in [
        (0u32, 0usize),
        (0, 64),
        (64, 8192),
        (128, 1000),
        (5, 200),
        (640, 63),
    ] {
        let mut want = vec![0.0f32; len];
        d.fill(start, &mut want);
        for level in levels() {
            let mut got = vec![1.0f32; len];
            dither_fill_at(level, &d, start, &mut got);
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{level:?} from {start}, {len} values");
        }
    }
}

#[test]
fn every_simd_level_produces_identical_bits() {
    let x: Vec<f32> = (0..5003).map(|i| ((i as f32) * 0.37).sin() * 7.0).collect();
    let y: Vec<f32> = x.iter().map(|v| v + 0.3).collect();
    for bits in 1..=8u32 {
        for rounding in [Rounding::Nearest, Rounding::Stochastic] {
            let p = test_params(bits, rounding, Dither::new(1, 0, 2));
            let mut reference = None;
            for level in levels() {
                let mut body = vec![0u8; packed_len(x.len(), bits)];
                let mut own = vec![0f32; x.len()];
                let e = moniqua_encode_at(level, &p, &x, Some(&mut own), &mut body);
                let mut local_term = vec![0f32; x.len()];
                assert_eq!(
                    moniqua_local_term_at(level, &p, &x, 1.0, &mut local_term),
                    0
                );
                assert_eq!(local_term, own, "the local term alone is the encoder's");
                let mut out = vec![0f32; x.len()];
                let h = moniqua_decode_at(level, &p, &body, &y, &mut out, None);
                let mut acc = vec![1.0f32; x.len()];
                moniqua_decode_at(level, &p, &body, &y, &mut acc, Some(0.25));
                let mut mixed = vec![0f32; x.len()];
                let mut hashes = vec![CodeHash::new(); 2];
                let delta = vec![0.01f32; x.len()];
                let bodies = [&body[..], &body[..]];
                let mut nb = Neighbours {
                    bodies: &bodies,
                    weights: &[0.25, 0.25],
                    hashes: &mut hashes,
                    next: Prefetch::of(&x),
                    encode: None,
                };
                let target = MixTarget::Out {
                    x: &y,
                    out: &mut mixed,
                };
                moniqua_mix_at(level, &p, target, -0.5, &mut nb, &delta);
                assert_eq!(
                    hashes[0].finish(),
                    h.unwrap(),
                    "mix hashes what decode hashes"
                );
                let mut in_place = y.clone();
                let mut nb = Neighbours {
                    bodies: &bodies,
                    weights: &[0.25, 0.25],
                    hashes: &mut hashes,
                    next: Prefetch::of(&x),
                    encode: None,
                };
                let target = MixTarget::InPlace(&mut in_place);
                moniqua_mix_at(level, &p, target, -0.5, &mut nb, &delta);
                assert_eq!(in_place, mixed, "in place is out of place");
                // the dither read from a table instead of hashed: the same
                let mut table = vec![0f32; x.len()];
                p.dither.fill(0, &mut table);
                let t = ModParams { table: &table, ..p };
                let mut tbody = vec![0u8; packed_len(x.len(), bits)];
                let mut town = vec![0f32; x.len()];
                let te = moniqua_encode_at(level, &t, &x, Some(&mut town), &mut tbody);
                assert_eq!((tbody, town, te.hash), (body.clone(), own.clone(), e.hash));
                let mut tmixed = vec![0f32; x.len()];
                let mut nb = Neighbours {
                    bodies: &bodies,
                    weights: &[0.25, 0.25],
                    hashes: &mut hashes,
                    next: Prefetch::NONE,
                    encode: None,
                };
                let target = MixTarget::Out {
                    x: &y,
                    out: &mut tmixed,
                };
                moniqua_mix_at(level, &t, target, -0.5, &mut nb, &delta);
                assert_eq!(tmixed, mixed, "a dither table mixes as the hash");
                // encoding the update as it is written: the encoder's codes
                let next = ModParams {
                    dither: Dither::new(1, 0, 3),
                    hash: false,
                    ..p
                };
                let mut fused = y.clone();
                let mut nb = Neighbours {
                    bodies: &bodies,
                    weights: &[0.25, 0.25],
                    hashes: &mut [],
                    next: Prefetch::NONE,
                    encode: Some(EncodeNext {
                        p: next,
                        body: &mut vec![0u8; packed_len(x.len(), bits)],
                        bad: [0; CHUNK],
                    }),
                };
                let unhashed = ModParams { hash: false, ..p };
                moniqua_mix_at(
                    level,
                    &unhashed,
                    MixTarget::InPlace(&mut fused),
                    -0.5,
                    &mut nb,
                    &delta,
                );
                assert_eq!(fused, mixed);
                let enc = nb.encode.take().unwrap();
                assert_eq!(enc.rejected(), 0);
                let mut separate = vec![0u8; packed_len(x.len(), bits)];
                moniqua_encode_at(level, &next, &mixed, None, &mut separate);
                assert_eq!(
                    enc.body, separate,
                    "the update's codes as encode writes them"
                );
                // a bucket size the AVX-512 loops take and one they leave portable
                let (mut bcodes, mut bown, mut bout) = (Vec::new(), Vec::new(), Vec::new());
                for bucket in [100, 128] {
                    let bp = BucketParams {
                        bits,
                        bucket,
                        dither: p.dither,
                    };
                    let mut scales = vec![0u8; 4 * x.len().div_ceil(bucket)];
                    bucket_scales_at(level, bucket, &x, &mut scales);
                    let mut codes = vec![0u8; packed_len(x.len(), bits)];
                    let mut own = vec![0f32; x.len()];
                    bucket_encode_at(level, &bp, &x, Some(&mut own), &scales, &mut codes);
                    let mut out = vec![0f32; x.len()];
                    let corrupt = bucket_decode_at(level, bits, bucket, &scales, &codes, &mut out);
                    assert_eq!(corrupt, None);
                    assert_eq!(out, own, "the decoder's values are the encoder's");
                    bcodes.extend(codes);
                    bown.extend(own.iter().map(|v| v.to_bits()));
                    bout.extend(out.iter().map(|v| v.to_bits()));
                }
                let got = (
                    body,
                    own.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    e.hash,
                    h,
                    out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    bcodes,
                    bown,
                    bout,
                    mixed.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                );
                match &reference {
                    None => reference = Some(got),
                    Some(r) => assert!(
                        r == &got,
                        "level {level:?} differs at bits={bits} {rounding}"
                    ),
                }
            }
        }
    }
}

/// Random values with NaN, infinities and values beyond the exact range
/// planted inside whole chunks (where the AVX-512 loops run) and in the
/// tail: every level writes the same bits and rejects the same count as
/// the portable one. Prints the levels it ran, for CI's log.
#[test]
fn every_simd_level_rejects_bad_values_as_the_portable_one() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 * 8.0 - 4.0
    };
    let clean: Vec<f32> = (0..4 * CHUNK + 37).map(|_| next()).collect();
    let mut x = clean.clone();
    let planted = [
        (3, f32::NAN),
        (CHUNK + 5, f32::INFINITY),
        (2 * CHUNK + 9, f32::NEG_INFINITY),
        (2 * CHUNK + 10, 3.0e9),
        (3 * CHUNK, -3.0e9),
        (4 * CHUNK + 11, f32::NAN),
    ];
    for (i, v) in planted {
        x[i] = v;
    }
    let ran: Vec<&str> = levels().iter().map(|l| l.name()).collect();
    eprintln!("SIMD levels exercised: {}", ran.join(", "));
    for bits in [1u32, 2, 4, 8, 3] {
        for rounding in [Rounding::Nearest, Rounding::Stochastic] {
            let p = test_params(bits, rounding, Dither::new(7, 1, 2));
            let mut reference = None;
            for level in levels() {
                let mut body = vec![0u8; packed_len(x.len(), bits)];
                let mut own = vec![0f32; x.len()];
                let e = moniqua_encode_at(level, &p, &x, Some(&mut own), &mut body);
                // each bad value alone is rejected, wherever it sits
                for &(i, v) in &planted {
                    let mut one = clean.clone();
                    one[i] = v;
                    let mut b = vec![0u8; packed_len(x.len(), bits)];
                    let k = moniqua_encode_at(level, &p, &one, None, &mut b);
                    assert!(k.rejected > 0, "{level:?} bits={bits}: {v} at {i} accepted");
                    // and by the mix, which quantizes the model too
                    let mut clean_body = vec![0u8; packed_len(x.len(), bits)];
                    moniqua_encode_at(level, &p, &clean, None, &mut clean_body);
                    let bodies = [&clean_body[..]];
                    let mut hashes = vec![CodeHash::new(); 1];
                    let mut nb = Neighbours {
                        bodies: &bodies,
                        weights: &[0.5],
                        hashes: &mut hashes,
                        next: Prefetch::NONE,
                        encode: None,
                    };
                    let mut out = vec![0f32; x.len()];
                    let target = MixTarget::Out {
                        x: &one,
                        out: &mut out,
                    };
                    let delta = vec![0f32; x.len()];
                    let m = moniqua_mix_at(level, &p, target, 0.5, &mut nb, &delta);
                    assert!(m > 0, "{level:?} bits={bits}: mix took {v} at {i}");
                }
                // a kernel's count is of lanes that saw a bad value
                // (64 portable, 16 folded in AVX-512): only "some" is
                // its contract, and what callers read
                assert!(e.rejected > 0, "{level:?} rejected nothing");
                let mut term = vec![0f32; x.len()];
                let t = moniqua_local_term_at(level, &p, &x, 1.0, &mut term);
                let mut scales = vec![0u8; 4 * x.len().div_ceil(CHUNK)];
                let bad = bucket_scales_at(level, CHUNK, &x, &mut scales);
                // a rejected value's own term is undefined (the encode
                // fails): every other value's, in the same chunks too,
                // must match
                let bits_of = |v: &[f32]| {
                    v.iter()
                        .enumerate()
                        .filter(|(i, _)| !planted.iter().any(|(j, _)| j == i))
                        .map(|(_, f)| f.to_bits())
                        .collect::<Vec<_>>()
                };
                // (nor is its hash, over the un-modded codes, compared:
                // a rejected frame is never sent)
                let mut codes = vec![0u32; x.len()];
                unpack(&body, bits, &mut codes);
                for (j, _) in planted {
                    codes[j] = 0;
                }
                let got = (codes, bits_of(&own), t > 0, scales, bad);
                match &reference {
                    None => reference = Some(got),
                    Some(r) => {
                        assert!(r.0 == got.0, "{level:?} codes bits={bits} {rounding}");
                        assert!(r.1 == got.1, "{level:?} own bits={bits} {rounding}");
                        assert!(r.2 == got.2, "{level:?} term bits={bits} {rounding}");
                        assert!(r.3 == got.3, "{level:?} scales bits={bits} {rounding}");
                        assert!(r.4 == got.4, "{level:?} bad bits={bits} {rounding}");
                    }
                }
            }
        }
    }
}

#[test]
fn code_hash_detects_any_single_change() {
    let codes: Vec<u32> = (0..1000).map(|i| i * 7).collect();
    let mut h = CodeHash::new();
    h.update(&codes);
    let base = h.finish();
    for i in [0usize, 1, 15, 16, 500, 999] {
        for delta in [1u32, 2, 256, 1 << 31] {
            let mut c = codes.clone();
            c[i] = c[i].wrapping_add(delta);
            let mut h = CodeHash::new();
            h.update(&c);
            assert_ne!(h.finish(), base, "i={i} delta={delta}");
        }
    }
    // length is part of the hash
    let mut h = CodeHash::new();
    h.update(&codes[..999]);
    assert_ne!(h.finish(), base);
}
