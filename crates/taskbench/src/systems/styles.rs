//! What seed 004's styles (`forkjoin`, `parfor`, `futures`) share: a runtime, each graph's
//! outputs and scratch as plain vectors, and passes timed from a barrier of every worker.

use super::interface::RunError;
use super::team::Pass;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::Instant;
use tactor::{Placement, Runtime};
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::{tasks_executed_on_this_thread, Plan};

/// A graph's plan, two rows of outputs (timestep parity) and a scratch buffer per point.
pub struct Buffers {
    pub plan: Plan,
    rows: [Vec<Vec<u8>>; 2],
    scratch: Vec<Vec<u8>>,
}

/// Timestep `t` of one graph: its plan, its points each with its output and scratch, and the
/// outputs of the timestep before.
pub type Step<'a> = (
    &'a Plan,
    Vec<(i64, &'a mut Vec<u8>, &'a mut Vec<u8>)>,
    &'a [Vec<u8>],
);

impl Buffers {
    pub fn all(app: &taskbench_core::app::App) -> Vec<Buffers> {
        let new = |g: &taskbench_core::graph::TaskGraph| Buffers {
            rows: [0, 1].map(|_| vec![vec![0; g.output_bytes_per_task]; g.max_width as usize]),
            scratch: vec![new_scratch(g.scratch_bytes_per_task); g.max_width as usize],
            plan: Plan::new(g.clone()),
        };
        app.graphs.iter().map(new).collect()
    }

    /// The points of timestep `t` (none once the graph has ended).
    pub fn step(&mut self, t: i64) -> Step<'_> {
        let Buffers {
            plan,
            rows,
            scratch,
        } = self;
        let [even, odd] = rows;
        let (row, prev) = if t % 2 == 0 { (even, odd) } else { (odd, even) };
        let (first, width) = (plan.offset(t), plan.width(t));
        let live = if t < plan.graph().timesteps {
            width as usize
        } else {
            0
        };
        let points = (first..).zip(row.iter_mut().zip(scratch).skip(first as usize));
        (
            plan,
            points.take(live).map(|(p, (o, s))| (p, o, s)).collect(),
            prev,
        )
    }
}

/// A runtime with the run's workers, pinned if they fit the cores.
pub fn runtime(workers: usize, pin: bool) -> Result<Runtime, RunError> {
    let cores = core_affinity::get_core_ids().map_or(0, |c| c.len());
    (Runtime::builder()
        .workers(workers)
        .pin(pin && workers <= cores)
        .build())
    .map_err(|e| RunError::Runtime(format!("starting the Tactor runtime: {e}")))
}

/// A warm-up pass and a timed one of `body`, each run on worker 0 once every worker arrived.
pub fn passes(
    rt: &Runtime,
    body: impl Fn() -> Result<(), RunError> + Sync,
) -> Result<Pass, RunError> {
    let mut last = None;
    for _ in 0..2 {
        let (arrived, tasks) = (AtomicUsize::new(0), AtomicU64::new(0));
        let (mut elapsed, mut result) = (None, Ok(()));
        // Tasks validated before the pass, taken off (wrapping) what the workers count after it.
        let here = || {
            tasks.fetch_sub(tasks_executed_on_this_thread(), SeqCst);
            arrived.fetch_add(1, SeqCst);
            while arrived.load(SeqCst) < rt.workers() {
                std::thread::yield_now();
            }
        };
        rt.scope(|s| {
            let (here, body, elapsed, result) = (&here, &body, &mut elapsed, &mut result);
            s.launch(Placement::Worker(0), &[], move |_| {
                here();
                let start = Instant::now();
                *result = body();
                *elapsed = Some(start.elapsed());
            });
            (1..rt.workers())
                .for_each(|w| drop(s.launch(Placement::Worker(w), &[], move |_| here())));
        })
        .map_err(|e| RunError::Runtime(e.to_string()))?;
        result?;
        rt.scope(|s| {
            for w in 0..rt.workers() {
                let tasks = &tasks;
                s.launch(Placement::Worker(w), &[], move |_| {
                    tasks.fetch_add(tasks_executed_on_this_thread(), SeqCst);
                });
            }
        })
        .map_err(|e| RunError::Runtime(e.to_string()))?;
        last = elapsed.map(|elapsed| Pass {
            elapsed,
            tasks: tasks.into_inner(),
        });
    }
    Ok(last.expect("the timed pass ran"))
}
