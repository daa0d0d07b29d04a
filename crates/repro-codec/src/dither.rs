//! Counter-based randomness for stochastic rounding.
//!
//! The dither for coordinate `i` at iteration `k` is a pure function of
//! `(seed, stream, k, i)`: no state, no ordering, identical on every worker that
//! uses the same stream. Moniqua's *shared randomness* (Section 6) uses one
//! stream for all workers; the baselines give each sender its own stream.

/// SplitMix64 finalizer: a bijective 64-bit mixer.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 32-bit bijective mixer with low bias (C. Wellons' `lowbias32`). One
/// round per coordinate, keyed by a SplitMix64-derived key: the statistical
/// tests below (uniformity, bit balance, correlation across coordinates and
/// iterations) hold, at twice the speed of two rounds.
#[inline(always)]
fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// The dither of one (seed, stream, iteration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dither {
    k0: u32,
    k1: u32,
}

/// Coordinates per dither chunk (see [`Dither::uniform`]).
pub const DITHER_CHUNK: usize = 64;

/// The stream all Moniqua workers share (Section 6, shared randomness).
pub const SHARED_STREAM: u64 = 0;

impl Dither {
    /// The dither of `iteration` in `stream` of the run with `seed`.
    pub fn new(seed: u64, stream: u64, iteration: u64) -> Self {
        let key = mix64(mix64(mix64(seed) ^ stream) ^ iteration);
        Self {
            k0: key as u32,
            k1: (key >> 32) as u32,
        }
    }

    /// The two 32-bit keys (`word(w)` is `mix32(w + k0) ^ k1`).
    #[inline(always)]
    pub(crate) fn keys(&self) -> (u32, u32) {
        (self.k0, self.k1)
    }

    /// This dither seen from chunk `chunks` on: its chunk `c` is this one's
    /// chunk `chunks + c` (coordinate `i` is this one's `64 chunks + i`).
    #[inline(always)]
    pub(crate) fn skip_chunks(&self, chunks: u32) -> Self {
        Self {
            k0: self
                .k0
                .wrapping_add(chunks.wrapping_mul(DITHER_CHUNK as u32 / 2)),
            k1: self.k1,
        }
    }

    /// 32 random bits: word `w` of this dither.
    #[inline(always)]
    pub fn word(&self, w: u32) -> u32 {
        mix32(w.wrapping_add(self.k0)) ^ self.k1
    }

    /// A uniform sample in `[0, 1)` with 16 bits of resolution for coordinate
    /// `i`. Coordinates come in chunks of [`DITHER_CHUNK`]: coordinate
    /// `64 c + j` takes the low half of word `32 c + j` when `j < 32`, else the
    /// high half of word `32 c + j - 32`; one hash serves two coordinates.
    /// (16 bits bias stochastic rounding by at most 2^-17 of a step.)
    #[inline(always)]
    pub fn uniform(&self, i: u32) -> f32 {
        let j = i % 64;
        let w = self.word((i / 64) * 32 + j % 32);
        let half = if j < 32 { w & 0xffff } else { w >> 16 };
        half as i32 as f32 * (1.0 / 65_536.0)
    }

    /// Writes `uniform(64 chunk + j)` into `out[j]` (`out` holds at most 64).
    #[inline(always)]
    pub fn fill_chunk(&self, chunk: u32, out: &mut [f32]) {
        let mut words = [0u32; DITHER_CHUNK / 2];
        let base = chunk.wrapping_mul(32);
        for (j, w) in words.iter_mut().enumerate() {
            *w = self.word(base.wrapping_add(j as u32));
        }
        let (low, high) = out.split_at_mut(out.len().min(DITHER_CHUNK / 2));
        for (u, &w) in low.iter_mut().zip(&words) {
            *u = (w & 0xffff) as i32 as f32 * (1.0 / 65_536.0);
        }
        for (u, &w) in high.iter_mut().zip(&words) {
            *u = (w >> 16) as i32 as f32 * (1.0 / 65_536.0);
        }
    }

    /// Writes `uniform(start + j)` into `out[j]`.
    #[inline(always)]
    pub fn fill(&self, start: u32, out: &mut [f32]) {
        if start.is_multiple_of(DITHER_CHUNK as u32) {
            for (c, chunk) in out.chunks_mut(DITHER_CHUNK).enumerate() {
                self.fill_chunk(start / DITHER_CHUNK as u32 + c as u32, chunk);
            }
        } else {
            for (j, u) in out.iter_mut().enumerate() {
                *u = self.uniform(start.wrapping_add(j as u32));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dither_is_a_pure_function_of_its_key() {
        let a = Dither::new(7, SHARED_STREAM, 42);
        let b = Dither::new(7, SHARED_STREAM, 42);
        assert_eq!(a, b);
        assert_eq!(a.uniform(12345), b.uniform(12345));
        assert_ne!(a, Dither::new(7, SHARED_STREAM, 43));
        assert_ne!(a, Dither::new(8, SHARED_STREAM, 42));
        assert_ne!(a, Dither::new(7, 1, 42));
    }

    #[test]
    fn dither_is_uniform() {
        // Chi-square over 64 bins: 1M samples, expected 15625 per bin.
        let d = Dither::new(1, 0, 0);
        let mut bins = [0u32; 64];
        let n = 1 << 20;
        let mut sum = 0.0f64;
        for i in 0..n {
            let u = d.uniform(i);
            assert!((0.0..1.0).contains(&u));
            sum += f64::from(u);
            bins[(u * 64.0) as usize] += 1;
        }
        let expected = f64::from(n) / 64.0;
        let chi2: f64 = bins
            .iter()
            .map(|&c| (f64::from(c) - expected).powi(2) / expected)
            .sum();
        // 63 degrees of freedom: P(chi2 > 110) < 1e-4.
        assert!(chi2 < 110.0, "chi2 = {chi2}");
        assert!((sum / f64::from(n) - 0.5).abs() < 2e-3);
    }

    #[test]
    fn every_used_bit_is_balanced_and_neighbours_are_uncorrelated() {
        let n = 1u32 << 20;
        for key in [(0u64, 0u64, 0u64), (5, 3, 1 << 40)] {
            let d = Dither::new(key.0, key.1, key.2);
            let mut ones = [0u32; 16];
            let mut lag1 = 0.0f64;
            let mut lag32 = 0.0f64;
            let mut prev = 0.5f32;
            for i in 0..n {
                let u = d.uniform(i);
                let half = (u * 65_536.0) as u32;
                for (k, o) in ones.iter_mut().enumerate() {
                    *o += (half >> k) & 1;
                }
                lag1 += (f64::from(u) - 0.5) * (f64::from(prev) - 0.5);
                // the two halves of one word: coordinates j and j + 32 of a chunk
                if i % 64 < 32 {
                    lag32 += (f64::from(u) - 0.5) * (f64::from(d.uniform(i + 32)) - 0.5);
                }
                prev = u;
            }
            for (k, &o) in ones.iter().enumerate() {
                // sd of the frequency is 1/(2 sqrt(n)) ~ 5e-4
                let f = f64::from(o) / f64::from(n);
                assert!((f - 0.5).abs() < 3e-3, "bit {k}: {f}");
            }
            assert!(
                (lag1 / f64::from(n)).abs() < 1e-3,
                "lag-1 correlation {lag1}"
            );
            assert!(
                (lag32 / f64::from(n / 2)).abs() < 1.5e-3,
                "half-word correlation {lag32}"
            );
        }
    }

    #[test]
    fn fill_agrees_with_uniform() {
        let d = Dither::new(9, 1, 77);
        for (start, len) in [
            (0u32, 200usize),
            (64, 64),
            (128, 10),
            (5, 100),
            (1024, 1000),
        ] {
            let mut out = vec![0f32; len];
            d.fill(start, &mut out);
            for (j, u) in out.iter().enumerate() {
                assert_eq!(*u, d.uniform(start + j as u32), "start {start} j {j}");
            }
        }
    }

    #[test]
    fn neighbouring_iterations_are_uncorrelated() {
        let a = Dither::new(3, 0, 10);
        let b = Dither::new(3, 0, 11);
        let n = 100_000;
        let mut cov = 0.0f64;
        for i in 0..n {
            cov += (f64::from(a.uniform(i)) - 0.5) * (f64::from(b.uniform(i)) - 0.5);
        }
        // Var of each term is 1/144; the mean's sd is ~ 2.6e-4.
        assert!((cov / f64::from(n)).abs() < 2e-3);
    }
}
