//! Execution: an instance's shared part (postconditions, failure) and each worker's private
//! part, its resident (dependency counters and ready stack).
//!
//! A worker's counters are plain integers only it touches. A same-worker edge is a plain
//! decrement; a cross-worker edge is one message through the runtime's ring from the sending
//! worker to the receiving one (see `runtime::channel`), which the receiver turns into a
//! decrement of its own counter. External preconditions arrive from any thread, through the
//! receiving worker's external queue.

use super::compile::Compiled;
use crate::countdown::Outcome;
use crate::event::{Event, Notify};
use crate::failure::{cause_of, Cause, Failure, TaskLabel};
use crate::runtime::{Handle, Msg, Resident, RingOut};
use crate::sync::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::{Arc, Mutex, PoisonError};

/// The events of one instance.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Triggers when every task of the instance has finished.
    pub completion: Event,
    /// One event per declared postcondition.
    pub postconditions: Vec<Event>,
}

/// What all workers share of one instance in flight.
pub(crate) struct State<A> {
    graph: Arc<Compiled<A>>,
    handle: Handle,
    id: u32,
    args: A,
    /// Per group of postconditions (see `compile`): tasks left to signal it, and its event.
    post_left: Box<[AtomicU32]>,
    posts: Vec<Event>,
    completion: Event,
    workers_left: AtomicUsize,
    finished: AtomicBool,
    failed: AtomicBool,
    failure: Mutex<Option<Arc<Failure>>>,
    instantiated_at: &'static Location<'static>,
}

impl<A> State<A> {
    pub(crate) fn new(
        graph: &Arc<Compiled<A>>,
        handle: &Handle,
        args: A,
        instantiated_at: &'static Location<'static>,
    ) -> State<A> {
        State {
            graph: graph.clone(),
            handle: handle.clone(),
            id: handle.take_id(),
            args,
            post_left: graph
                .group_sources
                .iter()
                .map(|&c| AtomicU32::new(c))
                .collect(),
            posts: (0..graph.group_sources.len())
                .map(|_| Event::pending())
                .collect(),
            completion: Event::pending(),
            workers_left: AtomicUsize::new(graph.workers_used.len()),
            finished: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            instantiated_at,
        }
    }

    fn fail(&self, f: Arc<Failure>) {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(f);
        self.failed.store(true, Ordering::Release);
    }

    fn outcome(&self) -> Outcome {
        if self.failed.load(Ordering::Acquire) {
            let f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
            Err(f.clone().expect("the failure precedes the flag"))
        } else {
            Ok(())
        }
    }

    fn signal_posts(&self, v: u32) {
        let g = &*self.graph;
        let (a, b) = (g.group_start[v as usize], g.group_start[v as usize + 1]);
        for &p in &g.groups_of[a as usize..b as usize] {
            if self.post_left[p as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                let _ = self.posts[p as usize].state().trigger(self.outcome());
            }
        }
    }

    fn worker_done(&self) {
        if self.workers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finish();
        }
    }

    fn finish(&self) {
        if self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        let outcome = self.outcome();
        for p in &self.posts {
            // Postconditions without sources (or left over after a cancel) trigger now.
            let _ = p.state().trigger(outcome.clone());
        }
        let _ = self.completion.state().trigger(outcome);
    }

    fn cancel(&self) {
        self.fail(Arc::new(Failure::Task {
            task: TaskLabel {
                name: Some("subgraph instance".into()),
                launched_at: self.instantiated_at,
            },
            cause: Cause::Cancelled,
        }));
        self.finish();
    }
}

impl<A> Drop for State<A> {
    fn drop(&mut self) {
        // Every resident and subscription of the instance held an `Arc` of this state: the id is
        // in no table and no ring any more.
        self.handle.give_back_id(self.id);
    }
}

/// Worker `w`'s resident for one instance: only that worker touches it.
pub(crate) struct Cursor<A> {
    state: Arc<State<A>>,
    /// First vertex of this worker: counter `i` belongs to vertex `base + i`.
    base: u32,
    counters: Vec<u32>,
    ready: Vec<u32>,
    left: u32,
}

impl<A> Cursor<A> {
    pub(crate) fn new(state: Arc<State<A>>, w: usize) -> Cursor<A> {
        let g = &*state.graph;
        let (a, b) = (g.seg[w], g.seg[w + 1]);
        let counters = g.image[a as usize..b as usize].to_vec();
        let mut ready = Vec::with_capacity((b - a) as usize);
        // Reversed, so that the stack hands out roots in builder order.
        ready.extend((a..b).rev().filter(|&v| counters[(v - a) as usize] == 0));
        Cursor {
            state,
            base: a,
            counters,
            ready,
            left: b - a,
        }
    }

    fn run_vertex(&mut self, v: u32, out: &RingOut<'_>) {
        let Cursor {
            state,
            base,
            counters,
            ready,
            left,
        } = self;
        let g = &*state.graph;
        if !state.failed.load(Ordering::Relaxed) {
            let f = &g.funcs[v as usize];
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(&state.args))) {
                state.fail(Arc::new(Failure::Task {
                    task: TaskLabel {
                        name: Some(format!("subgraph task {}", g.original[v as usize])),
                        launched_at: state.instantiated_at,
                    },
                    cause: cause_of(p.as_ref()),
                }));
            }
        }
        let (a, l, b) = (
            g.succ_start[v as usize] as usize,
            g.local_start[v as usize] as usize,
            g.succ_start[v as usize + 1] as usize,
        );
        // Messages first: their receivers may be waiting.
        for &s in &g.succ[a..l] {
            let m = Msg {
                id: state.id,
                vertex: s,
            };
            out.send(g.worker_of[s as usize] as usize, m);
        }
        // Pushed last to first, so that of the successors this vertex makes ready the first
        // in builder order runs first (the ready list is a stack). A traced program's builder
        // order is its launch order: a send launched after a producer then goes out before
        // the producer's next step runs, instead of after it.
        for &s in g.succ[l..b].iter().rev() {
            arrive(counters, ready, *base, s);
        }
        state.signal_posts(v);
        *left -= 1;
        if *left == 0 {
            state.worker_done();
        }
    }
}

/// One predecessor of vertex `v` is done; returns whether `v` became ready.
fn arrive(counters: &mut [u32], ready: &mut Vec<u32>, base: u32, v: u32) -> bool {
    let c = &mut counters[(v - base) as usize];
    *c -= 1;
    if *c == 0 {
        ready.push(v);
    }
    *c == 0
}

impl<A> Resident for Cursor<A> {
    fn id(&self) -> u32 {
        self.state.id
    }

    fn arrive(&mut self, v: u32) -> bool {
        arrive(&mut self.counters, &mut self.ready, self.base, v)
    }

    fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    fn run(&mut self, out: &RingOut<'_>) -> (bool, bool) {
        let mut ran = false;
        loop {
            while let Some(v) = self.ready.pop() {
                ran = true;
                self.run_vertex(v, out);
            }
            if self.left == 0 {
                break;
            }
            match out.next_for(self.state.id) {
                Some(v) => {
                    Resident::arrive(self, v);
                }
                None => break,
            }
        }
        (ran, self.left == 0)
    }

    fn cancel(&self) {
        self.state.cancel();
    }
}

/// The subscription of an instance to one event: the external preconditions it is given for.
struct Pre<A> {
    state: Arc<State<A>>,
    indices: Vec<usize>,
}

impl<A: Send + Sync + 'static> Notify for Pre<A> {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        for &index in &self.indices {
            self.state.precondition_done(index, outcome);
        }
    }
}

/// `preconditions` grouped by event: each distinct event once, with the precondition indices
/// it is given for. A subscription is a write to a line other workers last wrote (the event's
/// waiters), so one per event, not per precondition: a traced fragment's preconditions are
/// often a few events given many times (its regions' states on entry).
fn by_event(preconditions: &[Event]) -> Vec<(&Event, Vec<usize>)> {
    let mut groups: Vec<(&Event, Vec<usize>)> = Vec::new();
    if preconditions.len() <= BY_EVENT_LINEAR {
        for (index, e) in preconditions.iter().enumerate() {
            match groups.iter_mut().find(|(g, _)| g.ptr_eq(e)) {
                Some((_, indices)) => indices.push(index),
                None => groups.push((e, vec![index])),
            }
        }
        return groups;
    }
    // A traced fragment on ranks waits for an outside event per message it receives:
    // hundreds, where the linear search took 5 % of a rank's time (`traced@2`).
    let mut order: Vec<(usize, usize)> = (preconditions.iter().enumerate())
        .map(|(index, e)| (e.addr(), index))
        .collect();
    order.sort_unstable();
    for same in order.chunk_by(|a, b| a.0 == b.0) {
        let indices = same.iter().map(|&(_, index)| index).collect();
        groups.push((&preconditions[same[0].1], indices));
    }
    groups
}

/// Preconditions up to which [`by_event`] searches its groups linearly: most instances take
/// a few, and sorting costs more there.
const BY_EVENT_LINEAR: usize = 16;

/// What an [`Inlet`] opens: precondition `index` of an instance, whatever its argument type.
trait Opens: Send + Sync {
    fn precondition_done(&self, index: usize, outcome: &Outcome);
}

impl<A: Send + Sync + 'static> Opens for State<A> {
    /// Precondition `index` triggered: its target vertices each get one arrival.
    fn precondition_done(&self, index: usize, outcome: &Outcome) {
        if let Err(f) = outcome {
            self.fail(f.clone());
        }
        let g = &*self.graph;
        let (a, b) = (g.pre_start[index], g.pre_start[index + 1]);
        for &v in &g.pre_targets[a as usize..b as usize] {
            let m = Msg {
                id: self.id,
                vertex: v,
            };
            self.handle
                .send_external(g.worker_of[v as usize] as usize, m);
        }
    }
}

/// Finishes an instance without tasks when its merged preconditions trigger.
struct FinishWhen<A>(Arc<State<A>>);

impl<A: Send + Sync + 'static> Notify for FinishWhen<A> {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        if let Err(f) = outcome {
            self.0.fail(f.clone());
        }
        self.0.finish();
    }
}

/// One precondition of one instance, opened directly by whoever holds it: what a network
/// layer uses for a message it expects (the message's arrival opens the inlet), at the cost of
/// one notification, where an [`Event`] given to `instantiate` costs an event, a subscription
/// and a trigger. An inlet dropped without being opened poisons the instance, so that nothing
/// waits for it forever.
///
/// ```
/// use tactor::{Runtime, SubgraphBuilder};
///
/// let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
/// let mut b = SubgraphBuilder::<()>::new();
/// let t = b.task(0, |_| ());
/// let message = b.precondition();
/// b.wait_for(message, t);
/// let graph = b.compile(&rt).unwrap();
/// let (instance, mut inlets) = graph.instantiate_with_inlets((), &[], 1);
/// inlets.pop().unwrap().open();
/// instance.completion.wait().unwrap();
/// ```
pub struct Inlet {
    /// The instance and the precondition's index; `None` once opened or poisoned.
    target: Option<(Arc<dyn Opens>, usize)>,
}

impl Inlet {
    /// The precondition holds: the tasks that wait only for it may run.
    pub fn open(mut self) {
        if let Some((t, index)) = self.target.take() {
            t.precondition_done(index, &Ok(()));
        }
    }

    /// The precondition failed: the instance's tasks that wait for it do not run, and its
    /// events are poisoned with `reason`.
    pub fn poison(mut self, reason: &str) {
        self.fail(reason);
    }

    fn fail(&mut self, reason: &str) {
        if let Some((t, index)) = self.target.take() {
            let f = Arc::new(Failure::Poisoned(reason.to_string()));
            t.precondition_done(index, &Err(f));
        }
    }

    /// Opens the precondition with `outcome` as it is (a failure passed on unchanged).
    pub(crate) fn close_with(mut self, outcome: &Outcome) {
        if let Some((t, index)) = self.target.take() {
            t.precondition_done(index, outcome);
        }
    }

    /// Opens the precondition when `event` triggers, with its outcome.
    pub(crate) fn open_on(self, event: &Event) {
        event
            .state()
            .subscribe(Arc::new(OpenOn(Mutex::new(Some(self)))));
    }
}

/// An inlet opened by an event ([`Inlet::open_on`]).
struct OpenOn(Mutex<Option<Inlet>>);

impl Notify for OpenOn {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        let inlet = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(inlet) = inlet {
            inlet.close_with(outcome);
        }
    }
}

impl Drop for Inlet {
    fn drop(&mut self) {
        self.fail("an instance's inlet was dropped without being opened");
    }
}

impl std::fmt::Debug for Inlet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.target.is_some() {
            "Inlet(closed)"
        } else {
            "Inlet(opened)"
        })
    }
}

#[track_caller]
pub(crate) fn instantiate<A: Send + Sync + 'static>(
    graph: &Arc<Compiled<A>>,
    handle: &Handle,
    args: A,
    preconditions: &[Event],
    inlets: usize,
) -> (Instance, Vec<Inlet>) {
    assert_eq!(
        preconditions.len().checked_add(inlets),
        Some(graph.preconditions()),
        "the subgraph declares {} preconditions but instantiate got {} events and {} inlets",
        graph.preconditions(),
        preconditions.len(),
        inlets
    );
    let state = Arc::new(State::new(graph, handle, args, Location::caller()));
    let out = Instance {
        completion: state.completion.clone(),
        postconditions: graph
            .post_group
            .iter()
            .map(|&g| state.posts[g as usize].clone())
            .collect(),
    };
    if graph.tasks() == 0 {
        // Nothing to run: the instance is done when its preconditions are (its inlets too).
        let mut all = preconditions.to_vec();
        let mut opened = Vec::with_capacity(inlets);
        for _ in 0..inlets {
            let u = crate::UserEvent::new();
            all.push(u.event());
            opened.push(Inlet {
                target: Some((Arc::new(OpenUser(u)) as Arc<dyn Opens>, 0)),
            });
        }
        Event::merge(&all)
            .state()
            .subscribe(Arc::new(FinishWhen(state)));
        return (out, opened);
    }
    for (e, indices) in by_event(preconditions) {
        e.state().subscribe(Arc::new(Pre {
            state: state.clone(),
            indices,
        }));
    }
    let first = preconditions.len();
    let opened = (first..first + inlets)
        .map(|index| Inlet {
            target: Some((state.clone() as Arc<dyn Opens>, index)),
        })
        .collect();
    for &w in &graph.workers_used {
        handle.activate_on(w, Box::new(Cursor::new(state.clone(), w)));
    }
    (out, opened)
}

/// An inlet of an instance without tasks: triggers the user event its completion waits for.
struct OpenUser(crate::UserEvent);

impl Opens for OpenUser {
    fn precondition_done(&self, _index: usize, outcome: &Outcome) {
        let _ = match outcome {
            Ok(()) => self.0.trigger(),
            Err(f) => self.0.poison(&f.to_string()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::{by_event, BY_EVENT_LINEAR};
    use crate::{Event, UserEvent};

    /// Above and below the linear limit alike: each distinct event once, with exactly the
    /// indices it was given at, ascending.
    #[test]
    fn preconditions_group_by_event_at_any_count() {
        let users: Vec<UserEvent> = (0..7).map(|_| UserEvent::new()).collect();
        for n in [0, 1, BY_EVENT_LINEAR, BY_EVENT_LINEAR + 1, 300] {
            let pres: Vec<Event> = (0..n).map(|i| users[(i * i + 3) % 7].event()).collect();
            let groups = by_event(&pres);
            let mut seen = vec![false; n];
            for (k, (e, indices)) in groups.iter().enumerate() {
                assert!(
                    groups[..k].iter().all(|(g, _)| !g.ptr_eq(e)),
                    "{n}: grouped twice"
                );
                assert!(indices.windows(2).all(|w| w[0] < w[1]), "{n}: {indices:?}");
                for &i in indices {
                    assert!(pres[i].ptr_eq(e) && !seen[i], "{n}: index {i}");
                    seen[i] = true;
                }
            }
            assert!(seen.iter().all(|&s| s), "{n}: an index lost");
        }
    }
}
