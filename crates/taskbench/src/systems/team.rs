//! A team of worker threads that runs timed passes: the calling thread is worker 0 (like MPI
//! rank 0), the others are scoped threads, and passes are separated by spinning barriers so no
//! thread sleeps between the warm-up and the timed pass. On several ranks, a [`Net`] keeps the
//! network progressing in every wait and adds a barrier over ranks before each pass.

use super::interface::RunError;
use crossbeam_utils::{Backoff, CachePadded};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use taskbench_core::plan::tasks_executed_on_this_thread;
use taskbench_core::validate::TaskError;

/// One timed pass: its wall time and how many tasks the team validated and ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    /// From the release of the start barrier to the last worker's arrival at the end barrier.
    pub elapsed: Duration,
    /// Tasks executed by all workers during the pass.
    pub tasks: u64,
}

/// What a team needs from the network when it runs on several ranks.
pub trait Net: Sync {
    /// Progresses the network (delivering what arrived); `false` once another rank failed.
    fn idle(&self) -> bool;
    /// A barrier over every rank, progressing while it waits; `false` if another rank failed.
    fn barrier(&self) -> bool;
    /// The rank that failed, once [`Net::idle`] or [`Net::barrier`] returned `false`.
    fn failed_rank(&self) -> usize;
}

/// Shared by a team: the abort flag every spin-wait checks, and the first error.
pub struct Team<'n> {
    abort: AtomicBool,
    error: Mutex<Option<RunError>>,
    net: Option<&'n dyn Net>,
    /// More workers (of all ranks on this machine) than cores: a waiter yields its core at
    /// once instead of spinning first (the worker it waits for may be the one it keeps off
    /// the core; `docs/measurements.md`, "A crowded team").
    crowded: bool,
    arrived: CachePadded<AtomicUsize>,
    generation: CachePadded<AtomicUsize>,
    size: usize,
    executed: Vec<AtomicU64>,
}

/// The machine's online cores: not this process's affinity, which a launcher narrows to one
/// rank's share (two ranks bound to a core each are not crowded).
fn machine_cores() -> usize {
    // SAFETY: sysconf only reads a system parameter.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or_else(crate::systems::interface::default_workers)
}

/// Network polls a waiting worker makes before it starts backing off.
pub const NET_POLLS_BEFORE_BACKOFF: u32 = 1024;

/// Returned by waits when another worker failed and the run is being abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted;

impl<'n> Team<'n> {
    fn new(size: usize, passes: usize, net: Option<&'n dyn Net>) -> Team<'n> {
        Team {
            abort: AtomicBool::new(false),
            error: Mutex::new(None),
            net,
            crowded: size.saturating_mul(tactor_comm::launcher::local_ranks()) > machine_cores(),
            arrived: CachePadded::new(AtomicUsize::new(0)),
            generation: CachePadded::new(AtomicUsize::new(0)),
            size,
            executed: (0..passes).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Records a task's failure and tells every worker to stop.
    pub fn fail(&self, e: TaskError) {
        self.fail_with(e.into());
    }

    /// Records a failure of the run and tells every worker to stop.
    pub fn fail_with(&self, e: RunError) {
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
        self.abort.store(true, Ordering::Release);
    }

    fn remote_failed(&self) -> Aborted {
        if let Some(net) = self.net {
            self.fail_with(RunError::Remote {
                rank: net.failed_rank(),
            });
        }
        Aborted
    }

    /// Whether some worker failed.
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    /// Spins (with backoff, never sleeping in the kernel) until `ready()` holds or the team
    /// aborts. On several ranks every spin also progresses the network, so that what this
    /// worker waits for (or what another rank waits for from it) keeps moving.
    #[inline]
    pub fn wait_until(&self, mut ready: impl FnMut() -> bool) -> Result<(), Aborted> {
        let backoff = Backoff::new();
        let mut polls = 0u32;
        while !ready() {
            if self.aborted() {
                return Err(Aborted);
            }
            if let Some(net) = self.net {
                if !net.idle() {
                    return Err(self.remote_failed());
                }
                // Polling the network is itself the wait: a backoff's pauses (64 PAUSEs are
                // ~3 µs on this Xeon) would only delay noticing a message. Back off only
                // once the wait is long, which is when the machine is oversubscribed and the
                // sender needs this core.
                polls += 1;
                if polls < NET_POLLS_BEFORE_BACKOFF && !self.crowded {
                    continue;
                }
            }
            if self.crowded {
                std::thread::yield_now();
            } else {
                backoff.snooze();
            }
        }
        Ok(())
    }

    /// Progresses the network once (nothing in one process); `Err` when another rank failed.
    #[inline]
    pub fn idle(&self) -> Result<(), Aborted> {
        match self.net {
            Some(net) if !net.idle() => Err(self.remote_failed()),
            _ => Ok(()),
        }
    }

    /// A sense-reversing spin barrier over the whole team.
    fn barrier(&self) -> Result<(), Aborted> {
        let gen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.size {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(gen.wrapping_add(1), Ordering::Release);
            return Ok(());
        }
        self.wait_until(|| self.generation.load(Ordering::Acquire) != gen)
    }
}

/// Runs `passes` passes of `body` on `workers` threads and returns each pass's wall time and
/// task count (tasks that passed validation on the team's threads).
///
/// `init(worker)` builds each worker's private state (scratch buffers, caches) once, before the
/// first pass. `body(state, worker, pass, team)` runs one worker's share of one pass; it reports
/// a failed task with [`Team::fail`] and returns, and every other worker's waits then return
/// [`Aborted`]. With `pin`, worker `w` is pinned to core `w` where the OS allows it.
///
/// On one rank of several, `net` is given: every wait progresses it, and before each pass
/// worker 0 joins a barrier over ranks (between two team barriers), so every rank starts each
/// pass together, as the reference MPI programs do with `MPI_Barrier`.
pub fn run_passes<S, I, B>(
    net: Option<&dyn Net>,
    workers: usize,
    passes: usize,
    pin: bool,
    init: I,
    body: B,
) -> Result<Vec<Pass>, RunError>
where
    I: Fn(usize) -> S + Sync,
    B: Fn(&mut S, usize, usize, &Team) + Sync,
{
    let team = Team::new(workers, passes, net);
    let cores = if pin {
        core_affinity::get_core_ids().unwrap_or_default()
    } else {
        Vec::new()
    };
    // `get_core_ids` gives the cores this process may use; on ranks see `first_core`.
    let first = super::interface::first_core_here(workers, net.is_some(), cores.len());
    let pin_to = |w: usize| {
        if let Some(f) = first {
            core_affinity::set_for_current(cores[f + w]);
        }
    };
    let worker = |w: usize| -> Vec<Duration> {
        pin_to(w);
        let mut state = init(w);
        let mut times = Vec::with_capacity(passes);
        for pass in 0..passes {
            if team.barrier().is_err() {
                break;
            }
            if let Some(net) = net {
                if w == 0 && !net.barrier() {
                    team.remote_failed();
                }
                if team.barrier().is_err() {
                    break;
                }
            }
            let start = Instant::now();
            let before = tasks_executed_on_this_thread();
            body(&mut state, w, pass, &team);
            team.executed[pass]
                .fetch_add(tasks_executed_on_this_thread() - before, Ordering::Relaxed);
            if team.barrier().is_err() {
                break;
            }
            times.push(start.elapsed());
        }
        times
    };
    let mut spawn_error = None;
    let times = std::thread::scope(|s| {
        for w in 1..workers {
            let worker = &worker;
            let started = std::thread::Builder::new()
                .name(format!("taskbench-worker-{w}"))
                .spawn_scoped(s, move || worker(w));
            if let Err(e) = started {
                // The threads already started leave their first barrier on the abort.
                spawn_error = Some(format!(
                    "could not start worker thread {w} of {workers}: {e}"
                ));
                team.abort.store(true, Ordering::Release);
                break;
            }
        }
        worker(0)
    });
    if let Some(e) = spawn_error {
        return Err(RunError::Runtime(e));
    }
    match team.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(times
            .into_iter()
            .zip(&team.executed)
            .map(|(elapsed, n)| Pass {
                elapsed,
                tasks: n.load(Ordering::Relaxed),
            })
            .collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_worker_runs_every_pass_between_barriers() {
        let count = AtomicU64::new(0);
        let times = run_passes(
            None,
            3,
            4,
            false,
            |_| (),
            |_, _, pass, _| {
                count.fetch_add(1 << (pass * 8), Ordering::Relaxed);
            },
        )
        .unwrap();
        assert_eq!(times.len(), 4);
        assert_eq!(count.load(Ordering::Relaxed), 0x0303_0303);
    }

    #[test]
    fn a_failure_stops_every_worker() {
        let err = run_passes(
            None,
            3,
            2,
            false,
            |_| (),
            |_, w, _, team| {
                if w == 2 {
                    team.fail(TaskError {
                        graph: 0,
                        timestep: 1,
                        point: 2,
                        violation: taskbench_core::validate::Violation::ScratchCorrupted,
                    });
                } else {
                    // Would spin forever without the abort.
                    let _ = team.wait_until(|| false);
                }
            },
        )
        .unwrap_err();
        assert!(matches!(err, RunError::Validation(e) if e.point == 2));
    }
}
