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
mod tests;
