//! Bale's PEs on several ranks: when an MPI launcher started this process as one of several
//! ranks, the selector's [`Link`] is `tactor-comm`'s transport, a channel per worker (at
//! most four), every selector message on one port.

use std::sync::Arc;
use tactor::actor::Link;
use tactor_comm::{Completion, Reduce, Transport};

/// The port selector batches and termination messages use.
const PORT: u16 = 1;

/// Completions one poll hands over at most, so that a PE gets back to its own work.
const BUDGET: usize = 64;

/// This process's place in a job of several ranks.
pub struct Cluster {
    transport: Box<dyn Transport>,
}

impl Cluster {
    /// Joins the job this process was launched into, with a channel per worker (at most
    /// four). `Ok(None)` when the process runs on its own or as the only rank.
    pub fn join(workers: usize) -> Result<Option<Arc<Cluster>>, String> {
        let Some((size, _)) = tactor_comm::launcher::job().filter(|&(size, _)| size > 1) else {
            return Ok(None);
        };
        start(workers.clamp(1, 4), size).map(|transport| Some(Arc::new(Cluster { transport })))
    }

    /// Combines `value` over the ranks.
    pub fn all_reduce(&self, op: Reduce, value: u64) -> u64 {
        self.transport
            .all_reduce(op, value, &mut || true)
            .expect("never abandoned")
    }

    /// With `workers` PEs on every rank: all the PEs, and the first of this rank's.
    pub fn pes(&self, workers: usize) -> (usize, usize) {
        (workers * self.ranks(), workers * self.rank())
    }

    /// This cluster as a selector's link.
    pub fn link(self: &Arc<Self>) -> Arc<dyn Link> {
        self.clone()
    }

    /// Waits for every rank.
    pub fn barrier(&self) {
        self.transport
            .barrier(&mut || true)
            .expect("never abandoned");
    }
}

impl Link for Cluster {
    fn rank(&self) -> usize {
        self.transport.rank()
    }

    fn ranks(&self) -> usize {
        self.transport.ranks()
    }

    fn send(&self, worker: usize, rank: usize, bytes: Vec<u8>) {
        let channel = worker % self.transport.channels();
        if let Err(e) = self.transport.send(channel, rank, PORT, bytes, None) {
            eprintln!("error: rank {}: {e}", self.rank());
            self.transport.abort(1);
        }
    }

    fn poll(&self, worker: usize, deliver: &mut dyn FnMut(usize, Vec<u8>)) -> bool {
        let channel = worker % self.transport.channels();
        let mut any = false;
        for _ in 0..BUDGET {
            match self.transport.poll(channel) {
                Some(Completion::Received(m)) if m.port == PORT => {
                    deliver(m.source, m.data);
                    any = true;
                }
                Some(_) => {}
                None => break,
            }
        }
        any
    }

    fn abort(&self) -> ! {
        self.transport.abort(1)
    }
}

fn start(channels: usize, size: usize) -> Result<Box<dyn Transport>, String> {
    tactor_comm::connect(channels, size, "bale")
}
