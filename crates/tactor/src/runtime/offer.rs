//! Offers: an idle worker's standing request for a fork-join job, which a forking worker fills
//! by handing its job over directly instead of pushing it where the idle worker would have to
//! find and steal it.
//!
//! Why: at a two-way split across two cores, a steal is a chain of dependent cache misses (the
//! deque's `split`, then the slot, then the job, then the compare-and-swap on `top`), paid on
//! the critical path of every split. A handed-over job costs one line, the offer, which the
//! idle worker is already watching.
//!
//! Protocol: only the offer's own worker opens it and takes back what it holds (`open`,
//! `close`); a forker only turns an open offer into a job (`give`, a compare-and-swap). So a
//! worker that closes its offer either finds it still open (no forker got it) or finds a job,
//! which it must run: a job given is never lost, and the forker, like any whose job was stolen,
//! waits for it to have run.

use super::job::{Header, JobRef};
use crate::sync::{AtomicPtr, Ordering};
use std::ptr::NonNull;

/// One worker's offer.
pub(crate) struct Offer {
    /// Null: closed. [`open_mark`]: open, no job yet. Anything else: the job handed over.
    slot: AtomicPtr<Header>,
}

/// The value of an open offer: never a job's address (a job is a live, aligned `Header` on a
/// task's stack; this is the dangling address `align_of::<Header>()`).
fn open_mark() -> *mut Header {
    NonNull::<Header>::dangling().as_ptr()
}

impl Offer {
    pub(crate) fn new() -> Offer {
        Offer {
            slot: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The owner, going idle: lets forkers hand it a job. A no-op when already open or
    /// holding a job.
    #[inline]
    pub(crate) fn open(&self) {
        // Only the owner leaves the closed state, so nobody races this store.
        if self.slot.load(Ordering::Relaxed).is_null() {
            self.slot.store(open_mark(), Ordering::Relaxed);
        }
    }

    /// The owner: whether a job waits (a hint, to stop spinning; `close` takes it).
    #[inline]
    pub(crate) fn has_job(&self) -> bool {
        let p = self.slot.load(Ordering::Relaxed);
        !p.is_null() && p != open_mark()
    }

    /// The owner, before doing anything but wait: closes the offer, and returns the job a
    /// forker handed over meanwhile, if any — the caller must run it.
    #[inline]
    pub(crate) fn close(&self) -> Option<JobRef> {
        // Acquire: the job and what its closure captured were written before it was given.
        let mut p = self.slot.load(Ordering::Acquire);
        if p.is_null() {
            // Closed already: forkers only write an open offer.
            return None;
        }
        if p == open_mark() {
            // Open: race the forkers for it.
            p = self.slot.swap(std::ptr::null_mut(), Ordering::Acquire);
            if p == open_mark() {
                return None;
            }
        } else {
            // A job: no forker writes the offer now, so a plain store closes it, and this
            // worker goes on to the job without waiting for the line to be its own.
            self.slot.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
        // SAFETY: a value other than null and the open mark was stored only by `give`, from
        // a `JobRef`, whose contract (alive until run, runnable from any thread) passes on to
        // the one who takes it: this owner, exactly once, since the offer is closed now.
        Some(unsafe { JobRef::new(NonNull::new(p).expect("an offer's job is not null")) })
    }

    /// A forker: hands `job` over if the offer is open. On `false` the job is still the
    /// caller's.
    #[inline]
    pub(crate) fn give(&self, job: JobRef) -> bool {
        // Look first: a closed offer's line stays shared while its worker is busy.
        self.slot.load(Ordering::Relaxed) == open_mark()
            && self
                .slot
                .compare_exchange(
                    open_mark(),
                    job.as_ptr(),
                    Ordering::Release,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32};

    static RAN: AtomicU32 = AtomicU32::new(0);

    unsafe fn count(_: *const Header) {
        RAN.fetch_add(1, Ordering::Relaxed);
    }

    /// A forker giving jobs in a loop against an owner that opens, spins and closes over and
    /// over: every job is run exactly once, by the owner when given, by the forker otherwise.
    #[test]
    fn every_job_given_or_kept_runs_exactly_once() {
        let n = if cfg!(miri) { 200 } else { 100_000 };
        let header = Header { execute: count };
        let offer = Offer::new();
        let done = AtomicBool::new(false);
        RAN.store(0, Ordering::Relaxed);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    offer.open();
                    for _ in 0..3 {
                        if offer.has_job() {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                    if let Some(j) = offer.close() {
                        j.run();
                    }
                }
            });
            for _ in 0..n {
                // SAFETY: `header` outlives the scope, and `count` may run on any thread.
                let job = unsafe { JobRef::new(NonNull::from(&header)) };
                if offer.give(job) {
                    while offer.has_job() {
                        std::hint::spin_loop();
                    }
                } else {
                    job.run();
                }
            }
            done.store(true, Ordering::Release);
        });
        assert_eq!(RAN.load(Ordering::Relaxed), n);
        assert!(offer.close().is_none(), "nothing left in the offer");
    }
}
