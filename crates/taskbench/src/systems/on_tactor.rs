//! What the systems built on Tactor (`tasks`, `compiled`) share: starting the runtime,
//! keeping the first validation failure, and timing passes with the tasks the workers
//! validated.

use super::team::Pass;
use super::{RunConfig, RunError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use tactor::{Placement, Runtime};
use taskbench_core::plan::tasks_executed_on_this_thread;
use taskbench_core::validate::TaskError;

/// A runtime with the run's workers and pinning.
pub fn start(cfg: &RunConfig) -> Result<Runtime, RunError> {
    Runtime::builder()
        .workers(cfg.workers)
        .pin(cfg.pin)
        .build()
        .map_err(|e| RunError::Runtime(format!("starting the Tactor runtime: {e}")))
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
}

impl ErrorSlot {
    /// Keeps `e` unless an earlier failure is kept already.
    pub fn record(&self, e: TaskError) {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        self.failed.store(true, Ordering::Relaxed);
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
/// run), with the tasks the workers validated during the timed one.
pub fn passes(
    rt: &Runtime,
    error: &ErrorSlot,
    mut pass: impl FnMut() -> Result<(), RunError>,
) -> Result<Pass, RunError> {
    let mut last = None;
    for _pass in 0..2 {
        let before = executed(rt)?;
        let start = Instant::now();
        pass()?;
        let elapsed = start.elapsed();
        if let Some(e) = error.take() {
            return Err(RunError::Validation(e));
        }
        last = Some(Pass {
            elapsed,
            tasks: executed(rt)? - before,
        });
    }
    Ok(last.expect("two passes ran"))
}
