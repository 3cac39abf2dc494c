//! A launched task: its closure, its readiness countdown and its completion event.

use super::once_value::OnceValue;
use super::Shared;
use crate::countdown::{Countdown, Outcome};
use crate::event::{Event, EventState, HasState, Held, WaitLink};
use crate::failure::{cause_of, Cause, Failure, TaskLabel};
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::ptr::NonNull;
use std::sync::Arc;

/// Where a task runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On any worker: queued on the launching worker's deque (or the injector when launched
    /// from outside) and stolen by idle workers.
    Any,
    /// On this worker only (`0..workers`); never stolen.
    Worker(usize),
}

/// A launched task. The closure is its last field, stored in the node (one allocation per
/// launch, with the completion event embedded too); queues hold nodes of any closure as
/// `TaskNode<dyn Body>`.
#[repr(C)]
pub(crate) struct TaskNode<J: ?Sized = dyn Body> {
    /// Untriggered preconditions, plus one token held by `launch` until it has subscribed to
    /// all of them. First: a precondition's trigger fetches the line at the node's start.
    count: Countdown,
    /// The task's completion event.
    state: EventState,
    /// Told when the task has finished (the scope it was launched in).
    scope: Option<Group>,
    pub(crate) placement: Placement,
    name: Option<String>,
    launched_at: &'static Location<'static>,
    pub(crate) shared: Arc<Shared>,
    /// Room for the node's first few subscriptions (one per pending precondition).
    links: [WaitLink; LINKS],
    job: J,
}

/// Subscriptions a task node makes without allocating: most tasks of a stencil-like graph
/// wait for at most three others (4 graphs of `nearest` radix 3, analysed by `implicit`:
/// two); each link costs the node 32 bytes.
const LINKS: usize = 3;

/// What a task tells the group it was launched in (a scope) when it has finished. The task
/// layer owns this trait; the scope implements it.
pub(crate) trait Finish: Send + Sync + 'static {
    /// A task of the group failed: told before its event triggers, so that the group sees
    /// the failure before those of the dependents it poisons.
    fn task_failed(&self, failure: &Arc<Failure>);

    /// One task of the group finished (after its event triggered).
    ///
    /// # Safety
    /// `this` points to the live group. Once this call's own count is in, another thread
    /// may free the group: an implementation borrows only the counter across that step (a
    /// reference to the whole group, live while it is freed, would be undefined behaviour).
    unsafe fn task_done(this: *const Self);
}

/// The group a task was launched in, borrowed rather than counted: a launch and a finish then
/// touch only the group's own counter, not a reference count beside it (on two workers the
/// launching one and the finishing one pass that cache line back and forth once per task).
#[derive(Clone, Copy)]
pub(crate) struct Group {
    this: NonNull<()>,
    failed: unsafe fn(NonNull<()>, &Arc<Failure>),
    done: unsafe fn(NonNull<()>),
}

// SAFETY: the group is `Finish`, so `Send + Sync`, and is reached only through its methods.
unsafe impl Send for Group {}
// SAFETY: as for `Send`.
unsafe impl Sync for Group {}

impl Group {
    /// # Safety
    /// `group` must stay alive until every task launched with the returned `Group` has
    /// made its call of [`Finish::task_done`] (a scope waits for its counter, which those
    /// calls bring to zero, before it frees its state).
    pub(crate) unsafe fn new<G: Finish>(group: &G) -> Group {
        /// # Safety
        /// `p` is the live `G` given to `new`.
        unsafe fn failed<G: Finish>(p: NonNull<()>, failure: &Arc<Failure>) {
            // SAFETY: the caller's contract; no task has finished, so the group lives.
            unsafe { p.cast::<G>().as_ref() }.task_failed(failure)
        }
        /// # Safety
        /// As for `failed`.
        unsafe fn done<G: Finish>(p: NonNull<()>) {
            // SAFETY: the caller's contract.
            unsafe { G::task_done(p.cast::<G>().as_ptr()) }
        }
        Group {
            this: NonNull::from(group).cast(),
            failed: failed::<G>,
            done: done::<G>,
        }
    }

    pub(crate) fn task_failed(&self, failure: &Arc<Failure>) {
        // SAFETY: by `new`'s contract the group lives until its tasks' `task_done`, and a
        // node tells a failure before that.
        unsafe { (self.failed)(self.this, failure) }
    }

    /// The node's last use of the group.
    pub(crate) fn task_done(&self) {
        // SAFETY: as in `task_failed`; a node calls this once, in `finish`.
        unsafe { (self.done)(self.this) }
    }
}

/// A task's closure inside its node, taken at most once: called, or dropped unrun.
pub(crate) trait Body: Send + Sync {
    /// Calls the closure if it is still there; returns whether it was.
    ///
    /// # Safety
    /// No other thread touches the closure meanwhile (see [`Once`]'s `Sync`).
    unsafe fn call(&self) -> bool;

    /// Drops the closure if it is still there.
    ///
    /// # Safety
    /// As for [`call`](Body::call).
    unsafe fn discard(&self);
}

/// The closure of a task node, until taken.
pub(crate) struct Once<F>(UnsafeCell<Option<F>>);

// SAFETY: the cell is touched only through `Body`, whose callers (`TaskNode::run` and
// `abandon`) are reached by one thread at a time: the countdown lets exactly one arrival
// through (the last), which schedules the node or abandons it, and the one worker that
// dequeues it runs it, in sequence through the queue; shutdown cancels a node only once
// it is out of every queue. The closure itself is `Send`.
unsafe impl<F: Send> Sync for Once<F> {}

impl<F> Once<F> {
    pub(crate) fn new(f: F) -> Once<F> {
        Once(UnsafeCell::new(Some(f)))
    }

    /// The closure, if still there.
    ///
    /// # Safety
    /// As for [`Body::call`].
    pub(crate) unsafe fn take(&self) -> Option<F> {
        // SAFETY: by the contract, this thread alone reaches the cell now.
        unsafe { (*self.0.get()).take() }
    }
}

impl<F: FnOnce() + Send> Body for Once<F> {
    unsafe fn call(&self) -> bool {
        // SAFETY: the contract is `take`'s.
        match unsafe { self.take() } {
            Some(f) => {
                f();
                true
            }
            None => false,
        }
    }

    unsafe fn discard(&self) {
        // SAFETY: as in `call`.
        drop_quietly(unsafe { self.take() });
    }
}

/// A task body that keeps what its closure returned: the value of a
/// [`Future`](crate::Future), in the task's own node (one allocation for the task, its event
/// and its value; a future is then one counted reference).
pub(crate) struct Valued<U, F> {
    value: OnceValue<U>,
    job: Once<F>,
}

impl<U, F> Valued<U, F> {
    pub(crate) fn new(f: F) -> Valued<U, F> {
        Valued {
            value: OnceValue::new(),
            job: Once::new(f),
        }
    }
}

/// A body that keeps its task's result: the value of a [`Future`](crate::Future), set before
/// the node's event triggers.
pub(crate) trait Keeps<U> {
    fn value(&self) -> &OnceValue<U>;
}

impl<U, F> Keeps<U> for Valued<U, F> {
    fn value(&self) -> &OnceValue<U> {
        &self.value
    }
}

/// A body that carries its own preconditions (a dataflow task's input futures), which the
/// launch subscribes to in place.
pub(crate) trait OwnPreconditions {
    /// The events, in order (duplicates and triggered ones included).
    ///
    /// # Safety
    /// Called only before the node is started, by the launching thread (a body may hand its
    /// preconditions over when it runs).
    unsafe fn preconditions(&self) -> impl Iterator<Item = &Event>;
}

impl<U: Send + Sync, F: FnOnce() -> U + Send> Body for Valued<U, F> {
    unsafe fn call(&self) -> bool {
        // SAFETY: the contract is `take`'s.
        match unsafe { self.job.take() } {
            Some(f) => {
                // SAFETY: the node runs once, on this thread: the one write of the cell.
                unsafe { self.value.set(f()) };
                true
            }
            None => false,
        }
    }

    unsafe fn discard(&self) {
        // SAFETY: as in `call`.
        drop_quietly(unsafe { self.job.take() });
    }
}

/// A node's arguments: the runtime, where it runs, how many preconditions it waits for, its
/// body, its scope, its name and where it was launched.
pub(crate) type NodeArgs<J> = (
    Arc<Shared>,
    Placement,
    usize,
    J,
    Option<Group>,
    Option<String>,
    &'static Location<'static>,
);

/// The node as the queues hold it. Also the one way, with [`event_of`], that
/// a node whose body borrows (`J` not `'static`, a scope's task) becomes a `'static` object.
/// This is sound because of what `new_unbounded` asks: what the body borrows lives until the
/// body is consumed or dropped, which happens before the node's event triggers; from then on
/// the node holds no borrow (its closure cell is empty), whoever still holds it.
fn task_of<'a, J: Body + 'a>(node: Arc<TaskNode<J>>) -> Arc<TaskNode> {
    let node: Arc<TaskNode<dyn Body + 'a>> = node;
    // SAFETY: see above; the two are the same pointer, differing only in the lifetime bound.
    unsafe { std::mem::transmute::<Arc<TaskNode<dyn Body + 'a>>, Arc<TaskNode>>(node) }
}

/// The node's completion event; see [`task_of`].
fn event_of<'a, J: Body + 'a>(node: Arc<TaskNode<J>>) -> Event {
    let node: Arc<dyn HasState + 'a> = node;
    // SAFETY: see `task_of`.
    Event(unsafe { std::mem::transmute::<Arc<dyn HasState + 'a>, Arc<dyn HasState>>(node) })
}

impl<J: Body> TaskNode<J> {
    /// A node whose body may borrow.
    ///
    /// # Safety
    /// What the body borrows must outlive the body: until the runtime consumes it (the task
    /// ran) or drops it (abandoned, cancelled), which happens before the node's event
    /// triggers (a scope waits for its tasks' events before it returns).
    pub(crate) unsafe fn new_unbounded(args: NodeArgs<J>) -> Self {
        let (shared, placement, preconditions, job, scope, name, launched_at) = args;
        TaskNode {
            count: Countdown::new(preconditions + 1),
            state: EventState::new(),
            scope,
            placement,
            name,
            launched_at,
            shared,
            links: [const { WaitLink::new() }; LINKS],
            job,
        }
    }

    /// The task's body (a [`Valued`] one holds the task's result).
    pub(crate) fn body(&self) -> &J {
        &self.job
    }

    /// The task's completion event, from the launch's own reference to the node (no count
    /// taken: this is on every launch's path).
    pub(crate) fn into_event(self: Arc<Self>) -> Event {
        event_of(self)
    }

    /// Subscribes to each of `preconditions` (pending, each once; the first few through the
    /// node's own links) and hands in the launch token. The node holds one count of itself
    /// for all of these arrivals, and the last one takes it: to queue the node, or to abandon
    /// it (a failed precondition) and let it go.
    pub(crate) fn start(self: Arc<Self>, preconditions: &[&Event]) {
        // `Arc::into_raw` is never null.
        let held = NonNull::new(Arc::into_raw(self).cast_mut()).expect("an Arc's pointer");
        let held = held.cast::<()>();
        // SAFETY: the count taken just above keeps the node alive until the last arrival,
        // which is the last call of `arrive_held` for it: one per subscription made here and
        // one for the token below; `arrive_held` may run on any thread (the node is `Sync`).
        let target = unsafe { Held::new(held, arrive_held::<J>) };
        // SAFETY: the count keeps the node alive at least until the token's arrival below.
        let node = unsafe { held.cast::<Self>().as_ref() };
        for (i, e) in preconditions.iter().enumerate() {
            match node.links.get(i) {
                // SAFETY: link `i` is subscribed once, here (a node is launched once), and it
                // lives in the node, alive until this subscription's arrival.
                Some(link) => unsafe { e.state().subscribe_in_held(link, target) },
                None => e.state().subscribe_held(target),
            }
        }
        // SAFETY: the token's arrival, once; nothing of the node is used after it.
        unsafe { arrive_held::<J>(held, &Ok(())) }
    }
}

/// One precondition of the node at `this` (or its launch token) arrived.
///
/// # Safety
/// `this` is a `TaskNode<J>` whose count `start` holds, and this is one of the arrivals it
/// counts, made once.
unsafe fn arrive_held<J: Body>(this: NonNull<()>, outcome: &Outcome) {
    let node = this.cast::<TaskNode<J>>().as_ptr().cast_const();
    // SAFETY: the node lives until its last arrival; only its countdown (atomics) is borrowed
    // across this arrival, after which another thread may free the node, as in `Arc`'s drop.
    let count = unsafe { &(*node).count };
    if let Some(ready) = count.arrive(outcome) {
        // SAFETY: the last arrival: the count `start` took is ours now.
        let node = unsafe { Arc::from_raw(node) };
        match ready {
            Ok(()) => {
                // Whoever runs the node misses on its lines (written long before, by the
                // launching thread) and then on its waiters' links: fetched now, they arrive
                // while the node waits in the queue.
                crate::hint::claim(&*node);
                node.state.prefetch_first_waiter();
                super::schedule(task_of(node))
            }
            Err(f) => node.abandon(f),
        }
    }
}

impl<J: Body + ?Sized> TaskNode<J> {
    /// Triggers the task's event; tells its scope of a failure before, and of the end after.
    fn finish(&self, outcome: Outcome) {
        if let (Some(scope), Err(failure)) = (&self.scope, &outcome) {
            scope.task_failed(failure);
        }
        let _ = self.state.trigger(outcome);
        // The last use of the group: it may be freed once this returns.
        if let Some(scope) = &self.scope {
            scope.task_done();
        }
    }

    fn label(&self) -> TaskLabel {
        TaskLabel {
            name: self.name.clone(),
            launched_at: self.launched_at,
        }
    }

    /// Runs the task on the calling worker and triggers its event. The closure is consumed
    /// before the event triggers, so whatever it borrowed is released by then.
    pub(crate) fn run(self: Arc<Self>) {
        // SAFETY: this thread triggers the node's event, after the body.
        unsafe { self.state.prefetch_more_waiters() };
        // SAFETY: the worker that dequeued the node is the one thread that reaches it now
        // (see `Once`).
        let outcome = match catch_unwind(AssertUnwindSafe(|| unsafe { self.job.call() })) {
            Ok(ran) => {
                assert!(ran, "a task runs once");
                Ok(())
            }
            Err(payload) => {
                let cause = cause_of(payload.as_ref());
                // A payload whose own `Drop` panics must not take the worker down.
                drop_quietly(payload);
                Err(Arc::new(Failure::Task {
                    task: self.label(),
                    cause,
                }))
            }
        };
        self.finish(outcome);
    }

    /// Does not run the task: drops its closure and poisons its event with `failure`. A
    /// captured value whose `Drop` panics is caught here: the event is poisoned all the same
    /// and the worker (or the thread that triggered the failure) goes on.
    pub(crate) fn abandon(&self, failure: Arc<Failure>) {
        // SAFETY: called by the last arrival (which did not schedule the node) or on a node
        // taken out of its queue at shutdown: one thread (see `Once`).
        unsafe { self.job.discard() };
        self.finish(Err(failure));
    }

    /// Drops the task because the runtime shut down.
    pub(crate) fn cancel(&self) {
        self.abandon(Arc::new(Failure::Task {
            task: self.label(),
            cause: Cause::Cancelled,
        }));
    }
}

impl<J: Body + ?Sized> HasState for TaskNode<J> {
    fn state(&self) -> &EventState {
        &self.state
    }
}

/// Drops `value`, catching a panic in its `Drop`. The panic's own payload is leaked rather than
/// dropped: its `Drop` could panic again, and a leak is the only end to that chain.
pub(crate) fn drop_quietly<T>(value: T) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        std::mem::forget(payload);
    }
}
