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
mod tests {
    use super::*;
    use crate::centred_mod;

    fn codec(bits: u32, rounding: Rounding, theta: f64) -> MoniquaCodec {
        let cfg = MoniquaConfig {
            bits,
            rounding,
            theta,
            ..MoniquaConfig::default()
        };
        MoniquaCodec::new(&cfg, 11).unwrap()
    }

    #[test]
    fn modulus_from_theta_and_bits() {
        // 1-bit nearest: delta = 1/4, B = 2 theta / (1 - 1/2) = 4 theta.
        assert_eq!(codec(1, Rounding::Nearest, 2.0).modulus(), 8.0);
        // 2-bit stochastic: delta = 1/4 as well.
        assert_eq!(codec(2, Rounding::Stochastic, 2.0).modulus(), 8.0);
        // 8-bit stochastic: delta = 1/256.
        let c = codec(8, Rounding::Stochastic, 2.0);
        assert!((f64::from(c.modulus()) - 4.0 / (1.0 - 2.0 / 256.0)).abs() < 1e-6);
        // 1-bit stochastic under the other readings of B_theta: the modulus
        // follows theta, the codec's delta stays the rounding's bound
        for (reading, modulus) in [(BTheta::HalfStep, 8.0), (BTheta::Lemma1, 4.0)] {
            let cfg = MoniquaConfig {
                bits: 1,
                theta: 2.0,
                b_theta: reading,
                ..MoniquaConfig::default()
            };
            let c = MoniquaCodec::new(&cfg, 0).unwrap();
            assert_eq!((c.modulus(), c.delta(), c.theta()), (modulus, 0.5, 2.0));
        }
    }

    #[test]
    fn one_bit_stochastic_is_rejected_with_the_key_to_set() {
        let cfg = MoniquaConfig {
            bits: 1,
            ..MoniquaConfig::default()
        };
        let err = MoniquaCodec::new(&cfg, 0).unwrap_err();
        assert!(matches!(err, ConfigError::DeltaTooLarge { .. }));
        let msg = err.to_string();
        assert!(msg.contains("`rounding: nearest`"), "{msg}");
        assert!(msg.contains("`modulus`"), "{msg}");
        assert!(msg.contains("`b_theta: half-step`"), "{msg}");
        // ... and accepted with an explicit modulus.
        let cfg = MoniquaConfig {
            modulus: Some(1.0),
            ..cfg
        };
        let c = MoniquaCodec::new(&cfg, 0).unwrap();
        assert_eq!(c.theta(), 0.0, "no recovery guarantee at delta = 1/2");
    }

    #[test]
    fn explicit_delta_must_not_undercut_the_quantizer() {
        let cfg = MoniquaConfig {
            bits: 2,
            rounding: Rounding::Nearest,
            delta: Some(0.01),
            ..MoniquaConfig::default()
        };
        let err = MoniquaCodec::new(&cfg, 0).unwrap_err();
        assert!(err.to_string().contains("remove `delta`"), "{err}");
        let cfg = MoniquaConfig {
            delta: Some(0.25),
            ..cfg
        };
        // looser than the derived 1/8: B = 2 * 2 / 0.5
        assert_eq!(MoniquaCodec::new(&cfg, 0).unwrap().modulus(), 8.0);
        let cfg = MoniquaConfig {
            delta: Some(f64::NAN),
            ..cfg
        };
        assert!(MoniquaCodec::new(&cfg, 0).is_err());
    }

    #[test]
    fn bad_theta_and_modulus_are_rejected() {
        for theta in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let cfg = MoniquaConfig {
                theta,
                ..MoniquaConfig::default()
            };
            assert!(matches!(
                MoniquaCodec::new(&cfg, 0),
                Err(ConfigError::InvalidTheta { .. })
            ));
        }
        let cfg = MoniquaConfig {
            modulus: Some(-2.0),
            ..MoniquaConfig::default()
        };
        assert!(matches!(
            MoniquaCodec::new(&cfg, 0),
            Err(ConfigError::InvalidModulus { .. })
        ));
    }

    /// The paper's formulas evaluated in f64, coordinate by coordinate.
    fn paper_recover(q: f64, b: f64, y: f64) -> f64 {
        centred_mod(q * b - y, b) + y
    }

    #[test]
    fn decode_equals_paper_formula() {
        let c = codec(3, Rounding::Stochastic, 0.5);
        let b = f64::from(c.modulus());
        let x: Vec<f32> = (0..3001).map(|i| ((i as f32) * 0.7).sin() * 5.0).collect();
        let y: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, v)| v + ((i as f32) * 1.3).cos() * 0.45)
            .collect();
        let mut own = vec![0.0; x.len()];
        let mut frame = Vec::new();
        c.encode(&x, 4, 0, Some(&mut own), &mut frame).unwrap();
        let mut rec = vec![0.0; x.len()];
        let d = c.decode(&frame, &y, DecodeTarget::Out(&mut rec)).unwrap();
        assert_eq!(d.verification, Verification::Verified);
        // Reconstruct the sent codes and apply the paper's formulas.
        let parsed = frame::read_frame(&frame, u32::MAX).unwrap();
        let mut codes = vec![0u32; x.len()];
        crate::pack::unpack(&parsed.body, 3, &mut codes);
        for i in 0..x.len() {
            let q = f64::from(codes[i]) / 8.0;
            let want = paper_recover(q, b, f64::from(y[i]));
            assert!(
                (want - f64::from(rec[i])).abs() < 1e-4,
                "i={i}: {want} vs {}",
                rec[i]
            );
            // local biased term: q B - (x mod B) + x, with q the sender's own code
            let xi = f64::from(x[i]);
            let own_paper = q * b - centred_mod(xi, b) + xi;
            // equal up to whole turns of B that the receiver's mod removes
            let turns = (own_paper - f64::from(own[i])) / b;
            assert!((turns - turns.round()).abs() < 1e-4, "i={i}");
            assert!((f64::from(own[i]) - xi).abs() <= c.error_bound() + 1e-4);
            // and the receiver recovers exactly the sender's biased term
            assert_eq!(rec[i], own[i], "i={i}");
        }
    }

    #[test]
    fn local_term_is_the_encoders_without_a_frame() {
        for rounding in [Rounding::Stochastic, Rounding::Nearest] {
            let c = codec(2, rounding, 1.0);
            let x: Vec<f32> = (0..1001).map(|i| (i as f32 * 0.7).sin() * 9.0).collect();
            let mut f = Vec::new();
            let mut own = vec![0.0; x.len()];
            c.encode(&x, 11, 3, Some(&mut own), &mut f).unwrap();
            let mut again = vec![1.0; x.len()];
            c.local_term(&x, 11, 3, 1.0, &mut again).unwrap();
            assert_eq!(again, own, "{rounding}");
            c.local_term(&x, 11, 3, -0.75, &mut again).unwrap();
            let scaled: Vec<f32> = own.iter().map(|v| -0.75 * v).collect();
            assert_eq!(again, scaled);
            if rounding == Rounding::Stochastic {
                // another iteration draws another dither
                c.local_term(&x, 12, 3, 1.0, &mut again).unwrap();
                assert_ne!(again, own);
            }
        }
        let c = codec(2, Rounding::Nearest, 1.0);
        let mut own = vec![0.0; 3];
        assert!(
            c.local_term(&[0.0, f32::NAN, 1.0], 0, 0, 1.0, &mut own)
                .is_err()
        );
        assert!(c.local_term(&[0.0, 1.0], 0, 0, 1.0, &mut own).is_err());
    }

    #[test]
    fn mix_is_local_term_then_adding_decodes_bit_for_bit() {
        for (bits, rounding, hash) in [
            (2, Rounding::Stochastic, true),
            (8, Rounding::Nearest, false),
            (5, Rounding::Stochastic, true),
        ] {
            let cfg = MoniquaConfig {
                bits,
                rounding,
                theta: 1.0,
                hash,
                ..MoniquaConfig::default()
            };
            let c = MoniquaCodec::new(&cfg, 11).unwrap();
            // an odd length: a partial last chunk
            let d = 1000;
            let x: Vec<f32> = (0..d).map(|i| (i as f32 * 0.3).sin()).collect();
            let delta: Vec<f32> = (0..d).map(|i| (i as f32 * 0.7).cos() * 1e-2).collect();
            let neighbour = |shift: f32, sender: u32| {
                let y: Vec<f32> = x.iter().map(|v| v + shift).collect();
                let mut f = Vec::new();
                c.encode(&y, 4, sender, None, &mut f).unwrap();
                f
            };
            let (f1, f2, f3) = (neighbour(0.2, 1), neighbour(-0.1, 2), neighbour(0.05, 3));
            let inbox = [(&f1[..], 0.25f32), (&f2[..], 0.3), (&f3[..], 0.125)];
            let all = 0.25f32 + 0.3 + 0.125;
            let mut acc = vec![0.0; d];
            c.local_term(&x, 4, 0, -all, &mut acc).unwrap();
            for &(f, w) in &inbox {
                c.decode(
                    f,
                    &x,
                    DecodeTarget::Add {
                        acc: &mut acc,
                        weight: w,
                    },
                )
                .unwrap();
            }
            let want: Vec<f32> = x
                .iter()
                .zip(&acc)
                .zip(&delta)
                .map(|((x, a), d)| x + (a - d))
                .collect();
            let mut out = vec![0.0; d];
            let v = c
                .mix(
                    MixTarget::Out {
                        x: &x,
                        out: &mut out,
                    },
                    4,
                    0,
                    &inbox,
                    &delta,
                    Prefetch::NONE,
                )
                .unwrap();
            assert_eq!(out, want, "bits={bits} {rounding}");
            // a prefetch hint never changes a result, whatever it names: a
            // live buffer, memory already freed, nothing
            let freed = Prefetch::of(&vec![1.0f32; 3 * d]);
            for next in [Prefetch::of(&delta), freed, Prefetch::NONE] {
                let mut again = vec![0.0; d];
                c.mix(
                    MixTarget::Out {
                        x: &x,
                        out: &mut again,
                    },
                    4,
                    0,
                    &inbox,
                    &delta,
                    next,
                )
                .unwrap();
                assert_eq!(again, want, "bits={bits} {rounding} {next:?}");
                if !hash {
                    let mut z = x.clone();
                    c.mix(MixTarget::InPlace(&mut z), 4, 0, &inbox, &delta, next)
                        .unwrap();
                    assert_eq!(z, want);
                }
            }
            let expected = if hash {
                Verification::Verified
            } else {
                Verification::Unchecked
            };
            assert_eq!(v, vec![expected; 3]);
        }
    }

    #[test]
    fn mix_in_place_equals_mix_and_refuses_hashed_frames() {
        for hash in [false, true] {
            let cfg = MoniquaConfig {
                bits: 2,
                theta: 1.0,
                hash,
                ..MoniquaConfig::default()
            };
            let c = MoniquaCodec::new(&cfg, 5).unwrap();
            let x: Vec<f32> = (0..777).map(|i| (i as f32 * 0.21).cos()).collect();
            let y: Vec<f32> = x.iter().map(|v| v - 0.15).collect();
            let mut f = Vec::new();
            c.encode(&y, 9, 1, None, &mut f).unwrap();
            let delta = vec![0.003f32; x.len()];
            let mut out = vec![0.0; x.len()];
            c.mix(
                MixTarget::Out {
                    x: &x,
                    out: &mut out,
                },
                9,
                0,
                &[(&f, 0.5)],
                &delta,
                Prefetch::NONE,
            )
            .unwrap();
            let mut z = x.clone();
            let r = c.mix(
                MixTarget::InPlace(&mut z),
                9,
                0,
                &[(&f, 0.5)],
                &delta,
                Prefetch::NONE,
            );
            if hash {
                assert_eq!(r, Err(CodecError::HashInPlace));
                assert_eq!(z, x, "refused before touching x");
            } else {
                assert_eq!(r.unwrap(), vec![Verification::Unchecked]);
                assert_eq!(z, out);
            }
        }
    }

    /// Two workers interleaved block by block, with the right dither
    /// tables, the wrong ones or none: each gets what the local step of
    /// its whole model, `mix` in place, then `encode` at the next
    /// iteration give, bit for bit, whatever the block.
    #[test]
    fn block_updates_equal_mix_in_place_then_encode() {
        let step = |at: usize, x: &[f32], delta: &mut [f32]| {
            for (j, (d, &v)) in delta.iter_mut().zip(x).enumerate() {
                *d = 0.01 * v + 1e-4 * ((at + j) % 7) as f32;
            }
        };
        for bits in 1..=8 {
            for rounding in [Rounding::Nearest, Rounding::Stochastic] {
                let cfg = MoniquaConfig {
                    bits,
                    rounding,
                    theta: 1.0,
                    modulus: (bits == 1).then_some(4.0),
                    hash: false,
                    ..MoniquaConfig::default()
                };
                let c = MoniquaCodec::new(&cfg, 5).unwrap();
                for len in [1, 64, 300, 1000] {
                    let models: Vec<Vec<f32>> = (0..2)
                        .map(|w| {
                            (0..len)
                                .map(|i| ((i + 3 * w) as f32 * 0.21).cos())
                                .collect()
                        })
                        .collect();
                    let mut frames = [Vec::new(), Vec::new()];
                    for (s, f) in frames.iter_mut().enumerate() {
                        let y: Vec<f32> = models[0].iter().map(|v| v - 0.1 * s as f32).collect();
                        c.encode(&y, 9, 1 + s as u32, None, f).unwrap();
                    }
                    let neighbours = [(frames[0].as_slice(), 0.25), (&frames[1], 0.5)];
                    let senders = [0u32, 7];
                    let whole: Vec<(Vec<f32>, Vec<u8>)> = models
                        .iter()
                        .zip(senders)
                        .map(|(x, sender)| {
                            let mut delta = vec![0.0; len];
                            step(0, x, &mut delta);
                            let mut z = x.clone();
                            c.mix(
                                MixTarget::InPlace(&mut z),
                                9,
                                sender,
                                &neighbours,
                                &delta,
                                Prefetch::NONE,
                            )
                            .unwrap();
                            let mut sent = Vec::new();
                            c.encode(&z, 10, sender, None, &mut sent).unwrap();
                            (z, sent)
                        })
                        .collect();
                    for block in [64, 128, 1024] {
                        let what = format!("{bits} bits {rounding:?} len {len} block {block}");
                        let mut xs = models.clone();
                        let mut nexts = vec![vec![7u8; 3], Vec::new()];
                        let mut updates: Vec<BlockUpdate> = senders
                            .iter()
                            .zip(&mut nexts)
                            .map(|(&s, next)| {
                                BlockUpdate::begin(&c, len, 9, s, &neighbours, Some(next))
                                    .unwrap()
                                    .unwrap()
                            })
                            .collect();
                        let (mut mix_t, mut enc_t) =
                            (DitherTable::default(), DitherTable::default());
                        for (b, at) in (0..len).step_by(block).enumerate() {
                            let m = block.min(len - at);
                            // shared randomness: one table per block for both workers
                            // (every other block a stale one, which must be ignored)
                            let k = if b % 2 == 0 { 9 } else { 4 };
                            mix_t.fill(&c, k, 0, at, m);
                            enc_t.fill(&c, k + 1, 0, at, m);
                            for w in 0..2 {
                                let xb = &mut xs[w][at..at + m];
                                let mut delta = vec![0.0; m];
                                step(at, xb, &mut delta);
                                let tables = if b % 3 == 2 {
                                    [None, None]
                                } else {
                                    [Some(&mix_t), Some(&enc_t)]
                                };
                                updates[w]
                                    .block(
                                        xb,
                                        at,
                                        [frames[0].as_slice(), &frames[1]].into_iter(),
                                        &delta,
                                        tables,
                                        Some(&mut nexts[w]),
                                        Prefetch::NONE,
                                    )
                                    .unwrap();
                            }
                        }
                        for (w, u) in updates.into_iter().enumerate() {
                            let done = u.finish(&xs[w], Some(&mut nexts[w])).unwrap();
                            assert!(matches!(done, Some(Ok(_))), "{what}");
                            assert_eq!(xs[w], whole[w].0, "{what} worker {w}");
                            assert_eq!(nexts[w], whole[w].1, "{what} worker {w}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn block_updates_leave_hashes_and_compressed_frames_to_mix() {
        let x: Vec<f32> = (0..200).map(|i| (i as f32 * 0.3).sin()).collect();
        let plain_cfg = MoniquaConfig {
            bits: 2,
            theta: 1.0,
            hash: false,
            ..MoniquaConfig::default()
        };
        let hashed = MoniquaCodec::new(
            &MoniquaConfig {
                hash: true,
                ..plain_cfg.clone()
            },
            11,
        )
        .unwrap();
        let zstd = MoniquaCodec::new(
            &MoniquaConfig {
                compression: Compression::Zstd { level: 1 },
                ..plain_cfg.clone()
            },
            11,
        )
        .unwrap();
        let plain = MoniquaCodec::new(&plain_cfg, 11).unwrap();
        let zero = vec![0.0f32; 200];
        let (mut hf, mut zf, mut pf) = (Vec::new(), Vec::new(), Vec::new());
        hashed.encode(&x, 0, 1, None, &mut hf).unwrap();
        zstd.encode(&zero, 0, 1, None, &mut zf).unwrap();
        plain.encode(&x, 0, 1, None, &mut pf).unwrap();
        assert!(zf.len() < pf.len(), "a constant model compresses");
        assert!(
            BlockUpdate::begin(&hashed, 200, 0, 0, &[(&pf, 0.5)], None)
                .unwrap()
                .is_none()
        );
        assert!(
            BlockUpdate::begin(&plain, 200, 0, 0, &[(&hf, 0.5)], None)
                .unwrap()
                .is_none()
        );
        assert!(
            BlockUpdate::begin(&plain, 200, 0, 0, &[(&zf, 0.5)], None)
                .unwrap()
                .is_none()
        );
        let mut u = BlockUpdate::begin(&plain, 200, 0, 0, &[(&pf, 0.5)], None)
            .unwrap()
            .unwrap();
        let mut z = x.clone();
        for (at, len) in [(10, 64), (192, 64)] {
            let r = u.block(
                &mut z[..len],
                at,
                [pf.as_slice()].into_iter(),
                &zero[..len],
                [None, None],
                None,
                Prefetch::NONE,
            );
            assert_eq!(r, Err(CodecError::Block { at, len }));
        }
        let r = u.block(
            &mut z[..64],
            0,
            [&pf[..50]].into_iter(),
            &zero[..64],
            [None, None],
            None,
            Prefetch::NONE,
        );
        assert!(matches!(r, Err(CodecError::LengthMismatch { .. })), "{r:?}");
        assert_eq!(z, x);
    }

    #[test]
    fn block_updates_keep_an_update_the_encoder_rejects() {
        let c = MoniquaCodec::new(
            &MoniquaConfig {
                bits: 4,
                theta: 1.0,
                hash: false,
                ..MoniquaConfig::default()
            },
            11,
        )
        .unwrap();
        let mut z = vec![0.5f32; 100];
        let mut next = Vec::new();
        // a step that sends one coordinate past what the codec encodes
        let huge = -2.0 * c.max_abs();
        let mut u = BlockUpdate::begin(&c, 100, 0, 0, &[], Some(&mut next))
            .unwrap()
            .unwrap();
        for at in [0, 64] {
            let m = 64.min(100 - at);
            let mut delta = vec![0.0; m];
            if at == 64 {
                delta[3] = huge;
            }
            u.block(
                &mut z[at..at + m],
                at,
                std::iter::empty(),
                &delta,
                [None, None],
                Some(&mut next),
                Prefetch::NONE,
            )
            .unwrap();
        }
        let done = u.finish(&z, Some(&mut next)).unwrap();
        assert!(
            matches!(
                done,
                Some(Err(CodecError::OutOfRange {
                    count: 1,
                    first: 67,
                    ..
                }))
            ),
            "{done:?}"
        );
        assert_eq!(z[67], 0.5 - huge);
    }

    #[test]
    fn mix_reports_the_neighbour_whose_recovery_fails() {
        let c = codec(4, Rounding::Nearest, 0.5);
        let x: Vec<f32> = (0..300).map(|i| (i as f32 * 0.1).sin()).collect();
        let mut near = Vec::new();
        c.encode(&x, 0, 1, None, &mut near).unwrap();
        // a neighbour far beyond theta: its recovery is wrong
        let far_model: Vec<f32> = x.iter().map(|v| v + 3.0).collect();
        let mut far = Vec::new();
        c.encode(&far_model, 0, 2, None, &mut far).unwrap();
        let delta = vec![0.0; 300];
        let mut out = vec![0.0; 300];
        let v = c
            .mix(
                MixTarget::Out {
                    x: &x,
                    out: &mut out,
                },
                0,
                0,
                &[(&near, 0.5), (&far, 0.5)],
                &delta,
                Prefetch::NONE,
            )
            .unwrap();
        assert_eq!(v, vec![Verification::Verified, Verification::Mismatch]);
        let short = vec![0.0; 10];
        assert!(
            c.mix(
                MixTarget::Out {
                    x: &x,
                    out: &mut out
                },
                0,
                0,
                &[(&near, 0.5)],
                &short,
                Prefetch::NONE
            )
            .is_err()
        );
        assert!(
            c.mix(
                MixTarget::Out {
                    x: &x,
                    out: &mut out
                },
                0,
                0,
                &[(&near[..20], 0.5)],
                &delta,
                Prefetch::NONE
            )
            .is_err()
        );
    }

    #[test]
    fn an_adding_decode_equals_decode_then_axpy() {
        let c = codec(5, Rounding::Stochastic, 1.0);
        let x: Vec<f32> = (0..777).map(|i| (i as f32 * 0.3).sin()).collect();
        let y: Vec<f32> = x.iter().map(|v| v + 0.2).collect();
        let mut f = Vec::new();
        c.encode(&x, 3, 1, None, &mut f).unwrap();
        let mut rec = vec![0.0; x.len()];
        c.decode(&f, &y, DecodeTarget::Out(&mut rec)).unwrap();
        let mut acc: Vec<f32> = (0..777).map(|i| i as f32 * 0.01).collect();
        let want: Vec<f32> = acc.iter().zip(&rec).map(|(a, r)| a + 0.3 * r).collect();
        let d = c
            .decode(
                &f,
                &y,
                DecodeTarget::Add {
                    acc: &mut acc,
                    weight: 0.3,
                },
            )
            .unwrap();
        assert_eq!(d.verification, Verification::Verified);
        assert_eq!(acc, want);
    }

    #[test]
    fn nearest_rounding_error_is_half_a_step() {
        let c = codec(4, Rounding::Nearest, 1.0);
        let x: Vec<f32> = (0..5000).map(|i| (i as f32 * 0.013).sin() * 3.0).collect();
        let mut frame = Vec::new();
        c.encode(&x, 0, 0, None, &mut frame).unwrap();
        let mut rec = vec![0.0; x.len()];
        c.decode(&frame, &x, DecodeTarget::Out(&mut rec)).unwrap();
        let worst = x
            .iter()
            .zip(&rec)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(f64::from(worst) <= c.error_bound() + 1e-6);
        assert!(
            f64::from(worst) > 0.9 * c.error_bound(),
            "the bound is tight on dense data"
        );
    }

    #[test]
    fn shared_randomness_gives_equal_codes_for_equal_models() {
        let cfg = MoniquaConfig {
            bits: 2,
            ..MoniquaConfig::default()
        };
        let x: Vec<f32> = (0..100).map(|i| i as f32 * 0.01).collect();
        let enc = |cfg: &MoniquaConfig, sender| {
            let mut f = Vec::new();
            MoniquaCodec::new(cfg, 5)
                .unwrap()
                .encode(&x, 9, sender, None, &mut f)
                .unwrap();
            f[frame::HEADER_LEN..].to_vec()
        };
        assert_eq!(enc(&cfg, 0), enc(&cfg, 1));
        let private = MoniquaConfig {
            shared_randomness: false,
            ..cfg
        };
        assert_ne!(enc(&private, 0), enc(&private, 1));
    }

    #[test]
    fn verification_outcomes_are_counted_apart() {
        let c = codec(4, Rounding::Nearest, 1.0);
        let x: Vec<f32> = (0..300).map(|i| (i as f32 * 0.1).sin()).collect();
        let near: Vec<f32> = x.iter().map(|v| v + 0.5).collect();
        let far: Vec<f32> = x.iter().map(|v| v + 3.0 * c.modulus()).collect();
        let mut f = Vec::new();
        let mut out = vec![0.0; x.len()];
        let mut stats = VerifyStats::default();
        c.encode(&x, 0, 0, None, &mut f).unwrap();
        stats.record(
            c.decode(&f, &near, DecodeTarget::Out(&mut out))
                .unwrap()
                .verification,
        );
        stats.record(
            c.decode(&f, &far, DecodeTarget::Out(&mut out))
                .unwrap()
                .verification,
        );
        stats.record(
            c.decode(&f, &far, DecodeTarget::Out(&mut out))
                .unwrap()
                .verification,
        );
        let unhashed = MoniquaCodec::new(
            &MoniquaConfig {
                bits: 4,
                rounding: Rounding::Nearest,
                theta: 1.0,
                hash: false,
                ..MoniquaConfig::default()
            },
            11,
        )
        .unwrap();
        unhashed.encode(&x, 0, 0, None, &mut f).unwrap();
        let d = c.decode(&f, &near, DecodeTarget::Out(&mut out)).unwrap();
        assert_eq!(d.header.hash, None);
        stats.record(d.verification);
        assert_eq!(
            stats,
            VerifyStats {
                verified: 1,
                mismatched: 2,
                unchecked: 1
            }
        );
    }

    #[test]
    fn non_finite_input_is_an_error() {
        let c = codec(8, Rounding::Stochastic, 2.0);
        let mut x = vec![0.5f32; 10];
        x[3] = f32::NAN;
        x[7] = f32::INFINITY;
        let err = c.encode(&x, 0, 0, None, &mut Vec::new()).unwrap_err();
        assert_eq!(err, CodecError::NonFinite { count: 2, first: 3 });
    }

    #[test]
    fn values_beyond_the_exact_range_are_an_error() {
        let c = codec(8, Rounding::Stochastic, 0.01);
        let limit = c.max_abs();
        assert!(limit > 100.0 && limit < 1000.0, "{limit}");
        let mut x = vec![0.5f32; 10];
        x[4] = limit * 1.01;
        x[6] = -limit * 2.0;
        let err = c.encode(&x, 0, 0, None, &mut Vec::new()).unwrap_err();
        assert!(
            matches!(
                err,
                CodecError::OutOfRange {
                    count: 2,
                    first: 4,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("raise `theta`"));
        x[4] = limit * 0.99;
        x[6] = -limit * 0.99;
        c.encode(&x, 0, 0, None, &mut Vec::new()).unwrap();
    }

    #[test]
    fn decode_rejects_mismatched_configuration() {
        let a = codec(8, Rounding::Stochastic, 2.0);
        let b = codec(8, Rounding::Stochastic, 1.0);
        let c = codec(4, Rounding::Stochastic, 2.0);
        let x = vec![0.1f32; 16];
        let mut f = Vec::new();
        a.encode(&x, 0, 0, None, &mut f).unwrap();
        let mut out = vec![0.0; 16];
        assert!(matches!(
            b.decode(&f, &x, DecodeTarget::Out(&mut out)),
            Err(CodecError::ModulusMismatch { .. })
        ));
        assert!(matches!(
            c.decode(&f, &x, DecodeTarget::Out(&mut out)),
            Err(CodecError::BitsMismatch { .. })
        ));
        assert!(matches!(
            a.decode(&f, &x[..15], DecodeTarget::Out(&mut out)),
            Err(CodecError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn entropy_coding_shrinks_a_converged_model() {
        // Near consensus, high-order bits are redundant: zstd must shrink 8-bit codes
        // of a smooth model, and the receiver must recover the same values.
        let cfg = MoniquaConfig {
            compression: Compression::zstd(3).unwrap(),
            rounding: Rounding::Nearest,
            ..MoniquaConfig::default()
        };
        let c = MoniquaCodec::new(&cfg, 0).unwrap();
        let x: Vec<f32> = (0..50_000)
            .map(|i| 0.01 * ((i / 100) as f32).sin())
            .collect();
        let mut f = Vec::new();
        let e = c.encode(&x, 0, 0, None, &mut f).unwrap();
        assert!(e.header.compressed);
        assert!(f.len() < c.frame_len(x.len()) / 4, "{} bytes", f.len());
        let mut rec = vec![0.0; x.len()];
        let d = c.decode(&f, &x, DecodeTarget::Out(&mut rec)).unwrap();
        assert_eq!(d.verification, Verification::Verified);
        for (a, b) in x.iter().zip(&rec) {
            assert!(f64::from((a - b).abs()) <= c.error_bound() + 1e-6);
        }
    }
}
