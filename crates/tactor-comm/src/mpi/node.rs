//! The node-local path: ranks on one node pass inline messages through rings in memory they all
//! map (an MPI-3 shared window, `MPI_Win_allocate_shared`), not through MPI's point-to-point
//! path. What a many-task runtime's network layer does on a node (GASNet's PSHM, UCX's shared
//! memory transports): a message is a copy into the receiver's ring and a copy out, and the
//! receiver finds it by reading one counter, with no matching, no request and no library lock.
//!
//! It is faster than MPI's path and than plain `MPI_Irecv`/`MPI_Isend` on a node (figures:
//! `docs/measurements.md`, "The node-local path"). Turned off with `TACTOR_COMM_SHM=0`, when
//! every message takes MPI's path.
//!
//! Each rank's part of the window holds, per channel, one ring per rank of its node (itself
//! included): the rings it receives from, in its own memory. Sends to a rank off the node keep
//! the MPI path; inline messages to a rank on the node all take its ring, so they stay in
//! order (a ring that is full queues the rest behind it). Larger payloads, up to a ring's
//! limit (32 KiB less a record header; only [`INLINE_LIMIT`] on nodes of many ranks), take
//! it when it has room for them at once, else MPI's rendezvous.

use super::channel::check;
use crate::ring::{self, Consumer, Probe, Producer};
use crate::transport::gather;
use crate::{Completion, CompletionQueue, Message, INLINE_LIMIT};
use crossbeam_queue::SegQueue;
use mpi::collective::CommunicatorCollectives;
use mpi::ffi;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::AsRaw;
use std::collections::VecDeque;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use try_lock::TryLock;

/// Bytes of one ring's data on a node of up to [`LARGE_RINGS_UP_TO`] ranks: room for 4
/// messages of 32 KiB less a record header (`ring::max_payload`), so that payloads up to that
/// take the ring instead of MPI's rendezvous (a 16 KiB message: 13.7 µs a hop through MPI
/// against 10.9 for raw MPI's own; `docs/measurements.md`, "Payloads above the inline limit
/// on a node"), and small enough that a stream of small messages cycles through lines that
/// stay in cache.
const CAPACITY: usize = 128 * 1024;
/// On larger nodes: room for 4 full inline messages. The rings of every pair of ranks and
/// channel take `channels × ranks² × capacity` bytes of the node: 2 GiB for 128 ranks at
/// the larger capacity.
const SMALL_CAPACITY: usize = 64 * 1024;
const _: () = assert!(ring::max_payload(SMALL_CAPACITY) >= INLINE_LIMIT);
/// The most ranks on one node whose rings get [`CAPACITY`].
const LARGE_RINGS_UP_TO: usize = 32;
/// Messages taken from one ring per progress call, so a flooding sender cannot keep a
/// receiver's progress call from returning.
const BATCH: usize = 64;
/// How often a channel's progress looks at MPI when nothing is in flight there and every
/// inline message comes through the rings (only rendezvous headers can then arrive by MPI):
/// every this many progress calls of the channel.
const MPI_EVERY: u32 = 16;

/// The environment variable that turns the node-local path off (`0`) or on (`1`, the default).
///
/// ```
/// assert_eq!(tactor_comm::mpi::node::ENV, "TACTOR_COMM_SHM");
/// ```
pub const ENV: &str = "TACTOR_COMM_SHM";

/// Whether the user wants the node-local path: `Err` names a value that is neither.
pub(super) fn wanted() -> Result<bool, String> {
    match std::env::var(ENV) {
        Err(std::env::VarError::NotPresent) => Ok(true),
        Ok(v) if v == "1" => Ok(true),
        Ok(v) if v == "0" => Ok(false),
        Ok(v) => Err(format!("{ENV} must be 0 or 1, not '{v}'")),
        Err(std::env::VarError::NotUnicode(v)) => Err(format!("{ENV} must be 0 or 1, not {v:?}")),
    }
}

/// The shared window of this node's ranks.
pub(super) struct Node {
    win: ffi::MPI_Win,
    /// Each node rank's part of the window, 64-byte aligned, in this process's mapping.
    parts: Vec<*mut u8>,
    /// The node index of each world rank on this node.
    index: Vec<Option<usize>>,
    /// The world rank of each node index.
    world: Vec<usize>,
    me: usize,
    /// Bytes of each ring's data.
    capacity: usize,
    _comm: SimpleCommunicator,
}

// SAFETY: the window handle is only used at creation and in `drop`, by one thread (MPI's rule
// for the transport's handles, see `super::Handles`); the part pointers are addresses, used
// by the lanes under their own locks.
unsafe impl Send for Node {}
// SAFETY: as for `Send`.
unsafe impl Sync for Node {}

impl Node {
    /// Creates the window over the ranks of `world` that share this node, with rings for
    /// `channels` channels. Collective over `world`; called before other threads use MPI.
    pub(super) fn new(world: &SimpleCommunicator, channels: usize) -> Node {
        let comm = world.split_shared(world.rank());
        let (size, me) = (comm.size() as usize, comm.rank() as usize);
        let mut ranks = vec![0 as c_int; size];
        comm.all_gather_into(&world.rank(), &mut ranks[..]);
        let mut index = vec![None; world.size() as usize];
        for (i, &r) in ranks.iter().enumerate() {
            index[r as usize] = Some(i);
        }
        let capacity = if size <= LARGE_RINGS_UP_TO {
            CAPACITY
        } else {
            SMALL_CAPACITY
        };
        let bytes = channels * size * ring::region_bytes(capacity) + 64;
        // SAFETY: constants initialised by the MPI library at load time.
        let (mut win, info) = unsafe { (ffi::RSMPI_WIN_NULL, ffi::RSMPI_INFO_NULL) };
        let mut base: *mut u8 = std::ptr::null_mut();
        // SAFETY: `base` receives the address of this rank's part; `comm` is a live
        // communicator; a collective call every rank of the node makes here.
        let rc = unsafe {
            ffi::MPI_Win_allocate_shared(
                bytes as ffi::MPI_Aint,
                1,
                info,
                comm.as_raw(),
                (&mut base as *mut *mut u8).cast::<c_void>(),
                &mut win,
            )
        };
        check(rc, "MPI_Win_allocate_shared");
        let parts: Vec<*mut u8> = (0..size)
            .map(|q| {
                let (mut len, mut unit, mut at) =
                    (0 as ffi::MPI_Aint, 0 as c_int, std::ptr::null_mut::<u8>());
                // SAFETY: `win` is the live window; `q` is a rank of its communicator.
                let rc = unsafe {
                    ffi::MPI_Win_shared_query(
                        win,
                        q as c_int,
                        &mut len,
                        &mut unit,
                        (&mut at as *mut *mut u8).cast::<c_void>(),
                    )
                };
                check(rc, "MPI_Win_shared_query");
                assert!(
                    len as usize >= bytes,
                    "rank {q}'s part of the shared window is {len} bytes, not {bytes}"
                );
                // Every process maps the window at page granularity, so an address rounded up
                // to 64 bytes here is the same memory in every process.
                // SAFETY: at most 63 bytes into a part of `bytes` ≥ 64 bytes.
                unsafe { at.add(at.align_offset(64)) }
            })
            .collect();
        // SAFETY: this rank's own part, `bytes - 64` bytes from its aligned start, which no
        // other rank touches before the barrier below. Zero is an empty ring.
        unsafe { std::ptr::write_bytes(parts[me], 0, bytes - 64) };
        // SAFETY: the live window; one passive epoch over all of it for the window's life, as
        // MPI's memory model asks of direct loads and stores to a shared window.
        let rc = unsafe { ffi::MPI_Win_lock_all(ffi::MPI_MODE_NOCHECK as c_int, win) };
        check(rc, "MPI_Win_lock_all");
        comm.barrier();
        Node {
            win,
            parts,
            index,
            world: ranks.iter().map(|&r| r as usize).collect(),
            me,
            capacity,
            _comm: comm,
        }
    }

    /// The ring `to` receives from `from` on `channel`, in `to`'s part.
    fn ring(&self, channel: usize, to: usize, from: usize) -> *mut u8 {
        let n = self.parts.len();
        // SAFETY: inside part `to`, which holds `channels × n` regions (the caller's channel
        // is one of this node's).
        unsafe { self.parts[to].add((channel * n + from) * ring::region_bytes(self.capacity)) }
    }

    /// The two ends of channel `channel`'s rings that this rank uses.
    pub(super) fn lane(&self, channel: usize) -> Lane {
        let n = self.parts.len();
        // SAFETY: each ring lies in the window, which outlives the lanes (the transport drops
        // its channels first); this rank is the only producer of the rings it writes (its own
        // index in every part) and the only consumer of those in its own part.
        let out = (0..n)
            .map(|q| unsafe { Producer::new(self.ring(channel, q, self.me), self.capacity) })
            .collect();
        // SAFETY: as above.
        let inc: Vec<Consumer> = (0..n)
            .map(|s| unsafe { Consumer::new(self.ring(channel, self.me, s), self.capacity) })
            .collect();
        Lane {
            limit: ring::max_payload(self.capacity),
            whole_job: self.index.iter().all(Option::is_some),
            index: self.index.clone(),
            world: self.world.clone(),
            out: TryLock::new(Out {
                rings: out,
                pending: (0..n).map(|_| VecDeque::new()).collect(),
            }),
            queued: SegQueue::new(),
            probes: inc.iter().map(Consumer::probe).collect(),
            inc: TryLock::new(inc),
            polls: AtomicU32::new(0),
            waiting: AtomicUsize::new(0),
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // Freeing the window waits for every rank of the node, and a rank that unwinds from a
        // panic must not wait for ranks that may be waiting for it: it leaves the window to
        // the end of the process.
        if std::thread::panicking() {
            return;
        }
        // SAFETY: the live window, in its epoch; every lane is gone (the transport's channels
        // drop first); `MPI_Win_free` is collective over the node, which every rank reaches
        // as it drops its transport.
        unsafe {
            ffi::MPI_Win_unlock_all(self.win);
            ffi::MPI_Win_free(&mut self.win);
        }
    }
}

/// A message that did not go into its ring yet.
struct Queued {
    to: usize,
    port: u16,
    data: Vec<u8>,
    token: Option<u64>,
}

struct Out {
    rings: Vec<Producer>,
    /// Per node rank: messages waiting for room in its ring, oldest first.
    pending: Vec<VecDeque<Queued>>,
}

/// One channel's rings: the producing ends (one per node rank) and the consuming ends of the
/// rings in this rank's part. Each side is try-locked, as the MPI path is, with a lock whose
/// release is a plain store: a mutex's release is a locked exchange, which waits for the
/// message just written to reach the other core (its line's ownership) before the sender may
/// go on — here, to poll for the reply. A panic while one is held releases it (the guard's
/// drop), as a poisoned mutex taken anyway did: the rings stay consistent through one (see
/// `ring`).
pub(super) struct Lane {
    /// The largest payload the rings take.
    limit: usize,
    /// Every rank of the job is on this node: MPI carries only payloads above the inline
    /// limit, so the channel need not look at it at every progress call.
    whole_job: bool,
    index: Vec<Option<usize>>,
    world: Vec<usize>,
    out: TryLock<Out>,
    /// Sends from threads that found `out` locked; whoever takes it next writes them first.
    queued: SegQueue<Queued>,
    /// Looks at the rings of `inc` without taking it: an idle poll takes no lock.
    probes: Vec<Probe>,
    inc: TryLock<Vec<Consumer>>,
    /// Progress calls, counted per channel (a count per thread would let a thread that
    /// progresses channels in turn never look at MPI for some of them). Loaded and stored, not
    /// incremented atomically: a count lost to a race only delays a look.
    polls: AtomicU32,
    /// Messages queued or pending, not in a ring yet.
    waiting: AtomicUsize,
}

impl Lane {
    /// The node index of world rank `rank`, when it is on this node.
    #[inline]
    pub(super) fn local(&self, rank: usize) -> Option<usize> {
        self.index.get(rank).copied().flatten()
    }

    /// Sends a message of `len` bytes (at most the rings' limit) made of `parts` to node rank
    /// `to` if its ring takes it now, with nothing queued before it; `false` (nothing sent,
    /// `parts` untouched) otherwise. A message above the inline limit may overtake others, so
    /// its caller then sends it by MPI: queued behind a full ring, a flood of them would cross
    /// one ring-full at a time (measured: 16 KiB messages at 0.34× raw MPI's rate), where
    /// MPI's rendezvous pipelines them.
    pub(super) fn try_send_parts(
        &self,
        to: usize,
        port: u16,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
        token: Option<u64>,
        cq: &CompletionQueue,
    ) -> bool {
        if len > self.limit {
            return false;
        }
        let Some(mut out) = self.out.try_lock() else {
            return false;
        };
        self.write_queued(&mut out, cq);
        if !out.pending[to].is_empty() || !out.rings[to].push_parts(port, len, parts) {
            return false;
        }
        if let Some(token) = token {
            cq.push(Completion::Sent { token });
        }
        true
    }

    /// Offers the oldest message from world rank `source` in its ring to `want`, in place
    /// (see [`crate::Transport::take_inline`]). `None` when `source` is not on this node, its
    /// ring is empty or another thread is reading the rings.
    pub(super) fn take_from(
        &self,
        source: usize,
        want: &mut dyn FnMut(u16, &[u8]) -> bool,
    ) -> Option<bool> {
        let s = self.local(source)?;
        if !self.probes[s].ready() {
            return None;
        }
        self.inc.try_lock()?[s].take_with(want)
    }

    /// Whether every rank of the job is on this node.
    pub(super) fn whole_job(&self) -> bool {
        self.whole_job
    }

    /// Messages sent that are not in their ring yet.
    pub(super) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Sends an inline message to node rank `to`.
    pub(super) fn send(
        &self,
        to: usize,
        port: u16,
        data: Vec<u8>,
        token: Option<u64>,
        cq: &CompletionQueue,
    ) {
        debug_assert!(data.len() <= INLINE_LIMIT);
        let q = Queued {
            to,
            port,
            data,
            token,
        };
        match self.out.try_lock() {
            Some(mut out) => {
                self.write_queued(&mut out, cq);
                if !write(&mut out, &q, cq) {
                    self.waiting.fetch_add(1, Ordering::Relaxed);
                    out.pending[to].push_back(q);
                }
            }
            None => {
                self.waiting.fetch_add(1, Ordering::Relaxed);
                self.queued.push(q);
            }
        }
    }

    /// Sends an inline message of `len` bytes made of `parts` to node rank `to`: copied
    /// straight into its ring when the ring is free to take it now
    /// ([`Lane::try_send_parts`]), else gathered into a buffer that waits its turn as
    /// [`Lane::send`]'s do.
    pub(super) fn send_parts(
        &self,
        to: usize,
        port: u16,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
        token: Option<u64>,
        cq: &CompletionQueue,
    ) {
        debug_assert!(len <= INLINE_LIMIT);
        if !self.try_send_parts(to, port, len, parts, token, cq) {
            self.send(to, port, gather(len, parts), token, cq);
        }
    }

    /// Moves queued sends behind those pending for the same rank, writing what fits.
    fn write_queued(&self, out: &mut Out, cq: &CompletionQueue) -> bool {
        let mut any = false;
        while let Some(q) = self.queued.pop() {
            if write(out, &q, cq) {
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                any = true;
            } else {
                out.pending[q.to].push_back(q);
            }
        }
        any
    }

    /// Writes what waits and delivers what arrived: whether anything happened, and whether
    /// this call is the channel's turn to look at MPI as well (every `MPI_EVERY`th).
    pub(super) fn progress(
        &self,
        source_cq: &CompletionQueue,
        offer: &mut dyn FnMut(usize, u16, &[u8]) -> bool,
    ) -> (bool, bool) {
        let mut any = false;
        if self.waiting() > 0 {
            if let Some(mut out) = self.out.try_lock() {
                for to in 0..out.pending.len() {
                    while let Some(q) = out.pending[to].pop_front() {
                        if !put(&mut out, &q, source_cq) {
                            out.pending[to].push_front(q);
                            break;
                        }
                        self.waiting.fetch_sub(1, Ordering::Relaxed);
                        any = true;
                    }
                }
                any |= self.write_queued(&mut out, source_cq);
            }
        }
        let polls = self.polls.load(Ordering::Relaxed).wrapping_add(1);
        self.polls.store(polls, Ordering::Relaxed);
        let look = polls % MPI_EVERY == 0;
        if !self.probes.iter().any(Probe::ready) {
            return (any, look);
        }
        if let Some(mut inc) = self.inc.try_lock() {
            for (s, ring) in inc.iter_mut().enumerate() {
                let source = self.world[s];
                for _ in 0..BATCH {
                    let mut take = |port, data: &[u8]| {
                        if !offer(source, port, data) {
                            let data = data.to_vec();
                            source_cq.push(Completion::Received(Message { source, port, data }));
                        }
                        true
                    };
                    if ring.take_with(&mut take).is_none() {
                        break;
                    }
                    any = true;
                }
            }
        }
        (any, look)
    }
}

/// Writes `q` into its ring unless messages wait before it there or the ring is full.
fn write(out: &mut Out, q: &Queued, cq: &CompletionQueue) -> bool {
    out.pending[q.to].is_empty() && put(out, q, cq)
}

/// Writes `q` into its ring if it has room.
fn put(out: &mut Out, q: &Queued, cq: &CompletionQueue) -> bool {
    if !out.rings[q.to].push(q.port, &q.data) {
        return false;
    }
    if let Some(token) = q.token {
        cq.push(Completion::Sent { token });
    }
    true
}
