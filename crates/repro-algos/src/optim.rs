//! The local optimizer, shared by every algorithm: SGD with heavy-ball
//! momentum and L2 weight decay, `m <- beta m + (g + wd x)`, and the local
//! step `delta = lr m` that the algorithm applies where its paper writes
//! `alpha g`.

/// SGD settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sgd {
    pub momentum: f32,
    pub weight_decay: f32,
}

impl Default for Sgd {
    fn default() -> Self {
        Self {
            momentum: 0.0,
            weight_decay: 0.0,
        }
    }
}

impl Sgd {
    /// Turns gradient `g` at `x` into the step `delta` (of `g`'s length),
    /// updating the momentum buffer `m` (ignored when momentum is 0).
    pub fn step(&self, lr: f32, x: &[f32], g: &[f32], m: &mut [f32], delta: &mut [f32]) {
        delta.copy_from_slice(g);
        self.step_in_place(lr, x, delta, m);
    }

    /// As [`step`](Self::step), turning the gradient in `g` into the step
    /// in place.
    pub fn step_in_place(&self, lr: f32, x: &[f32], g: &mut [f32], m: &mut [f32]) {
        // one loop, vectorized for the CPU at hand (`crate::flat`)
        crate::flat::sgd_step(lr, self.weight_decay, self.momentum.max(0.0), x, g, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn momentum_and_weight_decay() {
        let sgd = Sgd {
            momentum: 0.5,
            weight_decay: 0.1,
        };
        let mut m = [0.0f32];
        let mut d = [0.0f32];
        sgd.step(0.1, &[2.0], &[1.0], &mut m, &mut d);
        assert!((m[0] - 1.2).abs() < 1e-6);
        assert!((d[0] - 0.12).abs() < 1e-6);
        sgd.step(0.1, &[2.0], &[1.0], &mut m, &mut d);
        assert!((m[0] - 1.8).abs() < 1e-6);
        let (mut m2, mut g) = ([1.2f32], [1.0f32]);
        sgd.step_in_place(0.1, &[2.0], &mut g, &mut m2);
        assert_eq!((m2, g), (m, d));
    }
}
