//! Learning-rate schedules with linear warm-up.

/// How the learning rate evolves over epochs (fractional epochs allowed).
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
}

/// A schedule with a base rate and a linear warm-up from `base / 10`.
#[derive(Debug, Clone, PartialEq)]
pub struct LrSchedule {
    pub base: f64,
    pub warmup_epochs: f64,
    pub schedule: Schedule,
}

impl LrSchedule {
    /// The learning rate at (fractional) `epoch`.
    pub fn at(&self, epoch: f64) -> f64 {
        if epoch < self.warmup_epochs {
            let t = epoch / self.warmup_epochs;
            return self.base * (0.1 + 0.9 * t);
        }
        match &self.schedule {
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
        assert!((s.at(0.0) - 0.01).abs() < 1e-12);
        assert!((s.at(2.5) - 0.055).abs() < 1e-12);
        assert_eq!(s.at(5.0), 0.1);
        assert!((s.at(150.0) - 0.01).abs() < 1e-12);
        assert!((s.at(300.0) - 0.001).abs() < 1e-12);
    }

    #[test]
    fn cosine_reaches_zero() {
        let s = LrSchedule {
            base: 0.2,
            warmup_epochs: 0.0,
            schedule: Schedule::Cosine { epochs: 10.0 },
        };
        assert_eq!(s.at(0.0), 0.2);
        assert!((s.at(5.0) - 0.1).abs() < 1e-12);
        assert!(s.at(10.0).abs() < 1e-12);
        assert!(s.at(20.0).abs() < 1e-12);
    }
}
