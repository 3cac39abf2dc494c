//! The MPI backend (rsmpi over the system's MPI library; Debian's Open MPI 4.1 here).
//!
//! **Thread level: `MPI_THREAD_MULTIPLE`.** Workers send from their own threads (an
//! `MPI_Isend` straight from the sender, no hand-off to a communication thread) and any idle
//! worker may progress any channel. Funnelling every call through one progress thread would
//! add a queue hop and a core's worth of polling to every message; with channels on
//! separate communicators, concurrent calls contend only inside the MPI library.
//! [`MpiTransport::init`] refuses to start when the library grants less.

mod channel;

use crate::transport::check_send;
use crate::{CommError, CompletionQueue, Reduce, Stopped, Transport};
use channel::{Channel, Comm};
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
    // Fields drop in order: channels, their communicators, then MPI is finalised.
    channels: Vec<Channel>,
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
// SAFETY: `MpiTransport::init` only returns once `MPI_THREAD_MULTIPLE` was granted, under which
// any thread may call MPI on any of these handles, concurrently.
unsafe impl Send for Handles {}
// SAFETY: as for `Send`.
unsafe impl Sync for Handles {}

impl MpiTransport {
    /// Initialises MPI at `MPI_THREAD_MULTIPLE` with `channels` channels (at least 1).
    pub fn init(channels: usize) -> Result<MpiTransport, CommError> {
        let (universe, level) = mpi::initialize_with_threading(Threading::Multiple)
            .ok_or_else(|| CommError::Init("MPI was already initialised".into()))?;
        if level != Threading::Multiple {
            return Err(CommError::Init(format!(
                "the MPI library grants thread level {level:?}; Tactor needs Multiple"
            )));
        }
        let world = universe.world();
        let comms: Vec<SimpleCommunicator> =
            (0..channels.max(1)).map(|_| world.duplicate()).collect();
        let channels = comms
            .iter()
            .map(|c| Channel::new(Comm(c.as_raw())))
            .collect();
        Ok(MpiTransport {
            channels,
            rank: world.rank() as usize,
            ranks: world.size() as usize,
            mpi: Handles {
                _comms: comms,
                world,
                _universe: universe,
            },
        })
    }

    fn channel(&self, c: usize) -> &Channel {
        &self.channels[c]
    }

    fn wait(
        &self,
        mut req: ffi::MPI_Request,
        idle: &mut dyn FnMut() -> bool,
    ) -> Result<(), Stopped> {
        loop {
            let mut flag: c_int = 0;
            // SAFETY: `req` is a live request of a nonblocking collective whose buffers the
            // caller keeps alive until this returns.
            unsafe { ffi::MPI_Test(&mut req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            if flag != 0 {
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

    #[inline]
    fn progress(&self, channel: usize) -> bool {
        self.channel(channel).progress()
    }

    fn completions(&self, channel: usize) -> &CompletionQueue {
        self.channel(channel).completions()
    }

    fn in_flight(&self, channel: usize) -> usize {
        self.channel(channel).in_flight()
    }

    fn barrier(&self, idle: &mut dyn FnMut() -> bool) -> Result<(), Stopped> {
        // SAFETY: a constant initialised by the MPI library at load time.
        let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
        // SAFETY: the world communicator is valid while `self` lives.
        unsafe { ffi::MPI_Ibarrier(self.mpi.world.as_raw(), &mut req) };
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
        // SAFETY: both buffers live in `bufs`, which outlives the request: it is dropped only
        // after the request completed, and leaked otherwise.
        unsafe {
            ffi::MPI_Iallreduce(
                send.as_ptr().cast(),
                recv.as_mut_ptr().cast(),
                1,
                ty,
                op,
                self.mpi.world.as_raw(),
                &mut req,
            )
        };
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
