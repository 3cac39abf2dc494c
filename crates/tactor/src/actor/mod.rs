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

mod outbox;
mod pe;
mod ranks;
mod spec;
pub(crate) mod termination;
mod world;

pub use outbox::Outbox;
use outbox::*;
pub use pe::Pe;
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
