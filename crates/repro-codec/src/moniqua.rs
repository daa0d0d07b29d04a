//! Moniqua's modulo quantization (Lu & De Sa 2020, Algorithm 1 and Lemma 2).
//!
//! With `L = 2^b` points `k / L` on the unit circle and modulus `B`, the sender
//! computes the *un-modded integer code* `C = floor(x L / B + u)` (stochastic
//! rounding, dither `u`) or `C = floor(x L / B + 1/2)` (nearest) and sends its
//! low `b` bits, i.e. `C mod L`. This is exactly `Q((x / B) mod 1)` of the
//! paper, scaled by `L`: the paper's `mod 1` only removes whole turns of the
//! circle, which the low bits drop anyway.
//!
//! The receiver, holding its own model `y`, recovers the integer `Ĉ` congruent
//! to the received code mod `L` that is nearest to `y L / B`, and
//! `x̂ = Ĉ B / L`, which equals the paper's `(q B - y) mod B + y`. When
//! `|x - y| < theta` then `Ĉ = C`, so `|x̂ - x| <= delta B` (Lemma 2) and the
//! hash of `Ĉ` equals the sender's hash of `C`. The sender's *local biased
//! term* `q B - (x mod B) + x` is `C B / L`.

use std::fmt;

use crate::dither::{Dither, SHARED_STREAM};
use crate::frame::{self, Compression, Expect, FrameHeader, Kind, check_len};
use crate::kernels::{self, MixTarget, ModParams};
use crate::modulo::{BTheta, circle_delta, modulus_for};
use crate::pack::packed_len;
use crate::simd::Prefetch;
use crate::{CodecError, ConfigError, Rounding};

/// What a user configures for Moniqua (keys of `codec.*` in a manifest).
#[derive(Debug, Clone, PartialEq)]
pub struct MoniquaConfig {
    /// Bits per coordinate, 1..=8.
    pub bits: u32,
    /// Rounding onto the circle's `2^bits` points.
    pub rounding: Rounding,
    /// The a priori consensus bound theta (the paper uses 2.0).
    pub theta: f64,
    /// An explicit delta (error bound on the unit circle); derived from
    /// `bits` and `rounding` when `None`. It may be larger, never smaller,
    /// than the derived one.
    pub delta: Option<f64>,
    /// An explicit modulus `B`; overrides `theta` and `delta`.
    pub modulus: Option<f64>,
    /// The delta `B_theta` is computed with when it comes from theta (see
    /// [`BTheta`]); the codec's own `delta` stays the rounding's bound.
    pub b_theta: BTheta,
    /// Use the same dither on all workers (Section 6); otherwise each sender
    /// draws its own.
    pub shared_randomness: bool,
    /// Send a hash of the un-modded codes so receivers can verify recovery.
    pub hash: bool,
    /// What a receiving algorithm does with a recovery that fails the hash:
    /// leave the neighbour out (true), or count it and use it anyway
    /// (false: measures failures without changing the algorithm). The codec
    /// itself only verifies.
    pub leave_out_mismatched: bool,
    /// Entropy coding of the payload.
    pub compression: Compression,
    /// How a receiving algorithm updates: in one pass, the codec's
    /// [`MoniquaCodec::mix`] (true); or in the baselines' passes, each
    /// neighbour decoded into a buffer and then added (false), to compare
    /// algorithms on equal kernels. The codec itself does not read it.
    pub fused: bool,
}

impl Default for MoniquaConfig {
    fn default() -> Self {
        Self {
            bits: 8,
            rounding: Rounding::Stochastic,
            theta: 2.0,
            delta: None,
            modulus: None,
            b_theta: BTheta::Lemma2,
            shared_randomness: true,
            hash: true,
            leave_out_mismatched: true,
            compression: Compression::None,
            fused: true,
        }
    }
}

/// The outcome of checking a recovered model against the sender's hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verification {
    /// The frame carried no hash.
    Unchecked,
    /// The recovered integer codes hash to the sender's value.
    Verified,
    /// They do not: some coordinate was farther than `B/2` from the receiver's
    /// model, i.e. theta is too small. The recovered model is wrong.
    Mismatch,
}

/// Counts of verification outcomes, for logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifyStats {
    pub verified: u64,
    pub mismatched: u64,
    pub unchecked: u64,
}

impl VerifyStats {
    /// Adds one outcome.
    pub fn record(&mut self, v: Verification) {
        match v {
            Verification::Unchecked => self.unchecked += 1,
            Verification::Verified => self.verified += 1,
            Verification::Mismatch => self.mismatched += 1,
        }
    }
}

/// What an encode produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Encoded {
    /// The frame's header (its `frame_len()` is the bytes on the wire).
    pub header: FrameHeader,
}

/// What a decode produced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decoded {
    pub header: FrameHeader,
    pub verification: Verification,
}

/// Where [`MoniquaCodec::decode`] puts the recovered model `x^_j`.
#[derive(Debug)]
pub enum DecodeTarget<'a> {
    /// Written into this buffer.
    Out(&'a mut [f32]),
    /// `weight * x^_j` added to `acc`: one pass instead of a decode and an
    /// axpy, and no buffer for the recovered model. Bit-identical to
    /// decoding, then `acc[i] += weight * out[i]`.
    Add { acc: &'a mut [f32], weight: f32 },
}

/// A validated Moniqua codec for one run.
#[derive(Clone, PartialEq)]
pub struct MoniquaCodec {
    bits: u32,
    levels: i32,
    rounding: Rounding,
    delta: f64,
    modulus: f32,
    /// The consensus bound under which recovery is exact: `B (1 - 2 delta) / 2`.
    theta: f64,
    scale: f32,
    step: f32,
    seed: u64,
    shared_randomness: bool,
    hash: bool,
    leave_out_mismatched: bool,
    compression: Compression,
}

impl fmt::Debug for MoniquaCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MoniquaCodec")
            .field("bits", &self.bits)
            .field("rounding", &self.rounding)
            .field("delta", &self.delta)
            .field("modulus", &self.modulus)
            .field("theta", &self.theta)
            .field("shared_randomness", &self.shared_randomness)
            .field("hash", &self.hash)
            .field("compression", &self.compression)
            .finish()
    }
}

impl MoniquaCodec {
    /// Whether a receiver leaves a neighbour whose recovery failed the hash
    /// out (`MoniquaConfig::leave_out_mismatched`).
    pub fn leaves_out_mismatched(&self) -> bool {
        self.leave_out_mismatched
    }

    /// Validates `cfg` and derives `B_theta`. `seed` keys the run's dither.
    pub fn new(cfg: &MoniquaConfig, seed: u64) -> Result<Self, ConfigError> {
        let derived = circle_delta(cfg.bits, cfg.rounding)?;
        let delta = match cfg.delta {
            Some(d) if d.is_nan() || d < derived => {
                return Err(ConfigError::DeltaBelowBound {
                    delta: d,
                    bound: derived,
                    bits: cfg.bits,
                    rounding: cfg.rounding,
                });
            }
            Some(d) => d,
            None => derived,
        };
        let (modulus, theta) = match cfg.modulus {
            Some(m) if !(m > 0.0 && m.is_finite()) => {
                return Err(ConfigError::InvalidModulus { modulus: m });
            }
            Some(m) => (m, (m * (1.0 - 2.0 * delta) / 2.0).max(0.0)),
            None => {
                if !(cfg.theta > 0.0 && cfg.theta.is_finite()) {
                    return Err(ConfigError::InvalidTheta { theta: cfg.theta });
                }
                let m = modulus_for(cfg.theta, cfg.b_theta.delta(cfg.bits, delta)).ok_or(
                    ConfigError::DeltaTooLarge {
                        delta,
                        bits: cfg.bits,
                        rounding: cfg.rounding,
                    },
                )?;
                (m, cfg.theta)
            }
        };
        let modulus = modulus as f32;
        if !(modulus > 0.0 && modulus.is_finite()) {
            return Err(ConfigError::InvalidModulus {
                modulus: f64::from(modulus),
            });
        }
        let levels = 1i32 << cfg.bits;
        Ok(Self {
            bits: cfg.bits,
            levels,
            rounding: cfg.rounding,
            delta,
            modulus,
            theta,
            scale: levels as f32 / modulus,
            step: modulus / levels as f32,
            seed,
            shared_randomness: cfg.shared_randomness,
            hash: cfg.hash,
            leave_out_mismatched: cfg.leave_out_mismatched,
            compression: cfg.compression,
        })
    }

    /// Bits per coordinate.
    pub fn bits(&self) -> u32 {
        self.bits
    }
    /// The modulus `B_theta` (as sent in frames).
    pub fn modulus(&self) -> f32 {
        self.modulus
    }
    /// The error bound delta on the unit circle.
    pub fn delta(&self) -> f64 {
        self.delta
    }
    /// The consensus bound under which recovery is exact.
    pub fn theta(&self) -> f64 {
        self.theta
    }
    /// The recovery error bound `delta * B` of Lemma 2.
    pub fn error_bound(&self) -> f64 {
        self.delta * f64::from(self.modulus)
    }
    /// The grid spacing `B / 2^bits` in model units.
    pub fn step(&self) -> f32 {
        self.step
    }

    /// Bytes of one frame for `len` values, before entropy coding.
    pub fn frame_len(&self, len: usize) -> usize {
        frame::HEADER_LEN + packed_len(len, self.bits)
    }

    fn params(&self, dither: Dither, hash: bool) -> ModParams<'static> {
        ModParams {
            table: &[],
            bits: self.bits,
            levels: self.levels,
            scale: self.scale,
            step: self.step,
            rounding: self.rounding,
            dither,
            hash,
        }
    }

    /// The largest `|x|` this codec encodes exactly.
    pub fn max_abs(&self) -> f32 {
        kernels::MODULO_LIMIT / self.scale
    }

    /// Why an encode rejected `x` (the slow path).
    fn rejected_error(&self, x: &[f32]) -> CodecError {
        if x.iter().any(|v| !v.is_finite()) {
            return frame::non_finite_error(x);
        }
        let limit = self.max_abs();
        let count = x
            .iter()
            .filter(|v| !kernels::in_range(*v * self.scale))
            .count();
        let first = x
            .iter()
            .position(|v| !kernels::in_range(*v * self.scale))
            .unwrap_or(0);
        CodecError::OutOfRange {
            count,
            first,
            value: x.get(first).copied().unwrap_or(0.0),
            limit,
        }
    }

    fn dither(&self, iteration: u64, sender: u32) -> Dither {
        let stream = if self.shared_randomness {
            SHARED_STREAM
        } else {
            1 + u64::from(sender)
        };
        Dither::new(self.seed, stream, iteration)
    }

    /// Encodes `x` (worker `sender`'s model at `iteration`) into a frame in
    /// `out`, replacing its contents. If `own` is given it receives the local
    /// biased term `q B - (x mod B) + x` of Algorithm 1, line 4.
    ///
    /// Fails on non-finite input (a diverged model) and on more than 2^32 - 1
    /// values.
    pub fn encode(
        &self,
        x: &[f32],
        iteration: u64,
        sender: u32,
        own: Option<&mut [f32]>,
        out: &mut Vec<u8>,
    ) -> Result<Encoded, CodecError> {
        let len = frame::encode_preamble(x, own.as_deref(), "local biased term buffer")?;
        let body_start = frame::begin_frame(out, packed_len(x.len(), self.bits));
        let params = self.params(self.dither(iteration, sender), self.hash);
        let k = kernels::moniqua_encode(&params, x, own, &mut out[body_start..]);
        if k.rejected > 0 {
            return Err(self.rejected_error(x));
        }
        self.finish_frame(out, len, iteration, sender, k.hash)
    }

    /// Writes the header of a frame whose body `out` holds (compressing it
    /// first if configured).
    fn finish_frame(
        &self,
        out: &mut Vec<u8>,
        len: u32,
        iteration: u64,
        sender: u32,
        hash: Option<u64>,
    ) -> Result<Encoded, CodecError> {
        let header = FrameHeader {
            kind: Kind::Moniqua,
            bits: self.bits as u8,
            len,
            bucket: 0,
            iteration,
            sender,
            modulus: self.modulus,
            hash,
            compressed: false,
            body_len: 0,
        };
        let header = frame::finish_frame(out, header, self.compression)?;
        Ok(Encoded { header })
    }

    /// Decodes a neighbour's frame against the local model `local`
    /// (Algorithm 1, line 5) into `target`, and checks the sender's hash if
    /// present.
    pub fn decode(
        &self,
        bytes: &[u8],
        local: &[f32],
        target: DecodeTarget<'_>,
    ) -> Result<Decoded, CodecError> {
        let (out, accumulate) = match target {
            DecodeTarget::Out(out) => (out, None),
            DecodeTarget::Add { acc, weight } => (acc, Some(weight)),
        };
        check_len("output buffer", local.len(), out.len())?;
        let frame = frame::open_frame(bytes, &self.expect(local.len()))?;
        let header = frame.header;
        let params = self.params(Dither::new(0, 0, 0), header.hash.is_some());
        let recovered = kernels::moniqua_decode(&params, &frame.body, local, out, accumulate);
        Ok(Decoded {
            header,
            verification: verify(header.hash, recovered),
        })
    }

    /// Algorithm 1's update of worker `sender` at `iteration` in one pass:
    /// `x + (sum_j w_j (x^_j - x^_i) - delta)` over the neighbours
    /// `(frame, w_j)`, where `x^_j` is recovered from the frame against `x`
    /// and `x^_i` is the local biased term of `x` (as
    /// the encoder's local term), written where `target`
    /// says. Returns each frame's verification, in order. With a mismatch
    /// (only with [`MixTarget::Out`]), `out` includes the wrong model: call
    /// again without that neighbour. [`MixTarget::InPlace`] refuses a frame
    /// with a hash ([`CodecError::HashInPlace`]) before `x` is touched.
    /// `prefetch` names memory to bring into cache as it goes (a hint:
    /// [`Prefetch::NONE`] gives the same bits).
    ///
    /// Bit for bit what `local_term` with weight `-sum_j w_j` (summed in
    /// order), then [`decode`](Self::decode) adding each
    /// frame in order, then `x + (acc - delta)` compute, but the accumulator
    /// and the local term never leave registers: one read of `x`, `delta`
    /// and the frames, one write of the result.
    pub fn mix(
        &self,
        target: MixTarget<'_>,
        iteration: u64,
        sender: u32,
        neighbours: &[(&[u8], f32)],
        delta: &[f32],
        prefetch: Prefetch,
    ) -> Result<Vec<Verification>, CodecError> {
        let len = match &target {
            MixTarget::Out { x, out } => {
                check_len("output buffer", x.len(), out.len())?;
                x.len()
            }
            MixTarget::InPlace(x) => x.len(),
        };
        // the inputs a rejection names are still there afterwards: `x` for
        // `Out`, and in place NaN stays NaN or at least as far out of range
        let (verdicts, rejected, x) = match target {
            MixTarget::Out { x, out } => {
                let target = MixTarget::Out { x, out };
                let (v, r) =
                    self.mix_into(target, len, iteration, sender, neighbours, delta, prefetch)?;
                (v, r, x)
            }
            MixTarget::InPlace(x) => {
                let (v, r) = self.mix_into(
                    MixTarget::InPlace(&mut *x),
                    len,
                    iteration,
                    sender,
                    neighbours,
                    delta,
                    prefetch,
                )?;
                (v, r, &*x)
            }
        };
        if rejected > 0 {
            return Err(self.rejected_error(x));
        }
        Ok(verdicts)
    }

    #[allow(clippy::too_many_arguments)]
    fn mix_into(
        &self,
        target: MixTarget<'_>,
        len: usize,
        iteration: u64,
        sender: u32,
        neighbours: &[(&[u8], f32)],
        delta: &[f32],
        next: Prefetch,
    ) -> Result<(Vec<Verification>, u32), CodecError> {
        check_len("local step", len, delta.len())?;
        let expect = self.expect(len);
        let frames = neighbours
            .iter()
            .map(|&(bytes, _)| frame::open_frame(bytes, &expect))
            .collect::<Result<Vec<_>, _>>()?;
        let hash = frames.iter().any(|f| f.header.hash.is_some());
        if hash && matches!(target, MixTarget::InPlace(_)) {
            return Err(CodecError::HashInPlace);
        }
        let bodies: Vec<&[u8]> = frames.iter().map(|f| &*f.body).collect();
        let (weights, all) = weights(neighbours);
        let params = self.params(self.dither(iteration, sender), hash);
        let mut hashes = vec![kernels::CodeHash::new(); frames.len()];
        let mut nb = kernels::Neighbours {
            bodies: &bodies,
            weights: &weights,
            hashes: &mut hashes,
            next,
            encode: None,
        };
        let rejected = kernels::moniqua_mix(&params, target, -all, &mut nb, delta);
        let verdicts = frames
            .iter()
            .zip(&hashes)
            .map(|(f, h)| verify(f.header.hash, params.hash.then(|| h.finish())))
            .collect();
        Ok((verdicts, rejected))
    }

    /// What a Moniqua frame of `len` values from a peer of this codec has.
    fn expect(&self, len: usize) -> Expect {
        Expect {
            kind: Kind::Moniqua,
            bits: self.bits as u8,
            len,
            modulus: Some(self.modulus),
            bucket: None,
        }
    }
}

/// The neighbours' weights `w_j`, and their sum in order (the local biased
/// term's weight is its negative).
fn weights(neighbours: &[(&[u8], f32)]) -> (Vec<f32>, f32) {
    let weights: Vec<f32> = neighbours.iter().map(|&(_, w)| w).collect();
    let all = weights.iter().fold(0.0f32, |t, &w| t + w);
    (weights, all)
}

/// `t`'s values if it is the dither of coordinates `at..at + m` of
/// `dither`'s iteration, else nothing (hash instead).
fn table_for(t: Option<&DitherTable>, dither: Dither, at: usize, m: usize) -> &[f32] {
    match t {
        Some(t) if t.dither == Some(dither) && t.at == at && t.values.len() >= m => &t.values,
        _ => &[],
    }
}

/// One worker's iteration in progress, a block at a time (see
/// [`BlockUpdate::begin`]).
#[derive(Debug)]
pub struct BlockUpdate {
    codec: MoniquaCodec,
    iteration: u64,
    sender: u32,
    /// The dither of `iteration` (the mix) and `iteration + 1` (the encode).
    dithers: [Dither; 2],
    len: usize,
    weights: Vec<f32>,
    all: f32,
    rejected: u32,
    rejected_next: u32,
    next: bool,
}

impl BlockUpdate {
    /// Starts Algorithm 1's iteration of worker `sender` at `iteration` a
    /// block of coordinates at a time (a simulator interleaves its workers
    /// block by block, so one dither table per block serves them all; see
    /// [`block`](Self::block)), and with `next` the frame of
    /// `iteration + 1`. `None`, with nothing changed, where the frames need
    /// [`mix`](MoniquaCodec::mix) instead: a hash to verify before any block may
    /// stand, or compressed bodies.
    pub fn begin(
        codec: &MoniquaCodec,
        len: usize,
        iteration: u64,
        sender: u32,
        neighbours: &[(&[u8], f32)],
        next: Option<&mut Vec<u8>>,
    ) -> Result<Option<Self>, CodecError> {
        frame::value_count(len)?;
        let expect = codec.expect(len);
        let mut plain = !codec.hash;
        for &(bytes, _) in neighbours {
            let frame = frame::open_frame(bytes, &expect)?;
            plain &= frame.header.hash.is_none() && !frame.header.compressed;
        }
        if !plain {
            return Ok(None);
        }
        let (weights, all) = weights(neighbours);
        let next = next.map(|out| frame::begin_frame(out, packed_len(len, codec.bits)));
        Ok(Some(BlockUpdate {
            codec: codec.clone(),
            iteration,
            sender,
            dithers: [
                codec.dither(iteration, sender),
                codec.dither(iteration + 1, sender),
            ],
            len,
            weights,
            all,
            rejected: 0,
            rejected_next: 0,
            next: next.is_some(),
        }))
    }

    /// One block of [`begin`](Self::begin)'s iteration:
    /// updates `x`, the model's coordinates `at..at + x.len()`, in place as
    /// [`mix`](MoniquaCodec::mix) in place updates them given their local
    /// step `delta`, then encodes the updated block into `next` as
    /// [`encode`](MoniquaCodec::encode) of the updated model at `iteration + 1`
    /// would. `frames` are the neighbours' frames `begin` opened, in
    /// the same order; `at` a multiple of 64, blocks in any order. Dither tables
    /// ([`DitherTable::fill`]) for this block at `iteration`
    /// (`mix`) and `iteration + 1` (`encode`) are read instead of hashing,
    /// where they are the right ones (else ignored): the same values.
    #[allow(clippy::too_many_arguments)]
    pub fn block<'f>(
        &mut self,
        x: &mut [f32],
        at: usize,
        frames: impl ExactSizeIterator<Item = &'f [u8]>,
        delta: &[f32],
        tables: [Option<&DitherTable>; 2],
        next: Option<&mut Vec<u8>>,
        prefetch: Prefetch,
    ) -> Result<(), CodecError> {
        let m = x.len();
        if !at.is_multiple_of(kernels::CHUNK) || at + m > self.len {
            return Err(CodecError::Block { at, len: m });
        }
        check_len("local step", m, delta.len())?;
        check_len("neighbour frames", self.weights.len(), frames.len())?;
        let frame_len = self.codec.frame_len(self.len);
        // a block's codes start on a byte: `at` is a multiple of 64
        let (byte, end) = (
            at / 8 * self.codec.bits as usize,
            packed_len(at + m, self.codec.bits),
        );
        // the bodies from this block on, without allocating for a few
        let count = frames.len();
        let (mut few, mut many): ([&[u8]; 8], Vec<&[u8]>) = ([&[]; 8], Vec::new());
        let mut seen = 0;
        for bytes in frames.take(count) {
            check_len("neighbour frame", frame_len, bytes.len())?;
            let body = &bytes[frame::HEADER_LEN + byte..];
            if count <= few.len() {
                few[seen] = body;
            } else {
                many.push(body);
            }
            seen += 1;
        }
        check_len("neighbour frames", count, seen)?;
        let bodies: &[&[u8]] = if count <= few.len() {
            &few[..count]
        } else {
            &many
        };
        let chunks = (at / kernels::CHUNK) as u32;
        // the block's view of iteration `k + i`'s dither: skipped to the
        // block, read from the table when it is the right one
        let params = |i: usize| ModParams {
            table: table_for(tables[i], self.dithers[i], at, m),
            ..self
                .codec
                .params(self.dithers[i].skip_chunks(chunks), false)
        };
        let p = params(0);
        // the next frame's codes of this block, encoded by the mix from
        // the updated values while they are in registers
        let encode = match next.filter(|_| self.next) {
            Some(out) => {
                check_len("next frame", frame_len, out.len())?;
                Some(kernels::EncodeNext {
                    p: params(1),
                    body: &mut out[frame::HEADER_LEN + byte..frame::HEADER_LEN + end],
                    bad: [0; kernels::CHUNK],
                })
            }
            None => None,
        };
        let mut nb = kernels::Neighbours {
            bodies,
            weights: &self.weights,
            // no hash
            hashes: &mut [],
            next: prefetch,
            encode,
        };
        self.rejected += kernels::moniqua_mix(&p, MixTarget::InPlace(x), -self.all, &mut nb, delta);
        if let Some(e) = &nb.encode {
            self.rejected_next += e.rejected();
        }
        Ok(())
    }

    /// Ends [`begin`](Self::begin)'s iteration once every
    /// block is done: an input the mix rejected is an error (after the
    /// update, as [`mix`](MoniquaCodec::mix) in place); the next frame, if
    /// asked for, is its header or why the updated model could not be
    /// encoded (the update stands). `x` is the whole updated model.
    pub fn finish(
        self,
        x: &[f32],
        next: Option<&mut Vec<u8>>,
    ) -> Result<Option<Result<Encoded, CodecError>>, CodecError> {
        check_len("model", self.len, x.len())?;
        if self.rejected > 0 {
            return Err(self.codec.rejected_error(x));
        }
        Ok(next.filter(|_| self.next).map(|out| {
            if self.rejected_next > 0 {
                return Err(self.codec.rejected_error(x));
            }
            self.codec
                .finish_frame(out, self.len as u32, self.iteration + 1, self.sender, None)
        }))
    }
}

/// The dither of one block at one iteration, computed once for many workers
/// ([`DitherTable::fill`]).
#[derive(Debug, Clone, Default)]
pub struct DitherTable {
    dither: Option<Dither>,
    at: usize,
    values: Vec<f32>,
}

impl DitherTable {
    /// The dither uniforms of coordinates `at..at + len` at `iteration`
    /// (what `codec`'s [`encode`](MoniquaCodec::encode) of worker `sender`
    /// draws there), for callers that encode many models of one iteration
    /// block by block: with shared randomness (Section 6) one table serves
    /// every worker. Empty for nearest rounding, which draws nothing.
    pub fn fill(
        &mut self,
        codec: &MoniquaCodec,
        iteration: u64,
        sender: u32,
        at: usize,
        len: usize,
    ) {
        let dither = codec.dither(iteration, sender);
        self.dither = Some(dither);
        self.at = at;
        self.values.clear();
        if codec.rounding == Rounding::Stochastic {
            self.values.resize(len, 0.0);
            kernels::dither_fill(&dither, at as u32, &mut self.values);
        }
    }
}

/// A frame's verification from the hash it `sent` and the hash of the codes
/// the receiver `recovered`.
fn verify(sent: Option<u64>, recovered: Option<u64>) -> Verification {
    match (sent, recovered) {
        (Some(sent), Some(h)) if h == sent => Verification::Verified,
        (Some(_), _) => Verification::Mismatch,
        (None, _) => Verification::Unchecked,
    }
}

#[cfg(test)]
impl MoniquaCodec {
    /// The tests' oracle for the local term fused into [`mix`](Self::mix):
    /// writes into `own` `weight` times the local biased term that
    /// [`encode`](Self::encode) with the same `x`, `iteration` and `sender`
    /// writes (with weight 1, the same bits), without building the frame: a
    /// worker that sent its frame earlier recomputes the term when it needs
    /// it instead of keeping a second model-sized buffer alive between
    /// sending and receiving. Fails where `encode` would.
    fn local_term(
        &self,
        x: &[f32],
        iteration: u64,
        sender: u32,
        weight: f32,
        own: &mut [f32],
    ) -> Result<(), CodecError> {
        check_len("local biased term buffer", x.len(), own.len())?;
        let params = self.params(self.dither(iteration, sender), false);
        if kernels::moniqua_local_term(&params, x, weight, own) > 0 {
            return Err(self.rejected_error(x));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
