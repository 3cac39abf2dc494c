//! `parfor`: seed 004's HPX `for_loop` structure. Each timestep is one parallel loop over the
//! points of every graph ([`tactor::for_each`], grain 1: split only as far as workers are idle
//! to take the pieces), and the step ends when the loop returns.

use super::on_tactor::{self, ErrorSlot, Graph};
use super::team::Pass;
use super::{check_workers, footprint, RunConfig, RunError, System};
use taskbench_core::app::App;
use taskbench_core::plan::Plan;

/// A parallel loop per timestep.
pub struct ParFor;

impl System for ParFor {
    fn name(&self) -> &'static str {
        "parfor"
    }

    fn about(&self) -> &'static str {
        "a parallel loop over the points per timestep, grain 1 (HPX for_loop's shape)"
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
                let live: Vec<&Graph> = (graphs.iter())
                    .filter(|g| t < g.plan.graph().timesteps)
                    .collect();
                let width = live.iter().map(|g| g.plan.width(t) as usize).max();
                tactor::for_each(0..live.len() * width.unwrap_or(0), 1, |i| {
                    let (g, p) = (live[i % live.len()], (i / live.len()) as i64);
                    if p < g.plan.width(t) {
                        // SAFETY: within a timestep each point writes only its own slots and
                        // reads the previous row, which nothing writes until the loop ended.
                        unsafe { g.run_point(t, g.plan.offset(t) + p, &error) }
                    }
                });
            }
            Ok(())
        })
    }
}
