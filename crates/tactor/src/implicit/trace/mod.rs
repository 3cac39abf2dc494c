//! Traces: a fragment of launches analysed once and replayed as instances of a compiled
//! subgraph.
//!
//! Recording runs the dependence analysis on symbols: a dependence is a task of the trace, or
//! the state a region had on entry (its current version, or everything that used it). Edges
//! between tasks of the trace become the subgraph's edges; entry states become its external
//! preconditions, computed afresh from the regions at every execution; the regions' states on
//! exit (tasks of the trace, or entry states passed through) become its postconditions. An
//! open reduction group is closed at both ends of a trace, so what a trace does never depends
//! on whether the launches before it reduced with the same operator: conservative, and always
//! the same graph.
//!
//! Here: what a launch is compared by, and the record/replay state of a program's traces;
//! `compile.rs` turns a recording into a subgraph (launches fused into vertices), `replay.rs`
//! runs one instance of it with a replay's jobs.

use super::access::{Declared, Mode as AccessMode};
use super::analysis::Versions;
use super::arena::{Arena, Place, ONCE};
use super::{merged, Job};
use crate::event::Event;
use crate::runtime::{Handle, Placement};
use crate::subgraph::{Inlet, PostId, PreId, Subgraph, SubgraphBuilder, SubgraphError};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::any::{Any, TypeId};
use std::fmt;
use std::panic::Location;
use std::sync::Arc;

mod compile;
mod error;
mod replay;

pub use error::TraceError;

use compile::compile;
use replay::run;

/// A launch of an abandoned replay: its placement, accesses, job and outside event.
pub(crate) type Abandoned = (Placement, Vec<Declared>, Job, Option<Event>);

/// Where a launch's outside condition is opened from, given the inlet of the instance that
/// runs it: a replay's copy from another rank opens its inlet as it lands, with no event and
/// no subscription between them.
pub(crate) trait Attach: Send + Sync {
    /// Takes the inlet that opens the launch's outside condition.
    fn attach(&self, inlet: Inlet);
    /// The condition as an event instead: for a launch that no replay takes.
    fn event(self: Arc<Self>) -> Event;
}

/// The outside condition of one launch of an execution: an event, or an inlet's taker.
pub(crate) enum Outside {
    Event(Event),
    Inlet(Arc<dyn Attach>),
}

impl Outside {
    /// The condition as an event (an inlet standing in for the instance's).
    fn into_event(self) -> Event {
        match self {
            Outside::Event(e) => e,
            Outside::Inlet(a) => a.event(),
        }
    }
}

/// A dependence while recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Sym {
    /// Task `k` of the trace.
    Task(u32),
    /// The producers of region `r`'s version on entry.
    Version(u32),
    /// What had to finish on entry before region `r` could be replaced (its readers, or its
    /// producers if none).
    All(u32),
    /// The `n`-th outside event of the fragment ([`super::Program::launch_after`]): each
    /// execution supplies its own.
    Outside(u32),
}

/// Which task a launch runs: its closure's type (compared), name and the launch site (shown).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskKind {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
    pub(crate) at: &'static Location<'static>,
}

impl TaskKind {
    /// The kind of a launch of closure type `F`, launched where the caller was called from.
    #[track_caller]
    pub(crate) fn of<F: 'static>() -> TaskKind {
        TaskKind {
            id: TypeId::of::<F>(),
            name: std::any::type_name::<F>(),
            at: Location::caller(),
        }
    }
}

/// A launch's place in an index launch ([`super::Program::index_launch`]): its point, the
/// launch's number of points, and its projection's type (compared).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Index {
    pub(crate) point: u32,
    pub(crate) points: u32,
    pub(crate) project: TypeId,
}

/// What a launch brings to a trace beside its signature: its accesses, when its job points at
/// them (recorded with it; dropped with it otherwise), and its place in an index launch.
#[derive(Default)]
pub(crate) struct Extra {
    pub(crate) typed: Option<Box<dyn Any + Send>>,
    pub(crate) index: Option<Index>,
}

/// What a launch of a trace is compared by.
#[derive(Clone, Debug)]
struct Sig {
    kind: TaskKind,
    placement: Placement,
    accesses: Vec<Declared>,
    /// Launched after an outside event.
    outside: bool,
    /// A point of an index launch.
    index: Option<Index>,
}

impl fmt::Display for Sig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "task `{}` (launched at {}) on {:?}",
            self.kind.name, self.kind.at, self.placement
        )?;
        for (i, d) in self.accesses.iter().enumerate() {
            let sep = if i == 0 { " with" } else { "," };
            write!(f, "{sep} {} region {}", d.mode, d.region.index)?;
        }
        if self.accesses.is_empty() {
            write!(f, " with no accesses")?;
        }
        if self.outside {
            write!(f, ", after an outside event")?;
        }
        if let Some(i) = self.index {
            write!(f, ", point {} of an index launch of {}", i.point, i.points)?;
        }
        Ok(())
    }
}

impl PartialEq for Sig {
    fn eq(&self, other: &Sig) -> bool {
        self.kind.id == other.kind.id
            && self.placement == other.placement
            && self.accesses == other.accesses
            && self.outside == other.outside
            && self.index == other.index
    }
}

/// A region's state on exit, in terms of one instance's events.
#[derive(Clone, Copy, Debug)]
enum Out {
    Post(PostId),
    Entry(Sym),
}

/// What a replay compares a launch with, packed: the closure's type, the placement, and
/// where its accesses are in [`Recorded::accesses`].
struct Step {
    kind: TypeId,
    placement: Placement,
    accesses: (u32, u32),
    outside: bool,
    index: Option<Index>,
}

/// A recorded trace.
struct Recorded {
    graph: Subgraph<Arena>,
    /// The external preconditions, in the subgraph's order: `Version` or `All` symbols, then
    /// the outside conditions in launch order (the instance's inlets).
    pres: Vec<Sym>,
    /// Each touched region's producers and readers on exit.
    exits: Vec<(u32, Vec<Out>, Vec<Out>)>,
    /// The size of the recorded execution's closures, to size each replay's arena.
    units: usize,
    /// Where each launch's ran-flag goes in the recording's arena
    /// ([`super::arena::slots_for`]).
    slots: Arc<[u32]>,
    /// The same for a replay's arena, whose entries are launches or index launches; and
    /// where each launch is among them, if the fragment has index launches.
    replay_slots: Arc<[u32]>,
    places: Option<Arc<[Place]>>,
    /// A replay's arena entries.
    entries: usize,
    /// What a replay compares with, and what its closures point at.
    typed: Arc<Typed>,
}

/// Each recorded launch's accesses (its `A: Access`), where [`super::Program::launch`]
/// recorded them: a replay's launch declares the same regions in the same modes (compared),
/// and a region's key names one cell for the program's whole life, so the recorded value is
/// equal to the replay's. The replay's closure then holds a pointer here instead of a copy of
/// the accesses: a quarter of the bytes the issuing thread writes and the worker reads (on
/// `traced`, 4 graphs of `nearest`, those lines' transfers were most of the issuing cost).
///
/// It also holds what each launch is compared by: the driver compares a replay's launches
/// with it, and the workers the points of index launches (see [`Typed::check_point`]).
pub(crate) struct Typed {
    boxes: Vec<Option<Box<dyn Any + Send>>>,
    id: u64,
    sigs: Vec<Sig>,
    /// `sigs` packed for replays: one small entry per launch, the accesses back to back.
    steps: Vec<Step>,
    accesses: Vec<Declared>,
}

// SAFETY: nothing in it changes after the recording ends; tasks reach the boxes only as `&A`
// to call `Access::get(&self)`, which in every (sealed) implementation reads the region keys
// and cell pointers and nothing else, so concurrent shared use is plain reading; the rest is
// plain data.
unsafe impl Sync for Typed {}

impl Typed {
    /// The accesses recorded at launch `k`, if they were recorded with type `A`.
    pub(crate) fn get<A: 'static>(&self, k: usize) -> Option<&A> {
        self.boxes.get(k)?.as_ref()?.downcast_ref::<A>()
    }

    /// Whether launch `k` of a replay, a point of an index launch that the driver matched
    /// by its task, projection and number of points, projected to what the recording has
    /// there: `Err` names the difference (the point's task then does not run).
    pub(crate) fn check_point<A: super::Access>(
        &self,
        k: usize,
        placement: Placement,
        access: &A,
    ) -> Result<(), String> {
        let s = &self.steps[k];
        let recorded = &self.accesses[s.accesses.0 as usize..s.accesses.1 as usize];
        let mut rest = recorded.iter();
        if s.placement == placement && access.matches(&mut rest) && rest.as_slice().is_empty() {
            return Ok(());
        }
        let sig = &self.sigs[k];
        let mut accesses = Vec::new();
        access.declare(&mut accesses);
        let got = Sig {
            placement,
            accesses,
            ..sig.clone()
        };
        Err(TraceError::PointMismatch {
            id: self.id,
            launch: k,
            recorded: sig.to_string(),
            got: got.to_string(),
        }
        .to_string())
    }
}

/// A trace being recorded.
struct Recording {
    sigs: Vec<Sig>,
    states: HashMap<u32, Versions<Sym>>,
    deps: Vec<Vec<Sym>>,
    workers: Vec<usize>,
    jobs: Arena,
    /// Each launch's accesses, when its job points at them ([`Typed`]).
    typed: Vec<Option<Box<dyn Any + Send>>>,
    /// This execution's outside events, in launch order.
    outside: Vec<Event>,
    /// The id its replays' errors name (a replicated program's own, not the rank's trace).
    shown: u64,
}

/// A trace being replayed.
struct Replaying {
    recorded: Arc<Recorded>,
    /// Launches matched so far (an index launch counts its points).
    launches: usize,
    jobs: Arena,
    error: Option<TraceError>,
    outside: Vec<Outside>,
}

enum Mode {
    Recording(Recording),
    Replaying(Replaying),
}

/// A program's traces: those recorded, and the one open.
#[derive(Default)]
pub(crate) struct Traces {
    recorded: HashMap<u64, Arc<Recorded>>,
    open: Option<(u64, Mode)>,
    next_any: usize,
    workers: usize,
    /// Spare arena buffers for replays.
    pool: Arc<super::arena::Pool>,
}

impl Traces {
    pub(crate) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    pub(crate) fn recorded(&self) -> usize {
        self.recorded.len()
    }

    /// Launches the open trace holds (none when no trace is open, or a replay was refused).
    pub(crate) fn held(&self) -> usize {
        match &self.open {
            None => 0,
            Some((_, Mode::Recording(r))) => r.sigs.len(),
            Some((_, Mode::Replaying(r))) => r.launches,
        }
    }

    /// Whether the open trace is being recorded.
    pub(crate) fn is_recording(&self) -> bool {
        matches!(self.open, Some((_, Mode::Recording(_))))
    }

    /// Takes this launch into the open trace if it fits: always when recording, when it is
    /// the next one the recording has when replaying. A launch that does not fit is handed
    /// back and the replay is left as it was (automatic tracing then falls back).
    pub(crate) fn offer<F: FnOnce() + Send + 'static>(
        &mut self,
        kind: TaskKind,
        placement: Placement,
        declared: &[Declared],
        job: F,
        check: impl FnOnce(&[Declared]),
        after: Option<&Event>,
    ) -> Result<(), F> {
        if matches!(self.open, Some((_, Mode::Replaying(_)))) {
            return self.replay(kind, placement, declared, job, after);
        }
        self.launch(
            kind,
            placement,
            declared,
            job,
            check,
            after,
            Extra::default(),
        );
        Ok(())
    }

    /// Takes the launch into the open replay if it is the recording's next one (with this
    /// execution's outside event, if any); hands the job back otherwise.
    fn replay<F: FnOnce() + Send + 'static>(
        &mut self,
        kind: TaskKind,
        placement: Placement,
        declared: &[Declared],
        job: F,
        after: Option<&Event>,
    ) -> Result<(), F> {
        let outside = after.is_some();
        let Some((arena, ..)) =
            self.replay_slot(kind.id, placement, outside, |rec| rec == declared)
        else {
            return Err(job);
        };
        arena.push(job);
        if let Some(e) = after {
            self.push_outside(Outside::Event(e.clone()));
        }
        Ok(())
    }

    /// The outside condition of the launch the open replay just took (after
    /// [`replay_slot`](Self::replay_slot) for a launch after an outside condition).
    pub(crate) fn push_outside(&mut self, outside: Outside) {
        if let Some((_, Mode::Replaying(r))) = &mut self.open {
            r.outside.push(outside);
        }
    }

    /// The arena of the open replay if `kind` at `placement` (after an outside event or not)
    /// is its next launch and `fits` holds for the recorded accesses: the caller then pushes
    /// the launch's job into it, which may point at the recorded accesses (the second part;
    /// the launch's are at index `k`, the third).
    /// `None` in every other case (recording, no trace, an error already, a difference),
    /// which the caller hands to [`launch`](Self::launch) to be recorded or reported.
    pub(crate) fn replay_slot(
        &mut self,
        kind: TypeId,
        placement: Placement,
        outside: bool,
        fits: impl FnOnce(&[Declared]) -> bool,
    ) -> Option<(&mut Arena, &Typed, usize)> {
        self.take_next(|rec, s| {
            let accesses = &rec.accesses[s.accesses.0 as usize..s.accesses.1 as usize];
            let ok = s.kind == kind
                && s.placement == placement
                && s.outside == outside
                && s.index.is_none();
            (ok && fits(accesses)).then_some(1)
        })
    }

    /// The arena of the open replay if an index launch of `points` points of task `kind`
    /// with projection `project` is its next launch: the caller pushes one shared job for
    /// its points, each of which checks its own projection where it runs
    /// ([`Typed::check_point`]). Also the recording's [`Typed`] and the first point's launch
    /// number. `None` as for [`replay_slot`](Self::replay_slot).
    pub(crate) fn replay_index(
        &mut self,
        kind: TypeId,
        points: u32,
        project: TypeId,
    ) -> Option<(&mut Arena, &Typed, usize)> {
        let first = Index {
            point: 0,
            points,
            project,
        };
        self.take_next(|_, s| (s.kind == kind && s.index == Some(first)).then_some(points as usize))
    }

    /// The open replay's next launches, if `takes` (given the recording and its next step)
    /// says how many of them the caller's launch is: its arena, the recording and the first
    /// launch's number. `None` when no replay is open, it already failed, or `takes` says no.
    fn take_next(
        &mut self,
        takes: impl FnOnce(&Typed, &Step) -> Option<usize>,
    ) -> Option<(&mut Arena, &Typed, usize)> {
        let Some((_, Mode::Replaying(r))) = &mut self.open else {
            return None;
        };
        let rec = &*r.recorded.typed;
        let k = r.launches;
        let s = rec.steps.get(k)?;
        if r.error.is_some() {
            return None;
        }
        r.launches += takes(rec, s)?;
        Some((&mut r.jobs, rec, k))
    }

    /// Closes the open replay without running it, handing back its launches (each with its
    /// placement and accesses, as recorded and matched, and the outside event it waits for)
    /// for the caller to analyse.
    pub(crate) fn abandon(&mut self) -> Vec<Abandoned> {
        match self.open.take() {
            Some((_, Mode::Replaying(r))) => {
                let sigs = &r.recorded.typed.sigs;
                let mut outside = r.outside.into_iter();
                r.jobs
                    .into_jobs()
                    .into_iter()
                    .zip(sigs)
                    .map(|(job, s)| {
                        let after = s.outside.then(|| {
                            (outside.next())
                                .expect("every matched launch after an event gave one")
                                .into_event()
                        });
                        (s.placement, s.accesses.clone(), job, after)
                    })
                    .collect()
            }
            Some(open) => {
                self.open = Some(open);
                panic!("abandon is for replays");
            }
            None => Vec::new(),
        }
    }

    /// Closes the open trace without running or keeping anything of it.
    pub(crate) fn discard(&mut self) {
        self.open = None;
    }

    /// Drops the recording of `id`.
    pub(crate) fn forget(&mut self, id: u64) {
        self.recorded.remove(&id);
    }

    pub(crate) fn begin(&mut self, id: u64) -> Result<(), TraceError> {
        self.begin_as(id, id)
    }

    /// [`begin`](Self::begin), a recording's replays naming trace `shown` in their errors.
    pub(crate) fn begin_as(&mut self, id: u64, shown: u64) -> Result<(), TraceError> {
        if let Some((open, _)) = &self.open {
            return Err(TraceError::AlreadyOpen { open: *open, id });
        }
        let mode = match self.recorded.get(&id) {
            Some(r) => Mode::Replaying(Replaying {
                recorded: r.clone(),
                launches: 0,
                jobs: Arena::sized_like(
                    r.units,
                    r.entries,
                    r.replay_slots.clone(),
                    self.pool.clone(),
                    r.typed.clone(),
                    r.places.clone(),
                ),
                error: None,
                outside: Vec::new(),
            }),
            None => Mode::Recording(Recording {
                sigs: Vec::new(),
                states: HashMap::default(),
                deps: Vec::new(),
                workers: Vec::new(),
                jobs: Arena::default(),
                typed: Vec::new(),
                outside: Vec::new(),
                shown,
            }),
        };
        self.open = Some((id, mode));
        Ok(())
    }

    /// Records or matches one launch of the open trace, which also waits for `after` if
    /// given (an outside event of this execution), with what `extra` says of it (a point of
    /// an index launch is recorded so; a replay's index launches come here only when they
    /// differ).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn launch(
        &mut self,
        kind: TaskKind,
        placement: Placement,
        declared: &[Declared],
        job: impl FnOnce() + Send + 'static,
        check: impl FnOnce(&[Declared]),
        after: Option<&Event>,
        extra: Extra,
    ) {
        let Extra { typed, index } = extra;
        let outside = after.is_some();
        let job = match index {
            None => match self.replay(kind, placement, declared, job, after) {
                Ok(()) => return,
                Err(job) => job,
            },
            Some(_) => job,
        };
        let (id, mode) = self.open.as_mut().expect("a trace is open");
        match mode {
            Mode::Replaying(r) => {
                if r.error.is_some() {
                    return;
                }
                let at = r.launches;
                check(declared);
                let got = Sig {
                    kind,
                    placement,
                    accesses: declared.to_vec(),
                    outside,
                    index,
                };
                r.error = Some(TraceError::Mismatch {
                    id: *id,
                    launch: at,
                    recorded: r.recorded.typed.sigs.get(at).map_or_else(
                        || "no launch (the recording ends here)".to_string(),
                        |s| s.to_string(),
                    ),
                    got: got.to_string(),
                });
                r.jobs = Arena::default();
            }
            Mode::Recording(rec) => {
                check(declared);
                let k = rec.sigs.len() as u32;
                let mut deps = Vec::new();
                for d in declared {
                    let r = d.region.index;
                    let state = rec.states.entry(r).or_insert_with(|| {
                        Versions::sealed(vec![Sym::Version(r)], vec![Sym::All(r)])
                    });
                    state.dependences(d.mode, &mut deps);
                }
                if let Some(e) = after {
                    deps.push(Sym::Outside(rec.outside.len() as u32));
                    rec.outside.push(e.clone());
                }
                for d in declared {
                    let state = rec.states.get_mut(&d.region.index).expect("entered above");
                    state.record(d.mode, Sym::Task(k));
                }
                let worker = match placement {
                    Placement::Worker(w) => w,
                    Placement::Any => {
                        self.next_any = self.next_any.wrapping_add(1);
                        self.next_any
                    }
                };
                rec.sigs.push(Sig {
                    kind,
                    placement,
                    accesses: declared.to_vec(),
                    outside,
                    index,
                });
                rec.deps.push(deps);
                rec.workers.push(worker);
                rec.jobs.push(job);
                rec.typed.push(typed);
            }
        }
    }

    /// Ends the open trace: compiles it if it was being recorded, then runs it on `regions`'
    /// current states and leaves them as the fragment's analysis would have. Returns the
    /// instance's completion.
    pub(crate) fn end(
        &mut self,
        handle: &Handle,
        regions: &mut [Versions<Event>],
        cells: &[Arc<dyn Send + Sync>],
    ) -> Result<Event, TraceError> {
        let (id, mode) = self.open.take().ok_or(TraceError::NotOpen)?;
        let (recorded, jobs, outside) = match mode {
            Mode::Replaying(r) => {
                if let Some(e) = r.error {
                    return Err(e);
                }
                let recorded = r.recorded.typed.sigs.len();
                if r.launches != recorded {
                    return Err(TraceError::Shorter {
                        id,
                        recorded,
                        got: r.launches,
                    });
                }
                (r.recorded, r.jobs, r.outside)
            }
            Mode::Recording(mut rec) => {
                self.workers = handle.workers();
                for w in rec.workers.iter_mut().zip(&rec.sigs) {
                    if w.1.placement == Placement::Any {
                        *w.0 %= self.workers;
                    }
                }
                let mut jobs = std::mem::take(&mut rec.jobs);
                let outside = (std::mem::take(&mut rec.outside).into_iter())
                    .map(Outside::Event)
                    .collect();
                let units = jobs.units();
                let recorded = Arc::new(compile(rec.shown, handle, rec, units, cells)?);
                jobs.lay_out(recorded.slots.clone());
                jobs.keep(recorded.typed.clone());
                self.recorded.insert(id, recorded.clone());
                (recorded, jobs, outside)
            }
        };
        Ok(run(&recorded, jobs, outside, regions))
    }
}

#[cfg(test)]
mod tests;
