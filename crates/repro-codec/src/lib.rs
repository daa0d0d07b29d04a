//! The wire codec of the Moniqua reproduction suite.
//!
//! Pure Rust, no torch, no MPI, no I/O: it turns a flat `f32` model buffer into
//! the framed, bit-packed bytes that Moniqua and its baselines put on the wire,
//! and back.
//!
//! - [`MoniquaCodec`]: modulo quantization (Lu & De Sa 2020, Algorithm 1),
//!   b = 1..=8 bits on all `2^b` points of the unit circle, nearest or
//!   stochastic rounding with shared randomness, optional hash verification.
//! - [`StochasticCodec`]: the baselines' unbiased stochastic rounding over
//!   `[-s, s]` with a per-bucket f32 scale.
//! - [`NormCodec`]: QSGD and TernGrad (norm-scaled sign and level codes).
//! - [`SparseCodec`]: top-k and random-k, indices and values on the wire.
//! - [`FixedCodec`]: fixed-precision randomized quantization on a grid of
//!   a set step, whatever the magnitude (Tang et al.'s experiments).
//! - [`FullPrecision`]: f32 pass-through.
//! - [`frame`]: the 44-byte header and body layout; [`pack`]: dense bit packing.
//!
//! ```
//! use repro_codec::{DecodeTarget, MoniquaCodec, MoniquaConfig, Verification};
//!
//! let codec = MoniquaCodec::new(&MoniquaConfig { bits: 2, ..Default::default() }, 42)?;
//! let x = vec![0.30f32, -1.20, 5.00];   // sender's model
//! let y = vec![0.10f32, -0.90, 4.20];   // receiver's model, |x - y| < theta = 2
//! let mut frame = Vec::new();
//! codec.encode(&x, 0, 1, None, &mut frame)?;
//! assert_eq!(frame.len(), 44 + 1);       // header + 3 values * 2 bits
//! let mut x_hat = vec![0.0; 3];
//! let d = codec.decode(&frame, &y, DecodeTarget::Out(&mut x_hat))?;
//! assert_eq!(d.verification, Verification::Verified);
//! for (a, b) in x.iter().zip(&x_hat) {
//!     assert!(f64::from((a - b).abs()) <= codec.error_bound());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(target_arch = "x86_64")]
mod avx512;
mod chunk;
mod codec;
mod dither;
mod errors;
mod fixed;
pub mod frame;
mod full;
#[doc(hidden)]
pub mod fuzzing;
mod kernels;
mod modulo;
mod moniqua;
mod norm;
pub mod pack;
mod round;
mod sparse;
/// The SIMD levels and their dispatch (the `repro-simd` crate).
pub use repro_simd as simd;
mod stochastic;

pub use codec::Codec;
pub use dither::{DITHER_CHUNK, Dither, SHARED_STREAM};
pub use errors::{CodecError, ConfigError, FrameError};
pub use fixed::{FixedCodec, FixedConfig, FixedEncoded};
pub use frame::{Compression, FrameHeader, KINDS, Kind, Layout};

/// Codecs that read a kind's frames, one row per kind but Moniqua's (whose
/// codec decodes against the receiver's model and has tests of its own).
/// Each lists settings of its codec, and given a header, the header's own
/// (so a decode gets past the header checks): the fuzz target decodes with
/// every one, and the property tests round-trip through every one.
pub type Codecs = fn(Option<&FrameHeader>) -> Vec<Box<dyn Codec>>;

/// Every compressor's codecs, by the kind it writes.
pub const CODECS: &[(Kind, Codecs)] = &[
    (Kind::F32, full::codecs),
    (Kind::Stochastic, stochastic::codecs),
    (Kind::Norm, norm::codecs),
    (Kind::Sparse, sparse::codecs),
    (Kind::Fixed, fixed::codecs),
];
pub use full::FullPrecision;
pub use kernels::MixTarget;
pub use modulo::{BTheta, centred_mod, circle_delta, modulus_for};
pub use moniqua::{
    BlockUpdate, DecodeTarget, Decoded, DitherTable, Encoded, MoniquaCodec, MoniquaConfig,
    Verification, VerifyStats,
};
pub use norm::{Norm, NormCodec, NormConfig};
pub use round::Rounding;
pub use simd::Prefetch;
pub use sparse::{Keep, Select, SparseCodec, SparseConfig};
pub use stochastic::{DEFAULT_BUCKET, StochasticCodec, StochasticConfig};
