//! What the systems built on Tactor (`tasks`, `compiled`) share: starting the runtime and
//! counting the tasks its workers validated.

use super::{RunConfig, RunError};
use std::sync::atomic::{AtomicU64, Ordering};
use tactor::{Placement, Runtime};
use taskbench_core::plan::tasks_executed_on_this_thread;

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
