//! Compiled subgraphs over the ranks of a job ([`ShardedBuilder`]): every rank describes the
//! whole graph with job-wide placements, compiles its shard, and the edges that cross ranks
//! become messages carrying their declared payloads, batched: one message per pair of ranks
//! and level of an instance.

mod messages;

use super::exchange::{Exchange, Inbox};
use crate::runtime::once_value::OnceValue;
use crate::subgraph::compile;
use crate::subgraph::{Instance, PostId, PreId, Subgraph, SubgraphBuilder, SubgraphError, TaskId};
use crate::{Event, Handle};
use messages::{Batch, Incoming, Item, Outbound, Pack, Packing, PoisonOnFailure, Stream, Wiring};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

type TaskFn<A> = Box<dyn Fn(&A, &Received<'_>) + Send + Sync>;

/// A receive that a task runs at its start ([`ShardedBuilder::compile`]): the number of its
/// message in the instance, and what pulls it into a buffer.
type Pull<A> = (u32, Box<dyn Fn(&Shard<A>, &mut Vec<u8>) + Send + Sync>);

std::thread_local! {
    /// The buffer a task pulls its message into, reused from task to task (a task that waits
    /// and lets another run meanwhile leaves the next one a fresh buffer).
    static PULLED: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Collects a subgraph over every rank of a job, the same on every rank (control
/// replication): tasks placed on job-wide workers (worker `w` is worker `w % W` of rank
/// `w / W`, with `W` workers per rank), edges, external conditions. [`compile`] keeps this
/// rank's tasks and turns the edges that cross ranks into messages: in each instance, the
/// edges from one rank to another travel together, sent once every source task of them ran
/// and checked on the receiving rank before any of their targets runs. Together means one
/// message per pair of ranks and *level*: an edge's level is the length of the longest path
/// to its source, so a message never waits for a task that waits for it, and its sources
/// tend to end at about the same time (a timestep of a stencil; an antidiagonal of a
/// wavefront, whose pipeline a message per pair and instance would stall).
///
/// An edge that carries data ([`edge_carrying`]) declares its size and how its bytes are
/// written; across ranks its target reads them where the message landed
/// ([`Received::from`]), kept for the instance (so a program that reuses its buffers
/// between tasks has no copy to order); within a rank it costs what a plain edge costs, and
/// the tasks share memory.
///
/// On a rank of one worker, the vertex that receives a message pulls it off the network
/// itself, read where it landed in the sender's ring when it can be ([`Exchange::pull`]);
/// it then waits in its vertex, so it is ordered after every message of its level and
/// below that its rank sends (a wait never holds what another rank waits for). With more
/// workers a message opens the instance's inlet instead, and nothing waits in a vertex.
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
/// // Worker 0 computes 6 × k; worker 1 adds 1 to it (on rank 1: the value crosses).
/// let got = Job::run_in_process(2, 1, |rt, job| {
///     let ex = Exchange::open(job, FIRST_PORT).unwrap();
///     ex.expect(true);
///     let (a, b) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
///     let mut g = ShardedBuilder::<u64>::new(ex.clone(), 0);
///     let (a1, a2, a3, b1) = (a.clone(), a.clone(), a.clone(), b.clone());
///     let x = g.task(0, move |k, _| a1.store(6 * k, SeqCst));
///     let y = g.task(1, move |_, got| {
///         let a = match got.from(x) {
///             Some(bytes) => u64::from_le_bytes(bytes.try_into().unwrap()),
///             None => a2.load(SeqCst), // on the same rank
///         };
///         b1.store(a + 1, SeqCst)
///     });
///     g.edge_carrying(x, y, 8, move |_, out| out.copy_from_slice(&a3.load(SeqCst).to_le_bytes()));
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
    /// The graph's shape: its tasks on their job-wide workers, edges and conditions, as
    /// [`SubgraphBuilder::compile`] checks them.
    shape: SubgraphBuilder<()>,
    funcs: Vec<TaskFn<A>>,
    /// Per edge, in the order of the shape's: its bytes, and how they are packed.
    payloads: Vec<(usize, Option<Pack<A>>)>,
}

/// What one instance of a rank's shard gets: the program's argument, the instance's number
/// (its messages' step), where its messages arrive and are kept.
struct Shard<A> {
    args: A,
    seq: i64,
    inbox: Inbox,
    /// Each message this rank receives in the instance, once checked.
    received: Box<[OnceValue<Vec<u8>>]>,
    /// Each message this rank sends in the instance, as its sources pack their items.
    outbox: Box<[Mutex<Vec<u8>>]>,
    /// Per message this rank sends in the instance: its source tasks still to run.
    left: Box<[AtomicU32]>,
    /// Per message this rank sends in the instance: taken by whoever sends it (its last
    /// source, or the failure that poisons it).
    sent: Arc<[AtomicBool]>,
}

/// What the edges into a task brought from other ranks in this instance.
pub struct Received<'a> {
    messages: &'a [OnceValue<Vec<u8>>],
    edges: &'a [Incoming],
    /// The message this task pulled at its start, if it did: its number and bytes.
    pulled: Option<(u32, &'a [u8])>,
}

impl<'a> Received<'a> {
    /// The bytes the edge from `from` to this task carried, if `from` ran on another rank
    /// (`None` within a rank, where the tasks share memory, and for an edge that carries
    /// nothing).
    pub fn from(&self, from: TaskId) -> Option<&'a [u8]> {
        let &(_, m, at, len) = self.edges.iter().find(|e| e.0 == from)?;
        let message = match self.pulled {
            Some((k, bytes)) if k == m => bytes,
            _ => self.messages[m as usize].get()?,
        };
        Some(&Exchange::payload(message)[at as usize..][..len as usize])
    }
}

impl<A: Send + Sync + 'static> ShardedBuilder<A> {
    /// An empty graph whose messages go through `exchange`, keyed by `stream` (one stream
    /// per graph of the program; each instance is one step of it).
    pub fn new(exchange: Arc<Exchange>, stream: u32) -> Self {
        ShardedBuilder {
            exchange,
            stream,
            shape: SubgraphBuilder::new(),
            funcs: Vec::new(),
            payloads: Vec::new(),
        }
    }

    /// Adds a task that runs `f` on job-wide worker `worker` in every instance (only the rank
    /// that owns the worker keeps `f`); `f` gets the instance's argument and what its edges
    /// from other ranks carried. Tasks are numbered from 0 in the order added.
    pub fn task(
        &mut self,
        worker: usize,
        f: impl Fn(&A, &Received<'_>) + Send + Sync + 'static,
    ) -> TaskId {
        self.funcs.push(Box::new(f));
        self.shape.task(worker, |_| ())
    }

    /// `to` runs after `from` in every instance (across ranks: an item of no bytes in the
    /// message between their ranks).
    pub fn edge(&mut self, from: TaskId, to: TaskId) {
        self.shape.edge(from, to);
        self.payloads.push((0, None));
    }

    /// `to` runs after `from`, and across ranks `bytes` bytes travel with the edge: `pack`
    /// writes them on `from`'s worker right after `from` ran (so before anything ordered
    /// after `from` changes what they are made of), and `to` reads them with
    /// [`Received::from`]. Within a rank `pack` is not called.
    pub fn edge_carrying(
        &mut self,
        from: TaskId,
        to: TaskId,
        bytes: usize,
        pack: impl Fn(&A, &mut [u8]) + Send + Sync + 'static,
    ) {
        self.shape.edge(from, to);
        self.payloads.push((bytes, Some(Arc::new(pack))));
    }

    /// Declares an external precondition: every rank gives an event for it to
    /// [`Sharded::instantiate`], which the tasks of that rank that wait for it wait on.
    pub fn precondition(&mut self) -> PreId {
        self.shape.precondition()
    }

    /// `task` waits for external precondition `pre` (on its rank).
    pub fn wait_for(&mut self, pre: PreId, task: TaskId) {
        self.shape.wait_for(pre, task)
    }

    /// Declares an external postcondition: on each rank, an event of each instance that
    /// triggers when that rank's tasks signalling it have run (at the rank's completion of
    /// the instance if none does).
    pub fn postcondition(&mut self) -> PostId {
        self.shape.postcondition()
    }

    /// `post` waits for `task`.
    pub fn signal(&mut self, task: TaskId, post: PostId) {
        self.shape.signal(task, post)
    }

    /// Checks the whole graph (the same verdict on every rank) and compiles this rank's
    /// shard for `handle`'s runtime, one of the same size on every rank.
    ///
    /// # Errors
    /// As [`SubgraphBuilder::compile`] over the job's workers.
    pub fn compile(self, handle: &Handle) -> Result<Sharded<A>, SubgraphError> {
        let (w, job) = (handle.workers(), self.exchange.job().clone());
        let (me, ranks) = (job.rank(), job.ranks());
        let shape = &self.shape;
        let (workers, edges) = (shape.workers.clone(), shape.edges.clone());
        let (pre_edges, post_edges) = (shape.pre_edges.clone(), shape.post_edges.clone());
        let (pres, posts) = (shape.pres, shape.posts);
        // The whole graph's verdict, the same on every rank (only this rank's shard is laid
        // out, below): a cycle may close through several ranks.
        compile::check(shape, w * ranks)?;
        let level = levels(workers.len(), &edges).map_err(SubgraphError::Cycle)?;
        let rank_of = |t: u32| workers[t as usize] / w;
        let levels = (edges.iter().map(|e| level[e.0 as usize] + 1))
            .max()
            .unwrap_or(1);
        let stream = Stream {
            id: self.stream,
            levels,
        };
        // Messages: per level and ordered pair of ranks, its edges in the order declared;
        // and per task of this rank, where the items into it land.
        let mut batches: BTreeMap<(i64, usize, usize), Batch<A>> = BTreeMap::new();
        let mut local_edges = Vec::new();
        for (&(from, to), (bytes, pack)) in edges.iter().zip(self.payloads) {
            let (rf, rt) = (rank_of(from), rank_of(to));
            if rf == rt {
                local_edges.push((from, to));
                continue;
            }
            let l = level[from as usize];
            let b = batches.entry((l, rf, rt)).or_insert_with(|| Batch {
                rank: if rf == me { rt } else { rf },
                level: l,
                items: Vec::new(),
                bytes: 0,
            });
            b.bytes += bytes;
            b.items.push(Item {
                from,
                to,
                bytes,
                pack,
            });
        }
        let n = self.funcs.len();
        let mut into: Vec<Vec<Incoming>> = vec![Vec::new(); n];
        let incoming = batches.iter().filter(|(k, _)| k.2 == me).map(|(_, b)| b);
        for (k, batch) in incoming.enumerate() {
            let mut at = 0;
            for e in &batch.items {
                into[e.to as usize].push((TaskId(e.from), k as u32, at as u32, e.bytes as u32));
                at += e.bytes;
            }
        }
        let mut out: Vec<Vec<Packing<A>>> = (0..n).map(|_| Vec::new()).collect();
        let mut sourced: Vec<Vec<u32>> = vec![Vec::new(); n];
        let (mut to, mut sources) = (Vec::new(), Vec::new());
        let outgoing = batches.iter().filter(|(k, _)| k.1 == me).map(|(_, b)| b);
        for (k, batch) in outgoing.enumerate() {
            let mut at = 0;
            sources.push(0);
            for e in &batch.items {
                if let Some(pack) = &e.pack {
                    out[e.from as usize].push((k as u32, at, e.bytes, pack.clone()));
                }
                at += e.bytes;
                // A batch's items are visited together: a source seen twice is its last.
                let of = &mut sourced[e.from as usize];
                if of.last() != Some(&(k as u32)) {
                    of.push(k as u32);
                    *sources.last_mut().expect("pushed below") += 1;
                }
            }
            to.push((batch.rank, batch.level, batch.items.len(), batch.bytes));
        }
        let mut wiring = Wiring::new(Outbound {
            exchange: self.exchange.clone(),
            stream,
            to,
            sources,
        });
        // This rank's shard: its tasks, renumbered (each sends what it is the last source
        // of), then a vertex per message it receives.
        let ex = self.exchange.clone();
        // With one worker a rank's receives pull their messages in their vertex: no inlet,
        // inbox or mailbox hop between the network and the targets. With more, a message
        // opens an inlet, and its vertex never holds a worker its targets' neighbours need.
        let pull = w == 1;
        // A pulled message whose items all go to one task, a level above the message, that
        // no other message reaches (a stencil's, every one), is pulled by that task at its
        // start: one vertex less between the network and the task. It is ordered as a
        // receive vertex would be (`order_pulls`), which stays acyclic: what it is ordered
        // after (sends of its message's level and below, receives of a level no higher) is
        // below it or not reachable from it, and no receive ordered after it leads to it.
        let mut fused: Vec<Option<Pull<A>>> = (0..n).map(|_| None).collect();
        let mut fused_k = Vec::new();
        let into_me = || (batches.iter()).filter(|(k, _)| k.2 == me).map(|(_, b)| b);
        let target = |batch: &Batch<A>| {
            let t = batch.items[0].to;
            (batch.items.iter().all(|e| e.to == t) && level[t as usize] == batch.level + 1)
                .then_some(t as usize)
        };
        // Messages into each task: a task that another message reaches (through its own
        // receive vertex, which may be ordered after the pull) must not pull one itself.
        let mut pulls_into = vec![0u32; n];
        for batch in into_me() {
            let mut to: Vec<u32> = batch.items.iter().map(|e| e.to).collect();
            to.sort_unstable();
            to.dedup();
            to.iter().for_each(|&t| pulls_into[t as usize] += 1);
        }
        for (k, batch) in into_me().enumerate() {
            let one = target(batch).filter(|&t| pull && pulls_into[t] == 1);
            if let Some(t) = one {
                let pull = messages::pull_into(&ex, stream, batch);
                fused[t] = Some((k as u32, Box::new(pull)));
            }
            fused_k.push(one);
        }
        let mut local = vec![u32::MAX; self.funcs.len()];
        let mut b = SubgraphBuilder::<Shard<A>>::new();
        let (mut sends, mut mine) = (Vec::new(), Vec::new());
        let tasks = self.funcs.into_iter().zip(into).zip(out).zip(sourced);
        for (t, (((f, into), out), sourced)) in tasks.enumerate() {
            if workers[t] / w == me {
                if !sourced.is_empty() {
                    sends.push((level[t], TaskId(mine.len() as u32)));
                }
                mine.push((t, f, wiring.push(into, out, sourced)));
            }
        }
        let wiring = Arc::new(wiring);
        for (t, f, i) in mine {
            let wiring = wiring.clone();
            let pull_first = fused[t].take();
            let id = b.task(workers[t] % w, move |s: &Shard<A>| {
                let mut buffer = Vec::new();
                let pulled = pull_first.as_ref().map(|(k, pull)| {
                    buffer = PULLED.take();
                    pull(s, &mut buffer);
                    (*k, &buffer[..])
                });
                let got = Received {
                    messages: &s.received,
                    edges: wiring.incoming(i),
                    pulled,
                };
                f(&s.args, &got);
                if pull_first.is_some() {
                    PULLED.set(buffer);
                }
                wiring.ran(s, i);
            });
            local[t] = id.0;
        }
        let id = |t: u32| TaskId(local[t as usize]);
        for &(from, to) in local_edges.iter().filter(|e| rank_of(e.0) == me) {
            b.edge(id(from), id(to));
        }
        for _ in 0..pres {
            b.precondition();
        }
        for &(pre, t) in pre_edges.iter().filter(|e| rank_of(e.1) == me) {
            b.wait_for(PreId(pre), id(t));
        }
        for _ in 0..posts {
            b.postcondition();
        }
        for &(t, post) in post_edges.iter().filter(|e| rank_of(e.0) == me) {
            b.signal(id(t), PostId(post));
        }
        let mut incoming = Vec::new();
        let mut receives = Vec::new();
        for ((_, rf, rt), batch) in batches {
            let ends = |end: fn(&Item<A>) -> u32| {
                let mut v: Vec<u32> = batch.items.iter().map(end).collect();
                v.sort_unstable();
                v.dedup();
                v
            };
            if rt == me && rf != me {
                let k = incoming.len();
                incoming.push((batch.rank, batch.level));
                if let Some(t) = fused_k[k] {
                    receives.push((batch.level, id(t as u32)));
                    continue;
                }
                let worker = workers[batch.items[0].to as usize] % w;
                let v = b.task(
                    worker,
                    messages::receive_vertex(&ex, stream, k, &batch, pull),
                );
                if !pull {
                    let inlet = b.precondition();
                    b.wait_for(inlet, v);
                }
                for t in ends(|e| e.to) {
                    b.edge(v, id(t));
                }
                receives.push((batch.level, v));
            }
        }
        if pull {
            order_pulls(&mut b, sends, receives);
        }
        Ok(Sharded {
            graph: b.compile(handle)?,
            exchange: self.exchange,
            stream,
            incoming,
            wiring,
            pull,
            next: AtomicI64::new(0),
        })
    }
}

/// Orders a rank's pulling receives (`(level, vertex)`) after every send of this rank
/// (`(level, vertex)`) of their level and below, and after each other by level. A pull waits
/// in its vertex, holding what its worker has left to run of the instance; so held, it only
/// waits for a message of its level `l`, whose sources (at level `l`) wait for messages of
/// levels below `l` alone — all sent before any pull of level `l` or more here, on every rank
/// — so by induction over levels every message leaves and every pull ends. Were a pull of
/// level `l` to run before this rank's own sends of level `l`, two ranks could each hold the
/// source of what the other waits for.
fn order_pulls<S: Send + Sync + 'static>(
    b: &mut SubgraphBuilder<S>,
    mut sends: Vec<(i64, TaskId)>,
    mut receives: Vec<(i64, TaskId)>,
) {
    sends.sort_by_key(|s| s.0);
    receives.sort_by_key(|r| r.0);
    let (mut next, mut before) = (0, None);
    for (level, v) in receives {
        while let Some(&(_, s)) = sends.get(next).filter(|s| s.0 <= level) {
            b.edge(s, v);
            next += 1;
        }
        if let Some(prev) = before.replace(v) {
            b.edge(prev, v);
        }
    }
}

/// Per task of a graph of `n` tasks with `edges` (checked), the length of the longest path
/// to it; if the edges close a cycle, the first task on or after one.
fn levels(n: usize, edges: &[(u32, u32)]) -> Result<Vec<i64>, u32> {
    let mut succ: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut preds = vec![0usize; n];
    for &(from, to) in edges {
        succ[from as usize].push(to);
        preds[to as usize] += 1;
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
    match preds.iter().position(|&p| p > 0) {
        Some(t) => Err(t as u32),
        None => Ok(level),
    }
}

/// A subgraph over the ranks of a job, compiled for this rank ([`ShardedBuilder`]).
pub struct Sharded<A> {
    graph: Subgraph<Shard<A>>,
    exchange: Arc<Exchange>,
    stream: Stream,
    /// The rank and level of each message this rank receives per instance.
    incoming: Vec<(usize, i64)>,
    /// What this rank's tasks receive and send (the messages it sends per instance).
    wiring: Arc<Wiring<A>>,
    /// Its receives pull their messages (no inlets).
    pull: bool,
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
        let inlets = if self.pull { 0 } else { self.incoming.len() };
        let inbox: Inbox = (0..inlets).map(|_| Mutex::new(None)).collect();
        let out = &self.wiring.outbound;
        let sent: Arc<[AtomicBool]> = out.to.iter().map(|_| AtomicBool::new(false)).collect();
        let shard = Shard {
            args,
            seq,
            inbox: inbox.clone(),
            received: self.incoming.iter().map(|_| OnceValue::new()).collect(),
            // A message of one source is packed in its worker's buffer instead.
            outbox: (out.to.iter().zip(&out.sources))
                .map(|(m, &n)| Mutex::new(vec![0; if n > 1 { m.3 } else { 0 }]))
                .collect(),
            left: out.sources.iter().map(|&n| AtomicU32::new(n)).collect(),
            sent: sent.clone(),
        };
        let (instance, inlets) = (self.graph).instantiate_with_inlets(shard, preconditions, inlets);
        if !inlets.is_empty() {
            let step = |l: i64| self.stream.step(seq, l);
            let keys = (self.incoming.iter()).map(|&(r, l)| (self.stream.id, step(l), r));
            self.exchange.inlets(&inbox, keys.zip(inlets));
        }
        if !out.to.is_empty() {
            instance
                .completion
                .state()
                .subscribe(Arc::new(PoisonOnFailure {
                    wiring: self.wiring.clone(),
                    seq,
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
