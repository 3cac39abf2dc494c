//! `replicated`: the graph as one sequential program on Tactor's implicit face, control
//! replicated over the job ([`tactor::implicit::Replicated`]). Every rank issues every launch;
//! each runs on the rank its point is placed on (the block distribution), on whichever of its
//! workers is free, and the runtime copies an output to another rank when a task there reads
//! it. Each output is a region, in two rows by timestep parity, and each point's scratch one
//! more; the analysis orders every reuse, and automatic tracing replays the repeating
//! timesteps (on each rank its share, copies included). No edge and no message is written
//! here.

use super::interface::{RunConfig, RunError, System};
use super::shared::{block_owners, footprint, run_inputs};
use super::team::Pass;
use std::sync::{Arc, Mutex};
use tactor::implicit::{read, read_write, write, Read, Region, Replicated as Program};
use tactor::job::Job;
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;
use taskbench_core::validate::TaskError;

/// The implicit program, its copies between ranks derived by the runtime.
pub struct Replicated;

/// Timesteps between two fences of the program.
const FENCE_EVERY: i64 = 8;

impl System for Replicated {
    fn name(&self) -> &'static str {
        "replicated"
    }

    fn about(&self) -> &'static str {
        "Tactor's implicit parallelism control-replicated over the job, traced automatically: \
         the runtime derives every edge and every copy between ranks"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Every rank holds every output region (two rows), and up to three fences' worth of
        // timesteps are in flight.
        footprint::rows(app, 2, 1)
            .saturating_add(footprint::per_task(app, |_| 3 * FENCE_EVERY, 1024, 160))
            .saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, remote) = cfg.tactor()?;
        let job = cfg.job_or_one();
        let mut prog = Program::new(&rt.handle(), &job);
        prog.auto_trace(true);
        let plans: Arc<Vec<Plan>> = Arc::new(app.graphs.iter().cloned().map(Plan::new).collect());
        let ranks = job.ranks();
        // Per graph, the rank of each point, and its regions: outputs in two rows, scratch.
        let owners: Vec<Vec<usize>> = (plans.iter())
            .map(|p| block_owners(ranks, p.graph().max_width))
            .collect();
        let mut row = |g: usize, value: &[u8]| -> Vec<Region<Vec<u8>>> {
            let homes = owners[g].iter().map(|&r| r * cfg.workers);
            homes.map(|w| prog.region(w, value.to_vec())).collect()
        };
        let regions: Vec<[Vec<Region<Vec<u8>>>; 3]> = (plans.iter().enumerate())
            .map(|(g, p)| {
                let (zeros, scratch) = (
                    vec![0; p.graph().output_bytes_per_task],
                    new_scratch(p.graph().scratch_bytes_per_task),
                );
                [row(g, &zeros), row(g, &zeros), row(g, &scratch)]
            })
            .collect();
        // The first validation failure, reported after the pass, and the job it fails.
        let error = Arc::new((Mutex::new(None), job.clone()));
        let steps = (plans.iter())
            .map(|p| p.graph().timesteps)
            .max()
            .unwrap_or(0);
        let prog = Mutex::new(prog);
        super::timing::passes(&rt, remote.as_deref(), || {
            let mut prog = prog.lock().unwrap_or_else(|p| p.into_inner());
            let mut fences = std::collections::VecDeque::new();
            for t in 0..steps {
                // Issued at most two fences ahead: the tasks in flight, and their memory, stay
                // bounded however long the graph.
                if t % FENCE_EVERY == FENCE_EVERY - 1 {
                    fences.push_back(prog.fence());
                    if fences.len() > 2 {
                        let oldest = fences.pop_front().expect("three fences");
                        oldest.wait().map_err(|e| failed(&error, e))?;
                    }
                }
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
                        let at = p as usize;
                        let access = (ins, write(&rows[row][at]), read_write(&rows[2][at]));
                        let (plans, error) = (plans.clone(), error.clone());
                        prog.launch_on_rank(owners[gi][at], access, move |(ins, out, scratch)| {
                            let ins = ins.iter().map(|v| &v[..]);
                            if let Err(e) = run_inputs(&plans[gi], t, p, out, scratch, ins) {
                                // Its dependents, and the copies of its output, do not run:
                                // the other ranks stop waiting for them when told.
                                error.1.tell_failure(&e.to_string());
                                let mut first = error.0.lock().unwrap_or_else(|p| p.into_inner());
                                first.get_or_insert(e);
                                drop(first);
                                tactor::fail("validation failed");
                            }
                        });
                    }
                }
            }
            prog.finish().map_err(|e| failed(&error, e))
        })
    }
}

/// Why a program whose task failed did: the first validation failure if there was one.
fn failed(error: &(Mutex<Option<TaskError>>, Arc<Job>), e: tactor::TaskFailed) -> RunError {
    match error.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
        Some(e) => RunError::Validation(e),
        None => RunError::Runtime(e.to_string()),
    }
}
