//! Per-thread scratch vectors for what a worker needs only inside one call
//! (an accumulator, a decode buffer): kept per thread instead of per worker,
//! so n simulated workers on t threads reuse t sets that stay in cache, and
//! what a worker keeps between iterations is its state alone.

use std::cell::RefCell;

thread_local! {
    static POOL: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with `N` vectors of length `len` taken from this thread's pool.
/// Their contents are unspecified (what the last user left): `f` writes
/// before it reads. A nested call gets vectors of its own.
pub(crate) fn with_vectors<const N: usize, R>(
    len: usize,
    f: impl FnOnce(&mut [Vec<f32>; N]) -> R,
) -> R {
    let mut vectors: [Vec<f32>; N] = POOL.with(|pool| {
        let mut pool = pool.borrow_mut();
        std::array::from_fn(|_| pool.pop().unwrap_or_default())
    });
    for v in &mut vectors {
        v.resize(len, 0.0);
    }
    let result = f(&mut vectors);
    POOL.with(|pool| pool.borrow_mut().extend(vectors));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_have_the_length_asked_and_nesting_does_not_alias() {
        with_vectors::<2, _>(5, |[a, b]| {
            assert_eq!((a.len(), b.len()), (5, 5));
            a.fill(1.0);
            b.fill(2.0);
            with_vectors::<1, _>(3, |[c]| {
                assert_eq!(c.len(), 3);
                c.fill(3.0);
            });
            assert!(a.iter().all(|&v| v == 1.0) && b.iter().all(|&v| v == 2.0));
        });
        // reused, resized
        with_vectors::<3, _>(7, |v| assert!(v.iter().all(|v| v.len() == 7)));
    }
}
