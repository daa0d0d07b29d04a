//! The MPI transport over the `mpi` crate (OpenMPI).

use mpi::point_to_point::MatchedReceiveVec;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::{Tag, Transport, TransportError, ring_all_reduce};

/// Frames between MPI ranks of `MPI_COMM_WORLD`. Owns the MPI environment:
/// MPI is finalized when it is dropped.
pub struct MpiTransport {
    world: SimpleCommunicator,
    latency: Option<std::time::Duration>,
    bytes_sent: u64,
    /// The rank on this node, and what said it (a launcher variable, or
    /// MPI's shared-memory communicator where none is set).
    local: (usize, &'static str),
    _universe: mpi::environment::Universe,
}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiTransport")
            .field("rank", &self.world.rank())
            .field("size", &self.world.size())
            .finish()
    }
}

impl MpiTransport {
    /// Initializes MPI (once per process) and takes the world communicator.
    /// Only the thread that calls this may call MPI afterwards (the
    /// asynchronous loop computes gradients in a second thread that never
    /// does).
    pub fn init() -> Result<Self, TransportError> {
        let (universe, _level) = mpi::initialize_with_threading(mpi::Threading::Funneled)
            .ok_or(TransportError::AlreadyInitialized)?;
        let world = universe.world();
        let local = crate::device::local_rank(|k| std::env::var(k).ok())
            .unwrap_or_else(|| (Self::node_rank(&world), "MPI_COMM_TYPE_SHARED"));
        Ok(Self {
            world,
            latency: None,
            bytes_sent: 0,
            local,
            _universe: universe,
        })
    }

    /// The rank on this node by MPI's own count: the rank in the
    /// communicator of the processes that share memory with this one.
    /// Collective: every rank calls it.
    fn node_rank(world: &SimpleCommunicator) -> usize {
        world.split_shared(world.rank()).rank() as usize
    }

    /// The rank on this node by the launcher's variables and by MPI's
    /// shared-memory communicator (collective), with the variable the
    /// first came from (`None`: no launcher variable is set).
    pub fn local_ranks(&self) -> (Option<(usize, &'static str)>, usize) {
        (
            crate::device::local_rank(|k| std::env::var(k).ok()),
            Self::node_rank(&self.world),
        )
    }

    /// The injected latency, taken by the receiver once what it waited for
    /// has arrived: a frame is usable `latency` after its last byte left the
    /// sender's queue, as over a link with that propagation delay. (Waiting
    /// before sending instead would overlap the wait with frames already in
    /// flight and hide the latency of dependent rounds, such as a ring
    /// all-reduce's.) Frames received together wait once: they travelled
    /// side by side.
    fn propagate(&self, received: bool) {
        if let Some(latency) = self.latency
            && received
        {
            std::thread::sleep(latency);
        }
    }
}

/// The tag of `exchange`'s frames (MPI's default).
const UNTAGGED: i32 = 0;

/// Aborts every rank of the job (after a fatal error on this one).
pub fn abort_job(code: i32) -> ! {
    SimpleCommunicator::world().abort(code)
}

/// Makes a panic on any rank abort the whole MPI job: without it the other
/// ranks would wait forever for the frames the dead rank never sends.
pub fn abort_on_panic() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        eprintln!("repro: rank panicked, aborting the MPI job");
        SimpleCommunicator::world().abort(70);
    }));
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn library(&self) -> Option<String> {
        // e.g. "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, ..."
        let version = mpi::environment::library_version().ok()?;
        let first = version
            .lines()
            .next()?
            .trim_matches(|c: char| c == '\0' || c.is_whitespace());
        Some(first.to_string())
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn local_rank(&self) -> usize {
        self.local.0
    }

    fn exchange(
        &mut self,
        to: &[usize],
        frame: &[u8],
        from: &[usize],
    ) -> Result<Vec<Vec<u8>>, TransportError> {
        self.check_peers(to)?;
        self.check_peers(from)?;
        self.bytes_sent += (frame.len() * to.len()) as u64;
        let world = &self.world;
        let mut received = Vec::with_capacity(from.len());
        mpi::request::scope(|scope| {
            let sends: Vec<_> = to
                .iter()
                .map(|&r| world.process_at_rank(r as i32).immediate_send(scope, frame))
                .collect();
            for &r in from {
                let (data, _status) = world
                    .process_at_rank(r as i32)
                    .matched_probe_with_tag(UNTAGGED)
                    .matched_receive_vec::<u8>();
                received.push(data);
            }
            for s in sends {
                s.wait();
            }
        });
        self.propagate(!from.is_empty());
        Ok(received)
    }

    fn set_injected_latency(&mut self, latency: Option<std::time::Duration>) {
        self.latency = latency;
    }

    fn all_reduce_sum(&mut self, buf: &mut [f32]) -> Result<(), TransportError> {
        // a ring all-reduce through counted point-to-point messages (not
        // MPI_Allreduce, whose traffic depends on the library's algorithm and
        // could not be counted)
        ring_all_reduce(self, buf)
    }

    fn all_reduce_library(&mut self, buf: &mut [f32]) -> Result<(), TransportError> {
        let send = buf.to_vec();
        self.world
            .all_reduce_into(&send[..], buf, mpi::collective::SystemOperation::sum());
        self.bytes_sent += std::mem::size_of_val(buf) as u64;
        Ok(())
    }

    fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }

    fn send_tagged(&mut self, to: usize, tag: Tag, frame: &[u8]) -> Result<(), TransportError> {
        self.check_peers(&[to])?;
        self.bytes_sent += frame.len() as u64;
        self.world
            .process_at_rank(to as i32)
            .send_with_tag(frame, tag.code());
        Ok(())
    }

    fn receive_tagged(&mut self, from: usize, tag: Tag) -> Result<Vec<u8>, TransportError> {
        self.check_peers(&[from])?;
        let (data, _status) = self
            .world
            .process_at_rank(from as i32)
            .matched_probe_with_tag(tag.code())
            .matched_receive_vec::<u8>();
        self.propagate(true);
        Ok(data)
    }

    fn poll_tagged(&mut self, tag: Tag) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        let got = self
            .world
            .any_process()
            .immediate_matched_probe_with_tag(tag.code())
            .map(|probed| {
                let from = probed.1.source_rank() as usize;
                let (data, _) = probed.matched_receive_vec::<u8>();
                (from, data)
            });
        self.propagate(got.is_some());
        Ok(got)
    }

    fn all_gather(&mut self, frame: &[u8]) -> Result<Vec<Vec<u8>>, TransportError> {
        // lengths first, then the frames, with every other rank
        let size = self.size();
        let me = self.rank();
        let others: Vec<usize> = (0..size).filter(|&r| r != me).collect();
        let mut frames = self.exchange(&others, frame, &others)?;
        frames.insert(me, frame.to_vec());
        Ok(frames)
    }
}
