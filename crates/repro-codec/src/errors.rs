//! Error types of the codec. Messages are lowercase fragments that name what
//! failed and, for configuration errors, the key to change.

use thiserror::Error;

use crate::Rounding;

/// A codec configuration that cannot work.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    /// Bit widths outside 1..=8.
    #[error("bits must be in 1..=8, got {bits}; set `bits` to a value between 1 and 8")]
    BitsOutOfRange { bits: u32 },
    /// theta must be a positive finite number.
    #[error("theta must be positive and finite, got {theta}; set `theta` (the paper uses 2.0)")]
    InvalidTheta { theta: f64 },
    /// An explicit modulus must be a positive finite number.
    #[error("modulus must be positive and finite, got {modulus}; fix `modulus`")]
    InvalidModulus { modulus: f64 },
    /// delta >= 1/2 makes B_theta = 2 theta / (1 - 2 delta) unbounded.
    #[error(
        "delta = {delta} is not below 1/2 for {bits}-bit {rounding} rounding, so B_theta = 2 theta / (1 - 2 delta) is unbounded; \
         set `rounding: nearest`, raise `bits`, give an explicit `modulus`, or choose another reading of B_theta (`b_theta: half-step` or `lemma1`)"
    )]
    DeltaTooLarge {
        delta: f64,
        bits: u32,
        rounding: Rounding,
    },
    /// An explicit delta below the quantizer's real error bound would void Lemma 2.
    #[error(
        "delta = {delta} is below the error bound {bound} of {bits}-bit {rounding} rounding; \
         remove `delta` (MoniquaConfig) or set it to at least {bound}"
    )]
    DeltaBelowBound {
        delta: f64,
        bound: f64,
        bits: u32,
        rounding: Rounding,
    },
    /// The fixed-precision quantizer's step must be a positive finite number.
    #[error("the grid step must be positive and finite, got {step}; set `grid_step`")]
    InvalidStep { step: f32 },
    /// QSGD / TernGrad levels out of range.
    #[error(
        "levels must be in 1..=32767 (so a sign and level fit 16 bits), got {levels}; fix `levels`"
    )]
    InvalidLevels { levels: u32 },
    /// Bucket size zero.
    #[error("bucket size must be at least 1; set `bucket`")]
    InvalidBucket,
    /// A sparsifier that keeps nothing, or a fraction outside (0, 1].
    #[error("a sparsifier keeps {what}; set `k` to at least 1 or `fraction` in (0, 1]")]
    InvalidKeep { what: String },
    /// Top-k has no unbiased form.
    #[error(
        "top-k keeps the largest values, so it is biased by construction; \
         set `biased: true`, or use `random-k` for an unbiased sparsifier"
    )]
    UnbiasedTopK,
    /// zstd level out of range.
    #[error("zstd level {level} is outside 1..=22; fix `zstd_level`")]
    InvalidZstdLevel { level: i32 },
}

/// A frame that cannot be decoded. Decoding never panics and never reads out
/// of bounds: every malformed input maps to one of these.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("not a repro frame: magic bytes are {found:02x?}, expected \"MQ\"")]
    BadMagic { found: [u8; 2] },
    #[error("unsupported frame format version {found}; this build reads version {supported}")]
    UnsupportedVersion { found: u8, supported: u8 },
    #[error("unknown payload kind {found} in frame header")]
    UnknownKind { found: u8 },
    #[error("invalid bit width {bits} for a {kind} payload")]
    BadBits { bits: u8, kind: &'static str },
    #[error("unknown flag bits {flags:#04x} in frame header")]
    UnknownFlags { flags: u8 },
    #[error("reserved header field is {found:#x}, expected 0")]
    ReservedNonZero { found: u16 },
    #[error("frame announces {len} values, above the receiver's limit of {max}")]
    TooLong { len: u32, max: u32 },
    #[error("stochastic frame has bucket size 0")]
    ZeroBucket,
    #[error("sparse frame keeps {kept} of its {len} values")]
    SparseCount { kept: u32, len: u32 },
    #[error("frame body is {got} bytes but its header announces {expected}")]
    BodyLength { expected: usize, got: usize },
    #[error("frame has {extra} bytes after its body")]
    TrailingBytes { extra: usize },
    #[error("zstd decompression of the frame body failed: {reason}")]
    Decompress { reason: String },
    #[error("decompressed body is {got} bytes, expected {expected}")]
    DecompressedLength { expected: usize, got: usize },
}

/// Errors of encoding or decoding a model buffer.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CodecError {
    #[error("malformed frame")]
    Frame(#[from] FrameError),
    #[error("input has {count} non-finite values (first at index {first}): the model has diverged")]
    NonFinite { count: usize, first: usize },
    #[error(
        "{count} model values are beyond the codec's exact range +-{limit} (first at index {first}: {value}); \
         raise `theta` (or `modulus`) or lower `bits`"
    )]
    OutOfRange {
        count: usize,
        first: usize,
        value: f32,
        limit: f32,
    },
    #[error("{what} has {got} values, expected {expected}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("input has {len} values, above the frame limit of {max}")]
    TooLong { len: usize, max: usize },
    #[error("frame carries a {found} payload but this codec decodes {expected}")]
    KindMismatch {
        found: &'static str,
        expected: &'static str,
    },
    #[error("frame has {found} bits per value but this codec uses {expected}")]
    BitsMismatch { found: u8, expected: u8 },
    #[error(
        "frame was encoded with modulus {found} but this codec uses {expected}; \
         all workers must share `theta` / `modulus`"
    )]
    ModulusMismatch { found: f32, expected: f32 },
    #[error("frame bucket size {found} differs from this codec's {expected}")]
    BucketMismatch { found: u32, expected: u32 },
    #[error("frame scale of bucket {bucket} is {scale}, not a finite non-negative number")]
    CorruptScale { bucket: usize, scale: f32 },
    #[error("frame code in bucket {bucket} is above the codec's {levels} levels")]
    CorruptCode { bucket: usize, levels: u32 },
    #[error(
        "sparse frame entry {entry} has index {index}: indices must increase and stay below {len}"
    )]
    CorruptIndex {
        entry: usize,
        index: u32,
        len: usize,
    },
    #[error("sparse frame entry {entry} has value {value}, not a finite number")]
    CorruptValue { entry: usize, value: f32 },
    #[error(
        "input values are finite but {what} overflows f32 (first at bucket or index {at}): \
         the model has diverged"
    )]
    Overflow { what: &'static str, at: usize },
    #[error("zstd compression failed: {reason}")]
    Compress { reason: String },
    #[error(
        "a frame carries a hash: mix it out of place (`mix`), so that a failed \
         recovery can be left out of the update"
    )]
    HashInPlace,
    #[error(
        "a block of {len} values at coordinate {at}: blocks start on a multiple of 64 \
         and end inside the model"
    )]
    Block { at: usize, len: usize },
}
