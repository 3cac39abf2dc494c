//! `compiled`: the graphs' repeating body compiled once into Tactor subgraphs (per-worker
//! actors with private dependency counters, one message per cross-worker edge) and
//! instantiated over and over, each instance chained to the previous one through external
//! conditions — how an iterative application, or Legion's tracing, would use compiled
//! subgraphs.
//!
//! A **chain** runs graphs in lock-step: every graph whose timesteps fall into a few repeating
//! shapes joins one chain (so `-and` graphs share vertices and messages, see [`chunk`]); a
//! graph whose shape keeps changing (dom, tree) is compiled whole, as a chain of its own.
//! A chain is cut into chunks of timesteps: `[0, 1)`, then chunks of about `CHUNK_TASKS`
//! tasks (the last may be shorter). Chunks with the same sequence of timestep shapes share one
//! compiled subgraph; each instance gets its first timestep as its argument.
//!
//! Buffers are the two output rows (and scratch rows) of `bsp` and `tasks`, per graph.
//!
//! On several ranks each rank compiles only its own points ([`Cut`](super::edges::Cut)); an edge that crosses
//! ranks becomes an external condition carried by one message per (chain, timestep, pair of
//! ranks) — seed 000, Figure 9 — with every graph of the chain in it ([`chunk`]).

mod chunk;

use super::interface::{check_workers, RunConfig, RunError, System};
use super::on_tactor::{self, ErrorSlot, Graph};
use super::shared::footprint;
use super::timing::Pass;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tactor::job::exchange::{Inbox, Key};
use tactor::job::Exchange;
use tactor::{Event, Placement, Runtime, Scope, Subgraph};
use taskbench_core::app::App;
use taskbench_core::plan::Plan;

/// Subgraphs compiled from the graphs' repeating body, chained instance after instance.
pub struct Compiled;

/// Least timesteps per chunk (even, so every chunk after the first starts on the same row
/// parity).
const MIN_CHUNK: i64 = 32;

/// Tasks per chunk aimed at: enough that instantiating a chunk (a few microseconds: its
/// events, subscriptions and one activation per worker) and the hand-over between two
/// instances (the next one's preconditions opened by events, not by vertex messages) are
/// small against running it (`docs/measurements.md`, "Chunk length").
const CHUNK_TASKS: i64 = 4096;

/// Graphs with more distinct timestep shapes than this are compiled whole.
const MAX_SHAPES: usize = 16;

/// A point of a graph in a vertex: (index into the chain's graphs, point).
type Item = (usize, i64);

/// What every vertex of every chain reaches.
struct Shared {
    graphs: Vec<Graph>,
    error: Arc<ErrorSlot>,
    remote: Option<Arc<Exchange>>,
    /// Per graph, the chain it runs in (the stream its messages travel on).
    stream: Vec<u32>,
    /// Several workers in this process: a vertex's inputs may come from another core.
    shared_inputs: bool,
}

impl Shared {
    /// Where the inputs of `points` at `t` start, each slot once: the same for every
    /// instance of a chunk (equal chunks have the same shapes and row parity, and the rows
    /// never move), so computed once, when the chunk is built.
    fn input_lines(&self, t: i64, points: &[(usize, i64)]) -> Vec<usize> {
        let mut out: Vec<usize> = points
            .iter()
            .flat_map(|&(g, p)| {
                let d = &self.graphs[g];
                let prev = &d.rows[((t + 1) % 2) as usize];
                d.plan.deps(t, p).iter().map(|&q| prev.addr(q as usize))
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Runs points `(graph, p)` at timestep `t`, after asking for the lines at `inputs` (see
    /// `input_lines`).
    fn run_points(&self, t: i64, points: &[(usize, i64)], inputs: &[usize]) {
        // Several graphs' points in one vertex: their inputs from another worker are all
        // misses, which the points would take one after another; asked for together they
        // overlap (4 × nearest, one process, 2 workers: 6 % a step at `-iter 64`, 15 % empty,
        // alternated runs). With one worker every input is local: none asked for.
        for &line in inputs {
            tactor::hint::fetch_at(line);
        }
        for &(g, p) in points {
            self.run_point(g, t, p);
        }
    }

    fn run_point(&self, g: usize, t: i64, p: i64) {
        // SAFETY: the subgraph orders every earlier reader and writer of slot `p` of this row
        // (and scratch row) before this task, and every later one after it (see `chunk`);
        // across chunks the external conditions carry the same order.
        unsafe { self.graphs[g].run_point(t, p, &self.error) }
    }

    /// Bytes of the outputs of `points`, and their count.
    fn size(&self, points: &[(usize, i64)]) -> (usize, usize) {
        let len = points
            .iter()
            .map(|&(g, _)| self.graphs[g].plan.graph().output_bytes_per_task)
            .sum();
        (points.len(), len)
    }

    /// Sends the outputs of `points` at `t` to rank `dest`, in one message.
    fn send(&self, t: i64, dest: usize, points: &[(usize, i64)]) {
        let remote = self
            .remote
            .as_ref()
            .expect("sends exist on several ranks only");
        let outputs = points.iter().map(|&(g, q)| {
            // SAFETY: the producers of these slots precede this vertex, and their next
            // writers come after it (it is one of their readers).
            unsafe { self.graphs[g].rows[(t % 2) as usize].read(q as usize) }
        });
        let channel = tactor::current_worker().unwrap_or(0);
        let stream = self.stream[points[0].0];
        let (count, len) = self.size(points);
        remote.send(channel, dest, (stream, t), count, len, outputs);
    }

    /// Copies the outputs of `points` at `t`, sent by rank `src` and found in slot `k` of the
    /// instance's inbox, into their rows.
    fn receive(&self, args: &Args, k: usize, t: i64, src: usize, points: &[(usize, i64)]) {
        let data = args
            .inbox
            .get(k)
            .and_then(|s| s.lock().unwrap_or_else(|p| p.into_inner()).take());
        self.fill(data.as_deref(), (self.stream[points[0].0], t, src), points);
    }

    /// Takes the outputs of `points` at `t` from rank `src` off the network, waiting for
    /// them, and copies them into their rows from where the message arrived (on the node,
    /// the sender's ring: see [`tactor::job::Exchange::pull`]): the receive of the one vertex that reads them,
    /// at its start. Its instance does not wait for the message as a precondition — the
    /// inlet, inbox slot and mailbox hops were most of what this rank's step cost beyond
    /// `bsp`'s — and the vertex polls for it like `bsp` does. If another rank failed it
    /// does not return: the vertex fails with that cause (no validation error for inputs
    /// that never came), and its instance runs nothing more.
    fn pull(&self, t: i64, src: usize, points: &[(usize, i64)]) {
        let remote = self
            .remote
            .as_ref()
            .expect("receives exist on several ranks only");
        let key = (self.stream[points[0].0], t, src);
        match remote.pull(key, &mut |data| self.fill(Some(data), key, points)) {
            Ok(()) => {}
            // `resume_unwind`: no panic hook (which would report this rank as the failure).
            Err(why) => std::panic::resume_unwind(Box::new(why)),
        }
    }

    /// Copies a message's outputs into their rows (see [`Shared::receive`]), or records what
    /// is wrong with it as this rank's failure.
    fn fill(&self, data: Option<&[u8]>, key: Key, points: &[(usize, i64)]) {
        let remote = self
            .remote
            .as_ref()
            .expect("receives exist on several ranks only");
        let (count, len) = self.size(points);
        let t = key.1;
        let Some(payload) = remote.check(key, data, count, len) else {
            return;
        };
        let mut at = 0;
        for &(g, d) in points {
            let data = &self.graphs[g];
            let bytes = data.plan.graph().output_bytes_per_task;
            // SAFETY: this vertex is the slot's writer for timestep `t`: it comes after the
            // readers of its previous contents, and the readers of what it writes after it.
            unsafe { data.rows[(t % 2) as usize].write(d as usize) }
                .copy_from_slice(&payload[at..at + bytes]);
            at += bytes;
        }
    }
}

/// What an instance of a chunk gets: its first timestep, and where the messages it waits for
/// arrive (one slot per receive vertex, in the order of `Chunk::receives`).
pub(super) struct Args {
    t0: i64,
    inbox: Inbox,
}

/// A compiled chunk, whether some vertex signals its postcondition (if none does, the
/// chunk's precondition stands for it too), and the messages its receive vertices wait for:
/// (timestep within the chunk, source rank), in the order of the preconditions after the
/// first.
struct Chunk {
    graph: Subgraph<Args>,
    signals: bool,
    receives: Vec<(i64, usize)>,
}

/// The chunks of a chain of graphs, of about `tasks` tasks each: `(first timestep, length)`.
pub(super) fn chunks(plans: &[&Plan], tasks: i64) -> Vec<(i64, i64)> {
    let steps = plans.iter().map(|p| p.graph().timesteps).max().unwrap_or(0);
    if plans.iter().any(|p| p.shapes() > MAX_SHAPES) {
        return vec![(0, steps)];
    }
    let per_chunk = chunk_steps(plans.iter().map(|p| p.graph().max_width).sum(), tasks);
    let mut out = vec![(0, steps.min(1))];
    let mut t = 1;
    while t < steps {
        let len = per_chunk.min(steps - t);
        out.push((t, len));
        t += len;
    }
    out
}

/// Tasks per chunk for a run under `cfg`.
fn chunk_tasks(cfg: &RunConfig) -> i64 {
    cfg.chunk_tasks.unwrap_or(CHUNK_TASKS)
}

/// Timesteps in a chunk (after the first) of about `tasks` tasks, of a chain whose graphs are
/// `width` points wide together.
fn chunk_steps(width: i64, tasks: i64) -> i64 {
    let per_chunk = (tasks / width.max(1)).max(MIN_CHUNK);
    per_chunk + per_chunk % 2
}

/// One chain: its graphs, its chunks and their compiled subgraphs (shared by equal chunks).
struct ChainRun {
    index: u32,
    chunks: Vec<(i64, Arc<Chunk>)>,
}

impl ChainRun {
    fn new(
        rt: &Runtime,
        sh: &Arc<Shared>,
        index: u32,
        members: Vec<usize>,
        tasks: i64,
    ) -> Result<Self, RunError> {
        let plans: Vec<&Plan> = members.iter().map(|&g| &sh.graphs[g].plan).collect();
        // Equal chunks share a compiled subgraph: the same shapes from the same row parity,
        // and the same shape after them (which decides the last timestep's messages).
        type ChunkKey = (Vec<(Vec<u32>, Option<u32>)>, i64);
        let mut cache: HashMap<ChunkKey, Arc<Chunk>> = HashMap::new();
        let mut chunks = Vec::new();
        for (t0, len) in self::chunks(&plans, tasks) {
            let shapes = plans
                .iter()
                .map(|p| {
                    let ids = (t0..t0 + len).filter_map(|t| p.shape_id(t)).collect();
                    (ids, p.shape_id(t0 + len))
                })
                .collect();
            let key = (shapes, t0 % 2);
            let chunk = match cache.get(&key) {
                Some(c) => c.clone(),
                None => {
                    let c = Arc::new(chunk::build(rt, sh, &members, t0, len)?);
                    cache.insert(key, c.clone());
                    c
                }
            };
            chunks.push((t0, chunk));
        }
        Ok(ChainRun { index, chunks })
    }

    /// The chain's instances, not yet instantiated.
    fn chain<'a>(&'a self, remote: Option<&'a Exchange>) -> Chain<'a> {
        Chain {
            run: self,
            remote,
            next: 0,
            before: Event::triggered(),
        }
    }
}

/// Instantiates a chain's chunks in order, each chained to the previous one.
struct Chain<'a> {
    run: &'a ChainRun,
    remote: Option<&'a Exchange>,
    next: usize,
    /// What the next chunk waits for: the last one's postcondition.
    before: Event,
}

impl Chain<'_> {
    /// Instantiates the next chunk; returns its completion event, or `None` after the last.
    fn step(&mut self) -> Option<Event> {
        let (t0, chunk) = self.run.chunks.get(self.next)?;
        self.next += 1;
        let inbox: Inbox = chunk.receives.iter().map(|_| Mutex::new(None)).collect();
        let args = Args {
            t0: *t0,
            inbox: inbox.clone(),
        };
        let (inst, inlets) = chunk.graph.instantiate_with_inlets(
            args,
            std::slice::from_ref(&self.before),
            chunk.receives.len(),
        );
        if let Some(remote) = self.remote {
            let keys = chunk
                .receives
                .iter()
                .map(|&(i, src)| (self.run.index, t0 + i, src));
            remote.inlets(&inbox, keys.zip(inlets));
        }
        if chunk.signals {
            self.before = inst.postconditions[0].clone();
        }
        Some(inst.completion)
    }
}

/// Keeps `CHAINS_AHEAD` instances of a chain in flight: each instance's completion instantiates the
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
const CHAINS_AHEAD: usize = 3;

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
        // Per graph: the instances in flight and the one being compiled, each a chunk long.
        let width = app
            .graphs
            .iter()
            .map(|g| g.max_width)
            .fold(0, i64::saturating_add);
        let tasks = chunk_tasks(cfg);
        let in_flight = chunk_steps(width, tasks).saturating_mul(CHAINS_AHEAD as i64 + 1);
        let chunk = |steps: i64| steps.min(in_flight);
        footprint::rows(app, 2, 2)
            .saturating_add(footprint::per_task(app, chunk, 256, 48))
            .saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let (rt, remote) = cfg.tactor()?;
        let error = Arc::new(ErrorSlot::new(remote.clone()));
        let (place, rank) = on_tactor::placement(cfg);
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        // Graphs of a few repeating shapes run together in chain 0; the others alone.
        let mut members: Vec<Vec<usize>> = vec![Vec::new()];
        let mut stream = Vec::new();
        for (g, plan) in plans.iter().enumerate() {
            if plan.shapes() > MAX_SHAPES {
                members.push(vec![g]);
                stream.push(members.len() as u32 - 1);
            } else {
                members[0].push(g);
                stream.push(0);
            }
        }
        let sh = Arc::new(Shared {
            graphs: plans
                .into_iter()
                .map(|p| Graph::new(p, place, rank))
                .collect(),
            error: error.clone(),
            remote: remote.clone(),
            stream,
            shared_inputs: cfg.workers > 1,
        });
        let tasks = chunk_tasks(cfg);
        let runs = members
            .into_iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .map(|(i, m)| ChainRun::new(&rt, &sh, i as u32, m, tasks))
            .collect::<Result<Vec<_>, _>>()?;
        on_tactor::passes(&rt, &error, remote.as_deref(), || {
            // Instantiated from workers, so the launching thread does not compete with them
            // for the cores.
            let chains: Vec<Mutex<Chain>> = runs
                .iter()
                .map(|r| Mutex::new(r.chain(remote.as_deref())))
                .collect();
            let done = Mutex::new(Vec::new());
            rt.scope(|s| {
                for chain in &chains {
                    let done = &done;
                    s.launch(Placement::Any, &[], move |s| {
                        for _ in 0..CHAINS_AHEAD {
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
