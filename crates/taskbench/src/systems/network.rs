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

/// Before a timed pass on ranks: every rank is there, and idle workers poll for messages
/// (woken, for those that parked since the last pass).
pub fn start_pass(rt: &Runtime, ex: &Exchange) -> Result<(), RunError> {
    ex.job().barrier().map_err(|e| failure(ex, e.to_string()))?;
    ex.expect(true);
    rt.wake();
    Ok(())
}

/// Why waiting on the exchange stopped: another rank's failure (which that rank reports), or
/// `why`.
pub fn failure(ex: &Exchange, why: String) -> RunError {
    match ex.job().failed_rank() {
        Some(rank) => RunError::Remote { rank },
        None => RunError::Runtime(why),
    }
}

/// After a pass on ranks that ended with `result` (this rank's validation failures in it):
/// what went wrong first — a message that broke the protocol (what read it may have failed
/// because of it), this rank's validation, another rank's failure (which that rank reports),
/// this rank's other errors — or messages that arrived and were not used. A failed pass
/// abandons the exchange: nothing more is sent, and what waits here for other ranks ends.
pub fn end_pass(ex: &Exchange, result: Result<(), RunError>) -> Result<(), RunError> {
    ex.expect(false);
    if result.is_err() {
        ex.abandon();
    }
    if let Some(why) = ex.take_error() {
        return Err(RunError::Runtime(why));
    }
    match (result, ex.job().failed_rank()) {
        (Err(e @ RunError::Validation(_)), _) => return Err(e),
        (_, Some(rank)) => return Err(RunError::Remote { rank }),
        (Err(e), None) => return Err(e),
        (Ok(()), None) => {}
    }
    match ex.pending() {
        0 => Ok(()),
        n => Err(RunError::Runtime(format!(
            "{n} messages from other ranks arrived but no task used them"
        ))),
    }
}
