//! A worker thread: where it looks for work, how it idles, and how it leaves at shutdown.

use super::frames;
use super::job::{self, JobRef};
use super::offer::Offer;
use super::source::{Polled, Source};
use super::task::{Placement, TaskNode};
use super::Shared;
use crate::event::{self, Event};
use crate::sync;
use crossbeam_deque::{Steal, Worker};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

pub(crate) type Task = Arc<TaskNode>;

/// What a worker thread owns; reachable from the tasks it runs through `CURRENT`.
pub(crate) struct WorkerCtx {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
    deque: Worker<Task>,
    /// Fork-join jobs forked by the tasks this worker runs (LIFO: `super::job`).
    pub(crate) jobs: job::Owner,
    /// Tasks placed on this worker by itself: never stolen, so no atomics needed.
    pinned: RefCell<VecDeque<Task>>,
    /// Every source of work this worker polls ([`source`]): the mailbox of the
    /// compiled-subgraph instances in flight on this worker, and the pollers.
    sources: Vec<Rc<dyn Source>>,
}

thread_local! {
    static CURRENT: Cell<*const WorkerCtx> = const { Cell::new(std::ptr::null()) };
}

/// Calls `f` with the worker context of the calling thread, if it is a worker.
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&WorkerCtx>) -> R) -> R {
    let p = CURRENT.with(Cell::get);
    // SAFETY: `CURRENT` points at the `WorkerCtx` on the stack of `run`, set for exactly the
    // time that frame is alive, and only this thread reads it.
    f(unsafe { p.as_ref() })
}

/// Whether the calling thread is worker `w` of the runtime that `shared` belongs to.
pub(crate) fn is_current(shared: &Arc<Shared>, w: usize) -> bool {
    with_current(|c| c.is_some_and(|c| c.index == w && Arc::ptr_eq(&c.shared, shared)))
}

impl WorkerCtx {
    /// Queues a ready task from this worker.
    pub(crate) fn push(&self, task: Task) {
        let shared = &*self.shared;
        match task.placement {
            Placement::Worker(w) if w == self.index => self.pinned.borrow_mut().push_back(task),
            Placement::Worker(w) => {
                shared.inboxes[w].push(task);
                shared.after_push(Some(w));
            }
            Placement::Any => {
                self.deque.push(task);
                // On this worker's own deque the task cannot be lost: this worker runs it if
                // no thief does, so a sleeper missed here costs parallelism, not progress
                // (as for forked jobs), and the fence a sure wake-up needs is saved.
                shared.idle.wake_one_cheaply();
            }
        }
    }

    /// The next work for this worker: its own first (the newest job its tasks forked, then
    /// its tasks), then shared tasks, then stolen — jobs before tasks, since an unfinished
    /// fork-join holds a task's stack until its jobs are done.
    pub(crate) fn find(&self) -> Option<Work> {
        if let Some(j) = self.jobs.pop() {
            return Some(Work::Job(j));
        }
        self.find_task()
            .map(Work::Task)
            .or_else(|| self.steal_job().map(Work::Job))
            .or_else(|| self.steal_task().map(Work::Task))
    }

    /// Puts `job`, handed over while this worker took other work, on its own deque: it runs
    /// after that work (or a thief takes it). Run before it, the job would hold the other
    /// work on this stack if it suspended, and that work might be what it waits for (the
    /// same holds the other way round). Run at once only if the deque is full.
    fn defer(&self, job: JobRef) {
        match self.jobs.push_or_hand(job, |_| false) {
            Ok(job::Pushed::Public) => self.shared.idle.wake_one_cheaply(),
            Ok(_) => {}
            Err(job) => job.run(),
        }
    }

    /// Hands `job` to another worker whose offer is open (it idles), if any.
    #[inline]
    pub(crate) fn hand_over(&self, job: JobRef) -> bool {
        let offers = &self.shared.offers;
        let n = offers.len();
        (1..n).any(|k| offers[(self.index + k) % n].give(job))
    }

    /// This worker's own offer.
    fn offer(&self) -> &Offer {
        &self.shared.offers[self.index]
    }

    /// Whether work another worker could take is visible: public jobs or tasks in another
    /// worker's deque, or tasks in this worker's inbox or the injector. A hint that reads a
    /// few words and writes nothing, cheap enough to spin on: an idle worker that only looked
    /// between spins found a task pushed onto another worker's deque half a spin late on
    /// average, and at one task per core per step that delay is on every step's critical
    /// path.
    fn work_visible(&self) -> bool {
        let shared = &*self.shared;
        shared.job_stealers.iter().any(|s| !s.is_empty())
            || shared.stealers.iter().any(|s| !s.is_empty())
            || !shared.inboxes[self.index].is_empty()
            || !shared.injector.is_empty()
    }

    fn steal_job(&self) -> Option<JobRef> {
        let stealers = &self.shared.job_stealers;
        let n = stealers.len();
        (1..n)
            .map(|k| &stealers[(self.index + k) % n])
            .filter(|s| !s.is_empty())
            .find_map(|s| s.steal())
    }

    fn find_task(&self) -> Option<Task> {
        if let Some(t) = self.pinned.borrow_mut().pop_front() {
            return Some(t);
        }
        if let Some(t) = self.deque.pop() {
            return Some(t);
        }
        // Each steal pins crossbeam's epoch (a SeqCst fence): look before stealing, since an
        // idle worker comes here over and over.
        let shared = &*self.shared;
        let inbox = &shared.inboxes[self.index];
        if !inbox.is_empty() {
            if let Some(t) = steal(|| inbox.steal()) {
                return Some(t);
            }
        }
        if !shared.injector.is_empty() {
            if let Some(t) = steal(|| shared.injector.steal_batch_and_pop(&self.deque)) {
                return Some(t);
            }
        }
        None
    }

    fn steal_task(&self) -> Option<Task> {
        let shared = &*self.shared;
        let n = shared.stealers.len();
        (1..n)
            .map(|k| &shared.stealers[(self.index + k) % n])
            .filter(|s| !s.is_empty())
            .find_map(|s| steal(|| s.steal()))
    }

    /// Polls every source of work once. Returns what they did: `Queued` if any released
    /// tasks, else `Ran` if any ran work itself.
    fn poll_sources(&self) -> Polled {
        let mut out = Polled::Nothing;
        for s in &self.sources {
            out = out.max(s.poll());
        }
        out
    }

    /// Whether some source has work in flight that arrives without a wake-up: the worker
    /// then never parks.
    fn sources_busy(&self) -> bool {
        self.sources.iter().any(|s| s.busy())
    }

    /// Whether some source expects work from outside (a [`super::Poller`]).
    fn sources_expecting(&self) -> bool {
        self.sources.iter().any(|s| s.has_work())
    }

    fn has_work(&self) -> bool {
        self.sources.iter().any(|s| s.has_work())
            || !self.pinned.borrow().is_empty()
            || !self.deque.is_empty()
            || !self.jobs.is_empty()
            || self.work_visible()
            || self.shared.closed.load(Ordering::SeqCst)
    }

    fn cancel_own(&self) {
        for s in &self.sources {
            s.cancel();
        }
        while let Some(t) = self.pinned.borrow_mut().pop_front() {
            t.cancel();
        }
        while let Some(t) = self.deque.pop() {
            t.cancel();
        }
    }
}

/// Work a worker found: a task, or a fork-join job.
pub(crate) enum Work {
    Task(Task),
    Job(JobRef),
}

impl Work {
    /// Runs it; a task is cancelled instead once the runtime has shut down. A job always
    /// runs: the task that forked it waits for it.
    fn run(self, closed: bool) {
        match self {
            Work::Task(t) if closed => t.cancel(),
            Work::Task(t) => t.run(),
            Work::Job(j) => j.run(),
        }
    }
}

/// Steals with `f` until it succeeds or finds the queue empty. `Steal::Retry` only means a
/// race with another thread: giving up on it could leave an item behind for good (at
/// shutdown, a task nobody cancels).
pub(crate) fn steal<T>(mut f: impl FnMut() -> Steal<T>) -> Option<T> {
    loop {
        match f() {
            Steal::Success(t) => return Some(t),
            Steal::Empty => return None,
            Steal::Retry => std::hint::spin_loop(),
        }
    }
}

/// While compiled work is in flight, a worker looks at its task queues once every this many
/// polls of its mailboxes, busy or not: compiled work must not starve tasks.
const QUEUE_LOOK_EVERY: u32 = 16;

/// The body of worker thread `index`.
pub(crate) fn run(shared: Arc<Shared>, index: usize, deque: Worker<Task>, jobs: job::Owner) {
    shared.idle.register(index, sync::current());
    let sources = super::sources_for(&shared.rings, &shared.pollers, index);
    let ctx = WorkerCtx {
        sources,
        shared,
        index,
        deque,
        jobs,
        pinned: RefCell::new(VecDeque::new()),
    };
    CURRENT.with(|c| c.set(&ctx));
    event::set_wait_hook(Some(wait_on_worker));
    // The loop runs on coroutines, so that tasks that wait can be suspended (`frames`).
    let quiet = frames::Quiet {
        count: &ctx.shared.quiet,
        of: ctx.shared.inboxes.len(),
        #[cfg(test)]
        no_stacks: ctx.shared.no_stacks,
    };
    frames::drive(scheduling_loop, &quiet);
    event::set_wait_hook(None);
    CURRENT.with(|c| c.set(std::ptr::null()));
}

/// How a task on a worker waits for `event`: suspended, so the worker goes on (`frames`);
/// where stacks cannot be switched (Miri, loom), by running other work meanwhile.
fn wait_on_worker(event: &Event) -> bool {
    frames::suspend(event) || help_while(|| event.has_triggered())
}

/// A worker's loop: finds work and runs it until the runtime shuts down, then cancels what
/// is left in its own queues. At every task boundary it first hands the worker to a suspended
/// task whose event has triggered.
fn scheduling_loop() {
    with_current(|ctx| {
        let ctx = ctx.expect("the scheduling loop runs on a worker");
        scheduling_loop_of(ctx);
        ctx.cancel_own();
    });
}

fn scheduling_loop_of(ctx: &WorkerCtx) {
    let shared = &*ctx.shared;
    let index = ctx.index;
    let mut idle_since: Option<Instant> = None;
    let mut polls = 0u32;
    let mut waiting = Waiting::default();
    loop {
        // The offer is open only while this worker idles (below): before anything else, take
        // back a job handed over meanwhile, and run it first.
        if let Some(j) = ctx.offer().close() {
            idle_since = None;
            waiting = Waiting::default();
            j.run();
            continue;
        }
        if frames::ready() {
            frames::switch();
            idle_since = None;
            continue;
        }
        polls = polls.wrapping_add(1);
        let look = polls % QUEUE_LOOK_EVERY == 0;
        let polled = ctx.poll_sources();
        if polled != Polled::Nothing {
            idle_since = None;
            waiting = Waiting::default();
            if !look && polled == Polled::Ran {
                continue;
            }
        } else if !look && ctx.sources_busy() {
            // The next vertex usually arrives as a message within a few hundred nanoseconds:
            // watch the mailboxes closely and the queues (costlier to look at) now and then.
            waiting.spin(ctx.offer());
            continue;
        }
        // Idle from here on: the offer stays open while this worker looks for work (a fork
        // that found it closed was pushed, and had to be stolen or ran on its forker).
        let offer = ctx.offer();
        offer.open();
        if let Some(w) = ctx.find() {
            idle_since = None;
            waiting = Waiting::default();
            // Closed before anything runs; a job handed meanwhile waits on the deque.
            if let Some(j) = offer.close() {
                ctx.defer(j);
            }
            w.run(shared.closed.load(Ordering::Relaxed));
            continue;
        }
        if shared.closed.load(Ordering::SeqCst) {
            if let Some(j) = offer.close() {
                j.run();
                continue;
            }
            break;
        }
        if ctx.sources_busy() || ctx.sources_expecting() {
            // An instance's next vertex arrives through its ring, or work from outside (the
            // network) through a poller, with no wake-up: keep the core, polling closely.
            waiting.spin(ctx.offer());
            continue;
        }
        // Spin a bounded time before parking: a futex wake-up costs far more than a task.
        let since = *idle_since.get_or_insert_with(Instant::now);
        if since.elapsed() < shared.spin {
            for _ in 0..32 {
                if offer.has_job() || ctx.work_visible() {
                    break;
                }
                std::hint::spin_loop();
            }
            continue;
        }
        // A worker that gives up its core is no place to hand a job.
        if let Some(j) = offer.close() {
            j.run();
            continue;
        }
        shared
            .idle
            .sleep(index, || ctx.has_work() || frames::ready());
        idle_since = None;
    }
}

/// Empty polls in a row after which a worker that waits for work in flight (a message that
/// arrives with no wake-up) yields its core at every further empty poll. A message usually
/// comes within a few hundred nanoseconds, long before this; when it does not, the thread
/// that would send it may be waiting for this core: with more threads than cores
/// (oversubscription, or several ranks on one machine) spinning on would starve it for a
/// whole time slice per message. On a core of its own a yield returns at once. Under Miri,
/// which runs one thread at a time and interprets every spin, at the first empty poll.
const SPINS_BEFORE_YIELD: u32 = if cfg!(miri) { 1 } else { 256 };

/// How long a worker has been waiting for work in flight.
#[derive(Default)]
struct Waiting {
    empty_polls: u32,
}

impl Waiting {
    /// One more empty poll: spin with `offer` open, or yield once the wait has gone on (the
    /// offer left closed then: a worker that gives up its core is no place to hand a job).
    fn spin(&mut self, offer: &Offer) {
        self.empty_polls = self.empty_polls.saturating_add(1);
        if self.empty_polls < SPINS_BEFORE_YIELD {
            offer.open();
            std::hint::spin_loop();
        } else if let Some(j) = offer.close() {
            j.run();
        } else {
            std::thread::yield_now();
        }
    }
}

/// On a worker thread, runs other tasks until `done()` holds and returns `true`; elsewhere
/// returns `false` at once.
pub(crate) fn help_while(done: impl Fn() -> bool) -> bool {
    with_current(|ctx| {
        let Some(ctx) = ctx else { return false };
        let mut polls = 0u32;
        while !done() {
            polls = polls.wrapping_add(1);
            if ctx.poll_sources() == Polled::Ran && polls % QUEUE_LOOK_EVERY != 0 {
                continue;
            }
            match ctx.find() {
                Some(w) => w.run(false),
                None => std::hint::spin_loop(),
            }
        }
        true
    })
}

/// Polls the calling worker's sources once from inside a task (`crate::relax`).
pub(crate) fn relax() -> bool {
    with_current(|ctx| ctx.is_some_and(|ctx| ctx.poll_sources() != Polled::Nothing))
}
