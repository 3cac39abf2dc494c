//! Sources of work that a worker must poll: work that arrives without a push to the worker's
//! queues (and so without a wake-up), such as compiled-subgraph messages through the rings
//! between workers, or a network's completion queues. The worker loop knows them only through
//! [`Source`]; a new kind inside the runtime is a module implementing it and one line in
//! `runtime::sources_for` (which assembles them, above both); a kind from outside (a network layer) is a [`Poller`] given to
//! [`Builder::poller`](crate::Builder::poller).

use std::sync::Arc;

/// One worker's end of a source of work. Owned by the worker's thread.
pub(crate) trait Source {
    /// Runs what is ready here, within a bounded budget so that the worker returns to its
    /// queues. Returns what it did.
    fn poll(&self) -> Polled;
    /// Whether work is in flight that will arrive without a wake-up and is cheap to watch
    /// for: the worker then watches this source closely, its queues now and then.
    fn busy(&self) -> bool;
    /// Whether something is there to do (checked after an idle worker announced that it is
    /// going to sleep), or expected from outside: the worker then keeps polling (and yields
    /// its core between polls) instead of parking.
    fn has_work(&self) -> bool;
    /// The runtime shut down: cancel what this worker holds.
    fn cancel(&self);
}

/// Work that reaches the workers from outside the runtime without being pushed to them — a
/// network's completion queues, a device's — and that idle workers must therefore poll.
/// What a poll finds usually triggers events ([`UserEvent`](crate::UserEvent)), which
/// release the tasks or subgraph instances waiting on them.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::{Arc, Mutex};
/// use tactor::{Poller, Runtime, UserEvent};
///
/// /// A doorbell another thread rings; the event triggers on the first poll after it.
/// struct Doorbell {
///     rung: AtomicBool,
///     event: Mutex<Option<UserEvent>>,
/// }
///
/// impl Poller for Doorbell {
///     fn poll(&self, _worker: usize) -> bool {
///         if !self.rung.swap(false, Ordering::AcqRel) {
///             return false;
///         }
///         if let Some(e) = self.event.lock().unwrap().take() {
///             e.trigger().unwrap();
///         }
///         true
///     }
///     fn expecting(&self) -> bool {
///         self.event.lock().unwrap().is_some()
///     }
/// }
///
/// let bell = Arc::new(Doorbell { rung: AtomicBool::new(false), event: Mutex::new(None) });
/// let rt = Runtime::builder().workers(1).pin(false).poller(bell.clone()).build().unwrap();
/// let rang = UserEvent::new();
/// let done = rt.launch(tactor::Placement::Any, &[rang.event()], || ());
/// *bell.event.lock().unwrap() = Some(rang);
/// rt.wake(); // a parked worker would not notice that the bell now expects a ring
/// let b = bell.clone();
/// std::thread::spawn(move || b.rung.store(true, Ordering::Release));
/// done.wait().unwrap();
/// ```
pub trait Poller: Send + Sync + 'static {
    /// Handles what arrived, on worker `worker`, within a small budget (the worker goes back
    /// to its queues afterwards). Returns whether anything was handled. Called concurrently
    /// by every worker: a poller that can only be progressed by one thread at a time
    /// try-locks and returns `false` when it is taken.
    fn poll(&self, worker: usize) -> bool;
    /// Whether something is expected: while it is, idle workers keep polling (yielding their
    /// core after a while) instead of parking, since nothing would wake them. When it becomes
    /// true, call [`Handle::wake`](crate::Handle::wake): workers that parked before would not
    /// look again.
    fn expecting(&self) -> bool;
}

/// What a poll of a [`Source`] did, weakest first (several sources' polls combine to the
/// strongest).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(crate) enum Polled {
    /// Nothing.
    Nothing,
    /// Ran work itself (compiled vertices, inline).
    Ran,
    /// Released work into the task queues (by triggering events): the worker should look
    /// there now rather than poll on.
    Queued,
}

/// A [`Poller`] as one worker's [`Source`]. Not `busy`: a poll costs a pass through the
/// network library, so an idle worker looks at its queues between polls.
pub(crate) struct External {
    poller: Arc<dyn Poller>,
    worker: usize,
}

impl External {
    /// Worker `worker`'s end of `poller`.
    pub(crate) fn new(poller: Arc<dyn Poller>, worker: usize) -> External {
        External { poller, worker }
    }
}

impl Source for External {
    fn poll(&self) -> Polled {
        if self.poller.poll(self.worker) {
            Polled::Queued
        } else {
            Polled::Nothing
        }
    }

    fn busy(&self) -> bool {
        false
    }

    fn has_work(&self) -> bool {
        self.poller.expecting()
    }

    fn cancel(&self) {}
}
