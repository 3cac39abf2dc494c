//! The closures of one traced fragment, stored back to back in one buffer instead of one
//! allocation each: a launch into a trace copies its closure in, the vertex that runs it moves
//! it out: no allocation per launch, and no free on the worker of a block the issuing thread
//! allocated. Measured on `traced`, stencil_1d width 2, `-iter 128`, 10 000 steps, 9
//! alternated runs (medians): 10.35 ms with a `Box` per closure, 9.35 ms with the arena
//! (`compiled`: 8.04 ms).
//!
//! An index launch's replay stores one closure for all its points ([`Arena::push_shared`]):
//! each point's vertex calls it by reference with its point, and it is dropped with the arena.
//!
//! Whether a closure ran is a flag the running worker sets. The flags of one worker's
//! closures sit together, on lines no other worker writes ([`Arena::lay_out`]): with one flag
//! per closure in launch order, the workers of a lock-step graph took the line from each
//! other at every vertex.

use std::any::Any;
use std::cell::UnsafeCell;
use std::mem::{align_of, size_of, MaybeUninit};
use std::sync::{Arc, Mutex};

/// The buffer's unit: closures aligned to at most this are stored in place.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Unit([u8; 16]);

/// A closure in the buffer: where, and how to call or drop it. `call`'s second argument is
/// the point of a shared entry ([`Arena::push_shared`]); a run-once closure ignores it.
struct Entry {
    at: usize,
    call: unsafe fn(*mut u8, u32),
    /// `None` for closures without drop glue (an index launch's usually: nothing to call
    /// for each of a replay's entries when the arena goes).
    drop: Option<unsafe fn(*mut u8)>,
    /// A shared entry's call for several points in one go ([`Arena::run_points`]).
    many: Option<unsafe fn(*mut u8, &[u32])>,
}

/// Where launch `k` of a fragment is in a replay's arena: its entry, and its point in that
/// entry if the entry is shared by the points of an index launch ([`ONCE`] otherwise).
pub(crate) type Place = (u32, u32);

/// The point of a launch that has an entry of its own.
pub(crate) const ONCE: u32 = u32::MAX;

/// Closures, each run at most once.
#[derive(Default)]
pub(crate) struct Arena {
    units: Vec<MaybeUninit<Unit>>,
    entries: Vec<Entry>,
    /// Whether entry `k` was moved out (run), at `slots[k]` (at `k` without slots). Empty
    /// until the arena is laid out: nothing runs before.
    taken: Vec<UnsafeCell<bool>>,
    slots: Option<Arc<[u32]>>,
    /// Where the buffers go when the arena is dropped, for the next replay.
    pool: Option<Arc<Pool>>,
    /// What the closures point into (a recording's accesses): kept alive until they are
    /// gone. Dropped after them (fields drop after [`Drop::drop`]).
    keep: Option<Arc<dyn Any + Send + Sync>>,
    /// Launch `k`'s entry and point, when they are not entry `k` itself (a replay with index
    /// launches: one shared entry for all points of each).
    places: Option<Arc<[Place]>>,
    /// Shared entries pushed (they are never moved out).
    shared: usize,
}

/// Buffers of dropped arenas, reused by later ones: a replay's arena is dropped on a worker
/// when its instance ends, and a fresh allocation of the same size for the next replay came
/// from pages the allocator had meanwhile returned, so the first launches of a pass faulted
/// them back in (a tenth of a 1000-step `traced` pass at METG sizes, in kernel page clearing).
#[derive(Default)]
pub(crate) struct Pool(Mutex<Vec<Spare>>);

/// Empty buffers of an arena.
type Spare = (Vec<MaybeUninit<Unit>>, Vec<Entry>, Vec<UnsafeCell<bool>>);

/// Spares kept: one per instance that may be in flight, and a few more.
const SPARES: usize = 8;

impl Pool {
    fn take(&self) -> Option<Spare> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).pop()
    }

    fn give(&self, spare: Spare) {
        let mut spares = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if spares.len() < SPARES {
            spares.push(spare);
        }
    }
}

/// Flags per cache line: a worker's flags start a line of their own.
const FLAGS_PER_LINE: usize = 64;

/// Where each entry's flag goes when entry `k` runs on `workers[k]`: the flags of one worker
/// together, each worker's from a new cache line.
pub(crate) fn slots_for(workers: &[usize]) -> Arc<[u32]> {
    let n = workers.iter().max().map_or(0, |&w| w + 1);
    let mut count = vec![0usize; n];
    for &w in workers {
        count[w] += 1;
    }
    let mut start = Vec::with_capacity(n);
    let mut at = 0usize;
    for c in count {
        start.push(at);
        at += c.next_multiple_of(FLAGS_PER_LINE);
    }
    workers
        .iter()
        .map(|&w| {
            let slot = start[w];
            start[w] += 1;
            u32::try_from(slot).expect("fewer than 2^32 launches in a trace")
        })
        .collect()
}

// SAFETY: after the arena is built (by one thread, through `&mut`), a run-once entry `k` is
// touched only through `run(k)`, whose contract gives it to one caller once; a shared entry
// only by reference, and it is `Sync` (`push_shared`); the closures are `Send`.
unsafe impl Sync for Arena {}
// SAFETY: the closures are `Send`; the raw function pointers are plain code addresses.
unsafe impl Send for Arena {}

/// Calls the `F` at `p`, moving it out.
///
/// # Safety
/// `p` holds a live `F`, never used again.
unsafe fn call<F: FnOnce()>(p: *mut u8, _point: u32) {
    // SAFETY: by this function's contract.
    let f = unsafe { std::ptr::read(p.cast::<F>()) };
    f()
}

/// Calls the `F` at `p` for `point`, leaving it in place.
///
/// # Safety
/// `p` holds a live `F`, dropped only after every call has returned.
unsafe fn call_shared<F: Fn(u32)>(p: *mut u8, point: u32) {
    // SAFETY: by this function's contract; shared use is sound as `F: Sync` at `push_shared`.
    let f = unsafe { &*p.cast::<F>().cast_const() };
    f(point)
}

/// Calls the `F` at `p` for each of `points`, in order, leaving it in place.
///
/// # Safety
/// As for [`call_shared`].
unsafe fn call_shared_many<F: Fn(u32)>(p: *mut u8, points: &[u32]) {
    // SAFETY: as in `call_shared`.
    let f = unsafe { &*p.cast::<F>().cast_const() };
    for &point in points {
        f(point)
    }
}

/// Drops the `F` at `p`.
///
/// # Safety
/// As for [`call`].
unsafe fn drop_at<F>(p: *mut u8) {
    // SAFETY: by this function's contract.
    unsafe { std::ptr::drop_in_place(p.cast::<F>()) }
}

impl Arena {
    /// An arena with room for `units` buffer units and `entries` closures, so that a replay
    /// (the same closures as its recording) never grows its buffer: growing showed up as
    /// kernel page clearing in a profile of `examples/implicit.rs`; on `traced` it measured
    /// neutral (9 alternated runs, 9.14 vs 9.17 ms).
    /// The flags are laid out with `slots` at once. Its buffers come from `pool` when it has
    /// spares, and go back there when the arena is dropped. `keep` lives as long as the
    /// arena ([`Arena::keep`]).
    pub(crate) fn sized_like(
        units: usize,
        entries: usize,
        slots: Arc<[u32]>,
        pool: Arc<Pool>,
        keep: Arc<dyn Any + Send + Sync>,
        places: Option<Arc<[Place]>>,
    ) -> Arena {
        let (mut u, mut e, taken) = pool.take().unwrap_or_default();
        u.reserve(units);
        e.reserve(entries);
        let mut a = Arena {
            units: u,
            entries: e,
            taken,
            slots: None,
            pool: Some(pool),
            keep: Some(keep),
            places,
            shared: 0,
        };
        a.lay_out(slots);
        a
    }

    /// Places entry `k`'s flag at `slots[k]` (see [`slots_for`]); before any entry runs.
    pub(crate) fn lay_out(&mut self, slots: Arc<[u32]>) {
        let len = slots.iter().max().map_or(0, |&s| s as usize + 1);
        self.taken.clear();
        self.taken.resize_with(len, || UnsafeCell::new(false));
        self.slots = Some(slots);
    }

    /// Keeps `keep` alive as long as the arena: what its closures point into.
    pub(crate) fn keep(&mut self, keep: Arc<dyn Any + Send + Sync>) {
        self.keep = Some(keep);
    }

    /// Where entry `k`'s flag is.
    fn flag(&self, k: usize) -> usize {
        self.slots.as_ref().map_or(k, |s| s[k] as usize)
    }

    /// Buffer units in use.
    pub(crate) fn units(&self) -> usize {
        self.units.len()
    }

    /// How many closures.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Stores `f` as the next closure.
    pub(crate) fn push<F: FnOnce() + Send + 'static>(&mut self, f: F) {
        if align_of::<F>() > align_of::<Unit>() {
            // Rare (over-aligned captures): a box is aligned enough for the buffer.
            let boxed: super::Job = Box::new(f);
            self.store(boxed);
        } else {
            self.store(f);
        }
    }

    /// Stores `f` as the next closure, shared by the points of an index launch: each point's
    /// launch calls it with its point ([`Arena::run_launch`]), possibly on several workers at
    /// once; it is dropped with the arena.
    pub(crate) fn push_shared<F: Fn(u32) + Send + Sync + 'static>(&mut self, f: F) {
        self.shared += 1;
        type Boxed = Box<dyn Fn(u32) + Send + Sync>;
        if align_of::<F>() > align_of::<Unit>() {
            let boxed: Boxed = Box::new(f);
            self.place(boxed, call_shared::<Boxed>, Some(call_shared_many::<Boxed>));
        } else {
            self.place(f, call_shared::<F>, Some(call_shared_many::<F>));
        }
    }

    /// Stores `f`, whose alignment fits the buffer's.
    fn store<F: FnOnce() + Send + 'static>(&mut self, f: F) {
        self.place(f, call::<F>, None);
    }

    /// Moves `f` into the buffer as the next entry, called through `call` (and `many`, for
    /// several points at once, if shared).
    fn place<F: Send + 'static>(
        &mut self,
        f: F,
        call: unsafe fn(*mut u8, u32),
        many: Option<unsafe fn(*mut u8, &[u32])>,
    ) {
        assert!(align_of::<F>() <= align_of::<Unit>());
        let at = self.units.len();
        let n = size_of::<F>().div_ceil(size_of::<Unit>());
        self.units.reserve(n);
        // SAFETY: reserved above; the new units are `MaybeUninit`, valid uninitialised.
        unsafe { self.units.set_len(at + n) };
        // SAFETY: `units[at..]` has room for an `F` and is aligned for it (checked above);
        // moving the buffer later moves the `F` bytewise, which is how Rust moves values.
        unsafe { std::ptr::write(self.units.as_mut_ptr().add(at).cast::<F>(), f) };
        self.entries.push(Entry {
            at,
            call,
            drop: std::mem::needs_drop::<F>().then_some(drop_at::<F> as unsafe fn(*mut u8)),
            many,
        });
    }

    /// Runs closure `k`.
    ///
    /// # Safety
    /// Called at most once per `k`, and never concurrently for the same `k`; the arena is
    /// laid out with one slot per entry, distinct for distinct entries.
    pub(crate) unsafe fn run(&self, k: usize) {
        let e = &self.entries[k];
        let flag = &self.taken[self.flag(k)];
        // SAFETY: only this call touches entry `k` and its flag (the contract: distinct
        // entries have distinct slots); the entry holds a live closure until its flag is
        // set, and the buffer does not move while `&self` lives.
        unsafe {
            debug_assert!(!*flag.get());
            *flag.get() = true;
            (e.call)(self.units.as_ptr().add(e.at).cast::<u8>().cast_mut(), ONCE);
        }
    }

    /// Runs launch `k` of the fragment: its own closure, or its point of a shared one.
    ///
    /// # Safety
    /// As [`Arena::run`], per launch: called at most once per `k` and never concurrently for
    /// the same `k`; the places (if any) name each once-entry for one launch only, and shared
    /// entries only for points of index launches.
    pub(crate) unsafe fn run_launch(&self, k: usize) {
        let Some(places) = &self.places else {
            // SAFETY: launch `k` is entry `k`; the caller's contract is `run`'s.
            return unsafe { self.run(k) };
        };
        let (entry, point) = places[k];
        if point == ONCE {
            // SAFETY: entry `entry` belongs to launch `k` alone (this function's contract).
            return unsafe { self.run(entry as usize) };
        }
        let e = &self.entries[entry as usize];
        // SAFETY: a shared entry is called by reference and never moved out (its flag stays
        // clear, so `drop` drops it once, after every call: `&self` outlives each); it was
        // pushed by `push_shared`, whose `F: Sync` makes concurrent calls sound.
        unsafe { (e.call)(self.units.as_ptr().add(e.at).cast::<u8>().cast_mut(), point) }
    }

    /// Runs launches `launches`, which are points `points` of one index launch whose shared
    /// entry in a replay's arena is `entry`, in order, with one call: what a vertex holding
    /// several points of one index launch does (one dispatch for all). A recording's arena
    /// (no places: an entry per launch) runs them one by one.
    ///
    /// # Safety
    /// As [`Arena::run_launch`] for each of `launches`; in a replay's arena, `entry` was
    /// pushed by [`Arena::push_shared`] for exactly these launches' points.
    pub(crate) unsafe fn run_points(&self, entry: u32, points: &[u32], launches: &[u32]) {
        if self.places.is_none() {
            for &k in launches {
                // SAFETY: this function's contract is `run_launch`'s for each launch.
                unsafe { self.run_launch(k as usize) }
            }
            return;
        }
        let e = &self.entries[entry as usize];
        let many = e.many.expect("a shared entry");
        // SAFETY: as in `run_launch` for shared entries, point by point.
        unsafe {
            many(
                self.units.as_ptr().add(e.at).cast::<u8>().cast_mut(),
                points,
            )
        }
    }

    /// Every closure as a job of its own, each running its entry (for launching one by one).
    pub(crate) fn into_jobs(mut self) -> Vec<super::Job> {
        assert_eq!(
            self.shared, 0,
            "an arena with index launches is run by its subgraph"
        );
        let n = self.len();
        if self.slots.is_none() {
            self.taken = (0..n).map(|_| UnsafeCell::new(false)).collect();
        }
        let arena = Arc::new(self);
        (0..n)
            .map(|k| {
                let a = arena.clone();
                // SAFETY: each `k` gets exactly one job, which runs it at most once.
                Box::new(move || unsafe { a.run(k) }) as super::Job
            })
            .collect()
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for (k, e) in self.entries.iter().enumerate() {
            let Some(drop) = e.drop else {
                continue;
            };
            let taken = self.taken.get(self.flag(k)).is_some_and(|t| {
                // SAFETY: `&mut self` excludes any `run`, the flag's only writer.
                unsafe { *t.get() }
            });
            if !taken {
                // SAFETY: not taken, so the closure is live; `&mut self` excludes any `run`.
                unsafe { drop(self.units.as_mut_ptr().add(e.at).cast::<u8>()) };
            }
        }
        if let Some(pool) = self.pool.take() {
            // Every closure was moved out or dropped above: the buffers hold no live value.
            let (mut u, mut e, mut t) = (
                std::mem::take(&mut self.units),
                std::mem::take(&mut self.entries),
                std::mem::take(&mut self.taken),
            );
            u.clear();
            e.clear();
            t.clear();
            pool.give((u, e, t));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// Counts its drops.
    struct Count(Arc<AtomicUsize>);

    impl Drop for Count {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    #[test]
    fn every_closure_runs_once_or_is_dropped_once() {
        let runs = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let mut a = Arena::default();
        for i in 0..50usize {
            let (r, d) = (runs.clone(), Count(drops.clone()));
            let big = [i as u64; 5];
            a.push(move || {
                let _d = d;
                r.fetch_add(big[4] as usize, SeqCst);
            });
        }
        #[repr(align(64))]
        struct Wide(u64);
        let (r, w) = (runs.clone(), Wide(1000));
        a.push(move || {
            r.fetch_add(w.0 as usize, SeqCst);
        });
        let workers: Vec<usize> = (0..51).map(|k| (k * 7) % 3).collect();
        a.lay_out(slots_for(&workers));
        for k in (0..51).step_by(2) {
            // SAFETY: each even k once; laid out above.
            unsafe { a.run(k) };
        }
        drop(a);
        let even: usize = (0..50).step_by(2).sum();
        assert_eq!(
            runs.load(SeqCst),
            even + 1000,
            "the over-aligned one ran too"
        );
        assert_eq!(drops.load(SeqCst), 50, "run or dropped, each once");
        let mut b = Arena::default();
        let r = runs.clone();
        b.push(move || {
            r.fetch_add(1, SeqCst);
        });
        for j in b.into_jobs() {
            j();
        }
        assert_eq!(runs.load(SeqCst), even + 1001);
    }

    #[test]
    fn shared_entries_run_per_point_and_are_dropped_once() {
        let sum = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let mut a = Arena::default();
        // Launches: 0 once, 1..=3 points 0..3 of a shared entry, 4 once, 5 an over-aligned
        // shared entry of one point.
        let (s, d) = (sum.clone(), Count(drops.clone()));
        a.push(move || {
            let _d = d;
            s.fetch_add(1, SeqCst);
        });
        let (s, d) = (sum.clone(), Count(drops.clone()));
        a.push_shared(move |p| {
            let _ = &d;
            s.fetch_add(10 << p, SeqCst);
        });
        let d = Count(drops.clone());
        a.push(move || drop(d));
        #[repr(align(64))]
        struct Wide(usize);
        let (s, w, d) = (sum.clone(), Wide(1000), Count(drops.clone()));
        a.push_shared(move |p| {
            let _ = &d;
            s.fetch_add(w.0 + p as usize, SeqCst);
        });
        a.places = Some(Arc::from(vec![
            (0, ONCE),
            (1, 0),
            (1, 1),
            (1, 2),
            (2, ONCE),
            (3, 0),
        ]));
        a.lay_out(slots_for(&[0, 0, 1, 0]));
        std::thread::scope(|sc| {
            let a = &a;
            for k in [1usize, 2, 3, 5, 0] {
                // SAFETY: each launch once; laid out above; shared entries are `Sync`.
                sc.spawn(move || unsafe { a.run_launch(k) });
            }
        });
        assert_eq!(sum.load(SeqCst), 1 + 10 + 20 + 40 + 1000);
        assert_eq!(
            drops.load(SeqCst),
            1,
            "only the run-once closure that ran is gone"
        );
        drop(a);
        assert_eq!(
            drops.load(SeqCst),
            4,
            "the shared ones and the one not run, once each"
        );
    }

    #[test]
    fn pooled_buffers_are_reused_and_hold_nothing_of_the_last_arena() {
        let pool = Arc::new(Pool::default());
        let drops = Arc::new(AtomicUsize::new(0));
        let slots = slots_for(&[0, 1, 0]);
        let mut first = Arena::sized_like(64, 3, slots.clone(), pool.clone(), Arc::new(()), None);
        for _ in 0..3 {
            let d = Count(drops.clone());
            first.push(move || drop(d));
        }
        let buffer = first.units.as_ptr();
        // SAFETY: entry 1 once; laid out by `sized_like`.
        unsafe { first.run(1) };
        drop(first);
        assert_eq!(drops.load(SeqCst), 3, "one ran, two dropped");
        let second = Arena::sized_like(64, 3, slots, pool.clone(), Arc::new(()), None);
        assert_eq!(second.units.as_ptr(), buffer, "the spare buffer came back");
        assert_eq!(second.len(), 0);
        assert!(second.taken.iter().all(|t| {
            // SAFETY: nothing runs concurrently in this test.
            !unsafe { *t.get() }
        }));
    }

    #[test]
    fn each_workers_flags_are_together_and_start_a_line() {
        let workers = [0, 1, 0, 2, 1, 0];
        let slots = slots_for(&workers);
        assert_eq!(&slots[..], &[0, 64, 1, 128, 65, 2]);
        let mut distinct = slots.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), workers.len());
        assert!(slots_for(&[]).is_empty());
    }
}
