//! What several systems share: running one task on its inputs (with a worker's scratch), the
//! reference block distribution, and the building blocks of memory estimates.

use std::sync::Mutex;
use taskbench_core::{app::App, kernel::new_scratch, plan::Plan, validate::TaskError};

/// Building blocks of [`System::memory`](super::interface::System::memory) estimates.
pub mod footprint {
    use taskbench_core::app::App;
    use taskbench_core::memory::mul;

    /// Bytes of `rows` output rows and `scratch_rows` scratch rows per graph, each slot
    /// rounded up to a cache line ([`tactor::slots::Slots`]).
    pub fn rows(app: &App, rows: u32, scratch_rows: u32) -> u128 {
        let line = |b: usize| mul(b.div_ceil(64), 64u32);
        app.graphs
            .iter()
            .map(|g| {
                let w = g.max_width;
                mul(mul(w, rows), line(g.output_bytes_per_task))
                    .saturating_add(mul(mul(w, scratch_rows), line(g.scratch_bytes_per_task)))
            })
            .fold(0, u128::saturating_add)
    }

    /// Bytes of `per_point` bytes per point plus `per_dep` per dependency, over `timesteps`
    /// timesteps of every graph (task nodes, counters).
    pub fn per_task(
        app: &App,
        timesteps: impl Fn(i64) -> i64,
        per_point: u32,
        per_dep: u32,
    ) -> u128 {
        app.graphs
            .iter()
            .map(|g| {
                let tasks = mul(timesteps(g.timesteps).min(g.timesteps), g.max_width);
                mul(
                    tasks,
                    u128::from(per_point) + mul(g.max_deps_per_point(), per_dep),
                )
            })
            .fold(0, u128::saturating_add)
    }
}

/// Runs task `(t, p)` of `plan`, fetching the output of each dependency with `input`.
/// Gathers up to 8 inputs on the stack: the common case allocates nothing.
#[inline]
pub fn run_task<'a>(
    plan: &Plan,
    t: i64,
    p: i64,
    output: &mut [u8],
    scratch: &mut [u8],
    input: impl Fn(i64) -> &'a [u8],
) -> Result<(), TaskError> {
    let deps = plan.deps(t, p);
    run_inputs(plan, t, p, output, scratch, deps.iter().map(|&d| input(d)))
}

/// Scratch buffers for systems whose tasks run on whichever worker is free: one per graph and
/// worker (a task runs to its end on one worker), each behind a lock that is taken only for a
/// graph that has scratch — most runs have none, and a lock is two atomic operations a task.
pub struct WorkerScratch {
    workers: usize,
    buffers: Vec<Mutex<Vec<u8>>>,
}

impl WorkerScratch {
    /// Buffers for every graph of `app` and each of `workers` workers.
    pub fn new(app: &App, workers: usize) -> WorkerScratch {
        let buffers = (app.graphs.iter())
            .flat_map(|g| (0..workers).map(|_| new_scratch(g.scratch_bytes_per_task)))
            .map(Mutex::new)
            .collect();
        WorkerScratch { workers, buffers }
    }

    /// [`run_inputs`] for task `(t, p)` of graph `g`, on the calling worker's buffer.
    #[inline]
    pub fn run<'a, I: AsRef<[u8]> + ?Sized + 'a>(
        &self,
        (g, plan): (usize, &Plan),
        (t, p): (i64, i64),
        output: &mut [u8],
        inputs: impl ExactSizeIterator<Item = &'a I>,
    ) -> Result<(), TaskError> {
        if plan.graph().scratch_bytes_per_task == 0 {
            return run_inputs(plan, t, p, output, &mut [], inputs);
        }
        let w = g * self.workers + tactor::current_worker().expect("on a worker");
        let mut scratch = self.buffers[w].lock().unwrap_or_else(|p| p.into_inner());
        run_inputs(plan, t, p, output, &mut scratch, inputs)
    }
}

/// Runs task `(t, p)` of `plan` on `inputs`, its dependencies' outputs in order (byte slices,
/// or anything that is one: vectors, for a system whose outputs are values). Gathers up to 8
/// inputs on the stack: the common case allocates nothing.
#[inline]
pub fn run_inputs<'a, I: AsRef<[u8]> + ?Sized + 'a>(
    plan: &Plan,
    t: i64,
    p: i64,
    output: &mut [u8],
    scratch: &mut [u8],
    inputs: impl ExactSizeIterator<Item = &'a I>,
) -> Result<(), TaskError> {
    if inputs.len() <= 8 {
        let mut gathered: [&[u8]; 8] = [&[]; 8];
        let n = inputs.len();
        for (slot, input) in gathered.iter_mut().zip(inputs) {
            *slot = input.as_ref();
        }
        plan.execute_point(t, p, output, &gathered[..n], scratch)
    } else {
        let gathered: Vec<&[u8]> = inputs.map(AsRef::as_ref).collect();
        plan.execute_point(t, p, output, &gathered, scratch)
    }
}

/// [`run_task`] for systems whose outputs are read by other workers. Once written, the output
/// is pushed toward the shared cache ([`tactor::hint::share`]), so that a consumer on another
/// core misses there instead of snooping this core. Used by `tasks` and `compiled` when the
/// process has several workers (with one, every reader is on this core and the pushed-out line
/// comes back as a miss); `bsp`, the plain twin of MPI, uses none.
///
/// The output's lines are not fetched for writing first ([`tactor::hint::claim`]): with
/// `compiled`'s current exchange that costs more than it saves. (Figures for both:
/// `docs/measurements.md`, "Sharing and claiming output lines".)
#[inline]
pub fn run_shared_task<'a>(
    plan: &Plan,
    t: i64,
    p: i64,
    output: &mut [u8],
    scratch: &mut [u8],
    input: impl Fn(i64) -> &'a [u8],
) -> Result<(), TaskError> {
    let r = run_task(plan, t, p, &mut *output, scratch, input);
    tactor::hint::share(&*output);
    r
}

/// The first point owned by worker `w` of `n` under the reference MPI block distribution;
/// worker `w` owns `[block_start(w), block_start(w + 1))`.
pub fn block_start(w: usize, n: usize, width: i64) -> i64 {
    (w as i64 * width) / n as i64
}

/// The worker that owns each of `width` points under [`block_start`]'s distribution.
pub fn block_owners(workers: usize, width: i64) -> Vec<usize> {
    (0..width)
        .map(|p| {
            (0..workers)
                .rfind(|&w| block_start(w, workers, width) <= p)
                .expect("worker 0 starts at 0")
        })
        .collect()
}
