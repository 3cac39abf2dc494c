//! Scoped launches: tasks that borrow from the caller's stack, like `std::thread::scope`.

use crate::event::Event;
use crate::failure::{Failure, TaskFailed};
use crate::future::Future;
use crate::runtime::{Body, Finish, Group, Handle, Keeps, Once, OwnPreconditions, Placement};
use crate::sync::{lock, AtomicUsize, Mutex, Ordering};
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// Launches tasks that may borrow anything that outlives the scope. Created by
/// [`Handle::scope`]; every task launched through it (and through the `&Scope` each task
/// receives) has finished, run or not, before `scope` returns.
pub struct Scope<'scope> {
    handle: Handle,
    state: Arc<ScopeState>,
    /// Invariant in `'scope`, like `std::thread::Scope`.
    _borrows: PhantomData<&'scope mut &'scope ()>,
}

/// Counts the scope's unfinished tasks (plus one for the body) and keeps the first failure.
struct ScopeState {
    pending: AtomicUsize,
    failure: Mutex<Option<Arc<Failure>>>,
    done: crate::UserEvent,
}

impl Finish for ScopeState {
    /// The first failure is kept: the one that happened first, since a task tells it before
    /// its event poisons what depends on it.
    fn task_failed(&self, failure: &Arc<Failure>) {
        lock(&self.failure).get_or_insert_with(|| failure.clone());
    }

    /// One task of the scope (or the body) finished. Tasks hold the state by a plain pointer
    /// (`Group`): after the decrement a caller other than the last must not touch the state,
    /// which the scope may free as soon as the last has triggered `done`.
    unsafe fn task_done(this: *const Self) {
        // SAFETY: `this` is live (the contract); only the counter is borrowed across the
        // decrement, as `Arc`'s own drop does.
        let pending = unsafe { &(*this).pending };
        if pending.fetch_sub(1, Ordering::AcqRel) == 1 {
            // SAFETY: the last: the scope's thread waits for `done`, which nobody else
            // triggers, so the state lives on; trigger through a handle of our own.
            let done = unsafe { (*this).done.clone() };
            let _ = done.trigger();
        }
    }
}

/// A part of a scope's work that is not a task (a message that leaves as soon as its items
/// are ready, or that sets its items' futures as it arrives): the scope waits for it as for a
/// task, and reports its failure. Done when dropped.
pub(crate) struct Part {
    group: Group,
}

impl Part {
    /// The part failed (told before it is dropped): the scope reports the first failure.
    pub(crate) fn fail(&self, failure: &Arc<Failure>) {
        self.group.task_failed(failure);
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        self.group.task_done();
    }
}

/// A pointer to the scope, sent into its tasks.
struct ScopePtr<'scope>(*const Scope<'scope>);

// SAFETY: `Scope` is `Sync` (a handle and atomics), and the pointee outlives every task that
// holds the pointer (`Handle::scope` waits for all of them).
unsafe impl Send for ScopePtr<'_> {}

impl<'scope> Scope<'scope> {
    /// Launches `task` like [`Handle::launch`]; it may borrow from outside the scope and is
    /// given the scope to launch more tasks.
    #[track_caller]
    pub fn launch<F>(&self, placement: Placement, preconditions: &[Event], task: F) -> Event
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        self.launch_inner(placement, preconditions, task, None)
    }

    /// Like [`launch`](Self::launch), with a name that errors about the task will show.
    #[track_caller]
    pub fn launch_named<F>(
        &self,
        name: impl Into<String>,
        placement: Placement,
        preconditions: &[Event],
        task: F,
    ) -> Event
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        self.launch_inner(placement, preconditions, task, Some(name.into()))
    }

    /// A part of this scope's work that is not a task ([`Part`]).
    pub(crate) fn part(&self) -> Part {
        Part {
            group: self.member(),
        }
    }

    /// Counts one more unfinished member of the scope (a task or a [`Part`]), and returns the
    /// group it tells when it finishes, once, in its last use of the state.
    fn member(&self) -> Group {
        self.state.pending.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `Handle::scope` keeps `state` until `pending` reached zero, which every
        // member brings down once, in its last use of the state.
        unsafe { Group::new::<ScopeState>(&self.state) }
    }

    #[track_caller]
    pub(crate) fn launch_inner<F>(
        &self,
        placement: Placement,
        preconditions: &[Event],
        task: F,
        name: Option<String>,
    ) -> Event
    where
        F: FnOnce(&Scope<'scope>) + Send + 'scope,
    {
        let group = self.member();
        let me = ScopePtr(self);
        let job = move || {
            let me = me;
            // SAFETY: see `ScopePtr`: the scope is alive while any of its tasks is.
            task(unsafe { &*me.0 })
        };
        // SAFETY: the closure may borrow for `'scope`, and `Handle::scope` returns only after
        // every event launched in the scope triggered, after the closure was consumed or
        // dropped.
        let node = unsafe {
            (self.handle).launch_node_unbounded(
                placement,
                preconditions,
                Once::new(job),
                Some(group),
                name,
            )
        };
        node.into_event()
    }

    /// Launches a task with `body` (which carries its preconditions and keeps its result) in
    /// the scope, and returns the future of its result.
    #[track_caller]
    pub(crate) fn launch_future<U, J>(&self, placement: Placement, body: J) -> Future<U>
    where
        U: Send + Sync + 'static,
        J: Body + OwnPreconditions + Keeps<U> + 'scope,
    {
        let group = self.member();
        // SAFETY: as in `launch_inner`.
        let node = unsafe { (self.handle).launch_node_own(placement, body, Some(group), None) };
        Future::of_task(node)
    }

    /// The runtime's handle.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Handle {
    /// Runs `body` on the calling thread with a [`Scope`] whose tasks may borrow from the
    /// caller, then waits for every task launched in the scope. Returns the body's result, or
    /// the first failure of a task of the scope. A panic of `body` itself is resumed after the
    /// wait.
    ///
    /// ```
    /// let rt = tactor::Runtime::new(2).unwrap();
    /// let mut data = vec![1, 2, 3, 4];
    /// // `Runtime` derefs to its `Handle`; inside a task, `tactor::current_handle()` gives it.
    /// rt.scope(|s| {
    ///     for x in data.iter_mut() {
    ///         s.launch(tactor::Placement::Any, &[], move |_| *x *= 10);
    ///     }
    /// })
    /// .unwrap();
    /// assert_eq!(data, [10, 20, 30, 40]);
    /// ```
    pub fn scope<'scope, R>(
        &self,
        body: impl FnOnce(&Scope<'scope>) -> R,
    ) -> Result<R, TaskFailed> {
        let state = Arc::new(ScopeState {
            pending: AtomicUsize::new(1),
            failure: Mutex::new(None),
            done: crate::UserEvent::new(),
        });
        let scope = Scope {
            handle: self.clone(),
            state: state.clone(),
            _borrows: PhantomData,
        };
        let result = catch_unwind(AssertUnwindSafe(|| body(&scope)));
        let done = state.done.event();
        // SAFETY: `state` is live, and this thread borrows nothing of it across the call.
        unsafe { ScopeState::task_done(Arc::as_ptr(&state)) };
        // Cannot fail: `done` is only ever triggered, never poisoned, while `state` holds it.
        let _ = done.wait();
        match result {
            Err(panic) => resume_unwind(panic),
            Ok(r) => match lock(&state.failure).take() {
                Some(f) => Err(TaskFailed(f)),
                None => Ok(r),
            },
        }
    }

    /// Runs `f(w)` once on every worker `w` (a task placed on each, like rayon's
    /// `broadcast`) and returns the results by worker, or the first failure. The tasks run
    /// concurrently as far as the workers are free: `f` may wait for all of them to arrive
    /// (a barrier of the workers) only when no worker is busy with a task that waits for the
    /// caller.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    ///
    /// let rt = tactor::Runtime::builder().workers(3).pin(false).build().unwrap();
    /// // Every worker arrives before any leaves: the workers' barrier that timed passes use.
    /// let arrived = AtomicUsize::new(0);
    /// let seen = rt
    ///     .on_each_worker(|w| {
    ///         arrived.fetch_add(1, SeqCst);
    ///         while arrived.load(SeqCst) < 3 {
    ///             std::thread::yield_now();
    ///         }
    ///         (w, tactor::current_worker())
    ///     })
    ///     .unwrap();
    /// assert_eq!(seen, [(0, Some(0)), (1, Some(1)), (2, Some(2))]);
    /// ```
    pub fn on_each_worker<R: Send>(
        &self,
        f: impl Fn(usize) -> R + Sync,
    ) -> Result<Vec<R>, TaskFailed> {
        let mut out: Vec<Option<R>> = (0..self.workers()).map(|_| None).collect();
        self.scope(|s| {
            for (w, slot) in out.iter_mut().enumerate() {
                let f = &f;
                s.launch(Placement::Worker(w), &[], move |_| *slot = Some(f(w)));
            }
        })?;
        Ok(out
            .into_iter()
            .map(|r| r.expect("a scope waits for its tasks, which ran"))
            .collect())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// A scope waits for a part done on another thread after the scope's body returned, and
    /// reports the part's failure.
    #[test]
    fn a_scope_waits_for_its_parts_and_reports_their_failure() {
        let rt = crate::Runtime::builder()
            .workers(1)
            .pin(false)
            .build()
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let result = rt.scope(|s| {
            let (part, done) = (s.part(), done.clone());
            std::thread::spawn(move || {
                let pause = if cfg!(miri) { 1 } else { 20 };
                std::thread::sleep(std::time::Duration::from_millis(pause));
                done.store(true, Ordering::Release);
                part.fail(&Arc::new(Failure::Poisoned("the part failed".into())));
            });
        });
        assert!(
            done.load(Ordering::Acquire),
            "the scope waited for its part"
        );
        assert!(result.unwrap_err().to_string().contains("the part failed"));
        // A part dropped without failing ends the scope well.
        assert!(rt.scope(|s| drop(s.part())).is_ok());
    }
}
