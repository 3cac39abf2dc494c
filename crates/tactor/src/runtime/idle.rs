//! How idle workers go to sleep and how new work wakes them, without lost wake-ups.
//!
//! A worker that found nothing for a while announces itself (`asleep`, `sleepers`), fences,
//! checks every queue once more and only then parks. A thread that pushes work fences and then
//! reads the announcements. With a SeqCst fence on both sides, at least one of them sees the
//! other: either the sleeper's re-check finds the new work, or the pusher sees the sleeper and
//! unparks it (and an unpark that arrives before the park makes the park return at once).
//! Spinning workers are never woken by syscalls: a push only pays for an unpark when somebody
//! actually sleeps.

use crate::sync::{fence, lock, AtomicBool, AtomicUsize, Mutex, Ordering, Thread};
use crossbeam_utils::CachePadded;

pub(crate) struct Idle {
    sleepers: CachePadded<AtomicUsize>,
    slots: Vec<CachePadded<Slot>>,
}

struct Slot {
    asleep: AtomicBool,
    thread: Mutex<Option<Thread>>,
}

impl Idle {
    pub(crate) fn new(workers: usize) -> Idle {
        Idle {
            sleepers: CachePadded::new(AtomicUsize::new(0)),
            slots: (0..workers)
                .map(|_| {
                    CachePadded::new(Slot {
                        asleep: AtomicBool::new(false),
                        thread: Mutex::new(None),
                    })
                })
                .collect(),
        }
    }

    /// Records the thread of worker `w`, which is the one unparked for it.
    pub(crate) fn register(&self, w: usize, thread: Thread) {
        *lock(&self.slots[w].thread) = Some(thread);
    }

    /// Parks worker `w` unless `has_work()` turns true after it announced itself. Returns when
    /// woken (possibly spuriously); the caller looks for work again.
    pub(crate) fn sleep(&self, w: usize, has_work: impl Fn() -> bool) {
        let slot = &self.slots[w];
        slot.asleep.store(true, Ordering::SeqCst);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !has_work() {
            crate::sync::park();
        }
        slot.asleep.store(false, Ordering::SeqCst);
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// After pushing work only worker `w` may take: wakes `w` if it sleeps.
    pub(crate) fn wake_worker(&self, w: usize) {
        fence(Ordering::SeqCst);
        if self.slots[w].asleep.load(Ordering::SeqCst) {
            self.unpark(w);
        }
    }

    /// After pushing work any worker may take: wakes one sleeper, if any sleeps.
    pub(crate) fn wake_one(&self) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            return;
        }
        for w in 0..self.slots.len() {
            // Claim the sleeper so that two pushers wake two different workers.
            if self.slots[w]
                .asleep
                .compare_exchange(true, false, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                self.unpark(w);
                return;
            }
        }
    }

    /// After pushing work that the pusher runs itself unless another worker takes it first
    /// (a fork-join job): wakes a sleeper if one is seen, without the fence. A sleeper that
    /// announced itself too late to be seen re-checks the queues after its own fence, and a
    /// job it misses is still run, by its owner: a lost wake-up here costs parallelism, never
    /// progress, and a fence per fork would cost more than most forked jobs.
    pub(crate) fn wake_one_cheaply(&self) {
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            self.wake_one();
        }
    }

    /// Wakes every worker (shutdown).
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        for w in 0..self.slots.len() {
            self.unpark(w);
        }
    }

    fn unpark(&self, w: usize) {
        if let Some(t) = lock(&self.slots[w].thread).as_ref() {
            t.unpark();
        }
    }
}
