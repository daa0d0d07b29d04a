//! Framed messages: a fixed 44-byte little-endian header, then the body
//! (per-bucket scales, then bit-packed codes), optionally zstd-compressed.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 2 | magic `b"MQ"` |
//! | 2 | 1 | format version ([`FORMAT_VERSION`]) |
//! | 3 | 1 | payload kind ([`Kind`]) |
//! | 4 | 1 | bits per value (32 for `f32`), per index (sparse) |
//! | 5 | 1 | flags: bit 0 hash present, bit 1 body zstd-compressed |
//! | 6 | 2 | reserved, zero |
//! | 8 | 4 | number of values `len` |
//! | 12 | 4 | bucket size (stochastic, norm), values kept (sparse), else 0 |
//! | 16 | 8 | iteration |
//! | 24 | 4 | sender rank |
//! | 28 | 4 | body length in bytes as sent (after compression) |
//! | 32 | 4 | f32 parameter: modulus `B_theta` (Moniqua), levels `s` (norm), step `d` (fixed), else 0 |
//! | 36 | 8 | xxh3-64 of the un-modded integer codes, or 0 |
//!
//! The uncompressed body length is a function of `(kind, bits, len, bucket)`,
//! so a receiver knows how much to expect before it decompresses anything.

use std::borrow::Cow;

use crate::{CodecError, FrameError};

/// Magic bytes that open every frame.
pub const MAGIC: [u8; 2] = *b"MQ";
/// The frame format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 44;
/// Default limit on values per frame a receiver accepts (2^28, 1 GiB of f32).
pub const DEFAULT_MAX_LEN: u32 = 1 << 28;

const FLAG_HASH: u8 = 1;
const FLAG_ZSTD: u8 = 2;
const KNOWN_FLAGS: u8 = FLAG_HASH | FLAG_ZSTD;

/// Declares [`Kind`] and [`KINDS`] from one row per kind, so a kind's
/// number, name, bit widths, bucket rule and body length are written
/// once: `Kind::from_u8`, `Kind::name`, the header checks and
/// `raw_body_len` read the row.
macro_rules! kinds {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $code:literal {
            name: $name:literal,
            bits: $bits:expr,
            bucket: $bucket:expr,
            body: $body:expr,
            check: $check:expr,
        }
    )*) => {
        /// What the body holds.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            $( $(#[$doc])* $variant = $code, )*
        }

        /// Every kind's layout, one row each, in the order of their numbers.
        pub const KINDS: &[Layout] = &[
            $( Layout {
                kind: Kind::$variant,
                name: $name,
                bits: $bits,
                needs_bucket: $bucket,
                body_len: $body,
                check: $check,
            }, )*
        ];
    };
}

/// How one kind's frames are laid out and checked.
#[derive(Debug)]
pub struct Layout {
    pub kind: Kind,
    /// A short lowercase name.
    pub name: &'static str,
    /// The bit widths a header of this kind may carry.
    pub bits: std::ops::RangeInclusive<u8>,
    /// Whether the header's bucket field must be at least 1.
    pub needs_bucket: bool,
    /// Body length before compression, from the header's `bits`, `len`
    /// and `bucket`.
    pub body_len: fn(u32, usize, usize) -> usize,
    /// Whatever else a header of this kind must satisfy (`bits`, `len`,
    /// `bucket`).
    pub check: fn(u8, u32, u32) -> Result<(), FrameError>,
}

fn no_check(_: u8, _: u32, _: u32) -> Result<(), FrameError> {
    Ok(())
}

fn scaled_body(bits: u32, len: usize, bucket: usize) -> usize {
    4 * len.div_ceil(bucket.max(1)) + crate::pack::packed_len(len, bits)
}

kinds! {
    /// Full precision: `len` little-endian f32.
    F32 = 0 {
        name: "f32",
        bits: 32..=32,
        bucket: false,
        body: |_, len, _| 4 * len,
        check: no_check,
    }
    /// Moniqua: `len` codes of `bits` bits, the low bits of `floor(x 2^b / B + u)`.
    Moniqua = 1 {
        name: "moniqua",
        bits: 1..=8,
        bucket: false,
        body: |bits, len, _| crate::pack::packed_len(len, bits),
        check: no_check,
    }
    /// Baseline stochastic rounding: `ceil(len / bucket)` f32 scales, then `len` codes.
    Stochastic = 2 {
        name: "stochastic",
        bits: 1..=8,
        bucket: true,
        body: scaled_body,
        check: no_check,
    }
    /// Norm-scaled sign + level codes (QSGD, TernGrad): `ceil(len / bucket)`
    /// f32 norms, then `len` codes; the header's parameter field holds `s`.
    /// Bits: a sign and up to 15 bits of level (QSGD's s <= 32767).
    Norm = 3 {
        name: "norm",
        bits: 2..=16,
        bucket: true,
        body: scaled_body,
        check: no_check,
    }
    /// A sparsifier's output (top-k, random-k): the header's bucket field
    /// holds the count `k` kept, the body `k` strictly increasing indices
    /// of [`index_bits`]`(len)` bits each, then their `k` f32 values. The
    /// other `len - k` values are zero.
    Sparse = 4 {
        name: "sparse",
        bits: 1..=32,
        bucket: false,
        // bucket is the count kept
        body: |bits, _, kept| crate::pack::packed_len(kept, bits) + 4 * kept,
        check: check_sparse,
    }
    /// The fixed-precision quantizer: `len` codes of `bits` bits on the grid
    /// `(k + 1/2) d`; the header's parameter field holds the step `d`.
    Fixed = 5 {
        name: "fixed",
        bits: 1..=8,
        bucket: false,
        body: |bits, len, _| crate::pack::packed_len(len, bits),
        check: no_check,
    }
}

// Each kind's number is its row: checked as the crate compiles.
const _: () = {
    let mut i = 0;
    while i < KINDS.len() {
        assert!(
            KINDS[i].kind as usize == i,
            "a kind's number is its row in KINDS"
        );
        i += 1;
    }
};

/// A sparse header's bits are those of an index into `len`, and it keeps
/// at most `len` values.
fn check_sparse(bits: u8, len: u32, kept: u32) -> Result<(), FrameError> {
    if u32::from(bits) != index_bits(len as usize) {
        return Err(FrameError::BadBits {
            bits,
            kind: Kind::Sparse.name(),
        });
    }
    if kept > len {
        return Err(FrameError::SparseCount { kept, len });
    }
    Ok(())
}

/// Bits of one index into `len` values: enough for `len - 1`, at least 1.
pub fn index_bits(len: usize) -> u32 {
    (usize::BITS - len.saturating_sub(1).leading_zeros()).max(1)
}

impl Kind {
    /// Its row of [`KINDS`].
    pub fn layout(self) -> &'static Layout {
        &KINDS[self as usize]
    }

    fn from_u8(v: u8) -> Result<Self, FrameError> {
        KINDS
            .get(usize::from(v))
            .map(|l| l.kind)
            .ok_or(FrameError::UnknownKind { found: v })
    }

    /// A short lowercase name.
    pub fn name(self) -> &'static str {
        self.layout().name
    }
}

/// Whether and how the body is entropy-coded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    /// zstd at this level (1..=22). The body is sent raw when zstd does not
    /// make it smaller; the header records which.
    Zstd { level: i32 },
}

impl Compression {
    /// zstd at `level`, checked.
    pub fn zstd(level: i32) -> Result<Self, crate::ConfigError> {
        if (1..=22).contains(&level) {
            Ok(Compression::Zstd { level })
        } else {
            Err(crate::ConfigError::InvalidZstdLevel { level })
        }
    }
}

/// The decoded fixed header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameHeader {
    pub kind: Kind,
    pub bits: u8,
    pub len: u32,
    pub bucket: u32,
    pub iteration: u64,
    pub sender: u32,
    pub modulus: f32,
    pub hash: Option<u64>,
    pub compressed: bool,
    /// Body length as sent.
    pub body_len: u32,
}

impl FrameHeader {
    /// Body length before compression, as implied by kind, bits, len and bucket.
    pub fn raw_body_len(&self) -> usize {
        raw_body_len(
            self.kind,
            u32::from(self.bits),
            self.len as usize,
            self.bucket as usize,
        )
    }

    /// Total frame length on the wire.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.body_len as usize
    }

    fn write(&self, out: &mut [u8]) {
        let mut flags = 0;
        if self.hash.is_some() {
            flags |= FLAG_HASH;
        }
        if self.compressed {
            flags |= FLAG_ZSTD;
        }
        out[0..2].copy_from_slice(&MAGIC);
        out[2] = FORMAT_VERSION;
        out[3] = self.kind as u8;
        out[4] = self.bits;
        out[5] = flags;
        out[6..8].copy_from_slice(&0u16.to_le_bytes());
        out[8..12].copy_from_slice(&self.len.to_le_bytes());
        out[12..16].copy_from_slice(&self.bucket.to_le_bytes());
        out[16..24].copy_from_slice(&self.iteration.to_le_bytes());
        out[24..28].copy_from_slice(&self.sender.to_le_bytes());
        out[28..32].copy_from_slice(&self.body_len.to_le_bytes());
        out[32..36].copy_from_slice(&self.modulus.to_le_bytes());
        out[36..44].copy_from_slice(&self.hash.unwrap_or(0).to_le_bytes());
    }

    /// Parses and validates the fixed header (not the body).
    pub fn parse(bytes: &[u8], max_len: u32) -> Result<Self, FrameError> {
        let Some(h) = bytes.get(..HEADER_LEN) else {
            return Err(FrameError::Truncated {
                need: HEADER_LEN,
                have: bytes.len(),
            });
        };
        let u32_at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let u64_at = |o: usize| (u64::from(u32_at(o + 4)) << 32) | u64::from(u32_at(o));
        if h[0..2] != MAGIC {
            return Err(FrameError::BadMagic {
                found: [h[0], h[1]],
            });
        }
        if h[2] != FORMAT_VERSION {
            return Err(FrameError::UnsupportedVersion {
                found: h[2],
                supported: FORMAT_VERSION,
            });
        }
        let kind = Kind::from_u8(h[3])?;
        let bits = h[4];
        let layout = kind.layout();
        let bits_ok = layout.bits.contains(&bits);
        if !bits_ok {
            return Err(FrameError::BadBits {
                bits,
                kind: kind.name(),
            });
        }
        let flags = h[5];
        if flags & !KNOWN_FLAGS != 0 {
            return Err(FrameError::UnknownFlags { flags });
        }
        let reserved = u16::from_le_bytes([h[6], h[7]]);
        if reserved != 0 {
            return Err(FrameError::ReservedNonZero { found: reserved });
        }
        let len = u32_at(8);
        if len > max_len {
            return Err(FrameError::TooLong { len, max: max_len });
        }
        let bucket = u32_at(12);
        if layout.needs_bucket && bucket == 0 {
            return Err(FrameError::ZeroBucket);
        }
        (layout.check)(bits, len, bucket)?;
        let hash = u64_at(36);
        Ok(FrameHeader {
            kind,
            bits,
            len,
            bucket,
            iteration: u64_at(16),
            sender: u32_at(24),
            modulus: f32::from_le_bytes(u32_at(32).to_le_bytes()),
            hash: (flags & FLAG_HASH != 0).then_some(hash),
            compressed: flags & FLAG_ZSTD != 0,
            body_len: u32_at(28),
        })
    }
}

/// Body length before compression.
pub fn raw_body_len(kind: Kind, bits: u32, len: usize, bucket: usize) -> usize {
    (kind.layout().body_len)(bits, len, bucket)
}

/// What every codec's encode checks first: the frame's value count, and,
/// where the caller asks for the values the receivers will decode (`own`),
/// a buffer of the input's length (`what` names it in the error).
pub(crate) fn encode_preamble(
    x: &[f32],
    own: Option<&[f32]>,
    what: &'static str,
) -> Result<u32, CodecError> {
    let len = value_count(x.len())?;
    if let Some(own) = own {
        check_len(what, x.len(), own.len())?;
    }
    Ok(len)
}

/// `Ok` where every value of `x` is finite, else the error that counts
/// them and names the first.
pub(crate) fn check_finite(x: &[f32]) -> Result<(), CodecError> {
    if x.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(non_finite_error(x))
    }
}

/// `expected` values where `what` has `got`: an error.
pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), CodecError> {
    if expected == got {
        Ok(())
    } else {
        Err(CodecError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

/// The error for an input with non-finite values (the slow path of a failed encode).
pub(crate) fn non_finite_error(x: &[f32]) -> CodecError {
    let count = x.iter().filter(|v| !v.is_finite()).count();
    let first = x.iter().position(|v| !v.is_finite()).unwrap_or(0);
    CodecError::NonFinite { count, first }
}

/// The header's value count for `len` values: a frame holds at most
/// 2^32 - 1.
pub(crate) fn value_count(len: usize) -> Result<u32, crate::CodecError> {
    u32::try_from(len).map_err(|_| crate::CodecError::TooLong {
        len,
        max: u32::MAX as usize,
    })
}

/// Appends a header placeholder to `out` and returns the body's start offset.
/// The encoder writes the raw body after it, then calls [`finish_frame`].
///
/// Encoders overwrite every byte of the frame, so a buffer reused at the same
/// size (the common case: one model, one size, every iteration) is not
/// zeroed first; only new capacity is.
pub(crate) fn begin_frame(out: &mut Vec<u8>, raw_body_len: usize) -> usize {
    let len = HEADER_LEN + raw_body_len;
    if out.len() >= len {
        out.truncate(len);
    } else {
        out.resize(len, 0);
    }
    HEADER_LEN
}

/// Compresses the body in place if asked and worthwhile, then writes the header.
pub(crate) fn finish_frame(
    out: &mut Vec<u8>,
    mut header: FrameHeader,
    compression: Compression,
) -> Result<FrameHeader, crate::CodecError> {
    header.compressed = false;
    if let Compression::Zstd { level } = compression {
        let body = &out[HEADER_LEN..];
        let packed =
            zstd::bulk::compress(body, level).map_err(|e| crate::CodecError::Compress {
                reason: e.to_string(),
            })?;
        if packed.len() < body.len() {
            out.truncate(HEADER_LEN);
            out.extend_from_slice(&packed);
            header.compressed = true;
        }
    }
    let body_len = out.len() - HEADER_LEN;
    header.body_len = u32::try_from(body_len).map_err(|_| crate::CodecError::TooLong {
        len: body_len,
        max: u32::MAX as usize,
    })?;
    header.write(&mut out[..HEADER_LEN]);
    Ok(header)
}

/// A parsed frame: its header and its uncompressed body.
#[derive(Debug, Clone)]
pub struct Frame<'a> {
    pub header: FrameHeader,
    pub body: Cow<'a, [u8]>,
}

/// Parses a whole frame: validates the header, checks the body length (no
/// truncated and no trailing bytes) and decompresses it, bounded by the
/// length the header implies. Never panics on any input.
pub fn read_frame(bytes: &[u8], max_len: u32) -> Result<Frame<'_>, FrameError> {
    let header = FrameHeader::parse(bytes, max_len)?;
    let body = read_body(&header, bytes)?;
    Ok(Frame { header, body })
}

/// The uncompressed body of a frame whose header is `header`.
///
/// Decompression allocates the body length the header implies, so callers
/// that take `len` from the wire must bound it first (as [`open_frame`] does).
pub fn read_body<'a>(header: &FrameHeader, bytes: &'a [u8]) -> Result<Cow<'a, [u8]>, FrameError> {
    let body = bytes.get(HEADER_LEN..).unwrap_or_default();
    let sent = header.body_len as usize;
    if body.len() < sent {
        return Err(FrameError::Truncated {
            need: HEADER_LEN + sent,
            have: bytes.len(),
        });
    }
    if body.len() > sent {
        return Err(FrameError::TrailingBytes {
            extra: body.len() - sent,
        });
    }
    let expected = header.raw_body_len();
    if header.compressed {
        let raw = zstd::bulk::decompress(body, expected).map_err(|e| FrameError::Decompress {
            reason: e.to_string(),
        })?;
        if raw.len() != expected {
            return Err(FrameError::DecompressedLength {
                expected,
                got: raw.len(),
            });
        }
        Ok(Cow::Owned(raw))
    } else if sent != expected {
        Err(FrameError::BodyLength {
            expected,
            got: sent,
        })
    } else {
        Ok(Cow::Borrowed(body))
    }
}

/// What a decoder expects of a frame before it touches the body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect {
    pub kind: Kind,
    pub bits: u8,
    pub len: usize,
    pub modulus: Option<f32>,
    pub bucket: Option<u32>,
}

/// Parses the header, checks it against what the decoder expects (kind, bits,
/// length of the caller's buffers, modulus, bucket), and only then reads the
/// body: a header that lies about its length cannot make the receiver
/// allocate more than its own model.
pub(crate) fn open_frame<'a>(
    bytes: &'a [u8],
    want: &Expect,
) -> Result<Frame<'a>, crate::CodecError> {
    use crate::CodecError;
    let header = FrameHeader::parse(bytes, u32::MAX)?;
    if header.kind != want.kind {
        return Err(CodecError::KindMismatch {
            found: header.kind.name(),
            expected: want.kind.name(),
        });
    }
    if header.bits != want.bits {
        return Err(CodecError::BitsMismatch {
            found: header.bits,
            expected: want.bits,
        });
    }
    if header.len as usize != want.len {
        return Err(CodecError::LengthMismatch {
            what: "frame",
            expected: want.len,
            got: header.len as usize,
        });
    }
    if let Some(m) = want.modulus
        && header.modulus.to_bits() != m.to_bits()
    {
        return Err(CodecError::ModulusMismatch {
            found: header.modulus,
            expected: m,
        });
    }
    if let Some(b) = want.bucket
        && header.bucket != b
    {
        return Err(CodecError::BucketMismatch {
            found: header.bucket,
            expected: b,
        });
    }
    let body = read_body(&header, bytes)?;
    Ok(Frame { header, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> FrameHeader {
        FrameHeader {
            kind: Kind::Moniqua,
            bits: 3,
            len: 10,
            bucket: 0,
            iteration: 0x0102_0304_0506_0708,
            sender: 5,
            modulus: 4.5,
            hash: Some(0xdead_beef_cafe_f00d),
            compressed: false,
            body_len: 0,
        }
    }

    fn frame_with_body(h: FrameHeader, body: &[u8], c: Compression) -> Vec<u8> {
        let mut out = Vec::new();
        let start = begin_frame(&mut out, body.len());
        out[start..].copy_from_slice(body);
        finish_frame(&mut out, h, c).unwrap();
        out
    }

    #[test]
    fn header_round_trips() {
        let body = [0xAB; 4];
        let bytes = frame_with_body(header(), &body, Compression::None);
        assert_eq!(bytes.len(), HEADER_LEN + 4);
        let f = read_frame(&bytes, DEFAULT_MAX_LEN).unwrap();
        assert_eq!(
            f.header,
            FrameHeader {
                body_len: 4,
                ..header()
            }
        );
        assert_eq!(&*f.body, &body);
    }

    #[test]
    fn header_layout_is_pinned() {
        let bytes = frame_with_body(header(), &[0; 4], Compression::None);
        assert_eq!(&bytes[0..8], &[b'M', b'Q', 1, 1, 3, 1, 0, 0]);
        assert_eq!(&bytes[8..12], &10u32.to_le_bytes());
        assert_eq!(&bytes[16..24], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(&bytes[32..36], &4.5f32.to_le_bytes());
    }

    #[test]
    fn compressible_body_is_compressed_and_restored() {
        let h = FrameHeader {
            kind: Kind::F32,
            bits: 32,
            len: 1000,
            hash: None,
            ..header()
        };
        let body = vec![0u8; 4000];
        let bytes = frame_with_body(h, &body, Compression::Zstd { level: 3 });
        assert!(
            bytes.len() < 200,
            "zeros must compress, got {}",
            bytes.len()
        );
        let f = read_frame(&bytes, DEFAULT_MAX_LEN).unwrap();
        assert!(f.header.compressed);
        assert_eq!(&*f.body, &body[..]);
    }

    #[test]
    fn incompressible_body_is_sent_raw() {
        let h = FrameHeader {
            len: 64,
            bits: 8,
            ..header()
        };
        let body: Vec<u8> = (0..64u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let bytes = frame_with_body(h, &body, Compression::Zstd { level: 3 });
        let f = read_frame(&bytes, DEFAULT_MAX_LEN).unwrap();
        assert!(!f.header.compressed);
        assert_eq!(bytes.len(), HEADER_LEN + 64);
    }

    #[test]
    fn malformed_frames_are_errors() {
        let good = frame_with_body(header(), &[0; 4], Compression::None);
        let check = |mutate: &dyn Fn(&mut Vec<u8>), want: &dyn Fn(&FrameError) -> bool| {
            let mut b = good.clone();
            mutate(&mut b);
            let err = read_frame(&b, DEFAULT_MAX_LEN).unwrap_err();
            assert!(want(&err), "unexpected {err:?}");
        };
        check(&|b| b.truncate(10), &|e| {
            matches!(e, FrameError::Truncated { .. })
        });
        check(&|b| b.truncate(46), &|e| {
            matches!(e, FrameError::Truncated { .. })
        });
        check(&|b| b.push(0), &|e| {
            matches!(e, FrameError::TrailingBytes { extra: 1 })
        });
        check(&|b| b[0] = b'X', &|e| {
            matches!(e, FrameError::BadMagic { .. })
        });
        check(&|b| b[2] = 9, &|e| {
            matches!(e, FrameError::UnsupportedVersion { found: 9, .. })
        });
        check(&|b| b[3] = 7, &|e| {
            matches!(e, FrameError::UnknownKind { found: 7 })
        });
        check(&|b| b[4] = 9, &|e| {
            matches!(e, FrameError::BadBits { bits: 9, .. })
        });
        check(&|b| b[5] = 0x80, &|e| {
            matches!(e, FrameError::UnknownFlags { .. })
        });
        check(&|b| b[6] = 1, &|e| {
            matches!(e, FrameError::ReservedNonZero { .. })
        });
        check(
            &|b| b[8..12].copy_from_slice(&u32::MAX.to_le_bytes()),
            &|e| matches!(e, FrameError::TooLong { .. }),
        );
        check(&|b| b[8..12].copy_from_slice(&11u32.to_le_bytes()), &|e| {
            matches!(
                e,
                FrameError::BodyLength {
                    expected: 5,
                    got: 4
                }
            )
        });
        check(&|b| b[5] |= FLAG_ZSTD, &|e| {
            matches!(e, FrameError::Decompress { .. })
        });
    }
}
