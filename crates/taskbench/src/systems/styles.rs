//! What the loop styles (`forkjoin`, `parfor`) share: every graph's outputs as arrays stepped
//! in lock-step ([`tactor::job::Lockstep`], on ranks cut in blocks whose crossing outputs it
//! exchanges), and a timestep loop that hands each timestep's points to the style.

use super::interface::{RunConfig, RunError};
use super::{shared::footprint, shared::run_task, timing::passes, timing::Pass};
use tactor::job::Lockstep;
use taskbench_core::{app::App, kernel::new_scratch, plan::Plan, validate::TaskError};

/// Point `p` of graph `g` at timestep `t`, with its output and scratch, and the outputs of the
/// timestep before: all that changes from one timestep to the next, in the point itself.
pub type Point<'a> = (i64, usize, usize, &'a mut [u8], &'a mut [u8], &'a [Vec<u8>]);

/// A point's task: runs it on its inputs, validating them.
pub type Task<'a> = dyn Fn(&mut Point) -> Result<(), TaskError> + Sync + 'a;

/// Two rows of outputs and one of scratch per graph, and the runtime.
pub fn memory(app: &App, cfg: &RunConfig) -> u128 {
    footprint::rows(app, 2, 1).saturating_add(cfg.tactor_footprint())
}

/// Times `style`, called each timestep with this rank's points of every graph and their task,
/// which it runs on each before it returns.
pub fn run(
    app: &App,
    cfg: &RunConfig,
    style: impl Fn(&mut [Point], &Task) -> Result<(), TaskError> + Sync,
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
    // One closure for every timestep: a worker that runs a point finds it in its cache, and
    // only the points themselves (written by the timestep's loop) cross between cores.
    let task = |(t, g, p, out, s, before): &mut Point| {
        run_task(&plans[*g], *t, *p as i64, out, s, |d| &before[d as usize])
    };
    passes(&rt, exchange.as_deref(), || {
        for t in 0..steps {
            let reads = |g: usize, q| plans[g].dep_indices(t, q);
            (rows.receive(t, reads)).map_err(|why| RunError::waiting(exchange.as_deref(), why))?;
            // On the stack when few: no allocation on the path of every step.
            let mut points: smallvec::SmallVec<[Point; 8]> = smallvec::SmallVec::new();
            for (g, (step, scratch)) in rows.step(t).zip(&mut scratch).enumerate() {
                let (live, mine) = (plans[g].points(t), step.mine);
                let outs = step.now.iter_mut().zip(&mut scratch[mine.clone()]);
                for (p, (out, s)) in mine.zip(outs).filter(|(p, _)| live.contains(p)) {
                    points.push((t, g, p, out, s, step.before));
                }
            }
            style(&mut points, &task)?;
            drop(points); // frees `rows` for the send
            rows.send(t, |g, q| plans[g].rdep_indices(t + 1, q));
        }
        Ok(())
    })
}
