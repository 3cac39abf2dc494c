//! A single-producer single-consumer ring of messages in memory that two processes share: the
//! node-local path of a backend (see `mpi::node`), where a message costs a copy in and a copy
//! out, and the receiver finds it by reading the line the message is in.
//!
//! The region starts with the consumer's counter (bytes consumed; it only grows) on a line of
//! its own, followed by the data. A record is an 8-byte header (payload length, port, kind) and
//! the payload, padded to 8 bytes. Records never wrap: one that does not fit before the end of
//! the data is preceded by a padding record that fills the rest, and starts at 0.
//!
//! Every byte of the data that holds no unread record is zero: the region starts zeroed, and
//! the consumer zeroes each record it took before it gives its bytes back. So a nonzero header
//! (every header is: its kind is never 0) is a record, and the consumer polls the header of
//! the next record itself — one cache line that brings the payload with it for small messages
//! — rather than a counter and then the record. The producer writes the payload, then
//! publishes the header with a release store; the consumer acquires the header, copies the
//! payload out, zeroes the record and publishes its counter with a release store, which the
//! producer reads (acquire) only when the ring looks full.
//!
//! The other process may be faulty, so nothing read from the region is trusted for memory
//! safety: every record is checked to lie inside the data before it is read.
//!
//! ```
//! use tactor_comm::ring::{region_bytes, Consumer, Line, Producer};
//!
//! // Any zeroed, 64-byte aligned memory will do; a backend uses memory two processes map.
//! let mut mem = vec![Line::default(); region_bytes(1024) / 64];
//! let at = mem.as_mut_ptr().cast::<u8>();
//! // SAFETY: `mem` is zeroed, aligned, large enough and outlives both ends.
//! let (mut tx, mut rx) = unsafe { (Producer::new(at, 1024), Consumer::new(at, 1024)) };
//! assert!(tx.push(7, b"hello"));
//! assert_eq!(rx.pop(), Some((7, b"hello".to_vec())));
//! assert_eq!(rx.pop(), None);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

/// A zeroed 64-byte line, 64-byte aligned: a vector of them is memory a ring can live in
/// inside one process.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
pub struct Line(pub [u8; 64]);

impl Default for Line {
    fn default() -> Line {
        Line([0; 64])
    }
}

/// Bytes before the data: the consumer's counter, on a 64-byte line of its own.
pub const CONTROL: usize = 64;
const RECORD_HEADER: usize = 8;
const KIND_MESSAGE: u16 = 1;
const KIND_PADDING: u16 = 2;

/// The bytes of a ring whose data has `capacity` bytes.
pub const fn region_bytes(capacity: usize) -> usize {
    CONTROL + capacity
}

/// The largest payload a ring of `capacity` bytes takes: a quarter of it, so that a record and
/// the padding before it always fit in an empty ring.
pub const fn max_payload(capacity: usize) -> usize {
    capacity / 4 - RECORD_HEADER
}

fn record_bytes(len: usize) -> usize {
    RECORD_HEADER + len.next_multiple_of(8)
}

#[derive(Clone, Copy)]
struct Region {
    consumed: *const AtomicU64,
    data: *mut u8,
    capacity: u64,
}

impl Region {
    /// # Safety
    ///
    /// As for [`Producer::new`].
    unsafe fn new(region: *mut u8, capacity: usize) -> Region {
        assert!(
            capacity.is_power_of_two() && capacity >= 64,
            "a ring's capacity must be a power of two of at least 64 bytes, not {capacity}"
        );
        assert_eq!(region as usize % 64, 0, "a ring must be 64-byte aligned");
        Region {
            consumed: region.cast(),
            // SAFETY: the region has CONTROL + capacity bytes (the caller's promise).
            data: unsafe { region.add(CONTROL) },
            capacity: capacity as u64,
        }
    }

    fn consumed(&self) -> &AtomicU64 {
        // SAFETY: 8-aligned (the region is 64-aligned) and inside the region, which outlives
        // `self`; only ever accessed atomically.
        unsafe { &*self.consumed }
    }

    /// `n` modulo the capacity (a power of two: a mask, not a division on the polling path).
    #[inline]
    fn wrap(&self, n: u64) -> u64 {
        n & (self.capacity - 1)
    }

    /// The header word at `at`.
    ///
    /// # Safety
    ///
    /// `at` is a multiple of 8 below the capacity.
    unsafe fn header(&self, at: u64) -> &AtomicU64 {
        // SAFETY: inside the data and 8-aligned (the caller's promise; the data is
        // 64-aligned); header words are only ever accessed atomically.
        unsafe { &*self.data.add(at as usize).cast::<AtomicU64>() }
    }
}

/// The writing end of a ring.
pub struct Producer {
    region: Region,
    written: u64,
    consumed_seen: u64,
}

// SAFETY: the producer is the region's only writer of records and of the written counter; it
// may move to another thread (it is used under a lock), and the region outlives it.
unsafe impl Send for Producer {}

impl Producer {
    /// The writing end of the ring at `region`, which the other end has zeroed (an empty ring).
    ///
    /// # Safety
    ///
    /// `region` is 64-byte aligned, holds [`region_bytes`]`(capacity)` bytes that stay mapped
    /// while the producer lives, and at most one producer and one consumer use it.
    pub unsafe fn new(region: *mut u8, capacity: usize) -> Producer {
        // SAFETY: passed on.
        let region = unsafe { Region::new(region, capacity) };
        let consumed_seen = region.consumed().load(Ordering::Acquire);
        let written = consumed_seen;
        Producer {
            region,
            written,
            consumed_seen,
        }
    }

    /// Appends a message; `false` when the ring has no room for it now (nothing written).
    ///
    /// # Panics
    ///
    /// When `payload` is longer than [`max_payload`] (it would never fit).
    pub fn push(&mut self, port: u16, payload: &[u8]) -> bool {
        self.push_parts(port, payload.len(), &mut std::iter::once(payload))
    }

    /// Appends a message of `len` bytes made of `parts` back to back, copied straight into the
    /// ring (no buffer to build first); `false` when the ring has no room for it now
    /// (nothing written, `parts` not touched).
    ///
    /// # Panics
    ///
    /// When `len` is longer than [`max_payload`], or the parts do not add up to `len` bytes
    /// (then nothing is published).
    ///
    /// ```
    /// use tactor_comm::ring::{region_bytes, Consumer, Line, Producer};
    ///
    /// let mut mem = vec![Line::default(); region_bytes(256) / 64];
    /// let at = mem.as_mut_ptr().cast::<u8>();
    /// // SAFETY: `mem` is zeroed, aligned, large enough and outlives both ends.
    /// let (mut tx, mut rx) = unsafe { (Producer::new(at, 256), Consumer::new(at, 256)) };
    /// let parts: [&[u8]; 2] = [b"head", b"tail"];
    /// assert!(tx.push_parts(3, 8, &mut parts.into_iter()));
    /// assert_eq!(rx.pop(), Some((3, b"headtail".to_vec())));
    /// ```
    pub fn push_parts(
        &mut self,
        port: u16,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
    ) -> bool {
        let cap = self.region.capacity;
        assert!(
            len <= max_payload(cap as usize),
            "a ring of {cap} bytes cannot take a message of {len} bytes"
        );
        let total = record_bytes(len) as u64;
        let offset = self.region.wrap(self.written);
        let to_end = cap - offset;
        let padding = if to_end < total { to_end } else { 0 };
        let need = padding + total;
        if self.written + need - self.consumed_seen > cap {
            self.consumed_seen = self.region.consumed().load(Ordering::Acquire);
            if self.written + need - self.consumed_seen > cap {
                return false;
            }
        }
        let at = if padding > 0 { 0 } else { offset };
        // SAFETY (for the pointer arithmetic below): the record fits between `at` and the end
        // of the data (`total` ≤ `to_end`, or it starts at 0 and `total` ≤ cap / 4), in bytes
        // the consumer has released (zero, so the consumer, polling only `offset`, does not
        // look at them yet); every copy stays inside the record's `len` payload bytes.
        let payload = unsafe { self.region.data.add(at as usize + RECORD_HEADER) };
        let mut filled = 0;
        let mut overrun = false;
        for part in parts {
            let end = filled + part.len();
            if end > len {
                overrun = true;
                break;
            }
            // SAFETY: bytes `filled..end` of the payload, `end` ≤ `len` (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), payload.add(filled), part.len())
            };
            filled = end;
        }
        if overrun || filled != len {
            // Released bytes must stay zero (see the module docs): the next record lands here.
            // SAFETY: the `filled` ≤ `len` bytes just written.
            unsafe { std::ptr::write_bytes(payload, 0, filled) };
            panic!("a message of {len} bytes was given parts that do not add up to it");
        }
        let h = header(len as u32, port, KIND_MESSAGE);
        // SAFETY: `at` and `offset` are multiples of 8 below the capacity.
        unsafe {
            if padding == 0 {
                self.region.header(at).store(h, Ordering::Release);
            } else {
                self.region.header(at).store(h, Ordering::Relaxed);
                // Published after the message behind it, so the consumer, polling `offset`,
                // sees both or neither.
                let pad = header(padding as u32 - RECORD_HEADER as u32, 0, KIND_PADDING);
                self.region.header(offset).store(pad, Ordering::Release);
            }
        }
        self.written += need;
        true
    }
}

fn header(len: u32, port: u16, kind: u16) -> u64 {
    (len as u64) | ((port as u64) << 32) | ((kind as u64) << 48)
}

/// Whether a ring's next record has been published, read from any thread: the consumer's
/// published counter says where the next record starts, and a nonzero header there is one.
/// A hint, not a promise: a pop racing with the look may already have taken the record, or
/// the counter read may be stale (then the look says "nothing" until the next look).
///
/// ```
/// use tactor_comm::ring::{region_bytes, Consumer, Line, Producer};
///
/// let mut mem = vec![Line::default(); region_bytes(256) / 64];
/// let at = mem.as_mut_ptr().cast::<u8>();
/// // SAFETY: `mem` is zeroed, aligned, large enough and outlives both ends and the probe.
/// let (mut tx, mut rx) = unsafe { (Producer::new(at, 256), Consumer::new(at, 256)) };
/// let probe = rx.probe();
/// assert!(!probe.ready());
/// assert!(tx.push(1, b"x"));
/// assert!(probe.ready());
/// rx.pop();
/// assert!(!probe.ready());
/// ```
pub struct Probe {
    region: Region,
}

// SAFETY: a probe only loads the region's atomic words (the counter and a header, at an
// offset masked into the data and aligned to 8), which the region's owner keeps mapped while
// probes live (the promise made to `Consumer::new`).
unsafe impl Send for Probe {}
// SAFETY: as for `Send`: shared probes only load atomics.
unsafe impl Sync for Probe {}

impl Probe {
    /// Whether a record (a message or padding) waits at the consumer's published position.
    #[inline]
    pub fn ready(&self) -> bool {
        // Masked and aligned whatever the counter holds (the other process may be faulty).
        let at = self
            .region
            .wrap(self.region.consumed().load(Ordering::Acquire))
            & !7;
        // SAFETY: `at` is a multiple of 8 below the capacity.
        unsafe { self.region.header(at) }.load(Ordering::Acquire) != 0
    }
}

/// The reading end of a ring.
pub struct Consumer {
    region: Region,
    consumed: u64,
}

// SAFETY: as for `Producer`, for the consumed counter and reading records.
unsafe impl Send for Consumer {}

impl Consumer {
    /// The reading end of the ring at `region`, which the caller zeroed before any producer
    /// could use it.
    ///
    /// # Safety
    ///
    /// As for [`Producer::new`].
    pub unsafe fn new(region: *mut u8, capacity: usize) -> Consumer {
        // SAFETY: passed on.
        let region = unsafe { Region::new(region, capacity) };
        let consumed = region.consumed().load(Ordering::Relaxed);
        Consumer { region, consumed }
    }

    /// A handle that tells, without this end, whether a message may be waiting: a progress
    /// loop looks through it first, so that an empty ring costs two loads and no lock.
    pub fn probe(&self) -> Probe {
        Probe {
            region: self.region,
        }
    }

    /// Offers the oldest message to `want` in place (its port and payload, no copy made): if
    /// `want` returns `true` the message is taken, otherwise it stays the oldest. `None` when
    /// the ring holds no message; `Some(taken)` otherwise.
    ///
    /// # Panics
    ///
    /// As [`Consumer::pop`].
    ///
    /// ```
    /// use tactor_comm::ring::{region_bytes, Consumer, Line, Producer};
    ///
    /// let mut mem = vec![Line::default(); region_bytes(256) / 64];
    /// let at = mem.as_mut_ptr().cast::<u8>();
    /// // SAFETY: `mem` is zeroed, aligned, large enough and outlives both ends.
    /// let (mut tx, mut rx) = unsafe { (Producer::new(at, 256), Consumer::new(at, 256)) };
    /// assert_eq!(rx.take_with(&mut |_, _| true), None);
    /// assert!(tx.push(4, b"abc"));
    /// assert_eq!(rx.take_with(&mut |_, data| data == b"xyz"), Some(false));
    /// assert_eq!(rx.take_with(&mut |port, data| port == 4 && data == b"abc"), Some(true));
    /// assert_eq!(rx.pop(), None);
    /// ```
    pub fn take_with(&mut self, want: &mut dyn FnMut(u16, &[u8]) -> bool) -> Option<bool> {
        let mut taken = None;
        self.next(&mut |port, data| {
            let t = want(port, data);
            taken = Some(t);
            t
        });
        taken
    }

    /// Takes the oldest message: its port and a copy of its payload.
    ///
    /// # Panics
    ///
    /// When the ring holds something the producer cannot have written (the other process
    /// wrote outside the protocol): a record that overruns the data or the written count.
    pub fn pop(&mut self) -> Option<(u16, Vec<u8>)> {
        let mut out = None;
        self.next(&mut |port, data| {
            out = Some((port, data.to_vec()));
            true
        });
        out
    }

    /// Skips padding up to the oldest message and offers it to `f`, which takes it by
    /// returning `true` (its bytes are then zeroed and given back to the producer).
    fn next(&mut self, f: &mut dyn FnMut(u16, &[u8]) -> bool) {
        let cap = self.region.capacity;
        loop {
            let at = self.region.wrap(self.consumed);
            // SAFETY: `at` is a multiple of 8 below cap: records are 8-padded and the counter
            // only grows by them.
            let word = unsafe { self.region.header(at) };
            let h = word.load(Ordering::Acquire);
            if h == 0 {
                return;
            }
            let (len, port, kind) = (h as u32 as u64, (h >> 32) as u16, (h >> 48) as u16);
            let total = RECORD_HEADER as u64 + len.next_multiple_of(8);
            assert!(
                (kind == KIND_MESSAGE || kind == KIND_PADDING) && total <= cap - at,
                "a shared-memory ring holds a record it cannot read (header {h:#x} at {at} of {cap}): the other process broke the protocol"
            );
            if kind == KIND_MESSAGE {
                // SAFETY: the payload lies inside the data (checked above), was written before
                // the header's release store that the load above acquired, and is not written
                // again until the consumed counter passes it below.
                let data = unsafe {
                    std::slice::from_raw_parts(
                        self.region.data.add(at as usize + RECORD_HEADER),
                        len as usize,
                    )
                };
                if !f(port, data) {
                    return;
                }
            }
            // Zero again before the bytes go back to the producer (see the module docs). The
            // header last, with a plain store: the release below orders all of it.
            // SAFETY: the record's bytes, inside the data (checked above), the consumer's
            // until it publishes the counter; `data` is not used after this.
            unsafe {
                std::ptr::write_bytes(
                    self.region.data.add(at as usize + RECORD_HEADER),
                    0,
                    total as usize - RECORD_HEADER,
                )
            };
            word.store(0, Ordering::Relaxed);
            self.consumed += total;
            self.region
                .consumed()
                .store(self.consumed, Ordering::Release);
            if kind == KIND_MESSAGE {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zeroed, 64-aligned region for a ring of `capacity` bytes.
    fn region(capacity: usize) -> Vec<Line> {
        vec![Line::default(); region_bytes(capacity) / 64]
    }

    fn ends(mem: &mut [Line], capacity: usize) -> (Producer, Consumer) {
        let p = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `mem` is zeroed, 64-aligned, large enough, and outlives both ends in each
        // test; one producer and one consumer.
        unsafe { (Producer::new(p, capacity), Consumer::new(p, capacity)) }
    }

    #[test]
    fn messages_come_out_in_order_with_their_ports_across_the_wrap() {
        let mut mem = region(256);
        let (mut tx, mut rx) = ends(&mut mem, 256);
        for round in 0..200u32 {
            let len = (round as usize * 7) % (max_payload(256) + 1);
            let payload: Vec<u8> = (0..len).map(|i| (i as u32 + round) as u8).collect();
            assert!(tx.push(round as u16, &payload));
            assert_eq!(rx.pop(), Some((round as u16, payload)));
            assert_eq!(rx.pop(), None);
        }
    }

    /// A message offered in place and declined stays the oldest, across padding and the wrap;
    /// one taken in place is gone, and its bytes are zero again for the producer.
    #[test]
    fn a_declined_message_stays_and_a_taken_one_is_released() {
        let mut mem = region(256);
        let (mut tx, mut rx) = ends(&mut mem, 256);
        for round in 0..100u32 {
            let len = (round as usize * 11) % (max_payload(256) + 1);
            let payload: Vec<u8> = (0..len).map(|i| (i as u32 ^ round) as u8).collect();
            assert!(tx.push(round as u16, &payload));
            assert_eq!(rx.take_with(&mut |_, _| false), Some(false));
            assert_eq!(rx.take_with(&mut |_, _| false), Some(false));
            if round % 2 == 0 {
                let mut seen = None;
                let taken = rx.take_with(&mut |port, data| {
                    seen = Some((port, data.to_vec()));
                    true
                });
                assert_eq!(taken, Some(true));
                assert_eq!(seen, Some((round as u16, payload)));
            } else {
                assert_eq!(rx.pop(), Some((round as u16, payload)));
            }
            assert_eq!(rx.take_with(&mut |_, _| true), None);
        }
        // Everything was given back, zeroed: the producer fills the ring again (all of it but
        // the padding before the wrap), and exactly what it wrote comes out.
        let mut pushed = 0;
        while tx.push(1, &[7; 56]) {
            pushed += 1;
        }
        assert!(pushed >= 256 / 64 - 1, "only {pushed} records fit");
        for _ in 0..pushed {
            assert_eq!(
                rx.take_with(&mut |port, data| port == 1 && data == [7; 56]),
                Some(true)
            );
        }
        assert_eq!(rx.take_with(&mut |_, _| true), None);
    }

    #[test]
    fn a_full_ring_refuses_until_the_consumer_frees_room() {
        let mut mem = region(256);
        let (mut tx, mut rx) = ends(&mut mem, 256);
        let mut pushed = 0u16;
        while tx.push(pushed, &[pushed as u8; 24]) {
            pushed += 1;
        }
        assert_eq!(pushed, 256 / 32, "each record takes 8 + 24 bytes");
        assert_eq!(rx.pop(), Some((0, vec![0; 24])));
        assert!(tx.push(pushed, &[pushed as u8; 24]));
        assert!(!tx.push(99, &[0; 24]));
        for i in 1..=pushed {
            assert_eq!(rx.pop(), Some((i, vec![i as u8; 24])));
        }
        assert_eq!(rx.pop(), None);
    }

    /// Parts that overrun or fall short of the length given panic before anything is
    /// published, and leave the ring's released bytes zero: what comes next reads intact.
    #[test]
    fn parts_that_do_not_add_up_are_refused_and_leave_the_ring_clean() {
        let mut mem = region(256);
        let (mut tx, mut rx) = ends(&mut mem, 256);
        for parts in [&[&[7u8; 20][..], &[7; 20]][..], &[&[7; 8][..]]] {
            let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                tx.push_parts(1, 24, &mut parts.iter().copied())
            }));
            assert!(refused.is_err(), "{} parts accepted", parts.len());
            assert_eq!(rx.pop(), None);
        }
        let parts: [&[u8]; 3] = [&[1, 2], &[], &[3]];
        assert!(tx.push_parts(4, 3, &mut parts.into_iter()));
        assert!(tx.push(5, &[9; 16]));
        assert_eq!(rx.pop(), Some((4, vec![1, 2, 3])));
        assert_eq!(rx.pop(), Some((5, vec![9; 16])));
        assert_eq!(rx.pop(), None);
    }

    #[test]
    #[should_panic(expected = "cannot take a message")]
    fn a_message_above_the_limit_is_refused_loudly() {
        let mut mem = region(256);
        let (mut tx, _rx) = ends(&mut mem, 256);
        tx.push(0, &[0; max_payload(256) + 1]);
    }

    #[test]
    #[should_panic(expected = "broke the protocol")]
    fn a_record_overrunning_the_data_is_caught_before_it_is_read() {
        let mut mem = region(256);
        let (mut tx, mut rx) = ends(&mut mem, 256);
        assert!(tx.push(1, &[1; 8]));
        // What a faulty peer could leave: a header claiming more bytes than the data has.
        // SAFETY: the first record's header, inside the region; nothing else uses it now.
        unsafe {
            rx.region
                .header(0)
                .store(header(4096, 0, KIND_MESSAGE), Ordering::Relaxed)
        };
        rx.pop();
    }

    /// Two threads: every message arrives once, in order, intact, whatever the interleaving
    /// of pushes, refusals and pops (under Miri its data-race detector also checks that the
    /// counters' release/acquire pairs order the records' plain bytes).
    #[test]
    fn a_stream_between_two_threads_loses_nothing() {
        let n: u32 = if cfg!(miri) { 150 } else { 200_000 };
        let capacity = 512;
        let mut mem = region(capacity);
        let (mut tx, mut rx) = ends(&mut mem, capacity);
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 0..n {
                    let len = (i as usize * 13) % 100;
                    let payload: Vec<u8> = (0..len).map(|k| (k as u32 ^ i) as u8).collect();
                    while !tx.push(i as u16, &payload) {
                        std::hint::spin_loop();
                    }
                }
            });
            let probe = rx.probe();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            for i in 0..n {
                let (port, data) = loop {
                    // Every other message is looked for through the probe first, as a lane's
                    // progress does: a probe that missed a record would stall here.
                    if i % 2 == 1 || probe.ready() {
                        if let Some(m) = rx.pop() {
                            break m;
                        }
                    }
                    assert!(
                        cfg!(miri) || std::time::Instant::now() < deadline,
                        "message {i} never seen"
                    );
                    std::hint::spin_loop();
                };
                let len = (i as usize * 13) % 100;
                assert_eq!(port, i as u16);
                assert_eq!(data.len(), len, "message {i}");
                assert!(data
                    .iter()
                    .enumerate()
                    .all(|(k, &b)| b == (k as u32 ^ i) as u8));
            }
            assert_eq!(rx.pop(), None);
        });
    }
}
