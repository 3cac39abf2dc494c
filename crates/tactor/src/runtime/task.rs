//! A launched task: its closure, its readiness countdown and its completion event.

use super::Shared;
use crate::countdown::{Countdown, Outcome};
use crate::event::{Event, EventState, Notify, Source};
use crate::failure::{panic_message, Cause, Failure, TaskLabel};
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
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

pub(crate) type Job = Box<dyn FnOnce() + Send>;

pub(crate) struct TaskNode {
    /// Untriggered preconditions, plus one token held by `launch` until it has subscribed to
    /// all of them.
    count: Countdown,
    job: UnsafeCell<Option<Job>>,
    /// The task's completion event, embedded: one allocation per launch.
    state: EventState,
    /// Told when the task has finished (the scope it was launched in).
    scope: Option<Arc<dyn Finish>>,
    pub(crate) placement: Placement,
    name: Option<String>,
    launched_at: &'static Location<'static>,
    pub(crate) shared: Arc<Shared>,
}

/// What a task tells the group it was launched in (a scope) when it has finished. The task
/// layer owns this trait; the scope implements it.
pub(crate) trait Finish: Send + Sync {
    /// One task of the group finished with `outcome`.
    fn task_done(&self, outcome: &Outcome);
}

// SAFETY: `job` is touched only by `take_job`, which the countdown lets exactly one thread
// reach (the last arrival, then the one worker that dequeues the node, in sequence); the
// closure itself is `Send`.
unsafe impl Send for TaskNode {}
// SAFETY: as above; every other field is `Sync`.
unsafe impl Sync for TaskNode {}

impl TaskNode {
    pub(crate) fn new(
        shared: Arc<Shared>,
        placement: Placement,
        preconditions: usize,
        job: Job,
        scope: Option<Arc<dyn Finish>>,
        name: Option<String>,
        launched_at: &'static Location<'static>,
    ) -> TaskNode {
        TaskNode {
            count: Countdown::new(preconditions + 1),
            job: UnsafeCell::new(Some(job)),
            state: EventState::new(),
            scope,
            placement,
            name,
            launched_at,
            shared,
        }
    }

    /// The task's completion event.
    pub(crate) fn event(self: &Arc<Self>) -> Event {
        Event(self.clone())
    }

    /// Triggers the task's event, then tells its scope.
    fn finish(&self, outcome: Outcome) {
        let _ = self.state.trigger(outcome.clone());
        if let Some(scope) = &self.scope {
            scope.task_done(&outcome);
        }
    }

    fn label(&self) -> TaskLabel {
        TaskLabel {
            name: self.name.clone(),
            launched_at: self.launched_at,
        }
    }

    fn take_job(&self) -> Option<Job> {
        // SAFETY: see the `Send` impl: one thread at a time, and only after the countdown
        // reached zero (or on the runner, after the scheduler's hand-off through a queue).
        unsafe { (*self.job.get()).take() }
    }

    /// Runs the task on the calling worker and triggers its event. The closure is consumed
    /// before the event triggers, so whatever it borrowed is released by then.
    pub(crate) fn run(self: Arc<Self>) {
        let job = self.take_job().expect("a task runs once");
        let outcome = match catch_unwind(AssertUnwindSafe(job)) {
            Ok(()) => Ok(()),
            Err(payload) => {
                let message = panic_message(payload.as_ref());
                // A payload whose own `Drop` panics must not take the worker down.
                drop_quietly(payload);
                Err(Arc::new(Failure::Task {
                    task: self.label(),
                    cause: Cause::Panicked(message),
                }))
            }
        };
        self.finish(outcome);
    }

    /// Does not run the task: drops its closure and poisons its event with `failure`. A
    /// captured value whose `Drop` panics is caught here: the event is poisoned all the same
    /// and the worker (or the thread that triggered the failure) goes on.
    pub(crate) fn abandon(&self, failure: Arc<Failure>) {
        drop_quietly(self.take_job());
        self.finish(Err(failure));
    }

    /// Drops the task because the runtime shut down.
    pub(crate) fn cancel(&self) {
        self.abandon(Arc::new(Failure::Task {
            task: self.label(),
            cause: Cause::Cancelled,
        }));
    }

    /// One precondition (or the launch token) arrived.
    pub(crate) fn arrive(self: Arc<Self>, outcome: &Outcome) {
        match self.count.arrive(outcome) {
            None => {}
            Some(Ok(())) => super::schedule(self),
            Some(Err(f)) => self.abandon(f),
        }
    }
}

impl Source for TaskNode {
    fn state(&self) -> &EventState {
        &self.state
    }
}

impl Notify for TaskNode {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        self.arrive(outcome);
    }
}

/// Drops `value`, catching a panic in its `Drop`. The panic's own payload is leaked rather than
/// dropped: its `Drop` could panic again, and a leak is the only end to that chain.
pub(crate) fn drop_quietly<T>(value: T) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(value))) {
        std::mem::forget(payload);
    }
}
