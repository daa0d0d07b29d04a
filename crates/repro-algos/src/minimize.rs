//! The optimum `f*` of a smooth convex objective, to high precision:
//! L-BFGS in f64 with a backtracking (Armijo) line search. The simulator's
//! convex runs report `f(x_bar) - f*` against it.

/// Where the minimization stopped.
#[derive(Debug, Clone, PartialEq)]
pub struct Minimum {
    /// `f` at the last point, and that point.
    pub value: f64,
    pub x: Vec<f64>,
    /// `max |grad f|` there: how close to the optimum it is.
    pub grad_inf: f64,
    pub iterations: usize,
}

/// Minimizes `f` (which returns `f(x)` and writes `grad f(x)`) from `x0`
/// until `max |grad f| <= tol`, or five iterations in a row decrease `f` by
/// less than f64 resolves (1e-15 of it), or `max_iter` iterations; it keeps
/// the last ten curvature pairs.
// Long on purpose: L-BFGS's two-loop recursion and its line search in one body,
// as the method is written down; its state is the loop's.
pub fn lbfgs(
    f: impl Fn(&[f64], &mut [f64]) -> f64,
    x0: Vec<f64>,
    tol: f64,
    max_iter: usize,
) -> Minimum {
    const MEMORY: usize = 10;
    let d = x0.len();
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let inf = |a: &[f64]| a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut x = x0;
    let mut g = vec![0.0; d];
    let mut value = f(&x, &mut g);
    let (mut s_hist, mut y_hist): (Vec<Vec<f64>>, Vec<Vec<f64>>) = (Vec::new(), Vec::new());
    let (mut next, mut g_next) = (vec![0.0; d], vec![0.0; d]);
    let mut iterations = 0;
    // iterations in a row whose decrease f64 can no longer resolve: the
    // gradient is then as small as this precision allows
    let mut stalled = 0;
    while iterations < max_iter && inf(&g) > tol && stalled < 5 {
        iterations += 1;
        // two-loop recursion: the direction -H g
        let mut q = g.clone();
        let mut alphas = Vec::with_capacity(s_hist.len());
        for (s, y) in s_hist.iter().zip(&y_hist).rev() {
            let a = dot(s, &q) / dot(y, s);
            for (qi, yi) in q.iter_mut().zip(y) {
                *qi -= a * yi;
            }
            alphas.push(a);
        }
        if let (Some(s), Some(y)) = (s_hist.last(), y_hist.last()) {
            let scale = dot(s, y) / dot(y, y);
            q.iter_mut().for_each(|v| *v *= scale);
        } else {
            // the first step: at most unit length
            let n = dot(&g, &g).sqrt().max(1.0);
            q.iter_mut().for_each(|v| *v /= n);
        }
        for ((s, y), a) in s_hist.iter().zip(&y_hist).zip(alphas.into_iter().rev()) {
            let b = dot(y, &q) / dot(y, s);
            for (qi, si) in q.iter_mut().zip(s) {
                *qi += (a - b) * si;
            }
        }
        let slope = -dot(&g, &q);
        if slope >= 0.0 {
            // not a descent direction: start the memory afresh
            s_hist.clear();
            y_hist.clear();
            continue;
        }
        // backtracking until the Armijo condition holds
        let mut step = 1.0;
        let mut accepted = false;
        for _ in 0..40 {
            for ((n, xi), qi) in next.iter_mut().zip(&x).zip(&q) {
                *n = xi - step * qi;
            }
            let v = f(&next, &mut g_next);
            if v <= value + 1e-4 * step * slope {
                accepted = v.is_finite();
                if accepted {
                    stalled = if value - v <= 1e-15 * value.abs() {
                        stalled + 1
                    } else {
                        0
                    };
                    value = v;
                }
                break;
            }
            step *= 0.5;
        }
        if !accepted {
            break;
        }
        let s: Vec<f64> = next.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = g_next.iter().zip(&g).map(|(a, b)| a - b).collect();
        std::mem::swap(&mut x, &mut next);
        std::mem::swap(&mut g, &mut g_next);
        if dot(&s, &y) > 1e-300 {
            s_hist.push(s);
            y_hist.push(y);
            if s_hist.len() > MEMORY {
                s_hist.remove(0);
                y_hist.remove(0);
            }
        }
    }
    Minimum {
        value,
        grad_inf: inf(&g),
        x,
        iterations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Dataset, LinearModel, Loss, Split, split};

    /// An ill-conditioned quadratic: the minimum is known exactly.
    #[test]
    fn finds_a_quadratics_minimum() {
        let c = [1.0, 100.0, 0.01, 5.0];
        let t = [1.0, -2.0, 3.0, 0.5];
        let f = |x: &[f64], g: &mut [f64]| {
            let mut v = 0.0;
            for i in 0..4 {
                g[i] = c[i] * (x[i] - t[i]);
                v += 0.5 * c[i] * (x[i] - t[i]).powi(2);
            }
            v + 7.0
        };
        let m = lbfgs(f, vec![0.0; 4], 1e-12, 1000);
        assert!((m.value - 7.0).abs() < 1e-12, "{m:?}");
        for (x, t) in m.x.iter().zip(t) {
            assert!((x - t).abs() < 1e-6, "{m:?}");
        }
    }

    /// Regularized logistic regression: the gradient vanishes at the
    /// result, and no point of a long gradient descent does better.
    #[test]
    fn finds_the_logistic_optimum() {
        let ds = Dataset::generate(300, 8, 0.5, true, 3);
        let shards = split(&ds, 1, Split::Iid, 0).unwrap();
        let model = LinearModel::new(ds, shards, Loss::Logistic, 1, 0.01);
        let f = |x: &[f64], g: &mut [f64]| model.loss_grad_f64(x, g);
        let m = lbfgs(f, vec![0.0; 8], 1e-10, 500);
        assert!(m.grad_inf <= 1e-10, "{m:?}");
        let mut x = vec![0.0; 8];
        let mut g = vec![0.0; 8];
        for _ in 0..3000 {
            model.loss_grad_f64(&x, &mut g);
            for (xi, gi) in x.iter_mut().zip(&g) {
                *xi -= 0.5 * gi;
            }
        }
        let gd = model.loss_grad_f64(&x, &mut g);
        assert!(m.value <= gd + 1e-12, "{} vs {gd}", m.value);
        assert!(
            gd - m.value < 1e-6,
            "gradient descent gets close: {gd} vs {}",
            m.value
        );
    }
}
