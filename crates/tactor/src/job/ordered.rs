//! Hashes for tables whose keys a program makes in order (value numbers, steps): neighbouring
//! keys land in neighbouring buckets, so a table of thousands of waiting keys, filled and
//! emptied roughly in order, touches a few cache lines at a time instead of one cold line per
//! key (with a scattering hash, every insert and removal missed the cache once thousands
//! waited). hashbrown compares the top 7 bits of a hash (its tags) before a key: those are
//! mixed, so keys that share a neighbourhood do not share a tag.

use super::exchange::Key;
use std::hash::{BuildHasher, Hasher};

/// Bits of a hash that pick its bucket; above them, the tags.
const LOW: u64 = (1 << 57) - 1;

/// A multiplier that spreads bits upwards (the golden ratio's, as Fibonacci hashing uses).
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

/// The hash of `u64` keys that a program numbers in order (`Spmd`'s values): a key's low
/// bits kept, its tags mixed.
#[derive(Clone, Copy, Default)]
pub(crate) struct Sequential;

/// [`Sequential`]'s hasher, for `u64` keys only.
pub(crate) struct SequentialHasher(u64);

impl BuildHasher for Sequential {
    type Hasher = SequentialHasher;

    fn build_hasher(&self) -> SequentialHasher {
        SequentialHasher(0)
    }
}

impl Hasher for SequentialHasher {
    fn finish(&self) -> u64 {
        let mixed = self.0.wrapping_mul(SPREAD);
        (self.0 & LOW) | (mixed & !LOW)
    }

    fn write(&mut self, bytes: &[u8]) {
        // A key other than a `u64`: hashed correctly, if without the locality.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

/// The hash of an [`Exchange`](super::Exchange)'s keys (stream, step, sender), for tables
/// that hold the messages of many steps (a program that issues every step before the first
/// arrives): a step's keys in one group of 16 buckets (hashbrown's probe), the next step's in
/// the next, each key of a step in a bucket of its own while a step has at most 16 (its
/// stream and sender pick which).
#[derive(Clone, Copy, Default)]
pub(crate) struct Stepped;

/// [`Stepped`]'s hasher, for [`Key`]s only: the step is the key's one `i64`.
#[derive(Default)]
pub(crate) struct SteppedHasher {
    step: u64,
    others: u64,
}

impl BuildHasher for Stepped {
    type Hasher = SteppedHasher;

    fn build_hasher(&self) -> SteppedHasher {
        SteppedHasher::default()
    }
}

impl Hasher for SteppedHasher {
    fn finish(&self) -> u64 {
        let others = self.others.wrapping_mul(SPREAD);
        let low = (self.step << 4) | (others >> 60);
        let tags = (self.step.wrapping_mul(SPREAD) ^ others).rotate_left(29);
        (low & LOW) | (tags & !LOW)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not a part of a key: hashed correctly, if without the locality.
        for &b in bytes {
            self.others = self.others.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u32(&mut self, stream: u32) {
        self.others = self.others.rotate_left(32) ^ u64::from(stream);
    }

    fn write_i64(&mut self, step: i64) {
        self.step = step as u64;
    }

    fn write_usize(&mut self, sender: usize) {
        self.others = self.others.rotate_left(16) ^ sender as u64;
    }
}

/// Checks at compile time that [`Stepped`] is built for the key it assumes.
const _: fn(Key) -> (u32, i64, usize) = |k| k;

// Not under Miri: no unsafe code here for it to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    /// The sequential hash keeps a key's low bits (neighbours in neighbouring buckets) and
    /// mixes the top ones (the tags the table compares first), so keys do not share one tag.
    #[test]
    fn the_sequential_hash_keeps_low_bits_and_mixes_the_tags() {
        let hash = |k: u64| Sequential.hash_one(k);
        let low = (1u64 << 57) - 1;
        assert!((0..1000u64).all(|k| hash(k) & low == k));
        let tags: HashSet<u64> = (0..1000u64).map(|k| hash(k) >> 57).collect();
        assert!(tags.len() > 100, "{} distinct tags", tags.len());
    }

    /// Consecutive steps land in consecutive groups of 16 buckets; the keys of one step (up to
    /// 16 streams and senders) spread over its group rather than share a bucket; the tags
    /// differ between neighbours.
    #[test]
    fn the_stepped_hash_keeps_steps_in_order_and_spreads_a_steps_keys() {
        let hash = |k: Key| Stepped.hash_one(k);
        let low = (1u64 << 57) - 1;
        for t in 0..1000i64 {
            assert_eq!((hash((0, t, 1)) & low) >> 4, t as u64, "step {t}'s group");
        }
        let one_step: HashSet<u64> = (0..4u32)
            .flat_map(|g| (0..4usize).map(move |s| (g, 7i64, s)))
            .map(|k| hash(k) & low)
            .collect();
        assert!(
            one_step.len() >= 8,
            "16 keys of a step in {} buckets",
            one_step.len()
        );
        let tags: HashSet<u64> = (0..1000i64).map(|t| hash((0, t, 1)) >> 57).collect();
        assert!(tags.len() > 100, "{} distinct tags", tags.len());
    }
}
