//! `replicated`: the graph as one sequential program on Tactor's implicit face, control
//! replicated over the job ([`tactor::implicit::Replicated`]). Every rank issues every launch;
//! each runs on the rank its point is placed on (the block distribution), on whichever of its
//! workers is free, and the runtime copies an output to another rank when a task there reads
//! it. Each output is a
//! region, in two rows by timestep parity; the analysis orders every reuse. No edge and no
//! message is written here.

use super::interface::{RunConfig, RunError, System};
use super::shared::{block_owners, footprint, run_inputs};
use super::team::Pass;
use std::sync::{Arc, Mutex};
use tactor::implicit::{read, write, Read, Region, Replicated as Program};
use tactor::job::Job;
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;
use taskbench_core::validate::TaskError;

/// The implicit program, its copies between ranks derived by the runtime.
pub struct Replicated;

impl System for Replicated {
    fn name(&self) -> &'static str {
        "replicated"
    }

    fn about(&self) -> &'static str {
        "Tactor's implicit parallelism control-replicated over the job: the runtime derives \
         every edge and every copy between ranks"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Every rank holds every output region (two rows), and every task of the pass is
        // issued before the first is waited for.
        footprint::rows(app, 2, 1)
            .saturating_add(footprint::per_task(app, |t| t, 1024, 160))
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, remote) = cfg.tactor()?;
        let job = match &cfg.job {
            Some(job) => job.clone(),
            None => Job::in_process(1, cfg.workers).remove(0),
        };
        let mut prog = Program::new(&rt.handle(), &job);
        let plans: Arc<Vec<Plan>> = Arc::new(app.graphs.iter().cloned().map(Plan::new).collect());
        let ranks = job.ranks();
        // Per graph, the rank of each point, and its output regions in two rows.
        let owners: Vec<Vec<usize>> = (plans.iter())
            .map(|p| block_owners(ranks, p.graph().max_width))
            .collect();
        let regions: Vec<[Vec<Region<Vec<u8>>>; 2]> = (plans.iter().zip(&owners))
            .map(|(plan, owners)| {
                let bytes = plan.graph().output_bytes_per_task;
                [0, 1].map(|_| {
                    (owners.iter())
                        .map(|&r| prog.region(r * cfg.workers, vec![0; bytes]))
                        .collect()
                })
            })
            .collect();
        // A task runs to its end on one worker: a scratch buffer per worker and graph.
        let scratch: Arc<Vec<Vec<Mutex<Vec<u8>>>>> = Arc::new(
            (plans.iter())
                .map(|p| {
                    let bytes = p.graph().scratch_bytes_per_task;
                    (0..cfg.workers)
                        .map(|_| Mutex::new(new_scratch(bytes)))
                        .collect()
                })
                .collect(),
        );
        // The first validation failure, reported after the pass.
        let error: Arc<Mutex<Option<TaskError>>> = Arc::default();
        let steps = (plans.iter())
            .map(|p| p.graph().timesteps)
            .max()
            .unwrap_or(0);
        let prog = Mutex::new(prog);
        super::timing::passes(&rt, remote.as_deref(), || {
            let mut prog = prog.lock().unwrap_or_else(|p| p.into_inner());
            for t in 0..steps {
                let live = plans
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| t < p.graph().timesteps);
                for (gi, plan) in live {
                    let (rows, row) = (&regions[gi], (t % 2) as usize);
                    for p in plan.offset(t)..plan.offset(t) + plan.width(t) {
                        let ins: Vec<Read<Vec<u8>>> = (plan.deps(t, p).iter())
                            .map(|&d| read(&rows[1 - row][d as usize]))
                            .collect();
                        let out = write(&rows[row][p as usize]);
                        let (plans, scratch, error) =
                            (plans.clone(), scratch.clone(), error.clone());
                        prog.launch_on_rank(
                            owners[gi][p as usize],
                            (ins, out),
                            move |(ins, out)| {
                                let w = tactor::current_worker().expect("tasks run on workers");
                                let mut scratch =
                                    scratch[gi][w].lock().unwrap_or_else(|p| p.into_inner());
                                let ins = ins.iter().map(|v| &v[..]);
                                if let Err(e) = run_inputs(&plans[gi], t, p, out, &mut scratch, ins)
                                {
                                    error
                                        .lock()
                                        .unwrap_or_else(|p| p.into_inner())
                                        .get_or_insert(e);
                                }
                            },
                        );
                    }
                }
            }
            prog.finish()
                .map_err(|e| RunError::Runtime(e.to_string()))?;
            match error.lock().unwrap_or_else(|p| p.into_inner()).take() {
                Some(e) => Err(RunError::Validation(e)),
                None => Ok(()),
            }
        })
    }
}
