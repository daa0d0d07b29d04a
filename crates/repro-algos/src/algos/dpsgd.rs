//! D-PSGD (Lian et al. 2017) and its naively quantized form (Moniqua eq. 4):
//! neighbours' models go through a compressor `Q`,
//! `x_i <- W_ii x_i + sum_{j != i} W_ij Q(x_j) - delta_i`. With `Q` the
//! identity (full precision) this is D-PSGD; with a quantizer, Theorem 1
//! shows it cannot converge on `|x - delta/2|^2 / 2` with the grid `delta Z`.
//!
//! At full precision (D-PSGD) `receive` is one pass, as Moniqua's is: the
//! neighbours' values read straight from their frames' bodies and the
//! update made in place, with no decoded copy of any model. A worker also
//! runs its iteration a block of coordinates at a time ([`Blockwise`]), the
//! next frame written from the updated block while it is in cache; the
//! same arithmetic in the same order as `receive` and `send`.

use repro_codec::{DitherTable, FullPrecision, Prefetch};

use crate::algorithm::{Blockwise, Gossip, Received, Row, Worker, axpy, block_views, check_len};
use crate::compress::Compressor;
use crate::{AlgoError, Topology, scratch};

/// A D-PSGD worker, exact or naively quantized.
#[derive(Debug)]
pub struct NaiveQuantized {
    /// Its row of the mixing matrix.
    row: Row,
    x: Vec<f32>,
    compressor: Compressor,
}

impl NaiveQuantized {
    pub fn new(rank: usize, topology: &Topology, compressor: Compressor, x0: &[f32]) -> Self {
        let Gossip { row, x, compressor } = Gossip::new(rank, topology, compressor, x0);
        Self { row, x, compressor }
    }
}

impl Worker for NaiveQuantized {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, _delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        self.compressor
            .encode(&self.x, k, self.row.rank as u32, None, out)?;
        Ok(())
    }

    fn send_reads_delta(&self) -> bool {
        false
    }

    fn receive(
        &mut self,
        _k: u64,
        delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        if let Some(neighbours) = self.bodies(inbox)? {
            average(&mut self.x, delta, self.row.self_weight, &neighbours);
            return Ok(Received::default());
        }
        // quantized or compressed frames: the accumulator and the decode
        // buffer are per-thread scratch
        scratch::with_vectors(self.x.len(), |[acc, decoded]| {
            for (a, &x) in acc.iter_mut().zip(&self.x) {
                *a = self.row.self_weight * x;
            }
            for &(from, bytes) in inbox {
                let w = self.row.weight(from)?;
                self.compressor.decode(bytes, decoded)?;
                axpy(acc, w, decoded);
            }
            for ((x, &a), &d) in self.x.iter_mut().zip(acc.iter()).zip(delta) {
                *x = a - d;
            }
            Ok(Received::default())
        })
    }

    fn extra_memory(&self) -> usize {
        0
    }

    fn blockwise(&mut self) -> Option<&mut dyn Blockwise> {
        Some(self)
    }
}

impl NaiveQuantized {
    /// The full-precision codec, when the frames carry f32 values.
    fn full(&self) -> Option<FullPrecision> {
        match &self.compressor {
            Compressor::Full(full) => Some(*full),
            _ => None,
        }
    }

    /// `(W_ij, the f32 body of j's frame)` for every frame of `inbox`, when
    /// the frames are full precision and uncompressed; `None` otherwise.
    fn bodies<'a>(&self, inbox: &[(usize, &'a [u8])]) -> Result<Option<Bodies<'a>>, AlgoError> {
        let Some(full) = self.full() else {
            return Ok(None);
        };
        inbox
            .iter()
            .map(|&(from, bytes)| self.body(full, from, bytes))
            .collect()
    }

    /// `(W_ij, j's f32 body)` for one frame of full precision, uncompressed;
    /// `None` for another frame.
    fn body<'a>(
        &self,
        full: FullPrecision,
        from: usize,
        bytes: &'a [u8],
    ) -> Result<Option<(f32, &'a [u8])>, AlgoError> {
        let w = self.row.weight(from)?;
        Ok(full.body(bytes, self.x.len())?.map(|body| (w, body)))
    }
}

/// `x <- W_ii x + sum_j W_ij x_j - delta` in one pass, each `x_j` read from
/// the little-endian f32 `body` of its frame: `acc = W_ii x`, `acc += W_ij
/// x_j` in the neighbours' order, `x = acc - delta`, a chunk at a time.
fn average(x: &mut [f32], delta: &[f32], self_weight: f32, neighbours: &[(f32, &[u8])]) {
    let mut acc = [0.0f32; LANE_CHUNK];
    for c in (0..x.len()).step_by(LANE_CHUNK) {
        let m = LANE_CHUNK.min(x.len() - c);
        let (acc, xs, ds) = (&mut acc[..m], &mut x[c..c + m], &delta[c..c + m]);
        for (a, &xi) in acc.iter_mut().zip(xs.iter()) {
            *a = self_weight * xi;
        }
        for &(w, body) in neighbours {
            for (a, v) in acc.iter_mut().zip(body[4 * c..4 * (c + m)].chunks_exact(4)) {
                *a += w * f32::from_le_bytes([v[0], v[1], v[2], v[3]]);
            }
        }
        for ((xi, &a), &d) in xs.iter_mut().zip(acc.iter()).zip(ds) {
            *xi = a - d;
        }
    }
}

/// `(W_ij, the f32 body of j's frame)` per neighbour, in inbox order.
type Bodies<'a> = Vec<(f32, &'a [u8])>;

/// Coordinates the block update accumulates at a time, on the stack.
const LANE_CHUNK: usize = 256;

impl Blockwise for NaiveQuantized {
    fn begin(
        &mut self,
        _k: u64,
        inbox: &[(usize, &[u8])],
        next: Option<&mut Vec<u8>>,
    ) -> Result<bool, AlgoError> {
        // quantized frames, and compressed ones, are decoded whole
        let Some(full) = self.full() else {
            return Ok(false);
        };
        // the frames' check of `bodies`, without collecting them
        for &(from, bytes) in inbox {
            if self.body(full, from, bytes)?.is_none() {
                return Ok(false);
            }
        }
        if let Some(next) = next
            && !full.begin(next, self.x.len())
        {
            return Ok(false);
        }
        Ok(true)
    }

    fn fill_dither(&self, _k: u64, _at: usize, _len: usize, _tables: &mut [DitherTable; 2]) {}

    fn block(
        &mut self,
        _k: u64,
        inbox: &[(usize, &[u8])],
        at: usize,
        len: usize,
        local_step: &mut dyn FnMut(&[f32], &mut [f32]),
        scratch: &mut [f32],
        _tables: &[DitherTable; 2],
        next: Option<&mut Vec<u8>>,
        _prefetch: Prefetch,
    ) -> Result<(), AlgoError> {
        let (x, delta) = block_views(&mut self.x, scratch, at, len)?;
        local_step(x, delta);
        // (W_ij, the block's bytes) in inbox order; `begin` checked the frames
        let mut neighbours = Vec::with_capacity(inbox.len());
        for &(from, bytes) in inbox {
            let w = self.row.weight(from)?;
            let start = repro_codec::frame::HEADER_LEN + 4 * at;
            neighbours.push((w, &bytes[start..start + 4 * len]));
        }
        // receive's arithmetic
        average(x, delta, self.row.self_weight, &neighbours);
        if let Some(next) = next {
            FullPrecision::put(next, at, x);
        }
        Ok(())
    }

    fn finish(
        &mut self,
        k: u64,
        next: Option<&mut Vec<u8>>,
    ) -> Result<(Received, bool), AlgoError> {
        let sent = match (next, self.full()) {
            (Some(next), Some(full)) => {
                full.finish(next, self.x.len(), k + 1, self.row.rank as u32)?;
                true
            }
            _ => false,
        };
        Ok((Received::default(), sent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// D-PSGD's one-pass receive is the decode-then-average it replaced,
    /// bit for bit: `acc = W_ii x`, `acc += W_ij x_j` in inbox order, `x =
    /// acc - delta`, over a length that is no multiple of the chunk.
    #[test]
    fn the_one_pass_average_is_decode_then_axpy_bit_for_bit() {
        let (n, d) = (4, 3 * LANE_CHUNK + 17);
        let topology = Topology::ring(n).unwrap();
        let value = |i: usize, j: usize| ((i * 31 + j * 7) % 23) as f32 * 0.37 - 3.1;
        let x0: Vec<f32> = (0..d).map(|j| value(0, j)).collect();
        let delta: Vec<f32> = (0..d).map(|j| value(9, j) * 1e-3).collect();
        let full = FullPrecision::default();
        let frames: Vec<(usize, Vec<u8>)> = [1, 3]
            .into_iter()
            .map(|from| {
                let model: Vec<f32> = (0..d).map(|j| value(from, j)).collect();
                let mut frame = Vec::new();
                full.encode(&model, 0, from as u32, &mut frame).unwrap();
                (from, frame)
            })
            .collect();
        let inbox: Vec<(usize, &[u8])> = frames.iter().map(|(j, f)| (*j, f.as_slice())).collect();
        let mut worker = NaiveQuantized::new(0, &topology, Compressor::Full(full), &x0);
        worker.receive(0, &delta, &inbox).unwrap();
        // the old way: decode each frame whole, then average
        let row = Row::of(&topology, 0);
        let mut acc: Vec<f32> = x0.iter().map(|&x| row.self_weight * x).collect();
        let mut decoded = vec![0.0; d];
        for &(from, bytes) in &inbox {
            full.decode(bytes, &mut decoded).unwrap();
            axpy(&mut acc, row.weight(from).unwrap(), &decoded);
        }
        let expected: Vec<u32> = acc
            .iter()
            .zip(&delta)
            .map(|(a, dl)| (a - dl).to_bits())
            .collect();
        let got: Vec<u32> = worker.model().iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, expected);
    }
}
