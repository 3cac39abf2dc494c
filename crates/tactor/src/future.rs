//! Futures: one-shot events that carry a value. A [`Future`] is what a task produced, readable
//! once its event has triggered. Other tasks take it as a precondition ([`Future::event`]),
//! or call [`Future::get`] inside a task, which suspends that task as [`Event::wait`] does.
//! A task that panics poisons its future, and `get` then reports the failure.
//! [`Handle::spawn`] makes a future from a closure, [`Handle::dataflow`] one from the values of
//! other futures; a [`Promise`] is one set by hand.

use crate::event::{Event, EventState, HasState};
use crate::failure::{Failure, TaskFailed};
use crate::runtime::once_value::OnceValue;
use crate::runtime::task::drop_quietly;
use crate::runtime::{Body, Handle, Keeps, Once, OwnPreconditions, Placement, TaskNode, Valued};
use crate::scope::Scope;
use smallvec::SmallVec;
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

/// A value that a task will produce: its event, and the value once the event has triggered.
///
/// ```
/// use tactor::{Placement, Runtime};
/// let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
/// let a = rt.spawn(Placement::Any, &[], || 20);
/// let b = rt.spawn(Placement::Any, &[], || 22);
/// // A task that takes both as inputs: it starts after them and reads them without waiting.
/// let (a2, b2) = (a.clone(), b.clone());
/// let sum = rt.spawn(Placement::Any, &[a.event().clone(), b.event().clone()], move || {
///     a2.get().unwrap() + b2.get().unwrap()
/// });
/// assert_eq!(*sum.get().unwrap(), 42);
/// ```
pub struct Future<T> {
    /// Keeps alive the allocation that holds the value: the producing task's node, or a
    /// [`ValueCell`].
    event: Event,
    /// The value's cell, inside the allocation `event` holds.
    value: NonNull<OnceValue<T>>,
    _value: PhantomData<Arc<OnceValue<T>>>,
}

// SAFETY: a future is an `Event` and shared access to a `OnceValue<T>` it keeps alive, which
// is `Send` and `Sync` when `T` is both (as `Arc<OnceValue<T>>` is).
unsafe impl<T: Send + Sync> Send for Future<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send + Sync> Sync for Future<T> {}

impl<T> Clone for Future<T> {
    fn clone(&self) -> Self {
        Future {
            event: self.event.clone(),
            value: self.value,
            _value: PhantomData,
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Future<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Future")
            .field("event", &self.event)
            .field("value", self.cell())
            .finish()
    }
}

/// The event and the value of a future not made by a task: ready, or set by a [`Promise`].
struct ValueCell<T> {
    state: EventState,
    value: OnceValue<T>,
}

impl<T: Send + Sync + 'static> HasState for ValueCell<T> {
    fn state(&self) -> &EventState {
        &self.state
    }
}

impl<T: Send + Sync + 'static> Future<T> {
    fn of_cell(cell: Arc<ValueCell<T>>) -> Future<T> {
        let value = NonNull::from(&cell.value);
        Future {
            event: Event(cell),
            value,
            _value: PhantomData,
        }
    }

    /// The future of a task node whose body keeps its result.
    pub(crate) fn of_task<J: Body + Keeps<T>>(node: Arc<TaskNode<J>>) -> Future<T> {
        let value = NonNull::from(node.body().value());
        Future {
            event: node.into_event(),
            value,
            _value: PhantomData,
        }
    }

    /// A future that is already there.
    ///
    /// ```
    /// assert_eq!(*tactor::Future::ready(7).get().unwrap(), 7);
    /// ```
    pub fn ready(value: T) -> Future<T> {
        Future::of_cell(Arc::new(ValueCell {
            state: EventState::new_done(Ok(())),
            value: OnceValue::with(value),
        }))
    }
}

impl<T> Future<T> {
    fn cell(&self) -> &OnceValue<T> {
        // SAFETY: the cell lives in the allocation that `self.event` keeps alive, and is only
        // ever reached through shared references.
        unsafe { self.value.as_ref() }
    }

    /// The event that triggers when the value is there (poisoned if its task failed): a
    /// precondition for tasks that read it.
    pub fn event(&self) -> &Event {
        &self.event
    }

    /// The value, waiting for it if needed: outside the runtime the thread blocks; inside a
    /// task the task is suspended and its worker goes on. An error if the task that was to
    /// produce it failed.
    pub fn get(&self) -> Result<&T, TaskFailed> {
        self.event.wait()?;
        Ok(self
            .cell()
            .get()
            .expect("a future's event triggers after its value is set"))
    }

    /// The value if it is there now, without waiting.
    ///
    /// ```
    /// let (promise, future) = tactor::Promise::new();
    /// assert!(future.try_get().is_none());
    /// promise.set("done");
    /// assert_eq!(future.try_get().unwrap().unwrap(), &"done");
    /// ```
    pub fn try_get(&self) -> Option<Result<&T, TaskFailed>> {
        self.event.has_triggered().then(|| self.get())
    }
}

/// The writing end of a future set by hand. Dropped without being set, it poisons its future.
///
/// ```
/// let (promise, future) = tactor::Promise::<u32>::new();
/// drop(promise);
/// assert!(future.get().is_err());
/// ```
pub struct Promise<T: Send + Sync + 'static> {
    cell: Arc<ValueCell<T>>,
}

impl<T: Send + Sync + 'static> std::fmt::Debug for Promise<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Promise")
            .field("set", &self.cell.value.get().is_some())
            .finish()
    }
}

impl<T: Send + Sync + 'static> Promise<T> {
    /// A promise and the future it fulfils.
    pub fn new() -> (Promise<T>, Future<T>) {
        let cell = Arc::new(ValueCell {
            state: EventState::new(),
            value: OnceValue::new(),
        });
        (Promise { cell: cell.clone() }, Future::of_cell(cell))
    }

    /// Poisons the future with `reason` instead of setting it: its readers and dependents get
    /// a [`TaskFailed`](crate::TaskFailed) that says it (a value that failed elsewhere).
    ///
    /// ```
    /// let (promise, future) = tactor::Promise::<u8>::new();
    /// promise.fail("the other rank failed");
    /// assert!(future.get().unwrap_err().to_string().contains("the other rank failed"));
    /// ```
    pub fn fail(self, reason: &str) {
        self.fail_with(Failure::Poisoned(reason.to_string()));
    }

    /// Poisons the future with `failure`.
    pub(crate) fn fail_with(self, failure: Failure) {
        let _ = self.cell.state.trigger(Err(Arc::new(failure)));
    }

    /// Sets the value and triggers the future's event.
    pub fn set(self, value: T) {
        // SAFETY: a promise is set once (it is consumed here), and only through its promise:
        // the one write of the cell.
        unsafe { self.cell.value.set(value) };
        let _ = self.cell.state.trigger(Ok(()));
    }
}

impl<T: Send + Sync + 'static> Drop for Promise<T> {
    /// Dropped unset, the promise poisons its future.
    fn drop(&mut self) {
        if self.cell.state.outcome().is_none() {
            let failure = Arc::new(Failure::UserEventDropped);
            let _ = self.cell.state.trigger(Err(failure));
        }
    }
}

impl Handle {
    /// Launches `task` like [`Handle::launch`] and returns the future of its result.
    ///
    /// ```
    /// let rt = tactor::Runtime::builder().workers(1).pin(false).build().unwrap();
    /// let f = rt.spawn(tactor::Placement::Any, &[], || vec![1, 2, 3]);
    /// assert_eq!(f.get().unwrap().len(), 3);
    /// ```
    #[track_caller]
    pub fn spawn<T, F>(&self, placement: Placement, preconditions: &[Event], task: F) -> Future<T>
    where
        T: Send + Sync + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        // The task's event triggers after the closure returned: the value is set first.
        let body = Valued::new(task);
        Future::of_task(self.launch_node(placement, preconditions, body, None, None))
    }
}

impl Handle {
    /// Runs `task` on the values of `inputs` once every one of them is there, and returns the
    /// future of its result: futures taken as inputs, as HPX's `dataflow` or
    /// `when_all(...).then(...)`. The inputs are the task's preconditions: the caller builds no
    /// list of events, and the task never waits for a value. A failed input poisons the
    /// returned future and `task` does not run.
    ///
    /// ```
    /// use tactor::{Placement, Runtime};
    /// let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    /// let a = rt.spawn(Placement::Any, &[], || 20);
    /// let b = rt.spawn(Placement::Any, &[], || 22);
    /// let sum = rt.dataflow(Placement::Any, vec![a, b], |ins| ins.iter().sum::<i32>());
    /// assert_eq!(*sum.get().unwrap(), 42);
    /// ```
    #[track_caller]
    pub fn dataflow<T, U, F>(
        &self,
        placement: Placement,
        inputs: impl IntoIterator<Item = Future<T>>,
        task: F,
    ) -> Future<U>
    where
        T: Send + Sync + 'static,
        U: Send + Sync + 'static,
        F: FnOnce(Inputs<'_, T>) -> U + Send + 'static,
    {
        let body = Dataflow::new(inputs, task);
        // SAFETY: a `'static` body borrows nothing.
        Future::of_task(unsafe { self.launch_node_own(placement, body, None, None) })
    }
}

impl<'scope> Scope<'scope> {
    /// [`Handle::dataflow`] inside the scope: `task` may borrow what outlives the scope, and
    /// the scope waits for it and reports its failure, so the caller keeps no list of the
    /// futures it launched only to see them end.
    ///
    /// ```
    /// use tactor::{Future, Placement, Runtime};
    /// let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    /// let scale = 10; // borrowed by the tasks
    /// let mut last = Future::ready(1);
    /// rt.scope(|s| {
    ///     for _ in 0..3 {
    ///         last = s.dataflow(Placement::Any, [last.clone()], |ins| ins.get(0) * scale);
    ///     }
    /// })
    /// .unwrap();
    /// assert_eq!(*last.get().unwrap(), 1000);
    /// ```
    #[track_caller]
    pub fn dataflow<T, U, F>(
        &self,
        placement: Placement,
        inputs: impl IntoIterator<Item = Future<T>>,
        task: F,
    ) -> Future<U>
    where
        T: Send + Sync + 'static,
        U: Send + Sync + 'static,
        F: FnOnce(Inputs<'_, T>) -> U + Send + 'scope,
    {
        self.launch_future(placement, Dataflow::new(inputs, task))
    }
}

/// A dataflow task's body: its input futures (its preconditions, subscribed to in place, and
/// released as soon as it has run), its closure and its value.
pub(crate) struct Dataflow<T, U, F> {
    inputs: UnsafeCell<SmallVec<[Future<T>; 4]>>,
    job: Once<F>,
    value: OnceValue<U>,
}

// SAFETY: `inputs` is reached as `Once`'s closure is: by the launching thread before the
// node starts (`OwnPreconditions`), then by the one thread that runs or abandons it (`Body`).
unsafe impl<T: Send + Sync, U: Sync, F: Send> Sync for Dataflow<T, U, F> {}

impl<T, U, F> Dataflow<T, U, F> {
    fn new(inputs: impl IntoIterator<Item = Future<T>>, task: F) -> Self {
        Dataflow {
            // Up to 4 inputs travel inside the task's own allocation.
            inputs: UnsafeCell::new(inputs.into_iter().collect()),
            job: Once::new(task),
            value: OnceValue::new(),
        }
    }
}

impl<T, U, F> Body for Dataflow<T, U, F>
where
    T: Send + Sync,
    U: Send + Sync,
    F: FnOnce(Inputs<'_, T>) -> U + Send,
{
    unsafe fn call(&self) -> bool {
        // SAFETY: `Body`'s contract: this thread alone reaches the body now.
        let Some(f) = (unsafe { self.job.take() }) else {
            return false;
        };
        // SAFETY: as above.
        let inputs = std::mem::take(unsafe { &mut *self.inputs.get() });
        // SAFETY: the node runs once, on this thread: the one write of the cell. The inputs go
        // when the task has run, not with the node (which lives as long as its future).
        unsafe { self.value.set(f(Inputs(&inputs))) };
        true
    }

    unsafe fn discard(&self) {
        // SAFETY: as in `call`.
        drop_quietly(unsafe { self.job.take() });
        // SAFETY: as in `call`.
        drop_quietly(std::mem::take(unsafe { &mut *self.inputs.get() }));
    }
}

impl<T, U, F> Keeps<U> for Dataflow<T, U, F> {
    fn value(&self) -> &OnceValue<U> {
        &self.value
    }
}

impl<T, U, F> OwnPreconditions for Dataflow<T, U, F> {
    unsafe fn preconditions(&self) -> impl Iterator<Item = &Event> {
        // SAFETY: the trait's contract: not started, so this thread alone reaches the cell.
        let inputs = unsafe { &*self.inputs.get() };
        inputs.iter().map(|f| &f.event)
    }
}

/// The values of a [`Handle::dataflow`] task's inputs, every one there, in the order given.
#[derive(Debug)]
pub struct Inputs<'a, T>(&'a [Future<T>]);

impl<'a, T> Inputs<'a, T> {
    /// The values in order.
    ///
    /// ```
    /// let rt = tactor::Runtime::builder().workers(1).pin(false).build().unwrap();
    /// let ins = vec![tactor::Future::ready(1), tactor::Future::ready(2)];
    /// let v = rt.dataflow(tactor::Placement::Any, ins, |ins| ins.iter().copied().collect::<Vec<_>>());
    /// assert_eq!(v.get().unwrap(), &[1, 2]);
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a T> + 'a {
        self.0.iter().map(Self::value)
    }

    /// How many inputs there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of input `i`.
    ///
    /// # Panics
    /// If there are not more than `i` inputs.
    pub fn get(&self, i: usize) -> &'a T {
        Self::value(&self.0[i])
    }

    fn value(f: &'a Future<T>) -> &'a T {
        (f.cell().get()).expect("a task runs after its preconditions, which set their values")
    }
}

impl<T> std::ops::Index<usize> for Inputs<'_, T> {
    type Output = T;

    /// The value of input `i`, as [`Inputs::get`].
    ///
    /// ```
    /// let rt = tactor::Runtime::builder().workers(1).pin(false).build().unwrap();
    /// let ins = vec![tactor::Future::ready(20), tactor::Future::ready(22)];
    /// let v = rt.dataflow(tactor::Placement::Any, ins, |ins| ins[0] + ins[1]);
    /// assert_eq!(*v.get().unwrap(), 42);
    /// ```
    fn index(&self, i: usize) -> &T {
        self.get(i)
    }
}
