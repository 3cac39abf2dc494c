//! An in-process transport: every rank is an endpoint in this process. It goes through the same
//! completion queues and progress path as a network backend, so programs and tests written
//! against [`Transport`] run unchanged without MPI.

use crate::transport::check_send;
use crate::{CommError, Completion, CompletionQueue, Message, Reduce, Stopped, Transport};
use crossbeam_queue::SegQueue;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

/// One rank's end of an in-process world made by [`Loopback::world`].
///
/// ```
/// use tactor_comm::{loopback::Loopback, Reduce, Transport};
///
/// let ranks = Loopback::world(3, 2);
/// let sums: Vec<u64> = std::thread::scope(|s| {
///     let joins: Vec<_> = ranks
///         .iter()
///         .map(|r| s.spawn(move || r.all_reduce(Reduce::Sum, r.rank() as u64 + 1, &mut || true)))
///         .collect();
///     joins.into_iter().map(|j| j.join().unwrap().unwrap()).collect()
/// });
/// assert_eq!(sums, [6, 6, 6]);
/// ```
pub struct Loopback {
    rank: usize,
    fabric: Arc<Fabric>,
}

struct Fabric {
    ranks: usize,
    channels: usize,
    /// `ports[rank * channels + channel]`.
    ports: Vec<Port>,
    collective: Mutex<Collective>,
}

#[derive(Default)]
struct Port {
    /// Messages sent to this rank on this channel, not yet progressed.
    wire: SegQueue<Message>,
    /// Tokens of this rank's finished sends on this channel, not yet progressed.
    sent: SegQueue<u64>,
    cq: CompletionQueue,
    /// Held by the thread progressing this channel.
    progress: Mutex<()>,
    in_flight: AtomicUsize,
}

#[derive(Default)]
struct Collective {
    generation: u64,
    arrived: usize,
    acc: Option<u64>,
    result: u64,
}

impl Loopback {
    /// `ranks` endpoints with `channels` channels each (both at least 1).
    pub fn world(ranks: usize, channels: usize) -> Vec<Loopback> {
        let (ranks, channels) = (ranks.max(1), channels.max(1));
        let fabric = Arc::new(Fabric {
            ranks,
            channels,
            ports: (0..ranks * channels).map(|_| Port::default()).collect(),
            collective: Mutex::new(Collective::default()),
        });
        (0..ranks)
            .map(|rank| Loopback {
                rank,
                fabric: fabric.clone(),
            })
            .collect()
    }

    fn port(&self, rank: usize, channel: usize) -> &Port {
        &self.fabric.ports[rank * self.fabric.channels + channel]
    }
}

impl Transport for Loopback {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.fabric.ranks
    }

    fn channels(&self) -> usize {
        self.fabric.channels
    }

    fn send(
        &self,
        channel: usize,
        dest: usize,
        port: u16,
        data: Vec<u8>,
        token: Option<u64>,
    ) -> Result<(), CommError> {
        check_send(self, channel, dest, data.len())?;
        self.port(dest, channel).wire.push(Message {
            source: self.rank,
            port,
            data,
        });
        if let Some(token) = token {
            let mine = self.port(self.rank, channel);
            mine.in_flight.fetch_add(1, Ordering::Relaxed);
            mine.sent.push(token);
        }
        Ok(())
    }

    fn progress(&self, channel: usize) -> bool {
        let port = self.port(self.rank, channel);
        let _guard = match port.progress.try_lock() {
            Ok(g) => g,
            Err(TryLockError::WouldBlock) => return false,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        let mut any = false;
        while let Some(m) = port.wire.pop() {
            port.cq.push(Completion::Received(m));
            any = true;
        }
        while let Some(token) = port.sent.pop() {
            port.in_flight.fetch_sub(1, Ordering::Relaxed);
            port.cq.push(Completion::Sent { token });
            any = true;
        }
        any
    }

    fn completions(&self, channel: usize) -> &CompletionQueue {
        &self.port(self.rank, channel).cq
    }

    fn in_flight(&self, channel: usize) -> usize {
        self.port(self.rank, channel)
            .in_flight
            .load(Ordering::Relaxed)
    }

    fn barrier(&self, idle: &mut dyn FnMut() -> bool) -> Result<(), Stopped> {
        self.all_reduce(Reduce::Sum, 0, idle).map(|_| ())
    }

    fn all_reduce(
        &self,
        op: Reduce,
        value: u64,
        idle: &mut dyn FnMut() -> bool,
    ) -> Result<u64, Stopped> {
        let lock = || {
            self.fabric
                .collective
                .lock()
                .unwrap_or_else(|p| p.into_inner())
        };
        let generation = {
            let mut c = lock();
            c.acc = Some(match (c.acc, op) {
                (None, _) => value,
                (Some(a), Reduce::Max) => a.max(value),
                (Some(a), Reduce::Sum) => a.wrapping_add(value),
            });
            c.arrived += 1;
            if c.arrived == self.fabric.ranks {
                c.result = c.acc.take().unwrap_or(0);
                c.arrived = 0;
                c.generation += 1;
                return Ok(c.result);
            }
            c.generation
        };
        loop {
            {
                let c = lock();
                // The next collective cannot complete without this rank, so the result is
                // still this generation's.
                if c.generation != generation {
                    return Ok(c.result);
                }
            }
            if !idle() {
                return Err(Stopped);
            }
            std::thread::yield_now();
        }
    }

    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}
