//! `bsp` across ranks: after a timestep, a worker sends each worker on another rank one
//! message with the outputs it needs from this worker for the next timestep, through the
//! communication layer; the receiver finds it in its inbox before it starts that timestep.
//! Inside a rank, workers share output rows as in one process.

use crate::cluster::{Cluster, PORT_BSP};
use crate::systems::team::Net;
use crossbeam_queue::SegQueue;
use tactor_comm::Message;

/// Bytes before the outputs: pass, graph, timestep, source worker, destination worker, count.
pub const HEADER: usize = 32;

/// Which message a worker waits for: (pass, graph, timestep of the outputs, source worker).
pub type Key = (u32, u32, i64, u32);

/// A message's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub key: Key,
    /// The destination worker (global).
    pub dest: u32,
    /// Outputs carried.
    pub count: u32,
}

impl Header {
    pub fn encode(&self, buf: &mut Vec<u8>) {
        let (pass, graph, t, src) = self.key;
        buf.extend_from_slice(&pass.to_le_bytes());
        buf.extend_from_slice(&graph.to_le_bytes());
        buf.extend_from_slice(&t.to_le_bytes());
        buf.extend_from_slice(&src.to_le_bytes());
        buf.extend_from_slice(&self.dest.to_le_bytes());
        buf.extend_from_slice(&self.count.to_le_bytes());
        buf.extend_from_slice(&[0; 4]);
    }

    pub fn decode(b: &[u8]) -> Option<Header> {
        let u32_at = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        let t = i64::from_le_bytes(b.get(8..16)?.try_into().ok()?);
        Some(Header {
            key: (u32_at(0)?, u32_at(4)?, t, u32_at(16)?),
            dest: u32_at(20)?,
            count: u32_at(24)?,
        })
    }
}

/// The rank's side of the exchange: one inbox per local worker, filled by whichever thread
/// progresses the network.
pub struct Exchange<'c> {
    cluster: &'c Cluster,
    first_worker: usize,
    inboxes: Vec<SegQueue<Message>>,
}

impl<'c> Exchange<'c> {
    pub fn new(cluster: &'c Cluster, workers: usize) -> Exchange<'c> {
        Exchange {
            cluster,
            first_worker: cluster.rank() * workers,
            inboxes: (0..workers).map(|_| SegQueue::new()).collect(),
        }
    }

    pub fn cluster(&self) -> &Cluster {
        self.cluster
    }

    fn route(&self, m: Message) {
        let local = Header::decode(&m.data)
            .filter(|_| m.port == PORT_BSP)
            .and_then(|h| (h.dest as usize).checked_sub(self.first_worker))
            .filter(|&w| w < self.inboxes.len());
        match local {
            Some(w) => self.inboxes[w].push(m),
            None => panic!(
                "bsp: rank {} sent a message no worker of this rank expects (port {}, {} bytes)",
                m.source,
                m.port,
                m.data.len()
            ),
        }
    }

    /// Moves what arrived for local worker `w` into its `held` messages.
    pub fn collect(&self, w: usize, held: &mut Held) -> Result<(), String> {
        while let Some(m) = self.inboxes[w].pop() {
            held.insert(m.data)?;
        }
        Ok(())
    }

    /// Progresses the network as local worker `w`: messages for `w` go straight into `held`
    /// (no inbox hop on the path a waiting worker is waiting on), others to their worker's
    /// inbox. `Ok(false)` once another rank failed.
    pub fn poll_into(&self, w: usize, held: &mut Held) -> Result<bool, String> {
        let me = (self.first_worker + w) as u32;
        let mut bad = Ok(());
        let alive = self.cluster.poll(&mut |m| {
            if m.port == PORT_BSP && Header::decode(&m.data).is_some_and(|h| h.dest == me) {
                if let Err(e) = held.insert(std::mem::take(&mut { m }.data)) {
                    bad = Err(e);
                }
            } else {
                self.route(m);
            }
        });
        bad?;
        self.collect(w, held)?;
        Ok(alive)
    }
}

/// The messages a worker received and has not used yet: a handful at most (one per neighbour
/// and timestep in flight), so a vector searched linearly beats hashing.
#[derive(Default)]
pub struct Held(Vec<(Key, Vec<u8>)>);

impl Held {
    fn insert(&mut self, data: Vec<u8>) -> Result<(), String> {
        let h = Header::decode(&data).expect("routed messages have a header");
        if self.0.iter().any(|(k, _)| *k == h.key) {
            return Err(format!(
                "bsp: worker {} received timestep {} of graph {} twice from worker {}",
                h.dest, h.key.2, h.key.1, h.key.3
            ));
        }
        self.0.push((h.key, data));
        Ok(())
    }

    /// Takes the message with `key`, if it arrived.
    pub fn take(&mut self, key: &Key) -> Option<Vec<u8>> {
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.swap_remove(i).1)
    }
}

impl Net for Exchange<'_> {
    fn idle(&self) -> bool {
        self.cluster.poll(&mut |m| self.route(m))
    }

    fn barrier(&self) -> bool {
        self.cluster.barrier(&mut |m| self.route(m)).is_ok()
    }

    fn failed_rank(&self) -> usize {
        self.cluster.failed_rank().unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header {
            key: (1, 2, -3, 4),
            dest: 5,
            count: 6,
        };
        let mut b = Vec::new();
        h.encode(&mut b);
        assert_eq!(b.len(), HEADER);
        assert_eq!(Header::decode(&b), Some(h));
        assert_eq!(Header::decode(&b[..20]), None);
    }
}
