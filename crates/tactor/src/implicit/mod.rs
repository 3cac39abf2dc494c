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
mod region;
mod trace;

pub use access::{
    constant, read, read_write, reduce, write, Access, Const, Inputs, Read, ReadWrite, Reduce,
    Reducer, Write,
};
pub use region::{Constant, Reduction, Region, Sum};
pub use trace::TraceError;

use crate::event::Event;
use crate::failure::TaskFailed;
use crate::runtime::{Handle, Placement};
use access::{check_distinct, Declared, Mode};
use analysis::Versions;
use region::{Cell, RegionKey};
use std::any::TypeId;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Programs get distinct ids, so a region cannot be used by a program it does not belong to.
static PROGRAMS: AtomicU64 = AtomicU64::new(0);

/// Lists of events longer than this are pruned of triggered ones when they double.
const PRUNE_FROM: usize = 64;

/// A task's closure, type-erased, with its references bound.
type Job = Box<dyn FnOnce() + Send>;

/// The top-level program: creates regions, launches tasks in program order, traces repeated
/// fragments, and reads results back. See the [module documentation](self).
pub struct Program {
    handle: Handle,
    id: u64,
    regions: Vec<Versions<Event>>,
    /// Tasks that no region's state keeps track of (no accesses), and trace instances.
    loose: Vec<Event>,
    traces: trace::Traces,
    declared: Vec<Declared>,
    deps: Vec<Event>,
    /// Every region's storage, kept until the program's tasks have finished: accesses point
    /// into it without counting references.
    cells: Vec<Arc<dyn Send + Sync>>,
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
            id: PROGRAMS.fetch_add(1, Ordering::Relaxed),
            regions: Vec::new(),
            loose: Vec::new(),
            traces: trace::Traces::default(),
            declared: Vec::new(),
            deps: Vec::new(),
            cells: Vec::new(),
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
    /// reads.
    #[track_caller]
    pub fn launch<A, F>(&mut self, placement: Placement, access: A, task: F)
    where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
    {
        let mut declared = std::mem::take(&mut self.declared);
        declared.clear();
        access.declare(&mut declared);
        let job = move || {
            // SAFETY: the analysis (or the trace recorded from it) ordered this task after
            // every earlier conflicting access and before every later one, and the accesses
            // are distinct (`check`).
            let refs = unsafe { access.get() };
            task(refs)
        };
        if self.traces.is_open() {
            let kind = trace::TaskKind {
                id: TypeId::of::<F>(),
                name: std::any::type_name::<F>(),
                at: std::panic::Location::caller(),
            };
            // A launch that matches its recording was checked when it was recorded.
            let program = self.id;
            let check = |d: &[Declared]| check(program, d);
            self.traces
                .launch(kind, placement, &declared, Box::new(job), check);
        } else {
            check(self.id, &declared);
            let mut deps = std::mem::take(&mut self.deps);
            deps.clear();
            for d in &declared {
                self.regions[d.region.index as usize].dependences(d.mode, &mut deps);
            }
            let done = self.handle.launch(placement, &deps, job);
            self.deps = deps;
            self.record(&declared, done);
        }
        self.declared = declared;
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
        assert!(!self.traces.is_open(), "Program::with_mut inside a trace");
        let state = &self.regions[region.key.index as usize];
        merged(&state.all().cloned().collect::<Vec<_>>()).wait()?;
        // SAFETY: every task that used the region has run and no later one can start while
        // this call holds `&mut self`.
        Ok(f(unsafe { &mut *region.cell.value.get() }))
    }

    /// An event that triggers once every task launched so far has run (poisoned if one
    /// failed).
    pub fn fence(&mut self) -> Event {
        let mut all: Vec<Event> = self.loose.drain(..).collect();
        for r in &self.regions {
            all.extend(r.all().cloned());
        }
        let fence = merged(&all);
        self.loose.push(fence.clone());
        fence
    }

    /// Waits for every task launched so far.
    pub fn finish(&mut self) -> Result<(), TaskFailed> {
        self.fence().wait()
    }

    /// Begins trace `id`: the launches until [`end_trace`](Self::end_trace) are recorded, or
    /// matched against the recording if `id` was traced before.
    pub fn begin_trace(&mut self, id: u64) -> Result<(), TraceError> {
        self.traces.begin(id)
    }

    /// Ends the open trace and runs its fragment: compiled at its first execution, replayed
    /// later. A replay that differs from the recording is an error, and none of its tasks
    /// run.
    pub fn end_trace(&mut self) -> Result<(), TraceError> {
        let handle = self.handle.clone();
        let instance = self.traces.end(&handle, &mut self.regions)?;
        self.push_loose(instance);
        Ok(())
    }

    /// Runs `body` as trace `id` ([`begin_trace`](Self::begin_trace), the body,
    /// [`end_trace`](Self::end_trace)).
    pub fn trace<R>(
        &mut self,
        id: u64,
        body: impl FnOnce(&mut Program) -> R,
    ) -> Result<R, TraceError> {
        self.begin_trace(id)?;
        let r = body(self);
        self.end_trace()?;
        Ok(r)
    }

    /// How many traces have been recorded.
    pub fn recorded_traces(&self) -> usize {
        self.traces.recorded()
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
fn check(program: u64, declared: &[Declared]) {
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

/// One event for all of `events`.
fn merged(events: &[Event]) -> Event {
    match events {
        [] => Event::triggered(),
        [one] => one.clone(),
        many => Event::merge(many),
    }
}
