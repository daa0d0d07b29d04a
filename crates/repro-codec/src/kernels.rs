//! The codec's hot loops, each compiled per SIMD level (see [`crate::simd`]).
//!
//! Every kernel walks its buffer in blocks of [`BLOCK`] values: quantize into
//! a code block on the stack, optionally write the local dequantized values,
//! hash the un-modded codes, pack. Blocks are a multiple of 16 values, so block
//! boundaries never split a packed byte or a hash lane round.

use crate::Rounding;
pub(crate) use crate::chunk::{
    BucketParams, CHUNK, CodeHash, EncodeNext, MODULO_LIMIT, ModParams, any_rejected, in_range,
    scale_at,
};
use crate::dither::Dither;
use crate::pack::{pack, pack_fixed, packed_len, unpack, unpack_fixed};
use crate::round::{floor_to_i32, round_nearest};
use repro_simd::{Prefetch, multiversion};

/// Values per inner block.
pub(crate) const BLOCK: usize = 1024;

/// Result of a Moniqua encode: whether inputs were rejected (non-finite, or
/// too large to encode exactly; nonzero if so), and the code hash.
#[derive(Debug)]
pub(crate) struct KernelOut {
    pub rejected: u32,
    pub hash: Option<u64>,
}

/// Expands `$body` with `$B` bound to `bits` as a constant (1..=8), so each
/// width gets its own monomorphized loop.
macro_rules! for_bits {
    ($bits:expr, $B:ident => $body:expr) => {
        match $bits {
            1 => {
                const $B: usize = 1;
                $body
            }
            2 => {
                const $B: usize = 2;
                $body
            }
            3 => {
                const $B: usize = 3;
                $body
            }
            4 => {
                const $B: usize = 4;
                $body
            }
            5 => {
                const $B: usize = 5;
                $body
            }
            6 => {
                const $B: usize = 6;
                $body
            }
            7 => {
                const $B: usize = 7;
                $body
            }
            _ => {
                const $B: usize = 8;
                $body
            }
        }
    };
}

/// Quantizes `xc` (coordinates `64 chunk ..`) into un-modded codes, keeping
/// in `bad[j]` the largest `|t|` bit pattern seen in lane `j` (see
/// [`any_rejected`]): an integer max per value where a compare and a count
/// cost two more operations, and no horizontal reduction every 64 values.
#[inline(always)]
fn quantize<const NATIVE: bool, const NEAREST: bool>(
    p: &ModParams<'_>,
    xc: &[f32],
    chunk: u32,
    codes: &mut [u32],
    bad: &mut [u32; CHUNK],
) {
    let mut u = [0.5f32; CHUNK];
    let u = &mut u[..xc.len()];
    if !NEAREST {
        if p.table.is_empty() {
            p.dither.fill_chunk(chunk, u);
        } else {
            let at = chunk as usize * CHUNK;
            u.copy_from_slice(&p.table[at..at + u.len()]);
        }
    }
    for (((c, &v), &u), b) in codes.iter_mut().zip(xc).zip(u.iter()).zip(bad.iter_mut()) {
        let t = v * p.scale;
        // |t| as bits orders like |t|, with infinity and NaN above every number
        *b = (*b).max(t.to_bits() & 0x7fff_ffff);
        *c = floor_to_i32::<NATIVE>(t + u) as u32;
    }
}

/// The local biased term `C B / 2^b` of each code.
#[inline(always)]
fn dequantize(p: &ModParams<'_>, codes: &[u32], own: &mut [f32]) {
    for (h, &c) in own.iter_mut().zip(codes) {
        *h = c as i32 as f32 * p.step;
    }
}

/// `weight` times [`dequantize`]'s term (`(C B / 2^b) weight`; with weight
/// 1 the same bits).
#[inline(always)]
fn dequantize_weighted(p: &ModParams<'_>, codes: &[u32], weight: f32, own: &mut [f32]) {
    for (h, &c) in own.iter_mut().zip(codes) {
        *h = c as i32 as f32 * p.step * weight;
    }
}

/// Turns received codes `r` (low `b` bits) into the integer congruent to `r`
/// mod `2^b` nearest to `y 2^b / B`, in place, and writes `Ĉ B / 2^b` (or,
/// with `ACC`, adds `w Ĉ B / 2^b`).
#[inline(always)]
fn recover<const ACC: bool>(
    p: &ModParams<'_>,
    codes: &mut [u32],
    yc: &[f32],
    oc: &mut [f32],
    w: f32,
) {
    for ((c, &y), o) in codes.iter_mut().zip(yc).zip(oc.iter_mut()) {
        *c = recover_one::<ACC>(p, *c as i32, y, o, w);
    }
}

/// [`recover`] of one code `r`; returns the un-modded code. The number of
/// whole turns is rounded to nearest (ties to even; a tie means `y` is
/// half a modulus from the sender, outside Lemma 2's assumption), and
/// `Ĉ = r + turns 2^b` is formed in floats, exactly (`|Ĉ| < 2^24`), so the
/// AVX-512 loop computes the same bits with two fused multiply-adds.
#[inline(always)]
fn recover_one<const ACC: bool>(p: &ModParams<'_>, r: i32, y: f32, o: &mut f32, w: f32) -> u32 {
    let inv_levels = 1.0 / p.levels as f32;
    let rf = r as f32;
    let (turns, k) = round_nearest((y * p.scale - rf) * inv_levels);
    let full = r.wrapping_add(k.wrapping_shl(p.bits));
    let v = (turns * p.levels as f32 + rf) * p.step;
    if ACC {
        *o += w * v;
    } else {
        *o = v;
    }
    full as u32
}

#[inline(always)]
fn moniqua_encode_fixed<const NATIVE: bool, const V4: bool, const B: usize, const NEAREST: bool>(
    p: &ModParams<'_>,
    x: &[f32],
    mut own: Option<&mut [f32]>,
    body: &mut [u8],
) -> KernelOut {
    let mut hash = CodeHash::new();
    let mut bad = [0u32; CHUNK];
    let mut codes = [0u32; CHUNK];
    let full = x.len() / CHUNK * CHUNK;
    let (body_head, body_tail) = body.split_at_mut(full / 8 * B);
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    if V4 && crate::avx512::supports(B) {
        let (xh, oh) = (&x[..full], own.as_deref_mut().map(|o| &mut o[..full]));
        let (h, b) = (&mut hash, &mut bad);
        // SAFETY: `V4` is true only in the AVX-512 instantiation, which
        // `multiversion!` runs after checking the CPU's features.
        unsafe {
            if p.hash {
                crate::avx512::encode_chunks::<B, NEAREST, true>(p, xh, oh, body_head, h, b);
            } else {
                crate::avx512::encode_chunks::<B, NEAREST, false>(p, xh, oh, body_head, h, b);
            }
        }
        return moniqua_encode_tail::<NATIVE, B, NEAREST>(p, x, own, body_tail, hash, bad);
    }
    for (ci, (xc, dst)) in x[..full]
        .chunks_exact(CHUNK)
        .zip(body_head.chunks_exact_mut(CHUNK / 8 * B))
        .enumerate()
    {
        let at = ci * CHUNK;
        quantize::<NATIVE, NEAREST>(p, xc, ci as u32, &mut codes, &mut bad);
        if let Some(own) = own.as_deref_mut() {
            dequantize(p, &codes, &mut own[at..at + CHUNK]);
        }
        if p.hash {
            hash.update(&codes);
        }
        pack_fixed::<B>(&codes, dst);
    }
    moniqua_encode_tail::<NATIVE, B, NEAREST>(p, x, own, body_tail, hash, bad)
}

/// The last, partial chunk of [`moniqua_encode_fixed`] (if any), and its result.
#[inline(always)]
fn moniqua_encode_tail<const NATIVE: bool, const B: usize, const NEAREST: bool>(
    p: &ModParams<'_>,
    x: &[f32],
    own: Option<&mut [f32]>,
    body_tail: &mut [u8],
    mut hash: CodeHash,
    mut bad: [u32; CHUNK],
) -> KernelOut {
    let full = x.len() / CHUNK * CHUNK;
    let rest = x.len() - full;
    if rest > 0 {
        let mut codes = [0u32; CHUNK];
        let codes = &mut codes[..rest];
        quantize::<NATIVE, NEAREST>(p, &x[full..], (full / CHUNK) as u32, codes, &mut bad);
        if let Some(own) = own {
            dequantize(p, codes, &mut own[full..]);
        }
        if p.hash {
            hash.update(codes);
        }
        pack(codes, B as u32, body_tail);
    }
    KernelOut {
        rejected: any_rejected(&bad),
        hash: p.hash.then(|| hash.finish()),
    }
}

#[inline(always)]
fn moniqua_decode_fixed<const NATIVE: bool, const V4: bool, const B: usize, const ACC: bool>(
    p: &ModParams<'_>,
    body: &[u8],
    local: &[f32],
    out: &mut [f32],
    w: f32,
) -> Option<u64> {
    let mut hash = CodeHash::new();
    let mut codes = [0u32; CHUNK];
    let full = local.len() / CHUNK * CHUNK;
    let (body_head, body_tail) = body.split_at(full / 8 * B);
    let (out_head, out_tail) = out.split_at_mut(full);
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut vector = false;
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    if V4 && crate::avx512::supports(B) {
        let (y, h) = (&local[..full], &mut hash);
        // SAFETY: as in `moniqua_encode_fixed`.
        unsafe {
            if p.hash {
                crate::avx512::decode_chunks::<B, ACC, true>(p, body_head, y, out_head, w, h);
            } else {
                crate::avx512::decode_chunks::<B, ACC, false>(p, body_head, y, out_head, w, h);
            }
        }
        vector = true;
    }
    let scalar = if vector { 0 } else { full };
    for ((src, yc), oc) in body_head
        .chunks_exact(CHUNK / 8 * B)
        .zip(local[..scalar].chunks_exact(CHUNK))
        .zip(out_head.chunks_exact_mut(CHUNK))
    {
        unpack_fixed::<B>(src, &mut codes);
        recover::<ACC>(p, &mut codes, yc, oc, w);
        if p.hash {
            hash.update(&codes);
        }
    }
    let rest = local.len() - full;
    if rest > 0 {
        let codes = &mut codes[..rest];
        unpack(body_tail, B as u32, codes);
        recover::<ACC>(p, codes, &local[full..], out_tail, w);
        if p.hash {
            hash.update(codes);
        }
    }
    p.hash.then(|| hash.finish())
}

#[inline(always)]
fn moniqua_encode_impl<const NATIVE: bool, const V4: bool>(
    p: &ModParams<'_>,
    x: &[f32],
    own: Option<&mut [f32]>,
    body: &mut [u8],
) -> KernelOut {
    match p.rounding {
        Rounding::Nearest => {
            for_bits!(p.bits, B => moniqua_encode_fixed::<NATIVE, V4, B, true>(p, x, own, body))
        }
        Rounding::Stochastic => {
            for_bits!(p.bits, B => moniqua_encode_fixed::<NATIVE, V4, B, false>(p, x, own, body))
        }
    }
}

/// `weight` times the local biased term of `x` (what the encoder writes
/// into `own`, times `weight`), without packing or hashing codes; returns a
/// nonzero count if an input was rejected.
#[inline(always)]
#[cfg(test)]
fn moniqua_local_term_fixed<const NATIVE: bool, const NEAREST: bool>(
    p: &ModParams<'_>,
    x: &[f32],
    weight: f32,
    own: &mut [f32],
) -> u32 {
    let mut bad = [0u32; CHUNK];
    let mut codes = [0u32; CHUNK];
    for (ci, (xc, oc)) in x.chunks(CHUNK).zip(own.chunks_mut(CHUNK)).enumerate() {
        let codes = &mut codes[..xc.len()];
        quantize::<NATIVE, NEAREST>(p, xc, ci as u32, codes, &mut bad);
        dequantize_weighted(p, codes, weight, oc);
    }
    any_rejected(&bad)
}

#[inline(always)]
#[cfg(test)]
fn moniqua_local_term_impl<const NATIVE: bool, const V4: bool>(
    p: &ModParams<'_>,
    x: &[f32],
    weight: f32,
    own: &mut [f32],
) -> u32 {
    match p.rounding {
        Rounding::Nearest => moniqua_local_term_fixed::<NATIVE, true>(p, x, weight, own),
        Rounding::Stochastic => moniqua_local_term_fixed::<NATIVE, false>(p, x, weight, own),
    }
}

/// Where Algorithm 1's update ([`crate::MoniquaCodec::mix`]) goes.
#[derive(Debug)]
pub enum MixTarget<'a> {
    /// Read `x`, write `out = x + update`; `x` stays as it was, so after a
    /// hash mismatch the caller can mix again without that neighbour.
    Out { x: &'a [f32], out: &'a mut [f32] },
    /// `x += update` in place: for frames without a hash only (nothing to
    /// verify, so nothing to leave out afterwards).
    InPlace(&'a mut [f32]),
}

/// Neighbours' bodies, their weights and hashes, for [`moniqua_mix`].
#[derive(Debug)]
pub(crate) struct Neighbours<'a> {
    pub bodies: &'a [&'a [u8]],
    pub weights: &'a [f32],
    /// One per body when hashing, else possibly empty.
    pub hashes: &'a mut [CodeHash],
    /// Memory to prefetch while mixing (a hint, see [`Prefetch`]).
    pub next: Prefetch,
    /// The next frame's codes, encoded from the update as it is written.
    pub encode: Option<EncodeNext<'a>>,
}

/// One chunk (coordinates `64 ci ..`, `xc.len()` of them) of the update:
/// `oc = xc + (own_weight x^_i + sum_j w_j x^_j - dc)`. `FULL` chunks (64
/// values) run on whole arrays, so every loop has a constant trip count.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn mix_chunk<const NATIVE: bool, const B: usize, const NEAREST: bool, const FULL: bool>(
    p: &ModParams<'_>,
    ci: usize,
    xc: &[f32],
    own_weight: f32,
    nb: &mut Neighbours<'_>,
    dc: &[f32],
    oc: &mut [f32],
    bad: &mut [u32; CHUNK],
) {
    let m = if FULL { CHUNK } else { xc.len() };
    // constant lengths in a full chunk, so the loops below have them too
    let (xc, dc, oc) = (&xc[..m], &dc[..m], &mut oc[..m]);
    let mut codes = [0u32; CHUNK];
    let mut acc = [0f32; CHUNK];
    let (codes, acc) = (&mut codes[..m], &mut acc[..m]);
    quantize::<NATIVE, NEAREST>(p, xc, ci as u32, codes, bad);
    dequantize_weighted(p, codes, own_weight, acc);
    let start = ci * (CHUNK / 8 * B);
    for (j, (body, &w)) in nb.bodies.iter().zip(nb.weights).enumerate() {
        if FULL && B == 8 {
            // bytes straight into the recovery (a separate widening loop
            // here compiles to scalar stores that stall the loads after it)
            let src = &body[start..start + CHUNK];
            for (((c, &r), &y), a) in codes.iter_mut().zip(src).zip(xc).zip(acc.iter_mut()) {
                *c = recover_one::<true>(p, i32::from(r), y, a, w);
            }
        } else {
            if FULL {
                unpack_fixed::<B>(&body[start..start + CHUNK / 8 * B], codes);
            } else {
                unpack(&body[start..], B as u32, codes);
            }
            recover::<true>(p, codes, xc, acc, w);
        }
        if p.hash {
            nb.hashes[j].update(codes);
        }
    }
    for (((o, &x), &a), &d) in oc.iter_mut().zip(xc).zip(acc.iter()).zip(dc) {
        *o = x + (a - d);
    }
    if let Some(e) = nb.encode.as_mut() {
        quantize::<NATIVE, NEAREST>(&e.p, oc, ci as u32, codes, &mut e.bad);
        if FULL {
            pack_fixed::<B>(codes, &mut e.body[start..start + CHUNK / 8 * B]);
        } else {
            pack(codes, B as u32, &mut e.body[start..]);
        }
    }
}

/// Algorithm 1's update in one pass over the model, chunk by chunk:
/// `out = x + (own_weight x^_i + sum_j w_j x^_j - delta)`, where `x^_i` is
/// the local biased term of `x` and `x^_j` neighbour `j`'s model recovered
/// from `bodies[j]` against `x`, accumulated in that order: bit for bit what
/// `moniqua_local_term` with `own_weight`, `moniqua_decode` accumulating
/// each neighbour, then `x + (acc - delta)` compute, without the accumulator
/// ever leaving registers. Folds each neighbour's recovered codes into
/// `hashes[j]` when `p.hash`; returns nonzero if an input was rejected. In
/// place, each chunk of `x` is read before it is overwritten.
// Long on purpose: one pass per chunk over every neighbour with the
// accumulator in registers; its steps are that loop's body.
#[inline(always)]
fn moniqua_mix_fixed<const NATIVE: bool, const V4: bool, const B: usize, const NEAREST: bool>(
    p: &ModParams<'_>,
    target: MixTarget<'_>,
    own_weight: f32,
    nb: &mut Neighbours<'_>,
    delta: &[f32],
) -> u32 {
    let mut bad = [0u32; CHUNK];
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    if V4 && crate::avx512::supports(B) {
        let full = delta.len() / CHUNK * CHUNK;
        let (x, out) = match target {
            MixTarget::Out { x, out } => (Some(x), out),
            MixTarget::InPlace(x) => (None, x),
        };
        let (xh, oh) = (x.map(|x| &x[..full]), &mut out[..full]);
        let (bodies, weights) = (nb.bodies, nb.weights);
        let enc = nb.encode.as_mut();
        // SAFETY: as in `moniqua_encode_fixed`.
        unsafe {
            if p.hash {
                crate::avx512::mix_chunks::<B, NEAREST, true>(
                    p, xh, oh, own_weight, bodies, weights, nb.hashes, delta, &mut bad, nb.next,
                    enc,
                );
            } else {
                crate::avx512::mix_chunks::<B, NEAREST, false>(
                    p, xh, oh, own_weight, bodies, weights, nb.hashes, delta, &mut bad, nb.next,
                    enc,
                );
            }
        }
        if full < delta.len() {
            let (ci, dc, oc) = (full / CHUNK, &delta[full..], &mut out[full..]);
            let mut copy = [0f32; CHUNK];
            let xc = match x {
                Some(x) => &x[full..],
                None => {
                    let copy = &mut copy[..oc.len()];
                    copy.copy_from_slice(oc);
                    &*copy
                }
            };
            mix_chunk::<NATIVE, B, NEAREST, false>(p, ci, xc, own_weight, nb, dc, oc, &mut bad);
        }
        return any_rejected(&bad);
    }
    match target {
        MixTarget::Out { x, out } => {
            let mut xs = x.chunks_exact(CHUNK);
            let mut ds = delta.chunks_exact(CHUNK);
            let mut os = out.chunks_exact_mut(CHUNK);
            let mut ci = 0;
            for ((xc, dc), oc) in (&mut xs).zip(&mut ds).zip(&mut os) {
                mix_chunk::<NATIVE, B, NEAREST, true>(p, ci, xc, own_weight, nb, dc, oc, &mut bad);
                ci += 1;
            }
            let (xc, dc, oc) = (xs.remainder(), ds.remainder(), os.into_remainder());
            if !xc.is_empty() {
                mix_chunk::<NATIVE, B, NEAREST, false>(p, ci, xc, own_weight, nb, dc, oc, &mut bad);
            }
        }
        MixTarget::InPlace(x) => {
            let mut xs = x.chunks_exact_mut(CHUNK);
            let mut ds = delta.chunks_exact(CHUNK);
            let mut ci = 0;
            for (xc, dc) in (&mut xs).zip(&mut ds) {
                let mut copy = [0f32; CHUNK];
                copy.copy_from_slice(xc);
                mix_chunk::<NATIVE, B, NEAREST, true>(
                    p, ci, &copy, own_weight, nb, dc, xc, &mut bad,
                );
                ci += 1;
            }
            let (xc, dc) = (xs.into_remainder(), ds.remainder());
            if !xc.is_empty() {
                let mut copy = [0f32; CHUNK];
                let copy = &mut copy[..xc.len()];
                copy.copy_from_slice(xc);
                mix_chunk::<NATIVE, B, NEAREST, false>(
                    p, ci, copy, own_weight, nb, dc, xc, &mut bad,
                );
            }
        }
    }
    any_rejected(&bad)
}

#[inline(always)]
fn moniqua_mix_impl<const NATIVE: bool, const V4: bool>(
    p: &ModParams<'_>,
    target: MixTarget<'_>,
    own_weight: f32,
    nb: &mut Neighbours<'_>,
    delta: &[f32],
) -> u32 {
    match p.rounding {
        Rounding::Nearest => {
            for_bits!(p.bits, B => moniqua_mix_fixed::<NATIVE, V4, B, true>(
                p, target, own_weight, nb, delta
            ))
        }
        Rounding::Stochastic => {
            for_bits!(p.bits, B => moniqua_mix_fixed::<NATIVE, V4, B, false>(
                p, target, own_weight, nb, delta
            ))
        }
    }
}

#[inline(always)]
fn moniqua_decode_impl<const NATIVE: bool, const V4: bool>(
    p: &ModParams<'_>,
    body: &[u8],
    local: &[f32],
    out: &mut [f32],
    accumulate: Option<f32>,
) -> Option<u64> {
    match accumulate {
        None => {
            for_bits!(p.bits, B => moniqua_decode_fixed::<NATIVE, V4, B, false>(p, body, local, out, 0.0))
        }
        Some(w) => {
            for_bits!(p.bits, B => moniqua_decode_fixed::<NATIVE, V4, B, true>(p, body, local, out, w))
        }
    }
}

/// Writes `max |v|` of each bucket as f32 into `scales`; counts buckets with
/// non-finite values. The maximum is taken over the bit patterns of `|v|`,
/// whose integer order is the float order, with NaN and infinity on top: an
/// integer max reduction vectorizes where a float one would not.
#[inline(always)]
fn bucket_scales_impl<const NATIVE: bool, const V4: bool>(
    bucket: usize,
    x: &[f32],
    scales: &mut [u8],
) -> u32 {
    let mut bad = 0u32;
    for (xb, dst) in x.chunks(bucket).zip(scales.chunks_exact_mut(4)) {
        let m = xb
            .iter()
            .fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff));
        bad += u32::from(m >= 0x7f80_0000);
        dst.copy_from_slice(&m.to_le_bytes());
    }
    bad
}

/// The end (within the block starting at `base`, of `n` values) of the run
/// that starts at `j` and shares bucket `(base + j) / bucket`.
#[inline(always)]
fn bucket_run_end(base: usize, j: usize, n: usize, bucket: usize) -> (usize, usize) {
    let k = (base + j) / bucket;
    (k, ((k + 1) * bucket - base).min(n))
}

#[inline(always)]
fn bucket_encode_impl<const NATIVE: bool, const V4: bool>(
    p: &BucketParams,
    x: &[f32],
    mut own: Option<&mut [f32]>,
    scales: &[u8],
    codes_out: &mut [u8],
) {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut from = 0;
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    if V4 && p.bucket.is_multiple_of(CHUNK) {
        let full = x.len() / CHUNK * CHUNK;
        let head = &mut codes_out[..full / 8 * p.bits as usize];
        let oh = own.as_deref_mut().map(|o| &mut o[..full]);
        // SAFETY: as in `moniqua_encode_fixed`.
        if unsafe { crate::avx512::bucket_encode(p, &x[..full], oh, scales, head) } {
            from = full;
        }
    }
    bucket_encode_from::<NATIVE>(p, x, from, own, scales, codes_out);
}

/// The baseline quantizer on `x[from..]` (`from` a multiple of 8).
#[inline(always)]
fn bucket_encode_from<const NATIVE: bool>(
    p: &BucketParams,
    x: &[f32],
    from: usize,
    mut own: Option<&mut [f32]>,
    scales: &[u8],
    codes_out: &mut [u8],
) {
    let top = ((1u32 << p.bits) - 1) as i32;
    let mut codes = [0u32; BLOCK];
    let mut u = [0f32; BLOCK];
    for (b, xb) in x[from..].chunks(BLOCK).enumerate() {
        let base = from + b * BLOCK;
        let n = xb.len();
        p.dither.fill(base as u32, &mut u[..n]);
        let mut j = 0;
        while j < n {
            let (k, end) = bucket_run_end(base, j, n, p.bucket);
            let s = scale_at(scales, k);
            let inv = if s > 0.0 { top as f32 / (2.0 * s) } else { 0.0 };
            for ((c, &v), &u) in codes[j..end].iter_mut().zip(&xb[j..end]).zip(&u[j..end]) {
                *c = floor_to_i32::<NATIVE>((v + s) * inv + u).clamp(0, top) as u32;
            }
            if let Some(own) = own.as_deref_mut() {
                let width = 2.0 * s / top as f32;
                for (h, &c) in own[base + j..base + end].iter_mut().zip(&codes[j..end]) {
                    *h = c as f32 * width - s;
                }
            }
            j = end;
        }
        let start = base / 8 * p.bits as usize;
        pack(
            &codes[..n],
            p.bits,
            &mut codes_out[start..start + packed_len(n, p.bits)],
        );
    }
}

/// Whether scale `s` can have come from an encoder (finite, non-negative).
#[inline(always)]
fn scale_ok(s: f32) -> bool {
    s >= 0.0 && s.is_finite()
}

/// Dequantizes; returns the first bucket whose scale is not finite and non-negative.
#[inline(always)]
fn bucket_decode_impl<const NATIVE: bool, const V4: bool>(
    bits: u32,
    bucket: usize,
    scales: &[u8],
    packed: &[u8],
    out: &mut [f32],
) -> Option<usize> {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut from = 0;
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut corrupt = None;
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    if V4 && bucket.is_multiple_of(CHUNK) {
        let full = out.len() / CHUNK * CHUNK;
        let head = &packed[..full / 8 * bits as usize];
        // SAFETY: as in `moniqua_encode_fixed`.
        if unsafe { crate::avx512::bucket_decode(bits, bucket, scales, head, &mut out[..full]) } {
            corrupt = (0..full.div_ceil(bucket)).find(|&k| !scale_ok(scale_at(scales, k)));
            from = full;
        }
    }
    let rest = bucket_decode_from(bits, bucket, scales, packed, out, from);
    corrupt.or(rest)
}

/// [`bucket_decode_impl`] of `out[from..]` (`from` a multiple of 8).
#[inline(always)]
fn bucket_decode_from(
    bits: u32,
    bucket: usize,
    scales: &[u8],
    packed: &[u8],
    out: &mut [f32],
    from: usize,
) -> Option<usize> {
    let top = ((1u32 << bits) - 1) as f32;
    let mut codes = [0u32; BLOCK];
    let mut corrupt = None;
    for (b, ob) in out[from..].chunks_mut(BLOCK).enumerate() {
        let base = from + b * BLOCK;
        let n = ob.len();
        let start = base / 8 * bits as usize;
        unpack(
            &packed[start..start + packed_len(n, bits)],
            bits,
            &mut codes[..n],
        );
        let mut j = 0;
        while j < n {
            let (k, end) = bucket_run_end(base, j, n, bucket);
            let s = scale_at(scales, k);
            if !scale_ok(s) {
                corrupt.get_or_insert(k);
            }
            let width = 2.0 * s / top;
            for (o, &c) in ob[j..end].iter_mut().zip(&codes[j..end]) {
                *o = c as f32 * width - s;
            }
            j = end;
        }
    }
    corrupt
}

/// [`Dither::fill`]: whole chunks from a chunk boundary in the AVX-512
/// loop, the rest (and every value at other levels, where the inlined
/// hash vectorizes) portably; the same values.
#[inline(always)]
fn dither_fill_impl<const NATIVE: bool, const V4: bool>(
    dither: &Dither,
    start: u32,
    out: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    if V4 && start.is_multiple_of(CHUNK as u32) {
        let whole = out.len() / CHUNK * CHUNK;
        let (head, tail) = out.split_at_mut(whole);
        // SAFETY: `V4` is only instantiated for a CPU with AVX-512
        // (`multiversion!` runs after checking the CPU's features).
        unsafe { crate::avx512::fill_chunks(dither, start / CHUNK as u32, head) };
        dither.fill(start.wrapping_add(whole as u32), tail);
        return;
    }
    dither.fill(start, out);
}

multiversion! {
    /// The dither's uniforms of values `start..start + out.len()` (see
    /// [`Dither::fill`]).
    fn dither_fill / dither_fill_at(dither: &Dither, start: u32, out: &mut [f32]) -> () = dither_fill_impl;
}
multiversion! {
    /// Moniqua encode of `x` into `body` (exactly `packed_len(x.len(), bits)` bytes).
    fn moniqua_encode / moniqua_encode_at(p: &ModParams<'_>, x: &[f32], own: Option<&mut [f32]>, body: &mut [u8]) -> KernelOut = moniqua_encode_impl;
}
// the tests' oracle for the local term that `moniqua_mix` fuses in
#[cfg(test)]
multiversion! {
    /// `weight` times the local biased term of a Moniqua encode of `x`, without the frame.
    fn moniqua_local_term / moniqua_local_term_at(p: &ModParams<'_>, x: &[f32], weight: f32, own: &mut [f32]) -> u32 = moniqua_local_term_impl;
}
multiversion! {
    /// Algorithm 1's update of `x` into `out` from the neighbours' bodies, in one pass.
    fn moniqua_mix / moniqua_mix_at(p: &ModParams<'_>, target: MixTarget<'_>, own_weight: f32, nb: &mut Neighbours<'_>, delta: &[f32]) -> u32 = moniqua_mix_impl;
}
multiversion! {
    /// Moniqua recovery of a neighbour's codes against the local model into
    /// `out` (or `out += w x^` with `accumulate = Some(w)`); returns the code hash.
    fn moniqua_decode / moniqua_decode_at(p: &ModParams<'_>, body: &[u8], local: &[f32], out: &mut [f32], accumulate: Option<f32>) -> Option<u64> = moniqua_decode_impl;
}
multiversion! {
    /// Per-bucket scales; returns the number of non-finite inputs.
    fn bucket_scales / bucket_scales_at(bucket: usize, x: &[f32], scales: &mut [u8]) -> u32 = bucket_scales_impl;
}
multiversion! {
    /// Baseline stochastic rounding of `x` given its scales.
    fn bucket_encode / bucket_encode_at(p: &BucketParams, x: &[f32], own: Option<&mut [f32]>, scales: &[u8], codes_out: &mut [u8]) -> () = bucket_encode_impl;
}
multiversion! {
    /// Baseline dequantization.
    fn bucket_decode / bucket_decode_at(bits: u32, bucket: usize, scales: &[u8], packed: &[u8], out: &mut [f32]) -> Option<usize> = bucket_decode_impl;
}

#[cfg(test)]
mod tests {
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
                        let corrupt =
                            bucket_decode_at(level, bits, bucket, &scales, &codes, &mut out);
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
}
