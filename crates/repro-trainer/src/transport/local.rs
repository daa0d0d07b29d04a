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
//!
//! A worker on a GPU (`Transport::compute_on`) is charged differently: its
//! kernels run asynchronously, so its thread's CPU time misses them. It
//! takes its GPU's turn when it leaves a transport call and gives it back
//! at the next one, after waiting for the device to finish its work; it is
//! charged the wall time in between. While it holds the turn no other
//! worker has work on that GPU, so the time is what the step costs a
//! worker with a GPU of its own, as on the cluster the clock models. The
//! workers sharing a GPU then take turns, which on one GPU costs little:
//! its kernels ran one worker at a time anyway (issue 42's measurement:
//! 82 ms per iteration of 8 workers against 10.3 ms per worker step).

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

use repro_algos::sim::Network;

use super::{Tag, Transport, TransportError, ring_all_reduce};

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
    /// How computation is charged, and since when.
    clock: Clock,
    /// The turns of the world's GPUs, shared by its workers.
    turns: Turns,
}

/// How a worker's computation is charged (see the module docs).
#[derive(Debug)]
enum Clock {
    /// Thread CPU time since `mark`; `None` before the first operation
    /// (the transport is built on one thread and used on another).
    Cpu { mark: Option<f64> },
    /// Wall time since `mark`, with the GPU's `turn` held in between and
    /// `sync` waiting for the device's work before the time is read.
    Gpu {
        index: usize,
        turn: Arc<Turn>,
        sync: fn(usize),
        mark: Option<Instant>,
    },
}

/// One GPU's turn: the worker holding it is the only one with work there.
#[derive(Debug, Default)]
struct Turn {
    taken: Mutex<bool>,
    given: Condvar,
}

impl Turn {
    fn take(&self) {
        let mut taken = self.taken.lock().unwrap_or_else(PoisonError::into_inner);
        while *taken {
            taken = self
                .given
                .wait(taken)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *taken = true;
    }

    fn give(&self) {
        *self.taken.lock().unwrap_or_else(PoisonError::into_inner) = false;
        self.given.notify_one();
    }
}

/// A world's GPU turns by CUDA index, made when a worker first asks.
type Turns = Arc<Mutex<BTreeMap<usize, Arc<Turn>>>>;

/// Waits for CUDA device `index` to finish the work queued on it.
fn cuda_sync(index: usize) {
    tch::Cuda::synchronize(index as i64);
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
    let turns = Turns::default();
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
            clock: Clock::Cpu { mark: None },
            turns: turns.clone(),
        })
        .collect()
}

impl LocalTransport {
    /// Charges the computation since the last operation to the clock; on
    /// a GPU, after its work is done, and gives its turn back.
    fn pause(&mut self) {
        match &mut self.clock {
            Clock::Cpu { mark } => {
                let cpu = thread_cpu_s();
                if let Some(m) = mark.take() {
                    self.now += (cpu - m).max(0.0);
                }
            }
            Clock::Gpu {
                index,
                turn,
                sync,
                mark,
            } => {
                if let Some(m) = mark.take() {
                    sync(*index);
                    self.now += m.elapsed().as_secs_f64();
                    turn.give();
                }
            }
        }
    }

    /// Starts charging computation again; on a GPU, once its turn is ours.
    fn resume(&mut self) {
        match &mut self.clock {
            Clock::Cpu { mark } => *mark = Some(thread_cpu_s()),
            Clock::Gpu { turn, mark, .. } => {
                if mark.is_none() {
                    turn.take();
                }
                *mark = Some(Instant::now());
            }
        }
    }

    /// Charges computation as the wall time with GPU `index` to this
    /// worker alone, `sync` waiting for its work (see the module docs).
    fn exclusive(&mut self, index: usize, sync: fn(usize)) {
        self.pause();
        let turn = self
            .turns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(index)
            .or_default()
            .clone();
        self.clock = Clock::Gpu {
            index,
            turn,
            sync,
            mark: None,
        };
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
        self.check_peers(to)?;
        self.check_peers(from)?;
        self.pause();
        for &j in to {
            self.post(j, UNTAGGED, frame)?;
        }
        let got = from
            .iter()
            .map(|&j| self.take(j, UNTAGGED))
            .collect::<Result<Vec<_>, _>>()?;
        // what the clock waited for is not this thread's computation
        self.resume();
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
        self.check_peers(&[to])?;
        self.pause();
        let posted = self.post(to, tag.code(), frame);
        self.resume();
        posted
    }

    fn receive_tagged(&mut self, from: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        self.check_peers(&[from])?;
        self.pause();
        let frame = self.take(from, tag.code())?;
        self.resume();
        Ok(frame)
    }

    fn poll_tagged(&mut self, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        self.pause();
        let mut found = None;
        for j in 0..self.size {
            while let Ok(m) = self.from[j].try_recv() {
                self.held[j].push_back(m);
            }
            if let Some(i) = self.held[j].iter().position(|m| m.tag == tag.code()) {
                let m = self.held[j].remove(i).expect("position is in range");
                self.now = self.now.max(m.arrives);
                found = Some((j, m.frame));
                break;
            }
        }
        self.resume();
        Ok(found)
    }

    fn virtual_time(&self) -> Option<f64> {
        let pending = match &self.clock {
            Clock::Cpu { mark } => mark.map_or(0.0, |m| (thread_cpu_s() - m).max(0.0)),
            Clock::Gpu {
                index, sync, mark, ..
            } => mark.map_or(0.0, |m| {
                sync(*index);
                m.elapsed().as_secs_f64()
            }),
        };
        Some(self.now + pending)
    }

    fn compute_on(&mut self, device: tch::Device) {
        match device {
            tch::Device::Cuda(i) => self.exclusive(i, cuda_sync),
            _ => {
                self.pause();
                self.clock = Clock::Cpu { mark: None };
            }
        }
        self.resume();
    }

    fn backend(&self) -> &'static str {
        "in-process"
    }

    fn network(&self) -> String {
        let latency = |l: f64| l + self.extra_latency_s;
        let net = match self.network {
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
        };
        match self.clock {
            Clock::Cpu { .. } => net,
            Clock::Gpu { .. } => {
                format!("{net}; computation charged as GPU wall time, one worker per GPU at a time")
            }
        }
    }
}

impl Drop for LocalTransport {
    /// A worker that ends (or panics) holding its GPU's turn gives it back.
    fn drop(&mut self) {
        self.pause();
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

    /// Halving and doubling pays `2 log2 n` latencies, the ring `2 (n - 1)`:
    /// 6 and 14 on 8 ranks.
    #[test]
    fn halving_doubling_pays_a_latency_per_round_in_log_depth() {
        let net = Network {
            bandwidth_bps: f64::INFINITY,
            latency_s: 0.01,
        };
        let out = run(local_world(8, Some(net)), |t| {
            let mut buf = vec![t.rank() as f32; 16];
            super::super::halving_doubling_all_reduce(t, &mut buf).unwrap();
            (buf, t.virtual_time().unwrap())
        });
        for (buf, time) in out {
            assert_eq!(buf, vec![28.0; 16]);
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

    /// GPU workers (a stand-in device whose `sync` only counts its calls)
    /// are charged wall time, sleeping included, and take turns: no two
    /// hold one GPU at once.
    #[test]
    fn gpu_workers_are_charged_wall_time_one_at_a_time() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static SYNCS: AtomicUsize = AtomicUsize::new(0);
        static ON_GPU: AtomicUsize = AtomicUsize::new(0);
        static MOST: AtomicUsize = AtomicUsize::new(0);
        fn sync(index: usize) {
            assert_eq!(index, 0);
            SYNCS.fetch_add(1, Ordering::SeqCst);
        }
        let times = run(local_world(3, None), |t| {
            t.exclusive(0, sync);
            t.resume();
            for _ in 0..3 {
                let now = ON_GPU.fetch_add(1, Ordering::SeqCst) + 1;
                MOST.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(20));
                ON_GPU.fetch_sub(1, Ordering::SeqCst);
                let (r, n) = (t.rank(), t.size());
                let nb = [(r + 1) % n, (r + n - 1) % n];
                t.exchange(&nb, &[r as u8], &nb).unwrap();
            }
            t.virtual_time().unwrap()
        });
        assert_eq!(MOST.load(Ordering::SeqCst), 1, "two workers shared the GPU");
        for time in times {
            assert!(time >= 0.06, "sleep on a GPU worker is charged: {time}");
        }
        assert!(
            SYNCS.load(Ordering::SeqCst) >= 9,
            "every charge waits for the device"
        );
    }

    /// A worker that panics holding its GPU's turn gives it back.
    #[test]
    fn a_panicking_gpu_worker_gives_its_turn_back() {
        fn sync(_: usize) {}
        let mut world = local_world(2, None);
        let mut second = world.pop().unwrap();
        let mut first = world.pop().unwrap();
        let died = std::thread::spawn(move || {
            first.exclusive(0, sync);
            first.resume();
            panic!("a worker failed mid-step");
        })
        .join();
        assert!(died.is_err());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            second.exclusive(0, sync);
            second.resume();
            tx.send(()).unwrap();
        });
        // a hang guard, not a timing assertion
        rx.recv_timeout(std::time::Duration::from_secs(20))
            .expect("the turn was never given back");
    }
}
