//! What the loop styles (`forkjoin`, `parfor`) share: every graph's outputs as arrays stepped
//! in lock-step ([`tactor::job::Lockstep`], on ranks cut in blocks whose crossing outputs it
//! exchanges), and a timestep loop that hands each timestep's points to the style.

use super::interface::{RunConfig, RunError};
use super::shared::{footprint, run_task};
use super::team::Pass;
use super::timing::passes;
use tactor::job::{Lockstep, Step};
use taskbench_core::{app::App, kernel::new_scratch, plan::Plan, validate::TaskError};

/// Point `p` of timestep `t` of a graph (its plan), with its output and scratch, and the
/// outputs of the timestep before.
pub type Point<'a> = (
    &'a Plan,
    i64,
    i64,
    &'a mut Vec<u8>,
    &'a mut Vec<u8>,
    &'a [Vec<u8>],
);

/// Runs a point's task on its inputs, validating them.
pub fn run_point((plan, t, p, out, scratch, before): &mut Point) -> Result<(), TaskError> {
    run_task(plan, *t, *p, out, scratch, |d| &before[d as usize])
}

/// Two rows of outputs and one of scratch per graph, and the runtime.
pub fn memory(app: &App, cfg: &RunConfig) -> u128 {
    footprint::rows(app, 2, 1)
        .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
}

/// The points a list of points names, as indices.
fn indices(points: &[i64]) -> impl Iterator<Item = usize> + '_ {
    points.iter().map(|&p| p as usize)
}

/// Times `style`, called each timestep with this rank's points of every graph, which it runs
/// before it returns.
pub fn run(
    app: &App,
    cfg: &RunConfig,
    style: impl Fn(&mut [Point]) -> Result<(), TaskError> + Sync,
) -> Result<Pass, RunError> {
    let (rt, exchange) = cfg.tactor()?;
    let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
    let sizes: Vec<_> = (app.graphs.iter())
        .map(|g| (g.max_width as usize, g.output_bytes_per_task))
        .collect();
    let mut rows = Lockstep::new(exchange.clone(), 0, &sizes);
    let mut scratch: Vec<_> = (app.graphs.iter())
        .map(|g| vec![new_scratch(g.scratch_bytes_per_task); g.max_width as usize])
        .collect();
    let steps = app.graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
    passes(&rt, exchange.as_deref(), || {
        for t in 0..steps {
            let reads = |g: usize, q| indices(plans[g].deps(t, q as i64));
            (rows.receive(t, reads)).map_err(|why| RunError::waiting(exchange.as_deref(), why))?;
            let mut points = Vec::new();
            let graphs = rows.step(t).into_iter().zip(plans.iter().zip(&mut scratch));
            for (Step { mine, now, before }, (plan, scratch)) in graphs {
                let live = plan.offset(t) as usize..(plan.offset(t) + plan.width(t)) as usize;
                let here = mine.clone().zip(now.iter_mut().zip(&mut scratch[mine]));
                for (p, (out, s)) in here.filter(|(p, _)| live.contains(p)) {
                    points.push((plan, t, p as i64, out, s, before));
                }
            }
            style(&mut points)?;
            rows.send(t, |g, q| indices(plans[g].rdeps(t + 1, q as i64)));
        }
        Ok(())
    })
}
