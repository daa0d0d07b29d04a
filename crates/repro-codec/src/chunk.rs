//! What the portable kernels (`kernels.rs`) and the hand-written AVX-512
//! loops (`avx512.rs`) share: the chunk a fused step works on,
//! the code hash, the parameter blocks and the range every encoder checks.
//! Both import it; neither imports the other's types.

use crate::Rounding;
use crate::dither::Dither;
use crate::round::EXACT_LIMIT;

/// Hash lanes: four independent 16-lane vectors keep the multiplier busy
/// (one chain would wait on the multiply latency).
const LANES: usize = 64;
pub(crate) const HASH_MUL: u32 = 0x9E37_79B1;

/// A 64-bit hash of a sequence of 32-bit codes, computed in 64 independent
/// lanes so it vectorizes: lane `l` folds codes `l, l + 64, l + 128, ...` with
/// `h = rotl((h ^ c) * odd, 15)`, a bijection in `h` and in `c`; the lanes and
/// the length are then hashed with xxh3-64. One wrong code always changes the
/// hash; several cancel with probability about 2^-32.
#[derive(Debug, Clone)]
pub(crate) struct CodeHash {
    pub(crate) lanes: [u32; LANES],
    pub(crate) len: u64,
}

impl CodeHash {
    #[inline(always)]
    pub(crate) fn new() -> Self {
        let mut lanes = [0u32; LANES];
        for (l, h) in lanes.iter_mut().enumerate() {
            *h = (l as u32 + 1).wrapping_mul(0x85EB_CA77);
        }
        Self { lanes, len: 0 }
    }

    /// Folds `codes` in. Every call but the last must pass a multiple of 64.
    #[inline(always)]
    pub(crate) fn update(&mut self, codes: &[u32]) {
        let mut chunks = codes.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (h, &c) in self.lanes.iter_mut().zip(chunk) {
                *h = (*h ^ c).wrapping_mul(HASH_MUL).rotate_left(15);
            }
        }
        for (h, &c) in self.lanes.iter_mut().zip(chunks.remainder()) {
            *h = (*h ^ c).wrapping_mul(HASH_MUL).rotate_left(15);
        }
        self.len += codes.len() as u64;
    }

    pub(crate) fn finish(&self) -> u64 {
        let mut bytes = [0u8; 4 * LANES];
        for (dst, h) in bytes.chunks_exact_mut(4).zip(&self.lanes) {
            dst.copy_from_slice(&h.to_le_bytes());
        }
        xxhash_rust::xxh3::xxh3_64_with_seed(&bytes, self.len)
    }
}

/// Largest `|x 2^b / B|` Moniqua encodes exactly (a margin below
/// [`EXACT_LIMIT`] leaves room for the dither and the rounding offset).
pub(crate) const MODULO_LIMIT: f32 = EXACT_LIMIT - 4.0;

/// Whether `|t| < MODULO_LIMIT` (false for NaN and infinities).
#[inline(always)]
pub(crate) fn in_range(t: f32) -> bool {
    t.abs() < MODULO_LIMIT
}

/// How many lanes of `kernels::quantize`'s maxima saw an input that is not
/// [`in_range`]: nonzero exactly when some input was rejected.
#[inline(always)]
pub(crate) fn any_rejected(bad: &[u32; CHUNK]) -> u32 {
    bad.iter()
        .map(|&m| u32::from(m >= MODULO_LIMIT.to_bits()))
        .sum()
}

/// Parameters of a Moniqua encode or decode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModParams<'t> {
    pub bits: u32,
    pub levels: i32,
    /// `2^bits / B`
    pub scale: f32,
    /// `B / 2^bits`
    pub step: f32,
    pub rounding: Rounding,
    pub dither: Dither,
    /// Empty, or `dither.uniform(i)` for every coordinate `i` of the call
    /// (computed once and shared by callers that encode many models at the
    /// same iteration): read instead of hashed, the same values.
    pub table: &'t [f32],
    pub hash: bool,
}

/// Values per fused step: one round of every hash lane, one dither chunk, a
/// whole number of bytes.
pub(crate) const CHUNK: usize = LANES;
const _: () = assert!(CHUNK == crate::dither::DITHER_CHUNK);

/// What `kernels::moniqua_mix` may encode as it goes: each updated chunk, while it
/// is in registers, into `body` (the packed codes of the updated model, as
/// `kernels::moniqua_encode` with `p` writes them; no hash), folding the updated
/// values' magnitudes into `bad` (see [`any_rejected`]).
#[derive(Debug)]
pub(crate) struct EncodeNext<'a> {
    pub p: ModParams<'a>,
    pub body: &'a mut [u8],
    pub bad: [u32; CHUNK],
}

impl EncodeNext<'_> {
    /// Nonzero if an updated value could not be encoded.
    pub(crate) fn rejected(&self) -> u32 {
        any_rejected(&self.bad)
    }
}

/// Parameters of a baseline (per-bucket scale) encode or decode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BucketParams {
    pub bits: u32,
    pub bucket: usize,
    pub dither: Dither,
}

#[inline(always)]
pub(crate) fn scale_at(scales: &[u8], k: usize) -> f32 {
    let s = &scales[4 * k..4 * k + 4];
    f32::from_le_bytes([s[0], s[1], s[2], s[3]])
}
