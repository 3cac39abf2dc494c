//! The executor: worker threads with work-stealing deques, an injector for work from outside,
//! per-worker inboxes for placed work, and the sleep protocol of idle workers.

pub(crate) mod channel;
mod frames;
pub use frames::ABANDON_AFTER;
pub(crate) mod idle;
pub(crate) mod job;
mod mailbox;
pub(crate) mod offer;
pub(crate) mod once_value;
mod source;
pub use source::Poller;
pub(crate) mod task;
mod worker;

pub(crate) use channel::Msg;
pub(crate) use mailbox::{Pending, Resident, RingOut};
pub use task::Placement;

use crate::event::Event;
use crate::sync::{AtomicBool, Ordering};
use crossbeam_deque::{Injector, Stealer, Worker};
use crossbeam_utils::CachePadded;
use idle::Idle;
use smallvec::SmallVec;
use std::panic::Location;
use std::sync::Arc;
use std::thread::JoinHandle;

/// The sources of work worker `w` polls: the pollers, then its compiled-subgraph mailbox.
/// Assembled here, above the modules that implement [`source::Source`], so that the worker
/// loop and the trait know no kind by name.
fn sources_for(
    rings: &Arc<mailbox::Rings>,
    pollers: &[Arc<dyn Poller>],
    w: usize,
) -> Vec<std::rc::Rc<dyn source::Source>> {
    use std::rc::Rc;
    // Pollers first: what they find often goes to the mailbox (an instance's external
    // precondition), which then runs it in the same pass.
    let mut sources: Vec<Rc<dyn source::Source>> = pollers
        .iter()
        .map(|p| Rc::new(source::External::new(p.clone(), w)) as Rc<dyn source::Source>)
        .collect();
    sources.push(Rc::new(mailbox::Mailbox::new(rings.clone(), w)));
    sources
}
use std::time::Duration;
pub(crate) use task::{Body, Finish, Group, Keeps, Once, OwnPreconditions, TaskNode, Valued};
use worker::Task;

/// State shared by the workers and every handle.
pub(crate) struct Shared {
    injector: Injector<Task>,
    inboxes: Box<[CachePadded<Injector<Task>>]>,
    stealers: Box<[Stealer<Task>]>,
    /// The other ends of the workers' fork-join job deques.
    job_stealers: Box<[Arc<job::Public>]>,
    /// Each worker's offer to take a fork-join job directly while it idles.
    offers: Box<[CachePadded<offer::Offer>]>,
    /// Compiled-subgraph message rings, external queues and instance ids.
    rings: Arc<mailbox::Rings>,
    idle: Idle,
    closed: AtomicBool,
    /// Workers that finished their scheduling loop at shutdown and hold only suspended
    /// frames, if any (`frames::drive`): when every worker is, no task is running anywhere.
    quiet: std::sync::atomic::AtomicUsize,
    /// Unit tests: workers that cannot map coroutine stacks (`Builder::without_stacks`).
    #[cfg(test)]
    no_stacks: bool,
    spin: Duration,
    /// Sources of work from outside the runtime, polled by every worker.
    pollers: Vec<Arc<dyn Poller>>,
    /// Data that tasks may still reach through raw pointers after their owner gave it up
    /// (`Handle::keep_until_shutdown`). Declared last: it is dropped after the queues, and
    /// the queues' tasks with them.
    kept: std::sync::Mutex<Vec<Box<dyn Send + Sync>>>,
}

impl Shared {
    /// Called after every push that another thread must see: wakes the worker that should take
    /// the task if it sleeps, and cancels the queues if the runtime shut down meanwhile (the
    /// final drain may have run before this push became visible).
    fn after_push(&self, target: Option<usize>) {
        match target {
            Some(w) => self.idle.wake_worker(w),
            None => self.idle.wake_one(),
        }
        if self.closed.load(Ordering::SeqCst) {
            self.cancel_shared_queues();
        }
    }

    fn cancel_shared_queues(&self) {
        let queues = std::iter::once(&self.injector).chain(self.inboxes.iter().map(|q| &**q));
        for q in queues {
            while let Some(t) = worker::steal(|| q.steal()) {
                t.cancel();
            }
        }
        self.rings.cancel_activations();
    }
}

/// The index of the worker running the calling code, or `None` outside the runtime's workers
/// (for a per-worker resource such as a network channel, without a lock to find it).
///
/// ```
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// assert_eq!(tactor::current_worker(), None);
/// let e = rt.launch(tactor::Placement::Worker(1), &[], || {
///     assert_eq!(tactor::current_worker(), Some(1));
/// });
/// e.wait().unwrap();
/// ```
pub fn current_worker() -> Option<usize> {
    worker::with_current(|ctx| ctx.map(|c| c.index))
}

/// The handle of the runtime whose worker calls this (from inside a task), or `None` on any
/// other thread.
///
/// ```
/// let rt = tactor::Runtime::builder().workers(1).pin(false).build().unwrap();
/// assert!(tactor::current_handle().is_none());
/// let e = rt.launch(tactor::Placement::Any, &[], || {
///     let h = tactor::current_handle().expect("a task runs on a worker");
///     h.launch(tactor::Placement::Any, &[], || ()).wait().unwrap();
/// });
/// e.wait().unwrap();
/// ```
pub fn current_handle() -> Option<Handle> {
    worker::with_current(|ctx| {
        ctx.map(|c| Handle {
            shared: c.shared.clone(),
        })
    })
}

/// How many workers the runtime of the calling worker has (`None` off the workers): what
/// [`current_handle`] tells, without a counted reference to the runtime.
pub(crate) fn current_workers() -> Option<usize> {
    worker::with_current(|ctx| ctx.map(|c| c.shared.stealers.len()))
}

/// The index of the calling thread if it is one of `handle`'s runtime's workers.
pub(crate) fn worker_of(handle: &Handle) -> Option<usize> {
    worker::with_current(|c| {
        c.filter(|c| Arc::ptr_eq(&c.shared, &handle.shared))
            .map(|c| c.index)
    })
}

/// From inside a long-running task on a worker, runs the compiled work that has arrived for
/// this worker meanwhile (ready vertices of subgraph instances, what pollers bring), then
/// returns to the task. A task that issues or computes for long calls it now and then, so
/// that the instances in flight on its worker are not held up until it ends: a vertex waits
/// for at most the stretch between two calls. Returns whether anything ran; outside a worker
/// it does nothing. Cheap when nothing arrived (it reads the worker's rings).
///
/// ```
/// let rt = tactor::Runtime::builder().workers(1).pin(false).build().unwrap();
/// assert!(!tactor::relax()); // not on a worker
/// rt.launch(tactor::Placement::Any, &[], || {
///     for _ in 0..1000 {
///         // ... a slice of long work ...
///         tactor::relax();
///     }
/// })
/// .wait()
/// .unwrap();
/// ```
pub fn relax() -> bool {
    worker::relax()
}

/// Queues a task whose preconditions have all triggered.
pub(crate) fn schedule(task: Task) {
    worker::with_current(|ctx| match ctx {
        Some(ctx) if Arc::ptr_eq(&ctx.shared, &task.shared) => ctx.push(task),
        _ => {
            let shared = task.shared.clone();
            match task.placement {
                Placement::Worker(w) => {
                    shared.inboxes[w].push(task);
                    shared.after_push(Some(w));
                }
                Placement::Any => {
                    shared.injector.push(task);
                    shared.after_push(None);
                }
            }
        }
    })
}

/// Configures a [`Runtime`].
///
/// ```
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// assert_eq!(rt.workers(), 2);
/// ```
#[derive(Clone)]
pub struct Builder {
    workers: usize,
    pin: bool,
    first_core: usize,
    spin: Duration,
    pollers: Vec<Arc<dyn Poller>>,
    #[cfg(test)]
    no_stacks: bool,
}

impl std::fmt::Debug for Builder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("pin", &self.pin)
            .field("first_core", &self.first_core)
            .field("spin", &self.spin)
            .field("pollers", &self.pollers.len())
            .finish()
    }
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            pin: true,
            first_core: 0,
            // Under Miri every spin is interpreted (a hundred microseconds of its clock is
            // minutes of the test suite): idle workers park at once there.
            spin: Duration::from_micros(if cfg!(miri) { 0 } else { 100 }),
            pollers: Vec::new(),
            #[cfg(test)]
            no_stacks: false,
        }
    }
}

impl Builder {
    /// Unit tests: workers that cannot map coroutine stacks, as under a tight address-space
    /// limit (they run their loop on their own stack, waits served help-first).
    #[cfg(test)]
    #[cfg_attr(loom, allow(dead_code))]
    pub(crate) fn without_stacks(mut self) -> Builder {
        self.no_stacks = true;
        self
    }

    /// Worker threads (default: the cores this process may use). Never more than cores if
    /// they are to spin: spinning threads that share a core starve each other.
    pub fn workers(mut self, n: usize) -> Builder {
        self.workers = n;
        self
    }

    /// Pin worker `w` to the `w`-th core this process may use (counted from
    /// [`Builder::first_core`]) when there are enough of them (default: true).
    pub fn pin(mut self, pin: bool) -> Builder {
        self.pin = pin;
        self
    }

    /// Where pinning starts among the cores this process may use (default 0). Several
    /// processes that share a machine (ranks of one job that the launcher did not bind) each
    /// see every core: give each its own range, or they all pin to the first cores and leave
    /// the others idle. Workers are not pinned when the range runs past the cores.
    ///
    /// ```
    /// // The second of two processes on a machine, one worker each.
    /// let rt = tactor::Runtime::builder().workers(1).first_core(1).build().unwrap();
    /// assert_eq!(rt.workers(), 1);
    /// ```
    pub fn first_core(mut self, first: usize) -> Builder {
        self.first_core = first;
        self
    }

    /// How long an idle worker spins before it parks (default 100 µs, several wake-ups'
    /// worth: a worker that parks sooner pays a wake-up for every short gap between tasks;
    /// 0 under Miri).
    pub fn spin(mut self, spin: Duration) -> Builder {
        self.spin = spin;
        self
    }

    /// Adds a source of work from outside the runtime (a network, a device) that every
    /// worker polls between tasks; see [`Poller`].
    pub fn poller(mut self, poller: Arc<dyn Poller>) -> Builder {
        self.pollers.push(poller);
        self
    }

    /// An upper bound on the bytes the runtime allocates for `workers` workers before any
    /// task runs: per worker its queues, and per ordered pair of workers a compiled-subgraph
    /// message ring, so the total grows with the square of the workers (about 2.3 KiB a pair).
    /// Saturates instead of overflowing.
    ///
    /// ```
    /// let b = tactor::Runtime::builder().workers(4);
    /// assert!(b.footprint() > 16 * 2048);
    /// assert_eq!(tactor::Runtime::builder().workers(usize::MAX).footprint(), u128::MAX);
    /// ```
    pub fn footprint(&self) -> u128 {
        let n = self.workers as u128;
        // Deques (a fork-join deque is 8 KiB), inboxes, idle state and a thread's first pages.
        let per_worker = 64 * 1024;
        mailbox::Rings::footprint(self.workers).saturating_add(n.saturating_mul(per_worker))
    }

    /// Starts the workers. Fails with `InvalidInput` for 0 workers, `OutOfMemory` when the
    /// per-pair rings ([`Builder::footprint`]) cannot be allocated, and with the OS error
    /// when a worker thread cannot be started (the workers already started are stopped).
    pub fn build(self) -> std::io::Result<Runtime> {
        if self.workers == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a runtime needs at least 1 worker, got 0",
            ));
        }
        let Some(rings) = mailbox::Rings::new(self.workers) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!(
                    "{} workers need {} message rings, which do not fit in memory",
                    self.workers,
                    (self.workers as u128).pow(2)
                ),
            ));
        };
        let deques: Vec<Worker<Task>> = (0..self.workers).map(|_| Worker::new_fifo()).collect();
        let jobs: Vec<Arc<job::Public>> = (0..self.workers).map(|_| job::Public::new()).collect();
        let shared = Arc::new(Shared {
            injector: Injector::new(),
            inboxes: (0..self.workers)
                .map(|_| CachePadded::new(Injector::new()))
                .collect(),
            stealers: deques.iter().map(Worker::stealer).collect(),
            job_stealers: jobs.iter().cloned().collect(),
            offers: (0..self.workers)
                .map(|_| CachePadded::new(offer::Offer::new()))
                .collect(),
            rings: Arc::new(rings),
            idle: Idle::new(self.workers),
            closed: AtomicBool::new(false),
            quiet: std::sync::atomic::AtomicUsize::new(0),
            #[cfg(test)]
            no_stacks: self.no_stacks,
            spin: self.spin,
            pollers: self.pollers,
            kept: std::sync::Mutex::new(Vec::new()),
        });
        let cores = if self.pin {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut rt = Runtime {
            handle: Handle { shared },
            threads: Vec::with_capacity(self.workers),
        };
        for (w, (deque, jobs)) in deques.into_iter().zip(jobs).enumerate() {
            let shared = rt.handle.shared.clone();
            let fits = self.first_core.saturating_add(self.workers) <= cores.len();
            let core = fits.then(|| cores[self.first_core + w]);
            let t = std::thread::Builder::new()
                .name(format!("tactor-worker-{w}"))
                .spawn(move || {
                    if let Some(c) = core {
                        core_affinity::set_for_current(c);
                    }
                    worker::run(shared, w, deque, job::Owner::new(jobs))
                })?;
            rt.threads.push(t);
        }
        Ok(rt)
    }
}

/// A cloneable handle to a runtime, for launching from inside tasks or other threads. Tasks
/// launched through a handle after the runtime shut down are cancelled (their events poisoned).
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

/// [`Handle::downgrade`]: wakes the runtime's parked workers while it runs.
#[derive(Clone)]
pub(crate) struct WeakHandle(std::sync::Weak<Shared>);

impl WeakHandle {
    /// [`Handle::wake`], if the runtime still runs.
    pub(crate) fn wake(&self) {
        if let Some(shared) = self.0.upgrade() {
            shared.idle.wake_all();
        }
    }

    /// Whether the runtime still runs.
    pub(crate) fn alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}

impl Handle {
    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.shared.stealers.len()
    }

    /// Keeps `data` until the runtime's shared state is dropped: after every worker has
    /// stopped and every task has run or been cancelled. For an owner whose tasks may still
    /// hold pointers into `data` when it is dropped (a program whose tasks failed).
    pub(crate) fn keep_until_shutdown(&self, data: Box<dyn Send + Sync>) {
        self.shared
            .kept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(data);
    }

    /// Launches `task` to run at `placement` once every event of `preconditions` has
    /// triggered. Returns the task's completion event. If a precondition is poisoned the task
    /// does not run and its event is poisoned with the same root cause; if the task panics,
    /// its event is poisoned with the panic message.
    ///
    /// # Panics
    /// If `placement` names a worker the runtime does not have.
    ///
    /// ```
    /// use tactor::{Placement, Runtime};
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    /// use std::sync::Arc;
    /// let rt = Runtime::new(2).unwrap();
    /// let hits = Arc::new(AtomicUsize::new(0));
    /// let h = hits.clone();
    /// let first = rt.launch(Placement::Worker(0), &[], move || { h.fetch_add(1, SeqCst); });
    /// let h = hits.clone();
    /// let second = rt.launch(Placement::Any, &[first], move || { assert_eq!(h.fetch_add(1, SeqCst), 1); });
    /// second.wait().unwrap();
    /// assert_eq!(hits.load(SeqCst), 2);
    /// ```
    #[track_caller]
    pub fn launch(
        &self,
        placement: Placement,
        preconditions: &[Event],
        task: impl FnOnce() + Send + 'static,
    ) -> Event {
        self.launch_job(placement, preconditions, task, None, None)
    }

    /// Like [`launch`](Self::launch), with a name that errors about the task will show.
    #[track_caller]
    pub fn launch_named(
        &self,
        name: impl Into<String>,
        placement: Placement,
        preconditions: &[Event],
        task: impl FnOnce() + Send + 'static,
    ) -> Event {
        self.launch_job(placement, preconditions, task, None, Some(name.into()))
    }

    /// Wakes the workers that are parked, so that they poll the runtime's [`Poller`]s
    /// again: a poller that starts expecting work calls it, since a parked worker would not
    /// notice.
    pub fn wake(&self) {
        self.shared.idle.wake_all();
    }

    /// A handle that does not keep the runtime alive: what a poller keeps to wake its
    /// workers when it starts expecting work.
    pub(crate) fn downgrade(&self) -> WeakHandle {
        WeakHandle(Arc::downgrade(&self.shared))
    }

    /// An id for a new subgraph instance, unique until given back.
    pub(crate) fn take_id(&self) -> u32 {
        self.shared.rings.take_id()
    }

    /// The instance with this id is gone: no resident and no message refers to it any more.
    pub(crate) fn give_back_id(&self, id: u32) {
        self.shared.rings.give_back_id(id);
    }

    /// Queues a compiled-subgraph message for worker `w` from any thread.
    pub(crate) fn send_external(&self, w: usize, m: Msg) {
        // From worker `w` itself (a network poll on it found the message an instance waits
        // for): its own queue, with no atomics and no wake-up.
        if worker::is_current(&self.shared, w) {
            mailbox::push_own(m);
            return;
        }
        self.shared.rings.push_external(w, m);
        self.shared.idle.wake_worker(w);
    }

    /// Registers `resident` on worker `w` the next time `w` polls its mailbox; cancels it if
    /// the runtime has shut down (or does so before `w` gets to it).
    pub(crate) fn activate_on(&self, w: usize, resident: Pending) {
        let shared = &self.shared;
        shared.rings.push_activation(w, resident);
        shared.idle.wake_worker(w);
        // As for tasks (`after_push`): the final drain may have run before this push.
        if shared.closed.load(Ordering::SeqCst) {
            shared.rings.cancel_activations();
        }
    }

    #[track_caller]
    pub(crate) fn launch_job<'p>(
        &self,
        placement: Placement,
        preconditions: impl IntoIterator<Item = &'p Event>,
        job: impl FnOnce() + Send + 'static,
        scope: Option<Group>,
        name: Option<String>,
    ) -> Event {
        (self.launch_node(placement, preconditions, Once::new(job), scope, name)).into_event()
    }

    /// Launches a task with body `job` and returns its node (its event, and a [`Valued`]
    /// body's result).
    #[track_caller]
    pub(crate) fn launch_node<'p, J: Body + 'static>(
        &self,
        placement: Placement,
        preconditions: impl IntoIterator<Item = &'p Event>,
        job: J,
        scope: Option<Group>,
        name: Option<String>,
    ) -> Arc<TaskNode<J>> {
        // SAFETY: a `'static` body borrows nothing.
        unsafe { self.launch_node_unbounded(placement, preconditions, job, scope, name) }
    }

    /// [`launch_node`](Self::launch_node) with a body that may borrow: a scope's task, its
    /// closure inside the node instead of boxed.
    ///
    /// # Safety
    /// As for `TaskNode::new_unbounded`: what `job` borrows outlives the task's event.
    #[track_caller]
    pub(crate) unsafe fn launch_node_unbounded<'p, J: Body>(
        &self,
        placement: Placement,
        preconditions: impl IntoIterator<Item = &'p Event>,
        job: J,
        scope: Option<Group>,
        name: Option<String>,
    ) -> Arc<TaskNode<J>> {
        let mut wait: SmallVec<[&Event; 8]> = SmallVec::new();
        for e in preconditions {
            if must_wait(e, wait.iter().copied()) {
                wait.push(e);
            }
        }
        // SAFETY: the caller's contract.
        let node = unsafe { self.new_node(placement, wait.len(), job, scope, name) };
        node.clone().start(&wait);
        node
    }

    /// [`launch_node_unbounded`](Self::launch_node_unbounded) for a body that carries its
    /// preconditions (a dataflow task's input futures): the node waits on the events inside
    /// its body, so the launch copies none of them (two atomic operations fewer for each, on
    /// lines the triggering worker also writes).
    ///
    /// # Safety
    /// As for `launch_node_unbounded`.
    #[track_caller]
    pub(crate) unsafe fn launch_node_own<J: Body + OwnPreconditions>(
        &self,
        placement: Placement,
        job: J,
        scope: Option<Group>,
        name: Option<String>,
    ) -> Arc<TaskNode<J>> {
        // Which of them to wait for, by position: the body moves into the node after this,
        // and the same positions are subscribed there (the count and the subscriptions
        // agree even if one of them triggers meanwhile: its subscription is told at once).
        let mut pending: SmallVec<[usize; 8]> = SmallVec::new();
        {
            let mut waiting: SmallVec<[&Event; 8]> = SmallVec::new();
            // SAFETY: the body is not launched yet: this thread alone reaches it.
            for (i, e) in unsafe { job.preconditions() }.enumerate() {
                if must_wait(e, waiting.iter().copied()) {
                    pending.push(i);
                    waiting.push(e);
                }
            }
        }
        // SAFETY: the caller's contract.
        let node = unsafe { self.new_node(placement, pending.len(), job, scope, name) };
        {
            // SAFETY: not started yet: this thread alone reaches the body.
            let pre = unsafe { node.body().preconditions() }.enumerate();
            let wait: SmallVec<[&Event; 8]> = (pre.filter(|(i, _)| pending.contains(i)))
                .map(|(_, e)| e)
                .collect();
            node.clone().start(&wait);
        }
        node
    }

    /// A node waiting for `preconditions` events and its launch token, not started.
    ///
    /// # Safety
    /// As for `TaskNode::new_unbounded`.
    #[track_caller]
    unsafe fn new_node<J: Body>(
        &self,
        placement: Placement,
        preconditions: usize,
        job: J,
        scope: Option<Group>,
        name: Option<String>,
    ) -> Arc<TaskNode<J>> {
        if let Placement::Worker(w) = placement {
            assert!(
                w < self.workers(),
                "Placement::Worker({w}) but the runtime has {} workers",
                self.workers()
            );
        }
        let args = (
            self.shared.clone(),
            placement,
            preconditions,
            job,
            scope,
            name,
            Location::caller(),
        );
        // SAFETY: the caller's contract.
        Arc::new(unsafe { TaskNode::new_unbounded(args) })
    }
}

/// Whether a launch waits for `e`: only pending preconditions, each once (an analysis hands
/// the same task in several roles, the writer of one input and a reader of the output's last
/// version), since a subscription costs a push on the event's list (and an allocation past
/// the node's links).
fn must_wait<'e>(e: &Event, waiting: impl IntoIterator<Item = &'e Event>) -> bool {
    !e.state().succeeded() && !waiting.into_iter().any(|w| w.ptr_eq(e))
}

/// The runtime: worker threads that run launched tasks. Dropping it stops the workers after
/// the tasks they are running; queued tasks are cancelled (their events poisoned), and every
/// thread is joined.
///
/// ```
/// let rt = tactor::Runtime::new(2).unwrap();
/// let e = rt.launch(tactor::Placement::Any, &[], || ());
/// e.wait().unwrap();
/// ```
pub struct Runtime {
    handle: Handle,
    threads: Vec<JoinHandle<()>>,
}

impl Runtime {
    /// A runtime with `workers` pinned worker threads.
    pub fn new(workers: usize) -> std::io::Result<Runtime> {
        Builder::default().workers(workers).build()
    }

    /// A [`Builder`] with the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A handle that can be moved into tasks.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Stops the workers after their current tasks, cancels queued ones and joins every
    /// thread. The same as dropping the runtime.
    pub fn shutdown(self) {}
}

impl std::ops::Deref for Runtime {
    type Target = Handle;
    fn deref(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for Runtime {
    /// Shuts the runtime down: tasks not started are cancelled (their events poisoned), the
    /// workers finish what runs and are joined. A task suspended in [`Event::wait`] on an
    /// event that nothing can trigger any more (every worker done; a user event nobody
    /// triggers) gets an error from that wait once the runtime is otherwise idle for
    /// [`ABANDON_AFTER`](crate::ABANDON_AFTER): the drop never hangs on it. Dropped by one of
    /// its own tasks, the runtime does not wait for its workers: they end once that task
    /// returns.
    fn drop(&mut self) {
        let shared = &self.handle.shared;
        shared.closed.store(true, Ordering::SeqCst);
        shared.idle.wake_all();
        let inside = worker::with_current(|c| c.is_some_and(|c| Arc::ptr_eq(&c.shared, shared)));
        if inside {
            // Joining would wait for the very task that drops us: the threads are detached
            // and end on their own.
            self.threads.clear();
            return;
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        shared.cancel_shared_queues();
    }
}
