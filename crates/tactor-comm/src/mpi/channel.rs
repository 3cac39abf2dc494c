//! One MPI channel: a duplicated communicator, a ring of pre-posted any-source receives for
//! active-message headers, the requests in flight, and a completion queue.
//!
//! Every MPI call is made by the thread holding the transport's library lock ([`Lib`]), taken
//! with a try-lock only: a sender that gets it starts its send at once, one that does not leaves
//! the send in the channel's lock-free queue for the holder to start (see `super` for why the
//! library is used at `MPI_THREAD_SERIALIZED`).

use super::node::Lane;
use crate::transport::gather;
use crate::wire::{Body, Header, HEADER, INLINE_LIMIT};
use crate::{CommError, Completion, CompletionQueue, Message};
use crossbeam_queue::SegQueue;
use mpi::ffi;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// The tag of active-message headers. Payload transfers use tags from [`FIRST_BODY_TAG`].
const TAG_AM: c_int = 1;
const FIRST_BODY_TAG: u32 = 2;
/// MPI guarantees tags up to 32767; body tags cycle below that. Two bodies from one sender on
/// one channel share a tag only 32765 rendezvous sends apart, and a receiver matches each by
/// (source, tag) in posting order, so even then they complete in order.
const BODY_TAGS: u32 = 32765;
/// Header receives pre-posted per channel. A flood beyond this waits in MPI's unexpected
/// queue (one more copy), never lost.
const DEPTH: usize = 64;
const RECV_BYTES: usize = HEADER + INLINE_LIMIT;

/// The lock every MPI call is made under: the library runs at `MPI_THREAD_SERIALIZED`, which
/// allows calls from any thread, one at a time. Only ever try-locked on the hot paths.
pub type Lib = Arc<Mutex<()>>;

/// Tries to take the library lock; `None` when another thread holds it.
pub fn try_lib(lib: &Lib) -> Option<MutexGuard<'_, ()>> {
    match lib.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::WouldBlock) => None,
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
    }
}

/// An MPI communicator handle, shared by every thread.
#[derive(Clone, Copy)]
pub struct Comm(pub ffi::MPI_Comm);
// SAFETY: the handle is only passed to MPI under the library lock (`Lib`), so calls on it
// never overlap, as `MPI_THREAD_SERIALIZED` requires; between calls it is plain data.
unsafe impl Send for Comm {}
// SAFETY: as for `Send`.
unsafe impl Sync for Comm {}

/// A send not yet started: the sender did not get the library lock.
struct Outgoing {
    dest: usize,
    tag: c_int,
    buf: Vec<u8>,
    token: Option<u64>,
}

struct Posted {
    buf: Box<[u8]>,
    req: ffi::MPI_Request,
}

struct State {
    /// Header receives, in posting order from `head`: MPI matches arrivals to them in that
    /// order, so testing the head first delivers them in arrival order.
    posted: Vec<Posted>,
    head: usize,
    /// Requests in flight and what each one holds (parallel vectors, for `MPI_Testsome`).
    /// Sends in flight, oldest first. MPI completes one peer's sends in order, so testing the
    /// oldest until one is unfinished costs one test per finished send, whatever the backlog
    /// (testing them all, as `MPI_Testsome` does, is quadratic in a flood).
    sends: VecDeque<(ffi::MPI_Request, Vec<u8>, Option<u64>)>,
    /// Payload receives in flight and what each one holds (parallel vectors, for
    /// `MPI_Testsome`).
    reqs: Vec<ffi::MPI_Request>,
    bodies: Vec<Message>,
    indices: Vec<c_int>,
    /// Calls since sends and payloads were last tested.
    deferred: u32,
    /// Header receives consumed and not posted again yet: the ones just before `head`.
    unposted: usize,
}

/// One channel (see the crate docs). Lock-free on the send path; `progress` uses a try-lock.
pub struct Channel {
    comm: Comm,
    lib: Lib,
    /// Touched only by the holder of `lib` ([`Channel::state`]).
    state: UnsafeCell<State>,
    /// Sends from threads that did not get the library lock, started by the next holder.
    fresh: SegQueue<Outgoing>,
    cq: CompletionQueue,
    in_flight: AtomicUsize,
    next_tag: AtomicU32,
    /// The node-local path, when this channel has one (see `super::node`).
    lane: Option<Lane>,
}

// SAFETY: the raw handles inside `State` are only touched under the library lock, and MPI (at
// `MPI_THREAD_SERIALIZED`) lets any thread use them, one at a time.
unsafe impl Send for State {}
// SAFETY: `Channel`'s only non-`Sync` field is `state`, reached only through `Channel::state`
// under the library lock.
unsafe impl Sync for Channel {}

pub(super) fn check(rc: c_int, what: &str) {
    // The MPI library's default error handler aborts the job before returning an error; this
    // catches a library configured otherwise.
    assert_eq!(rc, 0, "{what} failed with MPI error {rc}");
}

fn bytes() -> ffi::MPI_Datatype {
    // SAFETY: a constant initialised by the MPI library at load time.
    unsafe { ffi::RSMPI_UINT8_T }
}

impl Channel {
    /// A channel on `comm` (a communicator of its own) with its header receives posted, and
    /// with `lane` its node-local path. Called while no other thread uses MPI (at
    /// initialisation).
    pub fn new(comm: Comm, lib: Lib, lane: Option<Lane>) -> Channel {
        let mut posted: Vec<Posted> = (0..DEPTH)
            .map(|_| Posted {
                buf: vec![0u8; RECV_BYTES].into_boxed_slice(),
                // SAFETY: a constant initialised by the MPI library at load time.
                req: unsafe { ffi::RSMPI_REQUEST_NULL },
            })
            .collect();
        for p in &mut posted {
            post(comm, p);
        }
        Channel {
            comm,
            lib,
            state: UnsafeCell::new(State {
                posted,
                head: 0,
                sends: VecDeque::new(),
                reqs: Vec::new(),
                bodies: Vec::new(),
                indices: Vec::new(),
                deferred: 0,
                unposted: 0,
            }),
            fresh: SegQueue::new(),
            cq: CompletionQueue::default(),
            in_flight: AtomicUsize::new(0),
            next_tag: AtomicU32::new(0),
            lane,
        }
    }

    pub fn completions(&self) -> &CompletionQueue {
        &self.cq
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed) + self.lane.as_ref().map_or(0, Lane::waiting)
    }

    /// Starts sending the `len` bytes of `parts` to `dest`'s `port`: straight into `dest`'s
    /// ring when it is on this node and the message is inline (or larger, and the ring takes
    /// it at once), else gathered in one buffer through MPI as [`Channel::send`] would.
    pub fn send_parts(
        &self,
        dest: usize,
        port: u16,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
        token: Option<u64>,
    ) -> Result<(), CommError> {
        if let Some((lane, to)) = self.lane.as_ref().and_then(|l| Some((l, l.local(dest)?))) {
            if len <= INLINE_LIMIT {
                lane.send_parts(to, port, len, parts, token, &self.cq);
                return Ok(());
            }
            if lane.try_send_parts(to, port, len, parts, token, &self.cq) {
                return Ok(());
            }
        }
        // Not on this node, or the ring would not take it now: through MPI (not through
        // `send`, which would look up the lane and try the ring a second time).
        self.send_by_mpi(dest, port, gather(len, parts), token)
    }

    /// Starts sending `data` to `dest`'s `port`: into `dest`'s ring when it is on this node
    /// and the message is inline (or larger, and the ring takes it at once), else one message
    /// when it fits inline, else a header and then the payload as its own transfer.
    pub fn send(
        &self,
        dest: usize,
        port: u16,
        data: Vec<u8>,
        token: Option<u64>,
    ) -> Result<(), CommError> {
        if let Some((lane, to)) = self.lane.as_ref().and_then(|l| Some((l, l.local(dest)?))) {
            if data.len() <= INLINE_LIMIT {
                lane.send(to, port, data, token, &self.cq);
                return Ok(());
            }
            let len = data.len();
            if lane.try_send_parts(
                to,
                port,
                len,
                &mut std::iter::once(&data[..]),
                token,
                &self.cq,
            ) {
                return Ok(());
            }
        }
        self.send_by_mpi(dest, port, data, token)
    }

    /// Starts sending `data` to `dest`'s `port` through MPI: one message when it fits inline,
    /// else a header and then the payload as its own transfer.
    fn send_by_mpi(
        &self,
        dest: usize,
        port: u16,
        data: Vec<u8>,
        token: Option<u64>,
    ) -> Result<(), CommError> {
        let len = u32::try_from(data.len()).map_err(|_| CommError::TooLarge(data.len()))?;
        if data.len() <= INLINE_LIMIT {
            let header = Header {
                port,
                len,
                body: Body::Inline,
            };
            // The header goes last, so a buffer made with spare capacity
            // (`crate::buffer`) is sent as it is, without a copy.
            let mut buf = data;
            buf.extend_from_slice(&header.encode());
            self.isend(dest, TAG_AM, buf, token);
        } else {
            let tag = (FIRST_BODY_TAG + self.next_tag.fetch_add(1, Ordering::Relaxed) % BODY_TAGS)
                as c_int;
            let header = Header {
                port,
                len,
                body: Body::Rendezvous { tag },
            };
            // The header first: MPI keeps one sender's messages in order, so the receiver sees
            // the header before the payload can match anything.
            self.isend(dest, TAG_AM, header.encode().to_vec(), None);
            self.isend(dest, tag, data, token);
        }
        Ok(())
    }

    fn isend(&self, dest: usize, tag: c_int, buf: Vec<u8>, token: Option<u64>) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let o = Outgoing {
            dest,
            tag,
            buf,
            token,
        };
        // Start it now if the library is free (after any queued before it): the common case
        // pays no queue hop.
        match try_lib(&self.lib) {
            Some(lib) => self.start_sends(self.state(&lib), Some(o)),
            None => self.fresh.push(o),
        }
    }

    /// The channel's state, reachable only with the library lock held: the guard's borrow
    /// keeps the lock held while the state is in use.
    #[allow(clippy::mut_from_ref)]
    fn state<'g>(&'g self, _lib: &'g MutexGuard<'_, ()>) -> &'g mut State {
        // SAFETY: the state is only reached through this function, which needs the library
        // lock's guard, and each caller takes it once per guard (no two live `&mut`); the
        // lock is one for all channels, so no other thread touches the state meanwhile.
        unsafe { &mut *self.state.get() }
    }

    /// Starts the queued sends, then `now`. Called with the library lock held.
    fn start_sends(&self, st: &mut State, now: Option<Outgoing>) {
        let queued = std::iter::from_fn(|| self.fresh.pop());
        for o in queued.chain(now) {
            // SAFETY: a constant initialised by the MPI library at load time.
            let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
            // SAFETY: the library lock is held; `o.buf` moves into `sends` and lives
            // until the request completes (its heap block does not move with the vector); its
            // length fits `c_int` (checked by `send`); `o.dest` is a rank of `comm` (checked by
            // the transport).
            let rc = unsafe {
                ffi::MPI_Isend(
                    o.buf.as_ptr().cast(),
                    o.buf.len() as c_int,
                    bytes(),
                    o.dest as c_int,
                    o.tag,
                    self.comm.0,
                    &mut req,
                )
            };
            check(rc, "MPI_Isend");
            st.sends.push_back((req, o.buf, o.token));
        }
        // A sender that floods keeps the backlog short and the network moving.
        if st.sends.len() > DEPTH {
            self.complete_sends(st);
        }
    }

    /// Retires finished sends, oldest first.
    fn complete_sends(&self, st: &mut State) -> bool {
        let mut any = false;
        while let Some((req, _, _)) = st.sends.front_mut() {
            let mut flag: c_int = 0;
            // SAFETY: the library lock is held; a live send request whose buffer is kept
            // beside it.
            check(
                unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) },
                "MPI_Test",
            );
            if flag == 0 {
                break;
            }
            let (_, _buf, token) = st.sends.pop_front().expect("front exists");
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            if let Some(token) = token {
                self.cq.push(Completion::Sent { token });
            }
            any = true;
        }
        any
    }

    /// See [`crate::Transport::take_inline`].
    pub fn take_inline(
        &self,
        source: usize,
        want: &mut dyn FnMut(u16, &[u8]) -> bool,
    ) -> Option<bool> {
        self.lane.as_ref()?.take_from(source, want)
    }

    /// See [`crate::Transport::progress`]. The node-local path first: it costs a read per
    /// ring when nothing came, where a look at MPI costs a pass through its progress engine.
    pub fn progress(&self) -> bool {
        self.progress_offering(&mut |_, _, _| false)
    }

    /// See [`crate::Transport::progress_offering`].
    pub fn progress_offering(&self, offer: &mut dyn FnMut(usize, u16, &[u8]) -> bool) -> bool {
        let Some(lane) = &self.lane else {
            return self.progress_mpi();
        };
        let (got, look) = lane.progress(&self.cq, offer);
        let mpi_due =
            self.in_flight.load(Ordering::Relaxed) > 0 || look || !(got || lane.whole_job());
        if mpi_due {
            self.progress_mpi() | got
        } else {
            got
        }
    }

    fn progress_mpi(&self) -> bool {
        let Some(lib) = try_lib(&self.lib) else {
            return false;
        };
        let st = self.state(&lib);
        self.start_sends(st, None);
        repost(self.comm, st);
        if self.receive_headers(st) {
            // Back to the caller with the message; sends and payloads are tested on the next
            // call, or on every 8th during a stream of arrivals (so they cannot starve).
            st.deferred += 1;
            if st.deferred < 8 {
                return true;
            }
        }
        st.deferred = 0;
        let sent = self.complete_sends(st);
        self.complete_bodies(st) | sent
    }

    /// Delivers the oldest header if it arrived. One per call: testing the next one costs a
    /// pass through MPI's progress engine whenever it has not arrived (measured: testing the
    /// whole ring with `MPI_Testsome` instead halves the 1-chain latency), and that pass would
    /// sit between this message and the code waiting for it; the caller polls again anyway.
    fn receive_headers(&self, st: &mut State) -> bool {
        {
            let head = st.head;
            let p = &mut st.posted[head];
            let (mut flag, mut status) = (0 as c_int, empty_status());
            // SAFETY: the library lock is held (by `progress`); `p.req` is a receive posted on
            // `p.buf`, which stays allocated and untouched until the request completes.
            check(
                unsafe { ffi::MPI_Test(&mut p.req, &mut flag, &mut status) },
                "MPI_Test",
            );
            if flag == 0 {
                return false;
            }
            let n = received(&status);
            let source = status.MPI_SOURCE as usize;
            match Header::decode(&p.buf[..n]) {
                Some(Header {
                    port,
                    body: Body::Inline,
                    len,
                }) if n == HEADER + len as usize => {
                    let data = p.buf[..len as usize].to_vec();
                    self.cq
                        .push(Completion::Received(Message { source, port, data }));
                }
                Some(Header {
                    port,
                    len,
                    body: Body::Rendezvous { tag },
                }) => {
                    let mut buf = vec![0u8; len as usize];
                    // SAFETY: a constant initialised by the MPI library at load time.
                    let mut req = unsafe { ffi::RSMPI_REQUEST_NULL };
                    // SAFETY: `buf` moves into `bodies` with the request and stays there until
                    // it completes; `len` came from a u32 the sender checked against `c_int`.
                    let rc = unsafe {
                        ffi::MPI_Irecv(
                            buf.as_mut_ptr().cast(),
                            len as c_int,
                            bytes(),
                            source as c_int,
                            tag,
                            self.comm.0,
                            &mut req,
                        )
                    };
                    check(rc, "MPI_Irecv");
                    self.in_flight.fetch_add(1, Ordering::Relaxed);
                    st.reqs.push(req);
                    st.bodies.push(Message {
                        source,
                        port,
                        data: buf,
                    });
                }
                _ => panic!("rank {source} sent a message this layer cannot read ({n} bytes)"),
            }
            // Reposted on the next call, after the caller handled this message: a handler
            // that answers (a chain, a timestep's exchange) sends before paying for the
            // receive, as a program written on MPI would.
            st.unposted += 1;
            st.head = (head + 1) % st.posted.len();
            true
        }
    }

    fn complete_bodies(&self, st: &mut State) -> bool {
        if st.reqs.is_empty() {
            return false;
        }
        st.indices.resize(st.reqs.len(), 0);
        let mut done: c_int = 0;
        // SAFETY: `reqs` holds live requests (completed ones are removed below, so none is
        // null) whose buffers are kept in `bodies`; `indices` has room for every request.
        let rc = unsafe {
            ffi::MPI_Testsome(
                st.reqs.len() as c_int,
                st.reqs.as_mut_ptr(),
                &mut done,
                st.indices.as_mut_ptr(),
                ffi::RSMPI_STATUSES_IGNORE,
            )
        };
        check(rc, "MPI_Testsome");
        if done <= 0 {
            return false;
        }
        let mut finished: Vec<usize> = st.indices[..done as usize]
            .iter()
            .map(|&i| i as usize)
            .collect();
        // Highest first, so each swap_remove moves an entry that is not finished.
        finished.sort_unstable_by(|a, b| b.cmp(a));
        for i in finished {
            st.reqs.swap_remove(i);
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
            self.cq.push(Completion::Received(st.bodies.swap_remove(i)));
        }
        true
    }

    /// Finishes what is in flight (for up to `patience`) and withdraws the header receives, so
    /// the communicator can be freed and MPI finalised. Sends still unfinished after that are
    /// left to MPI (their buffers are leaked rather than freed under it).
    pub fn shut_down(&self, patience: Duration) {
        let start = Instant::now();
        while self.in_flight() > 0 && start.elapsed() < patience {
            self.progress();
            std::thread::yield_now();
        }
        let lib = self.lib.lock().unwrap_or_else(|p| p.into_inner());
        let st = self.state(&lib);
        if !st.bodies.is_empty() || !st.sends.is_empty() {
            std::mem::forget(std::mem::take(&mut st.bodies));
            std::mem::forget(std::mem::take(&mut st.sends));
        }
        repost(self.comm, st);
        for p in &mut st.posted {
            // SAFETY: each posted receive is live (the consumed ones were posted again just
            // above); cancelling and waiting completes it, after which its buffer is no
            // longer used by MPI.
            unsafe {
                ffi::MPI_Cancel(&mut p.req);
                ffi::MPI_Wait(&mut p.req, ffi::RSMPI_STATUS_IGNORE);
            }
        }
    }
}

/// Posts again the header receives consumed since the last call, oldest first: MPI matches
/// arrivals in posting order, so the ring stays in the order `receive_headers` tests it.
fn repost(comm: Comm, st: &mut State) {
    let n = st.posted.len();
    while st.unposted > 0 {
        let slot = (st.head + n - st.unposted) % n;
        post(comm, &mut st.posted[slot]);
        st.unposted -= 1;
    }
}

fn post(comm: Comm, p: &mut Posted) {
    // SAFETY: `p.buf` is owned by the channel and not read until this receive completes;
    // RECV_BYTES fits `c_int`.
    let rc = unsafe {
        ffi::MPI_Irecv(
            p.buf.as_mut_ptr().cast(),
            RECV_BYTES as c_int,
            bytes(),
            ffi::RSMPI_ANY_SOURCE,
            TAG_AM,
            comm.0,
            &mut p.req,
        )
    };
    check(rc, "MPI_Irecv");
}

fn empty_status() -> ffi::MPI_Status {
    // SAFETY: MPI_Status is a plain C struct of integers, valid when zeroed.
    unsafe { std::mem::zeroed() }
}

fn received(status: &ffi::MPI_Status) -> usize {
    let mut n: c_int = 0;
    // SAFETY: `status` was filled by a completed receive.
    check(
        unsafe { ffi::MPI_Get_count(status, bytes(), &mut n) },
        "MPI_Get_count",
    );
    n.max(0) as usize
}
