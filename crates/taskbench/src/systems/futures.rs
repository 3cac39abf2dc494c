//! `futures`: seed 004's ItoyoriFBC structure. Each point's output is a [`tactor::Future`]
//! that the tasks depending on it take as inputs ([`tactor::Scope::dataflow`]: the tasks
//! borrow the plans, and the scope waits for them and reports the first failure); outputs are
//! values, not buffers, so nothing orders a slot's reuse. `futures-barrier` runs each
//! timestep in a scope of its own, which waits for it before the next is launched (the seed's
//! per-step barrier, for its fair comparison); `futures` lets timesteps overlap. On ranks
//! each graph's points are cut in blocks ([`tactor::job::Blocks`]): an output other ranks
//! read leaves when it is ready, and arrives there as a future.

use super::interface::{RunConfig, RunError, System};
use super::{shared::footprint, shared::WorkerScratch, timing::passes, timing::Pass};
use std::sync::OnceLock;
use tactor::{job::Blocks, Future, Inputs, Placement};
use taskbench_core::{app::App, plan::Plan, validate::TaskError};

/// A point's output: inline up to the default size (no allocation per task).
type Out = smallvec::SmallVec<[u8; 16]>;

/// A future per point; with `barrier`, a wait per timestep.
pub struct Futures {
    /// Wait for every task of a timestep before launching the next.
    pub barrier: bool,
}

impl System for Futures {
    fn name(&self) -> &'static str {
        ["futures", "futures-barrier"][usize::from(self.barrier)]
    }

    fn about(&self) -> &'static str {
        [
            "each output a future its dependents take; timesteps overlap",
            "futures with a barrier after each timestep (seed 004's ItoyoriFBC)",
        ][usize::from(self.barrier)]
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // The values of about two timesteps live at once (a value goes when its readers ran).
        footprint::rows(app, 2, 1)
            .saturating_add(footprint::per_task(app, |t| t, 320, 48))
            .saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, exchange) = cfg.tactor()?;
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        let sizes: Vec<_> = (app.graphs.iter())
            .map(|g| (g.max_width as usize, g.output_bytes_per_task))
            .collect();
        let blocks = exchange.clone().map(|ex| Blocks::new(ex, 0, &sizes));
        let steps = app.graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
        let scratch = WorkerScratch::new(app, cfg.workers);
        // A point's task, on its inputs: a wrong one fails it (its dependents do not run),
        // and the first found is kept.
        let first = OnceLock::<TaskError>::new();
        let task = |g: usize, t, p: usize, ins: Inputs<Out>| {
            let mut out = Out::from_elem(0, plans[g].graph().output_bytes_per_task);
            if let Err(e) = scratch.run((g, &plans[g]), (t, p as i64), &mut out, ins.iter()) {
                tactor::fail(first.get_or_init(|| e).to_string());
            }
            out
        };
        let task = &task;
        // With the barrier, a scope per timestep; without, one scope and timesteps overlap.
        let per_scope = if self.barrier { 1 } else { steps.max(1) };
        passes(&rt, exchange.as_deref(), || {
            let mut last: Vec<Vec<Future<Out>>> = vec![Vec::new(); plans.len()];
            let none = Future::ready(Out::new()); // where a timestep has no point
            for t0 in (0..steps).step_by(per_scope as usize) {
                rt.scope(|s| {
                    for t in t0..steps.min(t0 + per_scope) {
                        for (g, plan) in plans.iter().enumerate() {
                            let mine = blocks.as_ref().map_or(0..sizes[g].0, |b| b.mine(g));
                            let live = plan.points(t);
                            let mut next = vec![none.clone(); sizes[g].0];
                            for p in mine.filter(|p| live.contains(p)) {
                                let ins = plan.dep_indices(t, p).map(|d| last[g][d].clone());
                                next[p] =
                                    s.dataflow(Placement::Any, ins, move |ins| task(g, t, p, ins));
                            }
                            last[g] = next;
                        }
                        if let Some(b) = &blocks {
                            let readers = |g: usize, q| plans[g].rdep_indices(t + 1, q);
                            b.send_when_ready(s, t, readers, |g, q| last[g][q].clone());
                            let reads = |g: usize, q| plans[g].dep_indices(t + 1, q);
                            b.receive_later_as(s, t, reads, |g, d, f| last[g][d] = f);
                        }
                    }
                })
                .map_err(|why| first.get().cloned().map_or(why.into(), RunError::from))?;
            }
            Ok(())
        })
    }
}
