//! The systems `taskbench` can benchmark. Each runs every graph of an [`App`] twice (a warm-up
//! pass, then a timed pass) and returns the timed pass's elapsed time. A new system implements
//! [`System`] in a module of its own and is added to [`all`].

mod bsp;
mod compiled;
mod forkjoin;
mod futures;
mod implicit;
mod on_tactor;
mod parfor;
mod remote;
mod serial;
pub mod slots;
mod styles;
mod tasks;
pub mod team;

pub use bsp::Bsp;
pub use compiled::Compiled;
pub use forkjoin::ForkJoin;
pub use futures::Futures;
pub use implicit::Implicit;
pub use parfor::ParFor;
pub use serial::Serial;
pub use tasks::Tasks;
pub use team::Pass;

use std::sync::Arc;
use tactor::job::Job;
use taskbench_core::app::App;
use taskbench_core::plan::Plan;
use taskbench_core::validate::TaskError;

/// How a system is run.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Worker threads (`-worker`).
    pub workers: usize,
    /// Pin worker `w` to core `w` where possible.
    pub pin: bool,
    /// The job this process is a rank of, when it runs on several; `None` in one process.
    pub job: Option<Arc<Job>>,
    /// Tasks per compiled chunk of `compiled` (`None`: its default): tests make chunks small,
    /// so that short graphs chain many instances.
    pub chunk_tasks: Option<i64>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            workers: default_workers(),
            pin: true,
            job: None,
            chunk_tasks: None,
        }
    }
}

/// Most worker threads one process may ask for: beyond this a run only oversubscribes the
/// machine's cores, and thread start-up alone takes seconds.
pub const MAX_WORKERS: usize = 4096;

/// The number of cores this process may use.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Where worker 0 is pinned among the `allowed` cores this process may use, or `None` to
/// pin nothing. In one process, from the first core when every worker gets one. On one of
/// `local` ranks on this machine (this one `index`), a launcher that bound each rank gave it
/// exactly its own cores; one that did not (`--bind-to none`, or Open MPI when oversubscribed)
/// showed every rank the whole machine, and each rank takes its own range so that they do not
/// all pin to the first cores (measured: 2 ranks × 1 `compiled` worker both on core 0 ran the
/// empty stencil 30× slower). With fewer cores than workers of all ranks, nothing is pinned.
pub fn first_core(
    workers: usize,
    on_ranks: Option<(usize, usize)>,
    allowed: usize,
) -> Option<usize> {
    match on_ranks {
        None => (workers <= allowed).then_some(0),
        Some(_) if workers == allowed => Some(0),
        Some((local, index)) => {
            (local.saturating_mul(workers) <= allowed && index < local).then(|| index * workers)
        }
    }
}

/// [`first_core`] for this process: `on_ranks` says whether it is one of several ranks.
pub fn first_core_here(workers: usize, on_ranks: bool, allowed: usize) -> Option<usize> {
    use tactor_comm::launcher::{local_rank, local_ranks};
    let on_ranks = on_ranks.then(|| (local_ranks(), local_rank()));
    first_core(workers, on_ranks, allowed)
}

/// Why a run did not produce a time.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A task received wrong inputs: the system broke a dependency.
    #[error("{0}")]
    Validation(#[from] TaskError),
    /// The run configuration does not suit the system.
    #[error("{0}")]
    Config(String),
    /// The runtime under test failed (it could not start, or a task failed outside
    /// validation).
    #[error("{0}")]
    Runtime(String),
    /// Another rank of the job failed; it reports its own cause.
    #[error("rank {rank} failed")]
    Remote {
        /// The rank that failed first.
        rank: usize,
    },
}

/// A runtime system under test.
pub trait System: Send + Sync {
    /// The name given to `-system`.
    fn name(&self) -> &'static str;
    /// One line for `taskbench --list`.
    fn about(&self) -> &'static str;
    /// Runs every graph of `app` once to warm up, then once timed; returns the timed pass's
    /// elapsed time and task count. Every task validates its inputs; the first failure is
    /// returned.
    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError>;
    /// An upper bound on the bytes the system allocates to run `app` besides the graphs' plans
    /// (buffers, queues, runtime), saturating. The command line refuses a run that would not
    /// fit the machine before the system allocates anything.
    fn memory(&self, app: &App, cfg: &RunConfig) -> u128;
    /// Whether the system runs on several ranks (under `mpirun`), with `cfg.job` set.
    fn runs_on_ranks(&self) -> bool {
        false
    }
    /// Whether, with `workers` workers on a rank, the system runs on the calling thread alone
    /// (no thread started, none besides it ever using the network): the network can then
    /// skip the MPI library's locks (`tactor::job::JobBuilder::one_thread`).
    fn one_thread_on_ranks(&self, _workers: usize) -> bool {
        false
    }
}

/// Building blocks of [`System::memory`] estimates.
pub mod footprint {
    use taskbench_core::app::App;
    use taskbench_core::memory::mul;

    /// Bytes of `rows` output rows and `scratch_rows` scratch rows per graph, each slot
    /// rounded up to a cache line ([`super::slots::Slots`]).
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

/// Every system, in the order `--list` shows them.
pub fn all() -> Vec<Box<dyn System>> {
    vec![
        Box::new(Serial),
        Box::new(Bsp),
        Box::new(Tasks),
        Box::new(Compiled),
        Box::new(Implicit::PLAIN),
        Box::new(Implicit::TRACED),
        Box::new(Implicit::AUTO),
        Box::new(ForkJoin),
        Box::new(Futures { barrier: false }),
        Box::new(Futures { barrier: true }),
        Box::new(ParFor),
    ]
}

/// The system called `name`.
pub fn by_name(name: &str) -> Option<Box<dyn System>> {
    all().into_iter().find(|s| s.name() == name)
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

/// Runs task `(t, p)` of `plan` on `inputs`, its dependencies' outputs in order. Gathers up to
/// 8 inputs on the stack: the common case allocates nothing.
#[inline]
pub fn run_inputs<'a>(
    plan: &Plan,
    t: i64,
    p: i64,
    output: &mut [u8],
    scratch: &mut [u8],
    inputs: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Result<(), TaskError> {
    if inputs.len() <= 8 {
        let mut gathered: [&[u8]; 8] = [&[]; 8];
        let n = inputs.len();
        for (slot, input) in gathered.iter_mut().zip(inputs) {
            *slot = input;
        }
        plan.execute_point(t, p, output, &gathered[..n], scratch)
    } else {
        let gathered: Vec<&[u8]> = inputs.collect();
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

fn check_workers(cfg: &RunConfig) -> Result<(), RunError> {
    if cfg.workers == 0 {
        return Err(RunError::Config(
            "Invalid flag \"-worker 0\" must be > 0".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::first_core;

    #[test]
    fn ranks_that_share_a_machine_pin_to_their_own_cores() {
        // One process: from core 0 when every worker gets a core.
        assert_eq!(first_core(2, None, 2), Some(0));
        assert_eq!(first_core(3, None, 2), None);
        // Bound by the launcher to one core per worker.
        assert_eq!(first_core(1, Some((2, 1)), 1), Some(0));
        assert_eq!(first_core(2, Some((4, 3)), 2), Some(0));
        // Unbound: every rank sees the whole machine and takes its own range.
        assert_eq!(first_core(1, Some((2, 0)), 2), Some(0));
        assert_eq!(first_core(1, Some((2, 1)), 2), Some(1));
        assert_eq!(first_core(2, Some((2, 1)), 8), Some(2));
        // More workers on the machine than cores (oversubscribed): nothing pinned.
        assert_eq!(first_core(1, Some((3, 2)), 2), None);
        assert_eq!(first_core(2, Some((2, 0)), 3), None);
        // A local rank past the announced count (a confused launcher): nothing pinned.
        assert_eq!(first_core(1, Some((2, 2)), 4), None);
    }
}
