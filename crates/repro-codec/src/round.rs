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

impl fmt::Display for Rounding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rounding::Stochastic => "stochastic",
            Rounding::Nearest => "nearest",
        })
    }
}

/// `floor(v)` as i32; saturates outside the i32 range, NaN gives 0.
#[inline(always)]
pub(crate) fn floor_i32(v: f32) -> i32 {
    let t = v as i32;
    t.wrapping_sub(i32::from((t as f32) > v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_matches_std() {
        for i in -4000..4000 {
            let v = i as f32 * 0.37;
            assert_eq!(floor_i32(v), v.floor() as i32, "v = {v}");
        }
        assert_eq!(floor_i32(-0.0), 0);
        assert_eq!(floor_i32(-1e-30), -1);
        assert_eq!(floor_i32(f32::NAN), 0);
        assert_eq!(floor_i32(f32::INFINITY), i32::MAX);
        // Far below the i32 range: no overflow panic (the value wraps; callers reject non-finite input).
        let _ = floor_i32(f32::NEG_INFINITY);
        let _ = floor_i32(-3e9);
    }
}
