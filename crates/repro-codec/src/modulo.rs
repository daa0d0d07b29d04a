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

/// Which delta Lemma 2's `B_theta = 2 theta / (1 - 2 delta)` is computed
/// with, when the modulus comes from theta. Stochastic rounding on the
/// circle's two 1-bit points errs by up to 1/2, where `B_theta` is
/// undefined; the paper ran 1 bit with stochastic rounding and theta 2.0
/// without saying which B it took. These are the readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BTheta {
    /// delta = the rounding's own error bound ([`circle_delta`]): Lemma 2
    /// as stated. Undefined for 1-bit stochastic rounding.
    #[default]
    Lemma2,
    /// delta = half a step, whatever the rounding: the bound of the
    /// paper's Section 2 quantizer (rounding to the nearest of
    /// `{2 delta n}`), under which Theorem 3's "1 bit in general" holds.
    /// 1 bit: `B = 4 theta`.
    HalfStep,
    /// `B = 2 theta`, Lemma 1's modulus: exact recovery for `|x - y| <
    /// theta` with the quantization error left out of the budget.
    Lemma1,
}

impl BTheta {
    /// Every reading, in the order help texts list them.
    pub const ALL: [BTheta; 3] = [BTheta::Lemma2, BTheta::HalfStep, BTheta::Lemma1];

    /// Its one name, as a manifest's `b_theta` knob writes it.
    pub fn name(self) -> &'static str {
        match self {
            BTheta::Lemma2 => "lemma2",
            BTheta::HalfStep => "half-step",
            BTheta::Lemma1 => "lemma1",
        }
    }

    /// The reading called `name`, if any.
    pub fn from_name(name: &str) -> Option<BTheta> {
        BTheta::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The delta this reading puts into Lemma 2 for a `bits`-bit quantizer
    /// whose own error bound is `bound`.
    pub fn delta(self, bits: u32, bound: f64) -> f64 {
        match self {
            BTheta::Lemma2 => bound,
            BTheta::HalfStep => 0.5 / f64::from(1u32 << bits.min(31)),
            BTheta::Lemma1 => 0.0,
        }
    }
}

impl std::fmt::Display for BTheta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paper's theta 2.0 under each reading: at 2 bits with stochastic
    /// rounding Lemma 2 gives 8.0; at 1 bit it is undefined, half a step
    /// gives 8.0 and Lemma 1 gives 4.0.
    #[test]
    fn the_readings_of_b_theta() {
        let b = |reading: BTheta, bits: u32| {
            let bound = circle_delta(bits, Rounding::Stochastic).unwrap();
            modulus_for(2.0, reading.delta(bits, bound))
        };
        assert_eq!(b(BTheta::Lemma2, 2), Some(8.0));
        assert_eq!(b(BTheta::Lemma2, 1), None);
        assert_eq!(b(BTheta::HalfStep, 1), Some(8.0));
        assert_eq!(b(BTheta::HalfStep, 2), Some(16.0 / 3.0));
        assert_eq!(b(BTheta::Lemma1, 1), Some(4.0));
        assert_eq!(b(BTheta::Lemma1, 2), Some(4.0));
        for r in BTheta::ALL {
            assert_eq!(BTheta::from_name(r.name()), Some(r));
        }
    }

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
