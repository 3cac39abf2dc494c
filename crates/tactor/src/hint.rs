//! Cache hints for data handed from one core to another.

/// Hints that another core reads `value` next: its cache lines are moved from this core's
/// private caches toward the shared last-level cache, so that the reader's miss is served
/// there instead of by a snoop into this core (x86 `CLDEMOTE`). It changes no value and no
/// ordering; where the instruction does not exist it does nothing.
///
/// Call it after the last write of data another worker is about to read, e.g. a task's output.
///
/// ```
/// let out = [1u64, 2, 3];
/// tactor::hint::share(&out);
/// assert_eq!(out, [1, 2, 3]);
/// ```
#[inline]
pub fn share<T: ?Sized>(value: &T) {
    each_line(value, demote);
}

/// Hints that this core writes `value` soon: its cache lines are fetched for writing now
/// (x86 `PREFETCHW`), so that taking them from the cores that read them last overlaps with
/// the work before the write instead of delaying the stores behind it. It changes no value
/// and no ordering; where the instruction does not exist it does nothing.
///
/// Call it before the work that ends in writing data another worker read earlier, e.g. a
/// task's output slot that is reused.
///
/// Only the first 4 KiB of a larger value are hinted.
///
/// ```
/// let mut out = [0u64; 3];
/// tactor::hint::claim(&out);
/// out[1] = 2;
/// assert_eq!(out, [0, 2, 0]);
/// ```
#[inline]
pub fn claim<T: ?Sized>(value: &T) {
    each_line(value, prefetch_write);
}

/// Hints that this core reads the line holding `value` soon (x86 `PREFETCHT0`), so that its
/// miss overlaps with the work before the read. Only the first line is hinted: this is for
/// one element of a large table, touched at random. It changes no value and no ordering;
/// where the instruction does not exist it does nothing.
///
/// ```
/// let table = vec![7u64; 1 << 16];
/// tactor::hint::fetch(&table[12345]);
/// assert_eq!(table[12345], 7);
/// ```
#[inline(always)]
pub fn fetch<T>(value: &T) {
    fetch_at(value as *const T as usize);
}

/// [`fetch`] of the line at address `addr`, for data this thread holds no reference to
/// (another thread may be writing it): a prefetch reads nothing the program can observe.
///
/// ```
/// let table = vec![7u64; 64];
/// tactor::hint::fetch_at(&table[9] as *const u64 as usize);
/// assert_eq!(table[9], 7);
/// ```
#[inline(always)]
pub fn fetch_at(addr: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: PREFETCHT0 is a hint: it changes no memory the program can observe and raises
    // no fault on any address (SSE, present on every x86-64 processor).
    unsafe {
        core::arch::asm!("prefetcht0 [{0}]", in(reg) addr, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = addr;
}

/// [`claim`] of the line at address `addr` (see [`fetch_at`]).
#[inline(always)]
pub(crate) fn claim_at(addr: usize) {
    prefetch_write(addr as *const u8);
}

const LINE: usize = 64;

/// Hints cover at most this many lines (4 KiB): beyond that a hint only evicts or fetches
/// what the hardware prefetchers handle anyway, and a hint must never cost time in
/// proportion to a large value.
const MAX_LINES: usize = 64;

/// [`claim`] of the `len` bytes at address `addr` (see [`fetch_at`]): for data this thread
/// holds no reference to.
#[inline(always)]
pub(crate) fn claim_range_at(addr: usize, len: usize) {
    each_line_at(addr, len, prefetch_write);
}

#[inline(always)]
fn each_line<T: ?Sized>(value: &T, f: impl Fn(*const u8)) {
    each_line_at(
        value as *const T as *const u8 as usize,
        std::mem::size_of_val(value),
        f,
    );
}

/// Calls `f` on each line of the `len` bytes at `start` (at most `MAX_LINES` of them), which
/// lie inside the address space.
#[inline(always)]
fn each_line_at(start: usize, len: usize, f: impl Fn(*const u8)) {
    let len = len.min(MAX_LINES * LINE);
    if len == 0 {
        return;
    }
    // The bytes lie inside the address space, so `start + len` does not overflow.
    let end = start + len;
    let mut line = start & !(LINE - 1);
    while line < end {
        f(line as *const u8);
        line += LINE;
    }
}

#[inline(always)]
fn prefetch_write(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: PREFETCHW is a hint: it changes no memory the program can observe and raises
    // no fault on any address; processors without it execute it as a NOP (0F 0D /1).
    unsafe {
        core::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

#[inline(always)]
fn demote(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: CLDEMOTE is a hint: it neither reads nor writes memory as far as the program
    // can observe, raises no fault on any address, and is encoded in the reserved-NOP space
    // (0F 1C /0), so processors without it execute a NOP.
    unsafe {
        core::arch::asm!("cldemote [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}
