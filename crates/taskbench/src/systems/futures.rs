//! `futures`: seed 004's ItoyoriFBC structure. Each point's output is a [`tactor::Future`]
//! that the tasks depending on it take as inputs ([`tactor::Handle::dataflow`]); outputs are
//! values, not buffers, so nothing orders a slot's reuse. `futures-barrier` waits for every
//! future of a timestep before launching the next (the seed's per-step barrier, for its fair
//! comparison); `futures` lets timesteps overlap. On ranks each graph's points are cut in
//! blocks ([`tactor::job::Blocks`]): an output other ranks read leaves when it is ready, and
//! arrives there as a future.

use super::interface::{RunConfig, RunError, System};
use super::{shared::footprint, shared::run_inputs, team::Pass, timing::passes};
use std::sync::{Arc, Mutex, OnceLock};
use tactor::{job::Blocks, Event, Future, Placement};
use taskbench_core::{app::App, kernel::new_scratch, plan::Plan, validate::TaskError};

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
        footprint::per_task(app, |t| t, 320, 48).saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, exchange) = cfg.tactor()?;
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        let sizes: Vec<_> = (app.graphs.iter())
            .map(|g| (g.max_width as usize, g.output_bytes_per_task))
            .collect();
        let blocks = exchange.clone().map(|ex| Blocks::new(ex, 0, &sizes));
        let steps = app.graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
        let workers = cfg.workers;
        // A task runs to its end on one worker: a scratch buffer per graph and worker.
        let scratch: Vec<_> = (app.graphs.iter())
            .flat_map(|g| (0..cfg.workers).map(|_| new_scratch(g.scratch_bytes_per_task)))
            .map(Mutex::new)
            .collect();
        // What every task reads, behind one count (one atomic per launch where three had
        // cost the driver a third of its time): the plans, the scratch, and the first wrong
        // input found — its task fails (its dependents do not run) and keeps why.
        let shared = Arc::new((plans, scratch, OnceLock::<TaskError>::new()));
        let (plans, first) = (&shared.0, &shared.2);
        let check = |e: &Event| {
            e.wait()
                .map_err(|why| first.get().cloned().map_or(why.into(), Into::into))
        };
        passes(&rt, exchange.as_deref(), || {
            let mut all = std::collections::VecDeque::new();
            let mut last: Vec<Vec<Future<Vec<u8>>>> = vec![Vec::new(); plans.len()];
            for t in 0..steps {
                let mut now = Vec::new();
                for (g, plan) in plans.iter().enumerate() {
                    let mine = blocks.as_ref().map_or(0..sizes[g].0, |b| b.mine(g));
                    let live = plan.offset(t) as usize..(plan.offset(t) + plan.width(t)) as usize;
                    let mut next = vec![Future::ready(Vec::new()); sizes[g].0];
                    for p in mine.filter(|p| live.contains(p)) {
                        let ins = plan.dep_indices(t, p).map(|d| last[g][d].clone());
                        let shared = shared.clone();
                        next[p] = rt.dataflow(Placement::Any, ins, move |ins| {
                            let (plans, scratch, first) = &*shared;
                            let mut out = vec![0; plans[g].graph().output_bytes_per_task];
                            let w = g * workers + tactor::current_worker().expect("on a worker");
                            let mut s = scratch[w].lock().unwrap_or_else(|p| p.into_inner());
                            let (ins, p) = (ins.iter(), p as i64);
                            if let Err(e) = run_inputs(&plans[g], t, p, &mut out, &mut s, ins) {
                                tactor::fail(first.get_or_init(|| e).to_string());
                            }
                            out
                        });
                        now.push(next[p].event().clone());
                    }
                    last[g] = next;
                }
                if let Some(b) = &blocks {
                    let readers = |g: usize, q| plans[g].rdep_indices(t + 1, q);
                    let sent = b.send_when_ready(&rt, t, readers, |g, q| last[g][q].clone());
                    now.extend(sent.iter().map(|f| f.event().clone()));
                    let reads = |g: usize, q| plans[g].dep_indices(t + 1, q);
                    b.receive_later(&rt, t, reads, |g, d, f| last[g][d] = f);
                }
                if self.barrier {
                    now.iter().try_for_each(check)?;
                }
                all.extend(now);
                // Let go of what has ended: held to the end of the pass, every value of the
                // pass would stay in memory.
                while all.front().is_some_and(Event::has_triggered) {
                    check(&all.pop_front().expect("looked at"))?;
                }
            }
            // Not every task has a dependent: look at each left.
            all.iter().try_for_each(check)
        })
    }
}
