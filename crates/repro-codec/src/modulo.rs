//! Centred modulo and the Moniqua modulus `B_theta`.

use crate::{ConfigError, Rounding};

/// Centred modulo: the representative of `z + a Z` in `[-a/2, a/2)`.
///
/// This is the `mod` of the Moniqua paper (Section 4). `a` must be positive.
///
/// ```
/// use repro_codec::centred_mod;
/// assert_eq!(centred_mod(0.75, 1.0), -0.25);
/// assert_eq!(centred_mod(-0.5, 1.0), -0.5);
/// assert_eq!(centred_mod(0.5, 1.0), -0.5);
/// assert_eq!(centred_mod(7.0, 4.0), -1.0);
/// ```
pub fn centred_mod(z: f64, a: f64) -> f64 {
    let r = z - a * (z / a + 0.5).floor();
    // Floating error can land exactly on a/2; fold it back into the interval.
    if r >= a / 2.0 { r - a } else { r }
}

/// `B_theta = 2 theta / (1 - 2 delta)` (Lemma 2). Requires `delta < 1/2`.
pub fn modulus_for(theta: f64, delta: f64) -> Option<f64> {
    (theta > 0.0 && theta.is_finite() && (0.0..0.5).contains(&delta))
        .then(|| 2.0 * theta / (1.0 - 2.0 * delta))
}

/// The error bound `delta` of a `bits`-bit quantizer on the unit circle,
/// in units of the circle's circumference: with all `2^bits` points `k / 2^bits`,
/// nearest rounding errs by at most half a step, stochastic rounding by less
/// than one step.
pub fn circle_delta(bits: u32, rounding: Rounding) -> Result<f64, ConfigError> {
    if !(1..=8).contains(&bits) {
        return Err(ConfigError::BitsOutOfRange { bits });
    }
    let step = 1.0 / f64::from(1u32 << bits);
    Ok(match rounding {
        Rounding::Nearest => step / 2.0,
        Rounding::Stochastic => step,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centred_mod_lands_in_half_open_interval() {
        for &a in &[0.1, 1.0, 3.7, 1e3] {
            for i in -1000..1000 {
                let z = f64::from(i) * 0.0137 * a;
                let r = centred_mod(z, a);
                assert!(r >= -a / 2.0 && r < a / 2.0, "z={z} a={a} r={r}");
                let k = (z - r) / a;
                assert!(
                    (k - k.round()).abs() < 1e-9,
                    "z - r must be a multiple of a"
                );
            }
        }
    }

    #[test]
    fn modulus_matches_lemma_2() {
        assert_eq!(modulus_for(2.0, 0.25), Some(8.0));
        assert_eq!(modulus_for(1.0, 0.0), Some(2.0));
        assert_eq!(modulus_for(1.0, 0.5), None);
        assert_eq!(modulus_for(0.0, 0.1), None);
    }

    #[test]
    fn delta_of_circle_quantizers() {
        assert_eq!(circle_delta(1, Rounding::Nearest).unwrap(), 0.25);
        assert_eq!(circle_delta(1, Rounding::Stochastic).unwrap(), 0.5);
        assert_eq!(circle_delta(8, Rounding::Nearest).unwrap(), 1.0 / 512.0);
        assert_eq!(
            circle_delta(9, Rounding::Nearest),
            Err(ConfigError::BitsOutOfRange { bits: 9 })
        );
    }
}
