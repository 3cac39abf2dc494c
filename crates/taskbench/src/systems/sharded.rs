//! `sharded`: the graphs' timesteps cut in chunks, each chunk one compiled subgraph of the
//! whole job ([`tactor::job::ShardedBuilder`]), described the same on every rank with each
//! point on its job-wide worker (the block distribution), and instantiated chunk after chunk.
//! An edge between ranks carries the output; its reader takes it where the message landed.
//! Outputs live in two rows by timestep parity; the edges order every reuse of a slot. The
//! outputs of a chunk's last timestep that another rank reads at the next chunk's first are
//! written there by a task on that rank (its replica of the slot). No message is written
//! here.

use super::interface::{RunConfig, RunError, PORT_EDGES};
use super::shared::{block_owners, block_start, footprint, run_shared_task, run_task};
use super::timing::Pass;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use tactor::job::{Exchange, Received, Sharded as Graph, ShardedBuilder};
use tactor::slots::Slots;
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
            .saturating_add(cfg.tactor_footprint())
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

/// The points a chunk's tasks run, in one table for them all, read in order as the tasks run
/// (an allocation or two per task cost a cache miss each): per point its graph, the point
/// and its inputs' range; per input the point `d` of `t - 1` it reads and where it comes
/// from — this rank's row (`None`), or the message from the task of `(t - 1, d)` on another
/// rank, at an offset in that task's outputs.
#[derive(Default)]
struct Table {
    members: Vec<(usize, i64, u32, u32)>,
    inputs: Vec<(i64, Option<(Id, usize)>)>,
}

/// The points a task runs, `(graph, point)` in graph order: what its outputs are made of.
type Points = Arc<[(usize, i64)]>;

/// Timesteps `t0 .. t0 + len` of every graph as one subgraph of the job, its messages on
/// `stream` (one per distinct chunk, whose instances number its steps). Its argument is the
/// first timestep of the instance: the graph serves every chunk with the same shapes and
/// parity, so its tasks know their timestep relative to it.
///
/// A task runs, on one worker at one timestep, the `k`-th point of that worker's block of
/// every graph (with one graph, one point): graphs run side by side, so `-and` adds no tasks
/// and no messages, only bytes. A task's outputs travel together, in graph order, on each
/// edge from it to another rank.
fn chunk(data: &Arc<Data>, stream: u32, t0: i64, len: i64) -> ShardedBuilder<i64> {
    let mut b = ShardedBuilder::new(data.exchange.clone(), stream);
    let after = b.precondition();
    let w_all = data.exchange.job().ranks() * data.workers;
    let rank_of = |w: usize| w / data.workers;
    let live = |g: usize, t: i64| {
        let plan = &data.plans[g];
        (t < plan.graph().timesteps).then(|| plan.offset(t)..plan.offset(t) + plan.width(t))
    };
    let bytes = |g: usize| data.plans[g].graph().output_bytes_per_task;
    // Per (timestep, graph, point): its task, and the offset of its output in the task's.
    let mut ids: HashMap<(i64, usize, i64), (Id, usize)> = HashMap::new();
    // Per task, by its number: its worker, timestep and points.
    let mut tasks: Vec<(usize, i64, Points)> = Vec::new();
    // The outputs of a task, packed in graph order by its worker right after it ran.
    let outputs = |points: &Points, dt: i64| {
        let (data, points) = (data.clone(), points.clone());
        move |&first: &i64, out: &mut [u8]| {
            for (g, p, span) in spans(&data, &points) {
                let row = &data.rows[g][((first + dt) % 2) as usize];
                // SAFETY: read on its writer's worker right after it, before the writer of
                // the slot's next value (ordered after this one).
                out[span].copy_from_slice(unsafe { row.read(p as usize) });
            }
        }
    };
    let total = |points: &[(usize, i64)]| points.iter().map(|&(g, _)| bytes(g)).sum::<usize>();
    let (mut table, filled) = (Table::default(), Arc::new(OnceLock::<Table>::new()));
    for t in t0..t0 + len {
        // This timestep's tasks: per worker and block index, its graphs' points.
        let mut places: std::collections::BTreeMap<(usize, i64), Vec<(usize, i64)>> =
            Default::default();
        for g in 0..data.plans.len() {
            for p in live(g, t).into_iter().flatten() {
                let w = data.owner[g][p as usize];
                let k = p - block_start(w, w_all, data.plans[g].graph().max_width);
                places.entry((w, k)).or_default().push((g, p));
            }
        }
        for ((w, _), points) in places {
            let dt = t - t0;
            let mut preds: Vec<Id> = Vec::new();
            let mut local = false;
            let first_member = table.members.len();
            for &(g, p) in &points {
                let at = table.inputs.len() as u32;
                for &d in data.plans[g].deps(t, p) {
                    let from = ids.get(&(t - 1, g, d)).copied();
                    preds.extend(from.map(|f| f.0));
                    let remote = from.filter(|_| rank_of(data.owner[g][d as usize]) != rank_of(w));
                    table.inputs.push((d, remote));
                }
                table.members.push((g, p, at, table.inputs.len() as u32));
            }
            let (data2, filled2, mine) = (
                data.clone(),
                filled.clone(),
                first_member..table.members.len(),
            );
            let id = b.task(w, move |&first, got: &Received| {
                let table = filled2.get().expect("filled once the chunk is built");
                run(&data2, first + dt, table, mine.clone(), got)
            });
            preds.sort_unstable_by_key(|i| i.0);
            preds.dedup();
            for &from in &preds {
                let (fw, ft, fpoints) = &tasks[from.0 as usize];
                // Within a rank nothing is packed: no closure to build.
                if rank_of(*fw) == rank_of(w) {
                    local = true;
                    b.edge(from, id);
                } else {
                    b.edge_carrying(from, id, total(fpoints), outputs(fpoints, ft - t0));
                }
            }
            // After the last users of the slots it reuses: this rank's readers of the values
            // it overwrites, or without them their writers.
            let mut guards: Vec<Id> = Vec::new();
            for &(g, p) in &points {
                let readers: Vec<Id> = (t > t0)
                    .then(|| data.plans[g].rdeps(t - 1, p))
                    .into_iter()
                    .flatten()
                    .filter(|&&r| rank_of(data.owner[g][r as usize]) == rank_of(w))
                    .filter_map(|&r| ids.get(&(t - 1, g, r)).map(|x| x.0))
                    .collect();
                match (readers.is_empty(), ids.get(&(t - 2, g, p))) {
                    (true, Some(&(prev, _))) => guards.push(prev),
                    _ => guards.extend(readers),
                }
            }
            guards.sort_unstable_by_key(|i| i.0);
            guards.dedup();
            // (An edge also among `preds` is kept once when the chunk compiles.)
            for &from in &guards {
                b.edge(from, id);
            }
            wait_unless(&mut b, after, id, local || !guards.is_empty());
            let points: Points = points.into();
            for (g, p, span) in spans(data, &points) {
                ids.insert((t, g, p), (id, span.start));
            }
            tasks.push((w, t, points));
        }
    }
    let _ = filled.set(table);
    // What another rank reads at the next chunk's first timestep: a task there writes the
    // outputs of the last timestep's task into that rank's replicas of their slots, after
    // its readers of the old values here.
    let (last, next) = (t0 + len - 1, t0 + len);
    let ends = (tasks.iter().enumerate()).filter(|(_, (_, t, _))| *t == last);
    for (from, (w, _, points)) in ends.map(|(i, task)| (Id(i as u32), task.clone())) {
        let mut readers: Vec<usize> = (points.iter())
            .filter(|&&(g, _)| live(g, next).is_some())
            .flat_map(|&(g, q)| {
                data.plans[g]
                    .rdeps(next, q)
                    .iter()
                    .map(move |&r| data.owner[g][r as usize])
            })
            .filter(|&r| rank_of(r) != rank_of(w))
            .collect();
        readers.sort_unstable();
        readers.dedup_by_key(|r| rank_of(*r));
        for worker in readers {
            let (data2, dt, written) = (data.clone(), last - t0, points.clone());
            let mirror = b.task(worker, move |&first, got: &Received| {
                let value = got.from(from).expect("outputs from another rank");
                for (g, q, span) in spans(&data2, &written) {
                    let row = &data2.rows[g][((first + dt) % 2) as usize];
                    // SAFETY: ordered after this rank's readers of the slot's old value (in
                    // this chunk), and before the next chunk's (which waits for this one).
                    unsafe { row.write(q as usize) }.copy_from_slice(&value[span]);
                }
            });
            b.edge_carrying(from, mirror, total(&points), outputs(&points, last - t0));
            let r = rank_of(worker);
            let mut guards: Vec<Id> = (points.iter())
                .filter(|_| t0 > 0)
                .flat_map(|&(g, q)| data.plans[g].rdeps(t0, q).iter().map(move |&p| (g, p)))
                .filter(|&(g, p)| rank_of(data.owner[g][p as usize]) == r)
                .filter_map(|(g, p)| ids.get(&(t0, g, p)).map(|x| x.0))
                .collect();
            guards.sort_unstable_by_key(|i| i.0);
            guards.dedup();
            for &reader in &guards {
                b.edge(reader, mirror);
            }
            wait_unless(&mut b, after, mirror, !guards.is_empty());
        }
    }
    b
}

/// Each of `points` with where its output lies in the task's outputs (graph order).
fn spans<'a>(
    data: &'a Data,
    points: &'a [(usize, i64)],
) -> impl Iterator<Item = (usize, i64, std::ops::Range<usize>)> + 'a {
    points.iter().scan(0, |at, &(g, p)| {
        let n = data.plans[g].graph().output_bytes_per_task;
        *at += n;
        Some((g, p, *at - n..*at))
    })
}

/// Task `id` waits for the chunk before (`after`) unless it waits for a task of its own rank
/// in this chunk, which does (a precondition per task was an external message per task).
fn wait_unless(b: &mut ShardedBuilder<i64>, after: tactor::PreId, id: Id, local: bool) {
    if !local {
        b.wait_for(after, id);
    }
}

/// Runs the points `mine` of `table` (each a graph's point at `t`): inputs from this rank's
/// row, or from the message of the task of a dependency on another rank.
fn run(data: &Data, t: i64, table: &Table, mine: std::ops::Range<usize>, got: &Received) {
    for &(g, p, a, b) in &table.members[mine] {
        if data.failed.load(Ordering::Relaxed) {
            return;
        }
        let inputs = &table.inputs[a as usize..b as usize];
        let bytes = data.plans[g].graph().output_bytes_per_task;
        let (row, prev) = (
            &data.rows[g][(t % 2) as usize],
            &data.rows[g][((t + 1) % 2) as usize],
        );
        // SAFETY: the chunk's edges order every other user of these slots before or after
        // this task (`chunk`), and chunks run one after another on each rank.
        let (out, scratch) = unsafe {
            (
                row.write(p as usize),
                data.scratch[g][(t % 2) as usize].write(p as usize),
            )
        };
        let input = |d: i64| match inputs.iter().find(|x| x.0 == d).and_then(|x| x.1) {
            Some((from, at)) => {
                let outputs = got.from(from).expect("outputs from another rank");
                &outputs[at..at + bytes]
            }
            // SAFETY: as above: `(t - 1, d)` wrote it before this task, and no one writes it
            // now.
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
}
