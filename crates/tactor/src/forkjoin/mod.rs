//! Fork-join: [`join`] and [`for_each`], the styles of rayon, Cilk and TBB, on the runtime's
//! workers.
//!
//! `join(a, b)` pushes `b` as a job onto the calling worker's own deque, runs `a`, and takes
//! `b` back to run it inline unless another worker stole it meanwhile (work-first, as in Cilk
//! and rayon: an unstolen fork costs a push and a pop, with no allocation and no counted
//! reference). Only a stolen `b` is waited for, and that wait suspends the task like
//! [`Event::wait`](crate::Event::wait): the worker goes on with other work. Idle workers steal
//! the oldest job, the largest part of the split; a join whose worker has no other job hands
//! `b` straight to a worker that idles, if one does (a split in two across two cores then
//! costs the line that worker watches, not a steal).
//!
//! Borrowing follows `std::thread::scope`: both closures may borrow from the caller, since
//! `join` returns only after both ran; each needs `Send`, as either may run on another worker.
//! Called outside the runtime's workers, `join` runs `a` then `b` on the calling thread: enter
//! the runtime first with [`Handle::run`](crate::Handle::run).

mod job;
mod run;

use crate::runtime;
use job::StackJob;
use runtime::job::{Owner, Pushed};
use std::ops::Range;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// Runs `a` and `b`, potentially in parallel, and returns both results. If either panics, the
/// panic is resumed once both have finished (`b` still runs when `a` panicked).
///
/// ```
/// fn fib(n: u64) -> u64 {
///     if n < 2 {
///         return n;
///     }
///     let (x, y) = tactor::join(|| fib(n - 1), || fib(n - 2));
///     x + y
/// }
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// assert_eq!(rt.run(|| fib(20)), 6765);
/// assert_eq!(fib(10), 55); // off the workers: the same answer, one closure after the other
/// ```
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    join_told(a, |_| b())
}

/// `join`, telling `b` whether it was stolen.
fn join_told<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce(bool) -> RB + Send,
    RA: Send,
    RB: Send,
{
    let job_b = StackJob::new(b);
    // SAFETY: `job_b` stays in this frame, unmoved, until it has run: every path below either
    // takes it back from the deque (then nobody else holds it) or waits for the worker that
    // took it, and a panic of `a` is caught so that it cannot unwind past the job.
    let forked = runtime::job::fork(unsafe { job_b.as_job() });
    let Ok(forked) = forked else {
        // Not on a worker: nothing was pushed.
        let ra = a();
        return (ra, job_b.run_inline());
    };
    let ra = catch_unwind(AssertUnwindSafe(a));
    // Jobs pushed after `b` were taken back by the joins that pushed them; what is above `b`
    // now is `b` itself, or, if it was stolen, older jobs of enclosing joins on this worker:
    // run those meanwhile, as rayon does. A job handed to an idle worker is not on the deque.
    let stolen = forked == Pushed::Handed
        || loop {
            match runtime::job::pop() {
                Some(j) if job_b.is(&j) => break false,
                Some(j) => j.run(),
                None => break true,
            }
        };
    let rb = if stolen {
        job_b.wait()
    } else {
        job_b.run_inline()
    };
    match ra {
        Ok(ra) => (ra, rb),
        Err(panic) => resume_unwind(panic),
    }
}

/// Calls `body(i)` for every `i` in `range`, in parallel: HPX's `for_loop` and rayon's
/// `par_iter().for_each`. The range is split in halves, recursively, through [`join`], but only
/// as far as there are idle workers to take the halves: as many pieces as workers to begin
/// with, and more wherever a piece was stolen (work went idle elsewhere), never below `grain`
/// indices a piece (0 is taken as 1). So a loop of tiny bodies costs a handful of forks, and an
/// unbalanced one is split finely where it needs to be. Usable inside tasks and inside other
/// loops (nested); a panic of `body` is resumed after the loop's other pieces finished.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// let sum = AtomicU64::new(0);
/// rt.run(|| tactor::for_each(0..1000, 1, |i| { sum.fetch_add(i as u64, Relaxed); }));
/// assert_eq!(sum.into_inner(), 499_500);
/// ```
pub fn for_each<F>(range: Range<usize>, grain: usize, body: F)
where
    F: Fn(usize) + Sync,
{
    // One splitter for both loops: a slice of zero-sized items (no allocation) whose indices
    // are the range's, offset by its start.
    let mut units = vec![(); range.len()];
    // `move`: the wrappers hold `start` and `body` themselves, not references into this
    // frame, so a piece reaches the body in one load per item instead of a chain of three
    // (a 100 ns loop body: 5 % faster on one worker).
    let start = range.start;
    for_each_mut(&mut units, grain, move |i, ()| body(start + i));
}

/// Calls `body(i, &mut items[i])` for every item, in parallel, split as [`for_each`] splits
/// its range: rayon's `par_iter_mut().enumerate().for_each`. Each piece borrows its own part
/// of the slice, so the body may write its item without a lock.
///
/// ```
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// let mut squares = vec![0u64; 100];
/// rt.run(|| tactor::for_each_mut(&mut squares, 1, |i, x| *x = (i * i) as u64));
/// assert_eq!(squares[9], 81);
/// ```
pub fn for_each_mut<T, F>(items: &mut [T], grain: usize, body: F)
where
    T: Send,
    F: Fn(usize, &mut T) + Sync,
{
    // `move` for the same reason as in `for_each`: one hop from a piece to `body`.
    let never = try_for_each_mut(items, grain, move |i, x| {
        body(i, x);
        Ok::<(), std::convert::Infallible>(())
    });
    let Ok(()) = never;
}

/// [`for_each_mut`] with a body that may fail: rayon's `try_for_each`. Returns the first
/// error of a piece that failed (a piece stops at its first failing item; the others run to
/// their end), or `Ok` when every item succeeded.
///
/// ```
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// let mut xs = vec![1u32, 2, 0, 4];
/// let r = rt.run(|| tactor::try_for_each_mut(&mut xs, 1, |_, x| match *x {
///     0 => Err("a zero"),
///     _ => Ok(*x *= 10),
/// }));
/// assert_eq!(r, Err("a zero"));
/// assert_eq!((xs[0], xs[1]), (10, 20));
/// ```
pub fn try_for_each_mut<T, E, F>(items: &mut [T], grain: usize, body: F) -> Result<(), E>
where
    T: Send,
    E: Send,
    F: Fn(usize, &mut T) -> Result<(), E> + Sync,
{
    let workers = runtime::current_workers().unwrap_or(1);
    let split = Split {
        grain: grain.max(1),
        workers,
    };
    split.run_mut(items, 0, workers, &body)
}

/// How `for_each` splits.
#[derive(Clone, Copy)]
struct Split {
    grain: usize,
    workers: usize,
}

impl Split {
    /// Whether `len` items may be split further with `splits` splits left.
    fn splits(self, len: usize, splits: usize) -> bool {
        splits > 0 && len >= 2 * self.grain && len >= 2
    }

    /// The splits left to a half, and to a stolen one: a worker went idle, so let that half
    /// split for all of them.
    fn halve(self, splits: usize, stolen: bool) -> usize {
        if stolen {
            (splits / 2).max(self.workers)
        } else {
            splits / 2
        }
    }

    /// Runs `items` (the first has index `first`), which may still be split `splits` more
    /// times (halving each time). A piece that is not split any more runs in order, but splits
    /// off half of its rest whenever its worker has nothing left that others could steal
    /// (lazy binary splitting, Tzannes et al.): pieces cut in advance cannot even out bodies
    /// of uneven cost, and an idle worker finds the half at once instead of waiting for the
    /// body under way.
    fn run_mut<T: Send, E: Send, F: Fn(usize, &mut T) -> Result<(), E> + Sync>(
        self,
        items: &mut [T],
        first: usize,
        splits: usize,
        body: &F,
    ) -> Result<(), E> {
        if !self.splits(items.len(), splits) {
            return runtime::job::with_deque(|deque| {
                let deque = deque.filter(|_| self.workers > 1);
                let (mut rest, mut at) = (items, first);
                loop {
                    // Before each body, not after: the half split off is public while this
                    // body runs, so a worker that goes idle meanwhile takes it at once (even a
                    // last item) instead of waiting for the body to end.
                    if self.splits(rest.len(), 1) && deque.is_some_and(Owner::nothing_public) {
                        return self.run_mut(rest, at, 1, body);
                    }
                    let Some((x, tail)) = std::mem::take(&mut rest).split_first_mut() else {
                        return Ok(());
                    };
                    body(at, x)?;
                    (rest, at) = (tail, at + 1);
                }
            });
        }
        let mid = items.len() / 2;
        let (low, high) = items.split_at_mut(mid);
        // `move`: what a thief needs is in the job itself, not behind pointers to this frame
        // (each one more line to fetch from the forker's core before the piece can start).
        let (a, b) = join_told(
            || self.run_mut(low, first, self.halve(splits, false), body),
            move |stolen| self.run_mut(high, first + mid, self.halve(splits, stolen), body),
        );
        a.and(b)
    }
}
