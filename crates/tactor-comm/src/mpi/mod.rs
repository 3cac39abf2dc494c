//! The MPI backend (rsmpi over the system's MPI library; Debian's Open MPI 4.1 here).
//!
//! **Thread level: `MPI_THREAD_SERIALIZED`, with one try-lock over the library.** Any thread
//! may call MPI, one at a time. A sender that finds the library free starts its `MPI_Isend`
//! itself (no hand-off, no communication thread); one that finds it busy leaves the send in
//! its channel's lock-free queue, and the holder starts it. Progress is the same try-lock:
//! a worker that cannot get the library goes back to other work. Nobody ever waits for the
//! lock on the send or progress paths.
//!
//! Why not `MPI_THREAD_MULTIPLE`: it turns on Open MPI's internal locking on every call,
//! which more than doubles a small message's latency — the whole cost of a fine-grained
//! Task Bench step (measured: `docs/measurements.md`, "MPI thread levels"). The channels keep what they are for (their
//! own communicator, receive buffers, queues and completion queue: senders to different
//! channels never meet), and a backend for an MPI with cheap thread safety would take a lock
//! per channel instead of one for the library.

mod channel;
pub mod node;

use crate::agree::Joining;
use crate::transport::check_send;
use crate::{CommError, CompletionQueue, Reduce, Stopped, Transport};
use channel::{try_lib, Channel, Comm, Lib};
use mpi::environment::Universe;
use mpi::ffi;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::AsRaw;
use mpi::Threading;
use std::os::raw::c_int;
use std::time::Duration;

/// How long shutting down waits for sends still in flight before finalising MPI.
const SHUTDOWN_PATIENCE: Duration = Duration::from_secs(5);

/// The MPI transport: one duplicated communicator per channel.
///
/// ```no_run
/// // Under `mpirun -np 2`:
/// use tactor_comm::{mpi::MpiTransport, Completion, Transport};
///
/// let net = MpiTransport::init(1).unwrap();
/// let peer = 1 - net.rank();
/// net.send(0, peer, 0, vec![net.rank() as u8], None).unwrap();
/// let msg = loop {
///     if let Some(Completion::Received(m)) = net.poll(0) {
///         break m;
///     }
/// };
/// assert_eq!(msg.data, [peer as u8]);
/// ```
pub struct MpiTransport {
    // Fields drop in order: channels, the shared window their rings live in, their
    // communicators, then MPI is finalised.
    channels: Vec<Channel>,
    node: Option<node::Node>,
    lib: Lib,
    mpi: Handles,
    rank: usize,
    ranks: usize,
}

/// rsmpi's handles, which do not claim `Send`/`Sync` because MPI's thread safety depends on
/// the level granted at initialisation.
struct Handles {
    _comms: Vec<SimpleCommunicator>,
    world: SimpleCommunicator,
    _universe: Universe,
}
// SAFETY: `MpiTransport::init` only returns once `MPI_THREAD_SERIALIZED` (or more) was granted,
// under which any thread may call MPI on these handles, one at a time: every call is made
// under the library lock (`MpiTransport::lib`), or before other threads exist (init, drop).
// `init_one_thread` (`MPI_THREAD_SINGLE`) leaves that to its caller, who promised that no
// other thread uses them.
unsafe impl Send for Handles {}
// SAFETY: as for `Send`.
unsafe impl Sync for Handles {}

impl MpiTransport {
    /// Initialises MPI at `MPI_THREAD_SERIALIZED` with `channels` channels (at least 1).
    pub fn init(channels: usize) -> Result<MpiTransport, CommError> {
        Self::join(channels, &Joining::Config(Vec::new()))
    }

    /// [`MpiTransport::init`] for a rank that shows `part` to the others first: the job starts
    /// only when every rank's part agrees ([`crate::agree::verdict`]), before any channel,
    /// window or thread exists; otherwise every rank returns the same
    /// [`CommError::Verdict`]. The transport's own choices (channels, thread level, the
    /// node-local path) are part of it.
    pub fn join(channels: usize, part: &Joining) -> Result<MpiTransport, CommError> {
        Self::init_at(channels, Threading::Serialized, part)
    }

    /// [`MpiTransport::init`] for a process in which the calling thread is the only one: MPI
    /// runs at `MPI_THREAD_SINGLE`, which Open MPI serves without its internal locks (faster:
    /// `docs/measurements.md`, "MPI thread levels").
    ///
    /// # Safety
    ///
    /// No other thread of the process may exist while MPI is initialised, and only the
    /// calling thread may use the transport (MPI's rule for `MPI_THREAD_SINGLE`: the library
    /// takes no precaution for a second thread).
    pub unsafe fn init_one_thread(channels: usize) -> Result<MpiTransport, CommError> {
        // SAFETY: passed on from this function's contract.
        unsafe { Self::join_one_thread(channels, &Joining::Config(Vec::new())) }
    }

    /// [`MpiTransport::join`] at `MPI_THREAD_SINGLE`.
    ///
    /// # Safety
    ///
    /// As for [`MpiTransport::init_one_thread`].
    pub unsafe fn join_one_thread(
        channels: usize,
        part: &Joining,
    ) -> Result<MpiTransport, CommError> {
        Self::init_at(channels, Threading::Single, part)
    }

    fn init_at(
        channels: usize,
        wanted: Threading,
        part: &Joining,
    ) -> Result<MpiTransport, CommError> {
        let shm = node::wanted().map_err(CommError::Init)?;
        eager_shared_memory();
        let (universe, level) = mpi::initialize_with_threading(wanted)
            .ok_or_else(|| CommError::Init("MPI was already initialised".into()))?;
        if (level as i32) < (wanted as i32) {
            return Err(CommError::Init(format!(
                "the MPI library grants thread level {level:?}; Tactor needs {wanted:?}"
            )));
        }
        let lib: Lib = Default::default();
        let world = universe.world();
        let part = part
            .clone()
            .with(format!("channels={}", channels.max(1)))
            .with(format!("{}={}", node::ENV, u8::from(shm)));
        let parts: Vec<Joining> = all_gather_bytes(&world, &part.encode())
            .iter()
            .map(|b| Joining::decode(b))
            .collect();
        crate::agree::verdict(&parts)?;
        let comms: Vec<SimpleCommunicator> =
            (0..channels.max(1)).map(|_| world.duplicate()).collect();
        let node = shm.then(|| node::Node::new(&world, comms.len()));
        let channels = comms
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Channel::new(
                    Comm(c.as_raw()),
                    lib.clone(),
                    node.as_ref().map(|n| n.lane(i)),
                )
            })
            .collect();
        Ok(MpiTransport {
            channels,
            node,
            lib,
            rank: world.rank() as usize,
            ranks: world.size() as usize,
            mpi: Handles {
                _comms: comms,
                world,
                _universe: universe,
            },
        })
    }

    /// Whether inline messages to ranks on this node go through the node-local rings
    /// ([`node`]; off with `TACTOR_COMM_SHM=0`) rather than MPI's point-to-point path.
    pub fn node_local(&self) -> bool {
        self.node.is_some()
    }

    fn channel(&self, c: usize) -> &Channel {
        &self.channels[c]
    }

    /// Runs `call` under the library lock, calling `idle` while another thread holds it.
    fn locked<R>(
        &self,
        idle: &mut dyn FnMut() -> bool,
        mut call: impl FnMut() -> R,
    ) -> Result<R, Stopped> {
        loop {
            if let Some(_lib) = try_lib(&self.lib) {
                return Ok(call());
            }
            if !idle() {
                return Err(Stopped);
            }
        }
    }

    fn wait(
        &self,
        mut req: ffi::MPI_Request,
        idle: &mut dyn FnMut() -> bool,
    ) -> Result<(), Stopped> {
        loop {
            let done = self.locked(idle, || {
                let mut flag: c_int = 0;
                // SAFETY: under the library lock; `req` is a live request of a nonblocking
                // collective whose buffers the caller keeps alive until this returns.
                unsafe { ffi::MPI_Test(&mut req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
                flag != 0
            })?;
            if done {
                return Ok(());
            }
            if !idle() {
                // The request stays incomplete; the job is being abandoned, and MPI frees it
                // at exit.
                return Err(Stopped);
            }
        }
    }
}

impl Drop for MpiTransport {
    fn drop(&mut self) {
        for c in &self.channels {
            c.shut_down(SHUTDOWN_PATIENCE);
        }
    }
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    fn channels(&self) -> usize {
        self.channels.len()
    }

    fn send(
        &self,
        channel: usize,
        dest: usize,
        port: u16,
        data: Vec<u8>,
        token: Option<u64>,
    ) -> Result<(), CommError> {
        check_send(self, channel, dest, data.len())?;
        self.channel(channel).send(dest, port, data, token)
    }

    fn send_parts(
        &self,
        channel: usize,
        dest: usize,
        port: u16,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
        token: Option<u64>,
    ) -> Result<(), CommError> {
        check_send(self, channel, dest, len)?;
        self.channel(channel)
            .send_parts(dest, port, len, parts, token)
    }

    #[inline]
    fn progress(&self, channel: usize) -> bool {
        self.channel(channel).progress()
    }

    #[inline]
    fn progress_offering(
        &self,
        channel: usize,
        offer: &mut dyn FnMut(usize, u16, &[u8]) -> bool,
    ) -> bool {
        self.channel(channel).progress_offering(offer)
    }

    fn completions(&self, channel: usize) -> &CompletionQueue {
        self.channel(channel).completions()
    }

    #[inline]
    fn take_inline(
        &self,
        channel: usize,
        source: usize,
        want: &mut dyn FnMut(u16, &[u8]) -> bool,
    ) -> Option<bool> {
        self.channel(channel).take_inline(source, want)
    }

    fn in_flight(&self, channel: usize) -> usize {
        self.channel(channel).in_flight()
    }

    fn barrier(&self, idle: &mut dyn FnMut() -> bool) -> Result<(), Stopped> {
        // SAFETY: a constant initialised by the MPI library at load time.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        let world = self.mpi.world.as_raw();
        // SAFETY: under the library lock; the world communicator is valid while `self` lives.
        self.locked(idle, || unsafe { ffi::MPI_Ibarrier(world, &mut req) })?;
        self.wait(req, idle)
    }

    fn all_reduce(
        &self,
        op: Reduce,
        value: u64,
        idle: &mut dyn FnMut() -> bool,
    ) -> Result<u64, Stopped> {
        // On the heap, and leaked if the collective is abandoned: the library may still write
        // the result after this function returned.
        let mut bufs = Box::new([value, 0u64]);
        // SAFETY: constants initialised by the MPI library at load time.
        let (mut req, op, ty) = unsafe {
            (
                ffi::RSMPI_REQUEST_NULL,
                match op {
                    Reduce::Max => ffi::RSMPI_MAX,
                    Reduce::Sum => ffi::RSMPI_SUM,
                },
                ffi::RSMPI_UINT64_T,
            )
        };
        let (send, recv) = bufs.split_at_mut(1);
        let world = self.mpi.world.as_raw();
        // SAFETY: under the library lock; both buffers live in `bufs`, which outlives the
        // request: it is dropped only after the request completed, and leaked otherwise.
        self.locked(idle, || unsafe {
            ffi::MPI_Iallreduce(
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                1,
                ty,
                op,
                world,
                &mut req,
            )
        })?;
        match self.wait(req, idle) {
            Ok(()) => Ok(bufs[1]),
            Err(Stopped) => {
                Box::leak(bufs);
                Err(Stopped)
            }
        }
    }

    fn abort(&self, code: i32) -> ! {
        self.mpi.world.abort(code)
    }
}

/// Every rank's `bytes`, in rank order. Collective and blocking: only at join, before other
/// threads exist.
fn all_gather_bytes(world: &SimpleCommunicator, bytes: &[u8]) -> Vec<Vec<u8>> {
    use mpi::datatype::PartitionMut;
    use mpi::traits::CommunicatorCollectives;
    let size = world.size() as usize;
    let mut lens = vec![0 as c_int; size];
    let len = c_int::try_from(bytes.len()).expect("a configuration under 2 GiB");
    world.all_gather_into(&len, &mut lens[..]);
    let displs: Vec<c_int> = lens
        .iter()
        .scan(0, |at, &l| {
            let d = *at;
            *at += l;
            Some(d)
        })
        .collect();
    let total: usize = lens.iter().map(|&l| l as usize).sum();
    let mut all = vec![0u8; total];
    {
        let mut into = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
        world.all_gather_varcount_into(bytes, &mut into);
    }
    displs
        .iter()
        .zip(&lens)
        .map(|(&d, &l)| all[d as usize..(d + l) as usize].to_vec())
        .collect()
}

/// Open MPI's shared-memory transport (vader) copies a message eagerly only up to 4 KiB; a
/// longer one, such as a full inline message of this layer (header + `INLINE_LIMIT`), goes
/// through its single-copy rendezvous, a `process_vm_readv` system call per message.
/// Measured on bale's index-gather over 2 ranks (8 KiB batches, 9 alternated runs, medians):
/// 0.264 s with the default, 0.225 s with 16 KiB. So the limit is raised to fit inline
/// messages, unless the user set it (`OMPI_MCA_btl_vader_eager_limit`, or `--mca` to
/// `mpirun`, which sets the same variable). Other MPI libraries ignore the variable.
///
/// Called before `MPI_Init`, which reads it. Programs join the job before they start
/// threads that could read the environment concurrently.
fn eager_shared_memory() {
    const VAR: &str = "OMPI_MCA_btl_vader_eager_limit";
    if std::env::var_os(VAR).is_none() {
        let limit = (crate::wire::HEADER + crate::INLINE_LIMIT).next_power_of_two();
        std::env::set_var(VAR, limit.to_string());
    }
}
