//! Actors and selectors (the HClib-Actor model, seed 003): a selector has mailboxes, each PE
//! holds one part of it (its state and a handler), and `send(mailbox, msg, pe)` delivers a
//! message to that PE's handler — asynchronously, aggregated per destination, never refused
//! for lack of space. A mailbox terminates when every PE said it sends no more to it and every
//! message sent to it was handled; a mailbox that only handlers send to closes by itself once
//! the mailboxes feeding it terminated ([`Spec::fed_by`]). Mailboxes that feed each other (a
//! request that may cause another request) terminate together, once the programs are done
//! with them and no message of theirs is left anywhere (`termination.rs`).
//!
//! **A PE is a worker** of the runtime (in one process; on several ranks, a worker of a rank):
//! a PE's handler runs only on its worker, so its state needs no lock, and two workers of one
//! process are two PEs that exchange messages through memory, as ranks do through the
//! network. [`run`] runs a selector in one process; [`run_on`] runs it over ranks through
//! a [`Link`] the program supplies (`ranks.rs`: encoding, and termination over ranks).
//!
//! **Aggregation.** A PE keeps one buffer per (mailbox, destination PE), about
//! [`BUFFER_BYTES`] long, and hands a full buffer to the destination's inbox as one batch; it
//! flushes every buffer when it runs out of incoming work, and a mailbox's buffers when it is
//! done with that mailbox. Handlers are generic (`H: Handler<M>`), so a handler written as a
//! closure message ([`Lambdas`]) compiles to the same code as a typed one.
//!
//! ```
//! use tactor::actor::{self, Handler, Outbox, Spec};
//! use tactor::Runtime;
//!
//! /// A histogram: each PE owns 4 counters; message = counter index on the owner.
//! struct Counts(Vec<u64>);
//! impl Handler<u32> for Counts {
//!     fn process(&mut self, _mailbox: usize, i: u32, _from: usize, _out: &mut Outbox<'_, u32>) {
//!         self.0[i as usize] += 1;
//!     }
//! }
//!
//! let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
//! let states = (0..2).map(|_| Counts(vec![0; 4])).collect();
//! let out = actor::run(&rt, &Spec::new(1), states, |pe| {
//!     for k in 0..100u32 {
//!         pe.send(0, k % 4, (k as usize / 4) % pe.pes());
//!     }
//! });
//! let total: u64 = out.iter().flat_map(|c| c.0.iter()).sum();
//! assert_eq!(total, 200);
//! ```

mod ranks;
mod spec;
pub(crate) mod termination;

pub use ranks::Link;
pub use spec::{buffer_bytes, Spec, BUFFER_BYTES};

use crate::runtime::Placement;
use crate::{Event, Handle, Runtime, TaskFailed};
use crossbeam_deque::{Injector, Steal};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use termination::Termination;

/// Empty polls of its inbox after which a PE that finished its program hands over its
/// partly filled buffers.
const IDLE_FLUSH: u32 = 16;

/// What a PE does with a message: `process` runs on the PE's worker, one message at a time.
pub trait Handler<M>: Send {
    /// Handles `msg`, sent to `mailbox` of this PE by PE `from`; may send through `out` to
    /// the mailboxes `mailbox` feeds.
    fn process(&mut self, mailbox: usize, msg: M, from: usize, out: &mut Outbox<'_, M>);

    /// Called with a message [`AHEAD`] places before it is processed, so that a handler that
    /// touches a large table at random can start the miss early (e.g. with
    /// [`crate::hint::fetch`]) and several misses overlap. Does nothing unless overridden.
    #[inline(always)]
    fn ahead(&self, mailbox: usize, msg: &M) {
        let _ = (mailbox, msg);
    }
}

/// How many messages of a batch ahead of the one processed [`Handler::ahead`] looks.
pub const AHEAD: usize = 8;

/// A handler whose messages are closures run on the receiving PE's state: the seed's lambda
/// style. Each call site's closure is its own type, so this compiles to the same code as a
/// typed handler.
///
/// ```
/// use tactor::actor::{self, Lambdas, Spec};
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// let states = (0..2).map(|_| Lambdas(0u64)).collect();
/// let out = actor::run(&rt, &Spec::new(1), states, |pe| {
///     for k in 1..=10u64 {
///         pe.send(0, move |sum: &mut u64| *sum += k, 0);
///     }
/// });
/// assert_eq!(out[0].0, 110);
/// ```
pub struct Lambdas<S>(pub S);

impl<S: Send, F: FnOnce(&mut S) + Send> Handler<F> for Lambdas<S> {
    #[inline]
    fn process(&mut self, _mailbox: usize, msg: F, _from: usize, _out: &mut Outbox<'_, F>) {
        msg(&mut self.0)
    }
}

/// A batch of messages for one mailbox of one PE.
struct Batch<M> {
    mailbox: u32,
    from: u32,
    msgs: Vec<M>,
}

/// What the PEs of one selector share (on one rank).
struct World<M> {
    spec: Spec,
    /// Per mailbox, its group if it is on a cycle (`Spec::groups`).
    groups: Vec<Option<Vec<usize>>>,
    /// Per mailbox, the mailboxes that terminate with it (its group, or itself).
    units: Vec<Vec<usize>>,
    /// PEs on every rank.
    pes: usize,
    /// This rank's PEs are `first..first + inboxes.len()`.
    first: usize,
    inboxes: Vec<Injector<Batch<M>>>,
    /// This rank's counts.
    term: Termination,
    /// The other ranks, if the selector spans several.
    net: Option<ranks::Net<M>>,
    /// A PE panicked: the others stop waiting for termination.
    failed: AtomicBool,
    /// Per mailbox, the mailboxes its handlers may send to (`Spec::targets`), then the
    /// programs' (all).
    targets: Vec<u64>,
}

/// A PE's outgoing buffers, one per (mailbox, destination), and per mailbox the messages
/// put in them that its termination counts do not show yet.
struct Buffers<M> {
    bufs: Vec<Vec<M>>,
    cap: usize,
    unpublished: Vec<u64>,
}

impl<M> Buffers<M> {
    /// Adds the sends to `mailbox` not yet counted to its termination counts: before any of
    /// them is handed over, and before the batch that caused them counts as processed.
    #[inline]
    fn publish(&mut self, term: &Termination, mailbox: usize) {
        let n = std::mem::take(&mut self.unpublished[mailbox]);
        if n > 0 {
            term.sent(mailbox, n as usize);
        }
    }
}

/// How a handler sends: into its PE's buffers.
pub struct Outbox<'a, M> {
    world: &'a World<M>,
    bufs: &'a mut Buffers<M>,
    me: usize,
    /// The mailbox whose handler is running (sends go only where it feeds).
    from: Option<usize>,
    /// Bit `m`: this outbox may send to mailbox `m` (from `from`, once per batch).
    targets: u64,
}

impl<M: Send> Outbox<'_, M> {
    /// Sends `msg` to mailbox `mailbox` of PE `pe`.
    ///
    /// # Panics
    /// If `pe` or `mailbox` is out of range, or (in a handler) `mailbox` is not fed by the
    /// handler's mailbox: its termination could not count the message.
    #[inline(always)]
    pub fn send(&mut self, mailbox: usize, msg: M, pe: usize) {
        let w = self.world;
        if pe >= w.pes || self.targets.checked_shr(mailbox as u32).unwrap_or(0) & 1 == 0 {
            self.refuse(mailbox, pe);
        }
        let i = mailbox * w.pes + pe;
        self.bufs.unpublished[mailbox] += 1;
        let buf = &mut self.bufs.bufs[i];
        buf.push(msg);
        if buf.len() >= self.bufs.cap {
            flush(w, self.bufs, self.me, mailbox, pe);
        }
    }

    #[cold]
    #[inline(never)]
    fn refuse(&self, mailbox: usize, pe: usize) -> ! {
        let w = self.world;
        assert!(
            pe < w.pes,
            "send to PE {pe}, but the selector has {}",
            w.pes
        );
        match self.from {
            Some(from) => panic!(
                "a handler of mailbox {from} sent to mailbox {mailbox}, which is not declared fed by it (Spec::fed_by)"
            ),
            None => panic!(
                "send to mailbox {mailbox}, but the selector has {}",
                w.spec.mailboxes()
            ),
        }
    }

    /// Number of PEs.
    pub fn pes(&self) -> usize {
        self.world.pes
    }

    /// This PE.
    pub fn pe(&self) -> usize {
        self.me
    }
}

/// Hands the buffer for (`mailbox`, `pe`) to `pe` as one batch, counted first: into its
/// inbox on this rank, through the network on another (the buffer is then kept for reuse).
/// Out of line, so that the message path of `Outbox::send` stays a few instructions where it
/// is inlined.
#[inline(never)]
fn flush<M: Send>(w: &World<M>, bufs: &mut Buffers<M>, me: usize, mailbox: usize, pe: usize) {
    let i = mailbox * w.pes + pe;
    if bufs.bufs[i].is_empty() {
        return;
    }
    bufs.publish(&w.term, mailbox);
    match w.local_index(pe) {
        Some(local) => {
            let msgs = std::mem::replace(&mut bufs.bufs[i], Vec::with_capacity(bufs.cap));
            w.inboxes[local].push(Batch {
                mailbox: mailbox as u32,
                from: me as u32,
                msgs,
            });
        }
        None => {
            let net = w
                .net
                .as_ref()
                .expect("a PE of another rank means a network");
            let per_rank = w.inboxes.len();
            net.send_batch(
                me - w.first,
                pe / per_rank,
                mailbox,
                me,
                pe % per_rank,
                &bufs.bufs[i],
            );
            bufs.bufs[i].clear();
        }
    }
}

/// One PE's side of a selector, given to the PE's program.
pub struct Pe<'a, M, H> {
    world: &'a World<M>,
    bufs: Buffers<M>,
    state: H,
    me: usize,
    done: Vec<bool>,
}

impl<M: Send, H: Handler<M>> Pe<'_, M, H> {
    /// This PE.
    pub fn pe(&self) -> usize {
        self.me
    }

    /// Number of PEs.
    pub fn pes(&self) -> usize {
        self.world.pes
    }

    /// This PE's state.
    pub fn state(&mut self) -> &mut H {
        &mut self.state
    }

    /// Sends `msg` to mailbox `mailbox` of PE `pe`; a full buffer is handed over, and the
    /// messages that arrived meanwhile are handled (so that no PE's inbox grows without
    /// bound while everyone sends).
    ///
    /// # Panics
    /// If `pe` or `mailbox` is out of range, or this PE already called [`Pe::done`] on it.
    #[inline]
    pub fn send(&mut self, mailbox: usize, msg: M, pe: usize) {
        // `done` has one flag per mailbox: its look-up is the range check.
        match self.done.get(mailbox) {
            Some(false) => {}
            Some(true) => panic!("PE {} sent to mailbox {mailbox} after done", self.me),
            None => panic!(
                "send to mailbox {mailbox}, but the selector has {}",
                self.world.spec.mailboxes()
            ),
        }
        let mut out = Outbox {
            world: self.world,
            bufs: &mut self.bufs,
            me: self.me,
            from: None,
            targets: self.world.targets[self.world.spec.mailboxes()],
        };
        out.send(mailbox, msg, pe);
        if self.bufs.bufs[mailbox * self.world.pes + pe].is_empty() {
            // The buffer was just handed over: a good moment to handle what arrived.
            self.yield_now();
        }
    }

    /// Handles the messages that arrived for this PE (the seed's `yield`): user code that
    /// sends in a long loop interleaves with message processing through it.
    pub fn yield_now(&mut self) -> bool {
        let mut any = false;
        self.world.receive(self.me - self.world.first);
        while let Some(b) = pop(&self.world.inboxes[self.me - self.world.first]) {
            self.handle(b);
            any = true;
        }
        any
    }

    fn handle(&mut self, b: Batch<M>) {
        let mailbox = b.mailbox as usize;
        let n = b.msgs.len();
        let mut out = Outbox {
            world: self.world,
            bufs: &mut self.bufs,
            me: self.me,
            from: Some(mailbox),
            targets: self.world.targets[mailbox],
        };
        let mut msgs = b.msgs.into_iter();
        while let Some(m) = msgs.next() {
            if let Some(next) = msgs.as_slice().get(AHEAD - 1) {
                self.state.ahead(mailbox, next);
            }
            self.state.process(mailbox, m, b.from as usize, &mut out);
        }
        for to in 0..self.world.spec.mailboxes() {
            self.bufs.publish(&self.world.term, to);
        }
        self.world.term.processed(mailbox, n);
    }

    /// This PE sends no more to `mailbox`: its buffers for it are handed over.
    pub fn done(&mut self, mailbox: usize) {
        if self.done[mailbox] {
            return;
        }
        for pe in 0..self.world.pes {
            flush(self.world, &mut self.bufs, self.me, mailbox, pe);
        }
        self.bufs.publish(&self.world.term, mailbox);
        self.done[mailbox] = true;
        self.world.term.done(mailbox);
    }

    fn flush_all(&mut self) {
        for m in 0..self.world.spec.mailboxes() {
            for pe in 0..self.world.pes {
                flush(self.world, &mut self.bufs, self.me, m, pe);
            }
        }
    }

    /// After the program returned: handles messages until every mailbox terminated, closing
    /// the program's mailboxes (and every mailbox of a group) at once and each other fed
    /// mailbox when its feeders terminated.
    fn finish(&mut self) {
        let spec = &self.world.spec;
        for m in 0..spec.mailboxes() {
            if spec.feeders[m].is_none() || self.world.groups[m].is_some() {
                self.done(m);
            }
        }
        let mut idle = 0u32;
        loop {
            if self.yield_now() {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                // Out of incoming work for a while: hand over what was gathered. (At once
                // would send a batch per message handled while the others still send.)
                if idle % IDLE_FLUSH == 0 {
                    self.flush_all();
                }
            }
            let mut all = true;
            for m in 0..spec.mailboxes() {
                if !self.done[m] {
                    let feeders = spec.feeders[m]
                        .as_ref()
                        .expect("program mailboxes are done");
                    if feeders.iter().all(|&f| self.world.terminated(f)) {
                        self.done(m);
                    }
                }
                all &= self.world.terminated(m);
                self.world.try_wave(self.me - self.world.first, m);
            }
            if all || self.world.failed.load(Ordering::Relaxed) {
                return;
            }
            if idle > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

fn pop<M>(q: &Injector<Batch<M>>) -> Option<Batch<M>> {
    loop {
        match q.steal() {
            Steal::Success(b) => return Some(b),
            Steal::Empty => return None,
            Steal::Retry => {}
        }
    }
}

impl<M: Send> World<M> {
    /// Whether mailbox `m` (alone, or with its group) has terminated.
    fn terminated(&self, m: usize) -> bool {
        if let Some(net) = &self.net {
            return net.over(m);
        }
        match &self.groups[m] {
            Some(members) => {
                // The mailboxes feeding the group from outside first: their messages must all
                // have been published.
                let outside = members.iter().flat_map(|&g| {
                    self.spec.feeders[g]
                        .iter()
                        .flatten()
                        .filter(|f| !members.contains(f))
                });
                outside.into_iter().all(|&f| self.terminated(f))
                    && self.term.group_terminated(members)
            }
            None => self.term.terminated(m),
        }
    }

    /// A selector of `pes` PEs of which this rank runs `local` from `first` on.
    fn new(
        spec: &Spec,
        pes: usize,
        first: usize,
        local: usize,
        net: Option<ranks::Net<M>>,
    ) -> World<M> {
        let groups = spec.groups();
        let units = groups
            .iter()
            .enumerate()
            .map(|(m, g)| g.clone().unwrap_or_else(|| vec![m]))
            .collect();
        World {
            spec: spec.clone(),
            groups,
            units,
            pes,
            first,
            inboxes: (0..local).map(|_| Injector::new()).collect(),
            term: Termination::new(spec.mailboxes(), local),
            net,
            failed: AtomicBool::new(false),
            targets: (0..spec.mailboxes())
                .map(Some)
                .chain([None])
                .map(|from| spec.targets(from))
                .collect(),
        }
    }

    /// The index among this rank's PEs of PE `pe`, if it is one of them.
    #[inline]
    fn local_index(&self, pe: usize) -> Option<usize> {
        pe.checked_sub(self.first)
            .filter(|&l| l < self.inboxes.len())
    }

    /// Takes what the network brought (worker `worker` polls its part of the link): batches
    /// go to their PEs' inboxes, termination messages are answered.
    fn receive(&self, worker: usize) {
        let Some(net) = &self.net else { return };
        net.link.poll(worker, &mut |source, bytes| {
            if let ranks::Arrival::Batch {
                local,
                mailbox,
                from,
                msgs,
            } = net.arrive(worker, source, bytes, &self.units, &self.term)
            {
                self.inboxes[local].push(Batch {
                    mailbox,
                    from,
                    msgs,
                });
            }
        });
    }

    /// On rank 0 of several: starts a termination wave for mailbox `m` (the first of its
    /// group) once this rank's PEs are done with it and, for a group, its outside feeders
    /// are over.
    fn try_wave(&self, worker: usize, m: usize) {
        let Some(net) = &self.net else { return };
        let unit = &self.units[m];
        if net.link.rank() != 0 || unit[0] != m || net.over(m) {
            return;
        }
        if !unit.iter().all(|&u| self.term.all_done(u)) {
            return;
        }
        if self.groups[m].is_some() {
            let outside = unit.iter().flat_map(|&g| {
                self.spec.feeders[g]
                    .iter()
                    .flatten()
                    .filter(|f| !unit.contains(f))
            });
            if !outside.into_iter().all(|&f| net.over(f)) {
                return;
            }
        }
        net.start_wave(worker, m, &self.units, &self.term);
    }

    /// PE `me`'s whole life: its program, then messages until every mailbox terminated.
    /// Returns its final state; a panic marks the selector failed (the other PEs stop) and
    /// goes on unwinding.
    fn pe<H: Handler<M>>(&self, me: usize, state: H, program: impl FnOnce(&mut Pe<'_, M, H>)) -> H {
        let size = std::mem::size_of::<M>();
        let cap = (BUFFER_BYTES / size.max(1)).max(1);
        // One cap for every destination: a batch for another rank goes whole, eagerly.
        let cap = self.net.as_ref().map_or(cap, |n| n.batch_cap(size, cap));
        let cap = self.spec.batch.map_or(cap, |b| cap.min(b));
        let mut pe = Pe {
            world: self,
            bufs: Buffers {
                bufs: (0..self.spec.mailboxes() * self.pes)
                    .map(|_| Vec::with_capacity(cap))
                    .collect(),
                cap,
                unpublished: vec![0; self.spec.mailboxes()],
            },
            state,
            me,
            done: vec![false; self.spec.mailboxes()],
        };
        let ran = catch_unwind(AssertUnwindSafe(|| {
            program(&mut pe);
            pe.finish();
        }));
        if let Err(p) = ran {
            self.failed.store(true, Ordering::Relaxed);
            if let Some(net) = &self.net {
                // The other ranks would wait for this PE's messages forever.
                net.link.abort();
            }
            resume_unwind(p);
        }
        pe.state
    }
}

/// Runs a selector collectively: one PE per worker of `rt`, PE `p` starting from
/// `states[p]`, each running `program` (which sends and may call [`Pe::done`]), then handling
/// messages until every mailbox terminated. Returns the PEs' final states. (See [`launch`]
/// for a selector that starts after events and whose end is an event.)
///
/// # Panics
/// If `states` does not hold one state per worker, or a PE panicked (the others then stop
/// waiting for termination).
pub fn run<M, H, F>(rt: &Runtime, spec: &Spec, states: Vec<H>, program: F) -> Vec<H>
where
    M: Send,
    H: Handler<M>,
    F: Fn(&mut Pe<'_, M, H>) + Sync,
{
    let pes = rt.workers();
    assert_eq!(states.len(), pes, "one state per PE (worker)");
    run_world(rt, &World::new(spec, pes, 0, pes, None), states, &program)
}

/// Runs this rank's PEs of `world`, one per worker, and returns their final states.
fn run_world<M, H, F>(rt: &Runtime, world: &World<M>, states: Vec<H>, program: &F) -> Vec<H>
where
    M: Send,
    H: Handler<M>,
    F: Fn(&mut Pe<'_, M, H>) + Sync,
{
    let results: Vec<Mutex<Option<H>>> = (0..states.len()).map(|_| Mutex::new(None)).collect();
    let results_ref = &results;
    rt.scope(|s| {
        for (w, state) in states.into_iter().enumerate() {
            s.launch(Placement::Worker(w), &[], move |_| {
                let state = world.pe(world.first + w, state, program);
                *results_ref[w].lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
            });
        }
    })
    .unwrap_or_else(|e| panic!("a PE of the selector failed: {e}"));
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|p| p.into_inner())
                .expect("every PE finished")
        })
        .collect()
}

/// Runs a selector over every rank of `link`, collectively: each rank calls this with the
/// same `spec`, the same number of workers `W`, and the states of its own PEs (PE
/// `rank × W + w` is worker `w` of `rank`). Returns this rank's PEs' final states once every
/// mailbox terminated on every rank (see `actor/ranks/` for how termination is detected
/// over ranks). Messages cross ranks as plain bytes, hence `M: Pod`.
///
/// ```
/// use std::sync::Arc;
/// use tactor::actor::{self, Handler, Link, Outbox, Spec};
/// /// One rank alone.
/// struct Alone;
/// impl Link for Alone {
///     fn rank(&self) -> usize { 0 }
///     fn ranks(&self) -> usize { 1 }
///     fn send(&self, _: usize, _: usize, _: Vec<u8>) { unreachable!("one rank") }
///     fn poll(&self, _: usize, _: &mut dyn FnMut(usize, Vec<u8>)) -> bool { false }
///     fn abort(&self) -> ! { std::process::abort() }
/// }
/// struct Sum(u64);
/// impl Handler<u64> for Sum {
///     fn process(&mut self, _: usize, x: u64, _: usize, _: &mut Outbox<'_, u64>) { self.0 += x }
/// }
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// let out = actor::run_on(&rt, Arc::new(Alone), &Spec::new(1), vec![Sum(0), Sum(0)], |pe| {
///     pe.send(0, 1 + pe.pe() as u64, 0);
/// });
/// assert_eq!(out[0].0, 3);
/// ```
///
/// # Panics
/// If `states` does not hold one state per worker. A panicking PE ends the job through
/// [`Link::abort`].
pub fn run_on<M, H, F>(
    rt: &Runtime,
    link: Arc<dyn Link>,
    spec: &Spec,
    states: Vec<H>,
    program: F,
) -> Vec<H>
where
    M: bytemuck::Pod + Send,
    H: Handler<M>,
    F: Fn(&mut Pe<'_, M, H>) + Sync,
{
    let local = rt.workers();
    assert_eq!(
        states.len(),
        local,
        "one state per PE (worker) of this rank"
    );
    let (rank, ranks) = (link.rank(), link.ranks());
    let net = ranks::Net::new(link, spec.mailboxes());
    let world = World::new(spec, local * ranks, rank * local, local, Some(net));
    run_world(rt, &world, states, &program)
}

/// A selector launched with [`launch`]: its completion event, and the PEs' states once it
/// completed.
pub struct Selection<H> {
    /// Triggers when every mailbox terminated on every PE (poisoned if a PE panicked or a
    /// precondition was poisoned).
    pub completion: Event,
    results: Arc<Vec<Mutex<Option<H>>>>,
}

impl<H> Selection<H> {
    /// Waits for the completion event, then gives the PEs' final states.
    pub fn wait(self) -> Result<Vec<H>, TaskFailed> {
        self.completion.wait()?;
        // Each PE stored its state before its task's event triggered; the tasks themselves
        // may still hold their `Arc` for a moment, so take the states out rather than unwrap.
        Ok(self
            .results
            .iter()
            .map(|r| {
                r.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take()
                    .expect("every PE finished")
            })
            .collect())
    }
}

/// Like [`run`], but the selector starts once `after` have triggered and its end is an
/// [`Event`], so that it composes with tasks and compiled subgraphs.
///
/// ```
/// use tactor::actor::{self, Lambdas, Spec};
/// use tactor::{Placement, Runtime};
///
/// let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
/// let ready = rt.launch(Placement::Any, &[], || ());
/// let states = (0..2).map(|_| Lambdas(0u64)).collect();
/// let sel = actor::launch(&rt, &Spec::new(1), states, &[ready], |pe| {
///     pe.send(0, |n: &mut u64| *n += 1, 1 - pe.pe());
/// });
/// let after = rt.launch(Placement::Any, &[sel.completion.clone()], || ());
/// after.wait().unwrap();
/// let out = sel.wait().unwrap();
/// assert_eq!((out[0].0, out[1].0), (1, 1));
/// ```
///
/// # Panics
/// If `states` does not hold one state per worker.
pub fn launch<M, H, F>(
    rt: &Handle,
    spec: &Spec,
    states: Vec<H>,
    after: &[Event],
    program: F,
) -> Selection<H>
where
    M: Send + 'static,
    H: Handler<M> + 'static,
    F: Fn(&mut Pe<'_, M, H>) + Send + Sync + 'static,
{
    let pes = rt.workers();
    assert_eq!(states.len(), pes, "one state per PE (worker)");
    let world = Arc::new(World::new(spec, pes, 0, pes, None));
    let program = Arc::new(program);
    let results: Arc<Vec<Mutex<Option<H>>>> =
        Arc::new((0..pes).map(|_| Mutex::new(None)).collect());
    let done: Vec<Event> = states
        .into_iter()
        .enumerate()
        .map(|(me, state)| {
            let (world, program, results) = (world.clone(), program.clone(), results.clone());
            rt.launch(Placement::Worker(me), after, move || {
                let state = world.pe(me, state, &*program);
                *results[me].lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
            })
        })
        .collect();
    Selection {
        completion: Event::merge(&done),
        results,
    }
}

#[cfg(test)]
mod tests {
    use super::Spec;

    #[test]
    fn mailboxes_on_a_cycle_of_feeding_form_one_group() {
        // 0 → 1 → 2 ⇄ 3, and 4 fed by 3.
        let spec = Spec::new(5)
            .fed_by(1, &[0])
            .fed_by(2, &[1, 3])
            .fed_by(3, &[2])
            .fed_by(4, &[3]);
        let g = spec.groups();
        assert_eq!(g[0], None);
        assert_eq!(g[1], None);
        assert_eq!(g[2], Some(vec![2, 3]));
        assert_eq!(g[3], Some(vec![2, 3]));
        assert_eq!(g[4], None);
        let ring = Spec::new(3).fed_by(0, &[2]).fed_by(1, &[0]).fed_by(2, &[1]);
        assert!(ring
            .groups()
            .iter()
            .all(|g| g.as_deref() == Some(&[0, 1, 2][..])));
    }
}
