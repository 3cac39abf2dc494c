//! What the systems built on Tactor's events and subgraphs (`tasks`, `compiled`, `implicit`)
//! share: each graph's rows and cut, and keeping the first validation failure, which comes
//! before what a pass returned ([`passes`]). (The runtime, with the network as a source of
//! work on several ranks, is started by [`RunConfig::tactor`](super::RunConfig::tactor).)

use super::edges::Cut;
use super::interface::{RunConfig, RunError};
use super::shared::{run_shared_task, run_task};
use super::timing::Pass;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tactor::job::Exchange;
use tactor::slots::Slots;
use tactor::Runtime;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;
use taskbench_core::validate::TaskError;

/// One graph as `tasks` and `compiled` hold it: two rows of outputs and of scratch (timestep
/// parity), and this rank's points.
pub struct Graph {
    pub plan: Plan,
    pub rows: [Slots; 2],
    pub scratch: [Slots; 2],
    pub cut: Cut,
    /// Other workers of this process read the outputs: share their lines
    /// ([`run_shared_task`]). With one worker every reader is on this core, where the
    /// hints only push a line out that the next reader then fetches back.
    shared: bool,
}

impl Graph {
    /// `plan`'s buffers, for `rank` under `place`.
    pub fn new(plan: Plan, place: taskbench_core::app::Placement, rank: usize) -> Graph {
        let g = plan.graph();
        let width = g.max_width as usize;
        let scratch = || Slots::filled(width, &new_scratch(g.scratch_bytes_per_task));
        Graph {
            rows: [
                Slots::new(width, g.output_bytes_per_task),
                Slots::new(width, g.output_bytes_per_task),
            ],
            scratch: [scratch(), scratch()],
            cut: Cut::new(&plan, place, rank),
            shared: place.workers > 1,
            plan,
        }
    }

    /// Runs task `(t, p)`, reading its inputs from the previous row and writing its output
    /// and scratch slots of this row; a validation failure goes to `error` (and once one
    /// happened, tasks do nothing).
    ///
    /// # Safety
    /// While it runs, no other thread touches slot `p` of row `t % 2` or of scratch row
    /// `t % 2`, and no thread writes the slots of row `(t + 1) % 2` that `(t, p)` reads: the
    /// caller orders every earlier reader and writer of those slots before it and every later
    /// one after it.
    pub unsafe fn run_point(&self, t: i64, p: i64, error: &ErrorSlot) {
        // SAFETY: this function's contract.
        unsafe { self.run_point_with(t, p, error, |_| None) }
    }

    /// [`Graph::run_point`], with the inputs that `outside` gives (outputs of other ranks
    /// taken straight from their message) read from there instead of the previous row.
    ///
    /// # Safety
    /// As [`Graph::run_point`], for the slots it reads from the row.
    pub unsafe fn run_point_with<'m>(
        &'m self,
        t: i64,
        p: i64,
        error: &ErrorSlot,
        outside: impl Fn(i64) -> Option<&'m [u8]>,
    ) {
        if error.failed() {
            return;
        }
        let (row, prev) = (
            &self.rows[(t % 2) as usize],
            &self.rows[((t + 1) % 2) as usize],
        );
        // SAFETY: exclusive use of these two slots, by this function's contract.
        let (out, scratch) = unsafe {
            (
                row.write(p as usize),
                self.scratch[(t % 2) as usize].write(p as usize),
            )
        };
        // SAFETY: slot `d` of the previous row holds `(t-1, d)`'s output and is not written
        // while this task runs, by this function's contract.
        let input = |d: i64| outside(d).unwrap_or_else(|| unsafe { prev.read(d as usize) });
        let r = if self.shared {
            run_shared_task(&self.plan, t, p, out, scratch, input)
        } else {
            run_task(&self.plan, t, p, out, scratch, input)
        };
        if let Err(e) = r {
            error.record(e);
        }
    }
}

/// What must finish before a slot with these `users` (its writer, then its readers) is written
/// again: the readers imply the writer (they read what it wrote); without readers, the writer.
/// The rule both `tasks` (events) and `compiled` (vertices) order buffer reuse by.
pub fn slot_guards<T>(users: &[T]) -> &[T] {
    if users.len() > 1 {
        &users[1..]
    } else {
        users
    }
}

/// How points are distributed (over this job's ranks and each rank's workers), and this
/// process's rank.
pub fn placement(cfg: &RunConfig) -> (taskbench_core::app::Placement, usize) {
    let c = cfg.job.as_deref();
    (
        taskbench_core::app::Placement {
            ranks: c.map_or(1, |c| c.ranks()) as i64,
            workers: cfg.workers as i64,
        },
        c.map_or(0, |c| c.rank()),
    )
}

/// The first task that failed validation, kept for the report; later tasks see `failed()`
/// and skip their work.
#[derive(Default)]
pub struct ErrorSlot {
    error: Mutex<Option<TaskError>>,
    failed: AtomicBool,
    /// On several ranks: told at the first failure, so that this rank stops exchanging and its
    /// pass ends (the other ranks would otherwise wait for its outputs, and it for theirs).
    remote: Option<Arc<Exchange>>,
}

impl ErrorSlot {
    /// A slot that, on several ranks, abandons the exchange at the first failure.
    pub fn new(remote: Option<Arc<Exchange>>) -> ErrorSlot {
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

/// [`super::timing::passes`] of `pass`, whose tasks keep their first validation failure in
/// `error`: that failure comes before what the pass returned.
pub fn passes(
    rt: &Runtime,
    error: &ErrorSlot,
    remote: Option<&Exchange>,
    mut pass: impl FnMut() -> Result<(), RunError> + Send,
) -> Result<Pass, RunError> {
    super::timing::passes(rt, remote, || {
        let result = pass();
        error
            .take()
            .map_or(result, |e| Err(RunError::Validation(e)))
    })
}
