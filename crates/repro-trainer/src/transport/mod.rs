//! How frames travel between workers. The MPI implementation is the only
//! code in the suite that calls MPI.

mod local;
#[cfg(feature = "mpi")]
mod mpi_transport;

pub use local::{LocalTransport, local_world};

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
    #[error(
        "rank {rank} left the run (it finished, failed or diverged) while this rank still waited for it"
    )]
    PeerLeft { rank: usize },
}

/// Point-to-point exchange of frames and the collectives the algorithms need.
pub trait Transport {
    /// This worker's rank.
    fn rank(&self) -> usize;
    /// Number of workers.
    fn size(&self) -> usize;

    /// `Ok` where every rank of `ranks` is one of this transport's: the
    /// one peer check of every transport.
    fn check_peers(&self, ranks: &[usize]) -> Result<(), TransportError> {
        check_ranks(ranks, self.size())
    }
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
    /// The same sum by the communication library's own all-reduce
    /// (`MPI_Allreduce`, whatever algorithm it picks), for the
    /// `allreduce-mpi` baseline. Its messages bypass the injected latency;
    /// this rank's count grows by the buffer handed over (the library's
    /// traffic is what the kernel counts). Transports without a library
    /// collective use [`Transport::all_reduce_sum`].
    fn all_reduce_library(&mut self, buf: &mut [f32]) -> Result<(), TransportError> {
        self.all_reduce_sum(buf)
    }
    /// Every rank's frame (lengths may differ), in rank order.
    fn all_gather(&mut self, frame: &[u8]) -> Result<Vec<Vec<u8>>, TransportError>;
    /// Delays every message by `latency`, as a link's propagation delay
    /// would (for kernels without
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

    /// This worker's index among the workers that share its machine's
    /// GPUs: the rank in process; over MPI, the rank on its node (the
    /// launcher's local rank), so each node's ranks spread over its GPUs.
    fn local_rank(&self) -> usize {
        self.rank()
    }
    /// Where this worker computes, said once before training. A virtual
    /// clock charges a GPU worker's computation by its wall time, with
    /// the GPU to itself (see `LocalTransport`); real-time transports need
    /// nothing.
    fn compute_on(&mut self, _device: tch::Device) {}

    /// Seconds on this worker's virtual clock, for transports that model
    /// the network instead of using one; `None`: the run is timed by the
    /// wall clock.
    fn virtual_time(&self) -> Option<f64> {
        None
    }
    /// How the ranks run, for the log's provenance (`mpi`, `in-process`).
    fn backend(&self) -> &'static str {
        "mpi"
    }
    /// The network the frames cross, for the log's provenance.
    fn network(&self) -> String {
        "as launched".into()
    }
    /// The communication library the ranks run on, for the log's
    /// provenance (`None`: none, the in-process transport).
    fn library(&self) -> Option<String> {
        None
    }
}

/// `BadRank` for the first of `ranks` outside a world of `size`.
pub(crate) fn check_ranks(ranks: &[usize], size: usize) -> Result<(), TransportError> {
    match ranks.iter().find(|&&r| r >= size) {
        Some(&rank) => Err(TransportError::BadRank { rank, size }),
        None => Ok(()),
    }
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

/// The ring all-reduce (reduce-scatter, then all-gather) over any
/// transport's point-to-point `exchange`: `buf <- sum over ranks of buf`.
/// The buffer is cut into `n` chunks; in `n - 1` steps each rank passes one
/// chunk to the next rank and adds the one it gets from the previous, after
/// which rank `r` holds the full sum of chunk `r + 1`; in `n - 1` more steps
/// the summed chunks travel round the ring. Each rank sends
/// `2 (n - 1) / n` of the buffer (all-gathering every buffer sends
/// `n - 1` times it), and every rank ends with the same bits: each chunk is
/// summed once, on one rank, then copied.
pub fn ring_all_reduce<T: Transport + ?Sized>(
    t: &mut T,
    buf: &mut [f32],
) -> Result<(), TransportError> {
    let (n, r) = (t.size(), t.rank());
    if n < 2 {
        return Ok(());
    }
    let d = buf.len();
    let bounds = |c: usize| (c * d / n)..((c + 1) * d / n);
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    let encode = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let decode = |bytes: &[u8], expected: usize| -> Result<Vec<f32>, TransportError> {
        if bytes.len() != 4 * expected {
            return Err(TransportError::Length {
                what: "all-reduce chunk",
                expected,
                got: bytes.len() / 4,
            });
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    for s in 0..n - 1 {
        let send = bounds((r + n - s) % n);
        let recv = bounds((r + 2 * n - s - 1) % n);
        let got = t.exchange(&[next], &encode(&buf[send]), &[prev])?;
        let add = decode(&got[0], recv.len())?;
        for (x, a) in buf[recv].iter_mut().zip(add) {
            *x += a;
        }
    }
    for s in 0..n - 1 {
        let send = bounds((r + 1 + n - s) % n);
        let recv = bounds((r + n - s) % n);
        let got = t.exchange(&[next], &encode(&buf[send]), &[prev])?;
        let summed = decode(&got[0], recv.len())?;
        buf[recv].copy_from_slice(&summed);
    }
    Ok(())
}

/// The all-reduce by recursive halving and doubling (Rabenseifner's;
/// MPICH's choice for long vectors) over any transport's point-to-point
/// `exchange`: `buf <- sum over ranks of buf` in `2 log2 n` dependent
/// rounds (`repro_algos::topology::halving_doubling_rounds`) where the ring takes `2 (n - 1)`, with the same bytes per rank
/// (`2 (p - 1) / p` of the buffer). With `p` the largest power of two up
/// to `n`, ranks `p..n` first fold their buffer into rank `r - p` and get
/// the sum back at the end. Among the `p`: in round `k` rank `r` swaps half
/// of its current segment with rank `r xor p / 2^(k+1)` and adds the half
/// it keeps (reduce-scatter: rank `r` ends with the sum of chunk `r`),
/// then the same pairs in reverse order swap their summed segments
/// (all-gather). Each chunk is summed on one rank and copied, so every
/// rank ends with the same bits.
pub fn halving_doubling_all_reduce<T: Transport + ?Sized>(
    t: &mut T,
    buf: &mut [f32],
) -> Result<(), TransportError> {
    let (n, r) = (t.size(), t.rank());
    if n < 2 {
        return Ok(());
    }
    let p = 1usize << n.ilog2();
    let d = buf.len();
    let encode = |v: &[f32]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let decode = |bytes: &[u8], expected: usize| -> Result<Vec<f32>, TransportError> {
        if bytes.len() != 4 * expected {
            return Err(TransportError::Length {
                what: "all-reduce segment",
                expected,
                got: bytes.len() / 4,
            });
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    // the ranks beyond the power of two fold in, wait, and get the sum
    if r >= p {
        t.exchange(&[r - p], &encode(buf), &[])?;
        let got = t.exchange(&[], &[], &[r - p])?;
        buf.copy_from_slice(&decode(&got[0], d)?);
        return Ok(());
    }
    if r + p < n {
        let got = t.exchange(&[], &[], &[r + p])?;
        for (x, a) in buf.iter_mut().zip(decode(&got[0], d)?) {
            *x += a;
        }
    }
    // chunk c of p is bounds(c); a segment is a run of chunks
    let at = |c: usize| c * d / p;
    let (mut lo, mut hi) = (0usize, p);
    let mut mask = p / 2;
    while mask > 0 {
        let partner = r ^ mask;
        let mid = (lo + hi) / 2;
        let (keep, give) = if r & mask == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        let got = t.exchange(
            &[partner],
            &encode(&buf[at(give.0)..at(give.1)]),
            &[partner],
        )?;
        let add = decode(&got[0], at(keep.1) - at(keep.0))?;
        for (x, a) in buf[at(keep.0)..at(keep.1)].iter_mut().zip(add) {
            *x += a;
        }
        (lo, hi) = keep;
        mask /= 2;
    }
    // rank r holds chunk r summed; double the segment each round
    let mut mask = 1;
    while mask < p {
        let partner = r ^ mask;
        let theirs = (partner & !(mask - 1), (partner & !(mask - 1)) + mask);
        let got = t.exchange(&[partner], &encode(&buf[at(lo)..at(hi)]), &[partner])?;
        let summed = decode(&got[0], at(theirs.1) - at(theirs.0))?;
        buf[at(theirs.0)..at(theirs.1)].copy_from_slice(&summed);
        (lo, hi) = (lo.min(theirs.0), hi.max(theirs.1));
        mask *= 2;
    }
    if r + p < n {
        t.exchange(&[r + p], &encode(buf), &[])?;
    }
    Ok(())
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
    /// Every rank ends with the same bits, equal to the sum up to rounding,
    /// and sends 2 (n - 1) / n of the buffer; lengths below n (some chunks
    /// empty) and n = 1 work too.
    #[test]
    fn ring_all_reduce_sums_with_identical_bits_and_ring_traffic() {
        for (n, d) in [(1, 5), (2, 7), (3, 1), (4, 1000), (8, 13)] {
            let results: Vec<(Vec<f32>, u64)> = std::thread::scope(|s| {
                let handles: Vec<_> = local_world(n, None)
                    .into_iter()
                    .map(|mut t| {
                        s.spawn(move || {
                            let mut buf: Vec<f32> = (0..d)
                                .map(|i| ((t.rank() * 31 + i) as f32 * 0.37).sin())
                                .collect();
                            t.all_reduce_sum(&mut buf).unwrap();
                            (buf, t.bytes_sent())
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for i in 0..d {
                let exact: f64 = (0..n)
                    .map(|r| f64::from(((r * 31 + i) as f32 * 0.37).sin()))
                    .sum();
                assert!(
                    (f64::from(results[0].0[i]) - exact).abs() < 1e-5,
                    "n {n} d {d} i {i}"
                );
            }
            for (buf, sent) in &results {
                assert_eq!(buf, &results[0].0, "n {n} d {d}: ranks disagree");
                if n > 1 && d % n == 0 {
                    assert_eq!(*sent, (2 * (n - 1) * d / n * 4) as u64);
                }
            }
        }
    }

    /// Halving and doubling sums like the ring, with the same bits on
    /// every rank, for powers of two and not (ranks folded in), lengths
    /// below n included; a power of two sends the ring's bytes.
    #[test]
    fn halving_doubling_all_reduce_sums_with_identical_bits() {
        for (n, d) in [
            (1, 5),
            (2, 7),
            (3, 1),
            (4, 1000),
            (5, 9),
            (6, 13),
            (8, 64),
            (8, 3),
        ] {
            let results: Vec<(Vec<f32>, u64)> = std::thread::scope(|s| {
                let handles: Vec<_> = local_world(n, None)
                    .into_iter()
                    .map(|mut t| {
                        s.spawn(move || {
                            let mut buf: Vec<f32> = (0..d)
                                .map(|i| ((t.rank() * 31 + i) as f32 * 0.37).sin())
                                .collect();
                            halving_doubling_all_reduce(&mut t, &mut buf).unwrap();
                            (buf, t.bytes_sent())
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for i in 0..d {
                let exact: f64 = (0..n)
                    .map(|r| f64::from(((r * 31 + i) as f32 * 0.37).sin()))
                    .sum();
                assert!(
                    (f64::from(results[0].0[i]) - exact).abs() < 1e-5,
                    "n {n} d {d} i {i}"
                );
            }
            for (buf, sent) in &results {
                assert_eq!(buf, &results[0].0, "n {n} d {d}: ranks disagree");
                if n.is_power_of_two() && n > 1 && d % n == 0 {
                    assert_eq!(*sent, (2 * (n - 1) * d / n * 4) as u64, "n {n} d {d}");
                }
            }
        }
    }

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
