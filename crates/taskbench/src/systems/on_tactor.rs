//! What the systems built on Tactor (`tasks`, `compiled`) share: starting the runtime (with
//! the network as a source of work on several ranks), keeping the first validation failure,
//! and timing passes with the tasks the workers validated.

use super::remote::Remote;
use super::team::Pass;
use super::{RunConfig, RunError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tactor::{Placement, Runtime};
use taskbench_core::plan::tasks_executed_on_this_thread;
use taskbench_core::validate::TaskError;

/// A runtime with the run's workers and pinning, and on several ranks this rank's end of the
/// cross-rank edges, whose network progress the workers run.
pub fn start(cfg: &RunConfig) -> Result<(Runtime, Option<Arc<Remote>>), RunError> {
    let remote = cfg.cluster.clone().map(Remote::new);
    let mut b = Runtime::builder().workers(cfg.workers).pin(cfg.pin);
    if let Some(r) = &remote {
        b = b.poller(r.clone());
    }
    let rt = b
        .build()
        .map_err(|e| RunError::Runtime(format!("starting the Tactor runtime: {e}")))?;
    Ok((rt, remote))
}

/// How points are distributed (over this job's ranks and each rank's workers), and this
/// process's rank.
pub fn placement(cfg: &RunConfig) -> (taskbench_core::app::Placement, usize) {
    let c = cfg.cluster.as_deref();
    (
        taskbench_core::app::Placement {
            ranks: c.map_or(1, |c| c.ranks()) as i64,
            workers: cfg.workers as i64,
        },
        c.map_or(0, |c| c.rank()),
    )
}

/// Tasks validated so far on all workers of `rt` (read on each worker by a task placed there).
pub fn executed(rt: &Runtime) -> Result<u64, RunError> {
    let total = AtomicU64::new(0);
    rt.scope(|s| {
        for w in 0..rt.workers() {
            let total = &total;
            s.launch(Placement::Worker(w), &[], move |_| {
                total.fetch_add(tasks_executed_on_this_thread(), Ordering::Relaxed);
            });
        }
    })
    .map_err(|e| RunError::Runtime(e.to_string()))?;
    Ok(total.into_inner())
}

/// The first task that failed validation, kept for the report; later tasks see `failed()`
/// and skip their work.
#[derive(Default)]
pub struct ErrorSlot {
    error: Mutex<Option<TaskError>>,
    failed: AtomicBool,
    /// On several ranks: told at the first failure, so that this rank stops exchanging and its
    /// pass ends (the other ranks would otherwise wait for its outputs, and it for theirs).
    remote: Option<Arc<Remote>>,
}

impl ErrorSlot {
    /// A slot that, on several ranks, abandons the exchange at the first failure.
    pub fn new(remote: Option<Arc<Remote>>) -> ErrorSlot {
        ErrorSlot {
            remote,
            ..ErrorSlot::default()
        }
    }

    /// Keeps `e` unless an earlier failure is kept already.
    pub fn record(&self, e: TaskError) {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        self.failed.store(true, Ordering::Relaxed);
        if let Some(r) = &self.remote {
            r.abandon();
        }
    }

    /// Whether some task failed.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    fn take(&self) -> Option<TaskError> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// A warm-up pass and a timed pass of `pass` (which returns when every task of the pass has
/// run), with the tasks the workers validated during the timed one. On several ranks each
/// pass starts with a barrier over ranks, and a pass that failed because another rank did
/// says so.
pub fn passes(
    rt: &Runtime,
    error: &ErrorSlot,
    remote: Option<&Remote>,
    mut pass: impl FnMut() -> Result<(), RunError>,
) -> Result<Pass, RunError> {
    let mut last = None;
    let remote_failure = |r: &Remote| r.failed_rank().map(|rank| RunError::Remote { rank });
    for _pass in 0..2 {
        let before = executed(rt)?;
        if let Some(r) = remote {
            if !r.barrier() {
                return Err(remote_failure(r).expect("the barrier stops when a rank failed"));
            }
            r.set_running(true);
            rt.wake();
        }
        let start = Instant::now();
        let result = pass();
        let elapsed = start.elapsed();
        if let Some(r) = remote {
            r.set_running(false);
            // What went wrong first: a message that broke the protocol (the tasks after it
            // may have read what it should have filled), this rank's validation, another
            // rank.
            if let Some(e) = r.take_error() {
                return Err(RunError::Runtime(e));
            }
            if let Some(e) = error.take() {
                return Err(RunError::Validation(e));
            }
            if let Some(e) = remote_failure(r) {
                return Err(e);
            }
        }
        result?;
        if let Some(e) = error.take() {
            return Err(RunError::Validation(e));
        }
        if let Some(r) = remote.filter(|r| r.pending() != 0) {
            return Err(RunError::Runtime(format!(
                "{} messages from other ranks arrived but no task used them",
                r.pending()
            )));
        }
        last = Some(Pass {
            elapsed,
            tasks: executed(rt)? - before,
        });
    }
    Ok(last.expect("two passes ran"))
}
