//! The interface every Task Bench system implements: how it is run ([`RunConfig`]), why a run
//! fails ([`RunError`]), the [`System`] trait, and where a run's workers are pinned.

use super::timing::Pass;
use std::sync::Arc;
use tactor::job::exchange::RoundError;
use tactor::job::{Exchange, Job};
use taskbench_core::app::App;
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

/// The port of the cross-rank messages of every system on the Tactor runtime.
pub const PORT_EDGES: u16 = tactor::job::FIRST_PORT + 1;

impl RunConfig {
    /// The job this run's program spans: the launcher's on several ranks, else a job of one
    /// (so that a program written against a job runs unchanged in one process).
    pub fn job_or_one(&self) -> Arc<Job> {
        (self.job.clone()).unwrap_or_else(|| Job::in_process(1, self.workers).remove(0))
    }

    /// The bytes of the runtime [`RunConfig::tactor`] starts (its workers' deques, stacks and
    /// queues), for [`System::memory`].
    pub fn tactor_footprint(&self) -> u128 {
        tactor::Runtime::builder().workers(self.workers).footprint()
    }

    /// The Tactor runtime this run asks for: its workers, pinned where they fit the cores
    /// ([`first_core_here`]); on several ranks with the job's exchange on [`PORT_EDGES`]
    /// (and the fault a test asks this rank to inject: [`crate::faults`]), whose messages the
    /// idle workers progress. What the reference's `MPI_Init` and `mpirun`'s binding are to
    /// its programs.
    pub fn tactor(&self) -> Result<(tactor::Runtime, Option<Arc<Exchange>>), RunError> {
        check_workers(self)?;
        let runtime = |e: tactor::job::JobError| RunError::Runtime(e.to_string());
        let remote = match &self.job {
            Some(job) => Some(Exchange::open(job, PORT_EDGES).map_err(runtime)?),
            None => None,
        };
        if let Some(ex) = &remote {
            crate::faults::inject(ex.job());
        }
        let allowed = core_affinity::get_core_ids().map_or(0, |c| c.len());
        let first = first_core_here(self.workers, self.job.is_some(), allowed);
        let mut b = tactor::Runtime::builder()
            .workers(self.workers)
            .pin(self.pin && first.is_some())
            .first_core(first.unwrap_or(0));
        if let Some(ex) = &remote {
            b = b.poller(ex.clone());
        }
        let rt = b
            .build()
            .map_err(|e| RunError::Runtime(format!("starting the Tactor runtime: {e}")))?;
        Ok((rt, remote))
    }
}

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

impl RunError {
    /// Why waiting on `ex` stopped: another rank's failure (which that rank reports), or
    /// `why`.
    pub fn waiting(ex: Option<&Exchange>, why: String) -> RunError {
        match ex.and_then(|ex| ex.job().failed_rank()) {
            Some(rank) => RunError::Remote { rank },
            None => RunError::Runtime(why),
        }
    }
}

/// A task that failed outside validation (or whose input did).
impl From<tactor::TaskFailed> for RunError {
    fn from(e: tactor::TaskFailed) -> RunError {
        RunError::Runtime(e.to_string())
    }
}

/// A pass on ranks that ended badly: a message that broke the protocol first (what read it
/// may have failed because of it), then this rank's validation, another rank's failure (which
/// that rank reports), this rank's other errors, messages nothing used.
impl From<RoundError<RunError>> for RunError {
    fn from(e: RoundError<RunError>) -> RunError {
        match e {
            RoundError::Broken(why) => RunError::Runtime(why),
            RoundError::Remote {
                here: Some(e @ RunError::Validation(_)),
                ..
            }
            | RoundError::Failed(e) => e,
            RoundError::Remote { rank, .. } => RunError::Remote { rank },
            RoundError::Unused(n) => RunError::Runtime(format!(
                "{n} messages from other ranks arrived but no task used them"
            )),
        }
    }
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
    /// Whether the system runs on several ranks (under `mpirun`), with `cfg.job` set: every
    /// system but the serial reference does.
    fn runs_on_ranks(&self) -> bool {
        true
    }
    /// Whether, with `workers` workers on a rank, the system runs on the calling thread alone
    /// (no thread started, none besides it ever using the network): the network can then
    /// skip the MPI library's locks (`tactor::job::JobBuilder::one_thread`).
    fn one_thread_on_ranks(&self, _workers: usize) -> bool {
        false
    }
}

/// `-worker 0` is refused by every system.
pub(super) fn check_workers(cfg: &RunConfig) -> Result<(), RunError> {
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
