//! `futures`: seed 004's ItoyoriFBC structure. Each point's output is a [`tactor::Future`]
//! that the tasks depending on it take as preconditions and read; outputs are values, not
//! buffers, so nothing orders a slot's reuse. `futures-barrier` waits for every future of a
//! timestep before launching the next (the seed's per-step barrier, for its fair
//! comparison); `futures` lets timesteps overlap.

use super::interface::{RunConfig, RunError, System};
use super::shared::{footprint, run_inputs};
use super::team::Pass;
use super::timing::passes;
use std::sync::{Arc, Mutex};
use tactor::job::{Blocks, Exchange};
use tactor::{Future, Handle, Placement, Promise};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;
use taskbench_core::validate::TaskError;

/// A future per point; with `barrier`, a wait per timestep.
pub struct Futures {
    /// Wait for every task of a timestep before launching the next.
    pub barrier: bool,
}

/// A task's output, or the first validation failure among it and its inputs.
type Output = Future<Result<Vec<u8>, TaskError>>;

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
        let (rt, exchange) = cfg.tactor()?;
        let plans: Arc<Vec<Plan>> = Arc::new(app.graphs.iter().cloned().map(Plan::new).collect());
        let sizes: Vec<_> = (app.graphs.iter())
            .map(|g| (g.max_width as usize, g.output_bytes_per_task))
            .collect();
        // On ranks, each graph's points are cut in blocks; its outputs that cross ranks are
        // sent by a task once ready, and a task takes each rank's message as it arrives.
        let blocks = exchange.clone().map(|ex| Blocks::new(ex, 0, &sizes));
        let mine = |g: usize| blocks.as_ref().map_or(0..sizes[g].0, |b| b.mine(g));
        let steps = app.graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
        // A task runs to its end on one worker: a scratch buffer per worker and graph.
        let scratch: Arc<Vec<Vec<Mutex<Vec<u8>>>>> = Arc::new(
            (plans.iter())
                .map(|p| {
                    (0..cfg.workers)
                        .map(|_| Mutex::new(new_scratch(p.graph().scratch_bytes_per_task)))
                        .collect()
                })
                .collect(),
        );
        let check = |f: &Output| match f.get() {
            Ok(out) => out
                .as_ref()
                .map(drop)
                .map_err(|e| RunError::Validation(e.clone())),
            Err(e) => Err(RunError::Runtime(e.to_string())),
        };
        passes(&rt, exchange.as_deref(), || {
            let h = rt.handle();
            let mut last: Vec<Vec<Output>> = plans.iter().map(|_| Vec::new()).collect();
            let mut all = std::collections::VecDeque::new();
            for t in 0..steps {
                if let Some(blocks) = blocks.as_ref().filter(|_| t > 0) {
                    receive(&h, blocks, &plans, t, &mut last);
                }
                let mut now = Vec::new();
                for (gi, plan) in plans
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| t < p.graph().timesteps)
                {
                    let mut next =
                        vec![Future::ready(Ok(Vec::new())); plan.graph().max_width as usize];
                    let live = plan.offset(t)..plan.offset(t) + plan.width(t);
                    for p in mine(gi).map(|p| p as i64).filter(|p| live.contains(p)) {
                        let ins = (plan.deps(t, p).iter()).map(|&d| last[gi][d as usize].clone());
                        let (plans, scratch) = (plans.clone(), scratch.clone());
                        next[p as usize] = h.dataflow(Placement::Any, ins, move |ins| {
                            if let Some(e) = ins.iter().find_map(|r| r.as_ref().err()) {
                                return Err(e.clone());
                            }
                            let ins = ins.iter().map(|r| r.as_deref().unwrap_or_default());
                            let mut out = vec![0; plans[gi].graph().output_bytes_per_task];
                            let w = tactor::current_worker().expect("tasks run on workers");
                            let mut scratch =
                                scratch[gi][w].lock().unwrap_or_else(|p| p.into_inner());
                            run_inputs(&plans[gi], t, p, &mut out, &mut scratch, ins).map(|()| out)
                        });
                        now.push(next[p as usize].clone());
                    }
                    last[gi] = next;
                }
                if let Some(blocks) = &blocks {
                    send(&h, blocks, &plans, t, &last, &mut now);
                }
                if self.barrier {
                    now.iter().try_for_each(check)?;
                }
                all.extend(now);
                // Let go of what has ended: held to the end of the pass, every value of the
                // pass would stay in memory.
                while all
                    .front()
                    .is_some_and(|f: &Output| f.event().has_triggered())
                {
                    check(&all.pop_front().expect("looked at"))?;
                }
            }
            // Not every task has a dependent: look at each left.
            all.iter().try_for_each(check)
        })
    }
}

/// The outputs of timestep `t - 1` that this rank reads from others: a future per point in
/// `last`, set by a task that takes their message when it arrives.
fn receive(h: &Handle, blocks: &Blocks, plans: &[Plan], t: i64, last: &mut [Vec<Output>]) {
    let reads = |g: usize, q| plans[g].deps(t, q as i64).iter().map(|&d| d as usize);
    blocks.messages(t - 1, false, reads, |key, group| {
        let mut promises = Vec::with_capacity(group.len());
        for &(_, g, d) in group {
            let (promise, future) = Promise::new();
            let bytes = plans[g as usize].graph().output_bytes_per_task;
            promises.push((promise, bytes));
            last[g as usize][d] = future;
        }
        let remote = blocks.exchange().clone();
        h.launch(Placement::Any, &[remote.arrival(key)], move || {
            let len = promises.iter().map(|(_, len)| len).sum();
            let Some(m) = remote.receive(key, promises.len(), len) else {
                // Its dependents fail; the pass reports the protocol error itself.
                return promises
                    .into_iter()
                    .for_each(|(p, _)| p.fail("a bad message"));
            };
            let mut items = Exchange::payload(&m);
            for (promise, len) in promises {
                let (mine, rest) = items.split_at(len);
                promise.set(Ok(mine.to_vec()));
                items = rest;
            }
        });
    });
}

/// Sends the outputs of timestep `t` (in `last`) that other ranks read, each message from a
/// task that runs once its outputs are ready (added to `now`).
fn send(
    h: &Handle,
    blocks: &Blocks,
    plans: &[Plan],
    t: i64,
    last: &[Vec<Output>],
    now: &mut Vec<Output>,
) {
    let readers = |g: usize, q| plans[g].rdeps(t + 1, q as i64).iter().map(|&r| r as usize);
    blocks.messages(t, true, readers, |(stream, t, dest), group| {
        let outs = (group.iter()).map(|&(_, gi, q)| last[gi as usize][q].clone());
        let remote = blocks.exchange().clone();
        now.push(h.dataflow(Placement::Any, outs, move |outs| {
            let items: Vec<&[u8]> = (outs.iter())
                .map(|r| r.as_deref())
                .collect::<Result<_, _>>()
                .map_err(Clone::clone)?;
            let (count, len) = (items.len(), items.iter().map(|i| i.len()).sum());
            let channel = tactor::current_worker().unwrap_or(0);
            remote.send(channel, dest, (stream, t), count, len, items.into_iter());
            Ok(Vec::new())
        }));
    });
}
