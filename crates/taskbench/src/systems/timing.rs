//! Timing the passes of a system on the Tactor runtime: each from a barrier of every worker
//! (and on several ranks, of every rank) to the end of the work, on worker 0, with the tasks
//! the workers validated.

use super::interface::RunError;
use crossbeam_utils::Backoff;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tactor::job::Exchange;
use tactor::Runtime;
use taskbench_core::plan::tasks_executed_on_this_thread;

/// One timed pass: its wall time and how many tasks the workers validated and ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// From the barrier that starts the pass to the end of its work.
    pub elapsed: Duration,
    /// Tasks executed by all workers during the pass.
    pub tasks: u64,
}

/// A warm-up pass and a timed one. Under Miri (a run by hand) one pass: the timed pass runs the
/// warm-up's code again, a thousand times slower there.
const PASSES: usize = if cfg!(miri) { 1 } else { 2 };

/// A warm-up pass and a timed pass of `pass` (which returns when every task of the pass has
/// run; it runs in a task on a worker, where its waits suspend it), with the tasks the
/// workers validated during the timed one. On several ranks (`remote`) each pass is a round
/// of the exchange: it starts with a barrier over ranks, and one that failed because another
/// rank did says so.
pub fn passes(
    rt: &Runtime,
    remote: Option<&Exchange>,
    pass: impl FnMut() -> Result<(), RunError> + Send,
) -> Result<Pass, RunError> {
    let pass = Mutex::new(pass);
    passes_timed(rt, remote, || timed_on_worker(rt, &pass))
}

/// A warm-up pass and a timed pass of `pass`, which times itself from a barrier of every
/// worker (a system whose workers run one long task each, started by the pass), with the
/// tasks the workers validated during the timed one. On several ranks each pass is a round of
/// the exchange, as in [`passes`].
pub fn passes_timed(
    rt: &Runtime,
    remote: Option<&Exchange>,
    mut pass: impl FnMut() -> Result<Duration, RunError>,
) -> Result<Pass, RunError> {
    let mut last = None;
    for _pass in 0..PASSES {
        let before = executed(rt)?;
        let elapsed = match remote {
            Some(ex) => ex.round(rt, &mut pass)?,
            None => pass()?,
        };
        last = Some(Pass {
            elapsed,
            tasks: executed(rt)?.wrapping_sub(before),
        });
    }
    Ok(last.expect("two passes ran"))
}

/// A warm-up pass and a timed pass of `pass` on the calling thread (pinned to the first core
/// this process may use, with `pin`), with the tasks validated during the timed one: the
/// harness of a system that runs on one thread and no runtime.
pub fn passes_here(
    pin: bool,
    mut pass: impl FnMut() -> Result<(), RunError>,
) -> Result<Pass, RunError> {
    if let Some(cores) = pin.then(core_affinity::get_core_ids).flatten() {
        if let Some(&first) = cores.first() {
            core_affinity::set_for_current(first);
        }
    }
    let mut last = None;
    for _pass in 0..PASSES {
        let before = tasks_executed_on_this_thread();
        let start = Instant::now();
        pass()?;
        last = Some(Pass {
            elapsed: start.elapsed(),
            tasks: tasks_executed_on_this_thread().wrapping_sub(before),
        });
    }
    Ok(last.expect("a pass ran"))
}

/// Tasks validated so far on all workers of `rt`.
fn executed(rt: &Runtime) -> Result<u64, RunError> {
    let counts = rt.on_each_worker(|_| tasks_executed_on_this_thread());
    Ok(counts
        .map_err(|e| RunError::Runtime(e.to_string()))?
        .iter()
        .sum())
}

/// Runs `pass` in a task on worker 0 and times it there, from a barrier of every worker (a
/// task on each, spinning until all arrived) to the end of `pass`, whose waits suspend the
/// task and resume it on the worker when the pass's work is done. Timed on the thread that
/// started the pass, the time included that thread's wake-up from a park while the workers
/// held both cores, and the pass started with workers still parked since the last one
/// (measured: `docs/measurements.md`, "Timing a pass on a worker").
fn timed_on_worker(
    rt: &Runtime,
    pass: &Mutex<impl FnMut() -> Result<(), RunError> + Send>,
) -> Result<Duration, RunError> {
    let arrived = AtomicUsize::new(0);
    let mut out = rt
        .on_each_worker(|w| {
            arrived.fetch_add(1, Ordering::AcqRel);
            // Snoozing yields the core once the wait is long: a worker that has not arrived
            // may need it (more workers than cores).
            let backoff = Backoff::new();
            while arrived.load(Ordering::Acquire) != rt.workers() {
                backoff.snooze();
            }
            (w == 0).then(|| {
                let start = Instant::now();
                let result = (pass.lock().unwrap_or_else(|p| p.into_inner()))();
                result.map(|()| start.elapsed())
            })
        })
        .map_err(|e| RunError::Runtime(format!("the pass's task failed: {e}")))?;
    out.swap_remove(0).expect("worker 0 ran the pass")
}
