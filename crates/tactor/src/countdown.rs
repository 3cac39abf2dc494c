//! A counter of outstanding arrivals that remembers the first failure among them: the
//! readiness test of a task (its untriggered preconditions plus one launch token) and of a
//! merged event. Exactly one arrival — the last — sees the count reach zero, which is what
//! guarantees a task is scheduled once and only once however its preconditions race.

use crate::failure::Failure;
use crate::sync::{lock, AtomicBool, AtomicUsize, Mutex, Ordering};
use std::sync::Arc;

/// How an event ended: `Ok` or poisoned with the root cause.
pub(crate) type Outcome = Result<(), Arc<Failure>>;

pub(crate) struct Countdown {
    remaining: AtomicUsize,
    /// Set (Release) after `failure` is filled, so the success path never takes the lock.
    poisoned: AtomicBool,
    failure: Mutex<Option<Arc<Failure>>>,
}

impl Countdown {
    pub(crate) fn new(count: usize) -> Countdown {
        Countdown {
            remaining: AtomicUsize::new(count),
            poisoned: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    /// Records one arrival with its outcome. Returns the combined outcome (the first failure,
    /// if any) to the last arrival only, `None` to every other.
    pub(crate) fn arrive(&self, outcome: &Outcome) -> Option<Outcome> {
        if let Err(f) = outcome {
            lock(&self.failure).get_or_insert_with(|| f.clone());
            self.poisoned.store(true, Ordering::Release);
        }
        // AcqRel: the last arrival must see every other arrival's failure (and whatever its
        // task wrote before triggering), which each published before its decrement.
        let before = self.remaining.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "more arrivals than counted");
        if before != 1 {
            return None;
        }
        if self.poisoned.load(Ordering::Acquire) {
            let f = lock(&self.failure)
                .take()
                .expect("a failure precedes the flag");
            Some(Err(f))
        } else {
            Some(Ok(()))
        }
    }
}
