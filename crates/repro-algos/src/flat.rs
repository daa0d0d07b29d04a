//! Flat-buffer arithmetic the algorithms run on every coordinate of every
//! iteration besides the codec's: the local SGD step and a separable
//! objective's residual. Each is compiled per SIMD level (`repro-simd`)
//! like the codec's kernels, and every level computes the same bits (the same operations per element in the same
//! order, no contraction into fused multiply-adds, sums in fixed lanes).

use repro_simd::multiversion;

/// Partial sums of [`residual`]: lane `l` sums coordinates `l, l + 64, ...`
/// in increasing order (four 16-wide accumulators, so the sum does not wait
/// on one add's latency per vector).
pub const LOSS_LANES: usize = 64;

/// `g = x - b` and, for every `j` in increasing order,
/// `lanes[j % 64] += (x_j - b_j)^2`. Over blocks whose starts are multiples
/// of 64 coordinates, the lanes come out as over the whole vector.
///
/// # Panics
/// If `x`, `b` and `g` differ in length.
pub fn residual(x: &[f32], b: &[f32], g: &mut [f32], lanes: &mut [f32; LOSS_LANES]) {
    // times one: exactly the residual
    residual_step(x, b, 1.0, g, lanes);
}

/// [`residual`] and plain SGD's step in one pass: `g = lr (x - b)`, the
/// same bits as `residual` then [`sgd_step`] without momentum and weight
/// decay, and the same lanes.
///
/// # Panics
/// If `x`, `b` and `g` differ in length.
pub fn residual_step(x: &[f32], b: &[f32], lr: f32, g: &mut [f32], lanes: &mut [f32; LOSS_LANES]) {
    assert!(
        x.len() == b.len() && x.len() == g.len(),
        "residual of {} values against {} into {}",
        x.len(),
        b.len(),
        g.len()
    );
    residual_kernel(x, b, lr, g, lanes);
}

/// The local SGD step in place: `m = beta m + (g + wd x)`, `g = lr m` when
/// `beta > 0`; else `g = lr (g + wd x)`, or `g = lr g` without weight decay
/// (`x` is then not read). `m` is ignored when `beta` is 0.
///
/// # Panics
/// If `x`, `g` (and `m`, when `beta > 0`) differ in length.
pub fn sgd_step(lr: f32, wd: f32, beta: f32, x: &[f32], g: &mut [f32], m: &mut [f32]) {
    assert!(
        x.len() == g.len() && (beta == 0.0 || m.len() == g.len()),
        "sgd step of {} values with a model of {} and momentum of {}",
        g.len(),
        x.len(),
        m.len()
    );
    sgd_kernel(lr, wd, beta, x, g, m);
}

#[inline(always)]
fn residual_impl<const NATIVE: bool, const V4: bool>(
    x: &[f32],
    b: &[f32],
    lr: f32,
    g: &mut [f32],
    lanes: &mut [f32; LOSS_LANES],
) {
    let mut held = *lanes;
    let lane = |held: &mut [f32; LOSS_LANES], gc: &mut [f32], xc: &[f32], bc: &[f32]| {
        for (((gi, &xi), &bi), l) in gc.iter_mut().zip(xc).zip(bc).zip(held.iter_mut()) {
            let r = xi - bi;
            *l += r * r;
            *gi = r * lr;
        }
    };
    let (mut gs, mut xs, mut bs) = (
        g.chunks_exact_mut(LOSS_LANES),
        x.chunks_exact(LOSS_LANES),
        b.chunks_exact(LOSS_LANES),
    );
    for ((gc, xc), bc) in (&mut gs).zip(&mut xs).zip(&mut bs) {
        lane(&mut held, gc, xc, bc);
    }
    lane(
        &mut held,
        gs.into_remainder(),
        xs.remainder(),
        bs.remainder(),
    );
    *lanes = held;
}

#[inline(always)]
fn sgd_impl<const NATIVE: bool, const V4: bool>(
    lr: f32,
    wd: f32,
    beta: f32,
    x: &[f32],
    g: &mut [f32],
    m: &mut [f32],
) {
    if beta > 0.0 {
        for ((g, &x), m) in g.iter_mut().zip(x).zip(m.iter_mut()) {
            *m = beta * *m + (*g + wd * x);
            *g = lr * *m;
        }
    } else if wd != 0.0 {
        for (g, &x) in g.iter_mut().zip(x) {
            *g = lr * (*g + wd * x);
        }
    } else {
        for g in g.iter_mut() {
            *g *= lr;
        }
    }
}

multiversion! {
    /// [`residual_step`] at the best level.
    fn residual_kernel / residual_at(x: &[f32], b: &[f32], lr: f32, g: &mut [f32], lanes: &mut [f32; LOSS_LANES]) -> () = residual_impl;
}
multiversion! {
    /// [`sgd_step`] at the best level.
    fn sgd_kernel / sgd_at(lr: f32, wd: f32, beta: f32, x: &[f32], g: &mut [f32], m: &mut [f32]) -> () = sgd_impl;
}

/// Partial sums of [`squared_distance`] and [`squared_distance64`]: lane
/// `l` sums coordinates `l, l + 16, ...` in increasing order.
const DISTANCE_LANES: usize = 16;

/// `sum_j (x_j - m_j)^2`, each difference taken in f32 (a quadratic's f32
/// gradient `x - m`) and squared and summed in f64, in
/// [`DISTANCE_LANES`] lanes added up in order at the end.
///
/// # Panics
/// If `x` and `m` differ in length.
pub fn squared_distance(x: &[f32], m: &[f32]) -> f64 {
    assert_eq!(x.len(), m.len(), "distance between vectors of two lengths");
    distance_kernel(x, m)
}

/// `sum_j (x_j - m_j)^2` in f64 against an f64 `m`, in the same lanes.
///
/// # Panics
/// If `x` and `m` differ in length.
pub fn squared_distance64(x: &[f32], m: &[f64]) -> f64 {
    assert_eq!(x.len(), m.len(), "distance between vectors of two lengths");
    distance64_kernel(x, m)
}

/// `sum_j diff(x_j, m_j)^2` in [`DISTANCE_LANES`] lanes.
#[inline(always)]
fn lanes_of_squares<M: Copy>(x: &[f32], m: &[M], diff: impl Fn(f32, M) -> f64) -> f64 {
    let mut lanes = [0.0f64; DISTANCE_LANES];
    let (xs, ms) = (
        x.chunks_exact(DISTANCE_LANES),
        m.chunks_exact(DISTANCE_LANES),
    );
    let (xr, mr) = (xs.remainder(), ms.remainder());
    for (xc, mc) in xs.zip(ms) {
        for ((l, &xi), &mi) in lanes.iter_mut().zip(xc).zip(mc) {
            let g = diff(xi, mi);
            *l += g * g;
        }
    }
    for ((l, &xi), &mi) in lanes.iter_mut().zip(xr).zip(mr) {
        let g = diff(xi, mi);
        *l += g * g;
    }
    lanes.iter().sum()
}

#[inline(always)]
fn distance_impl<const NATIVE: bool, const V4: bool>(x: &[f32], m: &[f32]) -> f64 {
    lanes_of_squares(x, m, |xi, mi| f64::from(xi - mi))
}

#[inline(always)]
fn distance64_impl<const NATIVE: bool, const V4: bool>(x: &[f32], m: &[f64]) -> f64 {
    lanes_of_squares(x, m, |xi, mi| f64::from(xi) - mi)
}

multiversion! {
    /// [`squared_distance`] at the best level.
    fn distance_kernel / distance_at(x: &[f32], m: &[f32]) -> f64 = distance_impl;
}
multiversion! {
    /// [`squared_distance64`] at the best level.
    fn distance64_kernel / distance64_at(x: &[f32], m: &[f64]) -> f64 = distance64_impl;
}

/// A copy of `x0` for a worker's model, its memory advised for
/// transparent huge pages (`madvise(MADV_HUGEPAGE)`) before the copy
/// touches it. A hint: where the kernel has huge pages for advised memory
/// (`/sys/kernel/mm/transparent_hugepage/enabled` says `madvise` or
/// `always`) a large model is faulted in 2 MiB at a time instead of 4 KiB,
/// which at 1024 workers of a million coordinates is most of a run's
/// set-up, and its pages cost the simulator's block-major passes fewer TLB
/// misses; elsewhere the advice is refused and nothing changes.
pub fn model_copy(x0: &[f32]) -> Vec<f32> {
    let mut x = with_huge_pages(x0.len());
    x.extend_from_slice(x0);
    x
}

/// An empty vector with room for `len` values, its memory advised for
/// transparent huge pages as in [`model_copy`] and populated: for buffers
/// written whole at set-up (models, a quadratic's targets, their mean).
pub fn with_huge_pages<T>(len: usize) -> Vec<T> {
    let x = Vec::with_capacity(len);
    advise_and_populate(x.as_ptr() as usize, x.capacity() * std::mem::size_of::<T>());
    x
}

/// `madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages inside `len` bytes at
/// `start` (none for less than two); below 2 MiB `MADV_POPULATE_WRITE` on
/// its whole pages instead: one call maps them all, where a first write per
/// page costs a fault each (8 workers of 100k coordinates: set-up 3.5 to
/// 2.5 ms; on large buffers populating cost more than it saved: 1024 x 1M
/// set-up 3.4-3.8 s to 5.4-5.9 s). The results are ignored: it is advice
/// (a kernel before 5.14 refuses the second, and the pages fault in as
/// before).
#[allow(unsafe_code)]
fn advise_and_populate(start: usize, len: usize) {
    const HUGE: usize = 2 << 20;
    let (from, to) = (
        (start + HUGE - 1) & !(HUGE - 1),
        (start + len) & !(HUGE - 1),
    );
    if cfg!(target_os = "linux") && to > from {
        // SAFETY: the range lies inside an allocation this process owns, and
        // MADV_HUGEPAGE changes how its pages are backed, never its contents
        unsafe {
            libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
        }
    }
    const PAGE: usize = 4096;
    let (from, to) = (
        (start + PAGE - 1) & !(PAGE - 1),
        (start + len) & !(PAGE - 1),
    );
    if cfg!(target_os = "linux") && len < HUGE && to > from {
        // SAFETY: as above; populating maps zeroed pages where none are
        // mapped yet and leaves mapped ones (and every value) as they are
        unsafe {
            libc::madvise(
                from as *mut libc::c_void,
                to - from,
                libc::MADV_POPULATE_WRITE,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use repro_simd::levels;

    #[test]
    fn distances_sum_in_sixteen_lanes_on_every_level() {
        for d in [1usize, 15, 16, 17, 1001] {
            let m: Vec<f32> = (0..d).map(|i| (i as f32 * 0.7).sin()).collect();
            let m64: Vec<f64> = m.iter().map(|&v| f64::from(v) * 1.1).collect();
            let x: Vec<f32> = (0..d).map(|i| (i as f32 * 1.3).cos() * 3.0).collect();
            let (mut want, mut want64) = ([0.0f64; 16], [0.0f64; 16]);
            for j in 0..d {
                let g = f64::from(x[j] - m[j]);
                want[j % 16] += g * g;
                want64[j % 16] += (f64::from(x[j]) - m64[j]).powi(2);
            }
            let (want, want64): (f64, f64) = (want.iter().sum(), want64.iter().sum());
            for level in levels() {
                assert_eq!(
                    distance_at(level, &x, &m).to_bits(),
                    want.to_bits(),
                    "{level:?} d = {d}"
                );
                assert_eq!(
                    distance64_at(level, &x, &m64).to_bits(),
                    want64.to_bits(),
                    "{level:?} d = {d}"
                );
            }
        }
    }

    #[test]
    fn residual_sums_in_sixty_four_lanes_on_every_level() {
        for d in [1usize, 63, 64, 65, 1000] {
            let b: Vec<f32> = (0..d).map(|i| (i as f32 * 0.7).sin()).collect();
            let x: Vec<f32> = (0..d).map(|i| (i as f32 * 1.3).cos() * 3.0).collect();
            let mut expected = [0.0f32; LOSS_LANES];
            for (j, (&xi, &bi)) in x.iter().zip(&b).enumerate() {
                let r = xi - bi;
                expected[j % LOSS_LANES] += r * r;
            }
            for level in levels() {
                let (mut g, mut lanes) = (vec![0.0; d], [0.0f32; LOSS_LANES]);
                residual_at(level, &x, &b, 1.0, &mut g, &mut lanes);
                assert_eq!(lanes, expected, "d = {d} at {level:?}");
                assert!(g.iter().zip(&x).zip(&b).all(|((&g, &x), &b)| g == x - b));
                // in blocks starting on multiples of 64
                let (mut g2, mut lanes2) = (vec![0.0; d], [0.0f32; LOSS_LANES]);
                for (at, xc) in x.chunks(128).enumerate() {
                    let r = at * 128..at * 128 + xc.len();
                    residual_at(level, xc, &b[r.clone()], 1.0, &mut g2[r], &mut lanes2);
                }
                assert_eq!((g2, lanes2), (g.clone(), lanes));
                // with plain SGD's step in the same pass
                let (mut g3, mut lanes3) = (vec![0.0; d], [0.0f32; LOSS_LANES]);
                residual_at(level, &x, &b, 0.3, &mut g3, &mut lanes3);
                sgd_at(level, 0.3, 0.0, 0.0, &x, &mut g, &mut []);
                assert_eq!((g3, lanes3), (g, lanes));
            }
        }
    }

    #[test]
    fn sgd_step_is_the_formula_on_every_level() {
        let d = 1001;
        let x: Vec<f32> = (0..d).map(|i| (i as f32 * 0.37).sin()).collect();
        let g0: Vec<f32> = (0..d).map(|i| (i as f32 * 0.11).cos()).collect();
        let m0: Vec<f32> = (0..d).map(|i| (i as f32 * 0.05).sin() * 0.1).collect();
        for (beta, wd) in [(0.9f32, 1e-3f32), (0.0, 1e-3), (0.0, 0.0), (0.5, 0.0)] {
            let (mut eg, mut em) = (g0.clone(), m0.clone());
            for j in 0..d {
                if beta > 0.0 {
                    em[j] = beta * em[j] + (eg[j] + wd * x[j]);
                    eg[j] = 0.1 * em[j];
                } else {
                    eg[j] = 0.1 * (eg[j] + wd * x[j]);
                }
            }
            for level in levels() {
                let (mut g, mut m) = (g0.clone(), m0.clone());
                sgd_at(level, 0.1, wd, beta, &x, &mut g, &mut m);
                assert_eq!((&g, &m), (&eg, &em), "beta {beta} wd {wd} at {level:?}");
            }
        }
    }
}
