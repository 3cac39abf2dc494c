//! The models the selector is measured against, in one process: **AGP** (one remote
//! operation per update, here an atomic on the owner's memory — the shared-memory form of
//! SHMEM's atomics and gets) and an **exstack-like** bulk-synchronous exchange (fill a buffer
//! per destination, exchange them all at a barrier, process, repeat).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bytes per destination buffer in a phase (as the selector's aggregation buffers).
pub const CAPACITY: usize = tactor::actor::BUFFER_BYTES;

/// An exstack-like exchange among `pes` threads: `slots[src][dst]` carries one phase's
/// messages; every phase ends with a barrier.
pub struct Exstack<T> {
    pes: usize,
    slots: Vec<Vec<Mutex<Vec<T>>>>,
    barrier: SpinBarrier,
    /// PEs that still have work of their own in this phase.
    busy: AtomicUsize,
}

/// A sense-reversing barrier that spins (yielding after a while): bale's PEs each own a core,
/// and a futex-based barrier would put them to sleep at every phase.
struct SpinBarrier {
    pes: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn new(pes: usize) -> SpinBarrier {
        SpinBarrier {
            pes,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    /// Waits for every PE; `true` on exactly one of them (the last to arrive).
    fn wait(&self) -> bool {
        let gen = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.pes {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::AcqRel);
            return true;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == gen {
            spins += 1;
            if spins > 1024 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        false
    }
}

impl<T: Send> Exstack<T> {
    /// An exchange among `pes` PEs.
    pub fn new(pes: usize) -> Exstack<T> {
        Exstack {
            pes,
            slots: (0..pes)
                .map(|_| (0..pes).map(|_| Mutex::new(Vec::new())).collect())
                .collect(),
            barrier: SpinBarrier::new(pes),
            busy: AtomicUsize::new(0),
        }
    }

    /// One phase for PE `me`: hands `out[d]` to PE `d`, waits for everyone, and gives back what
    /// the others handed to `me` (appended to `inbox`). Returns whether any PE said it still
    /// has work (`more`), so that all PEs agree on when to stop.
    pub fn exchange(&self, me: usize, out: &mut [Vec<T>], inbox: &mut Vec<T>, more: bool) -> bool {
        for (d, buf) in out.iter_mut().enumerate() {
            let mut slot = self.slots[me][d].lock().unwrap_or_else(|p| p.into_inner());
            slot.append(buf);
        }
        if more {
            self.busy.fetch_add(1, Ordering::AcqRel);
        }
        self.barrier.wait();
        for src in 0..self.pes {
            let mut slot = self.slots[src][me]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            inbox.append(&mut slot);
        }
        let any = self.busy.load(Ordering::Acquire) > 0;
        // Everyone has read `busy` and emptied its slots before the next phase starts.
        if self.barrier.wait() {
            self.busy.store(0, Ordering::Release);
        }
        self.barrier.wait();
        any
    }
}
