//! Runtime selection of the instruction set for the suite's hot loops (the
//! codec's kernels and the algorithms' flat-buffer arithmetic).
//!
//! Kernels are written once as `#[inline(always)]` scalar Rust that the
//! compiler vectorizes; [`multiversion!`] instantiates each one for x86-64-v4
//! (AVX-512), x86-64-v3 (AVX2 + FMA) and the baseline, and picks at run time.
//! In the codec, the AVX-512 instantiation hands the common widths to the
//! hand-written loops of `repro_codec`'s `avx512` module. All produce bit-identical results (Rust never
//! contracts `a * b + c` into an FMA, and the hand-written loops use one only
//! where it rounds exactly as the separate operations), so workers on
//! different CPUs agree on every code; `kernels::tests` checks this.
//!
//! `REPRO_CODEC_SIMD=baseline|avx2|avx512` caps the level (for benchmarks and
//! for checking a slow path); the default is the best the CPU supports.

use std::sync::atomic::{AtomicU8, Ordering};

/// Instruction-set levels, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Baseline = 1,
    Avx2 = 2,
    Avx512 = 3,
}

impl Level {
    /// Lowercase name, as accepted by `REPRO_CODEC_SIMD`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Baseline => "baseline",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(0);

/// A hint naming memory the caller will read next (the simulator: the model
/// of the worker it steps next on this thread), which a long kernel asks the
/// CPU to bring into its L2 cache a little at a time while it computes, so
/// that read overlaps with work instead of waiting on memory. Only an address
/// and a length: nothing is ever read through it, so a stale hint costs a
/// wasted prefetch and nothing else. Where a kernel has no use for it, it is
/// ignored; results never depend on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prefetch {
    addr: usize,
    bytes: usize,
}

impl Prefetch {
    /// No hint.
    pub const NONE: Prefetch = Prefetch { addr: 0, bytes: 0 };

    /// A hint for the memory of `data`.
    pub fn of<T>(data: &[T]) -> Self {
        Self {
            addr: data.as_ptr() as usize,
            bytes: std::mem::size_of_val(data),
        }
    }

    /// The hint for what follows the first `bytes` of this one's memory.
    pub fn skip(self, bytes: usize) -> Self {
        Self {
            addr: self.addr.wrapping_add(bytes),
            bytes: self.bytes.saturating_sub(bytes),
        }
    }

    /// Asks for the cache lines of bytes `from..from + len` of the hinted
    /// memory (clipped to it).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn lines(&self, from: usize, len: usize) {
        use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        let end = from.saturating_add(len).min(self.bytes);
        let mut at = from;
        while at < end {
            let p = std::ptr::without_provenance::<i8>(self.addr.wrapping_add(at));
            // SAFETY: a prefetch is a hint: it never faults, whatever the
            // address, and reads nothing the program can observe.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(p) };
            at += 64;
        }
    }
}

static DETECTED: AtomicU8 = AtomicU8::new(0);

/// The best level this CPU supports (checked once; every kernel call asks).
pub fn detected() -> Level {
    match DETECTED.load(Ordering::Relaxed) {
        1 => Level::Baseline,
        2 => Level::Avx2,
        3 => Level::Avx512,
        _ => {
            let l = detect();
            DETECTED.store(l as u8, Ordering::Relaxed);
            l
        }
    }
}

fn detect() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        // what both vector levels' `target_feature` lists enable besides
        // their vector sets (the AVX-512 loops use `pdep` and `pext`)
        let scalar = std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("popcnt");
        let avx2 = scalar
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        if avx2
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512dq")
        {
            return Level::Avx512;
        }
        if avx2 {
            return Level::Avx2;
        }
    }
    Level::Baseline
}

/// The cap `REPRO_CODEC_SIMD` sets: none (the top level) where unset,
/// `None` for a value that is no level.
fn cap_of(asked: Option<&str>) -> Option<Level> {
    match asked {
        None | Some("avx512") => Some(Level::Avx512),
        Some("avx2") => Some(Level::Avx2),
        Some("baseline") => Some(Level::Baseline),
        Some(_) => None,
    }
}

/// `REPRO_CODEC_SIMD` unset or a level, else the error that names the
/// accepted values. The driver and the trainer refuse to start on an
/// error, so a mistyped cap never runs uncapped.
pub fn check_cap_env() -> Result<(), String> {
    check_cap(std::env::var("REPRO_CODEC_SIMD").ok().as_deref())
}

fn check_cap(asked: Option<&str>) -> Result<(), String> {
    match cap_of(asked) {
        Some(_) => Ok(()),
        None => Err(format!(
            "REPRO_CODEC_SIMD={:?} is not a SIMD level: set it to baseline, avx2 or avx512, or unset it",
            asked.unwrap_or_default()
        )),
    }
}

/// The level the codec uses: the detected one, capped by `REPRO_CODEC_SIMD`
/// (an unknown value is said on standard error, and caps nothing).
pub fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        1 => Level::Baseline,
        2 => Level::Avx2,
        3 => Level::Avx512,
        _ => {
            let asked = std::env::var("REPRO_CODEC_SIMD");
            let cap = cap_of(asked.as_deref().ok()).unwrap_or_else(|| {
                // said once (the level is kept): an unknown cap is no cap
                eprintln!(
                    "warning: REPRO_CODEC_SIMD={} is no level (baseline, avx2, avx512): not capped",
                    asked.as_deref().unwrap_or_default()
                );
                Level::Avx512
            });
            let l = detected().min(cap);
            LEVEL.store(l as u8, Ordering::Relaxed);
            l
        }
    }
}

/// Defines `pub(crate) fn $name(args) -> ret` (in the crate that invokes it) that runs `$imp` compiled for the
/// best available level, plus `$name_at(level, args)` for tests. `$imp` takes
/// `const NATIVE: bool`, true where the level has a floor instruction (see
/// `round::floor_to_i32`), and `const V4: bool`, true in the AVX-512
/// instantiation (where a kernel may call `crate::avx512`).
#[macro_export]
macro_rules! multiversion {
    ($(#[$meta:meta])* fn $name:ident / $at:ident ($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty = $imp:ident;) => {
        $(#[$meta])*
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn $name($($arg: $ty),*) -> $ret {
            $at($crate::level(), $($arg),*)
        }

        /// Runs the kernel at `level`, which must not exceed `simd::detected()`.
        #[allow(unsafe_code, clippy::too_many_arguments)]
        pub(crate) fn $at(level: $crate::Level, $($arg: $ty),*) -> $ret {
            assert!(level <= $crate::detected(), "SIMD level not supported by this CPU");
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi1,bmi2,popcnt")]
                #[allow(clippy::too_many_arguments)]
                fn v4($($arg: $ty),*) -> $ret {
                    $imp::<true, true>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma,bmi1,bmi2,popcnt")]
                #[allow(clippy::too_many_arguments)]
                fn v3($($arg: $ty),*) -> $ret {
                    $imp::<true, false>($($arg),*)
                }
                match level {
                    // SAFETY: the assert above established that the CPU has
                    // these features (`detected()` checks each of them).
                    $crate::Level::Avx512 => return unsafe { v4($($arg),*) },
                    // SAFETY: as above.
                    $crate::Level::Avx2 => return unsafe { v3($($arg),*) },
                    $crate::Level::Baseline => {}
                }
            }
            let _ = level;
            $imp::<false, false>($($arg),*)
        }
    };
}

/// Every level this CPU runs, for tests that compare them.
pub fn levels() -> Vec<Level> {
    [Level::Baseline, Level::Avx2, Level::Avx512]
        .into_iter()
        .filter(|&l| l <= detected())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `REPRO_CODEC_SIMD` caps at a level it names, caps nothing unset,
    /// and a value that is no level is told apart (and warned of).
    #[test]
    fn the_cap_is_a_level_or_unknown() {
        assert_eq!(cap_of(None), Some(Level::Avx512));
        assert_eq!(cap_of(Some("avx2")), Some(Level::Avx2));
        assert_eq!(cap_of(Some("baseline")), Some(Level::Baseline));
        assert_eq!(cap_of(Some("AVX2")), None);
        assert_eq!(cap_of(Some("sse")), None);
        assert_eq!(check_cap(Some("avx2")), Ok(()));
        assert_eq!(check_cap(None), Ok(()));
        let e = check_cap(Some("AVX2")).unwrap_err();
        assert!(
            e.contains("\"AVX2\"") && e.contains("baseline, avx2 or avx512"),
            "{e}"
        );
    }
}
