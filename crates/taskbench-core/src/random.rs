//! The deterministic pseudo-random numbers Task Bench uses (`random_nearest`, `load_imbalance`).

use siphasher::sip::SipHasher24;
use std::hash::Hasher;

/// SipHash-2-4 key of the reference: the bytes `1, 2, ..., 15, 0`.
const KEY: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0];

/// A uniform number in `[0, 1)` drawn from a tuple of 64-bit integers.
///
/// This is the reference's `random_uniform`: SipHash-2-4 of the little-endian bytes of the
/// integers, read as an unsigned 64-bit integer and scaled by 2^-64. The same seed always
/// gives the same number, on every platform, so every system sees the same random graph.
///
/// ```
/// use taskbench_core::random::random_uniform;
/// let u = random_uniform(&[0, 0, 0]);
/// assert!((u - 0.93714206862367555).abs() < 1e-15);
/// ```
pub fn random_uniform(seed: &[i64]) -> f64 {
    let k0 = u64::from_le_bytes(KEY[..8].try_into().expect("8 bytes"));
    let k1 = u64::from_le_bytes(KEY[8..].try_into().expect("8 bytes"));
    let mut h = SipHasher24::new_with_keys(k0, k1);
    for v in seed {
        h.write(&v.to_le_bytes());
    }
    // 2^-64 as an exact power of two; the product rounds like the reference's double arithmetic.
    h.finish() as f64 * (1.0 / 18_446_744_073_709_551_616.0)
}
