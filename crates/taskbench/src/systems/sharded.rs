//! `sharded`: the graphs' timesteps cut in chunks, each chunk one compiled subgraph of the
//! whole job ([`tactor::job::ShardedBuilder`]), described the same on every rank with each
//! point on its job-wide worker (the block distribution), and instantiated chunk after chunk.
//! An edge between ranks carries the output; its reader takes it where the message landed.
//! Outputs live in two rows by timestep parity; the edges order every reuse of a slot. The
//! outputs of a chunk's last timestep that another rank reads at the next chunk's first are
//! written there by a task on that rank (its replica of the slot). No message is written
//! here.

use super::interface::{RunConfig, RunError, PORT_EDGES};
use super::shared::{block_owners, footprint, run_shared_task, run_task};
use super::slots::Slots;
use super::team::Pass;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tactor::job::{Exchange, Received, Sharded as Graph, ShardedBuilder};
use tactor::{Event, SubgraphTask as Id};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;
use taskbench_core::validate::TaskError;

/// Chunks of timesteps, each a compiled subgraph over the job.
pub struct Sharded;

/// Tasks per chunk aimed at (as `compiled`): a chunk's start and its hand-over to the next
/// (which waits for all of it) are small against running it.
const CHUNK_TASKS: i64 = 4096;

/// Least timesteps per chunk after the first.
const MIN_CHUNK: i64 = 32;

/// Every graph's buffers and where its points run.
struct Data {
    plans: Vec<Plan>,
    rows: Vec<[Slots; 2]>,
    scratch: Vec<[Slots; 2]>,
    /// Per graph, the job-wide worker of each point.
    owner: Vec<Vec<usize>>,
    workers: usize,
    error: Mutex<Option<TaskError>>,
    failed: AtomicBool,
    exchange: Arc<Exchange>,
}

impl super::System for Sharded {
    fn name(&self) -> &'static str {
        "sharded"
    }

    fn about(&self) -> &'static str {
        "chunks of timesteps compiled into subgraphs of the whole job: each rank keeps its \
         points, and the runtime sends the outputs that cross ranks"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Rows of outputs and scratch, and a few distinct chunks compiled (all of a graph
        // whose shape keeps changing: it may not fit).
        let width: i64 = app.graphs.iter().map(|g| g.max_width).sum();
        let steps = 4 * (CHUNK_TASKS / width.max(1)).max(MIN_CHUNK);
        footprint::rows(app, 2, 2)
            .saturating_add(footprint::per_task(app, |t| t.min(steps), 256, 64))
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, remote) = cfg.tactor()?;
        let runtime = |e: tactor::job::JobError| RunError::Runtime(e.to_string());
        let exchange = match &remote {
            Some(ex) => ex.clone(),
            None => Exchange::open(&cfg.job_or_one(), PORT_EDGES).map_err(runtime)?,
        };
        let ranks = exchange.job().ranks();
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        let data = Arc::new(Data {
            rows: (plans.iter().map(|p| p.graph()))
                .map(|g| [0, 1].map(|_| Slots::new(g.max_width as usize, g.output_bytes_per_task)))
                .collect(),
            scratch: (plans.iter().map(|p| p.graph()))
                .map(|g| {
                    let init = new_scratch(g.scratch_bytes_per_task);
                    [0, 1].map(|_| Slots::filled(g.max_width as usize, &init))
                })
                .collect(),
            owner: (plans.iter())
                .map(|p| block_owners(ranks * cfg.workers, p.graph().max_width))
                .collect(),
            workers: cfg.workers,
            plans,
            error: Mutex::new(None),
            failed: AtomicBool::new(false),
            exchange,
        });
        let steps = (data.plans.iter().map(|p| p.graph().timesteps))
            .max()
            .unwrap_or(0);
        // Chunks after the first have an even length: each starts on the same parity.
        let width: i64 = data.plans.iter().map(|p| p.graph().max_width).sum();
        let per_chunk = (CHUNK_TASKS / width.max(1)).max(MIN_CHUNK) / 2 * 2;
        let mut chunks = vec![(0, steps.min(1))];
        while let Some(&(t0, len)) = chunks.last().filter(|c| c.0 + c.1 < steps) {
            chunks.push((t0 + len, per_chunk.min(steps - t0 - len)));
        }
        // Equal chunks (the same shapes, one timestep past their end included) share a graph.
        let mut graphs: HashMap<Vec<Option<u32>>, Arc<Graph<i64>>> = HashMap::new();
        let mut run: Vec<(i64, Arc<Graph<i64>>)> = Vec::new();
        for &(t0, len) in &chunks {
            let key: Vec<Option<u32>> = (data.plans.iter())
                .flat_map(|p| (t0..=t0 + len).map(|t| p.shape_id(t)))
                .chain([Some(len as u32), Some((t0 % 2) as u32)])
                .collect();
            let graph = match graphs.get(&key) {
                Some(g) => g.clone(),
                None => {
                    let stream = graphs.len() as u32;
                    let g = Arc::new(chunk(&data, stream, t0, len).compile(&rt).map_err(|e| {
                        RunError::Runtime(format!("compiling timesteps {t0}..: {e}"))
                    })?);
                    graphs.entry(key).or_insert(g).clone()
                }
            };
            run.push((t0, graph));
        }
        super::timing::passes(&rt, remote.as_deref(), || {
            // At most two chunks in flight: the messages awaited, and memory, stay bounded.
            let mut last = Event::triggered();
            let mut flight = std::collections::VecDeque::new();
            let mut done = Ok(());
            for (t0, graph) in &run {
                last = graph.instantiate(*t0, &[last]).completion;
                flight.push_back(last.clone());
                if flight.len() > 2 {
                    done = done.and(flight.pop_front().expect("three in flight").wait());
                }
            }
            let done = done.and(last.wait());
            match data.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
                Some(e) => Err(RunError::Validation(e)),
                None => done.map_err(|e| RunError::Runtime(e.to_string())),
            }
        })
    }
}

/// Timesteps `t0 .. t0 + len` of every graph as one subgraph of the job, its messages on
/// `stream` (one per distinct chunk, whose instances number its steps). Its argument is the
/// first timestep of the instance: the graph serves every chunk with the same shapes and
/// parity, so its tasks know their timestep relative to it.
fn chunk(data: &Arc<Data>, stream: u32, t0: i64, len: i64) -> ShardedBuilder<i64> {
    let mut b = ShardedBuilder::new(data.exchange.clone(), stream);
    let after = b.precondition();
    let rank = |g: usize, p: i64| data.owner[g][p as usize] / data.workers;
    for (g, plan) in data.plans.iter().enumerate() {
        let bytes = plan.graph().output_bytes_per_task;
        let live = |t: i64| {
            (t < plan.graph().timesteps).then(|| plan.offset(t)..plan.offset(t) + plan.width(t))
        };
        // An output, packed by its writer right after it ran (before any later writer).
        let output = |dt: i64, q: i64| {
            let data = data.clone();
            move |&first: &i64, out: &mut [u8]| {
                let row = &data.rows[g][((first + dt) % 2) as usize];
                // SAFETY: read on its writer's worker right after it, before the writer of
                // the slot's next value (ordered after this one).
                out.copy_from_slice(unsafe { row.read(q as usize) })
            }
        };
        let mut ids: HashMap<(i64, i64), Id> = HashMap::new();
        for t in (t0..t0 + len).take_while(|&t| live(t).is_some()) {
            for p in live(t).expect("a live timestep") {
                let deps: Vec<(i64, Option<Id>)> = (plan.deps(t, p).iter())
                    .map(|&d| {
                        let remote = ids.get(&(t - 1, d)).filter(|_| rank(g, d) != rank(g, p));
                        (d, remote.copied())
                    })
                    .collect();
                let (data2, dt) = (data.clone(), t - t0);
                let id = b.task(data.owner[g][p as usize], move |&first, got: &Received| {
                    point(&data2, g, first + dt, p, &deps, got)
                });
                let mut local = false;
                for &d in plan.deps(t, p) {
                    if let Some(&from) = ids.get(&(t - 1, d)) {
                        b.edge_carrying(from, id, bytes, output(dt - 1, d));
                        local |= rank(g, d) == rank(g, p);
                    }
                }
                // After the last users of the slots it reuses: this rank's readers of the
                // value it overwrites, or without them its writer.
                let readers: Vec<Id> = (t > t0)
                    .then(|| plan.rdeps(t - 1, p))
                    .into_iter()
                    .flatten()
                    .filter(|&&r| rank(g, r) == rank(g, p))
                    .filter_map(|&r| ids.get(&(t - 1, r)).copied())
                    .collect();
                let guards = match (readers.is_empty(), ids.get(&(t - 2, p))) {
                    (true, Some(&prev)) => vec![prev],
                    _ => readers,
                };
                for &from in &guards {
                    b.edge(from, id);
                }
                wait_unless(&mut b, after, id, local || !guards.is_empty());
                ids.insert((t, p), id);
            }
        }
        // What another rank reads at the next chunk's first timestep: a task there writes it
        // into that rank's replica of the slot, after its readers of the old value here.
        let (last, next) = (t0 + len - 1, t0 + len);
        let Some(points) = live(last).filter(|_| live(next).is_some()) else {
            continue;
        };
        for q in points {
            let mut readers: Vec<usize> = (plan.rdeps(next, q).iter())
                .map(|&r| data.owner[g][r as usize])
                .filter(|&w| w / data.workers != rank(g, q))
                .collect();
            readers.sort_unstable();
            readers.dedup_by_key(|w| *w / data.workers);
            for worker in readers {
                let from = ids[&(last, q)];
                let (data2, dt) = (data.clone(), last - t0);
                let mirror = b.task(worker, move |&first, got: &Received| {
                    let value = got.from(from).expect("an output from another rank");
                    let row = &data2.rows[g][((first + dt) % 2) as usize];
                    // SAFETY: ordered after this rank's readers of the slot's old value (in
                    // this chunk), and before the next chunk's (which waits for this one).
                    unsafe { row.write(q as usize) }.copy_from_slice(value);
                });
                b.edge_carrying(from, mirror, bytes, output(last - t0, q));
                let r = worker / data.workers;
                let old = (t0 > 0)
                    .then(|| plan.rdeps(t0 - 1, q))
                    .into_iter()
                    .flatten();
                let mut local = false;
                for p in old.filter(|&&p| rank(g, p) == r) {
                    if let Some(&reader) = ids.get(&(t0, *p)) {
                        b.edge(reader, mirror);
                        local = true;
                    }
                }
                wait_unless(&mut b, after, mirror, local);
            }
        }
    }
    b
}

/// Task `id` waits for the chunk before (`after`) unless it waits for a task of its own rank
/// in this chunk, which does (a precondition per task was an external message per task).
fn wait_unless(b: &mut ShardedBuilder<i64>, after: tactor::PreId, id: Id, local: bool) {
    if !local {
        b.wait_for(after, id);
    }
}

/// Runs point `p` of graph `g` at `t`: its inputs from this rank's row, or from the message
/// of a dependency on another rank.
fn point(data: &Data, g: usize, t: i64, p: i64, deps: &[(i64, Option<Id>)], got: &Received) {
    if data.failed.load(Ordering::Relaxed) {
        return;
    }
    let (row, prev) = (
        &data.rows[g][(t % 2) as usize],
        &data.rows[g][((t + 1) % 2) as usize],
    );
    // SAFETY: the chunk's edges order every other user of these slots before or after this
    // task (`chunk`), and chunks run one after another on each rank.
    let (out, scratch) = unsafe {
        (
            row.write(p as usize),
            data.scratch[g][(t % 2) as usize].write(p as usize),
        )
    };
    let input = |d: i64| match deps.iter().find(|x| x.0 == d).and_then(|x| x.1) {
        Some(from) => got.from(from).expect("an output from another rank"),
        // SAFETY: as above: `(t - 1, d)` wrote it before this task, and no one writes it now.
        None => unsafe { prev.read(d as usize) },
    };
    let plan = &data.plans[g];
    let result = match data.workers > 1 {
        true => run_shared_task(plan, t, p, out, scratch, input),
        false => run_task(plan, t, p, out, scratch, input),
    };
    if let Err(e) = result {
        data.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        data.failed.store(true, Ordering::Relaxed);
        // Stop exchanging: this rank's messages stop, its waits end, and so its pass.
        data.exchange.abandon();
    }
}
