//! Bale's PEs on several ranks: when an MPI launcher started this process as one of several
//! ranks, the selector's [`Link`] is `tactor-comm`'s transport, a channel per worker (at
//! most four), every selector message on one port; the apps' checks gather what every rank
//! found on another.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tactor::actor::Link;
use tactor_comm::{Completion, Message, Reduce, Transport};

/// The port selector batches and termination messages use.
const PORT: u16 = 1;

/// The port of [`Cluster::gather`]'s messages.
const GATHER: u16 = 2;

/// The port of the exstack baseline's parcels.
const PARCELS: u16 = 3;

/// Bytes before a parcel's data: exchange, phase, source PE, and the destination's local
/// index with the "more" flag in its top bit.
pub const PARCEL_HEADER: usize = 16;

/// A parcel of the exstack baseline that arrived for a PE of this rank: its data is the
/// message after [`PARCEL_HEADER`] bytes.
struct Parcel {
    exchange: u32,
    phase: u32,
    more: bool,
    message: Vec<u8>,
}

/// Appends the plain values `bytes` holds (as another rank sent them) to `out`.
pub fn extend_from_bytes<T: bytemuck::Pod>(out: &mut Vec<T>, bytes: &[u8]) {
    let at = out.len();
    out.resize(
        at + bytes.len() / std::mem::size_of::<T>().max(1),
        T::zeroed(),
    );
    bytemuck::cast_slice_mut(&mut out[at..]).copy_from_slice(bytes);
}

/// Completions one poll hands over at most, so that a PE gets back to its own work.
const BUDGET: usize = 64;

/// This process's place in a job of several ranks.
pub struct Cluster {
    transport: Box<dyn Transport>,
    /// Gathers this rank began, numbering their messages: a rank that finished one gather
    /// may send for the next before a slower rank got all of the first.
    gathers: AtomicU64,
    /// Gather messages that arrived while this rank waited for another gather's, or while a
    /// PE polled for selector batches.
    early: Mutex<Vec<Message>>,
    /// Exstack exchanges begun, numbering them (every rank begins them in the same order).
    exchanges: AtomicU32,
    /// Per PE of this rank, parcels that arrived for it and were not taken yet.
    parcels: Vec<Mutex<Vec<Parcel>>>,
}

impl Cluster {
    /// Joins the job this process was launched into, with a channel per worker (at most
    /// four). `Ok(None)` when the process runs on its own or as the only rank.
    pub fn join(workers: usize) -> Result<Option<Arc<Cluster>>, String> {
        let Some((size, _)) = tactor_comm::launcher::job().filter(|&(size, _)| size > 1) else {
            return Ok(None);
        };
        start(workers.clamp(1, 4), size).map(|transport| {
            Some(Arc::new(Cluster {
                transport,
                gathers: AtomicU64::new(0),
                early: Mutex::new(Vec::new()),
                exchanges: AtomicU32::new(0),
                parcels: (0..workers).map(|_| Mutex::new(Vec::new())).collect(),
            }))
        })
    }

    /// Combines `value` over the ranks.
    pub fn all_reduce(&self, op: Reduce, value: u64) -> u64 {
        self.transport
            .all_reduce(op, value, &mut || true)
            .expect("never abandoned")
    }

    /// With `workers` PEs on every rank: all the PEs, and the first of this rank's.
    pub fn pes(&self, workers: usize) -> (usize, usize) {
        (workers * self.ranks(), workers * self.rank())
    }

    /// This cluster as a selector's link.
    pub fn link(self: &Arc<Self>) -> Arc<dyn Link> {
        self.clone()
    }

    /// Every rank's `bytes`, in rank order (this rank's own included), once each rank called
    /// this with its own: collective, called by one thread per rank in the same order on every
    /// rank. For checks, outside timed parts: every rank sends its bytes to every other one.
    pub fn gather(&self, bytes: Vec<u8>) -> Vec<Vec<u8>> {
        let (me, ranks) = (self.rank(), self.ranks());
        let n = self.gathers.fetch_add(1, Ordering::Relaxed);
        let mut framed = n.to_le_bytes().to_vec();
        framed.extend_from_slice(&bytes);
        for r in (0..ranks).filter(|&r| r != me) {
            if let Err(e) = self.transport.send(0, r, GATHER, framed.clone(), None) {
                tactor_cli::say!("error: rank {me}: {e}");
                self.transport.abort(1);
            }
        }
        let mut got: Vec<Option<Vec<u8>>> = vec![None; ranks];
        got[me] = Some(bytes);
        let mut missing = ranks - 1;
        let mut take = |m: Message, missing: &mut usize| -> Option<Message> {
            let ours = m.data.len() >= 8 && m.data[..8] == n.to_le_bytes();
            if !ours || got[m.source].is_some() {
                return Some(m);
            }
            got[m.source] = Some(m.data[8..].to_vec());
            *missing -= 1;
            None
        };
        let early = std::mem::take(&mut *self.early.lock().unwrap_or_else(|e| e.into_inner()));
        let mut later: Vec<Message> = early
            .into_iter()
            .filter_map(|m| take(m, &mut missing))
            .collect();
        while missing > 0 {
            match self.transport.poll(0) {
                Some(Completion::Received(m)) if m.port == GATHER => {
                    later.extend(take(m, &mut missing));
                }
                // Another rank that gathered already may be in its next exchange (toposort's
                // exstack gathers between two).
                Some(Completion::Received(m)) if m.port == PARCELS => self.file(m),
                Some(_) => {}
                None => std::thread::yield_now(),
            }
        }
        self.early
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(later);
        got.into_iter()
            .map(|g| g.expect("every rank's part arrived"))
            .collect()
    }

    /// A number for a new exstack exchange, the same on every rank for the same exchange.
    pub fn exchange_id(&self) -> u32 {
        self.exchanges.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a parcel of `data` to PE `local` of `rank`; `head` is (exchange, phase, source
    /// PE, more).
    pub fn send_parcel(&self, rank: usize, local: usize, head: [u32; 4], data: &[u8]) {
        let mut bytes = Vec::with_capacity(PARCEL_HEADER + data.len());
        let [exchange, phase, from, more] = head;
        for w in [exchange, phase, from, local as u32 | more << 31] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        bytes.extend_from_slice(data);
        // The destination's channel, which it polls while it waits for its parcels.
        let channel = local % self.transport.channels();
        if let Err(e) = self.transport.send(channel, rank, PARCELS, bytes, None) {
            tactor_cli::say!("error: rank {}: {e}", self.rank());
            self.transport.abort(1);
        }
    }

    /// Polls the network once for PE `worker` of this rank (parcels for this rank's other
    /// PEs are kept for them), then hands `take(more, data)` each parcel of `exchange`'s
    /// `phase` that arrived for it. Returns how many it took.
    pub fn take_parcels(
        &self,
        worker: usize,
        exchange: u32,
        phase: u32,
        take: &mut dyn FnMut(bool, &[u8]),
    ) -> usize {
        let channel = worker % self.transport.channels();
        for _ in 0..BUDGET {
            match self.transport.poll(channel) {
                Some(Completion::Received(m)) if m.port == PARCELS => self.file(m),
                Some(Completion::Received(m)) if m.port == GATHER => self.keep(m),
                Some(_) => {}
                None => break,
            }
        }
        let mut mine = self.parcels[worker]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let before = mine.len();
        mine.retain(|p| {
            let now = p.exchange == exchange && p.phase == phase;
            if now {
                take(p.more, &p.message[PARCEL_HEADER..]);
            }
            !now
        });
        before - mine.len()
    }

    /// Files an arrived parcel with the PE it is for, until that PE takes it.
    fn file(&self, m: Message) {
        let word =
            |i: usize| u32::from_le_bytes(m.data[4 * i..4 * i + 4].try_into().expect("4 bytes"));
        let (to, more) = (word(3) & !(1 << 31), word(3) >> 31 == 1);
        let parcel = Parcel {
            exchange: word(0),
            phase: word(1),
            more,
            message: m.data,
        };
        self.parcels[to as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(parcel);
    }

    /// Keeps a gather message that arrived while this rank polled for something else.
    fn keep(&self, m: Message) {
        self.early.lock().unwrap_or_else(|e| e.into_inner()).push(m);
    }

    /// Waits for every rank.
    pub fn barrier(&self) {
        self.transport
            .barrier(&mut || true)
            .expect("never abandoned");
    }
}

impl Link for Cluster {
    fn rank(&self) -> usize {
        self.transport.rank()
    }

    fn ranks(&self) -> usize {
        self.transport.ranks()
    }

    fn send(&self, worker: usize, rank: usize, bytes: Vec<u8>) {
        let channel = worker % self.transport.channels();
        if let Err(e) = self.transport.send(channel, rank, PORT, bytes, None) {
            tactor_cli::say!("error: rank {}: {e}", self.rank());
            self.transport.abort(1);
        }
    }

    fn poll(&self, worker: usize, deliver: &mut dyn FnMut(usize, Vec<u8>)) -> bool {
        let channel = worker % self.transport.channels();
        let mut any = false;
        for _ in 0..BUDGET {
            match self.transport.poll(channel) {
                Some(Completion::Received(m)) if m.port == PORT => {
                    deliver(m.source, m.data);
                    any = true;
                }
                Some(Completion::Received(m)) if m.port == GATHER => {
                    self.early.lock().unwrap_or_else(|e| e.into_inner()).push(m);
                }
                Some(_) => {}
                None => break,
            }
        }
        any
    }

    fn abort(&self) -> ! {
        self.transport.abort(1)
    }

    fn eager_bytes(&self) -> usize {
        tactor_comm::INLINE_LIMIT
    }
}

fn start(channels: usize, size: usize) -> Result<Box<dyn Transport>, String> {
    tactor_comm::connect(channels, size, "bale")
}
