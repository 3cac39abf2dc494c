//! Compilation (per-worker layout, counter image) and execution (per-instance counters and
//! ready rings) of subgraphs.
//!
//! Vertices are renumbered so that each worker's vertices are contiguous: worker `w` owns
//! `seg[w]..seg[w+1]`, its counters sit together, and its ready ring for an instance is the
//! same range of the instance's `ready` array. Every vertex becomes ready exactly once per
//! instance, so a ring never overflows: a producer takes a slot with one `fetch_add` on the
//! ring's tail and stores `vertex + 1`; the owning worker reads slots in order.

use super::{SubgraphBuilder, SubgraphError, TaskFn};
use crate::countdown::Outcome;
use crate::event::{Event, Notify};
use crate::failure::{panic_message, Cause, Failure, TaskLabel};
use crate::runtime::{Handle, Placement};
use crate::sync::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::{Arc, Mutex};

/// A compiled subgraph: immutable, shared by all its instances.
pub(crate) struct Compiled<A> {
    funcs: Vec<TaskFn<A>>,
    /// Builder index of each vertex, for error messages.
    original: Vec<u32>,
    worker_of: Vec<u32>,
    seg: Vec<u32>,
    succ_start: Vec<u32>,
    succ: Vec<u32>,
    post_start: Vec<u32>,
    posts_of: Vec<u32>,
    pre_start: Vec<u32>,
    pre_targets: Vec<u32>,
    image: Vec<u32>,
    post_sources: Vec<u32>,
    roots: Vec<u32>,
    workers_used: Vec<usize>,
}

fn csr(n: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; n + 1];
    for (a, _) in pairs.clone() {
        start[a as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut out = vec![0u32; start[n] as usize];
    for (a, b) in pairs {
        out[fill[a as usize] as usize] = b;
        fill[a as usize] += 1;
    }
    (start, out)
}

impl<A> Compiled<A> {
    pub(crate) fn new(b: SubgraphBuilder<A>, workers: usize) -> Result<Compiled<A>, SubgraphError> {
        let n = b.funcs.len();
        for (t, &w) in b.workers.iter().enumerate() {
            if w >= workers {
                return Err(SubgraphError::BadWorker {
                    task: t as u32,
                    worker: w,
                    workers,
                });
            }
        }
        let task = |t: u32| {
            if (t as usize) < n {
                Ok(t)
            } else {
                Err(SubgraphError::NoSuchTask(t))
            }
        };
        for &(a, c) in &b.edges {
            task(a)?;
            task(c)?;
            if a == c {
                return Err(SubgraphError::SelfEdge(a));
            }
        }
        for &(p, t) in &b.pre_edges {
            task(t)?;
            if p >= b.pres {
                return Err(SubgraphError::NoSuchCondition(p));
            }
        }
        for &(t, p) in &b.post_edges {
            task(t)?;
            if p >= b.posts {
                return Err(SubgraphError::NoSuchCondition(p));
            }
        }
        // Renumber: worker-major, builder order within a worker.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by_key(|&t| (b.workers[t as usize], t));
        let mut new_id = vec![0u32; n];
        for (new, &old) in order.iter().enumerate() {
            new_id[old as usize] = new as u32;
        }
        let mut seg = vec![0u32; workers + 1];
        for &w in &b.workers {
            seg[w + 1] += 1;
        }
        for w in 0..workers {
            seg[w + 1] += seg[w];
        }
        let edges = b
            .edges
            .iter()
            .map(|&(a, c)| (new_id[a as usize], new_id[c as usize]));
        let (succ_start, succ) = csr(n, edges.clone());
        let mut image = vec![0u32; n];
        for (_, c) in edges {
            image[c as usize] += 1;
        }
        // Kahn's algorithm on a copy of the in-degrees: what is never freed lies on a cycle.
        let mut indeg = image.clone();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&v| indeg[v as usize] == 0).collect();
        let mut seen = 0;
        while let Some(v) = stack.pop() {
            seen += 1;
            for &s in &succ[succ_start[v as usize] as usize..succ_start[v as usize + 1] as usize] {
                indeg[s as usize] -= 1;
                if indeg[s as usize] == 0 {
                    stack.push(s);
                }
            }
        }
        if seen < n {
            let v = (0..n).find(|&v| indeg[v] > 0).expect("an unfreed vertex");
            return Err(SubgraphError::Cycle(order[v]));
        }
        let pre_pairs = b.pre_edges.iter().map(|&(p, t)| (p, new_id[t as usize]));
        let (pre_start, pre_targets) = csr(b.pres as usize, pre_pairs.clone());
        for (_, t) in pre_pairs {
            image[t as usize] += 1;
        }
        let post_pairs = b.post_edges.iter().map(|&(t, p)| (new_id[t as usize], p));
        let (post_start, posts_of) = csr(n, post_pairs.clone());
        let mut post_sources = vec![0u32; b.posts as usize];
        for (_, p) in post_pairs {
            post_sources[p as usize] += 1;
        }
        let roots = (0..n as u32).filter(|&v| image[v as usize] == 0).collect();
        let mut funcs: Vec<Option<TaskFn<A>>> = b.funcs.into_iter().map(Some).collect();
        let funcs = order
            .iter()
            .map(|&old| funcs[old as usize].take().expect("each task once"))
            .collect();
        let worker_of = order
            .iter()
            .map(|&old| b.workers[old as usize] as u32)
            .collect();
        let workers_used = (0..workers).filter(|&w| seg[w + 1] > seg[w]).collect();
        Ok(Compiled {
            funcs,
            original: order,
            worker_of,
            seg,
            succ_start,
            succ,
            post_start,
            posts_of,
            pre_start,
            pre_targets,
            image,
            post_sources,
            roots,
            workers_used,
        })
    }

    pub(crate) fn tasks(&self) -> usize {
        self.funcs.len()
    }

    fn preconditions(&self) -> usize {
        self.pre_start.len() - 1
    }
}

/// The events of one instance.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Triggers when every task of the instance has finished.
    pub completion: Event,
    /// One event per declared postcondition.
    pub postconditions: Vec<Event>,
}

/// One instance in flight: its own counters and rings, and its argument.
pub(crate) struct State<A> {
    graph: Arc<Compiled<A>>,
    args: A,
    counters: Box<[AtomicU32]>,
    ready: Box<[AtomicU32]>,
    tails: Box<[CachePadded<AtomicU32>]>,
    post_left: Box<[AtomicU32]>,
    posts: Vec<Event>,
    completion: Event,
    workers_left: AtomicUsize,
    finished: AtomicBool,
    failed: AtomicBool,
    failure: Mutex<Option<Arc<Failure>>>,
    instantiated_at: &'static Location<'static>,
}

/// What a worker needs of an instance it takes part in, with the argument type erased.
pub(crate) trait Active: Send + Sync {
    /// Runs the vertices of worker `w` that are ready, reading its ring from `*head`. Returns
    /// whether it ran any, and whether the worker's part of the instance is complete.
    fn poll(&self, w: usize, head: &mut u32) -> (bool, bool);
    /// The runtime shut down: poison the instance and trigger its events.
    fn cancel(&self);
}

impl<A> State<A> {
    pub(crate) fn new(
        graph: &Arc<Compiled<A>>,
        args: A,
        instantiated_at: &'static Location<'static>,
    ) -> State<A> {
        let n = graph.tasks();
        State {
            graph: graph.clone(),
            args,
            counters: graph.image.iter().map(|&c| AtomicU32::new(c)).collect(),
            ready: (0..n).map(|_| AtomicU32::new(0)).collect(),
            tails: (0..graph.seg.len() - 1)
                .map(|_| CachePadded::new(AtomicU32::new(0)))
                .collect(),
            post_left: graph
                .post_sources
                .iter()
                .map(|&c| AtomicU32::new(c))
                .collect(),
            posts: (0..graph.post_sources.len())
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

    /// Queues the vertices that wait for nothing.
    pub(crate) fn start(&self) {
        for &r in &self.graph.roots {
            self.push_ready(r);
        }
    }

    #[cfg(loom)]
    pub(crate) fn completion(&self) -> &Event {
        &self.completion
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

    /// Vertex `v` may run: queue it on its worker's ring.
    fn push_ready(&self, v: u32) {
        let w = self.graph.worker_of[v as usize] as usize;
        let slot = self.tails[w].fetch_add(1, Ordering::Relaxed);
        // Release: the vertex's inputs (written before the decrements that made it ready)
        // happen-before the owner's Acquire load of the slot.
        self.ready[(self.graph.seg[w] + slot) as usize].store(v + 1, Ordering::Release);
    }

    fn arrive(&self, v: u32) {
        if self.counters[v as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
            self.push_ready(v);
        }
    }

    fn run_vertex(&self, v: u32) {
        let g = &*self.graph;
        if !self.failed.load(Ordering::Relaxed) {
            let f = &g.funcs[v as usize];
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| f(&self.args))) {
                self.fail(Arc::new(Failure::Task {
                    task: TaskLabel {
                        name: Some(format!("subgraph task {}", g.original[v as usize])),
                        launched_at: self.instantiated_at,
                    },
                    cause: Cause::Panicked(panic_message(p.as_ref())),
                }));
            }
        }
        let (a, b) = (g.succ_start[v as usize], g.succ_start[v as usize + 1]);
        for &s in &g.succ[a as usize..b as usize] {
            self.arrive(s);
        }
        let (a, b) = (g.post_start[v as usize], g.post_start[v as usize + 1]);
        for &p in &g.posts_of[a as usize..b as usize] {
            if self.post_left[p as usize].fetch_sub(1, Ordering::AcqRel) == 1 {
                let _ = self.posts[p as usize].state().trigger(self.outcome());
            }
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
}

impl<A: Send + Sync + 'static> Active for State<A> {
    fn poll(&self, w: usize, head: &mut u32) -> (bool, bool) {
        let (start, end) = (self.graph.seg[w], self.graph.seg[w + 1]);
        let mut ran = false;
        while start + *head < end {
            let v = self.ready[(start + *head) as usize].load(Ordering::Acquire);
            if v == 0 {
                break;
            }
            *head += 1;
            ran = true;
            self.run_vertex(v - 1);
        }
        let done = start + *head == end;
        if done && self.workers_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finish();
        }
        (ran, done)
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

/// An external precondition's subscription on behalf of an instance.
struct Pre<A> {
    state: Arc<State<A>>,
    index: usize,
}

impl<A: Send + Sync + 'static> Notify for Pre<A> {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        if let Err(f) = outcome {
            self.state.fail(f.clone());
        }
        let g = &*self.state.graph;
        let (a, b) = (g.pre_start[self.index], g.pre_start[self.index + 1]);
        for &v in &g.pre_targets[a as usize..b as usize] {
            self.state.arrive(v);
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

/// Registers an instance with the worker it runs on; cancels the instance if dropped unrun
/// (the runtime shut down before the worker got to it).
struct Activation(Option<Arc<dyn Active>>);

impl Drop for Activation {
    fn drop(&mut self) {
        if let Some(a) = self.0.take() {
            a.cancel();
        }
    }
}

#[track_caller]
pub(crate) fn instantiate<A: Send + Sync + 'static>(
    graph: &Arc<Compiled<A>>,
    handle: &Handle,
    args: A,
    preconditions: &[Event],
) -> Instance {
    assert_eq!(
        preconditions.len(),
        graph.preconditions(),
        "the subgraph declares {} preconditions but instantiate got {}",
        graph.preconditions(),
        preconditions.len()
    );
    let n = graph.tasks();
    let state = Arc::new(State::new(graph, args, Location::caller()));
    let out = Instance {
        completion: state.completion.clone(),
        postconditions: state.posts.clone(),
    };
    if n == 0 {
        // Nothing to run: the instance is done when its preconditions are.
        Event::merge(preconditions)
            .state()
            .subscribe(Arc::new(FinishWhen(state)));
        return out;
    }
    state.start();
    for (index, e) in preconditions.iter().enumerate() {
        e.state().subscribe(Arc::new(Pre {
            state: state.clone(),
            index,
        }));
    }
    for &w in &graph.workers_used {
        let mut act = Activation(Some(state.clone()));
        handle.launch(Placement::Worker(w), &[], move || {
            crate::runtime::activate(act.0.take().expect("activated once"));
        });
    }
    out
}
