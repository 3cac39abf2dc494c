//! When a mailbox of a selector has terminated: every PE said it sends no more to it, and
//! every message sent to it was processed.
//!
//! Counts are kept per batch, not per message: a sender adds a batch's length to `sent` before
//! the batch becomes visible to its receiver, and the receiver adds it to `processed` after
//! the handler ran on every message of it. A PE adds itself to `done` only after its last
//! flush to that mailbox (program order, released by the `done` increment). So once `done`
//! reaches the PE count, `sent` is final, and `processed == sent` means every message was
//! handled. Messages a handler sends sit in its PE's buffers until flushed; they are counted
//! in the destination mailbox, which is why a mailbox that handlers send to must be declared
//! fed by the handlers' mailbox ([`super::Spec::fed_by`]) and closes only after its feeders
//! terminated and every PE flushed to it.
//!
//! Mailboxes that feed each other (a cycle of `fed_by`) form a group that terminates as one:
//! every PE's program is done with each of them, the mailboxes outside feeding in have
//! terminated, and the group is quiet. For that, a PE publishes what its handlers sent (its
//! `sent` counts) before it hands any of it over and before it counts the batch that caused
//! it as processed, so at every moment a group's `sent` is at least its `processed`. Reading
//! every `processed` first and every `sent` after, equal sums mean that when the reads of
//! `processed` ended, every message published had been handled and no handler was midway
//! through a batch (its batch was published but not yet processed) — nothing is left to
//! send anything, ever.

use crate::sync::{AtomicU64, AtomicUsize, Ordering};
use crossbeam_utils::CachePadded;

/// One mailbox's counters.
struct Counts {
    sent: CachePadded<AtomicU64>,
    processed: CachePadded<AtomicU64>,
    done: CachePadded<AtomicUsize>,
}

/// The counters of every mailbox of a selector.
pub(crate) struct Termination {
    counts: Vec<Counts>,
    pes: usize,
}

impl Termination {
    pub(crate) fn new(mailboxes: usize, pes: usize) -> Termination {
        Termination {
            counts: (0..mailboxes)
                .map(|_| Counts {
                    sent: CachePadded::new(AtomicU64::new(0)),
                    processed: CachePadded::new(AtomicU64::new(0)),
                    done: CachePadded::new(AtomicUsize::new(0)),
                })
                .collect(),
            pes,
        }
    }

    /// `n` messages are about to be handed to a receiver of mailbox `m`.
    pub(crate) fn sent(&self, m: usize, n: usize) {
        self.counts[m].sent.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `n` messages of mailbox `m` were handled.
    pub(crate) fn processed(&self, m: usize, n: usize) {
        self.counts[m]
            .processed
            .fetch_add(n as u64, Ordering::Release);
    }

    /// One PE sends no more to mailbox `m` (after its last flush to it).
    pub(crate) fn done(&self, m: usize) {
        self.counts[m].done.fetch_add(1, Ordering::Release);
    }

    /// Whether the group of mutually feeding mailboxes `members` has terminated (see the
    /// module documentation); the mailboxes feeding it from outside must have terminated.
    pub(crate) fn group_terminated(&self, members: &[usize]) -> bool {
        if members
            .iter()
            .any(|&m| self.counts[m].done.load(Ordering::Acquire) < self.pes)
        {
            return false;
        }
        let processed: u64 = members
            .iter()
            .map(|&m| self.counts[m].processed.load(Ordering::Acquire))
            .sum();
        let sent: u64 = members
            .iter()
            .map(|&m| self.counts[m].sent.load(Ordering::Acquire))
            .sum();
        processed == sent
    }

    /// Whether every PE counted here is done with mailbox `m`.
    pub(crate) fn all_done(&self, m: usize) -> bool {
        self.counts[m].done.load(Ordering::Acquire) >= self.pes
    }

    /// Messages of mailbox `m` handled here so far.
    pub(crate) fn processed_count(&self, m: usize) -> u64 {
        self.counts[m].processed.load(Ordering::Acquire)
    }

    /// Messages for mailbox `m` published here so far.
    pub(crate) fn sent_count(&self, m: usize) -> u64 {
        self.counts[m].sent.load(Ordering::Acquire)
    }

    /// Whether mailbox `m` has terminated.
    pub(crate) fn terminated(&self, m: usize) -> bool {
        let c = &self.counts[m];
        if c.done.load(Ordering::Acquire) < self.pes {
            return false;
        }
        let sent = c.sent.load(Ordering::Acquire);
        c.processed.load(Ordering::Acquire) == sent
    }
}
