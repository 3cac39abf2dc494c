//! `forkjoin`: seed 004's Itoyori structure. Each timestep a root splits the points of every
//! graph in halves with [`tactor::join`] down to single points, and the step ends when the
//! split has joined: one fork per point, stolen by idle workers, no events. Each half borrows
//! its part of the points (`split_at_mut`): no locks and no `unsafe`.

use super::interface::{RunConfig, RunError, System};
use super::styles::{self, Point, Task};
use super::timing::Pass;
use taskbench_core::{app::App, validate::TaskError};

/// Nested fork-join over the points, a join at the end of each timestep.
pub struct ForkJoin;

/// Runs `task` on every point, splitting the points in halves with `join` down to single
/// points. A half of one point travels by value in the forked closure, so a worker that takes
/// it reads it from the job itself (one cache line from the forker, not two).
fn split(points: &mut [Point], task: &Task) -> Result<(), TaskError> {
    match points {
        [] | [_] => points.iter_mut().try_for_each(task),
        [a, (t, g, p, out, s, before)] => {
            let mut b = (*t, *g, *p, &mut **out, &mut **s, *before);
            let (ra, rb) = tactor::join(|| task(a), move || task(&mut b));
            ra.and(rb)
        }
        _ => {
            let (a, b) = points.split_at_mut(points.len() / 2);
            let (ra, rb) = tactor::join(|| split(a, task), || split(b, task));
            ra.and(rb)
        }
    }
}

impl System for ForkJoin {
    fn name(&self) -> &'static str {
        "forkjoin"
    }

    fn about(&self) -> &'static str {
        "nested fork-join: each timestep splits the points in halves with join (Itoyori's shape)"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        styles::memory(app, cfg)
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        styles::run(app, cfg, split)
    }
}
