//! Full precision pass-through: the model as little-endian f32.

use crate::CodecError;
use crate::frame::{self, Compression, Expect, FrameHeader, Kind};
use crate::moniqua::Encoded;

/// The full-precision "codec" (D-PSGD, AllReduce).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FullPrecision {
    pub compression: Compression,
}

/// A full-precision frame's header before its body is known.
fn header(len: u32, iteration: u64, sender: u32) -> FrameHeader {
    FrameHeader {
        kind: Kind::F32,
        bits: 32,
        len,
        bucket: 0,
        iteration,
        sender,
        modulus: 0.0,
        hash: None,
        compressed: false,
        body_len: 0,
    }
}

impl FullPrecision {
    /// Bytes of one frame for `len` values, before entropy coding.
    pub fn frame_len(&self, len: usize) -> usize {
        frame::HEADER_LEN + 4 * len
    }

    /// Writes `x` into a frame in `out`. Non-finite values pass through: full
    /// precision carries what it is given, divergence is the caller's to detect.
    pub fn encode(
        &self,
        x: &[f32],
        iteration: u64,
        sender: u32,
        out: &mut Vec<u8>,
    ) -> Result<Encoded, CodecError> {
        let len = frame::value_count(x.len())?;
        let start = frame::begin_frame(out, 4 * x.len());
        for (dst, v) in out[start..].chunks_exact_mut(4).zip(x) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
        Ok(Encoded {
            header: frame::finish_frame(out, header(len, iteration, sender), self.compression)?,
        })
    }

    /// The body of a full-precision frame of `len` values (its f32 values,
    /// little-endian), checked as [`decode`](Self::decode) checks the
    /// frame; `None` for a compressed body, which a caller decodes whole.
    pub fn body<'a>(&self, bytes: &'a [u8], len: usize) -> Result<Option<&'a [u8]>, CodecError> {
        let frame = frame::open_frame(
            bytes,
            &Expect {
                kind: Kind::F32,
                bits: 32,
                len,
                modulus: None,
                bucket: None,
            },
        )?;
        Ok(match frame.body {
            std::borrow::Cow::Borrowed(body) => Some(body),
            std::borrow::Cow::Owned(_) => None,
        })
    }

    /// Starts a frame of `len` values in `out` that [`put`](Self::put)
    /// fills a block at a time and [`finish`](Self::finish) closes: the
    /// bytes [`encode`](Self::encode) writes. `false` (nothing done) when
    /// the frame is compressed, which needs the whole body.
    pub fn begin(&self, out: &mut Vec<u8>, len: usize) -> bool {
        if self.compression != Compression::None {
            return false;
        }
        frame::begin_frame(out, 4 * len);
        true
    }

    /// Writes values `at..at + x.len()` of a frame [`begin`](Self::begin) started.
    pub fn put(out: &mut [u8], at: usize, x: &[f32]) {
        let body = &mut out[frame::HEADER_LEN + 4 * at..frame::HEADER_LEN + 4 * (at + x.len())];
        for (dst, v) in body.chunks_exact_mut(4).zip(x) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Closes a frame of `len` values whose every block was [`put`](Self::put).
    pub fn finish(
        &self,
        out: &mut Vec<u8>,
        len: usize,
        iteration: u64,
        sender: u32,
    ) -> Result<Encoded, CodecError> {
        Ok(Encoded {
            header: frame::finish_frame(
                out,
                header(frame::value_count(len)?, iteration, sender),
                self.compression,
            )?,
        })
    }

    /// Reads a frame into `out`.
    pub fn decode(&self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError> {
        let frame = frame::open_frame(
            bytes,
            &Expect {
                kind: Kind::F32,
                bits: 32,
                len: out.len(),
                modulus: None,
                bucket: None,
            },
        )?;
        for (o, src) in out.iter_mut().zip(frame.body.chunks_exact(4)) {
            *o = f32::from_le_bytes([src[0], src[1], src[2], src[3]]);
        }
        Ok(frame.header)
    }
}

impl crate::Codec for FullPrecision {
    fn frame_len(&self, len: usize) -> usize {
        FullPrecision::frame_len(self, len)
    }

    fn encode_frame(
        &self,
        x: &[f32],
        iteration: u64,
        sender: u32,
        own: Option<&mut [f32]>,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError> {
        frame::encode_preamble(x, own.as_deref(), "own output buffer")?;
        self.encode(x, iteration, sender, out)?;
        if let Some(own) = own {
            own.copy_from_slice(x);
        }
        Ok(())
    }

    fn decode_frame(&self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError> {
        self.decode(bytes, out)
    }
}

/// Its codec in [`crate::CODECS`]: f32 values, not entropy-coded.
pub(crate) fn codecs(_: Option<&FrameHeader>) -> Vec<Box<dyn crate::Codec>> {
    vec![Box::new(FullPrecision::default())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_is_bit_exact() {
        let x = [1.5f32, -0.0, f32::MIN_POSITIVE, 3.0e38, f32::NAN];
        let mut f = Vec::new();
        let e = FullPrecision::default().encode(&x, 1, 2, &mut f).unwrap();
        assert_eq!(e.header.frame_len(), f.len());
        assert_eq!(f.len(), frame::HEADER_LEN + 20);
        let mut out = [0.0f32; 5];
        FullPrecision::default().decode(&f, &mut out).unwrap();
        for (a, b) in x.iter().zip(&out) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    /// A frame written a block at a time is the frame `encode` writes, and
    /// its body is the values; a compressed frame is not written in blocks.
    #[test]
    fn a_frame_in_blocks_is_the_whole_frame() {
        let x: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.3).sin()).collect();
        let full = FullPrecision::default();
        let mut whole = Vec::new();
        full.encode(&x, 7, 3, &mut whole).unwrap();
        let mut blocks = vec![0xAA; 5];
        assert!(full.begin(&mut blocks, x.len()));
        for at in (0..x.len()).step_by(128) {
            FullPrecision::put(&mut blocks, at, &x[at..(at + 128).min(x.len())]);
        }
        full.finish(&mut blocks, x.len(), 7, 3).unwrap();
        assert_eq!(whole, blocks);
        let body = full.body(&whole, x.len()).unwrap().unwrap();
        assert_eq!(&body[4..8], &x[1].to_le_bytes());
        assert!(full.body(&whole, x.len() + 1).is_err(), "length checked");
        let zstd = FullPrecision {
            compression: Compression::zstd(3).unwrap(),
        };
        assert!(!zstd.begin(&mut blocks, x.len()));
    }
}
