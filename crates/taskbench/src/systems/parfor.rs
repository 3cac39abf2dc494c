//! `parfor`: seed 004's HPX `for_loop` structure. Each timestep is one parallel loop over the
//! points of every graph ([`tactor::try_for_each_mut`], grain 1: split only as far as workers are
//! idle to take the pieces), and the step ends when the loop returns.

use super::interface::{RunConfig, RunError, System};
use super::{styles, timing::Pass};
use taskbench_core::app::App;

/// A parallel loop per timestep.
pub struct ParFor;

impl System for ParFor {
    fn name(&self) -> &'static str {
        "parfor"
    }

    fn about(&self) -> &'static str {
        "a parallel loop over the points per timestep, grain 1 (HPX for_loop's shape)"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        styles::memory(app, cfg)
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        styles::run(app, cfg, |points, task| {
            tactor::try_for_each_mut(points, 1, move |_, point| task(point))
        })
    }
}
