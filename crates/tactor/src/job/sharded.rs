//! Compiled subgraphs over the ranks of a job ([`ShardedBuilder`]): every rank describes the
//! whole graph with job-wide placements, compiles its shard, and the edges that cross ranks
//! become messages carrying their declared payloads, batched: one message per pair of ranks
//! and level of an instance.

use super::exchange::{Exchange, Inbox, Key};
use crate::countdown::Outcome;
use crate::event::Notify;
use crate::subgraph::compile::Compiled;
use crate::subgraph::{Instance, PostId, PreId, Subgraph, SubgraphBuilder, SubgraphError, TaskId};
use crate::{Event, Handle};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

type TaskFn<A> = Box<dyn Fn(&A) + Send + Sync>;
type Pack<A> = Arc<dyn Fn(&A, &mut [u8]) + Send + Sync>;
type Unpack<A> = Arc<dyn Fn(&A, &[u8]) + Send + Sync>;

/// An edge as declared: its payload (none for an edge that only orders).
struct Edge<A> {
    from: u32,
    to: u32,
    bytes: usize,
    pack: Option<Pack<A>>,
    unpack: Option<Unpack<A>>,
}

/// A message's count field that says "poisoned": the payload is the cause.
const POISON: usize = u32::MAX as usize;

/// Collects a subgraph over every rank of a job, the same on every rank (control
/// replication): tasks placed on job-wide workers (worker `w` is worker `w % W` of rank
/// `w / W`, with `W` workers per rank), edges, external conditions. [`compile`] keeps this
/// rank's tasks and turns the edges that cross ranks into messages: in each instance, the
/// edges from one rank to another travel together, sent once every source task of them ran
/// and unpacked on the receiving rank before any of their targets runs. Together means one
/// message per pair of ranks and *level*: an edge's level is the length of the longest path
/// to its source, so a message never waits for a task that waits for it, and its sources
/// tend to end at about the same time (a timestep of a stencil; an antidiagonal of a
/// wavefront, whose pipeline a message per pair and instance would stall). An edge
/// that carries data ([`edge_carrying`]) declares its size and how its bytes are written
/// and read; within a rank it costs nothing more than a plain edge (the tasks share memory).
///
/// A task that fails poisons its dependents on every rank: its rank sends, in place of
/// each message of the instance it did not send, the cause, and the receiving tasks fail
/// with it.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
/// use std::sync::Arc;
/// use tactor::job::{Exchange, Job, ShardedBuilder, FIRST_PORT};
///
/// // Rank 0 computes 6 × k; rank 1 adds 1 to it: the value crosses as 8 bytes.
/// let got = Job::run_in_process(2, 1, |rt, job| {
///     let ex = Exchange::open(job, FIRST_PORT).unwrap();
///     ex.expect(true);
///     let (a, b) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
///     let mut g = ShardedBuilder::<u64>::new(ex.clone(), 0);
///     let (a1, a2, a3, b1) = (a.clone(), a.clone(), a.clone(), b.clone());
///     let x = g.task(0, move |k| a1.store(6 * k, SeqCst));
///     let y = g.task(1, move |_| b1.store(a2.load(SeqCst) + 1, SeqCst));
///     g.edge_carrying(
///         x,
///         y,
///         8,
///         move |_, out| out.copy_from_slice(&a3.load(SeqCst).to_le_bytes()),
///         move |_, bytes| a.store(u64::from_le_bytes(bytes.try_into().unwrap()), SeqCst),
///     );
///     let graph = g.compile(rt).unwrap();
///     graph.instantiate(7, &[]).completion.wait().unwrap();
///     b.load(SeqCst)
/// });
/// assert_eq!(got[1].as_ref().unwrap(), &43);
/// ```
///
/// [`compile`]: ShardedBuilder::compile
/// [`edge_carrying`]: ShardedBuilder::edge_carrying
pub struct ShardedBuilder<A> {
    exchange: Arc<Exchange>,
    stream: u32,
    workers: Vec<usize>,
    funcs: Vec<TaskFn<A>>,
    edges: Vec<Edge<A>>,
    pres: u32,
    pre_edges: Vec<(u32, u32)>,
    posts: u32,
    post_edges: Vec<(u32, u32)>,
}

/// What one instance of a rank's shard gets: the program's argument, the instance's number
/// (its messages' step) and where its messages arrive.
struct Shard<A> {
    args: A,
    seq: i64,
    inbox: Inbox,
    /// Per message this rank sends in the instance: taken by whoever sends it (the vertex
    /// that packs it, or the failure that poisons it).
    sent: Arc<[AtomicBool]>,
}

/// The edges of one message: where it goes (or comes from), its level, its tasks, payloads.
struct Batch<A> {
    rank: usize,
    level: i64,
    edges: Vec<Edge<A>>,
    bytes: usize,
}

impl<A: Send + Sync + 'static> ShardedBuilder<A> {
    /// An empty graph whose messages go through `exchange`, keyed by `stream` (one stream
    /// per graph of the program; each instance is one step of it).
    pub fn new(exchange: Arc<Exchange>, stream: u32) -> Self {
        ShardedBuilder {
            exchange,
            stream,
            workers: Vec::new(),
            funcs: Vec::new(),
            edges: Vec::new(),
            pres: 0,
            pre_edges: Vec::new(),
            posts: 0,
            post_edges: Vec::new(),
        }
    }

    /// Adds a task that runs `f` on job-wide worker `worker` in every instance (only the rank
    /// that owns the worker keeps `f`).
    pub fn task(&mut self, worker: usize, f: impl Fn(&A) + Send + Sync + 'static) -> TaskId {
        self.workers.push(worker);
        self.funcs.push(Box::new(f));
        TaskId(self.funcs.len() as u32 - 1)
    }

    /// `to` runs after `from` in every instance (across ranks: an item of no bytes in the
    /// message between their ranks).
    pub fn edge(&mut self, from: TaskId, to: TaskId) {
        self.edges.push(Edge {
            from: from.0,
            to: to.0,
            bytes: 0,
            pack: None,
            unpack: None,
        });
    }

    /// `to` runs after `from`, and across ranks `bytes` bytes travel with the edge: `pack`
    /// writes them on `from`'s rank once `from` ran, `unpack` reads them on `to`'s rank
    /// before `to` runs (and after the preconditions `to` waits for). Within a rank neither
    /// is called.
    pub fn edge_carrying(
        &mut self,
        from: TaskId,
        to: TaskId,
        bytes: usize,
        pack: impl Fn(&A, &mut [u8]) + Send + Sync + 'static,
        unpack: impl Fn(&A, &[u8]) + Send + Sync + 'static,
    ) {
        self.edges.push(Edge {
            from: from.0,
            to: to.0,
            bytes,
            pack: Some(Arc::new(pack)),
            unpack: Some(Arc::new(unpack)),
        });
    }

    /// Declares an external precondition: every rank gives an event for it to
    /// [`Sharded::instantiate`], which the tasks of that rank that wait for it wait on.
    pub fn precondition(&mut self) -> PreId {
        self.pres += 1;
        PreId(self.pres - 1)
    }

    /// `task` waits for external precondition `pre` (on its rank).
    pub fn wait_for(&mut self, pre: PreId, task: TaskId) {
        self.pre_edges.push((pre.0, task.0));
    }

    /// Declares an external postcondition: on each rank, an event of each instance that
    /// triggers when that rank's tasks signalling it have run (at the rank's completion of
    /// the instance if none does).
    pub fn postcondition(&mut self) -> PostId {
        self.posts += 1;
        PostId(self.posts - 1)
    }

    /// `post` waits for `task`.
    pub fn signal(&mut self, task: TaskId, post: PostId) {
        self.post_edges.push((task.0, post.0));
    }

    /// Checks the whole graph (the same verdict on every rank) and compiles this rank's
    /// shard for `handle`'s runtime, one of the same size on every rank.
    ///
    /// # Errors
    /// As [`SubgraphBuilder::compile`] over the job's workers.
    pub fn compile(self, handle: &Handle) -> Result<Sharded<A>, SubgraphError> {
        let (w, job) = (handle.workers(), self.exchange.job().clone());
        let (me, ranks) = (job.rank(), job.ranks());
        let rank_of = |t: u32| self.workers[t as usize] / w;
        self.check(w * ranks)?;
        let level = self.levels();
        let levels = self
            .edges
            .iter()
            .map(|e| level[e.from as usize] + 1)
            .max()
            .unwrap_or(1);
        // Messages: per level and ordered pair of ranks, its edges in the order declared.
        let mut batches: BTreeMap<(i64, usize, usize), Batch<A>> = BTreeMap::new();
        let mut local_edges = Vec::new();
        for e in &self.edges {
            let (rf, rt) = (rank_of(e.from), rank_of(e.to));
            if rf == rt {
                local_edges.push((e.from, e.to));
                continue;
            }
            let p = level[e.from as usize];
            let b = batches.entry((p, rf, rt)).or_insert_with(|| Batch {
                rank: 0,
                level: p,
                edges: Vec::new(),
                bytes: 0,
            });
            b.bytes += e.bytes;
            b.edges.push(Edge {
                pack: e.pack.clone(),
                unpack: e.unpack.clone(),
                ..*e
            });
        }
        // This rank's shard: its tasks, renumbered, then a vertex per message.
        let mut local = vec![u32::MAX; self.funcs.len()];
        let mut b = SubgraphBuilder::<Shard<A>>::new();
        for (t, f) in self.funcs.into_iter().enumerate() {
            if self.workers[t] / w == me {
                let worker = self.workers[t] % w;
                local[t] = b.task(worker, move |s: &Shard<A>| f(&s.args)).0;
            }
        }
        let id = |t: u32| TaskId(local[t as usize]);
        for &(from, to) in &local_edges {
            if rank_of(from) == me {
                b.edge(id(from), id(to));
            }
        }
        for _ in 0..self.pres {
            b.precondition();
        }
        for &(pre, t) in &self.pre_edges {
            if rank_of(t) == me {
                b.wait_for(PreId(pre), id(t));
            }
        }
        for _ in 0..self.posts {
            b.postcondition();
        }
        for &(t, post) in &self.post_edges {
            if rank_of(t) == me {
                b.signal(id(t), PostId(post));
            }
        }
        let (stream, ex) = (self.stream, self.exchange.clone());
        let mut outgoing = Vec::new();
        let mut incoming = Vec::new();
        for ((_, rf, rt), mut batch) in batches {
            if rf == me {
                batch.rank = rt;
                let k = outgoing.len();
                let worker = self.workers[batch.edges[0].from as usize] % w;
                let send = send_vertex(&ex, (stream, levels), k, &batch);
                let v = b.task(worker, send);
                let mut sources: Vec<u32> = batch.edges.iter().map(|e| e.from).collect();
                sources.sort_unstable();
                sources.dedup();
                for s in sources {
                    b.edge(id(s), v);
                }
                outgoing.push(batch);
            } else if rt == me {
                batch.rank = rf;
                let k = incoming.len();
                let worker = self.workers[batch.edges[0].to as usize] % w;
                let v = b.task(worker, receive_vertex(&ex, (stream, levels), k, &batch));
                let inlet = b.precondition();
                b.wait_for(inlet, v);
                let mut targets: Vec<u32> = batch.edges.iter().map(|e| e.to).collect();
                targets.sort_unstable();
                targets.dedup();
                let mut pres = Vec::new();
                for &t in &targets {
                    b.edge(v, id(t));
                    pres.extend(self.pre_edges.iter().filter(|p| p.1 == t).map(|p| p.0));
                }
                // Unpacked no earlier than its targets could run.
                pres.sort_unstable();
                pres.dedup();
                for p in pres {
                    b.wait_for(PreId(p), v);
                }
                incoming.push((batch.rank, batch.level));
            }
        }
        Ok(Sharded {
            graph: b.compile(handle)?,
            exchange: self.exchange,
            stream,
            incoming,
            outgoing: outgoing.iter().map(|b| (b.rank, b.level)).collect(),
            levels,
            next: AtomicI64::new(0),
        })
    }

    /// Per task, the length of the longest path to it (a checked graph: acyclic).
    fn levels(&self) -> Vec<i64> {
        let n = self.funcs.len();
        let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut preds = vec![0usize; n];
        for e in &self.edges {
            succ[e.from as usize].push(e.to);
            preds[e.to as usize] += 1;
        }
        let mut level = vec![0i64; n];
        let mut ready: Vec<usize> = (0..n).filter(|&t| preds[t] == 0).collect();
        while let Some(t) = ready.pop() {
            for &s in &succ[t] {
                let s = s as usize;
                level[s] = level[s].max(level[t] + 1);
                preds[s] -= 1;
                if preds[s] == 0 {
                    ready.push(s);
                }
            }
        }
        level
    }

    /// The whole graph's tasks, workers and conditions, as [`SubgraphBuilder::compile`]
    /// checks them.
    fn check(&self, workers: usize) -> Result<(), SubgraphError> {
        let mut all = SubgraphBuilder::<()>::new();
        for &wk in &self.workers {
            all.task(wk, |_| ());
        }
        for e in &self.edges {
            all.edge(TaskId(e.from), TaskId(e.to));
        }
        for _ in 0..self.pres {
            all.precondition();
        }
        for &(p, t) in &self.pre_edges {
            all.wait_for(PreId(p), TaskId(t));
        }
        for _ in 0..self.posts {
            all.postcondition();
        }
        for &(t, p) in &self.post_edges {
            all.signal(TaskId(t), PostId(p));
        }
        Compiled::new(all, workers).map(|_| ())
    }
}

/// The vertex that packs and sends message `k` of an instance.
fn send_vertex<A: Send + Sync + 'static>(
    ex: &Arc<Exchange>,
    (stream, levels): (u32, i64),
    k: usize,
    batch: &Batch<A>,
) -> impl Fn(&Shard<A>) + Send + Sync + 'static {
    let (ex, dest, total, level) = (ex.clone(), batch.rank, batch.bytes, batch.level);
    let items: Vec<(usize, Option<Pack<A>>)> = batch
        .edges
        .iter()
        .map(|e| (e.bytes, e.pack.clone()))
        .collect();
    move |s: &Shard<A>| {
        if s.sent[k].swap(true, Ordering::AcqRel) {
            return;
        }
        let mut buf = vec![0u8; total];
        let mut at = 0;
        for (bytes, pack) in &items {
            if let Some(pack) = pack {
                pack(&s.args, &mut buf[at..at + bytes]);
            }
            at += bytes;
        }
        let channel = crate::current_worker().unwrap_or(0);
        let step = s.seq * levels + level;
        ex.send_buffer(channel, dest, (stream, step), items.len(), &buf);
    }
}

/// The vertex that takes message `k` of an instance from its inbox slot and unpacks it.
fn receive_vertex<A: Send + Sync + 'static>(
    ex: &Arc<Exchange>,
    (stream, levels): (u32, i64),
    k: usize,
    batch: &Batch<A>,
) -> impl Fn(&Shard<A>) + Send + Sync + 'static {
    let (ex, source, total, level) = (ex.clone(), batch.rank, batch.bytes, batch.level);
    let items: Vec<(usize, Option<Unpack<A>>)> = batch
        .edges
        .iter()
        .map(|e| (e.bytes, e.unpack.clone()))
        .collect();
    move |s: &Shard<A>| {
        let key: Key = (stream, s.seq * levels + level, source);
        let data = s.inbox[k]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(cause) = data.as_deref().and_then(poisoned) {
            crate::fail(format!("rank {source}: {cause}"));
        }
        let Some(payload) = ex.check(key, data.as_deref(), items.len(), total) else {
            crate::fail(format!(
                "stream {stream}: the message of step {} from rank {source} broke the protocol",
                key.1
            ));
        };
        let mut at = 0;
        for (bytes, unpack) in &items {
            if let Some(unpack) = unpack {
                unpack(&s.args, &payload[at..at + bytes]);
            }
            at += bytes;
        }
    }
}

/// The cause a poisoned message carries, if it is one.
fn poisoned(message: &[u8]) -> Option<String> {
    let count = u32::from_le_bytes(message.get(4..8)?.try_into().ok()?) as usize;
    (count == POISON).then(|| String::from_utf8_lossy(Exchange::payload(message)).into_owned())
}

/// A subgraph over the ranks of a job, compiled for this rank ([`ShardedBuilder`]).
pub struct Sharded<A> {
    graph: Subgraph<Shard<A>>,
    exchange: Arc<Exchange>,
    stream: u32,
    /// The rank and level of each message this rank receives per instance, and sends.
    incoming: Vec<(usize, i64)>,
    outgoing: Vec<(usize, i64)>,
    /// Levels per instance: message `(p, r)` of instance `k` is step `k × levels + p`.
    levels: i64,
    /// The next instance's number: every rank instantiates in the same order.
    next: AtomicI64,
}

impl<A: Send + Sync + 'static> Sharded<A> {
    /// Launches this rank's part of one instance with argument `args`, once the events of
    /// `preconditions` (one per declared precondition) allow; every rank instantiates the
    /// graph the same number of times, in the same order. The messages of an instance arrive
    /// while the runtime's idle workers poll the network (the exchange's
    /// [`expect`](Exchange::expect), as in a round).
    ///
    /// # Panics
    /// If `preconditions` does not have one event per declared precondition.
    #[track_caller]
    pub fn instantiate(&self, args: A, preconditions: &[Event]) -> Instance {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let inbox: Inbox = self.incoming.iter().map(|_| Mutex::new(None)).collect();
        let sent: Arc<[AtomicBool]> = self
            .outgoing
            .iter()
            .map(|_| AtomicBool::new(false))
            .collect();
        let shard = Shard {
            args,
            seq,
            inbox: inbox.clone(),
            sent: sent.clone(),
        };
        let (instance, inlets) =
            self.graph
                .instantiate_with_inlets(shard, preconditions, self.incoming.len());
        let step = |p: i64| seq * self.levels + p;
        let keys = (self.incoming.iter()).map(|&(r, p)| (self.stream, step(p), r));
        self.exchange.inlets(&inbox, keys.zip(inlets));
        if !self.outgoing.is_empty() {
            instance
                .completion
                .state()
                .subscribe(Arc::new(PoisonOnFailure {
                    exchange: self.exchange.clone(),
                    stream: self.stream,
                    to: (self.outgoing.iter()).map(|&(r, p)| (r, step(p))).collect(),
                    sent,
                }));
        }
        instance
    }

    /// Tasks of this rank's shard, the vertices of its messages included.
    pub fn tasks(&self) -> usize {
        self.graph.tasks()
    }
}

/// Sends the cause of an instance's failure in place of each of its messages not sent.
struct PoisonOnFailure {
    exchange: Arc<Exchange>,
    stream: u32,
    /// Each message's rank and step.
    to: Vec<(usize, i64)>,
    sent: Arc<[AtomicBool]>,
}

impl Notify for PoisonOnFailure {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        let Err(failure) = outcome else {
            return;
        };
        let cause = failure.to_string();
        for (k, &(dest, step)) in self.to.iter().enumerate() {
            if !self.sent[k].swap(true, Ordering::AcqRel) {
                let channel = crate::current_worker().unwrap_or(0);
                let key = (self.stream, step);
                (self.exchange).send_buffer(channel, dest, key, POISON, cause.as_bytes());
            }
        }
    }
}
