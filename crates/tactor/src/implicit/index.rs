//! Index launches: many points of one task in one call (Legion's index space launches).
//!
//! Outside a trace an index launch is its points launched one by one, each analysed like any
//! launch. Inside a trace its points are recorded one by one too, but a replay matches the
//! whole launch at once (its task, its projection and its number of points) and stores one
//! job for all its points: the driver's cost no longer grows with the points. Each point's
//! projection then runs on the worker that runs the point, which compares it with the
//! recording before the task gets its references; a point that differs does not run and
//! poisons what depends on it (and what of the replay had not run yet), with the difference
//! as the error. A replay stays exactly
//! what the recording analysed, or fails: never a silent wrong answer.

use super::access::{constant, Access, Read, ReadList};
use super::region::{Cell, Constant};
use super::replicated::{sending, Replicated, Sends, Sig, Step};
use super::trace::{Extra, Index, TaskKind, Typed};
use super::{check_kept, Program};
use crate::runtime::Placement;
use std::any::TypeId;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

/// The recording a replay's shared job compares its points with.
struct Recording(NonNull<Typed>);

// SAFETY: `Typed` is `Sync` (never changed after its recording ends), and the pointer is only
// read through `&Typed` while the arena that keeps it alive (`Arena::keep`) holds the job.
unsafe impl Send for Recording {}
// SAFETY: as for `Send`.
unsafe impl Sync for Recording {}

impl Recording {
    /// # Safety
    /// The arena that holds the job holding `self` keeps the recording alive.
    unsafe fn get(&self) -> &Typed {
        // SAFETY: by this function's contract.
        unsafe { self.0.as_ref() }
    }
}

/// A program constant as an index launch's points reach it: uncounted, like an access (the
/// issuing thread would otherwise count a reference per launch, and a worker uncount it).
struct Env<S>(NonNull<Cell<S>>);

// SAFETY: the program that owns the constant keeps its cell alive until every task it
// launched has finished (`Program` holds an `Arc` of every cell, waits for its tasks on drop
// or hands the cells to the runtime), and nothing writes a constant; `S: Send + Sync`.
unsafe impl<S: Send + Sync> Send for Env<S> {}
// SAFETY: as for `Send`: only `&S` is ever given out.
unsafe impl<S: Send + Sync> Sync for Env<S> {}

impl<S> Clone for Env<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Env<S> {}

impl<S> Env<S> {
    fn of(c: &Constant<S>) -> Env<S> {
        Env(NonNull::from(&*c.0.cell))
    }

    /// # Safety
    /// Called by a task of the program that owns the constant (see `Send`).
    unsafe fn get(&self) -> &S {
        // SAFETY: alive (this function's contract) and never written.
        unsafe { &*self.0.as_ref().value.get() }
    }
}

/// The program constant of an index launch as its projection sees it: the constant's value
/// (through `Deref` or [`get`](ConstRef::get)), and lists of reads kept in it handed to the
/// points without copying ([`reads`](ConstRef::reads)).
///
/// Invariant in `'a`: were it covariant, `'a` could shrink to any borrow in the projection,
/// and [`reads`](Self::reads) would take a list that dies with the call.
pub struct ConstRef<'a, S>(&'a S, u32, PhantomData<fn(&'a ()) -> &'a ()>);

impl<S> Clone for ConstRef<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for ConstRef<'_, S> {}

impl<'a, S> ConstRef<'a, S> {
    /// The constant's value, borrowed for as long as the constant is (what [`reads`](Self::reads)
    /// takes lists from).
    pub fn get(self) -> &'a S {
        self.0
    }

    /// `list`, a list of reads held in the constant (or `'static`), as an access that the
    /// point's task gets as [`Inputs`](super::Inputs): two words, however long the list.
    /// Only what lives as long as the constant fits `'a`; a list built in the projection
    /// does not compile:
    ///
    /// ```compile_fail
    /// use tactor::implicit::{read, ConstRef, Read, ReadList, Region};
    /// fn project(c: ConstRef<'_, Vec<Region<u64>>>) -> ReadList<u64> {
    ///     let mine: Vec<Read<u64>> = c.get().iter().map(read).collect();
    ///     c.reads(&mine)
    /// }
    /// ```
    pub fn reads<T>(self, list: &'a [Read<T>]) -> ReadList<T> {
        // SAFETY: `list` lives as long as `'a`, which (universally quantified in the
        // projection's type, and invariant) only what the constant holds, or `'static`
        // data, outlives; the constant is never written and lives as long as its program
        // (`self.1`, an index launch refuses another program's constant), which every launch
        // of the list checks first (`Access::kept_by`).
        unsafe { ReadList::of(list, self.1) }
    }
}

impl<S> std::ops::Deref for ConstRef<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        self.0
    }
}

impl Program {
    /// Launches `points` tasks at once: point `i` runs `task(&shared, arg, i, refs)` at the
    /// placement and with the accesses `project(shared, arg, i)` gives (the projection sees
    /// the constant as a [`ConstRef`], which can hand out lists of reads it holds without
    /// copying them), as if each point were launched by [`Program::launch`] in order. `shared` is a constant of this program
    /// (what every launch reaches, passed uncounted); `arg` is this launch's own small value
    /// (a timestep, say). The points of one index launch should not conflict with each other
    /// (if they do, they are ordered like separate launches).
    ///
    /// Inside a trace this is what makes a replay cheap: a replayed index launch costs the
    /// issuing thread about one launch however many points it has, and each point's
    /// projection is computed and compared with the recording by the worker that runs it. A
    /// point that projects differently from its recording does not run: it fails with
    /// [`TraceError::PointMismatch`](super::TraceError::PointMismatch) (its message), and the
    /// tasks that depend on it are poisoned — as is, like any failure in a compiled instance,
    /// whatever of the replay had not run yet. A different task, projection or number of
    /// points is an ordinary mismatch ([`Program::end_trace`] reports it, nothing ran).
    ///
    /// ```
    /// use tactor::implicit::{read_write, Program, Region};
    /// use tactor::{Placement, Runtime};
    ///
    /// let rt = Runtime::new(2).unwrap();
    /// let mut p = Program::new(&rt);
    /// let cells: Vec<Region<u64>> = (0..4).map(|i| p.region(i)).collect();
    /// let shared = p.constant(cells.clone());
    /// for step in 1..=3u64 {
    ///     p.trace(7, |p| {
    ///         p.index_launch(
    ///             4,
    ///             &shared,
    ///             step,
    ///             |c, _, i| (Placement::Worker(i as usize % 2), read_write(&c[i as usize])),
    ///             |_, step, _, v| *v += 10 * step,
    ///         );
    ///     })
    ///     .unwrap();
    /// }
    /// assert_eq!(p.with(&cells[3], |v| *v).unwrap(), 63);
    /// ```
    ///
    /// # Panics
    /// As [`Program::launch`], for any point; if `shared` is another program's constant.
    #[track_caller]
    pub fn index_launch<S, X, A, P, F>(
        &mut self,
        points: u32,
        shared: &Constant<S>,
        arg: X,
        project: P,
        task: F,
    ) where
        S: Send + Sync + 'static,
        X: Copy + Send + Sync + 'static,
        A: Access,
        P: Fn(ConstRef<'_, S>, X, u32) -> (Placement, A) + Send + Sync + 'static,
        F: for<'a> Fn(&S, X, u32, A::Ref<'a>) + Send + Sync + 'static,
    {
        self.index_launch_then(points, shared, arg, project, task, |_, _, _| {});
    }

    /// [`Program::index_launch`], each point's job also running `then(&shared, arg, i)` after
    /// its task, once the task's references are gone (see [`Program::launch_then`]).
    #[track_caller]
    pub(super) fn index_launch_then<S, X, A, P, F, T>(
        &mut self,
        points: u32,
        shared: &Constant<S>,
        arg: X,
        project: P,
        task: F,
        then: T,
    ) where
        S: Send + Sync + 'static,
        X: Copy + Send + Sync + 'static,
        A: Access,
        P: Fn(ConstRef<'_, S>, X, u32) -> (Placement, A) + Send + Sync + 'static,
        F: for<'a> Fn(&S, X, u32, A::Ref<'a>) + Send + Sync + 'static,
        T: Fn(&S, X, u32) + Send + Sync + 'static,
    {
        self.check_own(&shared.0);
        let env = Env::of(shared);
        let program = self.id;
        let manual = self.manual_trace_open();
        if manual {
            if let Some((arena, typed, first)) =
                self.traces
                    .replay_index(TypeId::of::<F>(), points, TypeId::of::<P>())
            {
                let recording = Recording(NonNull::from(typed));
                let on_mismatch = self.on_mismatch.clone();
                arena.push_shared(move |i: u32| {
                    // SAFETY: this runs as a task of the program that owns the constant.
                    let s = unsafe { env.get() };
                    let (placement, access) = project(ConstRef(s, program, PhantomData), arg, i);
                    check_kept(&access, program);
                    // SAFETY: the arena keeps the recording alive while its jobs exist.
                    let typed = unsafe { recording.get() };
                    if let Err(e) = typed.check_point(first + i as usize, placement, &access) {
                        if let Some(tell) = &on_mismatch {
                            tell(&e.to_string());
                        }
                        std::panic::panic_any(e);
                    }
                    // SAFETY: these accesses equal the recording's at this position (checked
                    // just above), which the recording analysed (and checked distinct): this
                    // job runs where that analysis ordered it.
                    let refs = unsafe { access.get() };
                    task(s, arg, i, refs);
                    then(s, arg, i);
                });
                self.launched += u64::from(points);
                // An index launch is often a whole timestep: let the worker's vertices run
                // after each (every second one, as for single launches, measured 2 % slower
                // on `traced`, 4 graphs of `nearest`).
                self.since_relax = 0;
                crate::relax();
                return;
            }
        }
        let kind = TaskKind::of::<F>();
        let project_kind = TypeId::of::<P>();
        let task = Arc::new((task, then));
        for i in 0..points {
            // SAFETY: the program that owns the constant is this one (checked above), alive.
            let (placement, access) =
                project(ConstRef(unsafe { env.get() }, program, PhantomData), arg, i);
            check_kept(&access, program);
            self.check_placement(placement);
            self.launched += 1;
            let mut declared = std::mem::take(&mut self.declared);
            let f = task.clone();
            declared.clear();
            access.declare(&mut declared);
            let job = move || {
                // SAFETY: as `declared_job`'s: the job runs only as the program issued it,
                // after its analysis; and it runs as a task of the program that owns the
                // constant.
                let (refs, s) = unsafe { (access.get(), env.get()) };
                (f.0)(s, arg, i, refs);
                (f.1)(s, arg, i);
            };
            let index = Index {
                point: i,
                points,
                project: project_kind,
            };
            let extra = Extra {
                typed: None,
                index: Some(index),
            };
            self.issue(kind, placement, declared, job, None, extra);
        }
    }
}

impl Replicated {
    /// Launches `points` tasks at once over the job, as [`Program::index_launch`] does in one
    /// process: point `i` runs `task(&shared, arg, i, refs)` on the rank `project(shared, arg,
    /// i)` names (on whichever of its workers is free, as [`Replicated::launch_on_rank`]),
    /// with the accesses it gives, after the copies its reads need. `shared` is a constant of
    /// this program ([`Replicated::constant`]), made by every rank alike.
    ///
    /// In a job of one this is the program's own index launch, so a traced replay costs the
    /// issuing thread about one launch however many points it has. On several ranks every
    /// rank projects every point on the issuing thread (each keeps the same record of where
    /// the regions' versions are) and launches its own.
    ///
    /// ```
    /// use tactor::implicit::{read, write, Region, Replicated};
    /// use tactor::{job::Job, Runtime};
    ///
    /// let job = Job::launched().unwrap(); // a job of one here; under mpirun, the launcher's
    /// let rt = job.runtime(Runtime::builder().workers(2).pin(false)).unwrap();
    /// let mut p = Replicated::new(&rt.handle(), &job);
    /// let ranks = job.ranks();
    /// let cells: Vec<Region<u64>> = (0..4).map(|i| p.region(0, i)).collect();
    /// let sums: Vec<Region<u64>> = (0..4).map(|_| p.region(0, 0)).collect();
    /// let shared = p.constant((cells.clone(), sums.clone()));
    /// p.index_launch(4, &shared, 10u64, move |c, _, i| {
    ///     let (cells, sums) = c.get();
    ///     let (i, next) = (i as usize, (i as usize + 1) % 4);
    ///     (i % ranks, ((read(&cells[i]), read(&cells[next])), write(&sums[i])))
    /// }, |_, ten, _, ((a, b), s)| *s = ten * (a + b));
    /// assert_eq!(p.with(&sums[3], |s| *s).unwrap(), 30);
    /// ```
    ///
    /// # Panics
    /// As [`Replicated::launch_on_rank`], for any point (in a job of one, a point placed on
    /// another rank fails as its task would).
    #[track_caller]
    pub fn index_launch<S, X, A, P, F>(
        &mut self,
        points: u32,
        shared: &Constant<S>,
        arg: X,
        project: P,
        task: F,
    ) where
        S: Send + Sync + 'static,
        X: Copy + Send + Sync + 'static,
        A: Access,
        P: Fn(ConstRef<'_, S>, X, u32) -> (usize, A) + Send + Sync + 'static,
        F: for<'a> Fn(&S, X, u32, A::Ref<'a>) + Send + Sync + 'static,
    {
        self.program.check_own(&shared.0);
        if self.auto_takes() {
            return self.offer_index(points, shared, arg, project, task);
        }
        if self.job().ranks() == 1 {
            // Nothing to copy; a reduction group of earlier launches closes first, and the
            // points' own reductions are the program's.
            self.close_all();
            let on_this_rank = move |c: ConstRef<'_, S>, x: X, i: u32| {
                let (rank, access) = project(c, x, i);
                assert_eq!(rank, 0, "point {i} placed on rank {rank} of a job of one");
                (Placement::Any, access)
            };
            return self
                .program
                .index_launch(points, shared, arg, on_this_rank, task);
        }
        let sig = Sig::Index {
            task: TypeId::of::<F>(),
            project: TypeId::of::<P>(),
            points,
        };
        let sends = match self.step(sig, std::any::type_name::<F>()) {
            Step::Skip => return,
            Step::Play(None, _) => return,
            Step::Play(Some(run), sends) => (run, sends),
            Step::Full => match self.book_points(points, shared, arg, &project) {
                Booked::Run(run, sends) => (run, sends),
                Booked::Scattered(mine, sends) => {
                    let task = Arc::new(task);
                    for (i, send) in mine.into_iter().zip(sends) {
                        let access = (
                            constant(shared),
                            project(self.constant_ref(shared), arg, i).1,
                        );
                        let f = task.clone();
                        let run = move |(s, refs): (&S, A::Ref<'_>)| f(s, arg, i, refs);
                        (self.program).launch_then(Placement::Any, access, run, sending(send));
                    }
                    return;
                }
                Booked::Conflict => {
                    // Points that touch each other's regions are separate launches, in order.
                    let task = Arc::new(task);
                    for i in 0..points {
                        let (rank, access) = project(self.constant_ref(shared), arg, i);
                        let f = task.clone();
                        self.launch_on_rank(rank, (constant(shared), access), move |(s, refs)| {
                            f(s, arg, i, refs)
                        });
                    }
                    return;
                }
                Booked::None => return,
            },
        };
        self.launch_run(shared, arg, sends, project, task);
    }

    /// The program constant `shared` as a projection sees it.
    pub(super) fn constant_ref<'a, S>(&self, shared: &'a Constant<S>) -> ConstRef<'a, S> {
        ConstRef(&**shared, self.program.id, PhantomData)
    }

    /// Books every point of an index launch in the record every rank keeps (the copies its
    /// reads need first, what its writes send eagerly): this rank's points, and what each
    /// sends as it ends.
    fn book_points<S, X, A, P>(
        &mut self,
        points: u32,
        shared: &Constant<S>,
        arg: X,
        project: &P,
    ) -> Booked
    where
        X: Copy,
        A: Access,
        P: Fn(ConstRef<'_, S>, X, u32) -> (usize, A),
    {
        let (me, ranks) = (self.job().rank(), self.job().ranks());
        // Every point's rank and accesses, for the record every rank keeps.
        let mut declared = std::mem::take(&mut self.declared);
        declared.clear();
        let mut ends = Vec::with_capacity(points as usize);
        let mut conflict = false;
        for i in 0..points {
            let (rank, access) = project(self.constant_ref(shared), arg, i);
            assert!(
                rank < ranks,
                "point {i} placed on rank {rank}, not one of the job's {ranks} ranks"
            );
            let start = declared.len();
            access.declare(&mut declared);
            conflict |= self.conflicts(i, &declared[start..], i == 0);
            ends.push((rank, declared.len()));
        }
        let point = |i: usize| {
            let start = i.checked_sub(1).map_or(0, |j| ends[j].1);
            (ends[i].0, &declared[start..ends[i].1])
        };
        let mine: Vec<u32> = (0..points).filter(|&i| ends[i as usize].0 == me).collect();
        let lo = mine.first().copied().unwrap_or(0);
        let run = (mine.last()).is_some_and(|&hi| hi - lo + 1 == mine.len() as u32);
        if conflict || (!run && !mine.is_empty()) {
            // A script replays runs of points only.
            self.traces.unplayable();
        }
        if conflict {
            self.declared = declared;
            return Booked::Conflict;
        }
        self.touch(&declared);
        self.note_local(run.then_some((lo, mine.len() as u32)));
        for i in 0..points as usize {
            let (rank, d) = point(i);
            self.prepare(d, rank, Placement::Any);
        }
        // What each of this rank's points sends as it ends (its eager copies).
        let mut sends = Vec::with_capacity(mine.len());
        for i in 0..points as usize {
            let (rank, d) = point(i);
            let send = self.eager(d, rank, sends.len() as u32);
            if rank == me {
                sends.push(send);
            }
        }
        for i in 0..points as usize {
            let (rank, d) = point(i);
            self.settle(d, rank, Placement::Any);
        }
        self.declared = declared;
        match (run, mine.is_empty()) {
            (true, _) => Booked::Run((lo, mine.len() as u32), sends),
            (false, true) => Booked::None,
            (false, false) => Booked::Scattered(mine, sends),
        }
    }

    /// Launches this rank's points `run` (the first and how many) of an index launch as one
    /// index launch of this rank's program, each point taking its sends from a table (so that
    /// the launch is the same with them or without, as a trace compares it). A point that
    /// projects to another rank than the one it was booked for fails.
    fn launch_run<S, X, A, P, F>(
        &mut self,
        shared: &Constant<S>,
        arg: X,
        ((lo, n), sends): ((u32, u32), Vec<Option<Sends>>),
        project: P,
        task: F,
    ) where
        S: Send + Sync + 'static,
        X: Copy + Send + Sync + 'static,
        A: Access,
        P: Fn(ConstRef<'_, S>, X, u32) -> (usize, A) + Send + Sync + 'static,
        F: for<'a> Fn(&S, X, u32, A::Ref<'a>) + Send + Sync + 'static,
    {
        let (me, job) = (self.job().rank(), self.job().clone());
        let sends: Arc<[Mutex<Option<Sends>>]> = sends.into_iter().map(Mutex::new).collect();
        self.program.index_launch_then(
            n,
            shared,
            (arg, lo),
            move |c, (x, lo), j| {
                let (rank, access) = project(c, x, lo + j);
                if rank != me {
                    // Only a replay's projection can differ from its booking; the other
                    // ranks wait for what the point sends.
                    let why = format!(
                        "point {} of a replayed index launch placed on rank {rank}, recorded \
                         on rank {me}",
                        lo + j
                    );
                    job.tell_failure(&why);
                    panic!("{why}");
                }
                (Placement::Any, access)
            },
            move |s, (x, lo), j, refs| task(s, x, lo + j, refs),
            move |_, _, j| {
                let slot = sends[j as usize].lock();
                if let Some(send) = slot.unwrap_or_else(PoisonError::into_inner).take() {
                    send();
                }
            },
        );
    }
}

/// What booking an index launch's points found.
enum Booked {
    /// This rank's points are a run of the index space (the first, how many), with their
    /// sends.
    Run((u32, u32), Vec<Option<Sends>>),
    /// This rank's points are scattered, with their sends.
    Scattered(Vec<u32>, Vec<Option<Sends>>),
    /// Points touch each other's regions: nothing was booked.
    Conflict,
    /// This rank has none of the points.
    None,
}
