//! `serial`: one thread, timesteps in order. The correctness reference.

use super::interface::{check_workers, RunConfig, RunError, System};
use super::shared::{footprint, run_task};
use super::timing::{passes_here, Pass};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// Runs graph after graph, timestep after timestep, point after point on the calling thread.
pub struct Serial;

impl System for Serial {
    fn name(&self) -> &'static str {
        "serial"
    }

    fn about(&self) -> &'static str {
        "one thread, timesteps in order (the correctness reference; ignores -worker)"
    }

    fn memory(&self, app: &App, _: &RunConfig) -> u128 {
        // Two rows of outputs and one scratch buffer per point, plain vectors.
        footprint::rows(app, 2, 1)
    }

    fn runs_on_ranks(&self) -> bool {
        false
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        // Per graph: the outputs of the timestep before and of this one, and scratch.
        let mut rows: Vec<_> = (app.graphs.iter())
            .map(|g| {
                let row = vec![vec![0; g.output_bytes_per_task]; g.max_width as usize];
                let scratch = (0..g.max_width).map(|_| new_scratch(g.scratch_bytes_per_task));
                (row.clone(), row, scratch.collect::<Vec<_>>())
            })
            .collect();
        passes_here(cfg.pin, || {
            for (plan, (before, now, scratch)) in plans.iter().zip(&mut rows) {
                for t in 0..plan.graph().timesteps {
                    for p in plan.offset(t)..plan.offset(t) + plan.width(t) {
                        let (out, s) = (&mut now[p as usize], &mut scratch[p as usize]);
                        run_task(plan, t, p, out, s, |d| &before[d as usize])?;
                    }
                    std::mem::swap(before, now);
                }
            }
            Ok(())
        })
    }
}
