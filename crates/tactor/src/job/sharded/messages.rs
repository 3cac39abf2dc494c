//! The messages of a sharded subgraph: what a source task packs, the last source that sends
//! one, the vertex that takes one that arrived (opened by an inlet, or pulling it), checks it
//! and keeps it for its targets, and the poison an instance that failed sends in place of
//! those it did not send.

use super::Shard;
use crate::countdown::Outcome;
use crate::event::Notify;
use crate::job::exchange::{Exchange, Key};
use crate::subgraph::TaskId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

/// A message's count field that says "poisoned": the payload is the cause.
const POISON: usize = u32::MAX as usize;

pub(super) type Pack<A> = Arc<dyn Fn(&A, &mut [u8]) + Send + Sync>;

/// One edge of a message: its tasks, and what it carries.
pub(super) struct Item<A> {
    pub(super) from: u32,
    pub(super) to: u32,
    pub(super) bytes: usize,
    pub(super) pack: Option<Pack<A>>,
}

/// The edges of one message: the other rank, the level, its items in the order declared.
pub(super) struct Batch<A> {
    pub(super) rank: usize,
    pub(super) level: i64,
    pub(super) items: Vec<Item<A>>,
    pub(super) bytes: usize,
}

/// Where a message goes in the exchange: its stream, and the levels of an instance (message
/// of level `l` in instance `k` is step `k × levels + l`).
#[derive(Clone, Copy)]
pub(super) struct Stream {
    pub(super) id: u32,
    pub(super) levels: i64,
}

impl Stream {
    pub(super) fn step(self, seq: i64, level: i64) -> i64 {
        seq * self.levels + level
    }
}

/// What this rank sends per instance: through which exchange and stream, and per message
/// its rank, level, item count and bytes, and its distinct source tasks.
pub(super) struct Outbound {
    pub(super) exchange: Arc<Exchange>,
    pub(super) stream: Stream,
    pub(super) to: Vec<(usize, i64, usize, usize)>,
    pub(super) sources: Vec<u32>,
}

impl Outbound {
    /// A source task of message `k` (of several sources) ran and packed its items: the last
    /// of its sources to get here sends it, from its worker (no vertex of its own).
    pub(super) fn sourced<A>(&self, s: &Shard<A>, k: usize) {
        // AcqRel: the last source sees every other source's count; their items are behind
        // the message's lock, which the send takes.
        if s.left[k].fetch_sub(1, Ordering::AcqRel) == 1 {
            let buf = s.outbox[k].lock().unwrap_or_else(PoisonError::into_inner);
            self.send(&s.sent, s.seq, k, self.to[k].2, &buf);
        }
    }

    /// Sends message `k` of instance `seq` as `count` items `bytes` (the message, or with
    /// [`POISON`] the cause of a failure in its place), unless it was sent already.
    fn send(&self, sent: &[AtomicBool], seq: i64, k: usize, count: usize, bytes: &[u8]) {
        if !sent[k].swap(true, Ordering::AcqRel) {
            let (dest, level, ..) = self.to[k];
            let channel = crate::current_worker().unwrap_or(0);
            let key = (self.stream.id, self.stream.step(seq, level));
            self.exchange.send_buffer(channel, dest, key, count, bytes);
        }
    }
}

thread_local! {
    /// Where a worker packs a message of one source before it sends it.
    static ALONE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// An item a task packs after it ran: the message (this rank's outgoing index), the item's
/// place in it, and how to write it.
pub(super) type Packing<A> = (u32, usize, usize, Pack<A>);

/// An edge into a task from another rank: the source task, the message (this rank's
/// incoming index) and the item's place in its payload.
pub(super) type Incoming = (TaskId, u32, u32, u32);

/// What this rank's tasks do about messages, in one table for them all (per task, in the
/// order added: what its edges from other ranks brought, what it packs, which messages it
/// is a source of), so that running a chunk of tasks reads it in order rather than a few
/// allocations per task.
pub(super) struct Wiring<A> {
    /// Per task, where its lists start in the three below (a last entry ends them).
    start: Vec<[u32; 3]>,
    incoming: Vec<Incoming>,
    packing: Vec<Packing<A>>,
    sourced: Vec<u32>,
    pub(super) outbound: Outbound,
}

impl<A> Wiring<A> {
    pub(super) fn new(outbound: Outbound) -> Self {
        Wiring {
            start: vec![[0; 3]],
            incoming: Vec::new(),
            packing: Vec::new(),
            sourced: Vec::new(),
            outbound,
        }
    }

    /// Adds the next task's lists; returns its index.
    pub(super) fn push(
        &mut self,
        incoming: Vec<Incoming>,
        packing: Vec<Packing<A>>,
        sourced: Vec<u32>,
    ) -> usize {
        self.incoming.extend(incoming);
        self.packing.extend(packing);
        self.sourced.extend(sourced);
        let end = [self.incoming.len(), self.packing.len(), self.sourced.len()];
        self.start
            .push(end.map(|n| u32::try_from(n).expect("fewer than 2^32 entries")));
        self.start.len() - 2
    }

    /// Task `i`'s edges from other ranks.
    pub(super) fn incoming(&self, i: usize) -> &[Incoming] {
        &self.incoming[self.start[i][0] as usize..self.start[i + 1][0] as usize]
    }

    /// Task `i` ran: packs its items into the instance's messages, right after the task on
    /// its worker (before anything ordered after the task can change what they are made
    /// of), and sends those it is the last source of.
    ///
    /// A message of one source (a stencil's, every message) is packed in a buffer of its
    /// worker and sent at once: no lock and no count (three atomic operations a
    /// message, ~40 % of what a timestep of `sharded` on 2 ranks cost over `compiled`).
    pub(super) fn ran(&self, s: &Shard<A>, i: usize) {
        let (a, b) = (self.start[i], self.start[i + 1]);
        let packing = &self.packing[a[1] as usize..b[1] as usize];
        let out = &self.outbound;
        for (k, at, bytes, pack) in packing {
            if out.sources[*k as usize] > 1 {
                let mut buf = s.outbox[*k as usize]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                pack(&s.args, &mut buf[*at..at + bytes]);
            }
        }
        for &k in &self.sourced[a[2] as usize..b[2] as usize] {
            let k = k as usize;
            if out.sources[k] > 1 {
                out.sourced(s, k);
                continue;
            }
            ALONE.with_borrow_mut(|buf| {
                buf.clear();
                buf.resize(out.to[k].3, 0);
                for (_, at, bytes, pack) in packing.iter().filter(|p| p.0 as usize == k) {
                    pack(&s.args, &mut buf[*at..at + bytes]);
                }
                out.send(&s.sent, s.seq, k, out.to[k].2, buf);
            });
        }
    }
}

/// The vertex that takes message `k` of an instance, checks it, and keeps it for its
/// targets ([`Received`](super::Received)); a poisoned or broken message fails it, and so
/// its targets. It takes the message from its inbox slot (filled when the message opened the
/// vertex's inlet), or with `pull` off the network itself (read in the sender's ring where
/// it can be: [`Exchange::pull`]), waiting in its vertex and so holding its instance's part
/// on its worker: `compile` then orders it after every message of this rank of its level
/// and below, so that what it waits for never waits for what it holds.
pub(super) fn receive_vertex<A: Send + Sync + 'static>(
    ex: &Arc<Exchange>,
    stream: Stream,
    k: usize,
    batch: &Batch<A>,
    pull: bool,
) -> impl Fn(&Shard<A>) + Send + Sync + 'static {
    let (ex, source, level) = (ex.clone(), batch.rank, batch.level);
    let (count, total) = (batch.items.len(), batch.bytes);
    move |s: &Shard<A>| {
        let key: Key = (stream.id, stream.step(s.seq, level), source);
        let mut data = None;
        if !pull {
            data = s.inbox[k]
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
        } else if let Err(cause) = ex.pull(key, &mut |m| data = Some(m.to_vec())) {
            crate::fail(cause);
        }
        keep(&ex, s, k, key, data, (count, total));
    }
}

/// What a task that receives a message at its start runs: pulls the message of `batch` in
/// the instance into `into` (read where it landed, copied once), and fails the task with the
/// sender's cause if it is poisoned, or if it is not the batch's items.
pub(super) fn pull_into<A: Send + Sync + 'static>(
    ex: &Arc<Exchange>,
    stream: Stream,
    batch: &Batch<A>,
) -> impl Fn(&Shard<A>, &mut Vec<u8>) + Send + Sync + 'static {
    let (ex, source, level) = (ex.clone(), batch.rank, batch.level);
    let (count, total) = (batch.items.len(), batch.bytes);
    move |s: &Shard<A>, into: &mut Vec<u8>| {
        let key: Key = (stream.id, stream.step(s.seq, level), source);
        let took = ex.pull(key, &mut |m| {
            into.clear();
            into.extend_from_slice(m);
        });
        if let Err(cause) = took {
            crate::fail(cause);
        }
        check(&ex, key, Some(into), (count, total));
    }
}

/// Fails the receiving task with the sender's cause if message `data` of `key` is poisoned,
/// or if it is not `count` items in `total` bytes (or did not come).
fn check(ex: &Exchange, key: Key, data: Option<&[u8]>, (count, total): (usize, usize)) {
    let source = key.2;
    if let Some(cause) = data.and_then(poisoned) {
        crate::fail(format!("rank {source}: {cause}"));
    }
    if ex.check(key, data, count, total).is_none() {
        crate::fail(format!(
            "stream {}: the message of step {} from rank {source} broke the protocol",
            key.0, key.1
        ));
    }
}

/// Message `k` of an instance, `data`, arrived under `key`: fails the vertex with the
/// sender's cause if it is poisoned, or if it is not `count` items in `total` bytes; else
/// keeps it for the targets.
fn keep<A>(
    ex: &Exchange,
    s: &Shard<A>,
    k: usize,
    key: Key,
    data: Option<Vec<u8>>,
    (count, total): (usize, usize),
) {
    check(ex, key, data.as_deref(), (count, total));
    // SAFETY: message `k` of an instance is kept by the one vertex that receives
    // it, which runs once in the instance; its targets read it only after that vertex.
    unsafe { s.received[k].set(data.expect("a checked message")) };
}

/// The cause a poisoned message carries, if it is one.
fn poisoned(message: &[u8]) -> Option<String> {
    let count = u32::from_le_bytes(message.get(4..8)?.try_into().ok()?) as usize;
    (count == POISON).then(|| String::from_utf8_lossy(Exchange::payload(message)).into_owned())
}

/// Sends the cause of an instance's failure in place of each of its messages not sent.
pub(super) struct PoisonOnFailure<A> {
    pub(super) wiring: Arc<Wiring<A>>,
    pub(super) seq: i64,
    pub(super) sent: Arc<[AtomicBool]>,
}

impl<A: Send + Sync + 'static> Notify for PoisonOnFailure<A> {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        let Err(failure) = outcome else {
            return;
        };
        let (cause, out) = (failure.to_string(), &self.wiring.outbound);
        for k in 0..out.to.len() {
            out.send(&self.sent, self.seq, k, POISON, cause.as_bytes());
        }
    }
}
