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
use crate::subgraph::{PostId, PreId, Subgraph, SubgraphBuilder, SubgraphError};
use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::panic::Location;
use std::sync::Arc;

mod compile;
mod replay;

use compile::compile;
use replay::run;

/// Why a trace did not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceError {
    /// `begin_trace` while another trace is open.
    AlreadyOpen {
        /// The open trace.
        open: u64,
        /// The one asked for.
        id: u64,
    },
    /// `end_trace` without an open trace.
    NotOpen,
    /// A launch of a replay differs from the recording (or has none at its position).
    Mismatch {
        /// The trace.
        id: u64,
        /// Position of the launch in the fragment, from 0.
        launch: usize,
        /// What the recording has there.
        recorded: String,
        /// What was launched.
        got: String,
    },
    /// A point of an index launch of a replay projected to other accesses or another
    /// placement than the recording has (found by the worker that was to run it).
    PointMismatch {
        /// The trace.
        id: u64,
        /// Position of the launch in the fragment, from 0.
        launch: usize,
        /// What the recording has there.
        recorded: String,
        /// What the projection gave.
        got: String,
    },
    /// A replay ended with fewer launches than the recording.
    Shorter {
        /// The trace.
        id: u64,
        /// Launches recorded.
        recorded: usize,
        /// Launches replayed.
        got: usize,
    },
    /// The recorded fragment does not compile (a task placed on a worker that does not exist).
    Compile {
        /// The trace.
        id: u64,
        /// Why.
        error: SubgraphError,
    },
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::AlreadyOpen { open, id } => {
                write!(f, "cannot begin trace {id}: trace {open} is open")
            }
            TraceError::NotOpen => write!(f, "end_trace without an open trace"),
            TraceError::Mismatch {
                id,
                launch,
                recorded,
                got,
            }
            | TraceError::PointMismatch {
                id,
                launch,
                recorded,
                got,
            } => {
                let outcome = if matches!(self, TraceError::Mismatch { .. }) {
                    "the fragment did not run"
                } else {
                    "that point did not run, and what depends on it is poisoned"
                };
                write!(
                    f,
                    "trace {id}: launch {launch} differs from the recording: recorded \
                     {recorded}, got {got}; {outcome}"
                )
            }
            TraceError::Shorter { id, recorded, got } => write!(
                f,
                "trace {id}: {got} launches, but the recording has {recorded}; the fragment did \
                 not run"
            ),
            TraceError::Compile { id, error } => write!(f, "trace {id} does not compile: {error}"),
        }
    }
}

impl std::error::Error for TraceError {}

/// A launch of an abandoned replay: its placement, accesses, job and outside event.
pub(crate) type Abandoned = (Placement, Vec<Declared>, Job, Option<Event>);

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
    /// The external preconditions, in the subgraph's order: `Version` or `All` symbols.
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
}

/// A trace being replayed.
struct Replaying {
    recorded: Arc<Recorded>,
    /// Launches matched so far (an index launch counts its points).
    launches: usize,
    jobs: Arena,
    error: Option<TraceError>,
    outside: Vec<Event>,
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
        if let (Some(e), Some((_, Mode::Replaying(r)))) = (after, &mut self.open) {
            r.outside.push(e.clone());
        }
        Ok(())
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
                            outside
                                .next()
                                .expect("every matched launch after an event gave one")
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

    /// Drops the recording of `id`.
    pub(crate) fn forget(&mut self, id: u64) {
        self.recorded.remove(&id);
    }

    pub(crate) fn begin(&mut self, id: u64) -> Result<(), TraceError> {
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
                states: HashMap::new(),
                deps: Vec::new(),
                workers: Vec::new(),
                jobs: Arena::default(),
                typed: Vec::new(),
                outside: Vec::new(),
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
                let outside = std::mem::take(&mut rec.outside);
                let units = jobs.units();
                let recorded = Arc::new(compile(id, handle, rec, units, cells)?);
                jobs.lay_out(recorded.slots.clone());
                jobs.keep(recorded.typed.clone());
                self.recorded.insert(id, recorded.clone());
                (recorded, jobs, outside)
            }
        };
        Ok(run(&recorded, jobs, &outside, regions))
    }
}

#[cfg(test)]
mod tests {
    use super::compile::{fuse, FUSE_MAX};
    use super::replay::{Ahead, Run};
    use super::{AccessMode, Declared, Sig, Sym, TaskKind, ONCE};
    use crate::implicit::region::RegionKey;
    use crate::Placement;
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use std::sync::Arc;

    #[test]
    fn a_vertex_runs_consecutive_points_of_one_index_launch_together() {
        // Launches 0–2: points 0, 2, 4 of entry 0; 3: a launch of its own (entry 1); 4–5:
        // points 1, 3 of entry 2; 6: point 5 of entry 0 again.
        let places = [(0, 0), (0, 2), (0, 4), (1, ONCE), (2, 1), (2, 3), (0, 5)];
        let shown = |runs: Vec<Run>| -> Vec<String> {
            runs.iter()
                .map(|r| match r {
                    Run::One(k) => format!("one {k}"),
                    Run::Points(e, p, l) => format!("entry {e} points {p:?} launches {l:?}"),
                })
                .collect()
        };
        assert_eq!(
            shown(Run::of(&[0, 1, 2, 3, 4, 5, 6], Some(&places))),
            [
                "entry 0 points [0, 2, 4] launches [0, 1, 2]",
                "one 3",
                "entry 2 points [1, 3] launches [4, 5]",
                "entry 0 points [5] launches [6]",
            ]
        );
        assert_eq!(shown(Run::of(&[1, 3], None)), ["one 1", "one 3"]);
    }

    #[test]
    fn a_vertex_asks_for_the_cells_its_launches_read_and_write_once_each() {
        let cells: Vec<Arc<dyn Send + Sync>> = (0..5u64).map(|i| Arc::new(i) as _).collect();
        let at = |i: usize| Arc::as_ptr(&cells[i]).cast::<u8>() as usize;
        let sig = |accesses: &[(u32, AccessMode)]| Sig {
            kind: TaskKind::of::<fn()>(),
            placement: Placement::Any,
            accesses: accesses
                .iter()
                .map(|&(index, mode)| Declared {
                    region: RegionKey { program: 0, index },
                    mode,
                })
                .collect(),
            outside: false,
            index: None,
        };
        let sigs = [
            sig(&[(0, AccessMode::Read), (1, AccessMode::ReadWrite)]),
            sig(&[(0, AccessMode::Read), (2, AccessMode::Write)]),
            sig(&[(3, AccessMode::Constant), (4, AccessMode::Read)]),
        ];
        let ahead = Ahead::of(&[0, 1, 2], &sigs, &cells);
        let mut reads = [at(0), at(4)];
        let mut writes = [at(1), at(2)];
        reads.sort_unstable();
        writes.sort_unstable();
        assert_eq!(&*ahead.reads, &reads[..]);
        assert_eq!(&*ahead.writes, &writes[..]);
        // Only the vertex's own launches count.
        let one = Ahead::of(&[2], &sigs, &cells);
        assert_eq!(&*one.reads, &[at(4)][..]);
        assert!(one.writes.is_empty());
        ahead.ask();
    }

    /// Checks what `fuse` promises: each launch in one vertex, a vertex's launches on one
    /// worker, in launch order, independent of each other, and the vertices acyclic.
    fn check(workers: &[usize], deps: &[Vec<Sym>]) -> Vec<Vec<u32>> {
        let groups = fuse(workers, deps);
        let mut vertex = vec![usize::MAX; workers.len()];
        for (g, members) in groups.iter().enumerate() {
            assert!(!members.is_empty() && members.len() <= FUSE_MAX);
            assert!(members.windows(2).all(|w| w[0] < w[1]), "launch order");
            for &k in members {
                assert_eq!(vertex[k as usize], usize::MAX, "launch {k} in two vertices");
                vertex[k as usize] = g;
                assert_eq!(workers[k as usize], workers[members[0] as usize]);
            }
        }
        assert!(
            vertex.iter().all(|&v| v != usize::MAX),
            "every launch placed"
        );
        let n = groups.len();
        let mut succ = vec![Vec::new(); n];
        let mut indeg = vec![0usize; n];
        for (k, d) in deps.iter().enumerate() {
            for s in d {
                if let Sym::Task(j) = *s {
                    let (a, b) = (vertex[j as usize], vertex[k]);
                    assert_ne!(a, b, "launch {k} depends on {j} of its own vertex");
                    succ[a].push(b);
                    indeg[b] += 1;
                }
            }
        }
        let mut stack: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
        let mut seen = 0;
        while let Some(v) = stack.pop() {
            seen += 1;
            for &s in &succ[v] {
                indeg[s] -= 1;
                if indeg[s] == 0 {
                    stack.push(s);
                }
            }
        }
        assert_eq!(seen, n, "the vertices form a cycle");
        groups
    }

    #[test]
    fn independent_graphs_in_lock_step_fuse_per_worker_and_timestep() {
        // 4 graphs of width 2 on 2 workers; each point reads both points of its graph's last
        // timestep (nearest, radix 3), launched timestep by timestep.
        let (graphs, steps) = (4usize, 5usize);
        let (mut workers, mut deps) = (Vec::new(), Vec::new());
        for t in 0..steps {
            for g in 0..graphs {
                for p in 0..2 {
                    let prev = |q: usize| (((t - 1) * graphs + g) * 2 + q) as u32;
                    deps.push(if t == 0 {
                        vec![Sym::Version(0)]
                    } else {
                        vec![Sym::Task(prev(0)), Sym::Task(prev(1))]
                    });
                    workers.push(p);
                }
            }
        }
        let groups = check(&workers, &deps);
        assert_eq!(
            groups.len(),
            2 * steps,
            "one vertex per worker and timestep"
        );
        assert_eq!(groups[0], vec![0, 2, 4, 6]);
        // A receive (an outside event) on worker 0 with no other dependence: the level of
        // the first timestep's launches there, but a vertex of its own.
        let (mut w, mut d) = (workers.clone(), deps.clone());
        w.push(0);
        d.push(vec![Sym::Outside(0)]);
        let groups = check(&w, &d);
        assert_eq!(groups[0], vec![0, 2, 4, 6]);
        assert_eq!(groups.last(), Some(&vec![(graphs * 2 * steps) as u32]));
    }

    #[test]
    fn random_fragments_fuse_into_acyclic_vertices_of_independent_launches() {
        let mut rng = StdRng::seed_from_u64(11);
        let rounds = if cfg!(miri) { 4 } else { 300 };
        for round in 0..rounds {
            let n = rng.gen_range(1..80);
            let w = rng.gen_range(1..4);
            let workers: Vec<usize> = (0..n).map(|_| rng.gen_range(0..w)).collect();
            let deps: Vec<Vec<Sym>> = (0..n)
                .map(|k| {
                    let mut d = Vec::new();
                    if k > 0 {
                        for _ in 0..rng.gen_range(0..4) {
                            // Mostly recent launches, as in a program's stream.
                            let back = rng.gen_range(1..=k.min(if round % 2 == 0 { 6 } else { k }));
                            d.push(Sym::Task((k - back) as u32));
                        }
                    }
                    if rng.gen_bool(0.2) {
                        d.push(Sym::All(0));
                    }
                    if rng.gen_bool(0.1) {
                        d.push(Sym::Outside(k as u32));
                    }
                    d
                })
                .collect();
            let groups = check(&workers, &deps);
            // Every launch of a vertex waits (directly or not) for the same outside events.
            let mut waits: Vec<Vec<u32>> = Vec::new();
            for d in &deps {
                let mut set = Vec::new();
                for &s in d {
                    match s {
                        Sym::Task(j) => set.extend(waits[j as usize].iter().copied()),
                        Sym::Outside(n) => set.push(n),
                        _ => {}
                    }
                }
                set.sort_unstable();
                set.dedup();
                waits.push(set);
            }
            for g in &groups {
                let first = &waits[g[0] as usize];
                assert!(g.iter().all(|&k| &waits[k as usize] == first), "{g:?}");
            }
        }
        // Many independent launches on one worker: vertices of at most FUSE_MAX.
        let groups = check(&[0; 40], &vec![Vec::new(); 40]);
        assert_eq!(groups.len(), 40usize.div_ceil(FUSE_MAX));
    }
}
