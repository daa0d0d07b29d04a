//! The one interface the baselines' compressors share: what the
//! algorithms' `Compressor` calls, and what the crate's `CODECS` lists
//! for the fuzz target and the property tests. Moniqua's codec is not one:
//! it decodes against the receiver's own model.

use crate::{CodecError, FrameHeader};

/// A compressor's codec: values to a frame and back.
pub trait Codec: Send + Sync + std::fmt::Debug {
    /// Bytes of one frame for `len` values, before entropy coding.
    fn frame_len(&self, len: usize) -> usize;

    /// Writes `x` into a frame in `out`; `own`, if given, receives the
    /// values the receivers will decode. Randomness comes from
    /// `(seed, sender, iteration)` alone.
    fn encode_frame(
        &self,
        x: &[f32],
        iteration: u64,
        sender: u32,
        own: Option<&mut [f32]>,
        out: &mut Vec<u8>,
    ) -> Result<(), CodecError>;

    /// Reads a frame into `out`, checking it first; never panics.
    fn decode_frame(&self, bytes: &[u8], out: &mut [f32]) -> Result<FrameHeader, CodecError>;
}

/// Implements [`Codec`] for a codec whose inherent `frame_len`, `encode`
/// (with `own`) and `decode` have the trait's shape.
macro_rules! impl_codec {
    ($codec:ty) => {
        impl $crate::Codec for $codec {
            fn frame_len(&self, len: usize) -> usize {
                <$codec>::frame_len(self, len)
            }

            fn encode_frame(
                &self,
                x: &[f32],
                iteration: u64,
                sender: u32,
                own: Option<&mut [f32]>,
                out: &mut Vec<u8>,
            ) -> Result<(), $crate::CodecError> {
                self.encode(x, iteration, sender, own, out).map(drop)
            }

            fn decode_frame(
                &self,
                bytes: &[u8],
                out: &mut [f32],
            ) -> Result<$crate::FrameHeader, $crate::CodecError> {
                self.decode(bytes, out)
            }
        }
    };
}
pub(crate) use impl_codec;
