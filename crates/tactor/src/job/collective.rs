//! The job's collectives. Each waits by progressing the network (so messages keep flowing to
//! the ports meanwhile) and gives up with [`JobError::RankFailed`] once some rank failed,
//! instead of waiting forever for it. Every rank calls them in the same order, from one
//! thread at a time.

use super::{Job, JobError, PORT_COLLECTIVE};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use tactor_comm::{Message, Reduce};

/// Collectives made of messages: their numbering, and what arrived for them (a faster rank
/// may already be in the next one).
#[derive(Default)]
pub(super) struct State {
    next: AtomicU64,
    arrived: Mutex<Vec<Message>>,
}

/// Bytes of a collective message's number, before its payload.
const NUMBER: usize = 8;

impl State {
    pub(super) fn arrived(&self, m: Message) {
        self.arrived
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(m);
    }

    /// Hands `take` each arrived message of collective `n` (its source and payload).
    fn take(&self, n: u64, take: &mut dyn FnMut(usize, &[u8])) {
        self.arrived
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|m| {
                let ours = m.data.len() >= NUMBER && m.data[..NUMBER] == n.to_le_bytes();
                if ours {
                    take(m.source, &m.data[NUMBER..]);
                }
                !ours
            });
    }
}

impl Job {
    fn stopped(&self) -> JobError {
        self.check()
            .err()
            .unwrap_or(JobError::RankFailed { rank: usize::MAX })
    }

    /// What a collective does while it waits: progress, and stop once a rank failed.
    fn wait_idle(&self) -> bool {
        self.progress(&mut Some).is_ok()
    }

    /// Waits until every rank called it.
    ///
    /// ```
    /// let job = tactor::job::Job::builder().join().unwrap();
    /// job.barrier().unwrap();
    /// ```
    pub fn barrier(&self) -> Result<(), JobError> {
        self.barrier_with(&mut Some)
    }

    /// [`Job::barrier`], offering what arrives meanwhile to `take` first (as
    /// [`Job::progress`] does), for a rank that takes its messages itself.
    pub fn barrier_with(
        &self,
        take: &mut dyn FnMut(tactor_comm::Message) -> Option<tactor_comm::Message>,
    ) -> Result<(), JobError> {
        self.check()?;
        self.net
            .barrier(&mut || self.progress(take).is_ok())
            .map_err(|_| self.stopped())
    }

    /// Combines `value` over the ranks; every rank gets the result.
    ///
    /// ```
    /// use tactor::job::{Job, Reduce};
    ///
    /// let job = Job::builder().join().unwrap();
    /// assert_eq!(job.all_reduce(Reduce::Max, 7).unwrap(), 7);
    /// ```
    pub fn all_reduce(&self, op: Reduce, value: u64) -> Result<u64, JobError> {
        self.check()?;
        self.net
            .all_reduce(op, value, &mut || self.wait_idle())
            .map_err(|_| self.stopped())
    }

    /// Every rank's `bytes`, in rank order, on every rank.
    ///
    /// ```
    /// let job = tactor::job::Job::builder().join().unwrap();
    /// assert_eq!(job.all_gather(vec![1, 2]).unwrap(), [vec![1, 2]]);
    /// ```
    pub fn all_gather(&self, bytes: Vec<u8>) -> Result<Vec<Vec<u8>>, JobError> {
        self.check()?;
        let (me, ranks) = (self.rank(), self.ranks());
        let n = self.collective.next.fetch_add(1, Ordering::Relaxed);
        let mut got: Vec<Option<Vec<u8>>> = vec![None; ranks];
        let mut missing = ranks - 1;
        if missing > 0 {
            let framed = frame(n, &bytes);
            for r in (0..ranks).filter(|&r| r != me) {
                self.send(0, r, PORT_COLLECTIVE, framed.clone());
            }
        }
        got[me] = Some(bytes);
        while missing > 0 {
            self.collective.take(n, &mut |source, data| {
                if got[source].is_none() {
                    got[source] = Some(data.to_vec());
                    missing -= 1;
                }
            });
            if missing > 0 && !self.wait_idle() {
                return Err(self.stopped());
            }
        }
        Ok(got.into_iter().map(|g| g.unwrap_or_default()).collect())
    }

    /// Rank `root`'s `bytes` on every rank (what the others pass is ignored).
    ///
    /// ```
    /// use tactor::job::Job;
    ///
    /// let ranks = Job::in_process(2, 1);
    /// let got: Vec<Vec<u8>> = std::thread::scope(|s| {
    ///     let runs: Vec<_> = ranks
    ///         .iter()
    ///         .map(|j| s.spawn(move || j.broadcast(1, vec![j.rank() as u8]).unwrap()))
    ///         .collect();
    ///     runs.into_iter().map(|r| r.join().unwrap()).collect()
    /// });
    /// assert_eq!(got, [vec![1], vec![1]]);
    /// ```
    pub fn broadcast(&self, root: usize, bytes: Vec<u8>) -> Result<Vec<u8>, JobError> {
        self.check()?;
        let (me, ranks) = (self.rank(), self.ranks());
        assert!(
            root < ranks,
            "broadcast from rank {root} of a job of {ranks}"
        );
        let n = self.collective.next.fetch_add(1, Ordering::Relaxed);
        if me == root {
            let framed = frame(n, &bytes);
            for r in (0..ranks).filter(|&r| r != me) {
                self.send(0, r, PORT_COLLECTIVE, framed.clone());
            }
            return Ok(bytes);
        }
        let mut got = None;
        loop {
            self.collective
                .take(n, &mut |_, data| got = Some(data.to_vec()));
            if let Some(g) = got.take() {
                return Ok(g);
            }
            if !self.wait_idle() {
                return Err(self.stopped());
            }
        }
    }
}

fn frame(n: u64, bytes: &[u8]) -> Vec<u8> {
    let mut framed = tactor_comm::buffer(NUMBER + bytes.len());
    framed.extend_from_slice(&n.to_le_bytes());
    framed.extend_from_slice(bytes);
    framed
}
