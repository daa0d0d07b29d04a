//! The body of the `frame_decode` fuzz target (`fuzz/`), here so that the
//! normal test suite replays the fuzz corpus through exactly the code the
//! fuzzer runs, and a change to the codec's API cannot leave the target
//! behind unbuilt.

use crate::frame::{FrameHeader, read_frame};
use crate::{CODECS, DecodeTarget, FullPrecision, MoniquaCodec, MoniquaConfig, Rounding};

/// Decodes `data` as Moniqua's frame at every bit width and with every
/// codec [`CODECS`] lists: no input may
/// panic or read out of bounds, and a frame that decodes as full precision
/// must re-encode to the same values.
pub fn frame_decode(data: &[u8]) {
    let _ = read_frame(data, 1 << 20);
    let header = FrameHeader::parse(data, 1 << 16).ok();
    let len = header.map_or(0, |h| h.len as usize);
    let local = vec![0.25f32; len];
    let mut out = vec![0f32; len];
    for bits in 1..=8 {
        decode_moniqua(data, bits, &local, &mut out);
    }
    // every other kind's codecs: a new kind is fuzzed once it is registered
    for (_, codecs) in CODECS {
        for codec in codecs(header.as_ref()) {
            let _ = codec.decode_frame(data, &mut out);
        }
    }
    full_precision_round_trip(data, &mut out);
}

fn decode_moniqua(data: &[u8], bits: u32, local: &[f32], out: &mut [f32]) {
    let cfg = MoniquaConfig {
        bits,
        rounding: Rounding::Nearest,
        ..MoniquaConfig::default()
    };
    let Ok(codec) = MoniquaCodec::new(&cfg, 0) else {
        return;
    };
    let _ = codec.decode(data, local, DecodeTarget::Out(out));
    let mut acc = vec![0f32; out.len()];
    let _ = codec.decode(
        data,
        local,
        DecodeTarget::Add {
            acc: &mut acc,
            weight: 0.5,
        },
    );
}

fn full_precision_round_trip(data: &[u8], out: &mut [f32]) {
    if FullPrecision::default().decode(data, out).is_err() {
        return;
    }
    let mut again = Vec::new();
    FullPrecision::default()
        .encode(out, 0, 0, &mut again)
        .expect("a decoded frame re-encodes");
    let mut back = vec![0f32; out.len()];
    FullPrecision::default()
        .decode(&again, &mut back)
        .expect("a re-encoded frame decodes");
    assert!(
        out.iter()
            .zip(&back)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
}

#[cfg(test)]
mod tests {
    /// Every input in the committed fuzz corpus (`fuzz/corpus/frame_decode`:
    /// the seeds of `fuzz/make_seeds.py` and what fuzzing found) goes
    /// through the fuzz target's body without a panic.
    #[test]
    fn the_fuzz_corpus_replays_without_a_panic() {
        // the crate's directory as cargo says it when running the test (a
        // binary cargo reuses from another checkout of the same source
        // would carry that checkout's compile-time path)
        let root = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
        let dir = std::path::Path::new(&root).join("fuzz/corpus/frame_decode");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            super::frame_decode(&data);
            // and every prefix of it: a frame cut short anywhere
            for cut in [
                0,
                1,
                4,
                43,
                44,
                45,
                data.len() / 2,
                data.len().saturating_sub(1),
            ] {
                super::frame_decode(&data[..cut.min(data.len())]);
            }
            n += 1;
        }
        assert!(n >= 5, "only {n} inputs in {}", dir.display());
    }
}
