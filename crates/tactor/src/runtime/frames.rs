//! Tasks that wait inside a worker. A worker's scheduling loop runs on a coroutine stack; a
//! task that waits for an event that has not triggered suspends that whole coroutine (its
//! frame stays on that stack, untouched) and the worker goes on in another one. When the event
//! triggers, the loop that is running notices at its next task boundary and hands the worker
//! back to the suspended frame. Frames resume in any order, so a wait can never be stuck
//! beneath a task that needs it to finish — the deadlock of help-first waiting, where the
//! waiter runs other tasks on its own stack (Realm suspends waiting tasks the same way, on
//! user-level threads).
//!
//! Everything stays on the worker's OS thread: its pinning, its thread-locals and its
//! registration for wake-ups. Running a task costs nothing extra; a wait that blocks costs
//! two stack switches and, the first time, a stack (reused afterwards).
//!
//! Under Miri and loom, which cannot switch stacks, `drive` runs the loop directly and
//! [`suspend`] declines, so waits fall back to help-first.

use crate::event::Event;
use std::cell::{Cell, RefCell};
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

/// How long a runtime at shutdown stays otherwise idle — every worker's loop done, only
/// suspended frames left — before the frames still waiting are given up: their waits return
/// an error ([`crate::Failure::Abandoned`]). Only a thread outside the runtime could still
/// trigger those events (a user event), and a drop must not hang on one that never comes.
pub const ABANDON_AFTER: Duration = Duration::from_millis(100);

/// The runtime's count of workers whose loop is done (at shutdown), and how many it has.
#[cfg_attr(any(miri, loom), allow(dead_code))]
pub(crate) struct Quiet<'a> {
    pub(crate) count: &'a AtomicUsize,
    pub(crate) of: usize,
    /// Unit tests: this runtime's workers cannot map coroutine stacks.
    #[cfg(test)]
    pub(crate) no_stacks: bool,
}

#[cfg(not(any(miri, loom)))]
thread_local! {
    /// Set on a worker once its waiting frames were given up: every wait after it returns
    /// at once (the wait sees its event untriggered and reports it).
    static ABANDONED: Cell<bool> = const { Cell::new(false) };
}

thread_local! {
    /// Events the suspended frames of this thread's worker wait for.
    static WAITING: RefCell<Vec<Event>> = const { RefCell::new(Vec::new()) };
    /// Whether `WAITING` is non-empty: read on every pass of the worker loop.
    static ANY_WAITING: Cell<bool> = const { Cell::new(false) };
}

/// Whether a suspended frame of this worker can resume (checked at task boundaries and
/// before the worker sleeps).
#[inline]
pub(crate) fn ready() -> bool {
    ANY_WAITING.with(Cell::get) && WAITING.with(|w| w.borrow().iter().any(Event::has_triggered))
}

#[cfg(not(any(miri, loom)))]
mod imp {
    use super::{Quiet, ABANDONED, ABANDON_AFTER, ANY_WAITING, WAITING};
    use crate::event::Event;
    use corosensei::stack::DefaultStack;
    use corosensei::{Coroutine, CoroutineResult, Yielder};
    use std::cell::{Cell, RefCell};
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    /// Why a scheduling loop gave the thread back to the driver.
    pub(super) enum Yield {
        /// A task on this stack waits for the event.
        Wait(Event),
        /// The loop is at a task boundary and a suspended frame can resume.
        Switch,
    }

    type Loop = Coroutine<(), Yield, (), DefaultStack>;

    /// Stack of each scheduling coroutine: as large as a thread's (its pages are only mapped
    /// when touched).
    const STACK: usize = 2 << 20;

    thread_local! {
        /// The yielder of the coroutine running on this thread, if any.
        static YIELDER: Cell<*const Yielder<(), Yield>> = const { Cell::new(std::ptr::null()) };
        /// Whether the driver keeps an idle loop to run next when a frame is suspended.
        static HAS_SPARE: Cell<bool> = const { Cell::new(false) };
        /// A stack mapped by `suspend` for the loop that will run while it waits.
        static NEXT_STACK: RefCell<Option<DefaultStack>> = const { RefCell::new(None) };
    }

    /// Maps a coroutine stack; in unit tests, fails on the workers of a runtime built with
    /// `Builder::without_stacks` (as under an address-space limit).
    fn map_stack() -> std::io::Result<DefaultStack> {
        #[cfg(test)]
        if NO_STACKS.with(Cell::get) {
            return Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory));
        }
        DefaultStack::new(STACK)
    }

    #[cfg(test)]
    thread_local! {
        static NO_STACKS: Cell<bool> = const { Cell::new(false) };
    }

    /// A scheduling loop on `stack`.
    fn loop_on(stack: DefaultStack, body: fn()) -> Loop {
        Coroutine::with_stack(stack, move |y: &Yielder<(), Yield>, ()| {
            YIELDER.with(|c| c.set(y));
            body();
        })
    }

    /// Runs `body` (a worker's scheduling loop, which returns at shutdown) until it and every
    /// frame it suspended have finished.
    pub(crate) fn drive(body: fn(), quiet: &Quiet<'_>) {
        #[cfg(test)]
        NO_STACKS.with(|n| n.set(quiet.no_stacks));
        let mut waiting: Vec<Loop> = Vec::new();
        let mut spare: Option<Loop> = None;
        // Where no stack can be mapped (an address-space limit), the loop runs on the
        // thread's own stack and waits help-first, as under Miri.
        let Ok(first) = map_stack() else {
            body();
            quiet.count.fetch_add(1, Ordering::SeqCst);
            return;
        };
        let mut current = Some(loop_on(first, body));
        while let Some(mut co) = current.take() {
            let result = co.resume(());
            // The coroutine that ran restored nothing: the driver's own yielder is none.
            YIELDER.with(|c| c.set(std::ptr::null()));
            match result {
                CoroutineResult::Yield(Yield::Wait(event)) => {
                    waiting.push(co);
                    WAITING.with(|w| w.borrow_mut().push(event));
                    ANY_WAITING.with(|a| a.set(true));
                    current = Some(spare.take().unwrap_or_else(|| {
                        let stack = NEXT_STACK.with(|n| n.borrow_mut().take());
                        loop_on(stack.expect("`suspend` mapped the next stack"), body)
                    }));
                    HAS_SPARE.with(|h| h.set(spare.is_some()));
                }
                CoroutineResult::Yield(Yield::Switch) => {
                    // Keep one idle loop to reuse; a second would be another stack for nothing.
                    if spare.is_none() {
                        spare = Some(co);
                        HAS_SPARE.with(|h| h.set(true));
                    }
                    current = take_ready(&mut waiting);
                    if current.is_none() {
                        current = spare.take();
                    }
                    HAS_SPARE.with(|h| h.set(spare.is_some()));
                }
                CoroutineResult::Return(()) => {
                    // Shutdown: frames still waiting finish once their events trigger (the
                    // runtime poisons what it cancels, so they do), or are given up once no
                    // worker runs anything (`ABANDON_AFTER`).
                    quiet.count.fetch_add(1, Ordering::SeqCst);
                    let mut all_quiet_since: Option<Instant> = None;
                    current = loop {
                        if waiting.is_empty() {
                            break None;
                        }
                        if let Some(next) = take_ready(&mut waiting) {
                            quiet.count.fetch_sub(1, Ordering::SeqCst);
                            break Some(next);
                        }
                        if quiet.count.load(Ordering::SeqCst) < quiet.of {
                            all_quiet_since = None;
                        } else if ABANDONED.with(Cell::get)
                            || all_quiet_since.get_or_insert_with(Instant::now).elapsed()
                                >= ABANDON_AFTER
                        {
                            ABANDONED.with(|a| a.set(true));
                            WAITING.with(|w| {
                                let mut w = w.borrow_mut();
                                w.pop();
                                ANY_WAITING.with(|a| a.set(!w.is_empty()));
                            });
                            quiet.count.fetch_sub(1, Ordering::SeqCst);
                            break waiting.pop();
                        }
                        std::thread::park_timeout(std::time::Duration::from_millis(1));
                    };
                }
            }
        }
        // An idle spare is at a task boundary with nothing on its stack but the loop:
        // dropping it unwinds that.
        drop(spare);
    }

    /// Removes and returns a suspended frame whose event has triggered.
    fn take_ready(waiting: &mut Vec<Loop>) -> Option<Loop> {
        let i = WAITING.with(|w| w.borrow().iter().position(Event::has_triggered))?;
        WAITING.with(|w| {
            let mut w = w.borrow_mut();
            w.swap_remove(i);
            ANY_WAITING.with(|a| a.set(!w.is_empty()));
        });
        Some(waiting.swap_remove(i))
    }

    /// From a task on a worker: suspends the calling frame until `event` triggers and returns
    /// `true`; `false` (at once) off a worker's coroutine.
    pub(crate) fn suspend(event: &Event) -> bool {
        let y = YIELDER.with(Cell::get);
        if y.is_null() {
            return false;
        }
        if ABANDONED.with(Cell::get) {
            // Given up at shutdown: the wait returns with its event untriggered.
            return true;
        }
        // The worker goes on in another loop: on the spare, or on a stack mapped now. If none
        // can be mapped, this wait declines and is served help-first.
        if !HAS_SPARE.with(Cell::get) && NEXT_STACK.with(|n| n.borrow().is_none()) {
            match map_stack() {
                Ok(stack) => NEXT_STACK.with(|n| *n.borrow_mut() = Some(stack)),
                Err(_) => return false,
            }
        }
        // Wake this thread if it sleeps when the event triggers.
        event.unpark_on_trigger();
        // SAFETY: `YIELDER` is set by the coroutine running on this thread, on its own stack,
        // which outlives every call made from it; it is reset after each resume returns, so
        // a non-null pointer is the running coroutine's.
        let y = unsafe { &*y };
        y.suspend(Yield::Wait(event.clone()));
        // Resumed: this coroutine runs again; its yielder is current once more.
        YIELDER.with(|c| c.set(y));
        true
    }

    /// From the scheduling loop, at a task boundary: gives the worker to a suspended frame
    /// that can resume.
    pub(crate) fn switch() {
        let y = YIELDER.with(Cell::get);
        if y.is_null() {
            return;
        }
        // SAFETY: as in `suspend`.
        let y = unsafe { &*y };
        y.suspend(Yield::Switch);
        YIELDER.with(|c| c.set(y));
    }
}

#[cfg(any(miri, loom))]
mod imp {
    use crate::event::Event;

    pub(crate) fn drive(body: fn(), _: &super::Quiet<'_>) {
        body();
    }

    pub(crate) fn suspend(_: &Event) -> bool {
        false
    }

    pub(crate) fn switch() {}
}

pub(crate) use imp::{drive, suspend, switch};

#[cfg(all(test, not(any(miri, loom))))]
mod tests {
    use crate::{Placement, Runtime, UserEvent};

    /// Without stacks to switch to, workers run their loop on their own stack and waits are
    /// served help-first: waits, nested ones included, still finish.
    #[test]
    fn without_stacks_waits_are_served_on_the_workers_own_stack() {
        let rt = Runtime::builder()
            .workers(2)
            .pin(false)
            .without_stacks()
            .build()
            .unwrap();
        let gate = UserEvent::new();
        let e = gate.event();
        let waiter = rt.launch(Placement::Worker(0), &[], move || e.wait().unwrap());
        let h = rt.handle();
        let nested = rt.launch(Placement::Worker(1), &[], move || {
            h.launch(Placement::Any, &[], || ()).wait().unwrap();
        });
        gate.trigger().unwrap();
        waiter.wait().unwrap();
        nested.wait().unwrap();
    }
}
