//! A rank's workers during a pass of [`Neighbours`](super::Neighbours): how they wait for one
//! another (spinning, polling the network), how one that fails stops the others, and the
//! barrier that starts and ends a pass.

use super::super::exchange::Exchange;
use super::Stopped;
use crate::Poller;
use crossbeam_utils::{Backoff, CachePadded};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// Network polls a waiting worker makes before it starts backing off.
const POLLS_BEFORE_BACKOFF: u32 = 1024;

pub(super) struct Team<'x, E> {
    stop: AtomicBool,
    why: Mutex<Option<Stopped<E>>>,
    exchange: Option<&'x Exchange>,
    /// More workers (of all ranks on this machine) than cores: a waiter yields its core at
    /// once instead of spinning first (the worker it waits for may be the one it keeps off
    /// the core).
    crowded: bool,
    arrived: CachePadded<AtomicUsize>,
    generation: CachePadded<AtomicUsize>,
    size: usize,
}

impl<'x, E> Team<'x, E> {
    pub(super) fn new(size: usize, exchange: Option<&'x Exchange>) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let ranks_here = tactor_comm::launcher::local_ranks();
        Team {
            stop: AtomicBool::new(false),
            why: Mutex::new(None),
            exchange,
            crowded: size.saturating_mul(ranks_here) > machine_cores().unwrap_or(cores),
            arrived: CachePadded::new(AtomicUsize::new(0)),
            generation: CachePadded::new(AtomicUsize::new(0)),
            size,
        }
    }

    /// Stops every worker, keeping `why` if it is the first cause.
    pub(super) fn stop(&self, why: Option<Stopped<E>>) {
        let mut first = self.why.lock().unwrap_or_else(PoisonError::into_inner);
        if first.is_none() {
            *first = why;
        }
        self.stop.store(true, Ordering::Release);
    }

    /// Why the pass stopped, if it did.
    pub(super) fn take(self) -> Option<Stopped<E>> {
        let why = self
            .why
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        match (why, self.stop.into_inner()) {
            (Some(why), _) => Some(why),
            (None, true) => Some(Stopped::Aborted("a worker stopped".into())),
            (None, false) => None,
        }
    }

    /// Whether some worker stopped the pass.
    pub(super) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Progresses the network once; `Err` (and every worker stops) once another rank failed
    /// or this one gave the exchange up.
    pub(super) fn poll(&self) -> Result<(), ()> {
        let Some(ex) = self.exchange else {
            return Ok(());
        };
        ex.poll(0);
        match ex.job().check() {
            Ok(()) => Ok(()),
            Err(e) => {
                self.stop(Some(Stopped::Aborted(e.to_string())));
                Err(())
            }
        }
    }

    /// Spins until `ready()` holds, `Err` once the team stops. On ranks every spin also
    /// polls the network, so that what this worker waits for (or what another rank waits
    /// for from it) keeps moving.
    #[inline]
    pub(super) fn wait_until(&self, mut ready: impl FnMut() -> bool) -> Result<(), ()> {
        let backoff = Backoff::new();
        let mut polls = 0u32;
        while !ready() {
            if self.stopped() {
                return Err(());
            }
            if self.exchange.is_some() {
                self.poll()?;
                // Polling the network is itself the wait: a backoff's pauses would only delay
                // noticing a message.
                if !self.backing_off(&mut polls) {
                    continue;
                }
            }
            match self.crowded {
                true => std::thread::yield_now(),
                false => backoff.snooze(),
            }
        }
        Ok(())
    }

    /// Counts a poll of a wait: whether to yield the core now, which is once the wait is long
    /// (the machine is then oversubscribed and the sender needs this core), or at once when
    /// the team is crowded.
    pub(super) fn backing_off(&self, polls: &mut u32) -> bool {
        *polls = polls.saturating_add(1);
        self.crowded || *polls > POLLS_BEFORE_BACKOFF
    }

    /// A sense-reversing spin barrier over the team.
    pub(super) fn barrier(&self) -> Result<(), ()> {
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

/// The machine's online cores: not this process's affinity, which a launcher narrows to one
/// rank's share (two ranks bound to a core each are not crowded).
fn machine_cores() -> Option<usize> {
    // SAFETY: sysconf only reads a system parameter.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0)
}
