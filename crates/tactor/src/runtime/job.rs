//! Jobs: the unit of fork-join work, and the split deque each worker keeps them in.
//!
//! A job is a pointer to work that lives on the stack of the task that forked it
//! (`crate::forkjoin`). The forking task takes it back from the top of its worker's deque and
//! runs it inline when no other worker stole it — no allocation, no event, no counted
//! reference — and waits for it only when it was stolen. Idle workers steal the oldest job (the
//! largest piece of a split). A job is never dropped unrun: whoever takes it runs it, even at
//! shutdown, since the task that owns its memory waits for it.
//!
//! The deque is split (Dinan et al., "Scalable work stealing", SC'09): the jobs below `split`
//! are public, taken by thieves at `top` as in a Chase-Lev deque; the jobs from `split` up to
//! `bottom` are private to the owner, which pushes and pops them with plain stores — no fence
//! and no read-modify-write, where a Chase-Lev pop needs a full fence. The owner makes its
//! private jobs public whenever it pushes and finds the public part empty (thieves took all of
//! it), and only pays Chase-Lev's fence when it pops back into the public part.

use super::worker;
use crate::sync::{fence, AtomicPtr, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;
use std::cell::Cell;
use std::ptr::NonNull;
use std::sync::Arc;

/// What every job starts with: how to run it.
#[repr(C)]
pub(crate) struct Header {
    /// Runs the job whose header this is, once.
    pub(crate) execute: unsafe fn(*const Header),
}

/// A job in a deque: a pointer to its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct JobRef(NonNull<Header>);

// SAFETY: a `JobRef` is only made by `JobRef::new`, whose contract requires the job to be
// runnable from any thread and alive until it has run.
unsafe impl Send for JobRef {}

impl JobRef {
    /// The job whose header `header` points at (a pointer with the whole job's provenance:
    /// `execute` reaches the job's other fields through it).
    ///
    /// # Safety
    /// The job must stay valid, unmoved, until `execute` has returned; `execute` must be safe
    /// to call once from any thread; whoever takes the job from a deque runs it, exactly once.
    #[inline]
    pub(crate) unsafe fn new(header: NonNull<Header>) -> JobRef {
        JobRef(header)
    }

    /// The job's header, to be handed over ([`super::offer::Offer`]).
    #[inline]
    pub(crate) fn as_ptr(self) -> *mut Header {
        self.0.as_ptr()
    }

    /// The job's address, to tell jobs apart.
    #[cfg(test)]
    pub(crate) fn addr(self) -> usize {
        self.0.as_ptr() as usize
    }

    /// Runs the job.
    #[inline]
    pub(crate) fn run(self) {
        let header = self.0.as_ptr();
        // SAFETY: `JobRef::new`'s contract: the job is alive until this returns, and a job
        // taken from a deque is run exactly once (here).
        unsafe { ((*header).execute)(header) }
    }
}

/// Jobs a deque holds at most. Each join holds one until it returns, so this bounds the depth
/// of nested joins on a worker; a fork beyond it runs inline (the program stays correct, that
/// level merely does not split). Under Miri, which interprets each slot's initialisation, 32
/// (see the mailbox's `RING`): its tests then reach the inline forks too.
const CAPACITY: usize = if cfg!(miri) { 32 } else { 1024 };

/// The part of a deque the thieves see.
pub(crate) struct Public {
    /// The oldest public job; thieves advance it (compare-and-swap).
    top: CachePadded<AtomicUsize>,
    /// One past the newest public job; moved by the owner.
    split: CachePadded<AtomicUsize>,
    /// Slot `i % CAPACITY` holds job `i`. Atomic words, since a thief may read a slot the
    /// owner is about to reuse: its compare-and-swap then fails and the value is dropped.
    slots: Box<[AtomicPtr<Header>]>,
}

impl Public {
    pub(crate) fn new() -> Arc<Public> {
        Arc::new(Public {
            top: CachePadded::new(AtomicUsize::new(0)),
            split: CachePadded::new(AtomicUsize::new(0)),
            slots: (0..CAPACITY)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
        })
    }

    #[inline]
    fn slot(&self, i: usize) -> &AtomicPtr<Header> {
        &self.slots[i % CAPACITY]
    }

    /// Whether there is nothing to steal (a hint: a thief looks before it steals).
    pub(crate) fn is_empty(&self) -> bool {
        self.top.load(Ordering::Relaxed) >= self.split.load(Ordering::Relaxed)
    }

    /// Takes the oldest public job, if any. Retries only when another thief won the race for
    /// the same job.
    pub(crate) fn steal(&self) -> Option<JobRef> {
        loop {
            let t = self.top.load(Ordering::Acquire);
            // Orders the read of `top` before that of `split`, against the owner's fence
            // between lowering `split` and reading `top` (`Owner::pop`): of a thief and an
            // owner going for the last public job, at least one sees the other.
            fence(Ordering::SeqCst);
            let s = self.split.load(Ordering::Acquire);
            if t >= s {
                return None;
            }
            let job = self.slot(t).load(Ordering::Relaxed);
            if self
                .top
                .compare_exchange(t, t + 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
            {
                // A job below `split` was written before `split` was raised past it (release,
                // read with acquire above), and the slot is not reused while `top` is `t`.
                return Some(JobRef(
                    NonNull::new(job).expect("a public slot holds a job"),
                ));
            }
            std::hint::spin_loop();
        }
    }
}

/// The owner's side of a deque: only its worker thread uses it.
pub(crate) struct Owner {
    public: Arc<Public>,
    /// One past the newest job (private when at or above `split`).
    bottom: Cell<usize>,
    /// The owner's copy of `public.split`, which only it writes.
    split: Cell<usize>,
}

impl Owner {
    pub(crate) fn new(public: Arc<Public>) -> Owner {
        Owner {
            public,
            bottom: Cell::new(0),
            split: Cell::new(0),
        }
    }

    /// Pushes `job`; hands it back when the deque is full. Returns whether jobs were made
    /// public (thieves may want waking). (The deque's tests and models push this way.)
    #[cfg(test)]
    pub(crate) fn push(&self, job: JobRef) -> Result<bool, JobRef> {
        self.push_or_hand(job, |_| false)
            .map(|pushed| pushed == Pushed::Public)
    }

    /// Pushes `job`, or, when the deque is empty (no older, larger job a thief could take
    /// instead), offers it to `hand_over` first. Hands it back when the deque is full.
    #[inline]
    pub(crate) fn push_or_hand(
        &self,
        job: JobRef,
        hand_over: impl FnOnce(JobRef) -> bool,
    ) -> Result<Pushed, JobRef> {
        let p = &*self.public;
        let b = self.bottom.get();
        // `top` only grows: a stale value understates the room, and says "empty" only of a
        // deque that was empty.
        let t = p.top.load(Ordering::Relaxed);
        if b - t >= CAPACITY {
            return Err(job);
        }
        if b == t && hand_over(job) {
            return Ok(Pushed::Handed);
        }
        p.slot(b).store(job.0.as_ptr(), Ordering::Relaxed);
        self.bottom.set(b + 1);
        let s = self.split.get();
        if t < s {
            return Ok(Pushed::Private);
        }
        // The thieves took every public job: make all private ones public. Release: the
        // slots and the jobs they point at are written before a thief can see them.
        self.split.set(b + 1);
        p.split.store(b + 1, Ordering::Release);
        Ok(Pushed::Public)
    }

    /// Takes the newest job, if no thief took it.
    #[inline]
    pub(crate) fn pop(&self) -> Option<JobRef> {
        let p = &*self.public;
        let b = self.bottom.get();
        let s = self.split.get();
        if b > s {
            // Private: nobody else reads it.
            self.bottom.set(b - 1);
            return Some(self.job_at(b - 1));
        }
        // Only public jobs are left: take the newest as Chase-Lev's owner does, by lowering
        // `split` below it first, then seeing whether a thief got there.
        if p.top.load(Ordering::Relaxed) >= s {
            return None;
        }
        let newest = s - 1;
        self.split.set(newest);
        p.split.store(newest, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let t = p.top.load(Ordering::Relaxed);
        if t < newest {
            // Other public jobs stand between the thieves and this one.
            self.bottom.set(newest);
            return Some(self.job_at(newest));
        }
        // This was the last public job (`t == newest`) or a thief already took it
        // (`t == s`): race for it, then leave the deque empty at `t + 1` or `s`.
        let won = t == newest
            && p.top
                .compare_exchange(t, t + 1, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok();
        let end = s;
        self.split.set(end);
        p.split.store(end, Ordering::Relaxed);
        self.bottom.set(end);
        won.then(|| self.job_at(newest))
    }

    #[inline]
    fn job_at(&self, i: usize) -> JobRef {
        let job = self.public.slot(i).load(Ordering::Relaxed);
        JobRef(NonNull::new(job).expect("a slot below bottom holds a job"))
    }

    /// Whether thieves can take nothing from the deque: its public part is empty (private
    /// jobs become public at the owner's next push).
    #[inline]
    pub(crate) fn nothing_public(&self) -> bool {
        self.public.top.load(Ordering::Relaxed) >= self.split.get()
    }

    /// Whether the deque holds no job.
    pub(crate) fn is_empty(&self) -> bool {
        self.bottom.get() <= self.public.top.load(Ordering::Relaxed)
    }
}

/// Where [`Owner::push_or_hand`] put a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// On the deque, private to its owner for now.
    Private,
    /// On the deque, with every private job made public: thieves may want waking.
    Public,
    /// Handed to an idle worker ([`super::offer`]): the forker waits for it, as for a stolen
    /// job.
    Handed,
}

/// Forks `job` from the calling worker: hands it to an idle worker when the caller's deque is
/// empty and some worker's offer is open, else pushes it onto the caller's deque. Hands it
/// back when the caller is not a worker or the deque is full (the caller then runs it itself).
#[inline]
pub(crate) fn fork(job: JobRef) -> Result<Pushed, JobRef> {
    worker::with_current(|ctx| {
        let ctx = ctx.ok_or(job)?;
        let pushed = ctx.jobs.push_or_hand(job, |job| ctx.hand_over(job))?;
        if pushed == Pushed::Public {
            ctx.shared.idle.wake_one_cheaply();
        }
        Ok(pushed)
    })
}

/// Runs `f` with the calling worker's deque (`None` off the workers), which a loop looks at
/// between its bodies: when nothing of it is public, nothing of the worker's work can be
/// stolen, so the loop splits off half of what it has left (lazy binary splitting), and that
/// push makes the deque public. Taken once for the loop, not per body.
#[inline]
pub(crate) fn with_deque<R>(f: impl FnOnce(Option<&Owner>) -> R) -> R {
    worker::with_current(|ctx| f(ctx.map(|ctx| &ctx.jobs)))
}

/// Takes the top of the calling worker's deque (the newest job that nobody stole).
#[inline]
pub(crate) fn pop() -> Option<JobRef> {
    worker::with_current(|ctx| ctx.and_then(|ctx| ctx.jobs.pop()))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    unsafe fn nothing(_: *const Header) {}

    /// An owner pushing and popping in bursts against two thieves: every job is taken exactly
    /// once, whatever races the owner's pops into the public part lose or win (loom checks the
    /// same on a few jobs; this runs many, with wrap-around of the slots).
    #[test]
    fn each_job_is_taken_exactly_once_under_stealing() {
        let n = if cfg!(miri) { 300 } else { 200_000 };
        let headers: Vec<Header> = (0..n).map(|_| Header { execute: nothing }).collect();
        let base = headers.as_ptr() as usize;
        let index = |j: JobRef| (j.addr() - base) / std::mem::size_of::<Header>();
        let taken: Vec<std::sync::atomic::AtomicU8> = (0..n)
            .map(|_| std::sync::atomic::AtomicU8::new(0))
            .collect();
        let public = Public::new();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    while !done.load(Ordering::Acquire) || !public.is_empty() {
                        if let Some(j) = public.steal() {
                            taken[index(j)].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            let own = Owner::new(public.clone());
            let mut next = 0;
            let mut burst = 1;
            while next < n {
                // Push a burst (varying, past the capacity at times), pop back about half.
                for _ in 0..burst.min(n - next) {
                    // SAFETY: the headers outlive the scope; they are never run.
                    match own.push(unsafe { JobRef::new(NonNull::from(&headers[next])) }) {
                        Ok(_) => {}
                        Err(j) => {
                            taken[index(j)].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    next += 1;
                }
                for _ in 0..burst / 2 + 1 {
                    if let Some(j) = own.pop() {
                        taken[index(j)].fetch_add(1, Ordering::Relaxed);
                    }
                }
                burst = burst * 7 % (CAPACITY + 301) + 1;
            }
            while let Some(j) = own.pop() {
                taken[index(j)].fetch_add(1, Ordering::Relaxed);
            }
            done.store(true, Ordering::Release);
        });
        let wrong: Vec<(usize, u8)> = taken
            .iter()
            .map(|t| t.load(Ordering::Relaxed))
            .enumerate()
            .filter(|&(_, c)| c != 1)
            .collect();
        assert!(
            wrong.is_empty(),
            "jobs not taken exactly once: {:?}",
            &wrong[..wrong.len().min(10)]
        );
    }
}
