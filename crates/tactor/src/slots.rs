//! Byte slots shared between workers: each item of a step has a slot; its producer writes it
//! while workers on other threads read other slots. Which accesses may overlap is decided by
//! the program's synchronisation (events, a subgraph's edges, [`crate::job::Neighbours`]'
//! counters), so the accessors are `unsafe` and each call site states why its protocol
//! excludes a conflicting access.

use std::cell::UnsafeCell;

/// A row of equally sized byte slots, each on its own cache lines (no false sharing between
/// items written by different workers).
///
/// ```
/// use tactor::slots::Slots;
///
/// let row = Slots::new(4, 3);
/// // SAFETY: one thread here, and no slice outlives its statement.
/// unsafe { row.write(2).copy_from_slice(&[1, 2, 3]) };
/// assert_eq!(unsafe { row.read(2) }, &[1, 2, 3]);
/// assert_eq!(unsafe { row.read(1) }, &[0, 0, 0]);
/// assert_eq!(row.addr(1) % 64, 0);
/// ```
pub struct Slots {
    data: Box<[Block]>,
    count: usize,
    stride: usize,
    bytes: usize,
}

// SAFETY: `Slots` hands out references only through the `unsafe` accessors, whose callers
// guarantee that no slot is written while it is read or written elsewhere.
unsafe impl Sync for Slots {}

/// Slots start on cache-line boundaries, so two workers' slots never share a line.
const LINE: usize = 64;

#[repr(C, align(64))]
struct Block([UnsafeCell<u8>; LINE]);

impl Slots {
    /// `count` slots of `bytes` bytes each, zeroed.
    ///
    /// # Panics
    /// If the total size overflows `usize` or exceeds `isize::MAX` (a program sizes its
    /// memory before it asks). `ptr`'s safety argument rests on
    /// `count × stride` being the allocation's exact length, so it is computed checked.
    pub fn new(count: usize, bytes: usize) -> Slots {
        let size = bytes
            .checked_next_multiple_of(LINE)
            .and_then(|stride| stride.checked_mul(count).map(|total| (stride, total)))
            .filter(|&(_, total)| total <= isize::MAX as usize);
        let Some((stride, total)) = size else {
            panic!("{count} slots of {bytes} bytes do not fit in memory");
        };
        let data = (0..total / LINE)
            .map(|_| Block(std::array::from_fn(|_| UnsafeCell::new(0))))
            .collect();
        Slots {
            data,
            count,
            stride,
            bytes,
        }
    }

    /// `count` slots holding a copy of `init` each (scratch rows start this way).
    pub fn filled(count: usize, init: &[u8]) -> Slots {
        let s = Slots::new(count, init.len());
        for i in 0..count {
            // SAFETY: `s` is not shared yet; this thread is the only one touching it.
            unsafe { s.write(i).copy_from_slice(init) };
        }
        s
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no slots.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn ptr(&self, i: usize) -> *mut u8 {
        assert!(i < self.len(), "slot {i} of {}", self.len());
        if self.bytes == 0 {
            // Zero-byte slots own no memory; an empty slice needs only an aligned pointer.
            return std::ptr::NonNull::dangling().as_ptr();
        }
        // `Block` is `repr(C)` over `UnsafeCell<u8>`s, which have the layout of `u8`: the
        // blocks form one contiguous byte array, and writes through `UnsafeCell` are permitted.
        let base: *const Block = self.data.as_ptr();
        // SAFETY: `i < count`, so `i * stride < count * stride`, which `new` computed without
        // overflow as the length of the allocation in bytes.
        UnsafeCell::raw_get(unsafe { base.cast::<UnsafeCell<u8>>().add(i * self.stride) })
    }

    /// The address of slot `i`, for hints that read nothing ([`crate::hint::fetch_at`]).
    pub fn addr(&self, i: usize) -> usize {
        self.ptr(i) as usize
    }

    /// Reads slot `i`.
    ///
    /// # Safety
    /// No thread may write slot `i` while the returned slice is alive.
    pub unsafe fn read(&self, i: usize) -> &[u8] {
        // SAFETY: the slot is `bytes` long inside the allocation, and the caller excludes
        // concurrent writers.
        unsafe { std::slice::from_raw_parts(self.ptr(i), self.bytes) }
    }

    /// Writes slot `i`.
    ///
    /// # Safety
    /// No other thread may read or write slot `i` while the returned slice is alive.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn write(&self, i: usize) -> &mut [u8] {
        // SAFETY: as for `read`, and the caller guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(i), self.bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_separate_and_line_aligned_in_stride() {
        let s = Slots::new(3, 20);
        assert_eq!(s.len(), 3);
        // SAFETY: single-threaded test; no slice outlives its statement.
        unsafe {
            s.write(1).fill(7);
            assert_eq!(s.read(0), &[0u8; 20][..]);
            assert_eq!(s.read(1), &[7u8; 20][..]);
            assert_eq!(s.read(2), &[0u8; 20][..]);
        }
        assert_eq!(s.stride, 64);
        assert_eq!(s.ptr(1) as usize % 64, 0);
    }

    #[test]
    #[should_panic(expected = "do not fit in memory")]
    fn sizes_that_overflow_are_refused_not_wrapped() {
        // 2^60 slots of 64 bytes: 2^66 bytes would wrap to 0 unchecked.
        let _ = Slots::new(1 << 60, 64);
    }

    #[test]
    #[should_panic(expected = "do not fit in memory")]
    fn a_slot_size_that_overflows_when_rounded_is_refused() {
        let _ = Slots::new(1, usize::MAX - 3);
    }

    #[test]
    fn zero_byte_slots_are_empty_slices() {
        let s = Slots::new(2, 0);
        assert_eq!(s.len(), 2);
        // SAFETY: single-threaded test.
        unsafe {
            assert!(s.write(1).is_empty());
            assert!(s.read(0).is_empty());
        }
    }
}
