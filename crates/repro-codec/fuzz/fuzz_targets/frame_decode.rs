//! Fuzzes frame decoding: no input may panic or read out of bounds, and a
//! frame that decodes must re-encode to the same values. The body is
//! `repro_codec::fuzzing::frame_decode`, which the codec's tests also run
//! over the committed corpus.
//!
//!     cargo +nightly fuzz run frame_decode -- -max_total_time=60

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| repro_codec::fuzzing::frame_decode(data));
