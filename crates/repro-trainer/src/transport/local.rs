//! The in-process transport: `n` workers as threads of one process, frames
//! through channels, and a virtual clock in place of a network.
//!
//! Each worker keeps its own virtual time. Computation is charged as the
//! CPU time its thread used since it last touched the transport (thread CPU
//! time, so eight workers sharing two cores are not charged for waiting for
//! a core). A frame leaves through the sender's egress link (per host, like
//! `tc` on a NIC): it starts when both the sender and its link are free,
//! takes `bytes * 8 / bandwidth`, and arrives `latency` later; a receiver's
//! clock moves to the arrival of what it waited for. This is the
//! simulator's network model (`repro_algos::sim::Network`: per-host egress
//! bandwidth plus a latency per message) applied message by message, so a
//! ring all-reduce's dependent rounds and a gossip step's neighbours cost
//! what they would on such a network; as in the MPI trainer, computation
//! and communication do not overlap.
//!
//! A worker whose transport is dropped (it finished, failed or panicked)
//! disconnects its channels: a worker waiting for it gets
//! [`TransportError::PeerLeft`] instead of waiting forever, the in-process
//! counterpart of aborting an MPI job.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, Sender, channel};

use repro_algos::sim::Network;

use super::{Tag, Transport, TransportError, check_ranks, ring_all_reduce};

/// The tag of `exchange`'s frames.
const UNTAGGED: i32 = 0;

#[derive(Debug)]
struct Message {
    tag: i32,
    frame: Vec<u8>,
    /// Virtual time at which the frame is fully at the receiver.
    arrives: f64,
}

/// One worker's end of an in-process world (see the module docs).
#[derive(Debug)]
pub struct LocalTransport {
    rank: usize,
    size: usize,
    /// To each rank (by receiver).
    to: Vec<Sender<Message>>,
    /// From each rank (by sender).
    from: Vec<Receiver<Message>>,
    /// Per sender: messages taken off the channel while looking for another tag.
    held: Vec<VecDeque<Message>>,
    bytes_sent: u64,
    network: Option<Network>,
    /// Added to every message's latency (`set_injected_latency`): virtual too.
    extra_latency_s: f64,
    now: f64,
    /// When the egress link has sent everything handed to it.
    link_free: f64,
    /// Thread CPU time at the last charge; `None` before the first operation
    /// (the transport is built on one thread and used on another).
    cpu_mark: Option<f64>,
}

/// CPU time of the calling thread, seconds. (The one `unsafe` of the
/// trainer: std has no per-thread CPU clock, and the kernel's coarser
/// per-thread counters in /proc tick at 10 ms.)
#[allow(unsafe_code)]
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is
    // supported on every Linux the suite runs on
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The transports of a world of `n` workers, in rank order; hand one to each
/// worker's thread. `network: None` makes communication free (the clock
/// still waits for the sender: a frame never arrives before it was sent).
pub fn local_world(n: usize, network: Option<Network>) -> Vec<LocalTransport> {
    let mut senders: Vec<Vec<Option<Sender<Message>>>> = (0..n).map(|_| vec![None; n]).collect();
    let mut receivers: Vec<Vec<Option<Receiver<Message>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for a in 0..n {
        for b in 0..n {
            let (tx, rx) = channel();
            senders[a][b] = Some(tx);
            receivers[b][a] = Some(rx);
        }
    }
    senders
        .into_iter()
        .zip(receivers)
        .enumerate()
        .map(|(rank, (to, from))| LocalTransport {
            rank,
            size: n,
            to: to.into_iter().flatten().collect(),
            from: from.into_iter().flatten().collect(),
            held: (0..n).map(|_| VecDeque::new()).collect(),
            bytes_sent: 0,
            network,
            extra_latency_s: 0.0,
            now: 0.0,
            link_free: 0.0,
            cpu_mark: None,
        })
        .collect()
}

impl LocalTransport {
    /// Charges the CPU time used since the last operation to the clock.
    fn charge(&mut self) {
        let cpu = thread_cpu_s();
        if let Some(mark) = self.cpu_mark {
            self.now += (cpu - mark).max(0.0);
        }
        self.cpu_mark = Some(cpu);
    }

    fn check(&self, ranks: &[usize]) -> Result<(), TransportError> {
        check_ranks(ranks, self.size)
    }

    fn post(&mut self, to: usize, tag: i32, frame: &[u8]) -> Result<(), TransportError> {
        let (bps, latency) = self
            .network
            .map_or((f64::INFINITY, 0.0), |n| (n.bandwidth_bps, n.latency_s));
        let start = self.now.max(self.link_free);
        self.link_free = start + frame.len() as f64 * 8.0 / bps;
        let arrives = self.link_free + latency + self.extra_latency_s;
        self.bytes_sent += frame.len() as u64;
        self.to[to]
            .send(Message {
                tag,
                frame: frame.to_vec(),
                arrives,
            })
            .map_err(|_| TransportError::PeerLeft { rank: to })
    }

    /// The next message from `from` with `tag`, waiting for it; the clock
    /// moves to its arrival.
    fn take(&mut self, from: usize, tag: i32) -> Result<Vec<u8>, TransportError> {
        let held = &mut self.held[from];
        let msg = match held.iter().position(|m| m.tag == tag) {
            Some(i) => held.remove(i).expect("position is in range"),
            None => loop {
                let m = self.from[from]
                    .recv()
                    .map_err(|_| TransportError::PeerLeft { rank: from })?;
                if m.tag == tag {
                    break m;
                }
                self.held[from].push_back(m);
            },
        };
        self.now = self.now.max(msg.arrives);
        Ok(msg.frame)
    }
}

impl Transport for LocalTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn exchange(
        &mut self,
        to: &[usize],
        frame: &[u8],
        from: &[usize],
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        self.check(to)?;
        self.check(from)?;
        self.charge();
        for &j in to {
            self.post(j, UNTAGGED, frame)?;
        }
        let got = from
            .iter()
            .map(|&j| self.take(j, UNTAGGED))
            .collect::<Result<Vec<_>, _>>()?;
        // what the clock waited for is not this thread's computation
        self.cpu_mark = Some(thread_cpu_s());
        Ok(got)
    }

    fn all_reduce_sum(&mut self, buf: &mut [f32]) -> Result<(), TransportError> {
        ring_all_reduce(self, buf)
    }

    fn all_gather(&mut self, frame: &[u8]) -> Result<Vec<Vec<u8>>, TransportError> {
        let others: Vec<usize> = (0..self.size).filter(|&r| r != self.rank).collect();
        let mut frames = self.exchange(&others, frame, &others)?;
        frames.insert(self.rank, frame.to_vec());
        Ok(frames)
    }

    fn set_injected_latency(&mut self, latency: Option<std::time::Duration>) {
        self.extra_latency_s = latency.map_or(0.0, |l| l.as_secs_f64());
    }

    fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }

    fn send_tagged(&mut self, to: usize, tag: Tag, frame: &[u8]) -> Result<(), TransportError> {
        self.check(&[to])?;
        self.charge();
        self.post(to, tag.code(), frame)
    }

    fn receive_tagged(&mut self, from: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        self.check(&[from])?;
        self.charge();
        let frame = self.take(from, tag.code())?;
        self.cpu_mark = Some(thread_cpu_s());
        Ok(frame)
    }

    fn poll_tagged(&mut self, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        self.charge();
        for j in 0..self.size {
            while let Ok(m) = self.from[j].try_recv() {
                self.held[j].push_back(m);
            }
            if let Some(i) = self.held[j].iter().position(|m| m.tag == tag.code()) {
                let m = self.held[j].remove(i).expect("position is in range");
                self.now = self.now.max(m.arrives);
                return Ok(Some((j, m.frame)));
            }
        }
        Ok(None)
    }

    fn virtual_time(&self) -> Option<f64> {
        let pending = self
            .cpu_mark
            .map_or(0.0, |mark| (thread_cpu_s() - mark).max(0.0));
        Some(self.now + pending)
    }

    fn backend(&self) -> &'static str {
        "in-process"
    }

    fn network(&self) -> String {
        let latency = |l: f64| l + self.extra_latency_s;
        match self.network {
            Some(n) if n.bandwidth_bps.is_finite() => format!(
                "virtual clock: {} bit/s egress per worker, {} ms latency per message",
                n.bandwidth_bps,
                latency(n.latency_s) * 1e3
            ),
            Some(n) => format!(
                "virtual clock: unlimited bandwidth, {} ms latency per message",
                latency(n.latency_s) * 1e3
            ),
            None if self.extra_latency_s > 0.0 => format!(
                "virtual clock: unlimited bandwidth, {} ms latency per message",
                latency(0.0) * 1e3
            ),
            None => "virtual clock: communication free".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<R: Send>(
        world: Vec<LocalTransport>,
        f: impl Fn(&mut LocalTransport) -> R + Sync,
    ) -> Vec<R> {
        std::thread::scope(|s| {
            let handles: Vec<_> = world
                .into_iter()
                .map(|mut t| {
                    let f = &f;
                    s.spawn(move || f(&mut t))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    /// A gossip exchange on a ring of 4 at 1 Mbit/s and 1 ms: each worker
    /// sends 1250 bytes to two neighbours through one link (20 ms), the
    /// second frame arrives at 20 ms + 1 ms.
    #[test]
    fn a_gossip_round_costs_egress_over_bandwidth_plus_latency() {
        let net = Network {
            bandwidth_bps: 1e6,
            latency_s: 1e-3,
        };
        let times = run(local_world(4, Some(net)), |t| {
            let (r, n) = (t.rank(), t.size());
            let nb = [(r + 1) % n, (r + n - 1) % n];
            let got = t.exchange(&nb, &vec![r as u8; 1250], &nb).unwrap();
            assert_eq!(got[0], vec![nb[0] as u8; 1250]);
            assert_eq!(got[1], vec![nb[1] as u8; 1250]);
            (t.virtual_time().unwrap(), t.bytes_sent())
        });
        for (time, sent) in times {
            assert_eq!(sent, 2500);
            // plus the little CPU time the test itself used
            assert!((0.021..0.026).contains(&time), "{time}");
        }
    }

    /// The ring all-reduce's 2 (n - 1) dependent rounds each pay the latency.
    #[test]
    fn a_ring_all_reduce_pays_a_latency_per_round() {
        let net = Network {
            bandwidth_bps: f64::INFINITY,
            latency_s: 0.01,
        };
        let out = run(local_world(4, Some(net)), |t| {
            let mut buf = vec![t.rank() as f32; 8];
            t.all_reduce_sum(&mut buf).unwrap();
            (buf, t.virtual_time().unwrap())
        });
        for (buf, time) in out {
            assert_eq!(buf, vec![6.0; 8]);
            assert!((0.06..0.065).contains(&time), "{time}");
        }
    }

    /// Tags are matched per sender whatever order frames come in, and
    /// polling finds a tagged frame without waiting.
    #[test]
    fn tagged_messages_match_by_tag_and_poll_never_waits() {
        let out = run(local_world(2, None), |t| {
            if t.rank() == 0 {
                t.send_tagged(1, Tag::Done, b"done").unwrap();
                t.send_tagged(1, Tag::Request, b"req").unwrap();
                t.receive_tagged(1, Tag::Reply).unwrap()
            } else {
                let req = t.receive_tagged(0, Tag::Request).unwrap();
                assert_eq!(req, b"req");
                t.send_tagged(0, Tag::Reply, b"rep").unwrap();
                assert_eq!(t.poll_tagged(Tag::Reply).unwrap(), None);
                let (from, done) = t.poll_tagged(Tag::Done).unwrap().unwrap();
                assert_eq!((from, done.as_slice()), (0, b"done".as_slice()));
                Vec::new()
            }
        });
        assert_eq!(out[0], b"rep");
    }

    /// A worker that leaves does not leave its neighbours waiting forever.
    #[test]
    fn a_departed_peer_is_an_error_not_a_hang() {
        let mut world = local_world(2, None);
        let mut t1 = world.pop().unwrap();
        drop(world);
        let err = t1.exchange(&[], &[], &[0]).unwrap_err();
        assert!(matches!(err, TransportError::PeerLeft { rank: 0 }), "{err}");
    }

    /// Computation is charged from the thread's CPU time, not the wall clock:
    /// sleeping costs nothing, spinning does.
    #[test]
    fn the_clock_charges_cpu_time_not_sleep() {
        let mut world = local_world(1, None);
        let t = &mut world[0];
        t.exchange(&[], &[], &[]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = t.virtual_time().unwrap();
        assert!(slept < 0.02, "{slept}");
        let start = thread_cpu_s();
        let mut x = 0u64;
        while thread_cpu_s() - start < 0.03 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        t.exchange(&[], &[], &[]).unwrap();
        let spun = t.virtual_time().unwrap();
        assert!(spun - slept >= 0.03, "{slept} {spun}");
    }
}
