//! `bsp`: the twin of the reference `mpi/nonblock` on [`tactor::job::Neighbours`]. Each
//! graph's points are an array cut in one block per worker of the job; each worker steps its
//! block and, before a timestep, waits only for the workers it exchanges outputs with (in a
//! rank a counter each, across ranks one message per pair of workers and timestep, all graphs
//! together). The runtime derives those waits and messages from the graphs' dependencies.

use super::graphs::Graphs;
use super::interface::{RunConfig, RunError, System};
use super::shared::{footprint, run_task};
use super::timing::{passes_timed, Pass};
use std::sync::Arc;
use tactor::job::{Neighbours, Stopped};
use taskbench_core::{app::App, graph::TaskGraph, kernel::new_scratch, plan::Plan};

/// Block-distributed points, one long-running task per worker, neighbour-to-neighbour
/// synchronisation per timestep.
pub struct Bsp;

impl System for Bsp {
    fn name(&self) -> &'static str {
        "bsp"
    }

    fn about(&self) -> &'static str {
        "one long-running task per worker, block-distributed points, per-timestep exchange \
         with neighbours only (like mpi/nonblock); runs on several ranks"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        footprint::rows(app, 2, 1).saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, remote) = cfg.tactor()?;
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        let arrays: Vec<_> = (app.graphs.iter())
            .map(|g| (g.max_width as usize, g.output_bytes_per_task))
            .collect();
        let steps = app.graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
        let graphs = Graphs(Arc::new(plans));
        let grid = Neighbours::new(remote.clone(), cfg.workers, graphs, &arrays, steps);
        // Per worker and graph: its block's first point and a scratch buffer per point.
        let mut scratch: Vec<Vec<(usize, Vec<Vec<u8>>)>> = (0..cfg.workers)
            .map(|w| {
                let block = |(g, graph): (usize, &TaskGraph)| {
                    let mine = grid.mine(g, w);
                    let init = new_scratch(graph.scratch_bytes_per_task);
                    (mine.start, vec![init; mine.len()])
                };
                app.graphs.iter().enumerate().map(block).collect()
            })
            .collect();
        passes_timed(&rt, remote.as_deref(), || {
            let pass = grid.pass(&rt, &mut scratch, |scratch, block| {
                let (g, t) = (block.array(), block.step());
                let (first, buffers) = &mut scratch[g];
                let (items, before) = block.split();
                for (p, out) in items {
                    let s = &mut buffers[p - *first];
                    let plan = &grid.pattern().0[g];
                    run_task(plan, t, p as i64, out, s, |d| before.get(d as usize))?;
                }
                Ok(())
            });
            pass.map_err(|stopped| match stopped {
                Stopped::Failed(e) => RunError::Validation(e),
                Stopped::Broken(why) => RunError::Runtime(format!("bsp: {why}")),
                Stopped::Aborted(why) => RunError::waiting(remote.as_deref(), why),
            })
        })
    }
}
