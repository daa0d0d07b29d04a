//! How far the workers' models are from agreeing, in one definition for
//! the simulator and the trainer: the consensus distance
//! `mean_i |x_i - x_bar|^2` (Koloskova et al.'s, which the peers report),
//! and beside it the largest deviation of one coordinate, `max_i |x_i -
//! x_bar|_inf` (what Moniqua's theta has to cover). A worker computes its
//! own [`Deviation`]; [`Consensus::of`] combines the workers'.

/// One worker's distance from the averaged model.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Deviation {
    /// `|x_i - x_bar|_2^2`.
    pub sq: f64,
    /// `|x_i - x_bar|_inf`.
    pub max: f64,
}

impl Deviation {
    /// `x`'s deviation from `avg`. Eight lanes, each summed in f64 in
    /// order: the same bits on every run.
    pub fn of(x: &[f32], avg: &[f32]) -> Deviation {
        let (mut sq, mut max) = ([0.0f64; 8], [0.0f32; 8]);
        for (xc, ac) in x.chunks(8).zip(avg.chunks(8)) {
            for (l, (&x, &a)) in xc.iter().zip(ac).enumerate() {
                let d = x - a;
                sq[l] += f64::from(d) * f64::from(d);
                max[l] = max[l].max(d.abs());
            }
        }
        Deviation {
            sq: sq.iter().sum(),
            max: max.iter().fold(0.0f64, |m, &l| m.max(f64::from(l))),
        }
    }
}

/// The workers' consensus, from each one's [`Deviation`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Consensus {
    /// `mean_i |x_i - x_bar|^2`: the consensus distance.
    pub distance: f64,
    /// `max_i |x_i - x_bar|_inf`.
    pub max_deviation: f64,
}

impl Consensus {
    /// The consensus of workers whose deviations are `each` (none: 0).
    pub fn of(each: impl IntoIterator<Item = Deviation>) -> Consensus {
        let (mut sum, mut max, mut n) = (0.0, 0.0f64, 0usize);
        for d in each {
            sum += d.sq;
            max = max.max(d.max);
            n += 1;
        }
        Consensus {
            distance: if n == 0 { 0.0 } else { sum / n as f64 },
            max_deviation: max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two workers at -1 and +1 around 0 in 3 coordinates, one of which
    /// is 3 away: the mean squared distance and the largest coordinate.
    #[test]
    fn the_distance_is_the_mean_square_and_the_deviation_the_largest_coordinate() {
        let avg = [0.0f32; 3];
        let a = Deviation::of(&[1.0, -1.0, 3.0], &avg);
        let b = Deviation::of(&[-1.0, 1.0, 0.0], &avg);
        assert_eq!(a, Deviation { sq: 11.0, max: 3.0 });
        assert_eq!(b, Deviation { sq: 2.0, max: 1.0 });
        let c = Consensus::of([a, b]);
        assert_eq!(c.distance, 6.5);
        assert_eq!(c.max_deviation, 3.0);
        assert_eq!(Consensus::of([]), Consensus::default());
    }

    /// More coordinates than lanes: every one counts.
    #[test]
    fn every_coordinate_counts_past_the_lanes() {
        let x: Vec<f32> = (0..19).map(|i| i as f32).collect();
        let d = Deviation::of(&x, &[0.0; 19]);
        assert_eq!(d.sq, (0..19).map(|i| (i * i) as f64).sum::<f64>());
        assert_eq!(d.max, 18.0);
    }
}
