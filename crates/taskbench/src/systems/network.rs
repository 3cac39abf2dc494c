//! This rank's end of the network for the systems on the Tactor runtime: the job's
//! [`Exchange`] on the port of Task Bench's edges, with the fault `TASKBENCH_FAULT` asks this
//! rank to inject, and a runtime whose idle workers progress it.

use super::interface::{RunConfig, RunError};
use crate::faults::{injected_fault, Fault, SLOW};
use std::sync::Arc;
use tactor::job::exchange::Fault as WireFault;
use tactor::job::{Exchange, Job, JobError};
use tactor::Runtime;

/// The port of the cross-rank edges of every system on the Tactor runtime.
pub const PORT_EDGES: u16 = tactor::job::FIRST_PORT + 1;

/// The timestep whose message a `slow` rank holds back: the middle of a test's run, when the
/// receiver is sure to be waiting for it.
const SLOW_AT: i64 = 20;

/// Opens the edges' exchange on `job`, with this rank's injected fault, if any.
pub fn open(job: &Arc<Job>) -> Result<Arc<Exchange>, JobError> {
    let ex = Exchange::open(job, PORT_EDGES)?;
    if let Some(f) = injected_fault(job.rank()) {
        ex.inject(match f {
            Fault::Corrupt => WireFault::Corrupt,
            Fault::Panic => WireFault::Panic,
            Fault::Slow => WireFault::Slow {
                step: SLOW_AT,
                pause: SLOW,
            },
        });
    }
    Ok(ex)
}

/// A runtime with the run's workers and pinning, and on several ranks this rank's exchange
/// ([`open`]), whose network progress the workers run.
pub fn runtime(cfg: &RunConfig) -> Result<(Runtime, Option<Arc<Exchange>>), RunError> {
    let remote = match &cfg.job {
        Some(job) => Some(open(job).map_err(|e| RunError::Runtime(e.to_string()))?),
        None => None,
    };
    let allowed = core_affinity::get_core_ids().map_or(0, |c| c.len());
    let first = super::interface::first_core_here(cfg.workers, cfg.job.is_some(), allowed);
    let mut b = Runtime::builder()
        .workers(cfg.workers)
        .pin(cfg.pin && first.is_some())
        .first_core(first.unwrap_or(0));
    if let Some(r) = &remote {
        b = b.poller(r.clone());
    }
    let rt = b
        .build()
        .map_err(|e| RunError::Runtime(format!("starting the Tactor runtime: {e}")))?;
    Ok((rt, remote))
}
