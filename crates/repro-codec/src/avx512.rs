//! Hand-written AVX-512 loops over whole 64-value chunks at 1, 2, 4 and 8
//! bits: Moniqua's encode, decode and one-pass mix, and the baselines'
//! per-bucket quantizer and its decoder.
//!
//! The portable kernels (`kernels.rs`) quantize into a code array, then pack
//! it, hash it and dequantize it in separate loops; the compiler keeps the
//! codes in memory between them and packs narrow widths with shuffles. Here
//! each 16 values stay in registers from the load to the packed bytes: one
//! instruction floors and converts (`vcvtps2dq` with round-down), a 1- or
//! 2-bit code leaves as a mask (`vptestmd`, `pdep`), and a received code enters as one (masked
//! moves of 1.0 and 2.0, `pext`). The range check keeps each lane's largest
//! `|t|` bit pattern with an unsigned max, as the portable loops do.
//!
//! The loops are bound by the vector ports (0 and 5 at 512 bits; the dither's
//! multiplies, shifts and conversions all need port 0), so an instruction
//! saved on port 0 is time saved: `llvm-mca -mcpu=icelake-server` on the
//! 2-bit stochastic encode put it at 46 cycles per 64 values before these
//! three changes and 31 after.
//!
//! Every function computes the same values as its portable counterpart: the
//! same operations in the same order, and a fused multiply-add only where the
//! product is exact, so it rounds once as the separate operations do. The
//! bits are identical; `kernels::tests::every_simd_level_produces_identical_bits`
//! checks this for every width, rounding, hash and a partial last chunk
//! (handled by the portable code). The caller guarantees the CPU has the
//! features (the kernels reach these only from their AVX-512 instantiation).

#![allow(unsafe_code)]

use core::arch::x86_64::*;

use crate::chunk::{BucketParams, CHUNK, CodeHash, EncodeNext, HASH_MUL, ModParams, scale_at};
use crate::dither::Dither;
use crate::round::MAGIC;
use crate::simd::Prefetch;

/// Widths with a vector packer here; the others stay portable.
pub(crate) const fn supports(bits: usize) -> bool {
    matches!(bits, 1 | 2 | 4 | 8)
}

/// `floor` as the conversion's rounding, without raising exceptions: one
/// instruction, the same integers as `round::floor_to_i32` for `|v| < 2^22`.
const FLOOR: i32 = _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC;

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn load16(s: &[f32]) -> __m512 {
    let s: &[f32; 16] = s[..16].try_into().expect("16 values");
    // SAFETY: `s` is 16 readable f32 (64 bytes); unaligned loads are allowed.
    unsafe { _mm512_loadu_ps(s.as_ptr()) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn store16(d: &mut [f32], v: __m512) {
    let d: &mut [f32; 16] = (&mut d[..16]).try_into().expect("16 values");
    // SAFETY: `d` is 16 writable f32.
    unsafe { _mm512_storeu_ps(d.as_mut_ptr(), v) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn load_lanes(lanes: &[u32]) -> __m512i {
    let s: &[u32; 16] = lanes[..16].try_into().expect("16 lanes");
    // SAFETY: 16 readable u32.
    unsafe { _mm512_loadu_epi32(s.as_ptr().cast()) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn store_lanes(lanes: &mut [u32], v: __m512i) {
    let d: &mut [u32; 16] = (&mut lanes[..16]).try_into().expect("16 lanes");
    // SAFETY: 16 writable u32.
    unsafe { _mm512_storeu_epi32(d.as_mut_ptr().cast(), v) }
}

/// [`CodeHash`]'s 64 lanes in four registers.
struct Lanes([__m512i; 4]);

impl Lanes {
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
    #[inline]
    fn load(h: &CodeHash) -> Self {
        Self(std::array::from_fn(|v| load_lanes(&h.lanes[16 * v..])))
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
    #[inline]
    fn store(&self, h: &mut CodeHash, codes: usize) {
        for (v, &l) in self.0.iter().enumerate() {
            store_lanes(&mut h.lanes[16 * v..], l);
        }
        h.len += codes as u64;
    }

    /// Folds the codes of vector `v` of a chunk into its lanes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
    #[inline]
    fn update(&mut self, v: usize, c: __m512i) {
        let h = _mm512_xor_si512(self.0[v], c);
        let h = _mm512_mullo_epi32(h, _mm512_set1_epi32(HASH_MUL as i32));
        self.0[v] = _mm512_rol_epi32::<15>(h);
    }
}

/// The bits of 1.0f32 in every lane.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn one_bits() -> __m512i {
    _mm512_set1_epi32(0x3f80_0000)
}

/// `lowbias32` on 16 lanes (`dither::mix32`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn mix32(x: __m512i) -> __m512i {
    let x = _mm512_xor_si512(x, _mm512_srli_epi32::<16>(x));
    let x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x7feb_352d));
    let x = _mm512_xor_si512(x, _mm512_srli_epi32::<15>(x));
    let x = _mm512_mullo_epi32(x, _mm512_set1_epi32(0x846c_a68b_u32 as i32));
    _mm512_xor_si512(x, _mm512_srli_epi32::<16>(x))
}

/// The offsets added to `t` before the floor, for chunk `ci`'s four vectors:
/// one half for nearest rounding, else the dither's uniforms, read from
/// `p.table` when there is one, else hashed (values `16 v ..` take the low
/// halves of words `0..16` and `16..32`, then the high halves).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn offsets<const NEAREST: bool>(p: &ModParams<'_>, ci: u32) -> [__m512; 4] {
    if NEAREST {
        return [_mm512_set1_ps(0.5); 4];
    }
    if !p.table.is_empty() {
        let at = ci as usize * CHUNK;
        return std::array::from_fn(|v| load16(&p.table[at + 16 * v..]));
    }
    hashed_offsets(&p.dither, ci)
}

/// `Dither::fill_chunk`'s uniforms of chunk `ci` in four vectors (see
/// [`offsets`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn hashed_offsets(dither: &Dither, ci: u32) -> [__m512; 4] {
    let (k0, k1) = dither.keys();
    let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let a = _mm512_add_epi32(
        _mm512_set1_epi32(ci.wrapping_mul(32).wrapping_add(k0) as i32),
        iota,
    );
    let b = _mm512_add_epi32(a, _mm512_set1_epi32(16));
    let k1 = _mm512_set1_epi32(k1 as i32);
    let wa = _mm512_xor_si512(mix32(a), k1);
    let wb = _mm512_xor_si512(mix32(b), k1);
    // 16 bits h placed at the top of a mantissa in [1, 2): 1 + h 2^-16, and
    // minus one, exactly `h as f32 / 65536` (as the portable code computes it)
    // without a conversion and a multiply on the busiest port
    let mantissa = _mm512_set1_epi32(0x007f_ff80);
    let one = _mm512_set1_ps(1.0);
    let u = |h: __m512i| {
        let bits = _mm512_ternarylogic_epi32::<0xf8>(one_bits(), h, mantissa);
        _mm512_sub_ps(_mm512_castsi512_ps(bits), one)
    };
    [
        u(_mm512_slli_epi32::<7>(wa)),
        u(_mm512_slli_epi32::<7>(wb)),
        u(_mm512_srli_epi32::<9>(wa)),
        u(_mm512_srli_epi32::<9>(wb)),
    ]
}

/// `Dither::fill` of whole chunks from chunk `first`: `out` a multiple of
/// 64 values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
pub(crate) fn fill_chunks(dither: &Dither, first: u32, out: &mut [f32]) {
    for (ci, oc) in out.chunks_exact_mut(CHUNK).enumerate() {
        let u = hashed_offsets(dither, first.wrapping_add(ci as u32));
        for (v, &u) in u.iter().enumerate() {
            store16(&mut oc[16 * v..], u);
        }
    }
}

/// `kernels::quantize` of 16 values: the un-modded codes (as floats and as
/// integers), and `|t|` folded into `bad`'s lane maxima (a float `|t|`, whose
/// bits order as the portable kernels' integer maxima; see [`fold_bad`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn quantize(x: __m512, scale: __m512, u: __m512, bad: &mut __m512) -> (__m512, __m512i) {
    let t = _mm512_mul_ps(x, scale);
    // `|t|`'s bits, an unsigned max as in the portable kernels: NaN and
    // infinities order above every number. (`vrangeps` would do it in one
    // instruction, but it returns the other operand for a NaN, which let a
    // NaN through; `kernels::tests` plants one in a whole chunk.)
    let abs = _mm512_and_si512(_mm512_castps_si512(t), _mm512_set1_epi32(0x7fff_ffff));
    *bad = _mm512_castsi512_ps(_mm512_max_epu32(_mm512_castps_si512(*bad), abs));
    let c = _mm512_cvt_roundps_epi32::<FLOOR>(_mm512_add_ps(t, u));
    (_mm512_cvtepi32_ps(c), c)
}

/// The lanes of `c` with a bit of `bits` set, as a mask: `vptestmd`, which
/// runs beside the shifts and conversions (port 5) where the compiler would
/// turn a test of bit 0 into a shift and `vpmovd2m`, both on the port those
/// already crowd (port 0).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn test_lanes(c: __m512i, bits: __m512i) -> u16 {
    let m: u16;
    // SAFETY: a register-only AVX-512F instruction (the caller's features).
    unsafe {
        core::arch::asm!(
            "vptestmd {m}, {c}, {b}",
            m = out(kreg) m,
            c = in(zmm_reg) c,
            b = in(zmm_reg) bits,
            options(pure, nomem, nostack, preserves_flags),
        );
    }
    m
}

/// Packs 16 codes (their low `B` bits) into `dst` (`2 B` bytes).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn pack16<const B: usize>(c: __m512i, dst: &mut [u8]) {
    match B {
        1 => {
            let m = test_lanes(c, _mm512_set1_epi32(1));
            dst[..2].copy_from_slice(&m.to_le_bytes());
        }
        2 => {
            let lo = u32::from(test_lanes(c, _mm512_set1_epi32(1)));
            let hi = u32::from(test_lanes(c, _mm512_set1_epi32(2)));
            let w = _pdep_u32(lo, 0x5555_5555) | _pdep_u32(hi, 0xaaaa_aaaa);
            dst[..4].copy_from_slice(&w.to_le_bytes());
        }
        4 => {
            // two codes per 64-bit lane: the odd one's nibble next to the even one's
            let v = _mm512_and_si512(c, _mm512_set1_epi32(0xf));
            let v = _mm512_or_si512(v, _mm512_srli_epi64::<28>(v));
            let bytes = _mm512_cvtepi64_epi8(v);
            let d: &mut [u8; 8] = (&mut dst[..8]).try_into().expect("8 bytes");
            // SAFETY: 8 writable bytes; the store writes the low 8 bytes.
            unsafe { _mm_storel_epi64(d.as_mut_ptr().cast(), bytes) }
        }
        _ => {
            let bytes = _mm512_cvtepi32_epi8(c);
            let d: &mut [u8; 16] = (&mut dst[..16]).try_into().expect("16 bytes");
            // SAFETY: 16 writable bytes.
            unsafe { _mm_storeu_si128(d.as_mut_ptr().cast(), bytes) }
        }
    }
}

/// Unpacks 16 codes of `B` bits from `src` (`2 B` bytes), as floats (the
/// recovery needs nothing else): 1- and 2-bit codes straight from masks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn unpack16<const B: usize>(src: &[u8]) -> __m512 {
    match B {
        1 => {
            let m = u16::from_le_bytes([src[0], src[1]]);
            _mm512_maskz_mov_ps(m, _mm512_set1_ps(1.0))
        }
        2 => {
            let w = u32::from_le_bytes([src[0], src[1], src[2], src[3]]);
            let (lo, hi) = (_pext_u32(w, 0x5555_5555), _pext_u32(w, 0xaaaa_aaaa));
            let v = _mm512_maskz_mov_ps(lo as u16, _mm512_set1_ps(1.0));
            _mm512_mask_add_ps(v, hi as u16, v, _mm512_set1_ps(2.0))
        }
        4 => {
            let s: [u8; 8] = src[..8].try_into().expect("8 bytes");
            let b = _mm_cvtsi64_si128(i64::from_le_bytes(s));
            let nib = _mm_set1_epi8(0xf);
            let lo = _mm_and_si128(b, nib);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(b), nib);
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)))
        }
        _ => {
            let s: &[u8; 16] = src[..16].try_into().expect("16 bytes");
            // SAFETY: 16 readable bytes.
            let b = unsafe { _mm_loadu_si128(s.as_ptr().cast()) };
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b))
        }
    }
}

/// `kernels::recover_one` of 16 received codes `rf` against `y`: the
/// un-modded codes (when `CODES`; else zero) and `Ĉ B / 2^b`. `z 2^-b` is
/// exact, so `fma(z, 2^-b, M)` rounds once as the portable `z 2^-b + M`
/// does; `turns 2^b + r` is exact, so its FMA is too.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn recover<const CODES: bool>(p: &ModParams<'_>, rf: __m512, y: __m512) -> (__m512i, __m512) {
    let magic = _mm512_set1_ps(MAGIC);
    let z = _mm512_sub_ps(_mm512_mul_ps(y, _mm512_set1_ps(p.scale)), rf);
    let t = _mm512_fmadd_ps(z, _mm512_set1_ps(1.0 / p.levels as f32), magic);
    let turns = _mm512_sub_ps(t, magic);
    let full = _mm512_fmadd_ps(turns, _mm512_set1_ps(p.levels as f32), rf);
    let v = _mm512_mul_ps(full, _mm512_set1_ps(p.step));
    let codes = if CODES {
        _mm512_cvttps_epi32(full)
    } else {
        _mm512_setzero_si512()
    };
    (codes, v)
}

/// Folds the lane maxima of `|t|` into the portable kernels' `bad` array.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn fold_bad(badv: &[__m512; 4], bad: &mut [u32; CHUNK]) {
    let mut m = load_lanes(&bad[..16]);
    for &b in badv {
        m = _mm512_max_epu32(m, _mm512_castps_si512(b));
    }
    store_lanes(&mut bad[..16], m);
}

/// Moniqua encode of whole chunks: `x` holds a multiple of 64 values, `body`
/// their packed codes; `own` (same length as `x`) gets the local biased
/// term. Folds the codes into `hash` when `HASH` and the inputs' magnitudes
/// into `bad`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
pub(crate) fn encode_chunks<const B: usize, const NEAREST: bool, const HASH: bool>(
    p: &ModParams<'_>,
    x: &[f32],
    mut own: Option<&mut [f32]>,
    body: &mut [u8],
    hash: &mut CodeHash,
    bad: &mut [u32; CHUNK],
) {
    let scale = _mm512_set1_ps(p.scale);
    let step = _mm512_set1_ps(p.step);
    let mut badv = [_mm512_setzero_ps(); 4];
    let mut lanes = Lanes::load(hash);
    for (ci, (xc, dst)) in x
        .chunks_exact(CHUNK)
        .zip(body.chunks_exact_mut(CHUNK / 8 * B))
        .enumerate()
    {
        let u = offsets::<NEAREST>(p, ci as u32);
        for (v, &u) in u.iter().enumerate() {
            let (cf, c) = quantize(load16(&xc[16 * v..]), scale, u, &mut badv[v]);
            if let Some(own) = own.as_deref_mut() {
                let h = _mm512_mul_ps(cf, step);
                store16(&mut own[ci * CHUNK + 16 * v..], h);
            }
            if HASH {
                lanes.update(v, c);
            }
            pack16::<B>(c, &mut dst[2 * B * v..]);
        }
    }
    if HASH {
        lanes.store(hash, x.len() / CHUNK * CHUNK);
    }
    fold_bad(&badv, bad);
}

/// Moniqua decode of whole chunks: `local` holds a multiple of 64 values and
/// `body` their packed codes; writes `out = x^` (or, with `ACC`, adds
/// `w x^`). Folds the recovered codes into `hash` when `HASH`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
pub(crate) fn decode_chunks<const B: usize, const ACC: bool, const HASH: bool>(
    p: &ModParams<'_>,
    body: &[u8],
    local: &[f32],
    out: &mut [f32],
    w: f32,
    hash: &mut CodeHash,
) {
    let wv = _mm512_set1_ps(w);
    let mut lanes = Lanes::load(hash);
    for ((src, yc), oc) in body
        .chunks_exact(CHUNK / 8 * B)
        .zip(local.chunks_exact(CHUNK))
        .zip(out.chunks_exact_mut(CHUNK))
    {
        for v in 0..CHUNK / 16 {
            let r = unpack16::<B>(&src[2 * B * v..]);
            let (full, val) = recover::<HASH>(p, r, load16(&yc[16 * v..]));
            let o = if ACC {
                _mm512_add_ps(load16(&oc[16 * v..]), _mm512_mul_ps(wv, val))
            } else {
                val
            };
            store16(&mut oc[16 * v..], o);
            if HASH {
                lanes.update(v, full);
            }
        }
    }
    if HASH {
        lanes.store(hash, local.len() / CHUNK * CHUNK);
    }
}

/// `kernels::moniqua_mix` over whole chunks: `x` (or `out`'s own values in
/// place when `x` is `None`) a multiple of 64 values; `hashes[j]` (one per
/// body when `HASH`, else possibly empty) gets
/// neighbour `j`'s recovered codes when `HASH`. Prefetches `next` as it goes,
/// as much of it per chunk as the chunk's model. With `encode`, packs each
/// updated chunk's codes there (see `kernels::EncodeNext`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn mix_chunks<const B: usize, const NEAREST: bool, const HASH: bool>(
    p: &ModParams<'_>,
    x: Option<&[f32]>,
    out: &mut [f32],
    own_weight: f32,
    bodies: &[&[u8]],
    weights: &[f32],
    hashes: &mut [CodeHash],
    delta: &[f32],
    bad: &mut [u32; CHUNK],
    next: Prefetch,
    mut encode: Option<&mut EncodeNext<'_>>,
) {
    let scale = _mm512_set1_ps(p.scale);
    let step = _mm512_set1_ps(p.step);
    let ow = _mm512_set1_ps(own_weight);
    let mut badv = [_mm512_setzero_ps(); 4];
    let mut bad_next = [_mm512_setzero_ps(); 4];
    let n = out.len() / CHUNK;
    for ci in 0..n {
        let at = ci * CHUNK;
        // as many bytes of the hinted memory as this chunk's model
        next.lines(4 * at, 4 * CHUNK);
        let u = offsets::<NEAREST>(p, ci as u32);
        let src: &[f32] = match x {
            Some(x) => &x[at..at + CHUNK],
            None => &out[at..at + CHUNK],
        };
        let xv: [__m512; 4] = std::array::from_fn(|v| load16(&src[16 * v..]));
        let mut acc: [__m512; 4] = std::array::from_fn(|v| {
            let (cf, _) = quantize(xv[v], scale, u[v], &mut badv[v]);
            _mm512_mul_ps(_mm512_mul_ps(cf, step), ow)
        });
        let start = ci * (CHUNK / 8 * B);
        for (j, (body, &w)) in bodies.iter().zip(weights).enumerate() {
            let src = &body[start..start + CHUNK / 8 * B];
            let wv = _mm512_set1_ps(w);
            let mut lanes = if HASH {
                Some(Lanes::load(&hashes[j]))
            } else {
                None
            };
            for (v, a) in acc.iter_mut().enumerate() {
                let r = unpack16::<B>(&src[2 * B * v..]);
                let (full, val) = recover::<HASH>(p, r, xv[v]);
                *a = _mm512_add_ps(*a, _mm512_mul_ps(wv, val));
                if let Some(l) = lanes.as_mut() {
                    l.update(v, full);
                }
            }
            if let Some(l) = lanes {
                l.store(&mut hashes[j], CHUNK);
            }
        }
        let dc = &delta[at..at + CHUNK];
        let oc = &mut out[at..at + CHUNK];
        let o: [__m512; 4] = std::array::from_fn(|v| {
            let o = _mm512_add_ps(xv[v], _mm512_sub_ps(acc[v], load16(&dc[16 * v..])));
            store16(&mut oc[16 * v..], o);
            o
        });
        // the next frame's codes of the update, from registers
        if let Some(e) = encode.as_deref_mut() {
            let u = offsets::<NEAREST>(&e.p, ci as u32);
            let scale = _mm512_set1_ps(e.p.scale);
            let dst = &mut e.body[start..start + CHUNK / 8 * B];
            for v in 0..CHUNK / 16 {
                let (_, c) = quantize(o[v], scale, u[v], &mut bad_next[v]);
                pack16::<B>(c, &mut dst[2 * B * v..]);
            }
        }
    }
    fold_bad(&badv, bad);
    if let Some(e) = encode {
        fold_bad(&bad_next, &mut e.bad);
    }
}

/// The baselines' quantizer (`kernels::bucket_encode_from`) over whole
/// chunks, each inside one bucket (`p.bucket` a multiple of 64): `x` a
/// multiple of 64 values. Returns false, doing nothing, at a width without
/// a packer here.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
pub(crate) fn bucket_encode(
    p: &BucketParams,
    x: &[f32],
    own: Option<&mut [f32]>,
    scales: &[u8],
    out: &mut [u8],
) -> bool {
    match p.bits {
        1 => bucket_encode_fixed::<1>(p, x, own, scales, out),
        2 => bucket_encode_fixed::<2>(p, x, own, scales, out),
        4 => bucket_encode_fixed::<4>(p, x, own, scales, out),
        8 => bucket_encode_fixed::<8>(p, x, own, scales, out),
        _ => return false,
    }
    true
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn bucket_encode_fixed<const B: usize>(
    p: &BucketParams,
    x: &[f32],
    mut own: Option<&mut [f32]>,
    scales: &[u8],
    out: &mut [u8],
) {
    let top = ((1u32 << B) - 1) as i32;
    let (zero, topv) = (_mm512_setzero_si512(), _mm512_set1_epi32(top));
    for (ci, (xc, dst)) in x
        .chunks_exact(CHUNK)
        .zip(out.chunks_exact_mut(CHUNK / 8 * B))
        .enumerate()
    {
        let s = scale_at(scales, ci * CHUNK / p.bucket);
        let inv = if s > 0.0 { top as f32 / (2.0 * s) } else { 0.0 };
        let (sv, invv) = (_mm512_set1_ps(s), _mm512_set1_ps(inv));
        let width = _mm512_set1_ps(2.0 * s / top as f32);
        let u = hashed_offsets(&p.dither, ci as u32);
        for (v, &u) in u.iter().enumerate() {
            let t = _mm512_mul_ps(_mm512_add_ps(load16(&xc[16 * v..]), sv), invv);
            let c = _mm512_cvt_roundps_epi32::<FLOOR>(_mm512_add_ps(t, u));
            let c = _mm512_min_epi32(_mm512_max_epi32(c, zero), topv);
            if let Some(own) = own.as_deref_mut() {
                let h = _mm512_sub_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(c), width), sv);
                store16(&mut own[ci * CHUNK + 16 * v..], h);
            }
            pack16::<B>(c, &mut dst[2 * B * v..]);
        }
    }
}

/// The baselines' dequantization (`kernels::bucket_decode_from`) over whole
/// chunks (`bucket` a multiple of 64): `out` a multiple of 64 values. Returns
/// false, doing nothing, at a width without an unpacker here. Does not check
/// the scales (the caller does).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
pub(crate) fn bucket_decode(
    bits: u32,
    bucket: usize,
    scales: &[u8],
    packed: &[u8],
    out: &mut [f32],
) -> bool {
    match bits {
        1 => bucket_decode_fixed::<1>(bucket, scales, packed, out),
        2 => bucket_decode_fixed::<2>(bucket, scales, packed, out),
        4 => bucket_decode_fixed::<4>(bucket, scales, packed, out),
        8 => bucket_decode_fixed::<8>(bucket, scales, packed, out),
        _ => return false,
    }
    true
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
#[inline]
fn bucket_decode_fixed<const B: usize>(
    bucket: usize,
    scales: &[u8],
    packed: &[u8],
    out: &mut [f32],
) {
    let top = ((1u32 << B) - 1) as f32;
    for (ci, (src, oc)) in packed
        .chunks_exact(CHUNK / 8 * B)
        .zip(out.chunks_exact_mut(CHUNK))
        .enumerate()
    {
        let s = scale_at(scales, ci * CHUNK / bucket);
        let (sv, width) = (_mm512_set1_ps(s), _mm512_set1_ps(2.0 * s / top));
        for v in 0..CHUNK / 16 {
            let c = unpack16::<B>(&src[2 * B * v..]);
            store16(
                &mut oc[16 * v..],
                _mm512_sub_ps(_mm512_mul_ps(c, width), sv),
            );
        }
    }
}
