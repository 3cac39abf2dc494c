//! `bsp`: the shared-memory twin of the reference `mpi/nonblock`. Points are block-distributed
//! over workers; each worker runs its points of a timestep, publishes that it finished the
//! timestep, and before the next one waits only for the workers it exchanges outputs with.
//!
//! Outputs live in two rows per graph (timestep parity). A worker may start timestep `t` of a
//! graph once (a) every worker owning one of its dependencies finished `t-1` (inputs are ready)
//! and (b) every worker that read its `t-2` outputs finished `t-1` (the row it overwrites is no
//! longer read). Those are the only waits: one atomic store per worker per timestep, and spins
//! on a few neighbours' counters. No thread sleeps on the hot path.

use super::slots::Slots;
use super::team::{run_passes, Pass};
use super::{
    block_owners, block_start, check_workers, footprint, run_task, RunConfig, RunError, System,
};
use crossbeam_utils::CachePadded;
use std::sync::atomic::{AtomicI64, Ordering};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// Block-distributed points, one thread per worker, neighbour-to-neighbour synchronisation per
/// timestep.
pub struct Bsp;

struct Graph {
    plan: Plan,
    rows: [Slots; 2],
    /// `done[w]` = `pass * timesteps + t + 1` once worker `w` finished timestep `t` of `pass`.
    done: Vec<CachePadded<AtomicI64>>,
    /// `waits[w][t]`: the other workers `w` must see finished `t-1` before starting `t`.
    waits: Vec<Vec<Vec<usize>>>,
}

impl Graph {
    fn new(plan: Plan, workers: usize) -> Graph {
        let g = plan.graph();
        let width = g.max_width;
        let owner = block_owners(workers, width);
        let waits = (0..workers)
            .map(|w| {
                let mine = block_start(w, workers, width)..block_start(w + 1, workers, width);
                (0..g.timesteps)
                    .map(|t| {
                        let mut others: Vec<usize> = mine
                            .clone()
                            .flat_map(|p| plan.deps(t, p).iter().chain(plan.rdeps(t - 1, p)))
                            .map(|&q| owner[q as usize])
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
            plan,
        }
    }
}

impl System for Bsp {
    fn name(&self) -> &'static str {
        "bsp"
    }

    fn about(&self) -> &'static str {
        "one thread per worker, block-distributed points, per-timestep exchange with neighbours (like mpi/nonblock)"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Two output rows, a scratch buffer per point, a completion counter per worker.
        footprint::rows(app, 2, 1)
            .saturating_add(taskbench_core::memory::mul(cfg.workers, 64 * 1024u32))
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let n = cfg.workers;
        let graphs: Vec<Graph> = app
            .graphs
            .iter()
            .cloned()
            .map(|g| Graph::new(Plan::new(g), n))
            .collect();
        let steps = graphs
            .iter()
            .map(|g| g.plan.graph().timesteps)
            .max()
            .unwrap_or(0);
        // Each worker's scratch: one buffer per owned point per graph.
        let init = |w: usize| {
            graphs
                .iter()
                .map(|gr| {
                    let g = gr.plan.graph();
                    let owned = block_start(w + 1, n, g.max_width) - block_start(w, n, g.max_width);
                    (0..owned)
                        .map(|_| new_scratch(g.scratch_bytes_per_task))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        };
        let times = run_passes(n, 2, cfg.pin, init, |scratch, w, pass, team| {
            for t in 0..steps {
                for (gr, scratch) in graphs.iter().zip(scratch.iter_mut()) {
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
                    let first = block_start(w, n, g.max_width);
                    let lo = first.max(plan.offset(t));
                    let hi = block_start(w + 1, n, g.max_width).min(plan.offset(t) + plan.width(t));
                    let (row, prev) =
                        (&gr.rows[(t % 2) as usize], &gr.rows[((t + 1) % 2) as usize]);
                    for p in lo..hi {
                        // SAFETY: only this worker (the owner of `p`) writes slot `p`; the readers
                        // of its previous contents (consumers at `t-1` of `(t-2, p)`) were waited
                        // for above, and readers of the new contents start only after the Release
                        // store of `done[w]` below.
                        let out = unsafe { row.write(p as usize) };
                        // SAFETY: slot `d` of the previous row was written at `t-1` by its owner,
                        // who published it before we passed our wait; the owner writes it again
                        // at `t+1` only after seeing this worker finish `t`.
                        let input = |d: i64| unsafe { prev.read(d as usize) };
                        let sc = &mut scratch[(p - first) as usize];
                        if let Err(e) = run_task(plan, t, p, out, sc, input) {
                            return team.fail(e);
                        }
                    }
                    gr.done[w].store(base + t + 1, Ordering::Release);
                }
            }
        })?;
        Ok(times[1])
    }
}
