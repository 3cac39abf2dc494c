//! `parfor`: seed 004's HPX `for_loop` structure. Each timestep is one parallel loop over the
//! points of every graph ([`tactor::for_each_mut`], grain 1: split only as far as workers are
//! idle to take the pieces), and the step ends when the loop returns.

use super::interface::{RunConfig, RunError, System};
use super::shared::{footprint, run_task};
use super::styles;
use super::team::Pass;
use std::sync::Mutex;
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
        footprint::rows(app, 2, 1)
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, graphs) = styles::start(app, cfg, true)?;
        let remote = graphs.exchange();
        let graphs = Mutex::new(graphs);
        super::timing::passes(&rt, remote.as_deref(), || {
            let mut graphs = graphs.lock().unwrap_or_else(|p| p.into_inner());
            for t in 0..graphs.steps() {
                graphs.receive(t)?;
                let mut points: Vec<_> = graphs
                    .graphs
                    .iter_mut()
                    .flat_map(|g| {
                        let (plan, points, prev) = g.step(t);
                        points.into_iter().map(move |p| (plan, p, prev))
                    })
                    .collect();
                let error = Mutex::new(Ok(()));
                tactor::for_each_mut(&mut points, 1, |_, (plan, (p, out, scratch), prev)| {
                    if let Err(e) = run_task(plan, t, *p, out, scratch, |d| &prev[d as usize]) {
                        *error.lock().unwrap_or_else(|p| p.into_inner()) = Err(e);
                    }
                });
                error.into_inner().unwrap_or_else(|p| p.into_inner())?;
                graphs.send(t);
            }
            Ok(())
        })
    }
}
