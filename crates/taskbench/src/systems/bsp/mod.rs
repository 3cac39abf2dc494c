//! `bsp`: the shared-memory twin of the reference `mpi/nonblock`. Points are block-distributed
//! over workers; each worker runs its points of a timestep, publishes that it finished the
//! timestep, and before the next one waits only for the workers it exchanges outputs with.
//!
//! Outputs live in two rows per graph (timestep parity). A worker may start timestep `t` of a
//! graph once (a) every worker owning one of its dependencies finished `t-1` (inputs are ready)
//! and (b) every worker that read its `t-2` outputs finished `t-1` (the row it overwrites is no
//! longer read). Those are the only waits: one atomic store per worker per timestep, and spins
//! on a few neighbours' counters. No thread sleeps on the hot path.
//!
//! On several ranks (`mpirun`), points are block-distributed over every rank's workers, the
//! waits above cover the workers of this rank, and outputs needed on another rank travel as one
//! message per (worker, worker, timestep) pair, all graphs together ([`ranks`], over the
//! runtime's [`tactor::job::Exchange`]).

mod lists;
mod ranks;

use super::interface::{check_workers, RunConfig, RunError, System};
use super::shared::{footprint, run_task};
use super::slots::Slots;
use super::team::{run_passes, Net, Pass};
use crate::faults::Fault;
use crossbeam_utils::CachePadded;
use lists::{Cached, Classes};
use std::sync::atomic::{AtomicI64, Ordering};
use taskbench_core::app::{App, Placement};
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// Block-distributed points, one thread per worker, neighbour-to-neighbour synchronisation per
/// timestep.
pub struct Bsp;

/// This rank's workers among all of the job's.
#[derive(Clone, Copy)]
struct Place {
    all: Placement,
    rank: usize,
}

impl Place {
    fn global(&self, w: usize) -> i64 {
        (self.rank * self.all.workers as usize + w) as i64
    }

    /// The local index of global worker `o`, if it is on this rank.
    fn local(&self, o: i64) -> Option<usize> {
        let first = self.global(0);
        (o >= first && o < first + self.all.workers).then(|| (o - first) as usize)
    }
}

struct Graph {
    plan: Plan,
    rows: [Slots; 2],
    /// `done[w]` = `pass * timesteps + t + 1` once local worker `w` finished timestep `t` of
    /// `pass`.
    done: Vec<CachePadded<AtomicI64>>,
    /// `waits[w][t]`: the other local workers `w` must see finished `t-1` before starting `t`.
    waits: Vec<Vec<Vec<usize>>>,
    /// The global worker that owns each point.
    owner: Vec<u32>,
    /// Each local worker's points: `[mine[w].0, mine[w].1)`.
    mine: Vec<(i64, i64)>,
}

impl Graph {
    fn new(plan: Plan, place: Place) -> Graph {
        let g = plan.graph();
        let width = g.max_width;
        let workers = place.all.workers as usize;
        let waits = (0..workers)
            .map(|w| {
                let gw = place.global(w);
                let mine = place.all.first(gw, width)..place.all.first(gw + 1, width);
                (0..g.timesteps)
                    .map(|t| {
                        let mut others: Vec<usize> = mine
                            .clone()
                            .flat_map(|p| plan.deps(t, p).iter().chain(plan.rdeps(t - 1, p)))
                            .filter_map(|&q| place.local(place.all.worker_of(q, width)))
                            .filter(|&o| o != w)
                            .collect();
                        others.sort_unstable();
                        others.dedup();
                        others
                    })
                    .collect()
            })
            .collect();
        let bytes = g.output_bytes_per_task;
        Graph {
            rows: [
                Slots::new(width as usize, bytes),
                Slots::new(width as usize, bytes),
            ],
            done: (0..workers)
                .map(|_| CachePadded::new(AtomicI64::new(0)))
                .collect(),
            waits,
            owner: (0..width)
                .map(|p| place.all.worker_of(p, width) as u32)
                .collect(),
            mine: (0..workers)
                .map(|w| {
                    let gw = place.global(w);
                    (place.all.first(gw, width), place.all.first(gw + 1, width))
                })
                .collect(),
            plan,
        }
    }
}

/// A worker's private state: scratch per owned point per graph and, on several ranks, the
/// messages that arrived for it and what it receives and sends per class of timesteps
/// ([`ranks`], [`lists`]).
struct WorkerState {
    scratch: Vec<Vec<Vec<u8>>>,
    inputs: Cached<ranks::Inputs>,
    /// This timestep's messages, in the order of the current inputs' sources.
    arrived: Vec<Vec<u8>>,
    sends: Cached<ranks::Sends>,
}

impl System for Bsp {
    fn name(&self) -> &'static str {
        "bsp"
    }

    fn about(&self) -> &'static str {
        "one thread per worker, block-distributed points, per-timestep exchange with neighbours (like mpi/nonblock); runs on several ranks"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Two output rows, a scratch buffer per point, a completion counter per worker.
        footprint::rows(app, 2, 1)
            .saturating_add(taskbench_core::memory::mul(cfg.workers, 64 * 1024u32))
    }

    /// Worker 0 is the calling thread; with one worker no other is started.
    fn one_thread_on_ranks(&self, workers: usize) -> bool {
        workers == 1
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let n = cfg.workers;
        let job = cfg.job.as_deref();
        let place = Place {
            all: Placement {
                ranks: job.map_or(1, |j| j.ranks()) as i64,
                workers: n as i64,
            },
            rank: job.map_or(0, |j| j.rank()),
        };
        let exchange = match &cfg.job {
            Some(j) => Some(
                tactor::job::Exchange::open(j, ranks::PORT_BSP)
                    .map_err(|e| RunError::Runtime(e.to_string()))?,
            ),
            None => None,
        };
        let fault = job.and_then(|j| crate::faults::injected_fault(j.rank()));
        let graphs: Vec<Graph> = app
            .graphs
            .iter()
            .cloned()
            .map(|g| Graph::new(Plan::new(g), place))
            .collect();
        let steps = graphs
            .iter()
            .map(|g| g.plan.graph().timesteps)
            .max()
            .unwrap_or(0);
        let classes = if exchange.is_some() {
            let plans: Vec<&Plan> = graphs.iter().map(|g| &g.plan).collect();
            Classes::new(&plans, steps)
        } else {
            Classes::new(&[], 0)
        };
        let init = |w: usize| WorkerState {
            scratch: graphs
                .iter()
                .map(|gr| {
                    let g = gr.plan.graph();
                    let gw = place.global(w);
                    let owned =
                        place.all.first(gw + 1, g.max_width) - place.all.first(gw, g.max_width);
                    (0..owned)
                        .map(|_| new_scratch(g.scratch_bytes_per_task))
                        .collect::<Vec<_>>()
                })
                .collect(),
            inputs: Cached::new(classes.counts().0),
            arrived: Vec::new(),
            sends: Cached::new(classes.counts().1),
        };
        let net = exchange.as_deref().map(|e| e as &dyn Net);
        let times = run_passes(net, n, 2, cfg.pin, init, |st, w, pass, team| {
            for t in 0..steps {
                if let Some(ex) = &exchange {
                    let lists = (graphs.as_slice(), &classes);
                    if ranks::gather(ex, st, lists, place, (pass, t, w), team).is_err() {
                        return;
                    }
                }
                for (gi, gr) in graphs.iter().enumerate() {
                    let plan = &gr.plan;
                    let g = plan.graph();
                    if t >= g.timesteps {
                        continue;
                    }
                    let base = pass as i64 * g.timesteps;
                    for &v in &gr.waits[w][t as usize] {
                        if team
                            .wait_until(|| gr.done[v].load(Ordering::Acquire) >= base + t)
                            .is_err()
                        {
                            return;
                        }
                    }
                    let (row, prev) =
                        (&gr.rows[(t % 2) as usize], &gr.rows[((t + 1) % 2) as usize]);
                    let bytes = g.output_bytes_per_task;
                    let ((remote, at), arrived) = (st.inputs.current().of(gi), &st.arrived);
                    let first = gr.mine[w].0;
                    for p in ranks::active(gr, w, t) {
                        // SAFETY: only this worker (the owner of `p`) writes slot `p`; the readers
                        // of its previous contents (consumers at `t-1` of `(t-2, p)`) on this rank
                        // were waited for above (readers on other ranks got copies), and readers
                        // of the new contents start only after the Release store of `done[w]`.
                        let out = unsafe { row.write(p as usize) };
                        let input = |d: i64| -> &[u8] {
                            match remote.binary_search(&d) {
                                Ok(k) => {
                                    let (m, from) = at[k];
                                    &arrived[m][from..from + bytes]
                                }
                                // SAFETY: slot `d` of the previous row was written at `t-1` by its
                                // owner on this rank, who published it before we passed our wait;
                                // the owner writes it again at `t+1` only after seeing this worker
                                // finish `t`.
                                Err(_) => unsafe { prev.read(d as usize) },
                            }
                        };
                        let sc = &mut st.scratch[gi][(p - first) as usize];
                        if let Err(e) = run_task(plan, t, p, out, sc, input) {
                            return team.fail(e);
                        }
                    }
                    gr.done[w].store(base + t + 1, Ordering::Release);
                }
                if let Some(ex) = &exchange {
                    let fault = fault.filter(|_| pass == 1 && t == 1 && w == 0);
                    if fault == Some(Fault::Panic) {
                        panic!("injected fault (TASKBENCH_FAULT)");
                    }
                    if fault == Some(Fault::Slow) {
                        std::thread::sleep(crate::faults::SLOW);
                    }
                    let corrupt = fault == Some(Fault::Corrupt);
                    let lists = (graphs.as_slice(), &classes);
                    ranks::scatter(ex, st, lists, place, (pass, t, w), corrupt);
                }
            }
        })?;
        Ok(times[1])
    }
}
