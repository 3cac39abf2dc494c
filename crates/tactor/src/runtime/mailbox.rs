//! A worker's side of compiled subgraphs: its residents (one per instance in flight on it: the
//! instance's part on this worker, the "actor" of the task/actor duality), its
//! ends of the message rings, and the loop that delivers messages and runs ready residents.
//!
//! User code (a vertex's function) never runs while the worker's resident table is borrowed: the
//! resident being run is taken out of the table, so that a vertex that waits for an event (and
//! so polls compiled work again, nested) finds a consistent table. Messages for an resident that
//! is out, or whose activation has not run yet, wait in the table until it is back.

use super::channel::{Channel, Msg, SendPos};
use super::source::{Polled, Source};
use crate::sync::{lock, Mutex};
use crossbeam_deque::Injector;
use crossbeam_utils::CachePadded;
use std::cell::{Cell, RefCell};
use std::sync::Arc;

/// A compiled-subgraph instance as one worker sees it: its private counters and ready
/// vertices on this worker, with the argument type erased. The runtime owns this trait and
/// calls it; the subgraph layer implements it.
pub(crate) trait Resident {
    /// The instance's id in messages.
    fn id(&self) -> u32;
    /// One predecessor of vertex `v` (this worker's) is done. Returns whether `v` became ready.
    fn arrive(&mut self, v: u32) -> bool;
    /// Whether a vertex is ready to run.
    fn has_ready(&self) -> bool;
    /// Runs the ready vertices, and those they make ready on this worker; sends the messages
    /// they owe other workers. Returns whether it ran any, and whether this worker's part of
    /// the instance is done.
    fn run(&mut self, out: &RingOut<'_>) -> (bool, bool);
    /// The runtime shut down: poison the instance and trigger its events.
    fn cancel(&self);
}

thread_local! {
    /// Messages from outside the rings that the worker on this thread sent itself
    /// ([`push_own`]); its mailbox takes them with the rest.
    static OWN: RefCell<Vec<Msg>> = const { RefCell::new(Vec::new()) };
}

/// Queues `m` for the mailbox of the worker that runs on the calling thread (the caller
/// checked that this is the worker `m` is for).
pub(crate) fn push_own(m: Msg) {
    OWN.with(|o| o.borrow_mut().push(m));
}

fn own_empty() -> bool {
    OWN.with(|o| o.borrow().is_empty())
}

/// A resident on its way to its worker (see [`Rings::push_activation`]).
pub(crate) type Pending = Box<dyn Resident + Send>;

/// Slots per ring. Under Miri, which interprets each slot's initialisation, 16 (with the
/// deques' `CAPACITY`: a runtime's start 0.72 s of its clock at full size, 0.15 s so), and a
/// full ring is reached more often there too.
pub(crate) const RING: u32 = if cfg!(miri) { 16 } else { 256 };

/// Resident runs per poll at most.
const POLL_BUDGET: u32 = 16;

/// Messages the running residents take from the rings themselves per poll at most.
const TAKE_BUDGET: u32 = 64;

/// Instance ids: small integers, reused lowest-first-freed, so that every worker can index its
/// table by id instead of hashing.
#[derive(Default)]
pub(crate) struct Ids {
    next: u32,
    free: Vec<u32>,
}

impl Ids {
    pub(crate) fn take(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.next = self
                .next
                .checked_add(1)
                .expect("fewer than 2^32 subgraph instances in flight");
            self.next - 1
        })
    }

    pub(crate) fn give_back(&mut self, id: u32) {
        self.free.push(id);
    }
}

#[derive(Default)]
enum Entry {
    #[default]
    Vacant,
    /// Slot of the resident in `Table::residents` (`None` there while it runs).
    Active(u32),
    /// Messages that arrived before the activation.
    Early(Vec<u32>),
}

#[derive(Default)]
struct Table {
    residents: Vec<Option<Box<dyn Resident>>>,
    free: Vec<u32>,
    /// By instance id.
    index: Vec<Entry>,
    /// Entries that are not vacant.
    live: usize,
    /// Slots whose resident has ready vertices (may hold stale or repeated slots).
    runnable: Vec<u32>,
    /// Messages for residents that were out running when they arrived: `(slot, vertex)`.
    held: Vec<(u32, u32)>,
    /// Per sending worker: how far this worker read its ring.
    heads: Vec<u32>,
}

/// What a worker sends: its positions in the rings to every other worker, and messages that
/// found a ring full.
#[derive(Default)]
struct SendState {
    pos: Vec<SendPos>,
    backlog: Vec<(usize, Msg)>,
}

/// What the workers share for compiled subgraphs: a message ring per ordered pair of workers,
/// a queue per worker for messages from outside (external preconditions), and instance ids.
pub(crate) struct Rings {
    workers: usize,
    /// `from * workers + to`.
    channels: Box<[Channel]>,
    external: Box<[CachePadded<Injector<Msg>>]>,
    /// Per worker, residents to register: polled with the rings, so that an instance starts
    /// on a busy worker as soon as its mailbox is polled (by [`crate::relax`] too), not when
    /// the task that runs there ends.
    activations: Box<[CachePadded<Injector<Pending>>]>,
    ids: Mutex<Ids>,
}

impl Rings {
    /// Bytes the rings of `workers` workers take (saturating).
    pub(crate) fn footprint(workers: usize) -> u128 {
        let n = workers as u128;
        n.saturating_mul(n).saturating_mul(Channel::bytes(RING))
    }

    /// The rings of `workers` workers; `None` when the table of `workers²` rings cannot be
    /// allocated.
    pub(crate) fn new(workers: usize) -> Option<Rings> {
        let pairs = workers.checked_mul(workers)?;
        let mut table = Vec::new();
        table.try_reserve_exact(pairs).ok()?;
        table.extend((0..pairs).map(|i| {
            // A worker never messages itself: its rings stay empty.
            let own = i / workers == i % workers;
            Channel::new(if own { 1 } else { RING })
        }));
        Some(Rings {
            workers,
            channels: table.into_boxed_slice(),
            external: (0..workers)
                .map(|_| CachePadded::new(Injector::new()))
                .collect(),
            activations: (0..workers)
                .map(|_| CachePadded::new(Injector::new()))
                .collect(),
            ids: Mutex::new(Ids::default()),
        })
    }

    pub(crate) fn channel(&self, from: usize, to: usize) -> &Channel {
        &self.channels[from * self.workers + to]
    }

    /// Queues a message for worker `w` from outside the workers (the caller wakes `w`).
    pub(crate) fn push_external(&self, w: usize, m: Msg) {
        self.external[w].push(m);
    }

    /// Queues `r` for registration on worker `w` (the caller wakes `w`).
    pub(crate) fn push_activation(&self, w: usize, r: Pending) {
        self.activations[w].push(r);
    }

    /// Shutdown: cancels the residents no worker registered.
    pub(crate) fn cancel_activations(&self) {
        (0..self.workers).for_each(|w| self.cancel_activations_of(w));
    }

    /// Cancels the residents on their way to worker `w`.
    fn cancel_activations_of(&self, w: usize) {
        let q = &self.activations[w];
        while let Some(r) = super::worker::steal(|| q.steal()) {
            r.cancel();
        }
    }

    pub(crate) fn take_id(&self) -> u32 {
        lock(&self.ids).take()
    }

    pub(crate) fn give_back_id(&self, id: u32) {
        lock(&self.ids).give_back(id);
    }
}

/// The compiled-subgraph state of one worker.
pub(crate) struct Mailbox {
    rings: Arc<Rings>,
    me: usize,
    table: RefCell<Table>,
    send: RefCell<SendState>,
}

/// The sending end a running resident uses, and its look at the messages waiting for it.
pub(crate) struct RingOut<'a> {
    rings: &'a Rings,
    from: usize,
    send: &'a RefCell<SendState>,
    table: &'a RefCell<Table>,
    /// Messages taken by [`RingOut::next_for`] in this poll.
    taken: Cell<u32>,
}

impl RingOut<'_> {
    /// The vertex of the first message waiting in a ring from another worker, if it is for
    /// instance `id`: the running resident takes it itself, without the round trip through
    /// the table (put back, delivered, taken out again; measured: `docs/measurements.md`,
    /// "Taking a ring's message in place"). A message for another instance at the front of a ring stays
    /// there for the mailbox, and after `TAKE_BUDGET` messages in one poll every message
    /// does, so that the worker gets back to its other work.
    pub(crate) fn next_for(&self, id: u32) -> Option<u32> {
        if self.taken.get() >= TAKE_BUDGET {
            return None;
        }
        let mut t = self.table.borrow_mut();
        let me = self.from;
        for from in (0..t.heads.len()).filter(|&f| f != me) {
            let ch = self.rings.channel(from, me);
            if let Some(m) = ch.try_recv_if(&mut t.heads[from], |m| m.id == id) {
                self.taken.set(self.taken.get() + 1);
                return Some(m.vertex);
            }
        }
        None
    }

    /// Sends `m` to worker `to`, keeping it for later if the ring is full.
    pub(crate) fn send(&self, to: usize, m: Msg) {
        let mut s = self.send.borrow_mut();
        let ch = self.rings.channel(self.from, to);
        if !ch.try_send(&mut s.pos[to], m) {
            s.backlog.push((to, m));
        }
    }
}

impl Table {
    /// Registers the resident of an instance on this worker.
    fn activate(&mut self, mut resident: Box<dyn Resident>) {
        let id = resident.id();
        match std::mem::take(self.entry(id)) {
            Entry::Early(early) => {
                for v in early {
                    resident.arrive(v);
                }
            }
            Entry::Vacant => self.live += 1,
            Entry::Active(_) => unreachable!("instance {id} activated twice on a worker"),
        }
        let slot = match self.free.pop() {
            Some(s) => {
                self.residents[s as usize] = Some(resident);
                s
            }
            None => {
                self.residents.push(Some(resident));
                self.residents.len() as u32 - 1
            }
        };
        *self.entry(id) = Entry::Active(slot);
        self.runnable.push(slot);
    }

    fn entry(&mut self, id: u32) -> &mut Entry {
        let i = id as usize;
        if i >= self.index.len() {
            self.index.resize_with(i + 1, Entry::default);
        }
        &mut self.index[i]
    }

    /// Applies one arrival.
    fn deliver(&mut self, m: Msg) {
        match self.entry(m.id) {
            Entry::Active(slot) => {
                let slot = *slot;
                match &mut self.residents[slot as usize] {
                    Some(a) => {
                        if a.arrive(m.vertex) {
                            self.runnable.push(slot);
                        }
                    }
                    None => self.held.push((slot, m.vertex)),
                }
            }
            Entry::Early(v) => v.push(m.vertex),
            e @ Entry::Vacant => {
                *e = Entry::Early(vec![m.vertex]);
                self.live += 1;
            }
        }
    }
}

impl Mailbox {
    pub(crate) fn new(rings: Arc<Rings>, me: usize) -> Mailbox {
        let workers = rings.workers;
        Mailbox {
            rings,
            me,
            table: RefCell::new(Table {
                heads: vec![0; workers],
                ..Table::default()
            }),
            send: RefCell::new(SendState {
                pos: (0..workers).map(|_| SendPos::default()).collect(),
                backlog: Vec::new(),
            }),
        }
    }

    fn in_flight(&self) -> bool {
        self.table.borrow().live > 0 || !self.send.borrow().backlog.is_empty()
    }

    /// Moves messages into residents: from the rings of the other workers, from the external
    /// queue, and those that found a ring full earlier.
    fn receive(&self) {
        let (rings, me) = (&*self.rings, self.me);
        {
            let mut s = self.send.borrow_mut();
            if !s.backlog.is_empty() {
                let s = &mut *s;
                s.backlog
                    .retain(|&(to, m)| !rings.channel(me, to).try_send(&mut s.pos[to], m));
            }
        }
        let mut t = self.table.borrow_mut();
        let t = &mut *t;
        let act = &rings.activations[me];
        if !act.is_empty() {
            while let Some(r) = super::worker::steal(|| act.steal()) {
                t.activate(r);
            }
        }
        for from in (0..t.heads.len()).filter(|&f| f != me) {
            let ch = rings.channel(from, me);
            while let Some(m) = ch.try_recv(&mut t.heads[from]) {
                t.deliver(m);
            }
        }
        OWN.with(|o| {
            for m in o.borrow_mut().drain(..) {
                t.deliver(m);
            }
        });
        let ext = &rings.external[me];
        if !ext.is_empty() {
            while let Some(m) = super::worker::steal(|| ext.steal()) {
                t.deliver(m);
            }
        }
    }

    /// Nothing to do: no ready resident, no message in, none waiting to go out. The check an idle
    /// worker repeats while it waits for messages, so it only reads.
    fn quiet(&self) -> bool {
        let (rings, me) = (&*self.rings, self.me);
        let t = self.table.borrow();
        t.runnable.is_empty()
            && self.send.borrow().backlog.is_empty()
            && (0..t.heads.len())
                .filter(|&f| f != me)
                .all(|f| !rings.channel(f, me).ready(t.heads[f]))
            && rings.external[me].is_empty()
            && rings.activations[me].is_empty()
            && own_empty()
    }

    /// Delivers messages and runs ready residents until none is ready, or `POLL_BUDGET` residents
    /// ran (so that the worker gets back to its task queues however busy the rings keep it).
    /// Returns whether it ran any vertex.
    fn poll_residents(&self) -> bool {
        if self.quiet() {
            return false;
        }
        let out = RingOut {
            rings: &self.rings,
            from: self.me,
            send: &self.send,
            table: &self.table,
            taken: Cell::new(0),
        };
        let mut ran = false;
        for _ in 0..POLL_BUDGET {
            self.receive();
            let (slot, mut resident) = {
                let mut t = self.table.borrow_mut();
                let Some(slot) = t.runnable.pop() else { break };
                match t.residents[slot as usize].take() {
                    Some(a) => (slot, a),
                    // Stale, or out running further up this stack: it is queued again when
                    // put back.
                    None => continue,
                }
            };
            let (progress, done) = resident.run(&out);
            ran |= progress;
            let mut t = self.table.borrow_mut();
            let t = &mut *t;
            if done {
                *t.entry(resident.id()) = Entry::Vacant;
                t.live -= 1;
                t.free.push(slot);
                debug_assert!(t.held.iter().all(|&(s, _)| s != slot));
                continue;
            }
            let mut ready = false;
            t.held.retain(|&(s, v)| {
                let mine = s == slot;
                if mine {
                    ready |= resident.arrive(v);
                }
                !mine
            });
            if ready || resident.has_ready() {
                t.runnable.push(slot);
            }
            t.residents[slot as usize] = Some(resident);
        }
        ran
    }

    fn cancel_all(&self) {
        // Messages for instances that are cancelled here anyway.
        OWN.with(|o| o.borrow_mut().clear());
        let residents = std::mem::take(&mut self.table.borrow_mut().residents);
        for a in residents.into_iter().flatten() {
            a.cancel();
        }
        self.rings.cancel_activations_of(self.me);
    }
}

/// Compiled subgraphs are one source of work: messages arrive in the rings without a push to
/// the worker's queues, so the worker polls them.
impl Source for Mailbox {
    /// Delivers messages and runs ready residents until none is ready, or `POLL_BUDGET`
    /// residents ran (so that the worker gets back to its task queues however busy the rings
    /// keep it).
    fn poll(&self) -> Polled {
        if self.poll_residents() {
            Polled::Ran
        } else {
            Polled::Nothing
        }
    }

    /// An instance is in flight here (or messages wait to leave): its next vertex arrives
    /// through a ring with no wake-up, so the worker keeps its core.
    fn busy(&self) -> bool {
        self.in_flight()
    }

    fn has_work(&self) -> bool {
        self.in_flight()
            || !own_empty()
            || !self.rings.external[self.me].is_empty()
            || !self.rings.activations[self.me].is_empty()
    }

    /// Shutdown: cancels every instance with a resident here.
    fn cancel(&self) {
        self.cancel_all()
    }
}
