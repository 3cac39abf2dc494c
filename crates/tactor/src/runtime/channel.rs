//! Message rings between workers: one single-producer single-consumer ring per ordered pair,
//! carrying compiled-subgraph messages ("vertex `v` of instance `id` has one more predecessor
//! done"). Messages of every instance in flight share the ring, so a burst of them arrives in
//! a few cache lines and a worker looks at `workers - 1` rings however many instances it has
//! in flight.
//!
//! A message is one 64-bit word, written with one store: a receiver spinning on the slot's
//! line would otherwise pull the line away between the stores of a multi-word message and
//! make the sender fetch it again. The word's low bit is the parity of the ring lap it was
//! written in (inverted, so that the zeroed ring reads as "not yet written" for lap 0): the
//! consumer knows which lap it expects, so a slot left over from the previous lap never
//! passes for a new message. The producer keeps its position privately; the consumer keeps
//! its own and publishes it (`head`) only so that a producer that believes the ring full can
//! check; a full ring makes `try_send` fail and the caller keeps the message for later (it
//! must never wait: the consumer may itself be waiting to send to it).

use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crossbeam_utils::CachePadded;

/// A compiled-subgraph message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Msg {
    /// The instance.
    pub(crate) id: u32,
    /// The vertex, in the compiled numbering (below 2^31).
    pub(crate) vertex: u32,
}

/// Vertices of a subgraph must fit in the 31 bits a message has for them.
pub(crate) const MAX_VERTICES: usize = 1 << 31;

/// One ring; its positions live with the producer ([`SendPos`]) and the consumer (`u32`).
pub(crate) struct Channel {
    slots: Box<[AtomicU64]>,
    mask: u32,
    shift: u32,
    head: CachePadded<AtomicU32>,
}

/// The producer's private view of a ring.
#[derive(Default)]
pub(crate) struct SendPos {
    tail: u32,
    /// The consumer's position when last read: the producer may write up to `head + len`.
    head: u32,
}

impl Channel {
    /// Bytes a ring of `capacity` slots occupies, its header included.
    pub(crate) fn bytes(capacity: u32) -> u128 {
        (std::mem::size_of::<Channel>() + capacity as usize * std::mem::size_of::<AtomicU64>())
            as u128
    }

    /// A ring of `capacity` slots (a power of two).
    pub(crate) fn new(capacity: u32) -> Channel {
        assert!(capacity.is_power_of_two(), "ring capacity {capacity}");
        Channel {
            slots: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
            mask: capacity - 1,
            shift: capacity.trailing_zeros(),
            head: CachePadded::new(AtomicU32::new(0)),
        }
    }

    /// The word that position `pos` holds once `m` is written there.
    fn word(&self, pos: u32, m: Msg) -> u64 {
        debug_assert!((m.vertex as usize) < MAX_VERTICES);
        let lap = u64::from(!(pos >> self.shift) & 1);
        u64::from(m.vertex) << 33 | u64::from(m.id) << 1 | lap
    }

    /// Sends `m` unless the ring is full (then returns `false` and sends nothing).
    pub(crate) fn try_send(&self, pos: &mut SendPos, m: Msg) -> bool {
        if pos.tail.wrapping_sub(pos.head) > self.mask {
            // Acquire: the consumer's reads of the slots it freed happen-before our rewrite.
            pos.head = self.head.load(Ordering::Acquire);
            if pos.tail.wrapping_sub(pos.head) > self.mask {
                return false;
            }
        }
        let word = self.word(pos.tail, m);
        // Release: everything the sender did before sending happens-before the consumer's
        // Acquire load of the word.
        let slot = &self.slots[(pos.tail & self.mask) as usize];
        slot.store(word, Ordering::Release);
        // The receiver's next look at this line misses; pushed toward the shared cache, it
        // misses there instead of snooping this core (4 × nearest, one process, 2 workers:
        // 3–6 % a step, alternated runs).
        crate::hint::share(slot);
        pos.tail = pos.tail.wrapping_add(1);
        true
    }

    /// Whether a message waits at the consumer's position `head`.
    pub(crate) fn ready(&self, head: u32) -> bool {
        let word = self.slots[(head & self.mask) as usize].load(Ordering::Relaxed);
        word & 1 == u64::from(!(head >> self.shift) & 1)
    }

    /// The next message, if one was sent; `head` is the consumer's private position.
    pub(crate) fn try_recv(&self, head: &mut u32) -> Option<Msg> {
        self.try_recv_if(head, |_| true)
    }

    /// The next message, if one was sent and `wanted` accepts it (otherwise it stays first).
    pub(crate) fn try_recv_if(&self, head: &mut u32, wanted: impl Fn(Msg) -> bool) -> Option<Msg> {
        let word = self.slots[(*head & self.mask) as usize].load(Ordering::Acquire);
        if word & 1 != u64::from(!(*head >> self.shift) & 1) {
            return None;
        }
        let m = Msg {
            id: (word >> 1) as u32,
            vertex: (word >> 33) as u32,
        };
        if !wanted(m) {
            return None;
        }
        *head = head.wrapping_add(1);
        // Release: our read of the slot happens-before the producer's next write of it.
        self.head.store(*head, Ordering::Release);
        Some(m)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_full_ring_refuses_and_frees_as_it_drains() {
        let ch = Channel::new(4);
        let (mut tx, mut rx) = (SendPos::default(), 0u32);
        let m = |v| Msg { id: 7, vertex: v };
        for v in 0..4 {
            assert!(ch.try_send(&mut tx, m(v)));
        }
        assert!(
            !ch.try_send(&mut tx, m(4)),
            "the fifth message does not fit"
        );
        assert_eq!(ch.try_recv(&mut rx), Some(m(0)));
        assert!(ch.try_send(&mut tx, m(4)));
        for v in 1..5 {
            assert_eq!(ch.try_recv(&mut rx), Some(m(v)));
        }
        assert_eq!(ch.try_recv(&mut rx), None);
    }

    #[test]
    fn an_unwanted_message_stays_first() {
        let ch = Channel::new(4);
        let (mut tx, mut rx) = (SendPos::default(), 0u32);
        let m = |id| Msg { id, vertex: 3 };
        assert!(ch.try_send(&mut tx, m(1)));
        assert!(ch.try_send(&mut tx, m(2)));
        assert_eq!(ch.try_recv_if(&mut rx, |m| m.id == 2), None);
        assert_eq!(rx, 0, "refusing consumes nothing");
        assert_eq!(ch.try_recv_if(&mut rx, |m| m.id == 1), Some(m(1)));
        assert_eq!(ch.try_recv_if(&mut rx, |m| m.id == 2), Some(m(2)));
        assert_eq!(ch.try_recv_if(&mut rx, |_| true), None, "nothing left");
    }

    #[test]
    fn laps_and_extreme_values_round_trip() {
        let ch = Channel::new(2);
        let (mut tx, mut rx) = (SendPos::default(), 0u32);
        for k in 0..10u32 {
            let m = Msg {
                id: if k % 2 == 0 { u32::MAX } else { 0 },
                vertex: if k % 3 == 0 {
                    (MAX_VERTICES - 1) as u32
                } else {
                    k
                },
            };
            assert_eq!(ch.try_recv(&mut rx), None, "nothing before the send");
            assert!(ch.try_send(&mut tx, m));
            assert_eq!(ch.try_recv(&mut rx), Some(m));
        }
    }
}
