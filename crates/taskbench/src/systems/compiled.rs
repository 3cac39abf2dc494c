//! `compiled`: the graph's repeating body compiled once into a Tactor subgraph (per-worker
//! actors with private dependency counters, one message per cross-worker edge) and
//! instantiated over and over, each instance
//! chained to the previous one through external conditions — how an iterative application,
//! or Legion's tracing, would use compiled subgraphs.
//!
//! The graph is cut into chunks of timesteps: `[0, 1)`, then chunks of about `CHUNK_TASKS`
//! tasks (the last chunk may be shorter). Chunks with the same sequence of timestep shapes share one
//! compiled subgraph; each instance gets its first timestep as its argument. Graphs whose
//! shape keeps changing (dom, tree) are compiled whole, as a single chunk.
//!
//! Buffers are the two output rows (and scratch rows) of `bsp` and `tasks`. Inside a chunk,
//! the writer of a slot waits for the slot's previous readers (or its previous writer if none
//! read it), exactly as in `tasks`. Across chunks, a chunk's preconditions stand for what the
//! previous chunk left behind: per row and point "every user of this slot is done", and per
//! point "the last timestep's task is done"; its postconditions are the same, from its side.
//! A condition that a chunk does not touch is passed through to the next chunk unchanged.
//!
//! On several ranks each rank compiles only its own points ([`Cut`]); an edge that crosses
//! ranks becomes an external condition carried by one message per (timestep, pair of ranks)
//! (seed 000, Figure 9). On the sending side a vertex waits for the producers and sends their
//! outputs ([`super::remote`]); on the receiving side a vertex waits for an external
//! precondition that the message triggers (and for the readers of the slots it fills) and
//! copies the outputs into the row, like a task of the sending rank would have written them.

use super::on_tactor::{self, ErrorSlot};
use super::remote::{Cut, Remote};
use super::slots::Slots;
use super::team::Pass;
use super::{check_workers, footprint, run_shared_task, RunConfig, RunError, System};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tactor::{Event, Placement, Runtime, Scope, Subgraph, SubgraphBuilder, SubgraphTask};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// Subgraphs compiled from the graph's repeating body, chained instance after instance.
pub struct Compiled;

/// Least timesteps per chunk (even, so every chunk after the first starts on the same row
/// parity).
const MIN_CHUNK: i64 = 32;

/// Tasks per chunk aimed at: enough that instantiating a chunk (a few microseconds: its
/// events, subscriptions and one activation per worker) is small against running it.
const CHUNK_TASKS: i64 = 512;

/// Graphs with more distinct timestep shapes than this are compiled whole.
const MAX_SHAPES: usize = 16;

struct Data {
    plan: Plan,
    rows: [Slots; 2],
    scratch: [Slots; 2],
    error: Arc<ErrorSlot>,
    /// This graph's index among the `-and` graphs, its points on this rank and, on several
    /// ranks, the other ranks.
    index: u32,
    cut: Cut,
    remote: Option<Arc<Remote>>,
}

impl Data {
    fn run_point(&self, t: i64, p: i64) {
        if self.error.failed() {
            return;
        }
        let (row, prev) = (
            &self.rows[(t % 2) as usize],
            &self.rows[((t + 1) % 2) as usize],
        );
        // SAFETY: the subgraph orders every earlier reader and writer of slot `p` of this row
        // (and scratch row) before this task, and every later one after it (see the module
        // docs); across chunks the external conditions carry the same order.
        let (out, scratch) = unsafe {
            (
                row.write(p as usize),
                self.scratch[(t % 2) as usize].write(p as usize),
            )
        };
        // SAFETY: slot `d` of the previous row holds `(t-1, d)`'s output, which precedes this
        // task; its next writer comes after this task.
        let input = |d: i64| unsafe { prev.read(d as usize) };
        if let Err(e) = run_shared_task(&self.plan, t, p, out, scratch, input) {
            self.error.record(e);
        }
    }

    /// Sends the outputs of `points` at `t` to rank `dest`.
    fn send(&self, t: i64, dest: usize, points: &[i64]) {
        let remote = self
            .remote
            .as_ref()
            .expect("sends exist on several ranks only");
        let row = &self.rows[(t % 2) as usize];
        // SAFETY: the producers of these slots precede this vertex, and their next writers
        // come after it (it is one of their readers).
        let outputs = points.iter().map(|&q| unsafe { row.read(q as usize) });
        let channel = tactor::current_worker().unwrap_or(0);
        let bytes = self.plan.graph().output_bytes_per_task;
        remote.send(channel, dest, (self.index, t), bytes, outputs);
    }

    /// Copies the outputs of `points` at `t`, sent by rank `src`, into the row.
    fn receive(&self, t: i64, src: usize, points: &[i64]) {
        let remote = self
            .remote
            .as_ref()
            .expect("receives exist on several ranks only");
        let row = &self.rows[(t % 2) as usize];
        let bytes = self.plan.graph().output_bytes_per_task;
        // SAFETY: this vertex is the slots' writer for timestep `t`: it comes after the readers
        // of their previous contents, and the readers of what it writes come after it.
        remote.receive((self.index, t, src), points, bytes, |d| unsafe {
            row.write(d as usize)
        });
    }
}

/// Who must finish before a slot may be reused: a task of this chunk or an external
/// precondition.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    Task(SubgraphTask),
    Pre(usize),
}

/// A compiled chunk, which of its postconditions some task signals, and the messages its
/// receive vertices wait for: (timestep within the chunk, source rank), in the order of the
/// preconditions after the [`conditions`].
struct Chunk {
    graph: Subgraph<i64>,
    has_source: Vec<bool>,
    receives: Vec<(i64, usize)>,
}

/// Conditions per chunk: `2 * width` slot conditions (row-major), then `width` "last
/// timestep done" conditions.
fn conditions(width: usize) -> usize {
    3 * width
}

fn build_chunk(rt: &Runtime, data: &Arc<Data>, t0: i64, len: i64) -> Result<Chunk, RunError> {
    let plan = &data.plan;
    let cut = &data.cut;
    let w = plan.graph().max_width as usize;
    let mut b = SubgraphBuilder::<i64>::new();
    let pres: Vec<_> = (0..conditions(w)).map(|_| b.precondition()).collect();
    let posts: Vec<_> = (0..conditions(w)).map(|_| b.postcondition()).collect();
    let mut users: Vec<Vec<Src>> = (0..2 * w).map(|k| vec![Src::Pre(k)]).collect();
    let mut last: Vec<Src> = (0..w).map(|p| Src::Pre(2 * w + p)).collect();
    let mut ids = Vec::new();
    let (mut srcs, mut list, mut receives) = (Vec::new(), Vec::new(), Vec::new());
    let wire_all = |b: &mut SubgraphBuilder<i64>, srcs: &mut Vec<Src>, to: SubgraphTask| {
        srcs.sort_unstable_by_key(|s| match s {
            Src::Task(t) => (0, t.0 as usize),
            Src::Pre(k) => (1, *k),
        });
        srcs.dedup();
        for s in srcs.drain(..) {
            match s {
                Src::Task(from) => b.edge(from, to),
                Src::Pre(k) => b.wait_for(pres[k], to),
            }
        }
    };
    for i in 0..len {
        let t = t0 + i;
        let row = (t % 2) as usize;
        ids.clear();
        for p in cut.local(plan, t) {
            let d = data.clone();
            let id = b.task(cut.worker(p), move |t0: &i64| d.run_point(*t0 + i, p));
            srcs.extend(plan.deps(t, p).iter().map(|&d| last[d as usize]));
            srcs.extend(guards(&users[row * w + p as usize]));
            wire_all(&mut b, &mut srcs, id);
            ids.push((p, id));
        }
        for &(p, id) in &ids {
            users[row * w + p as usize] = vec![Src::Task(id)];
            for &d in plan.deps(t, p) {
                users[(1 - row) * w + d as usize].push(Src::Task(id));
            }
        }
        for (p, id) in ids.iter().copied() {
            last[p as usize] = Src::Task(id);
        }
        if data.remote.is_none() {
            continue;
        }
        // Outputs of `t` that other ranks read: one vertex per destination, after the
        // producers, counted among the slots' readers.
        cut.sends(plan, t, &mut list);
        for group in list.chunk_by(|a, b| a.0 == b.0) {
            let dest = group[0].0;
            let points: Vec<i64> = group.iter().map(|&(_, q)| q).collect();
            let worker = cut.worker(points[0]);
            srcs.extend(points.iter().map(|&q| last[q as usize]));
            let d = data.clone();
            let id = b.task(worker, move |t0: &i64| d.send(*t0 + i, dest, &points));
            wire_all(&mut b, &mut srcs, id);
            for &(_, q) in group {
                users[row * w + q as usize].push(Src::Task(id));
            }
        }
        // Outputs of `t` from other ranks: one vertex per source, after its message and the
        // readers of the slots it fills, on the worker nearest that rank's points.
        cut.receives(plan, t, &mut list);
        for group in list.chunk_by(|a, b| a.0 == b.0) {
            let src = group[0].0;
            let points: Vec<i64> = group.iter().map(|&(_, d)| d).collect();
            let readers = cut.local(plan, t + 1);
            let near = if points[0] < readers.start {
                readers.start
            } else {
                readers.end - 1
            };
            let pre = b.precondition();
            receives.push((i, src));
            for &d in &points {
                srcs.extend(guards(&users[row * w + d as usize]));
            }
            let d = data.clone();
            let id = b.task(cut.worker(near), move |t0: &i64| {
                d.receive(*t0 + i, src, &points)
            });
            b.wait_for(pre, id);
            wire_all(&mut b, &mut srcs, id);
            for &(_, d) in group {
                users[row * w + d as usize] = vec![Src::Task(id)];
                last[d as usize] = Src::Task(id);
            }
        }
    }
    let mut has_source = vec![false; conditions(w)];
    let finals = users
        .iter()
        .map(Vec::as_slice)
        .chain(last.iter().map(std::slice::from_ref));
    for (k, srcs) in finals.enumerate() {
        for s in srcs {
            if let Src::Task(t) = *s {
                b.signal(t, posts[k]);
                has_source[k] = true;
            }
        }
    }
    let graph = b
        .compile(rt)
        .map_err(|e| RunError::Runtime(format!("compiling a subgraph: {e}")))?;
    Ok(Chunk {
        graph,
        has_source,
        receives,
    })
}

/// What must finish before a slot with these `users` (its writer, then its readers) is written
/// again: the readers imply the writer (they read what it wrote); without readers, the writer.
fn guards(users: &[Src]) -> impl Iterator<Item = Src> + '_ {
    let g = if users.len() > 1 { &users[1..] } else { users };
    g.iter().copied()
}

/// The chunks of a graph: `(first timestep, length)`.
fn chunks(plan: &Plan) -> Vec<(i64, i64)> {
    let steps = plan.graph().timesteps;
    if plan.shapes() > MAX_SHAPES {
        return vec![(0, steps)];
    }
    let per_chunk = (CHUNK_TASKS / plan.graph().max_width.max(1)).max(MIN_CHUNK);
    let per_chunk = per_chunk + per_chunk % 2;
    let mut out = vec![(0, steps.min(1))];
    let mut t = 1;
    while t < steps {
        let len = per_chunk.min(steps - t);
        out.push((t, len));
        t += len;
    }
    out
}

/// One graph: its data, its chunks and their compiled subgraphs (shared by equal chunks).
struct GraphRun {
    data: Arc<Data>,
    chunks: Vec<(i64, Arc<Chunk>)>,
}

impl GraphRun {
    fn new(
        rt: &Runtime,
        plan: Plan,
        index: usize,
        cfg: &RunConfig,
        remote: &Option<Arc<Remote>>,
        error: &Arc<ErrorSlot>,
    ) -> Result<GraphRun, RunError> {
        let g = plan.graph();
        let width = g.max_width as usize;
        let scratch = || Slots::filled(width, &new_scratch(g.scratch_bytes_per_task));
        let (place, rank) = on_tactor::placement(cfg);
        let data = Arc::new(Data {
            rows: [
                Slots::new(width, g.output_bytes_per_task),
                Slots::new(width, g.output_bytes_per_task),
            ],
            scratch: [scratch(), scratch()],
            error: error.clone(),
            index: index as u32,
            cut: Cut::new(&plan, place, rank),
            remote: remote.clone(),
            plan,
        });
        // Equal chunks share a compiled subgraph: the same shapes from the same row parity,
        // and the same shape after them (which decides the last timestep's messages).
        type ChunkKey = (Vec<u32>, i64, Option<u32>);
        let mut cache: HashMap<ChunkKey, Arc<Chunk>> = HashMap::new();
        let mut chunks = Vec::new();
        for (t0, len) in self::chunks(&data.plan) {
            let key = (
                (t0..t0 + len)
                    .filter_map(|t| data.plan.shape_id(t))
                    .collect(),
                t0 % 2,
                data.plan.shape_id(t0 + len),
            );
            let chunk = match cache.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let c = Arc::new(build_chunk(rt, &data, t0, len)?);
                    cache.insert(key, c.clone());
                    c
                }
            };
            chunks.push((t0, chunk));
        }
        Ok(GraphRun { data, chunks })
    }

    /// The chain of instances of this graph, not yet instantiated.
    fn chain(&self) -> Chain<'_> {
        let w = self.data.plan.graph().max_width as usize;
        Chain {
            graph: self,
            next: 0,
            pre: (0..conditions(w)).map(|_| Event::triggered()).collect(),
        }
    }
}

/// Instantiates a graph's chunks in order, each chained to the previous one.
struct Chain<'a> {
    graph: &'a GraphRun,
    next: usize,
    pre: Vec<Event>,
}

impl Chain<'_> {
    /// Instantiates the next chunk; returns its completion event, or `None` after the last.
    fn step(&mut self) -> Option<Event> {
        let (t0, chunk) = self.graph.chunks.get(self.next)?;
        self.next += 1;
        let data = &self.graph.data;
        let mut pre = self.pre.clone();
        if let Some(remote) = &data.remote {
            pre.extend(
                chunk
                    .receives
                    .iter()
                    .map(|&(i, src)| remote.arrival((data.index, t0 + i, src))),
            );
        }
        let inst = chunk.graph.instantiate(*t0, &pre);
        for (k, post) in inst.postconditions.into_iter().enumerate() {
            if chunk.has_source[k] {
                self.pre[k] = post;
            }
        }
        Some(inst.completion)
    }
}

/// Keeps `AHEAD` instances of a chain in flight: each instance's completion instantiates the
/// next one, like an iterative application's launch window. (Instantiating everything up front
/// would leave hundreds of instances registered on every worker, each polled while idle.)
fn run_chain<'s>(s: &Scope<'s>, chain: &'s Mutex<Chain<'s>>, done: &'s Mutex<Vec<Event>>) {
    let next = chain.lock().unwrap_or_else(|p| p.into_inner()).step();
    if let Some(e) = next {
        done.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e.clone());
        s.launch(Placement::Any, &[e], move |s| run_chain(s, chain, done));
    }
}

/// Instances of one chain in flight at once.
const AHEAD: usize = 3;

impl System for Compiled {
    fn name(&self) -> &'static str {
        "compiled"
    }

    fn about(&self) -> &'static str {
        "Tactor compiled subgraphs: the graph's repeating body compiled into per-worker actors, instances chained"
    }

    fn runs_on_ranks(&self) -> bool {
        true
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Two rows of outputs and scratch, the compiled chunks (graphs whose shape keeps
        // changing are compiled whole) with a few instances in flight, and the runtime.
        let chunk = |steps: i64| steps.min(MIN_CHUNK.max(CHUNK_TASKS));
        footprint::rows(app, 2, 2)
            .saturating_add(footprint::per_task(app, chunk, 256, 48))
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let (rt, remote) = on_tactor::start(cfg)?;
        let error = Arc::new(ErrorSlot::new(remote.clone()));
        let graphs = app
            .graphs
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, g)| GraphRun::new(&rt, Plan::new(g), i, cfg, &remote, &error))
            .collect::<Result<Vec<_>, _>>()?;
        on_tactor::passes(&rt, &error, remote.as_deref(), || {
            // Instantiated from workers, so the launching thread does not compete with them
            // for the cores.
            let chains: Vec<Mutex<Chain>> = graphs.iter().map(|g| Mutex::new(g.chain())).collect();
            let done = Mutex::new(Vec::new());
            rt.scope(|s| {
                for chain in &chains {
                    let done = &done;
                    s.launch(Placement::Any, &[], move |s| {
                        for _ in 0..AHEAD {
                            run_chain(s, chain, done);
                        }
                    });
                }
            })
            .map_err(|e| RunError::Runtime(e.to_string()))?;
            let done = done.into_inner().unwrap_or_else(|p| p.into_inner());
            Event::merge(&done)
                .wait()
                .map_err(|e| RunError::Runtime(e.to_string()))
        })
    }
}
