//! Full precision pass-through: the model as little-endian f32.

use crate::CodecError;
use crate::frame::{self, Compression, Expect, FrameHeader, Kind};
use crate::moniqua::Encoded;

/// The full-precision "codec" (D-PSGD, AllReduce).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FullPrecision {
    pub compression: Compression,
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
        let header = FrameHeader {
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
        };
        Ok(Encoded {
            header: frame::finish_frame(out, header, self.compression)?,
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
}
