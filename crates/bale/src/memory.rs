//! What fits in the memory this process may use (the smallest of the machine's available
//! memory, the address-space and data limits and the cgroup's limit: `tactor_cli::limits`):
//! the size checks every app and input makes before it allocates, so that a size too large
//! is one line naming it and the limit, not an allocation failure or the OOM killer.

use tactor_cli::limits::{self, mul};

/// Bytes of `entries_per_pe` `u64`-sized values on each of `pes` PEs, or an error naming
/// what does not fit.
///
/// ```
/// assert_eq!(bale::memory::table_bytes(10, 2, "a table of"), Ok(160));
/// assert!(bale::memory::table_bytes(u64::MAX, 2, "a table of").is_err());
/// ```
pub fn table_bytes(entries_per_pe: u64, pes: usize, what: &str) -> Result<u64, String> {
    let bytes = mul(mul(entries_per_pe, pes), 8u32);
    limits::check(
        bytes,
        &format!("{what} {entries_per_pe} per PE × {pes} PEs"),
    )?;
    u64::try_from(bytes)
        .map_err(|_| format!("{what} {entries_per_pe} per PE × {pes} PEs: too large"))
}

/// Bytes a matrix app may hold at its peak for a matrix of `rows` rows and `nonzeros`
/// nonzeros: the entries while the matrix is built, the compressed copies (input, its
/// distributed rows, the result, the serial reference) and the per-row arrays of the
/// elimination: 128 bytes a row and 48 a nonzero bound every app's measured peak (figures
/// in `docs/2026-11-26-hardening.md`).
///
/// ```
/// assert_eq!(bale::memory::matrix_bytes(10, 100), 10 * 128 + 100 * 48);
/// ```
pub fn matrix_bytes(rows: u64, nonzeros: u128) -> u128 {
    mul(rows, 128u32).saturating_add(nonzeros.saturating_mul(48))
}

/// Refuses a matrix of `rows` rows and `nonzeros` nonzeros that would not fit, naming `what`
/// it is (a flag or a file).
pub fn check_matrix(rows: u64, nonzeros: u128, what: &str) -> Result<(), String> {
    limits::check(
        matrix_bytes(rows, nonzeros),
        &format!("{what}: a matrix of {rows} rows and {nonzeros} nonzeros"),
    )
}

/// Refuses a selector whose aggregation buffers would not fit: `mailboxes` mailboxes over
/// `pes` PEs, `local` of them in this process (each PE buffers for every mailbox and PE).
pub fn check_selector(mailboxes: usize, pes: usize, local: usize) -> Result<(), String> {
    limits::check(
        tactor::actor::buffer_bytes(mailboxes, pes, local),
        &format!("the aggregation buffers of {pes} PEs ({local} in this process)"),
    )
}
