//! `serial`: one thread, timesteps in order. The correctness reference.

use super::interface::{check_workers, RunConfig, RunError, System};
use super::shared::{footprint, run_task};
use super::team::{run_passes, Pass};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// Runs graph after graph, timestep after timestep, point after point on the calling thread.
pub struct Serial;

struct GraphState {
    prev: Vec<Vec<u8>>,
    cur: Vec<Vec<u8>>,
    scratch: Vec<Vec<u8>>,
}

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
        let init = |_| {
            plans
                .iter()
                .map(|plan| {
                    let g = plan.graph();
                    let w = g.max_width as usize;
                    GraphState {
                        prev: vec![vec![0; g.output_bytes_per_task]; w],
                        cur: vec![vec![0; g.output_bytes_per_task]; w],
                        scratch: (0..w)
                            .map(|_| new_scratch(g.scratch_bytes_per_task))
                            .collect(),
                    }
                })
                .collect::<Vec<_>>()
        };
        let times = run_passes(None, 1, 2, cfg.pin, init, |states, _, _, team| {
            for (plan, st) in plans.iter().zip(states.iter_mut()) {
                for t in 0..plan.graph().timesteps {
                    for p in plan.offset(t)..plan.offset(t) + plan.width(t) {
                        let (out, scratch) = (&mut st.cur[p as usize], &mut st.scratch[p as usize]);
                        let prev = &st.prev;
                        if let Err(e) = run_task(plan, t, p, out, scratch, |d| &prev[d as usize]) {
                            return team.fail(e);
                        }
                    }
                    std::mem::swap(&mut st.prev, &mut st.cur);
                }
            }
        })?;
        Ok(times[1])
    }
}
