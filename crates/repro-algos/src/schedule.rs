//! Learning-rate schedules with linear warm-up, for the trainer and the
//! simulator alike: the deep-learning ones in epochs, and the convex
//! literature's decays in iterations.

/// How the learning rate evolves: over epochs (fractional epochs allowed),
/// or over iterations `t` for the convex decays.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    Constant,
    /// Multiply by `gamma` at each epoch in `milestones`.
    Step {
        milestones: Vec<f64>,
        gamma: f64,
    },
    /// Cosine from the base rate to 0 over `epochs`.
    Cosine {
        epochs: f64,
    },
    /// `a / (lambda (t + tau))` (Koloskova et al. 2019's convex runs; the
    /// base rate is not used).
    Decay {
        a: f64,
        tau: f64,
        lambda: f64,
    },
    /// `a / (1 + a lambda t)` (Bottou 2012).
    Bottou {
        a: f64,
        lambda: f64,
    },
}

/// The schedule names [`Schedule::parse`] knows.
pub const SCHEDULES: [&str; 5] = ["constant", "step", "cosine", "decay", "bottou"];

impl Schedule {
    /// The schedule called `name`: `epochs` is the run's length (cosine),
    /// `milestones` the step epochs (times 0.1 each), `a` and `tau` the
    /// decays' constants and `lambda` the regularizer they divide by. The
    /// error says what is missing.
    pub fn parse(
        name: &str,
        epochs: f64,
        milestones: &[f64],
        a: f64,
        tau: f64,
        lambda: f64,
    ) -> Result<Self, String> {
        let positive = |what: &str, v: f64| {
            if v > 0.0 && v.is_finite() {
                Ok(v)
            } else {
                Err(format!("schedule `{name}` needs {what} > 0, got {v}"))
            }
        };
        Ok(match name {
            "constant" => Schedule::Constant,
            "cosine" => Schedule::Cosine { epochs },
            "step" => Schedule::Step {
                milestones: milestones.to_vec(),
                gamma: 0.1,
            },
            "decay" => Schedule::Decay {
                a: positive("decay_a", a)?,
                tau: positive("decay_tau", tau)?,
                lambda: positive("the regularizer (weight_decay)", lambda)?,
            },
            "bottou" => Schedule::Bottou {
                a: positive("decay_a", a)?,
                lambda: positive("the regularizer (weight_decay)", lambda)?,
            },
            other => {
                return Err(format!(
                    "unknown schedule `{other}`; use one of {}",
                    SCHEDULES.join(", ")
                ));
            }
        })
    }
}

/// A schedule with a base rate and a linear warm-up from `base / 10`.
#[derive(Debug, Clone, PartialEq)]
pub struct LrSchedule {
    pub base: f64,
    pub warmup_epochs: f64,
    pub schedule: Schedule,
}

impl LrSchedule {
    /// The learning rate at (fractional) `epoch`, iteration `t`.
    pub fn at(&self, epoch: f64, t: u64) -> f64 {
        if epoch < self.warmup_epochs {
            let w = epoch / self.warmup_epochs;
            return self.base * (0.1 + 0.9 * w);
        }
        let t = t as f64;
        match &self.schedule {
            Schedule::Decay { a, tau, lambda } => a / (lambda * (t + tau)),
            Schedule::Bottou { a, lambda } => a / (1.0 + a * lambda * t),
            Schedule::Constant => self.base,
            Schedule::Step { milestones, gamma } => {
                self.base * gamma.powi(milestones.iter().filter(|&&m| epoch >= m).count() as i32)
            }
            Schedule::Cosine { epochs } => {
                let t = (epoch / epochs).clamp(0.0, 1.0);
                0.5 * self.base * (1.0 + (std::f64::consts::PI * t).cos())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl LrSchedule {
        fn at_epoch(&self, epoch: f64) -> f64 {
            self.at(epoch, 0)
        }
    }

    /// The convex decays by their formulas, in iterations.
    #[test]
    fn decays_follow_their_formulas() {
        let decay = LrSchedule {
            base: 9.0,
            warmup_epochs: 0.0,
            schedule: Schedule::parse("decay", 0.0, &[], 0.1, 10.0, 0.01).unwrap(),
        };
        // 0.1 / (0.01 (t + 10))
        assert!((decay.at(0.0, 0) - 1.0).abs() < 1e-12);
        assert!((decay.at(3.0, 90) - 0.1).abs() < 1e-12);
        let bottou = LrSchedule {
            base: 9.0,
            warmup_epochs: 0.0,
            schedule: Schedule::parse("bottou", 0.0, &[], 0.5, 0.0, 0.1).unwrap(),
        };
        // 0.5 / (1 + 0.05 t)
        assert!((bottou.at(0.0, 0) - 0.5).abs() < 1e-12);
        assert!((bottou.at(0.0, 20) - 0.25).abs() < 1e-12);
        let e = Schedule::parse("decay", 0.0, &[], 0.1, 10.0, 0.0).unwrap_err();
        assert!(e.contains("regularizer"), "{e}");
        assert!(Schedule::parse("linear", 0.0, &[], 0.0, 0.0, 0.0).is_err());
    }

    #[test]
    fn warmup_then_steps() {
        let s = LrSchedule {
            base: 0.1,
            warmup_epochs: 5.0,
            schedule: Schedule::Step {
                milestones: vec![150.0, 250.0],
                gamma: 0.1,
            },
        };
        assert!((s.at_epoch(0.0) - 0.01).abs() < 1e-12);
        assert!((s.at_epoch(2.5) - 0.055).abs() < 1e-12);
        assert_eq!(s.at_epoch(5.0), 0.1);
        assert!((s.at_epoch(150.0) - 0.01).abs() < 1e-12);
        assert!((s.at_epoch(300.0) - 0.001).abs() < 1e-12);
    }

    #[test]
    fn cosine_reaches_zero() {
        let s = LrSchedule {
            base: 0.2,
            warmup_epochs: 0.0,
            schedule: Schedule::Cosine { epochs: 10.0 },
        };
        assert_eq!(s.at_epoch(0.0), 0.2);
        assert!((s.at_epoch(5.0) - 0.1).abs() < 1e-12);
        assert!(s.at_epoch(10.0).abs() < 1e-12);
        assert!(s.at_epoch(20.0).abs() < 1e-12);
    }
}
