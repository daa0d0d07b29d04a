//! D² (Tang et al. 2018b), optionally with Moniqua's compression (Lu & De Sa
//! 2020, Section 5).
//!
//! `x_{k+1/2} = 2 x_k - x_{k-1} - delta_k + delta_{k-1}` (for `k = 0`, the
//! plain step `x_0 - delta_0`), then `x_{k+1} = sum_j W_ij x_{j,k+1/2}`.
//! D² removes D-PSGD's bias under heterogeneous data; it needs
//! `lambda_min(W) > -1/3`, which `gamma = 0.5` guarantees by mixing with
//! `(W + I) / 2` (the reference implementation's choice).
//!
//! With Moniqua the half-step is sent modulo-quantized and mixed as
//! `x_{k+1} = x_{k+1/2} + sum_j W_ij (x^_{j,k+1/2} - x^_{i,k+1/2})`.

use repro_codec::{FullPrecision, MoniquaCodec};

use super::moniqua::accumulate_verified;

use crate::algorithm::{Received, Row, Worker, axpy, check_len};
use crate::{AlgoError, Topology};

/// How D² exchanges its half-steps.
#[derive(Debug, Clone)]
pub enum D2Exchange {
    Full,
    Moniqua(MoniquaCodec),
}

/// A D² worker.
#[derive(Debug)]
pub struct D2 {
    /// Its row of the mixing matrix.
    row: Row,
    x: Vec<f32>,
    exchange: D2Exchange,
    x_prev: Vec<f32>,
    delta_prev: Vec<f32>,
    /// The half-step between `send` and `receive`.
    half: Vec<f32>,
    acc: Vec<f32>,
    scratch: Vec<f32>,
}

impl D2 {
    /// Worker `rank`, mixing with `gamma W + (1 - gamma) I`.
    pub fn new(
        rank: usize,
        topology: &Topology,
        exchange: D2Exchange,
        gamma: f64,
        x0: &[f32],
    ) -> Result<Self, AlgoError> {
        let mixing = topology.slack(gamma)?;
        Ok(Self {
            row: Row::of(&mixing, rank),
            x: crate::flat::model_copy(x0),
            exchange,
            x_prev: x0.to_vec(),
            delta_prev: vec![0.0; x0.len()],
            half: vec![0.0; x0.len()],
            acc: vec![0.0; x0.len()],
            scratch: vec![0.0; x0.len()],
        })
    }
}

impl Worker for D2 {
    fn model(&self) -> &[f32] {
        &self.x
    }

    fn send(&mut self, k: u64, delta: &[f32], out: &mut Vec<u8>) -> Result<(), AlgoError> {
        check_len("delta", self.x.len(), delta.len())?;
        if k == 0 {
            for ((h, &x), &d) in self.half.iter_mut().zip(&self.x).zip(delta) {
                *h = x - d;
            }
        } else {
            for ((((h, &x), &xp), &d), &dp) in self
                .half
                .iter_mut()
                .zip(&self.x)
                .zip(&self.x_prev)
                .zip(delta)
                .zip(&self.delta_prev)
            {
                *h = 2.0 * x - xp - d + dp;
            }
        }
        self.x_prev.copy_from_slice(&self.x);
        self.delta_prev.copy_from_slice(delta);
        match &self.exchange {
            D2Exchange::Full => FullPrecision::default()
                .encode(&self.half, k, self.row.rank as u32, out)
                .map(drop)?,
            D2Exchange::Moniqua(codec) => codec
                .encode(
                    &self.half,
                    k,
                    self.row.rank as u32,
                    Some(&mut self.scratch),
                    out,
                )
                .map(drop)?,
        }
        Ok(())
    }

    fn receive(
        &mut self,
        _k: u64,
        _delta: &[f32],
        inbox: &[(usize, &[u8])],
    ) -> Result<Received, AlgoError> {
        let mut received = Received::default();
        match &self.exchange {
            D2Exchange::Full => {
                for (a, &h) in self.acc.iter_mut().zip(&self.half) {
                    *a = self.row.self_weight * h;
                }
                for &(from, bytes) in inbox {
                    let w = self.row.weight(from)?;
                    FullPrecision::default().decode(bytes, &mut self.scratch)?;
                    axpy(&mut self.acc, w, &self.scratch);
                }
                self.x.copy_from_slice(&self.acc);
            }
            D2Exchange::Moniqua(codec) => {
                // scratch holds x^_i of the half-step; a neighbour whose
                // recovery fails the hash is left out, as in Moniqua
                self.acc.fill(0.0);
                let total;
                (total, received) =
                    accumulate_verified(codec, &self.row, &self.half, inbox, &mut self.acc)?;
                for (((x, &h), &a), &own) in self
                    .x
                    .iter_mut()
                    .zip(&self.half)
                    .zip(&self.acc)
                    .zip(&self.scratch)
                {
                    *x = h + a - total * own;
                }
            }
        }
        Ok(received)
    }

    fn extra_memory(&self) -> usize {
        // x_{k-1}, delta_{k-1} and the half-step
        4 * (self.x_prev.len() + self.delta_prev.len() + self.half.len())
    }
}
