//! `compiled`: the graphs stepped as compiled dataflow over the job
//! ([`tactor::job::Dataflow`]), as an iterative application, or Legion's tracing, would use
//! compiled subgraphs: each timestep's points are tasks on their job-wide workers (the block
//! distribution), chunks of timesteps are compiled once per shape into subgraphs of the job
//! and instantiated one after another, and the runtime orders every reuse of an output's slot
//! and sends the outputs that cross ranks (one message per pair of ranks and level of an
//! instance, seed 000's Figure 9). No edge and no message is written here.

use super::graphs::Graphs;
use super::interface::{RunConfig, RunError, System};
use super::shared::{footprint, run_shared_task, run_task};
use super::timing::{passes, Pass};
use std::sync::Arc;
use tactor::job::{Dataflow, Stopped};
use taskbench_core::{app::App, kernel::new_scratch, plan::Plan};

/// Chunks of timesteps, each a compiled subgraph over the job, instantiated over and over.
pub struct Compiled;

impl System for Compiled {
    fn name(&self) -> &'static str {
        "compiled"
    }

    fn about(&self) -> &'static str {
        "the graphs' repeating body compiled into subgraphs of the job, instantiated over and \
         over: each rank keeps its points, and the runtime sends the outputs that cross ranks"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Rows of outputs, a scratch per point, and a few distinct chunks of about 4096 tasks
        // compiled (all of a graph whose shape keeps changing: it may not fit).
        let width: i64 = app.graphs.iter().map(|g| g.max_width).sum();
        let steps = 4 * (4096 / width.max(1)).max(32);
        footprint::rows(app, 2, 1)
            .saturating_add(footprint::per_task(app, |t| t.min(steps), 256, 64))
            .saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, remote) = cfg.tactor()?;
        let plans = Arc::new(
            app.graphs
                .iter()
                .cloned()
                .map(Plan::new)
                .collect::<Vec<_>>(),
        );
        let arrays: Vec<_> = (app.graphs.iter())
            .map(|g| (g.max_width as usize, g.output_bytes_per_task))
            .collect();
        let steps = app.graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
        let scratch = |g: usize, _| new_scratch(app.graphs[g].scratch_bytes_per_task);
        let (shared, graphs) = (cfg.workers > 1, Graphs(plans.clone()));
        let flow = Dataflow::new(
            &rt,
            remote.clone(),
            graphs,
            &arrays,
            steps,
            scratch,
            move |p| {
                let (plan, at) = (&plans[p.array], p.item as i64);
                let input = |d: i64| p.before.get(d as usize);
                match shared {
                    true => run_shared_task(plan, p.step, at, p.out, p.state, input),
                    false => run_task(plan, p.step, at, p.out, p.state, input),
                }
            },
        )
        .map_err(|e| RunError::Runtime(format!("compiling the chunks: {e}")))?;
        passes(&rt, remote.as_deref(), || {
            flow.run().map_err(|stopped| match stopped {
                Stopped::Failed(e) => RunError::Validation(e),
                Stopped::Broken(why) | Stopped::Aborted(why) => RunError::Runtime(why),
            })
        })
    }
}
