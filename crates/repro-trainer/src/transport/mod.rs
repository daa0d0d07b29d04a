//! How frames travel between workers. The MPI implementation is the only
//! code in the suite that calls MPI.

#[cfg(feature = "mpi")]
mod mpi_transport;

#[cfg(feature = "mpi")]
pub use mpi_transport::{MpiTransport, abort_job, abort_on_panic};

use thiserror::Error;

/// A transport failure.
#[derive(Debug, Error)]
pub enum TransportError {
    #[error("MPI was already initialized in this process")]
    AlreadyInitialized,
    #[error("rank {rank} is outside the world of {size}")]
    BadRank { rank: usize, size: usize },
    #[error("{what}: got {got} values, expected {expected}")]
    Length {
        what: &'static str,
        expected: usize,
        got: usize,
    },
}

/// Point-to-point exchange of frames and the collectives the algorithms need.
pub trait Transport {
    /// This worker's rank.
    fn rank(&self) -> usize;
    /// Number of workers.
    fn size(&self) -> usize;
    /// Sends `frame` to every rank in `to` and receives one frame from every
    /// rank in `from`, returned in the order of `from`. Sends are
    /// non-blocking, so any pattern of neighbours completes.
    fn exchange(
        &mut self,
        to: &[usize],
        frame: &[u8],
        from: &[usize],
    ) -> Result<Vec<Vec<u8>>, TransportError>;
    /// `buf <- sum over ranks of buf`, the same bits on every rank.
    fn all_reduce_sum(&mut self, buf: &mut [f32]) -> Result<(), TransportError>;
    /// Every rank's frame (lengths may differ), in rank order.
    fn all_gather(&mut self, frame: &[u8]) -> Result<Vec<Vec<u8>>, TransportError>;
    /// Delays every outgoing message by `latency` (for kernels without
    /// netem); `None` switches it off.
    fn set_injected_latency(&mut self, latency: Option<std::time::Duration>);
    /// Payload bytes this rank has handed to the network so far, every
    /// message included (the algorithm's frames, evaluation's all-reduces):
    /// what the kernel's counters are checked against.
    fn bytes_sent(&self) -> u64;

    // Tagged point-to-point messages for the asynchronous (AD-PSGD) loop.
    // Their tags ([`Tag`]) never match the frames of `exchange`.

    /// Sends `frame` to `to` with `tag`; returns once the frame is handed over.
    fn send_tagged(&mut self, to: usize, tag: Tag, frame: &[u8]) -> Result<(), TransportError>;
    /// Waits for the next frame from `from` with `tag`.
    fn receive_tagged(&mut self, from: usize, tag: Tag) -> Result<Vec<u8>, TransportError>;
    /// A frame with `tag` from any rank, if one has arrived: (sender, frame).
    /// Never waits.
    fn poll_tagged(&mut self, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError>;
}

/// Tags of the asynchronous loop's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    /// An active worker's model, asking a passive one to average.
    Request,
    /// The passive worker's model, in answer.
    Reply,
    /// An active worker has finished: it sends no more requests.
    Done,
}

impl Tag {
    /// The MPI tag (0 is the untagged frames of `exchange`).
    pub fn code(self) -> i32 {
        match self {
            Tag::Request => 11,
            Tag::Reply => 12,
            Tag::Done => 13,
        }
    }
}

/// `out <- sum over ranks` of little-endian f32 frames, added in rank order so
/// that every rank gets the same bits.
pub fn sum_frames_in_rank_order(frames: &[Vec<u8>], out: &mut [f32]) -> Result<(), TransportError> {
    out.iter_mut().for_each(|v| *v = 0.0);
    for f in frames {
        if f.len() != out.len() * 4 {
            return Err(TransportError::Length {
                what: "all-reduce contribution",
                expected: out.len(),
                got: f.len() / 4,
            });
        }
        for (o, c) in out.iter_mut().zip(f.chunks_exact(4)) {
            *o += f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_sum_in_rank_order_and_lengths_are_checked() {
        let frames: Vec<Vec<u8>> = [[1.0f32, 2.0], [0.5, -2.0], [1e-8, 4.0]]
            .iter()
            .map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
            .collect();
        let mut out = [9.0f32; 2];
        sum_frames_in_rank_order(&frames, &mut out).unwrap();
        assert_eq!(out, [(1.0f32 + 0.5) + 1e-8, 4.0]);
        let mut short = [0.0f32; 3];
        assert!(sum_frames_in_rank_order(&frames, &mut short).is_err());
    }
}
