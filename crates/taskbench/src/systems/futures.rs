//! `futures`: seed 004's ItoyoriFBC structure. Each point's output is a [`tactor::Future`]
//! that the tasks depending on it take as preconditions and read; outputs are values, not
//! buffers, so nothing orders a slot's reuse. `futures-barrier` waits for every future of a
//! timestep before launching the next (the seed's per-step barrier, for its fair
//! comparison); `futures` lets timesteps overlap.

use super::on_tactor::{self, ErrorSlot};
use super::slots::Slots;
use super::team::Pass;
use super::{check_workers, footprint, RunConfig, RunError, System};
use std::sync::Arc;
use tactor::{Event, Future, Placement};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// A future per point; with `barrier`, a wait per timestep.
pub struct Futures {
    /// Wait for every task of a timestep before launching the next.
    pub barrier: bool,
}

type Output = Future<Box<[u8]>>;

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
        footprint::per_task(app, |t| t, 320, 48)
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let (rt, _) = on_tactor::start(cfg)?;
        let plans: Arc<Vec<Plan>> = Arc::new(app.graphs.iter().cloned().map(Plan::new).collect());
        // A task runs to its end on its worker, never suspended: one scratch per worker.
        let scratch: Arc<Vec<Slots>> = Arc::new(
            (plans.iter())
                .map(|p| Slots::filled(cfg.workers, &new_scratch(p.graph().scratch_bytes_per_task)))
                .collect(),
        );
        let error = Arc::new(ErrorSlot::new(None));
        let h = rt.handle();
        let steps = plans.iter().map(|p| p.graph().timesteps).max().unwrap_or(0);
        on_tactor::passes(&rt, &error, None, || {
            let mut last: Vec<Vec<Option<Output>>> = (plans.iter())
                .map(|p| vec![None; p.graph().max_width as usize])
                .collect();
            let mut all: Vec<Event> = Vec::new();
            for t in 0..steps {
                let mut now: Vec<Event> = Vec::new();
                for (gi, plan) in plans
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| t < p.graph().timesteps)
                {
                    let mut next = vec![None; last[gi].len()];
                    for p in plan.offset(t)..plan.offset(t) + plan.width(t) {
                        let ins: Vec<Output> = (plan.deps(t, p).iter())
                            .map(|&d| last[gi][d as usize].clone().expect("dependency ran"))
                            .collect();
                        let pre: Vec<Event> = ins.iter().map(|f| f.event().clone()).collect();
                        let (plans, scratch, error) =
                            (plans.clone(), scratch.clone(), error.clone());
                        let f = h.spawn(Placement::Any, &pre, move || {
                            let plan = &plans[gi];
                            let mut out = vec![0; plan.graph().output_bytes_per_task];
                            let w = tactor::current_worker().expect("tasks run on workers");
                            // SAFETY: a task uses its worker's scratch slot alone (see above).
                            let scratch = unsafe { scratch[gi].write(w) };
                            let inputs = ins.iter().map(|f| {
                                &f.try_get()
                                    .expect("a precondition")
                                    .expect("a dependency that failed poisons its dependents")[..]
                            });
                            if let Err(e) = super::run_inputs(plan, t, p, &mut out, scratch, inputs)
                            {
                                error.record(e);
                            }
                            out.into_boxed_slice()
                        });
                        now.push(f.event().clone());
                        next[p as usize] = Some(f);
                    }
                    last[gi] = next;
                }
                if self.barrier {
                    Event::merge(&now)
                        .wait()
                        .map_err(|e| RunError::Runtime(e.to_string()))?;
                }
                all.append(&mut now);
            }
            // Not every task has a dependent: wait for each.
            all.iter()
                .try_for_each(|e| e.wait().map_err(|e| RunError::Runtime(e.to_string())))
        })
    }
}
