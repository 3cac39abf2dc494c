//! `forkjoin`: seed 004's Itoyori structure. Each timestep a root splits the points of every
//! graph in halves, recursively, with [`tactor::join`] down to single points, and the step ends
//! when the split has joined: one fork per point, stolen by idle workers, no events.

use super::on_tactor::{self, ErrorSlot, Graph};
use super::team::Pass;
use super::{check_workers, footprint, RunConfig, RunError, System};
use taskbench_core::app::App;
use taskbench_core::plan::Plan;

/// Nested fork-join over the points, a join at the end of each timestep.
pub struct ForkJoin;

/// Calls `leaf(i)` for every `i` in `lo..hi`, splitting the range in halves with `join`.
pub fn split(lo: i64, hi: i64, leaf: &(impl Fn(i64) + Sync)) {
    match hi - lo {
        ..=0 => {}
        1 => leaf(lo),
        n => {
            let mid = lo + n / 2;
            tactor::join(|| split(lo, mid, leaf), || split(mid, hi, leaf));
        }
    }
}

impl System for ForkJoin {
    fn name(&self) -> &'static str {
        "forkjoin"
    }

    fn about(&self) -> &'static str {
        "nested fork-join: each timestep splits the points in halves with join (Itoyori's shape)"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        footprint::rows(app, 2, 2)
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let (rt, _) = on_tactor::start(cfg)?;
        let (place, rank) = on_tactor::placement(cfg);
        let graphs: Vec<Graph> = (app.graphs.iter())
            .map(|g| Graph::new(Plan::new(g.clone()), place, rank))
            .collect();
        let steps = graphs.iter().map(|g| g.plan.graph().timesteps).max();
        let error = ErrorSlot::new(None);
        on_tactor::passes(&rt, &error, None, || {
            for t in 0..steps.unwrap_or(0) {
                split(0, graphs.len() as i64, &|gi| {
                    let g = &graphs[gi as usize];
                    if t < g.plan.graph().timesteps {
                        let (first, width) = (g.plan.offset(t), g.plan.width(t));
                        // SAFETY: within a timestep each point writes only its own slots and
                        // reads the previous row, which nothing writes until the step joined.
                        split(first, first + width, &|p| unsafe {
                            g.run_point(t, p, &error)
                        });
                    }
                });
            }
            Ok(())
        })
    }
}
