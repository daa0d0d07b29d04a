//! Rounding to integers in forms the compiler vectorizes on baseline x86-64
//! (SSE2 has truncating conversion but no floor instruction).

use std::fmt;

/// How a real value is rounded onto the quantization grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Rounding {
    /// `floor(t + u)` with a uniform dither `u`: unbiased, error below one step.
    /// The paper's experiments use it.
    #[default]
    Stochastic,
    /// Round to the nearest grid point: biased, error at most half a step.
    Nearest,
}

impl Rounding {
    /// Every rounding, in the order help texts list them.
    pub const ALL: [Rounding; 2] = [Rounding::Stochastic, Rounding::Nearest];

    /// Its one name, as a manifest's `rounding` knob writes it.
    pub fn name(self) -> &'static str {
        match self {
            Rounding::Stochastic => "stochastic",
            Rounding::Nearest => "nearest",
        }
    }

    /// The rounding called `name`, if any.
    pub fn from_name(name: &str) -> Option<Rounding> {
        Rounding::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for Rounding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `1.5 * 2^23`: adding it to `|v| < 2^22` leaves `round(v)` in the mantissa.
pub(crate) const MAGIC: f32 = 12_582_912.0;

/// Magnitude below which [`floor_i32`] is exact. Callers check their inputs
/// against it (see `CodecError::OutOfRange`).
pub(crate) const EXACT_LIMIT: f32 = 4_194_304.0;

/// `floor(v)` as i32, exact for `|v| < 2^22`; any other input (NaN included)
/// gives an unspecified value, never a panic. Only float adds, compares and
/// integer subtractions, so it vectorizes on every instruction set (the
/// saturating `as i32` does not, and SSE2 has no floor).
#[inline(always)]
pub(crate) fn floor_i32(v: f32) -> i32 {
    let t = v + MAGIC;
    let nearest = t - MAGIC;
    let r = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    r.wrapping_sub(i32::from(nearest > v))
}

/// `v` rounded to the nearest integer (ties to even), as a float and as an
/// i32, both exact for `|v| < 2^22` (unspecified otherwise, never a panic):
/// two float adds and an integer subtraction on every instruction set.
#[inline(always)]
pub(crate) fn round_nearest(v: f32) -> (f32, i32) {
    let t = v + MAGIC;
    (
        t - MAGIC,
        (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32),
    )
}

/// [`floor_i32`] with the CPU's floor instruction when `NATIVE` (SSE4.1 and
/// later have one; the kernels' AVX2 and AVX-512 builds pass `true`): the
/// floor is exact either way, so both give the same integer for `|v| < 2^22`
/// (two vector operations instead of five). Outside that range each gives its
/// own unspecified value, as `floor_i32` does: callers reject such inputs.
#[inline(always)]
pub(crate) fn floor_to_i32<const NATIVE: bool>(v: f32) -> i32 {
    if NATIVE {
        // an integral float below 2^22 in magnitude: adding 1.5 * 2^23 puts it in the mantissa
        ((v.floor() + MAGIC).to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32)
    } else {
        floor_i32(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn native_floor_matches_the_portable_one() {
        for i in -40_000..40_000 {
            for v in [
                i as f32 * 0.37,
                i as f32 * 100.9 + 0.5,
                i as f32 + 0.999_999,
            ] {
                assert_eq!(floor_to_i32::<true>(v), floor_i32(v), "v = {v}");
            }
        }
    }

    #[test]
    fn round_nearest_matches_std() {
        for i in -40_000..40_000 {
            for v in [i as f32 * 0.37, i as f32 * 100.9 + 0.5, i as f32 + 0.5] {
                let (f, n) = round_nearest(v);
                assert_eq!(f, v.round_ties_even(), "v = {v}");
                assert_eq!(n, v.round_ties_even() as i32, "v = {v}");
            }
        }
    }

    #[test]
    fn floor_matches_std() {
        for i in -4000..4000 {
            let v = i as f32 * 0.37;
            assert_eq!(floor_i32(v), v.floor() as i32, "v = {v}");
        }
        for v in [
            0.0f32,
            -0.0,
            -1e-30,
            1e-30,
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.999_999_94,
            -0.999_999_94,
            4_194_303.5,
            -4_194_303.5,
            4_194_303.0,
            -4_194_304.0,
            1_000_000.2,
            -77.999_99,
        ] {
            assert_eq!(floor_i32(v), v.floor() as i32, "v = {v}");
        }
        // every float in a range straddling zero, and near the limit
        let mut v = -3.0f32;
        while v < 3.0 {
            assert_eq!(floor_i32(v), v.floor() as i32, "v = {v}");
            v = f32::from_bits(if v < 0.0 {
                v.to_bits() - 997
            } else {
                v.to_bits() + 997
            });
            if v.abs() < 1e-6 {
                v = 1e-6;
            }
        }
        // outside the exact range: no panic
        for v in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            3e9,
            -3e9,
            EXACT_LIMIT * 4.0,
        ] {
            let _ = floor_i32(v);
        }
    }
}
