//! Implicit parallelism: tasks declare the data they use, and the runtime derives the graph.
//!
//! A [`Program`] is the top-level task of a Legion or StarPU program: one thread issues
//! launches in program order. Each launch names the [`Region`]s its task reads, writes,
//! read-writes or reduces into ([`Access`]); the program's dependence analysis turns these
//! into preconditions (read after write, write after read and after write; readers of one
//! version run in parallel; reductions with one operator form a group whose members run in
//! any order, one at a time) and launches the task on the explicit task engine
//! ([`Handle::launch`](crate::Handle::launch)). Results equal those of running the launches
//! one after the other, in program order.
//!
//! **Tracing** ([`Program::trace`], or [`Program::begin_trace`] / [`Program::end_trace`]): a
//! repeated fragment of launches is analysed once, at its first execution, and compiled into
//! a [`Subgraph`](crate::Subgraph) whose external preconditions are the state of the regions
//! it touches on entry and whose postconditions become their state on exit. Every execution
//! (the first included) is one instance of that subgraph: later ones skip the analysis and
//! only check that each launch matches the recording (the same task, placement and
//! accesses); the first difference is an error and the fragment does not run.
//!
//! **Index launches** ([`Program::index_launch`]): many points of one task in one call, each
//! point's placement and accesses given by a projection. A replay matches an index launch
//! once, not point by point, and each point checks its own projection where it runs.
//!
//! **Automatic tracing** ([`Program::auto_trace`]) finds repeated fragments in the stream of
//! launches by itself and traces them, falling back to launch-by-launch analysis at the first
//! launch that breaks the pattern, so it never changes results (`auto.rs` says how it decides
//! and what it costs). [`Replicated::auto_trace`] does the same one level up, on the
//! program's calls (an index launch is one), the same on every rank of a job.
//!
//! ```
//! use tactor::implicit::{read, read_write, write, Program};
//! use tactor::{Placement, Runtime};
//!
//! let rt = Runtime::new(2).unwrap();
//! let mut p = Program::new(&rt);
//! let x = p.region(vec![1.0f64; 4]);
//! let y = p.region(vec![0.0f64; 4]);
//! for _step in 0..10 {
//!     p.trace(1, |p| {
//!         p.launch(Placement::Any, (read(&x), write(&y)), |(x, y)| {
//!             for (y, x) in y.iter_mut().zip(x) { *y = 2.0 * x; }
//!         });
//!         p.launch(Placement::Any, read_write(&x), |x| x.iter_mut().for_each(|v| *v += 1.0));
//!     })
//!     .unwrap();
//! }
//! assert_eq!(p.with(&y, |y| y[0]).unwrap(), 20.0);
//! assert_eq!(p.with(&x, |x| x[0]).unwrap(), 11.0);
//! ```

mod access;
mod analysis;
mod arena;
mod auto;
mod index;
mod region;
mod replicated;
mod trace;
mod tracing;

pub use crate::job::Wire;
pub use access::{
    constant, read, read_write, reduce, write, Access, Const, Inputs, Outputs, Read, ReadList,
    ReadWrite, Reduce, Reducer, Write,
};
pub use auto::MIN_FRAGMENT;
pub use index::ConstRef;
pub use region::{Constant, Partials, Reduction, Region, Sum};
pub use replicated::Replicated;
pub use trace::TraceError;

use crate::event::Event;
use crate::failure::TaskFailed;
use crate::runtime::{Handle, Placement};
use access::{check_distinct, Declared, Mode};
use analysis::Versions;
use region::{Cell, RegionKey};
use std::any::TypeId;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Programs get distinct ids, so a region cannot be used by a program it does not belong to.
/// Never wraps (a program id used twice would let one program's launch reach another's
/// regions): ids are 32 bits so that an access is 16 bytes, and the 2^32-th program panics.
static PROGRAMS: AtomicU32 = AtomicU32::new(0);

/// A program issued from a task on a worker lets the compiled work that arrived for that
/// worker run (`crate::relax`) every this many replayed launches: the instances in flight
/// there (often the previous replay, lock-step with other workers) are held up by at most
/// this many launches, and the program still issues faster than one launch per vertex
/// (never relaxing held up whole chunks; measured: `docs/measurements.md`, "Relaxing while
/// a program replays").
const RELAX_EVERY: usize = 2;

/// Lists of events longer than this are pruned of triggered ones when they double.
const PRUNE_FROM: usize = 64;

/// A task's closure, type-erased, with its references bound.
type Job = Box<dyn FnOnce() + Send>;

/// The top-level program: creates regions, launches tasks in program order, traces repeated
/// fragments, and reads results back. See the [module documentation](self).
pub struct Program {
    handle: Handle,
    /// The runtime's workers (placements are checked against it at every launch).
    workers: usize,
    /// Replayed launches since the last `relax`.
    since_relax: usize,
    /// Launches so far.
    launched: u64,
    id: u32,
    regions: Vec<Versions<Event>>,
    /// Tasks that no region's state keeps track of (no accesses), and trace instances.
    loose: Vec<Event>,
    traces: trace::Traces,
    declared: Vec<Declared>,
    deps: Vec<Event>,
    /// Every region's storage, kept until the program's tasks have finished: accesses point
    /// into it without counting references.
    cells: Vec<Arc<dyn Send + Sync>>,
    auto: Option<Auto>,
    /// Told of a replayed point that differs from its recording, on the worker that found it,
    /// before the point fails (a replicated program tells its job: the other ranks wait for
    /// what the point would have sent).
    on_mismatch: Option<Tell>,
}

/// What a program tells of a failure found on a worker.
type Tell = Arc<dyn Fn(&str) + Send + Sync>;

/// Automatic tracing's state: the detector, and the fragment it opened.
#[derive(Default)]
struct Auto {
    detector: auto::Detector,
    open: Option<(auto::Prediction, usize)>,
    stats: AutoStats,
}

/// What automatic tracing did so far ([`Program::auto_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutoStats {
    /// Fragments that ran traced (recorded or replayed).
    pub fragments: u64,
    /// Of those, fragments recorded (each distinct fragment once).
    pub recorded: u64,
    /// Launches of fragments that stopped matching and were analysed one by one instead.
    pub fell_back: u64,
}

impl Drop for Program {
    /// Waits for the program's tasks. If one failed, others may still be running (a poisoned
    /// event triggers at the first failure), so the regions' storage goes to the runtime,
    /// which frees it once every task has run or been cancelled.
    fn drop(&mut self) {
        if self.cells.is_empty() {
            return;
        }
        if self.fence().wait().is_err() {
            let cells = std::mem::take(&mut self.cells);
            self.handle.keep_until_shutdown(Box::new(cells));
        }
    }
}

impl Program {
    /// A program whose tasks run on `handle`'s runtime.
    pub fn new(handle: &Handle) -> Program {
        Program {
            handle: handle.clone(),
            workers: handle.workers(),
            since_relax: 0,
            launched: 0,
            id: PROGRAMS
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1))
                .expect("fewer than 2^32 programs in one process"),
            regions: Vec::new(),
            loose: Vec::new(),
            traces: trace::Traces::default(),
            declared: Vec::new(),
            deps: Vec::new(),
            cells: Vec::new(),
            auto: None,
            on_mismatch: None,
        }
    }

    /// A new region holding `value`.
    pub fn region<T: Send + Sync + 'static>(&mut self, value: T) -> Region<T> {
        let index = u32::try_from(self.regions.len()).expect("fewer than 2^32 regions");
        self.regions.push(Versions::default());
        let cell = Arc::new(Cell {
            value: std::cell::UnsafeCell::new(value),
            reducing: Mutex::new(()),
        });
        self.cells.push(cell.clone());
        Region {
            key: RegionKey {
                program: self.id,
                index,
            },
            cell,
        }
    }

    /// A constant holding `value`: tasks read it through [`constant`] accesses, which the
    /// analysis does not order (nothing writes it); the program reads it through `Deref`.
    pub fn constant<T: Send + Sync + 'static>(&mut self, value: T) -> Constant<T> {
        Constant(self.region(value))
    }

    /// Launches `task` at `placement` with the references `access` declares, after every
    /// earlier launch its accesses conflict with. Inside a trace the task is recorded or
    /// matched against the recording, and runs when the trace ends.
    ///
    /// # Panics
    /// If `access` names a region of another program, or one region twice unless both are
    /// reads, or holds a [`ReadList`] kept by another program.
    #[track_caller]
    pub fn launch<A, F>(&mut self, placement: Placement, access: A, task: F)
    where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
    {
        self.launch_then(placement, access, task, || {});
    }

    /// [`Program::launch`], the task's job also running `then` after `task`, once the task's
    /// references are gone (what a replicated program's eager copies read the regions with).
    #[track_caller]
    pub(super) fn launch_then<A, F, T>(&mut self, placement: Placement, access: A, task: F, then: T)
    where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
        T: FnOnce() + Send + 'static,
    {
        check_kept(&access, self.id);
        self.check_placement(placement);
        self.launched += 1;
        let manual = self.manual_trace_open();
        if manual {
            // The common case of a replay: compared in place with the recording (which was
            // checked when it was recorded), with no declaration built.
            if let Some((arena, typed, k)) = self.replay_slot_of::<A, F>(placement, false, &access)
            {
                match typed.get::<A>(k) {
                    Some(recorded) => {
                        // Equal to `access` (same regions, same modes: `fits`), and smaller
                        // to hand to the worker.
                        drop(access);
                        // SAFETY: the arena keeps the recording's accesses alive while its
                        // closures exist (`Arena::keep`), nothing changes them
                        // (`trace::Typed`), and the recording this launch matched was
                        // analysed.
                        let job = unsafe { pointing(NonNull::from(recorded), task) };
                        arena.push(followed(job, then));
                    }
                    None => arena.push(move || {
                        // SAFETY: as below; the recording this launch matched was analysed.
                        let refs = unsafe { access.get() };
                        task(refs);
                        then();
                    }),
                }
                self.replayed();
                return;
            }
        }
        let mut declared = std::mem::take(&mut self.declared);
        let kind = trace::TaskKind::of::<F>();
        if manual && self.traces.is_recording() {
            // The accesses are kept with the recording, for replays to point at.
            declared.clear();
            access.declare(&mut declared);
            let typed = Box::new(access);
            // SAFETY: the recording keeps the box (its contents never move) as long as its
            // arena's closures exist (`Arena::keep`), nothing changes it, and its jobs run
            // after its analysis.
            let job = followed(unsafe { pointing(NonNull::from(&*typed), task) }, then);
            let extra = trace::Extra {
                typed: Some(typed),
                index: None,
            };
            self.issue(kind, placement, declared, job, None, extra);
        } else {
            let job = followed(declared_job(&mut declared, access, task), then);
            self.issue(
                kind,
                placement,
                declared,
                job,
                None,
                trace::Extra::default(),
            );
        }
    }

    /// Launches `task` like [`Program::launch`], and also after `after`: an event from outside
    /// the program (a message from another rank, a user event). This is how data enter a
    /// program from elsewhere: the task writes them into regions once they exist, and the
    /// program's later launches are ordered after it like after any writer. A poisoned
    /// `after` poisons the task and what depends on it.
    ///
    /// Inside a trace the launch is recorded as waiting for "an outside event", and each
    /// execution supplies its own (a replay that launches it without one, or the other way
    /// round, differs from the recording). Automatic tracing takes it like any launch (one
    /// after an event never matches one without): a fragment that holds it waits, at each
    /// execution, for the event that execution's launch gave.
    ///
    /// ```
    /// use tactor::implicit::{read, write, Program};
    /// use tactor::{Placement, Runtime, UserEvent};
    ///
    /// let rt = Runtime::new(2).unwrap();
    /// let mut p = Program::new(&rt);
    /// let inbox = p.region(0u64);
    /// let twice = p.region(0u64);
    /// let arrived = UserEvent::new();
    /// p.launch_after(&arrived.event(), Placement::Any, write(&inbox), |v| *v = 21);
    /// p.launch(Placement::Any, (read(&inbox), write(&twice)), |(a, b)| *b = 2 * a);
    /// arrived.trigger().unwrap();
    /// assert_eq!(p.with(&twice, |v| *v).unwrap(), 42);
    /// ```
    ///
    /// # Panics
    /// As [`Program::launch`].
    #[track_caller]
    pub fn launch_after<A, F>(&mut self, after: &Event, placement: Placement, access: A, task: F)
    where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
    {
        check_kept(&access, self.id);
        self.launched += 1;
        let mut declared = std::mem::take(&mut self.declared);
        let job = declared_job(&mut declared, access, task);
        let kind = trace::TaskKind::of::<F>();
        self.issue(
            kind,
            placement,
            declared,
            job,
            Some(after),
            trace::Extra::default(),
        );
    }

    /// [`Program::launch_after`] with its outside condition opened by `attach`: a trace's
    /// replay hands it the inlet of the instance that runs the launch (what lands from
    /// elsewhere opens it directly), anything else an inlet that stands for an event.
    #[track_caller]
    pub(crate) fn launch_attached<A, F>(
        &mut self,
        attach: Arc<dyn trace::Attach>,
        placement: Placement,
        access: A,
        task: F,
    ) where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
    {
        check_kept(&access, self.id);
        if self.manual_trace_open() {
            // Compared in place with the recording, as `launch_then` does.
            if let Some((arena, _, _)) = self.replay_slot_of::<A, F>(placement, true, &access) {
                arena.push(move || {
                    // SAFETY: the recording this launch matched was analysed, and the replay
                    // runs its job where that analysis ordered it.
                    let refs = unsafe { access.get() };
                    task(refs);
                });
                self.traces.push_outside(trace::Outside::Inlet(attach));
                self.launched += 1;
                self.replayed();
                return;
            }
        }
        self.launch_after(&attach.event(), placement, access, task);
    }

    /// The open replay's arena if a launch of `F` at `placement` (after an outside condition
    /// or not) with accesses `access` is its next one, compared in place with the recording.
    fn replay_slot_of<A: Access, F: 'static>(
        &mut self,
        placement: Placement,
        outside: bool,
        access: &A,
    ) -> Option<(&mut arena::Arena, &trace::Typed, usize)> {
        let fits = |recorded: &[Declared]| {
            let mut rest = recorded.iter();
            access.matches(&mut rest) && rest.as_slice().is_empty()
        };
        self.traces
            .replay_slot(TypeId::of::<F>(), placement, outside, fits)
    }

    /// After a launch a replay took: lets the worker's work run every `RELAX_EVERY` of them
    /// (a replayed launch costs little).
    fn replayed(&mut self) {
        self.since_relax += 1;
        if self.since_relax >= RELAX_EVERY {
            self.since_relax = 0;
            crate::relax();
        }
    }

    /// Waits until the current contents of `region` are final (every launched task that
    /// writes or reduces into it has run), then calls `f` on them.
    ///
    /// # Panics
    /// Inside a trace: the fragment has not run yet.
    pub fn with<T, R>(
        &mut self,
        region: &Region<T>,
        f: impl FnOnce(&T) -> R,
    ) -> Result<R, TaskFailed> {
        self.check_own(region);
        self.flush_auto();
        assert!(!self.traces.is_open(), "Program::with inside a trace");
        let state = &self.regions[region.key.index as usize];
        merged(&state.producers).wait()?;
        // SAFETY: every producer of the current version has run, nothing launched later can
        // run (launches need `&mut self`, which this call holds), and readers running now
        // only read.
        Ok(f(unsafe { &*region.cell.value.get() }))
    }

    /// Waits until every launched task that uses `region` has run, then lets `f` change it;
    /// later launches see the change.
    ///
    /// # Panics
    /// Inside a trace.
    pub fn with_mut<T, R>(
        &mut self,
        region: &Region<T>,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<R, TaskFailed> {
        self.check_own(region);
        self.flush_auto();
        assert!(!self.traces.is_open(), "Program::with_mut inside a trace");
        let state = &self.regions[region.key.index as usize];
        merged(&state.all().cloned().collect::<Vec<_>>()).wait()?;
        // SAFETY: every task that used the region has run and no later one can start while
        // this call holds `&mut self`.
        Ok(f(unsafe { &mut *region.cell.value.get() }))
    }

    /// An event that triggers once every task launched so far has run (poisoned if one
    /// failed). Launches still buffered in an open trace (one's own, or a fragment automatic
    /// tracing holds) are not included until it ends.
    pub fn fence(&mut self) -> Event {
        let mut all: Vec<Event> = self.loose.drain(..).collect();
        for r in &self.regions {
            all.extend(r.all().cloned());
        }
        let fence = merged(&all);
        self.loose.push(fence.clone());
        fence
    }

    /// Waits for every task launched so far (a fragment automatic tracing holds open is
    /// closed first).
    pub fn finish(&mut self) -> Result<(), TaskFailed> {
        self.flush_auto();
        self.fence().wait()
    }

    /// Closes a fragment that automatic tracing holds open (running it, or analysing its
    /// launches), so that everything launched so far is issued to the runtime and
    /// [`fence`](Self::fence) covers it.
    pub fn flush(&mut self) {
        self.flush_auto();
    }

    /// How many launches the program has issued to the runtime, counted from its first: all
    /// launches but those an open trace holds (a manual trace until
    /// [`end_trace`](Self::end_trace), a fragment automatic tracing has open until it
    /// completes or breaks). A [`fence`](Self::fence) covers exactly these.
    ///
    /// A program that waits for its own earlier tasks while other programs wait for it (ranks
    /// of a job exchanging data through [`launch_after`](Self::launch_after)) must not wait on
    /// a fence taken after launches that are still held: another program may need them to
    /// reach its own fence.
    ///
    /// ```
    /// use tactor::implicit::{read_write, Program};
    /// use tactor::{Placement, Runtime};
    ///
    /// let rt = Runtime::new(1).unwrap();
    /// let mut p = Program::new(&rt);
    /// let x = p.region(0u64);
    /// p.launch(Placement::Any, read_write(&x), |x| *x += 1);
    /// p.begin_trace(1).unwrap();
    /// p.launch(Placement::Any, read_write(&x), |x| *x += 1);
    /// assert_eq!((p.launched(), p.issued()), (2, 1));
    /// p.end_trace().unwrap();
    /// assert_eq!(p.issued(), 2);
    /// ```
    pub fn issued(&self) -> u64 {
        self.launched - self.traces.held() as u64
    }

    /// How many launches the program has taken, issued or held ([`issued`](Self::issued)).
    pub fn launched(&self) -> u64 {
        self.launched
    }

    /// What automatic tracing did so far.
    pub fn auto_stats(&self) -> AutoStats {
        self.auto.as_ref().map(|a| a.stats).unwrap_or_default()
    }

    fn record(&mut self, declared: &[Declared], done: Event) {
        if declared.is_empty() {
            self.push_loose(done);
            return;
        }
        for d in declared {
            let state = &mut self.regions[d.region.index as usize];
            state.record(d.mode, done.clone());
            let n = state.readers.len();
            if d.mode == Mode::Read && n >= PRUNE_FROM && n.is_power_of_two() {
                state.prune_readers(Event::has_triggered);
            }
        }
    }

    fn push_loose(&mut self, e: Event) {
        self.loose.push(e);
        let n = self.loose.len();
        if n >= PRUNE_FROM && n.is_power_of_two() {
            self.loose.retain(|e| !e.has_triggered());
        }
    }

    /// Issues a launch whose job is made and whose accesses are `declared` (this program's
    /// buffer, handed back): into the open manual trace (recorded, or reported as a
    /// difference), to automatic tracing, or analysed; then lets the worker's work run
    /// (analysed launches cost more than replays: relax after each, see `RELAX_EVERY`).
    #[track_caller]
    fn issue(
        &mut self,
        kind: trace::TaskKind,
        placement: Placement,
        declared: Vec<Declared>,
        job: impl FnOnce() + Send + 'static,
        after: Option<&Event>,
        extra: trace::Extra,
    ) {
        if self.manual_trace_open() {
            // A launch that matches its recording was checked when it was recorded.
            let program = self.id;
            let check = |d: &[Declared]| check(program, d);
            self.traces
                .launch(kind, placement, &declared, job, check, after, extra);
        } else if self.auto.is_some() {
            self.launch_auto(kind, placement, &declared, job, after);
        } else {
            check(self.id, &declared);
            self.analyse_after(placement, &declared, job, after);
        }
        self.declared = declared;
        crate::relax();
    }

    /// Refuses a placement on a worker the runtime does not have.
    #[track_caller]
    fn check_placement(&self, placement: Placement) {
        if let Placement::Worker(w) = placement {
            assert!(
                w < self.workers,
                "launch placed on worker {w}, but the runtime has {} workers",
                self.workers
            );
        }
    }

    #[track_caller]
    fn check_own<T>(&self, region: &Region<T>) {
        assert_eq!(
            region.key.program, self.id,
            "region {} belongs to another program",
            region.key.index
        );
    }
}

/// Refuses accesses to another program's regions, and a region declared twice unless both
/// are reads.
#[track_caller]
fn check(program: u32, declared: &[Declared]) {
    if let Some(d) = declared.iter().find(|d| d.region.program != program) {
        panic!(
            "region {} belongs to another program than the one launching",
            d.region.index
        );
    }
    if let Err((r, a, b)) = check_distinct(declared) {
        panic!("a launch declares region {r} twice ({a} and {b}); only reads may repeat");
    }
}

/// The hash automatic tracing compares launches by: what a trace compares.
fn signature(kind: TypeId, placement: Placement, declared: &[Declared], outside: bool) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = auto::Mixer::default();
    kind.hash(&mut h);
    h.write_u64(u64::from(outside));
    match placement {
        Placement::Any => h.write_u64(u64::MAX),
        Placement::Worker(w) => h.write_u64(w as u64),
    }
    for d in declared {
        h.write_u64(u64::from(d.region.index) << 8 | d.mode.code());
        if let Mode::Reduce(op) = d.mode {
            op.id.hash(&mut h);
        }
    }
    h.finish()
}

/// One event for all of `events`.
fn merged(events: &[Event]) -> Event {
    match events {
        [] => Event::triggered(),
        [one] => one.clone(),
        many => Event::merge(many),
    }
}

/// A pointer to accesses a recording keeps, handed to the worker that runs the task.
struct Shared<A>(NonNull<A>);

// SAFETY: the pointee is reached only as `&A` for `Access::get`, which reads region keys and
// cell pointers and nothing else (see `trace::Typed`), and the accesses are `Send`.
unsafe impl<A: Access> Send for Shared<A> {}

impl<A> Clone for Shared<A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A> Copy for Shared<A> {}

/// A job running `task` on the accesses at `at`: the same closure for a recording and its
/// replays.
///
/// # Safety
/// `at` stays valid and unchanged until the job has run or been dropped, and the job runs
/// only as the program issued it (see [`declared_job`]).
unsafe fn pointing<A, F>(at: NonNull<A>, task: F) -> impl FnOnce() + Send
where
    A: Access,
    F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
{
    let at = Shared(at);
    move || {
        let at = at;
        // SAFETY: by this function's contract, and `Access::get`'s as in `declared_job`.
        let refs = unsafe { at.0.as_ref().get() };
        task(refs)
    }
}

/// Refuses an access that points into a list of reads kept by another program, or by one
/// that is gone ([`ReadList`]): before anything reads the list.
#[track_caller]
fn check_kept<A: Access>(access: &A, program: u32) {
    assert!(
        access.kept_by(program),
        "a list of reads kept by another program than the one launching"
    );
}

/// `job`, then `then`: what runs after a task once its references are gone
/// ([`Program::launch_then`]).
fn followed(job: impl FnOnce() + Send, then: impl FnOnce() + Send) -> impl FnOnce() + Send {
    move || {
        job();
        then();
    }
}

/// Fills `declared` with what `access` declares (cleared first) and makes the launch's job:
/// the task called with the references the accesses give.
fn declared_job<A, F>(declared: &mut Vec<Declared>, access: A, task: F) -> impl FnOnce() + Send
where
    A: Access,
    F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
{
    declared.clear();
    access.declare(declared);
    move || {
        // SAFETY: the job runs only as the program issued it: after the analysis (or the
        // recording it replays) ordered it after every earlier conflicting access and before
        // every later one, with the accesses checked distinct (`check`) before it was issued.
        let refs = unsafe { access.get() };
        task(refs)
    }
}
