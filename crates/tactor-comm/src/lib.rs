//! Tactor's communication layer: what an asynchronous many-task runtime needs from the network,
//! behind one [`Transport`] interface.
//!
//! The layer follows the four needs of a task runtime's network (seed 002, §3.3 and §5):
//! - **Unexpected one-sided messages.** [`Transport::send`] delivers a message to a *port* on
//!   another rank without the receiver having posted anything for it. Payloads up to
//!   [`INLINE_LIMIT`] travel inline with the header; larger ones follow as a separate
//!   transfer that the receiver starts when the header arrives (rendezvous).
//! - **Queue-based completion.** Received messages and finished sends come out of a lock-free
//!   multi-producer multi-consumer [`CompletionQueue`] per channel, never from testing a pool
//!   of requests in user code.
//! - **Explicit progress.** [`Transport::progress`] is called by idle workers. It takes the
//!   channel's state with a try-lock only: a thread that finds another one progressing goes
//!   back to other work at once.
//! - **Channels.** A transport has several independent channels ("devices"), each with its own
//!   resources (an MPI communicator, receive buffers, a completion queue, a lock), so threads
//!   mapped to different channels never serialise on one another.
//!
//! Backends: [`loopback::Loopback`] (in-process ranks, for tests and shared-memory runs) and,
//! with the `mpi` feature, `mpi::MpiTransport` (rsmpi over the system's MPI). A new backend
//! implements [`Transport`] in a module of its own. Between ranks on one node the MPI backend
//! passes inline messages through [`ring`]s in an MPI-3 shared window rather than MPI's
//! point-to-point path (`mpi::node`; `TACTOR_COMM_SHM=0` turns that off).
//!
//! ```
//! use tactor_comm::{loopback::Loopback, Completion, Transport};
//!
//! let ranks = Loopback::world(2, 1);
//! ranks[0].send(0, 1, 7, b"hello".to_vec(), Some(42)).unwrap();
//! // The receiver finds the message by polling its channel.
//! let msg = loop {
//!     if let Some(Completion::Received(m)) = ranks[1].poll(0) {
//!         break m;
//!     }
//! };
//! assert_eq!((msg.source, msg.port, &msg.data[..]), (0, 7, &b"hello"[..]));
//! // The sender learns that its buffer is free through its own completion queue.
//! assert!(matches!(ranks[0].poll(0), Some(Completion::Sent { token: 42 })));
//! ```

#![warn(missing_docs)]
pub mod agree;
pub mod launcher;
pub mod loopback;
#[cfg(feature = "mpi")]
pub mod mpi;
mod queue;
pub mod ring;
mod transport;
#[cfg(feature = "mpi")]
mod wire;

pub use queue::CompletionQueue;
pub use transport::{Reduce, Stopped, Transport};

/// Spare capacity a send buffer should have so that [`Transport::send`] never reallocates or
/// copies it (the layer appends its header to inline payloads).
pub const SPARE: usize = 16;

/// A buffer for a message of `len` bytes, with room for the layer's header.
///
/// ```
/// let mut b = tactor_comm::buffer(100);
/// b.extend_from_slice(&[1; 100]);
/// assert!(b.capacity() >= 100 + tactor_comm::SPARE);
/// ```
pub fn buffer(len: usize) -> Vec<u8> {
    Vec::with_capacity(len.saturating_add(SPARE))
}

/// Payloads up to this many bytes travel inline with the header in one network message;
/// larger ones follow as a second transfer that the receiver posts when the header arrives.
/// 8 KiB: above Open MPI's shared-memory eager limit (4 KiB) the MPI library already switches
/// to its own rendezvous, so inlining more would only grow every pre-posted receive buffer.
pub const INLINE_LIMIT: usize = 8192;

/// A message delivered to a port of this rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The rank that sent it.
    pub source: usize,
    /// The port it was sent to: the receiver's dispatch key, chosen by the program.
    pub port: u16,
    /// The payload.
    pub data: Vec<u8>,
}

/// What comes out of a channel's [`CompletionQueue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// A message arrived.
    Received(Message),
    /// A send that asked for notification finished: its buffer is released and the message
    /// will be delivered.
    Sent {
        /// The token given to [`Transport::send`].
        token: u64,
    },
}

/// Why the layer refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum CommError {
    /// The channel index is not below [`Transport::channels`].
    #[error("channel {channel} does not exist (this transport has {channels})")]
    NoChannel {
        /// The index asked for.
        channel: usize,
        /// How many there are.
        channels: usize,
    },
    /// The destination is not a rank of this job.
    #[error("rank {rank} does not exist (the job has {ranks} ranks)")]
    NoRank {
        /// The rank asked for.
        rank: usize,
        /// How many ranks the job has.
        ranks: usize,
    },
    /// One message cannot carry this many bytes (MPI counts are 32-bit).
    #[error("a message of {0} bytes is larger than the 2 GiB one message can carry")]
    TooLarge(usize),
    /// The network backend could not start.
    #[error("{0}")]
    Init(String),
    /// The ranks did not agree to start the job (see [`agree`]).
    #[error("{0}")]
    Verdict(#[from] agree::Verdict),
}

/// The transport of a job that a launcher started as `size` ranks, with `channels` channels,
/// once every rank agreed to `part` ([`agree`]): MPI when this crate has the `mpi` feature.
/// `program` names the command in the error of a build without it.
///
/// ```
/// # #[cfg(not(feature = "mpi"))]
/// # {
/// let part = tactor_comm::agree::Joining::Config(vec![]);
/// let err = tactor_comm::connect(1, 2, "demo", &part).err().unwrap();
/// assert!(err.to_string().contains("without MPI"));
/// # }
/// ```
pub fn connect(
    channels: usize,
    size: usize,
    program: &str,
    part: &agree::Joining,
) -> Result<Box<dyn Transport>, CommError> {
    #[cfg(feature = "mpi")]
    {
        let _ = (size, program);
        mpi::MpiTransport::join(channels, part).map(|t| Box::new(t) as Box<dyn Transport>)
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = (channels, part);
        Err(CommError::Init(format!(
            "launched as one of {size} ranks, but this {program} was built without MPI (cargo feature `mpi`); rebuild with default features"
        )))
    }
}

/// [`connect`] for a process that is one thread all along: MPI then runs at
/// `MPI_THREAD_SINGLE` (`mpi::MpiTransport::join_one_thread`, without the MPI library's
/// internal locks).
///
/// # Safety
///
/// No other thread may exist while it connects, and only the calling thread may ever use the
/// transport.
///
/// ```
/// # #[cfg(not(feature = "mpi"))]
/// # {
/// let part = tactor_comm::agree::Joining::Config(vec![]);
/// // SAFETY: this example's thread is the only one.
/// assert!(unsafe { tactor_comm::connect_one_thread(1, 2, "demo", &part) }.is_err());
/// # }
/// ```
pub unsafe fn connect_one_thread(
    channels: usize,
    size: usize,
    program: &str,
    part: &agree::Joining,
) -> Result<Box<dyn Transport>, CommError> {
    #[cfg(feature = "mpi")]
    {
        let _ = (size, program);
        // SAFETY: passed on from this function's contract.
        unsafe { mpi::MpiTransport::join_one_thread(channels, part) }
            .map(|t| Box::new(t) as Box<dyn Transport>)
    }
    #[cfg(not(feature = "mpi"))]
    {
        connect(channels, size, program, part)
    }
}
