//! Subgraphs: a task graph defined once, checked and compiled into per-worker parts
//! (residents: the actors of the task/actor duality), and instantiated many times (the
//! duality paper's Algorithm 1).
//!
//! [`SubgraphBuilder`] collects tasks (a worker and a function of the per-instantiation
//! argument), edges between them, and external pre- and postconditions. [`compile`] checks the
//! graph (indices, cycles) and lays it out per worker: each worker's vertices, their flattened
//! successor lists, an image of the initial dependency counters, and one mailbox per pair of
//! workers that an edge crosses. [`Subgraph::instantiate`] returns events and starts one resident
//! per worker involved, which copies its part of the counter image. From then on each worker
//! runs its ready vertices inline: a same-worker successor costs a plain decrement of a
//! counter only that worker touches, a cross-worker successor costs exactly one message (one
//! store into the pair's mailbox, which the receiver reads in order). No event or task object
//! per vertex, no atomic read-modify-write per edge, no allocation per vertex.
//!
//! **Concurrency between instances.** Every instance has its own counters and ready queues,
//! so any number of instances of the same subgraph may be in flight at once; the runtime
//! orders nothing between them. What the tasks touch is the program's business: chain
//! instances through their external conditions (instance `k+1`'s preconditions = instance
//! `k`'s postconditions) to order their data accesses, as the Task Bench `compiled` system does.
//!
//! [`compile`]: SubgraphBuilder::compile

pub(crate) mod compile;
pub(crate) mod exec;

use crate::event::Event;
use crate::runtime::Handle;
use std::fmt;
use std::sync::Arc;

pub use exec::{Inlet, Instance};

/// A task of a subgraph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaskId(pub u32);

/// An external precondition of a subgraph: index into the events given to `instantiate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PreId(pub u32);

/// An external postcondition of a subgraph: index into [`Instance::postconditions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PostId(pub u32);

/// Why a subgraph does not compile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubgraphError {
    /// A task is placed on a worker the runtime does not have.
    BadWorker {
        /// The task.
        task: u32,
        /// Its worker.
        worker: usize,
        /// Workers of the runtime.
        workers: usize,
    },
    /// An edge or condition names a task that was not added.
    NoSuchTask(u32),
    /// A condition names a pre- or postcondition that was not declared.
    NoSuchCondition(u32),
    /// An edge from a task to itself.
    SelfEdge(u32),
    /// The edges form a cycle through this task.
    Cycle(u32),
    /// More tasks than a subgraph can have (2^31).
    TooManyTasks(usize),
}

impl fmt::Display for SubgraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubgraphError::BadWorker {
                task,
                worker,
                workers,
            } => write!(
                f,
                "task {task} is placed on worker {worker}, but the runtime has {workers} workers"
            ),
            SubgraphError::NoSuchTask(t) => write!(f, "no task {t} in the subgraph"),
            SubgraphError::NoSuchCondition(c) => {
                write!(f, "no external condition {c} in the subgraph")
            }
            SubgraphError::SelfEdge(t) => write!(f, "task {t} has an edge to itself"),
            SubgraphError::Cycle(t) => write!(f, "the edges form a cycle through task {t}"),
            SubgraphError::TooManyTasks(n) => {
                write!(f, "{n} tasks, but a subgraph has fewer than 2^31")
            }
        }
    }
}

impl std::error::Error for SubgraphError {}

type TaskFn<A> = Box<dyn Fn(&A) + Send + Sync>;

/// Collects a subgraph. `A` is the per-instantiation argument every task receives (a timestep
/// number, typically): the graph is built once and each instance interpolates its own `A`.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
/// use std::sync::Arc;
/// use tactor::{Runtime, SubgraphBuilder};
///
/// let rt = Runtime::new(2).unwrap();
/// let sum = Arc::new(AtomicU64::new(0));
/// let mut b = SubgraphBuilder::<u64>::new();
/// let (s1, s2) = (sum.clone(), sum.clone());
/// let a = b.task(0, move |x| { s1.fetch_add(*x, SeqCst); });
/// let c = b.task(1, move |x| { s2.fetch_add(10 * *x, SeqCst); });
/// b.edge(a, c);
/// // Each instance starts after the event given for `after` (here: the previous instance).
/// let after = b.precondition();
/// b.wait_for(after, a);
/// let graph = b.compile(&rt).unwrap();
/// let first = graph.instantiate(1, &[tactor::Event::triggered()]);
/// let second = graph.instantiate(2, &[first.completion.clone()]);
/// second.completion.wait().unwrap();
/// assert_eq!(sum.load(SeqCst), 11 + 22);
/// ```
pub struct SubgraphBuilder<A> {
    pub(crate) workers: Vec<usize>,
    funcs: Vec<TaskFn<A>>,
    pub(crate) edges: Vec<(u32, u32)>,
    pub(crate) pres: u32,
    pub(crate) pre_edges: Vec<(u32, u32)>,
    pub(crate) posts: u32,
    pub(crate) post_edges: Vec<(u32, u32)>,
}

impl<A> Default for SubgraphBuilder<A> {
    fn default() -> Self {
        SubgraphBuilder {
            workers: Vec::new(),
            funcs: Vec::new(),
            edges: Vec::new(),
            pres: 0,
            pre_edges: Vec::new(),
            posts: 0,
            post_edges: Vec::new(),
        }
    }
}

impl<A: Send + Sync + 'static> SubgraphBuilder<A> {
    /// An empty subgraph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a task that runs `f` on `worker` in every instance.
    pub fn task(&mut self, worker: usize, f: impl Fn(&A) + Send + Sync + 'static) -> TaskId {
        self.workers.push(worker);
        self.funcs.push(Box::new(f));
        TaskId(self.funcs.len() as u32 - 1)
    }

    /// `to` runs after `from` in every instance.
    pub fn edge(&mut self, from: TaskId, to: TaskId) {
        self.edges.push((from.0, to.0));
    }

    /// Declares an external precondition: the event at this index of `instantiate`'s
    /// preconditions.
    pub fn precondition(&mut self) -> PreId {
        self.pres += 1;
        PreId(self.pres - 1)
    }

    /// `task` waits for external precondition `pre`.
    pub fn wait_for(&mut self, pre: PreId, task: TaskId) {
        self.pre_edges.push((pre.0, task.0));
    }

    /// Declares an external postcondition: an event of each instance that triggers when every
    /// task signalling it has run (at the instance's completion if none does).
    pub fn postcondition(&mut self) -> PostId {
        self.posts += 1;
        PostId(self.posts - 1)
    }

    /// `post` waits for `task`.
    pub fn signal(&mut self, task: TaskId, post: PostId) {
        self.post_edges.push((task.0, post.0));
    }

    /// Checks the graph and lays it out for the workers of `handle`'s runtime.
    pub fn compile(self, handle: &Handle) -> Result<Subgraph<A>, SubgraphError> {
        let compiled = compile::Compiled::new(self, handle.workers())?;
        Ok(Subgraph {
            compiled: Arc::new(compiled),
            handle: handle.clone(),
        })
    }
}

/// A compiled, immutable subgraph, instantiated any number of times.
pub struct Subgraph<A> {
    compiled: Arc<compile::Compiled<A>>,
    handle: Handle,
}

impl<A: Send + Sync + 'static> Subgraph<A> {
    /// Number of tasks.
    pub fn tasks(&self) -> usize {
        self.compiled.tasks()
    }

    /// Launches one instance with argument `args`, once the events of `preconditions` (one per
    /// declared precondition, in order) allow its tasks to run. Tasks that wait for a poisoned
    /// precondition, or that come after a task that panicked, do not run; the instance's
    /// events are then poisoned with the first failure.
    ///
    /// # Panics
    /// If `preconditions` does not have one event per declared precondition.
    #[track_caller]
    pub fn instantiate(&self, args: A, preconditions: &[Event]) -> Instance {
        exec::instantiate(&self.compiled, &self.handle, args, preconditions, 0).0
    }

    /// Like [`Subgraph::instantiate`], but the last `inlets` preconditions are not events:
    /// they are opened through the returned [`Inlet`]s, in order (what a network layer uses
    /// for the messages an instance waits for). `preconditions` gives events for the others.
    ///
    /// # Panics
    /// If `preconditions.len() + inlets` is not the number of declared preconditions.
    #[track_caller]
    pub fn instantiate_with_inlets(
        &self,
        args: A,
        preconditions: &[Event],
        inlets: usize,
    ) -> (Instance, Vec<Inlet>) {
        exec::instantiate(&self.compiled, &self.handle, args, preconditions, inlets)
    }
}
