//! `forkjoin`: seed 004's Itoyori structure. Each timestep a root splits the graphs, then each
//! graph's points, in halves with [`tactor::join`] down to single points, and the step ends
//! when the split has joined: one fork per point, stolen by idle workers, no events. Each half
//! borrows its part of the row (`split_at_mut`): no locks and no `unsafe`.

use super::interface::{RunConfig, RunError, System};
use super::shared::{footprint, run_task};
use super::styles::{self, Buffers};
use super::team::Pass;
use taskbench_core::app::App;

/// Nested fork-join over the points, a join at the end of each timestep.
pub struct ForkJoin;

/// Calls `f` on every item, splitting the slice in halves with `join` down to single items.
fn split<T: Send, E: Send>(
    items: &mut [T],
    f: &(impl Fn(&mut T) -> Result<(), E> + Sync),
) -> Result<(), E> {
    match items {
        [] => Ok(()),
        [one] => f(one),
        _ => {
            let (a, b) = items.split_at_mut(items.len() / 2);
            let (ra, rb) = tactor::join(|| split(a, f), || split(b, f));
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
        footprint::rows(app, 2, 1)
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, graphs) = styles::start(app, cfg, true)?;
        let remote = graphs.exchange();
        let graphs = std::sync::Mutex::new(graphs);
        super::timing::passes(&rt, remote.as_deref(), || {
            let mut graphs = graphs.lock().unwrap_or_else(|p| p.into_inner());
            for t in 0..graphs.steps() {
                graphs.receive(t)?;
                split(&mut graphs.graphs, &|g: &mut Buffers| {
                    let (plan, mut points, prev) = g.step(t);
                    split(&mut points, &|(p, out, scratch)| {
                        run_task(plan, t, *p, out, scratch, |d| &prev[d as usize])
                    })
                })?;
                graphs.send(t);
            }
            Ok(())
        })
    }
}
