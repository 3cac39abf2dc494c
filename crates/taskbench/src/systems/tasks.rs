//! `tasks`: the graph written the way a Realm or StarPU user writes it, on Tactor's explicit
//! task API across the job ([`tactor::job::Spmd`]). Every point of every timestep is one task,
//! spawned on the worker of the job that the block distribution gives it, with the values of
//! the points it reads as its inputs. Nothing else orders the tasks: no barriers, no
//! synchronisation per timestep. Every rank makes every spawn (control replication); a task
//! runs on its own rank only, and a value that another rank reads goes there as one message
//! when it is ready. No edge and no message is written here.

use super::interface::{RunConfig, RunError, System};
use super::shared::{block_owners, footprint, WorkerScratch};
use super::timing::{passes, Pass};
use smallvec::SmallVec;
use std::sync::OnceLock;
use tactor::job::{At, Spmd, Value};
use tactor::{Failure, Inputs};
use taskbench_core::{app::App, plan::Plan, validate::TaskError};

/// One spawned task per point, ordered only by the values it takes.
pub struct Tasks;

impl System for Tasks {
    fn name(&self) -> &'static str {
        "tasks"
    }

    fn about(&self) -> &'static str {
        "Tactor's explicit task API over the job: one task per point on its worker, taking \
         its dependencies' values; every rank makes every spawn"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Every task is spawned before the pass waits; the values of about two timesteps
        // live at once (a value goes when its readers ran).
        footprint::rows(app, 2, 1)
            .saturating_add(footprint::per_task(app, |t| t, 320, 48))
            .saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, remote) = cfg.tactor()?;
        let job = cfg.job_or_one();
        let steps = app.graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
        // Each point on its rank by the block distribution, on whichever worker there is free.
        let owners: Vec<Vec<At>> = (app.graphs.iter())
            .map(|g| block_owners(job.ranks(), g.max_width))
            .map(|ranks| ranks.into_iter().map(At::Rank).collect())
            .collect();
        let points = &Points {
            plans: app.graphs.iter().cloned().map(Plan::new).collect(),
            scratch: WorkerScratch::new(app, cfg.workers),
            first: OnceLock::new(),
        };
        passes(&rt, remote.as_deref(), || {
            // The tasks borrow `points`: the scope waits for them, then `fence` for the sends.
            let mut s = Spmd::new(&rt.handle(), &job);
            let ran = rt.scope(|scope| {
                // Per graph, the values of the last timestep by point, and room for the next.
                let mut last: Vec<Vec<Option<Value<Vec<u8>>>>> = vec![Vec::new(); owners.len()];
                let mut next = last.clone();
                for t in 0..steps {
                    for (g, plan) in points.plans.iter().enumerate() {
                        next[g].clear();
                        next[g].resize(owners[g].len(), None);
                        for p in plan.points(t) {
                            let ins: SmallVec<[_; 8]> = (plan.dep_indices(t, p))
                                .map(|d| last[g][d].as_ref().expect("read in the last timestep"))
                                .collect();
                            let run = move |ins: Inputs<Vec<u8>>| points.run(g, t, p, ins);
                            next[g][p] = Some(s.spawn_in(scope, owners[g][p], &ins, run));
                        }
                        std::mem::swap(&mut last[g], &mut next[g]);
                    }
                }
            });
            // This rank's wrong input first; else a failure that crossed from another rank
            // (which reports it).
            ran.and_then(|()| s.fence())
                .map_err(|why| match (points.first.get(), why.failure()) {
                    (Some(e), _) => e.clone().into(),
                    (None, Failure::Remote { rank, .. }) => {
                        // That rank reports: wait until it has (its failure ends the wait),
                        // or this rank's exit could end the job before it speaks.
                        let _ = job.barrier();
                        RunError::Remote { rank: *rank }
                    }
                    (None, _) => why.into(),
                })
        })
    }
}

/// What every task of a run shares.
struct Points {
    plans: Vec<Plan>,
    scratch: WorkerScratch,
    /// The first task that found a wrong input.
    first: OnceLock<TaskError>,
}

impl Points {
    /// Point `p` of timestep `t` of graph `g`, on its inputs: a wrong one fails it (its
    /// dependents do not run) and the first found is kept.
    fn run(&self, g: usize, t: i64, p: usize, ins: Inputs<Vec<u8>>) -> Vec<u8> {
        let mut out = vec![0; self.plans[g].graph().output_bytes_per_task];
        if let Err(e) = (self.scratch).run((g, &self.plans[g]), (t, p as i64), &mut out, ins.iter())
        {
            tactor::fail(self.first.get_or_init(|| e).to_string());
        }
        out
    }
}
