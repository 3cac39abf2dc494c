//! Events: the completion of a task, a merge of events, or a trigger pulled by hand.
//!
//! An event is one atomic word. While pending it heads a lock-free stack of waiters (tasks
//! whose precondition it is, merges, blocked threads); triggering swaps in a terminal sentinel
//! (`OK` or `POISONED`) and notifies every waiter that was pushed before. A waiter pushed after
//! sees the sentinel and is told at once. Because the only operations are "push while pending"
//! and "swap to terminal, once", there is no ABA problem and no waiter can be lost: either its
//! push precedes the swap (the trigger walks it) or it fails and the pusher notifies itself.

use crate::countdown::{Countdown, Outcome};
use crate::failure::{AlreadyTriggered, Failure, TaskFailed};
use crate::sync::{self, lock, AtomicBool, AtomicPtr, Mutex, Ordering};
use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// How a thread waits for an untriggered event; returns whether it waited until it triggered.
pub(crate) type WaitHook = fn(&Event) -> bool;

thread_local! {
    /// How this thread waits for an event that has not triggered, if not by parking: set by
    /// the runtime on its worker threads ([`set_wait_hook`]), so that the event layer need not
    /// know the runtime. Returns whether it waited until the event triggered.
    static WAIT_HOOK: Cell<Option<WaitHook>> = const { Cell::new(None) };
}

/// Sets (or with `None` clears) how [`Event::wait`] waits on the calling thread.
pub(crate) fn set_wait_hook(hook: Option<WaitHook>) {
    WAIT_HOOK.with(|h| h.set(hook));
}

/// Something told when an event it waits on triggers.
pub(crate) trait Notify: Send + Sync {
    fn notify(self: Arc<Self>, outcome: &Outcome);
}

/// An entry of an event's waiter list: a box of its own ([`EventState::subscribe`]), or a
/// [`WaitLink`] embedded in the thing it notifies ([`EventState::subscribe_in_held`]), which saves a
/// task its allocations per precondition (and the frees on the triggering thread).
pub(crate) struct Waiter {
    next: *mut Waiter,
    /// Taken when the waiter is told (or its event dropped); whether the waiter is a box of
    /// its own is told by the kind of target (a flag beside it made a link 40 bytes, not 32).
    target: Option<Target>,
}

/// Room for one waiter, embedded in what it notifies (a task node has a few).
pub(crate) struct WaitLink(std::cell::UnsafeCell<Waiter>);

// SAFETY: a link is reached by the one thread that subscribes it until its push publishes
// it, then only by the one thread whose swap took the event's list (or by the event's drop),
// which hands the target on and never touches the link again.
unsafe impl Sync for WaitLink {}
// SAFETY: as for `Sync`; its target is `Send + Sync`.
unsafe impl Send for WaitLink {}

impl WaitLink {
    pub(crate) const fn new() -> WaitLink {
        WaitLink(std::cell::UnsafeCell::new(Waiter {
            next: ptr::null_mut(),
            target: None,
        }))
    }
}

/// Who a waiter tells.
enum Target {
    /// Kept alive by the waiter's own count.
    Counted(Arc<dyn Notify>),
    /// Kept alive by its owner, which holds one count for all of its subscriptions.
    Held(Held),
    /// `Held`, in a link embedded in the target: the link's memory is the target's.
    HeldIn(Held),
}

/// Fetches the link at `w` for writing, unless `w` is no link.
fn prefetch_link(w: *mut Waiter) {
    if !terminal(w) && !w.is_null() {
        crate::hint::claim_range_at(w as usize, std::mem::size_of::<Waiter>());
    }
}

impl Target {
    /// Where the target's own state starts (what telling it writes first), for a hint.
    fn addr(&self) -> usize {
        match self {
            Target::Counted(t) => Arc::as_ptr(t) as *const u8 as usize,
            Target::Held(h) | Target::HeldIn(h) => h.this.as_ptr() as usize,
        }
    }

    fn notify(self, outcome: &Outcome) {
        match self {
            Target::Counted(t) => t.notify(outcome),
            Target::Held(h) | Target::HeldIn(h) => h.notify(outcome),
        }
    }
}

/// A subscriber told by pointer: one that keeps itself alive until every subscription it made
/// has told it (a task node holds one count of itself for its launch and all its
/// preconditions, and the last arrival takes it). A subscription then costs no count of its
/// own: no increment when made, no decrement when told — on two workers, two fewer passes of
/// the subscriber's cache line between the launching and the triggering worker. A `Held`
/// subscriber of an event dropped untriggered is never told (and so never freed).
#[derive(Clone, Copy)]
pub(crate) struct Held {
    this: NonNull<()>,
    arrive: unsafe fn(NonNull<()>, &Outcome),
}

// SAFETY: `Held::new`'s caller guarantees that `arrive(this, _)` may be called from any thread.
unsafe impl Send for Held {}
// SAFETY: as for `Send`; a `Held` is two plain words.
unsafe impl Sync for Held {}

impl Held {
    /// # Safety
    /// `this` stays valid until `arrive` has been called once for each subscription made with
    /// the returned `Held`, and `arrive(this, outcome)` is sound to call on any thread, once per
    /// subscription.
    pub(crate) unsafe fn new(this: NonNull<()>, arrive: unsafe fn(NonNull<()>, &Outcome)) -> Held {
        Held { this, arrive }
    }

    fn notify(self, outcome: &Outcome) {
        // SAFETY: `new`'s contract; each subscription is told once (its waiter is taken apart
        // once).
        unsafe { (self.arrive)(self.this, outcome) }
    }
}

/// Takes the waiter at `w` apart: its successor and its target, freeing it if boxed.
///
/// # Safety
/// The caller owns `w` (it is no longer reachable from any list), and `w` holds its target.
unsafe fn take(w: *mut Waiter) -> (*mut Waiter, Target) {
    // SAFETY: owned (the contract); the target (which may own the link's memory) is moved
    // out last, and the link is not touched after that.
    unsafe {
        let next = (*w).next;
        let target = (*w).target.take().expect("a listed waiter has its target");
        if !matches!(target, Target::HeldIn(_)) {
            drop(Box::from_raw(w));
        }
        (next, target)
    }
}

const OK: *mut Waiter = ptr::without_provenance_mut(1);
const POISONED: *mut Waiter = ptr::without_provenance_mut(2);

fn terminal(p: *mut Waiter) -> bool {
    p == OK || p == POISONED
}

pub(crate) struct EventState {
    head: AtomicPtr<Waiter>,
    /// The root cause, written before `head` becomes `POISONED`.
    failure: Mutex<Option<Arc<Failure>>>,
}

// SAFETY: the raw waiter pointers are owned by the list; nodes are only created by `subscribe`
// and consumed by the single thread whose swap took the list (or by `drop`, which has `&mut`).
// Their targets are `Send + Sync`.
unsafe impl Send for EventState {}
// SAFETY: as above; all shared access goes through the atomic head and the mutex.
unsafe impl Sync for EventState {}

impl EventState {
    pub(crate) fn new() -> EventState {
        EventState {
            head: AtomicPtr::new(ptr::null_mut()),
            failure: Mutex::new(None),
        }
    }

    pub(crate) fn new_done(outcome: Outcome) -> EventState {
        let e = EventState::new();
        e.trigger(outcome).expect("a fresh event is pending");
        e
    }

    /// How the event ended, or `None` while pending.
    pub(crate) fn outcome(&self) -> Option<Outcome> {
        let h = self.head.load(Ordering::Acquire);
        if h == OK {
            Some(Ok(()))
        } else if h == POISONED {
            Some(Err(lock(&self.failure)
                .clone()
                .expect("a poisoned event has its failure")))
        } else {
            None
        }
    }

    /// Hints that this thread triggers the event later: the newest waiter's link is fetched
    /// (the links are a chain through their subscribers, each a miss when walked cold).
    pub(crate) fn prefetch_first_waiter(&self) {
        prefetch_link(self.head.load(Ordering::Relaxed));
    }

    /// Hints that this thread triggers the event soon, after [`prefetch_first_waiter`]: the
    /// second waiter's link and the first one's target are fetched.
    ///
    /// # Safety
    /// Only the thread that will trigger the event calls this, before it does: the listed
    /// links stay in place (nobody else takes the list) and their fields do not change
    /// (a push only writes the new link).
    pub(crate) unsafe fn prefetch_more_waiters(&self) {
        let h = self.head.load(Ordering::Acquire);
        if terminal(h) || h.is_null() {
            return;
        }
        // SAFETY: `h` is listed and stays so until this thread's trigger (the contract); its
        // fields were written before the push that published it, which the load acquired.
        let (next, target) = unsafe { ((*h).next, (*h).target.as_ref().map(Target::addr)) };
        prefetch_link(next);
        if let Some(t) = target {
            crate::hint::claim_at(t);
        }
    }

    /// Whether the event has triggered without failure (one load).
    pub(crate) fn succeeded(&self) -> bool {
        self.head.load(Ordering::Acquire) == OK
    }

    /// Has `target` notified when the event triggers, or right now (on this thread) if it has.
    pub(crate) fn subscribe(&self, target: Arc<dyn Notify>) {
        self.subscribe_target(Target::Counted(target))
    }

    /// [`subscribe`](Self::subscribe) for a subscriber told by pointer.
    pub(crate) fn subscribe_held(&self, target: Held) {
        self.subscribe_target(Target::Held(target))
    }

    fn subscribe_target(&self, target: Target) {
        if let Some(outcome) = self.outcome() {
            return target.notify(&outcome);
        }
        let node = Box::into_raw(Box::new(Waiter {
            next: ptr::null_mut(),
            target: Some(target),
        }));
        // SAFETY: a fresh box, ours until published.
        unsafe { self.push(node) }
    }

    /// [`subscribe_held`](Self::subscribe_held) with the waiter in `link`, embedded in the
    /// subscriber: no allocation.
    ///
    /// # Safety
    /// `link` is in no list (each link of a task node is subscribed once), and its memory
    /// stays valid until `target` is told (it is embedded in the subscriber).
    pub(crate) unsafe fn subscribe_in_held(&self, link: &WaitLink, target: Held) {
        // SAFETY: the caller's contract.
        let node = link.0.get();
        // SAFETY: unlisted (the contract): this thread alone reaches it.
        unsafe {
            (*node).target = Some(Target::HeldIn(target));
            self.push(node);
        }
    }

    /// Publishes `node` on the list, or tells its target at once if the event triggered.
    ///
    /// # Safety
    /// `node` holds its target and is ours: in no list, valid while its target lives.
    unsafe fn push(&self, node: *mut Waiter) {
        let mut h = self.head.load(Ordering::Acquire);
        loop {
            if terminal(h) {
                // SAFETY: never published; we own it.
                let (_, target) = unsafe { take(node) };
                return target.notify(&self.outcome().expect("terminal"));
            }
            // SAFETY: `node` is ours until the CAS below publishes it.
            unsafe { (*node).next = h };
            match self
                .head
                .compare_exchange_weak(h, node, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(now) => h = now,
            }
        }
    }

    /// Triggers the event once and notifies its waiters, oldest first.
    pub(crate) fn trigger(&self, outcome: Outcome) -> Result<(), AlreadyTriggered> {
        let list = match &outcome {
            Ok(()) => self.take_list(OK)?,
            Err(f) => {
                // Poisoning is rare: holding the lock across the swap makes the stored failure
                // always the winner's, and it is in place before anyone can see `POISONED`.
                let mut slot = lock(&self.failure);
                let list = self.take_list(POISONED)?;
                *slot = Some(f.clone());
                drop(slot);
                list
            }
        };
        self.notify_all(list);
        Ok(())
    }

    /// Swaps the waiter list for `sentinel` unless the event already triggered.
    fn take_list(&self, sentinel: *mut Waiter) -> Result<*mut Waiter, AlreadyTriggered> {
        let mut h = self.head.load(Ordering::Acquire);
        loop {
            if terminal(h) {
                return Err(AlreadyTriggered);
            }
            match self
                .head
                .compare_exchange_weak(h, sentinel, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(h),
                Err(now) => h = now,
            }
        }
    }

    fn notify_all(&self, mut list: *mut Waiter) {
        let outcome = self.outcome().expect("just triggered");
        // Reverse the stack so waiters hear in the order they subscribed.
        let mut fifo: *mut Waiter = ptr::null_mut();
        while !list.is_null() {
            // SAFETY: the swap made this thread the sole owner of every node in `list`.
            list = unsafe {
                let next = (*list).next;
                // The targets' misses overlap with the walk instead of following one another.
                if let Some(t) = &(*list).target {
                    crate::hint::claim_at(t.addr());
                }
                (*list).next = fifo;
                fifo = list;
                next
            };
        }
        while !fifo.is_null() {
            // SAFETY: as above; each node is taken apart exactly once, here.
            let (next, target) = unsafe { take(fifo) };
            fifo = next;
            target.notify(&outcome);
        }
    }
}

impl Drop for EventState {
    fn drop(&mut self) {
        let mut list = self.head.load(Ordering::Acquire);
        while !terminal(list) && !list.is_null() {
            // SAFETY: `&mut self`: nobody else can reach the list any more. Dropping the
            // target may free the link's memory; `take` read the successor first.
            let (next, target) = unsafe { take(list) };
            list = next;
            drop(target);
        }
    }
}

/// Anything that owns an event's state: a plain event, a merge, or a task node, which embeds
/// its completion event so that a launch allocates once.
pub(crate) trait HasState: Send + Sync {
    fn state(&self) -> &EventState;
}

impl HasState for EventState {
    fn state(&self) -> &EventState {
        self
    }
}

/// The completion of something: a task, a merge of events, or a [`UserEvent`]. Cheap to clone;
/// every clone observes the same trigger.
///
/// ```
/// let rt = tactor::Runtime::new(2).unwrap();
/// let a = rt.launch(tactor::Placement::Any, &[], || ());
/// let b = rt.launch(tactor::Placement::Any, &[], || ());
/// tactor::Event::merge(&[a, b]).wait().unwrap();
/// ```
#[derive(Clone)]
pub struct Event(pub(crate) Arc<dyn HasState>);

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state().outcome() {
            None => "pending".to_string(),
            Some(Ok(())) => "triggered".to_string(),
            Some(Err(e)) => format!("poisoned: {e}"),
        };
        write!(f, "Event({state})")
    }
}

impl Event {
    pub(crate) fn state(&self) -> &EventState {
        self.0.state()
    }

    pub(crate) fn pending() -> Event {
        Event(Arc::new(EventState::new()))
    }

    /// An event that has already triggered.
    ///
    /// ```
    /// assert!(tactor::Event::triggered().has_triggered());
    /// ```
    pub fn triggered() -> Event {
        Event(Arc::new(EventState::new_done(Ok(()))))
    }

    /// Whether the event has triggered (successfully or poisoned).
    pub fn has_triggered(&self) -> bool {
        self.state().outcome().is_some()
    }

    /// How the event ended, without waiting: `None` while pending.
    pub fn try_outcome(&self) -> Option<Result<(), TaskFailed>> {
        self.state().outcome().map(|o| o.map_err(TaskFailed))
    }

    /// Whether two handles are the same event.
    pub fn ptr_eq(&self, other: &Event) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }

    /// The event's identity as a number: equal for two handles exactly when [`Event::ptr_eq`].
    pub(crate) fn addr(&self) -> usize {
        Arc::as_ptr(&self.0).cast::<u8>() as usize
    }

    /// An event that triggers once all of `events` have; poisoned (with the first failure to
    /// arrive) if any of them is.
    pub fn merge(events: &[Event]) -> Event {
        let pending: Vec<&Event> = events.iter().filter(|e| !e.has_triggered()).collect();
        let first_failure = events.iter().find_map(|e| match e.state().outcome() {
            Some(Err(f)) => Some(f),
            _ => None,
        });
        if let Some(f) = first_failure {
            return Event(Arc::new(EventState::new_done(Err(f))));
        }
        match pending.as_slice() {
            [] => Event::triggered(),
            [one] => (*one).clone(),
            many => {
                let node = Arc::new(Merge {
                    count: Countdown::new(many.len()),
                    state: EventState::new(),
                });
                for e in many {
                    e.state().subscribe(node.clone());
                }
                Event(node)
            }
        }
    }

    /// Blocks until the event triggers and returns its outcome.
    ///
    /// Inside a task, the task is suspended: its stack is set aside and its worker goes on
    /// running other work, then resumes the task once the event has triggered. The worker is
    /// not lost, and a wait never deadlocks on work that itself waits for this task or for
    /// any task suspended on the same worker: suspended tasks resume in whatever order their
    /// events trigger. (Under Miri and loom, which cannot switch stacks, the waiting task
    /// runs other tasks on its own stack instead, which can deadlock on such cycles.) A wait
    /// for an event that nothing will ever trigger still waits forever; an untriggered
    /// [`UserEvent`] that is dropped poisons its event, so such a wait ends with an error.
    ///
    /// Outside the runtime's workers, spins briefly and then parks the thread.
    ///
    /// ```
    /// use tactor::{Placement, Runtime, UserEvent};
    /// let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
    /// let gate = UserEvent::new();
    /// let g = gate.event();
    /// // The first task waits for a trigger that a task queued behind it gives.
    /// let first = rt.launch(Placement::Worker(0), &[], move || g.wait().unwrap());
    /// rt.launch(Placement::Worker(0), &[], move || gate.trigger().unwrap());
    /// first.wait().unwrap();
    /// ```
    pub fn wait(&self) -> Result<(), TaskFailed> {
        if let Some(o) = self.state().outcome() {
            return o.map_err(TaskFailed);
        }
        // A worker thread serves the wait its own way (the runtime sets the hook there);
        // any other thread parks.
        let served = WAIT_HOOK.with(Cell::get).is_some_and(|serve| serve(self));
        if !served {
            self.block();
        }
        match self.state().outcome() {
            Some(o) => o.map_err(TaskFailed),
            // Given up at the runtime's shutdown (`frames::ABANDON_AFTER`).
            None => Err(TaskFailed(Arc::new(crate::Failure::Abandoned))),
        }
    }

    /// Makes the calling thread's parker fire when the event triggers (a suspended task's
    /// worker may be asleep by then).
    #[cfg_attr(any(miri, loom), allow(dead_code))]
    pub(crate) fn unpark_on_trigger(&self) {
        self.state().subscribe(Arc::new(Wake {
            thread: sync::current(),
            woken: AtomicBool::new(false),
        }));
    }

    /// Parks the calling thread until the event triggers.
    pub(crate) fn block(&self) {
        // Under the model checker every load is a branch point; spinning would only blow up
        // the state space without adding interleavings that the park path lacks.
        #[cfg(not(loom))]
        for _ in 0..200 {
            if self.has_triggered() {
                return;
            }
            std::hint::spin_loop();
        }
        let waiter = Arc::new(Wake {
            thread: sync::current(),
            woken: AtomicBool::new(false),
        });
        self.state().subscribe(waiter.clone());
        while !waiter.woken.load(Ordering::Acquire) {
            sync::park();
        }
    }
}

/// A merged event: its state and the countdown of its inputs.
struct Merge {
    count: Countdown,
    state: EventState,
}

impl HasState for Merge {
    fn state(&self) -> &EventState {
        &self.state
    }
}

impl Notify for Merge {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        if let Some(all) = self.count.arrive(outcome) {
            let _ = self.state.trigger(all);
        }
    }
}

/// A thread blocked in [`Event::wait`].
struct Wake {
    thread: sync::Thread,
    woken: AtomicBool,
}

impl Notify for Wake {
    fn notify(self: Arc<Self>, _: &Outcome) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// An event triggered by hand, once. Dropping the last handle without triggering poisons it,
/// so nothing downstream waits forever on a trigger that can no longer come.
///
/// ```
/// let rt = tactor::Runtime::new(1).unwrap();
/// let go = tactor::UserEvent::new();
/// let task = rt.launch(tactor::Placement::Any, &[go.event()], || ());
/// assert!(!task.has_triggered());
/// go.trigger().unwrap();
/// task.wait().unwrap();
/// assert!(go.trigger().is_err()); // a second trigger is an error
/// ```
#[derive(Clone)]
pub struct UserEvent(Arc<UserInner>);

struct UserInner(Event);

impl Default for UserEvent {
    fn default() -> Self {
        UserEvent::new()
    }
}

impl UserEvent {
    /// A pending event.
    pub fn new() -> UserEvent {
        UserEvent(Arc::new(UserInner(Event::pending())))
    }

    /// The event, to wait on or to use as a precondition.
    pub fn event(&self) -> Event {
        self.0 .0.clone()
    }

    /// Triggers the event: tasks that wait on it may run.
    pub fn trigger(&self) -> Result<(), AlreadyTriggered> {
        self.0 .0.state().trigger(Ok(()))
    }

    /// Poisons the event: tasks that wait on it do not run, and waiters get `reason`.
    pub fn poison(&self, reason: &str) -> Result<(), AlreadyTriggered> {
        self.0
             .0
            .state()
            .trigger(Err(Arc::new(Failure::Poisoned(reason.to_string()))))
    }
}

impl Drop for UserInner {
    fn drop(&mut self) {
        let _ = self
            .0
            .state()
            .trigger(Err(Arc::new(Failure::UserEventDropped)));
    }
}
