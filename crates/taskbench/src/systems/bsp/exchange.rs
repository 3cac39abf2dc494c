//! `bsp` across ranks: after a timestep, a worker sends each worker on another rank one
//! message with the outputs it needs from this worker for the next timestep, through the
//! communication layer; the receiver finds it in its inbox before it starts that timestep.
//! Inside a rank, workers share output rows as in one process.

use tactor::job::Job;

/// The port of `bsp`'s neighbour exchange.
pub const PORT_BSP: u16 = tactor::job::FIRST_PORT;
use crate::systems::team::Net;
use crossbeam_queue::SegQueue;
use tactor_comm::Message;

/// Bytes before the outputs: pass, source worker, timestep, destination worker, count.
pub const HEADER: usize = 24;

/// Which message a worker waits for: (pass, timestep of the outputs, source worker). One
/// message carries every graph's outputs of that timestep ([`super::ranks`]).
pub type Key = (u32, i64, u32);

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
        let (pass, t, src) = self.key;
        buf.extend_from_slice(&pass.to_le_bytes());
        buf.extend_from_slice(&src.to_le_bytes());
        buf.extend_from_slice(&t.to_le_bytes());
        buf.extend_from_slice(&self.dest.to_le_bytes());
        buf.extend_from_slice(&self.count.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Option<Header> {
        let u32_at = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        let t = i64::from_le_bytes(b.get(8..16)?.try_into().ok()?);
        Some(Header {
            key: (u32_at(0)?, t, u32_at(4)?),
            dest: u32_at(16)?,
            count: u32_at(20)?,
        })
    }
}

/// The rank's side of the exchange: one inbox per local worker, filled by whichever thread
/// progresses the network.
pub struct Exchange<'c> {
    job: &'c Job,
    first_worker: usize,
    inboxes: Vec<SegQueue<(Header, Vec<u8>)>>,
}

impl<'c> Exchange<'c> {
    pub fn new(job: &'c Job, workers: usize) -> Exchange<'c> {
        Exchange {
            job,
            first_worker: job.rank() * workers,
            inboxes: (0..workers).map(|_| SegQueue::new()).collect(),
        }
    }

    pub fn job(&self) -> &Job {
        self.job
    }

    /// Decodes a message once, on arrival: a message that is not a bsp message for a worker
    /// of this rank can only be a bug, and ends the job.
    fn decode(&self, m: Message) -> (Header, Vec<u8>) {
        let header = Header::decode(&m.data)
            .filter(|_| m.port == PORT_BSP)
            .filter(|h| {
                (h.dest as usize)
                    .checked_sub(self.first_worker)
                    .is_some_and(|w| w < self.inboxes.len())
            });
        match header {
            Some(h) => (h, m.data),
            None => panic!(
                "bsp: rank {} sent a message no worker of this rank expects (port {}, {} bytes)",
                m.source,
                m.port,
                m.data.len()
            ),
        }
    }

    /// Puts a message in the inbox of the local worker it is for.
    fn route(&self, m: Message) {
        let (h, data) = self.decode(m);
        self.inboxes[h.dest as usize - self.first_worker].push((h, data));
    }

    /// Moves what arrived for local worker `w` into its `held` messages.
    pub fn collect(&self, w: usize, held: &mut Held) -> Result<(), String> {
        while let Some((h, data)) = self.inboxes[w].pop() {
            held.insert(h, data)?;
        }
        Ok(())
    }

    /// Progresses the network as local worker `w`: messages for `w` go straight into `held`
    /// (no inbox hop on the path a waiting worker is waiting on), others to their worker's
    /// inbox. `Ok(false)` once another rank failed.
    pub fn poll_into(&self, w: usize, held: &mut Held) -> Result<bool, String> {
        let me = w + self.first_worker;
        let mut bad = Ok(());
        let alive = self.job.progress(&mut |m| {
            let (h, data) = self.decode(m);
            if h.dest as usize == me {
                if let Err(e) = held.insert(h, data) {
                    bad = Err(e);
                }
            } else {
                self.inboxes[h.dest as usize - self.first_worker].push((h, data));
            }
            None
        });
        bad?;
        self.collect(w, held)?;
        Ok(alive.is_ok())
    }
}

/// The messages a worker received and has not used yet, with their decoded headers: a handful
/// at most (one per neighbour and timestep in flight), so a vector searched linearly beats
/// hashing.
#[derive(Default)]
pub struct Held(Vec<(Header, Vec<u8>)>);

impl Held {
    fn insert(&mut self, h: Header, data: Vec<u8>) -> Result<(), String> {
        if self.0.iter().any(|(k, _)| k.key == h.key) {
            return Err(format!(
                "bsp: worker {} received timestep {} twice from worker {}",
                h.dest, h.key.1, h.key.2
            ));
        }
        self.0.push((h, data));
        Ok(())
    }

    /// Takes the message with `key`, if it arrived.
    pub fn take(&mut self, key: &Key) -> Option<(Header, Vec<u8>)> {
        let i = self.0.iter().position(|(h, _)| h.key == *key)?;
        Some(self.0.swap_remove(i))
    }
}

impl Net for Exchange<'_> {
    fn idle(&self) -> bool {
        self.job
            .progress(&mut |m| {
                self.route(m);
                None
            })
            .is_ok()
    }

    fn barrier(&self) -> bool {
        self.job
            .barrier_with(&mut |m| {
                self.route(m);
                None
            })
            .is_ok()
    }

    fn failed_rank(&self) -> usize {
        self.job.failed_rank().unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header {
            key: (1, -3, 4),
            dest: 5,
            count: 6,
        };
        let mut b = Vec::new();
        h.encode(&mut b);
        assert_eq!(b.len(), HEADER);
        assert_eq!(Header::decode(&b), Some(h));
        assert_eq!(Header::decode(&b[..20]), None);
        assert_eq!(Header::decode(&b[..HEADER - 1]), None);
    }
}
