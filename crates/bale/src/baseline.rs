//! The models the selector is measured against: **AGP** (one remote operation per update,
//! here an atomic on the owner's memory — the shared-memory form of SHMEM's atomics and gets;
//! one process) and an **exstack-like** bulk-synchronous exchange (fill a buffer per
//! destination, exchange them all, process, repeat; in one process or over ranks).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Bytes per destination buffer in a phase (as the selector's aggregation buffers).
pub const CAPACITY: usize = tactor::actor::BUFFER_BYTES;

/// An exstack-like exchange among PEs: between the PEs of this rank, `slots[src][dst]`
/// carries one phase's messages and every phase ends with a barrier; to PEs of other ranks a
/// phase sends one parcel each through the communication layer (empty or not: it also says
/// whether its sender has more), and waits for one from each.
pub struct Exstack<T> {
    /// PEs in all, and the first of this rank's.
    pes: usize,
    first: usize,
    slots: Vec<Vec<Mutex<Vec<T>>>>,
    barrier: SpinBarrier,
    /// This rank's PEs that still have work of their own in this phase.
    busy: AtomicUsize,
    net: Option<Net>,
}

/// The other ranks of an exchange.
struct Net {
    cluster: std::sync::Arc<crate::net::Cluster>,
    /// This exchange among the job's (parcels of several exchanges share the port).
    id: u32,
    /// Per PE of this rank, its phase.
    phases: Vec<AtomicU32>,
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

impl<T: bytemuck::Pod + Send> Exstack<T> {
    /// An exchange among every PE of `pes`: collective, every rank makes its exchanges in
    /// the same order.
    pub fn new(pes: &crate::apps::Pes) -> Exstack<T> {
        let local = pes.mine().len();
        let net = pes.cluster().map(|c| Net {
            id: c.exchange_id(),
            cluster: c.clone(),
            phases: (0..local).map(|_| AtomicU32::new(0)).collect(),
        });
        Exstack {
            pes: pes.count(),
            first: pes.mine().start,
            slots: (0..local)
                .map(|_| (0..local).map(|_| Mutex::new(Vec::new())).collect())
                .collect(),
            barrier: SpinBarrier::new(local),
            busy: AtomicUsize::new(0),
            net,
        }
    }

    /// Messages a buffer for one destination holds in a phase: [`CAPACITY`] bytes, less on
    /// ranks, where a buffer for another rank travels whole in one eager message.
    pub fn capacity(&self) -> usize {
        let bytes = match self.net {
            Some(_) => CAPACITY.min(tactor_comm::INLINE_LIMIT - crate::net::PARCEL_HEADER),
            None => CAPACITY,
        };
        (bytes / std::mem::size_of::<T>().max(1)).max(1)
    }

    /// One phase for PE `me` (a PE of this rank): hands `out[d]` to PE `d`, waits for
    /// everyone, and gives back what the others handed to `me` (appended to `inbox`). Returns
    /// whether any PE said it still has work (`more`), so that all PEs agree on when to stop.
    pub fn exchange(&self, me: usize, out: &mut [Vec<T>], inbox: &mut Vec<T>, more: bool) -> bool {
        let local = self.slots.len();
        let l = me - self.first;
        for (d, buf) in out.iter_mut().enumerate() {
            match d.checked_sub(self.first).filter(|&k| k < local) {
                Some(k) => {
                    let mut slot = self.slots[l][k].lock().unwrap_or_else(|p| p.into_inner());
                    slot.append(buf);
                }
                None => {
                    let net = self
                        .net
                        .as_ref()
                        .expect("a PE of another rank means a network");
                    let phase = net.phases[l].load(Ordering::Relaxed);
                    let head = [net.id, phase, me as u32, u32::from(more)];
                    net.cluster
                        .send_parcel(d / local, d % local, head, bytemuck::cast_slice(buf));
                    buf.clear();
                }
            }
        }
        if more {
            self.busy.fetch_add(1, Ordering::AcqRel);
        }
        self.barrier.wait();
        for src in 0..local {
            let mut slot = self.slots[src][l].lock().unwrap_or_else(|p| p.into_inner());
            inbox.append(&mut slot);
        }
        let mut any = self.busy.load(Ordering::Acquire) > 0;
        if let Some(net) = &self.net {
            // One parcel from every PE of the other ranks, empty or not.
            let phase = net.phases[l].fetch_add(1, Ordering::Relaxed);
            let (mut missing, mut idle) = (self.pes - local, 0u32);
            while missing > 0 {
                let took = net
                    .cluster
                    .take_parcels(l, net.id, phase, &mut |more, data| {
                        any |= more;
                        crate::net::extend_from_bytes(inbox, data);
                    });
                missing -= took;
                // Spin while the others are near; give the core up when they are not (more
                // PEs than cores).
                idle = if took > 0 { 0 } else { idle + 1 };
                if idle > 1024 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        // Everyone has read `busy` and emptied its slots before the next phase starts.
        if self.barrier.wait() {
            self.busy.store(0, Ordering::Release);
        }
        self.barrier.wait();
        any
    }
}
