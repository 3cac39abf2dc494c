//! The models the selector is measured against: **AGP** (one remote operation per update,
//! here an atomic on the owner's memory — the shared-memory form of SHMEM's atomics and gets;
//! one process) and an **exstack-like** bulk-synchronous exchange (fill a buffer per
//! destination, exchange them all, process, repeat; in one process or over ranks).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tactor::job::{Job, OpenPort};

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

/// The other ranks of an exchange: its own port of the job, whose handler files each parcel
/// with the PE of this rank it is for, until that PE takes it.
struct Net {
    job: Arc<Job>,
    port: u16,
    /// Per PE of this rank, its phase.
    phases: Vec<AtomicU32>,
    parcels: Arc<Vec<Mutex<Vec<Parcel>>>>,
    _open: OpenPort,
}

/// Bytes before a parcel's data: its phase, source PE, and the destination's local index
/// with the "more" flag in its top bit.
const PARCEL_HEADER: usize = 12;

/// Exchanges begun in this process, numbering their ports: every rank begins them in the
/// same order.
static EXCHANGES: AtomicU32 = AtomicU32::new(0);

/// A parcel that arrived for a PE of this rank: its data is the message after
/// [`PARCEL_HEADER`] bytes.
struct Parcel {
    phase: u32,
    more: bool,
    message: Vec<u8>,
}

impl Net {
    fn open(job: &Arc<Job>, local: usize) -> Net {
        let n = EXCHANGES.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(tactor::job::FIRST_PORT))
            .expect("fewer than 65 000 exchanges in one run");
        let parcels: Arc<Vec<Mutex<Vec<Parcel>>>> =
            Arc::new((0..local).map(|_| Mutex::default()).collect());
        let file = parcels.clone();
        let open = job
            .open_port(
                port,
                Arc::new(move |m| {
                    let word = |i: usize| {
                        u32::from_le_bytes(m.data[4 * i..4 * i + 4].try_into().expect("4 bytes"))
                    };
                    let (phase, to) = (word(0), word(2));
                    let parcel = Parcel {
                        phase,
                        more: to >> 31 == 1,
                        message: m.data,
                    };
                    file[(to & !(1 << 31)) as usize]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(parcel);
                }),
            )
            .expect("each exchange has a port of its own");
        Net {
            job: job.clone(),
            port,
            phases: (0..local).map(|_| AtomicU32::new(0)).collect(),
            parcels,
            _open: open,
        }
    }

    /// Sends a parcel of `data` to PE `local` of `rank`, from PE `from` in `phase`.
    fn send(&self, rank: usize, local: usize, (phase, from, more): (u32, u32, bool), data: &[u8]) {
        let mut bytes = tactor_comm::buffer(PARCEL_HEADER + data.len());
        for w in [phase, from, local as u32 | u32::from(more) << 31] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        bytes.extend_from_slice(data);
        // The destination's channel, which it polls while it waits for its parcels.
        self.job.send(local, rank, self.port, bytes);
    }

    /// Polls the network once for PE `l` of this rank, then hands `take(more, data)` each
    /// parcel of `phase` that arrived for it. Returns how many it took.
    fn take(&self, l: usize, phase: u32, take: &mut dyn FnMut(bool, &[u8])) -> usize {
        self.job
            .progress_channel(l % self.job.channels(), 64, &mut Some);
        let mut mine = self.parcels[l]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let before = mine.len();
        mine.retain(|p| {
            let now = p.phase == phase;
            if now {
                take(p.more, &p.message[PARCEL_HEADER..]);
            }
            !now
        });
        before - mine.len()
    }
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
        let net = pes.job().map(|job| Net::open(job, local));
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
            Some(_) => CAPACITY.min(tactor_comm::INLINE_LIMIT - PARCEL_HEADER),
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
                    let head = (phase, me as u32, more);
                    net.send(d / local, d % local, head, bytemuck::cast_slice(buf));
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
                let took = net.take(l, phase, &mut |more, data| {
                    any |= more;
                    crate::apps::extend_from_bytes(inbox, data);
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
