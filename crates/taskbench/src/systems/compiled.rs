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

use super::on_tactor::{self, ErrorSlot};
use super::slots::Slots;
use super::team::Pass;
use super::{block_owners, check_workers, footprint, run_shared_task, RunConfig, RunError, System};
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
}

/// Who must finish before a slot may be reused: a task of this chunk or an external
/// precondition.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    Task(SubgraphTask),
    Pre(usize),
}

/// A compiled chunk and which of its postconditions some task signals.
struct Chunk {
    graph: Subgraph<i64>,
    has_source: Vec<bool>,
}

/// Conditions per chunk: `2 * width` slot conditions (row-major), then `width` "last
/// timestep done" conditions.
fn conditions(width: usize) -> usize {
    3 * width
}

fn build_chunk(
    rt: &Runtime,
    data: &Arc<Data>,
    t0: i64,
    len: i64,
    owner: &[usize],
) -> Result<Chunk, RunError> {
    let plan = &data.plan;
    let w = plan.graph().max_width as usize;
    let mut b = SubgraphBuilder::<i64>::new();
    let pres: Vec<_> = (0..conditions(w)).map(|_| b.precondition()).collect();
    let posts: Vec<_> = (0..conditions(w)).map(|_| b.postcondition()).collect();
    let mut users: Vec<Vec<Src>> = (0..2 * w).map(|k| vec![Src::Pre(k)]).collect();
    let mut last: Vec<Src> = (0..w).map(|p| Src::Pre(2 * w + p)).collect();
    let mut ids = Vec::new();
    let wire = |b: &mut SubgraphBuilder<i64>, src: Src, to: SubgraphTask| match src {
        Src::Task(from) => b.edge(from, to),
        Src::Pre(k) => b.wait_for(pres[k], to),
    };
    for i in 0..len {
        let t = t0 + i;
        let row = (t % 2) as usize;
        ids.clear();
        for p in plan.offset(t)..plan.offset(t) + plan.width(t) {
            let d = data.clone();
            let id = b.task(owner[p as usize], move |t0: &i64| d.run_point(*t0 + i, p));
            let mut srcs: Vec<Src> = plan.deps(t, p).iter().map(|&d| last[d as usize]).collect();
            let u = &users[row * w + p as usize];
            srcs.extend(if u.len() > 1 { &u[1..] } else { &u[..] });
            srcs.sort_unstable_by_key(|s| match s {
                Src::Task(t) => (0, t.0 as usize),
                Src::Pre(k) => (1, *k),
            });
            srcs.dedup();
            for s in srcs {
                wire(&mut b, s, id);
            }
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
    Ok(Chunk { graph, has_source })
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
    fn new(rt: &Runtime, plan: Plan, error: &Arc<ErrorSlot>) -> Result<GraphRun, RunError> {
        let g = plan.graph();
        let width = g.max_width as usize;
        let scratch = || Slots::filled(width, &new_scratch(g.scratch_bytes_per_task));
        let owner = block_owners(rt.workers(), g.max_width);
        let data = Arc::new(Data {
            rows: [
                Slots::new(width, g.output_bytes_per_task),
                Slots::new(width, g.output_bytes_per_task),
            ],
            scratch: [scratch(), scratch()],
            error: error.clone(),
            plan,
        });
        let mut cache: HashMap<(Vec<u32>, i64), Arc<Chunk>> = HashMap::new();
        let mut chunks = Vec::new();
        for (t0, len) in self::chunks(&data.plan) {
            let key = (
                (t0..t0 + len)
                    .filter_map(|t| data.plan.shape_id(t))
                    .collect(),
                t0 % 2,
            );
            let chunk = match cache.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let c = Arc::new(build_chunk(rt, &data, t0, len, &owner)?);
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
        let inst = chunk.graph.instantiate(*t0, &self.pre);
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
        let rt = on_tactor::start(cfg)?;
        let error = Arc::new(ErrorSlot::default());
        let graphs = app
            .graphs
            .iter()
            .cloned()
            .map(|g| GraphRun::new(&rt, Plan::new(g), &error))
            .collect::<Result<Vec<_>, _>>()?;
        on_tactor::passes(&rt, &error, || {
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
