//! What fits in this machine's memory: the size checks every app and input makes before it
//! allocates, so that a size too large is one line naming it, not an allocation failure.

/// Bytes of `entries` `u64`-sized values, or an error naming what does not fit.
pub fn table_bytes(entries_per_pe: u64, pes: usize, what: &str) -> Result<u64, String> {
    entries_per_pe
        .checked_mul(pes as u64)
        .and_then(|n| n.checked_mul(8))
        .filter(|&b| b <= available_memory())
        .ok_or_else(|| {
            format!(
                "{what} {entries_per_pe} per PE × {pes} PEs does not fit in this machine's memory"
            )
        })
}

/// Bytes of memory available (MemAvailable), or unbounded where it cannot be read.
fn available_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kib| kib.saturating_mul(1024))
}
