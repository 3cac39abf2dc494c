//! A forked closure on its forker's stack: run once, by the forker or by a thief, and its
//! result read back by the forker.

use crate::runtime::job::{Header, JobRef};
use crate::sync::{AtomicU8, Ordering};
use crate::UserEvent;
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::thread::Result as Caught;

/// Not run yet, or running on a thief.
const PENDING: u8 = 0;
/// Ran: `result` is set.
const DONE: u8 = 1;
/// The forker waits: `waker` is set, and whoever finishes triggers it.
const WAITED: u8 = 2;

/// Polls of a stolen job's state before its forker suspends (a few microseconds; loom explores
/// none of them, Miri, which interprets each, a few).
const SPIN_BEFORE_SUSPENDING: u32 = if cfg!(loom) {
    0
} else if cfg!(miri) {
    16
} else {
    4096
};

/// A closure forked by `join`, on the forker's stack. It is told whether it was stolen (run
/// away from the forker's own path: `for_each` splits further then). Aligned to a cache line:
/// a thief then reads the header and the captures in one miss, and the forker's own stack
/// writes, while it runs the other half, never land on the job's line.
#[repr(C, align(64))]
pub(super) struct StackJob<F, R> {
    /// First, so that a pointer to it is a pointer to the job (`repr(C)`).
    header: Header,
    f: UnsafeCell<Option<F>>,
    result: UnsafeCell<Option<Caught<R>>>,
    state: AtomicU8,
    waker: UnsafeCell<Option<UserEvent>>,
}

impl<F: FnOnce(bool) -> R + Send, R: Send> StackJob<F, R> {
    pub(super) fn new(f: F) -> Self {
        StackJob {
            header: Header {
                execute: Self::execute,
            },
            f: UnsafeCell::new(Some(f)),
            result: UnsafeCell::new(None),
            state: AtomicU8::new(PENDING),
            waker: UnsafeCell::new(None),
        }
    }

    /// The job to push.
    ///
    /// # Safety
    /// The caller must keep `self` in place and alive until the job has run: until it took
    /// the job back ([`StackJob::is`]) or [`StackJob::wait`] returned.
    pub(super) unsafe fn as_job(&self) -> JobRef {
        // SAFETY: `execute` is called with this job's header, the first field of a `repr(C)`
        // struct, which the caller keeps valid until it has run (this function's contract);
        // `F` and `R` are `Send`, so it may run on any thread.
        unsafe { JobRef::new(self.header_ptr()) }
    }

    /// A pointer to the header that may reach the whole job (`execute` casts it back).
    fn header_ptr(&self) -> NonNull<Header> {
        NonNull::from(self).cast()
    }

    /// Whether `job` is this one.
    pub(super) fn is(&self, job: &JobRef) -> bool {
        // SAFETY: only compared, never run.
        *job == unsafe { JobRef::new(self.header_ptr()) }
    }

    /// Run by a thief (or by the forker's worker from its scheduling loop, having found the job
    /// in its deque while the forker was suspended).
    ///
    /// # Safety
    /// `header` is the header of a live `StackJob<F, R>` that has not run (`as_job`'s
    /// contract).
    unsafe fn execute(header: *const Header) {
        // SAFETY: the caller's contract; the header is at offset 0 of the `repr(C)` job.
        let me = unsafe { &*header.cast::<Self>() };
        // SAFETY: the job runs once, and the forker does not read `f` or `result` until the
        // state says it ran (acquire below).
        let f = unsafe { (*me.f.get()).take() }.expect("a job runs once");
        let result = catch_unwind(AssertUnwindSafe(|| f(true)));
        unsafe { *me.result.get() = Some(result) };
        // The forker may free the job as soon as it sees DONE: read the waker first if one
        // was registered. The swap publishes `result` (release) and sees `waker` (acquire).
        if me.state.swap(DONE, Ordering::AcqRel) == WAITED {
            // SAFETY: WAITED means the forker wrote `waker` before it published that state
            // and now blocks until it is triggered, so the job is still alive here.
            let waker = unsafe { (*me.waker.get()).take() }.expect("WAITED sets the waker");
            // The job may be gone once this triggers; `waker` is our own handle.
            let _ = waker.trigger();
        }
    }

    /// Runs the job on the forker, having taken it back from the deque.
    pub(super) fn run_inline(self) -> R {
        self.f.into_inner().expect("a job runs once")(false)
    }

    /// Waits until a thief has run the job, and returns its result (or resumes its panic).
    pub(super) fn wait(&self) -> R {
        // A stolen job of a fine-grained split ends within a few microseconds: watch it that
        // long before paying for an event and a suspension.
        for _ in 0..SPIN_BEFORE_SUSPENDING {
            if self.state.load(Ordering::Acquire) == DONE {
                break;
            }
            std::hint::spin_loop();
        }
        if self.state.load(Ordering::Acquire) != DONE {
            let waker = UserEvent::new();
            let event = waker.event();
            // SAFETY: until the state is WAITED, nobody else reads `waker`.
            unsafe { *self.waker.get() = Some(waker) };
            if self
                .state
                .compare_exchange(PENDING, WAITED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // Suspends this task (its worker goes on), or runs other work meanwhile where
                // stacks cannot switch. A runtime that gives up waits at shutdown returns
                // early: the spin below still holds the job until the thief is done.
                let _ = event.wait();
            }
            while self.state.load(Ordering::Acquire) != DONE {
                std::thread::yield_now();
            }
        }
        // SAFETY: DONE was read with acquire: the thief wrote `result` and touches the job no
        // more.
        match unsafe { (*self.result.get()).take() }.expect("a job that ran has a result") {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}
