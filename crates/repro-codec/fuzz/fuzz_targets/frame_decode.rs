//! Fuzzes frame decoding: no input may panic or read out of bounds, and a
//! frame that decodes must re-encode to the same values.
//!
//!     cargo +nightly fuzz run frame_decode -- -max_total_time=60

#![no_main]

use libfuzzer_sys::fuzz_target;
use repro_codec::frame::{FrameHeader, read_frame};
use repro_codec::{Compression, FullPrecision, MoniquaCodec, MoniquaConfig, StochasticCodec, StochasticConfig};

fuzz_target!(|data: &[u8]| {
    let _ = read_frame(data, 1 << 20);
    let len = FrameHeader::parse(data, 1 << 16).map(|h| h.len as usize).unwrap_or(0);
    let local = vec![0.25f32; len];
    let mut out = vec![0f32; len];
    for bits in 1..=8 {
        let cfg = MoniquaConfig {
            bits,
            rounding: repro_codec::Rounding::Nearest,
            ..MoniquaConfig::default()
        };
        let _ = MoniquaCodec::new(&cfg, 0).unwrap().decode(data, &local, &mut out);
        for bucket in [1, 7, 1024] {
            let cfg = StochasticConfig { bits, bucket, compression: Compression::None };
            let _ = StochasticCodec::new(&cfg, 0).unwrap().decode(data, &mut out);
        }
    }
    if FullPrecision::default().decode(data, &mut out).is_ok() {
        let mut again = Vec::new();
        FullPrecision::default().encode(&out, 0, 0, &mut again).unwrap();
        let mut back = vec![0f32; len];
        FullPrecision::default().decode(&again, &mut back).unwrap();
        assert!(out.iter().zip(&back).all(|(a, b)| a.to_bits() == b.to_bits()));
    }
});
