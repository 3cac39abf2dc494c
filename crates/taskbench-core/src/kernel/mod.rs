//! Task bodies (SPEC §2): what each task computes, and the FLOPs and bytes it is credited with.

mod compute;
mod kind;

use crate::random::random_uniform;
pub use kind::KernelType;

pub use compute::{compute_bound, compute_bound2, uses_fma};

/// The 64-bit value scratch memory is filled with; every task checks it is still there.
pub const SCRATCH_MAGIC: u64 = 0x5C4A_7C8B;

/// A kernel and its parameters (`-kernel`, `-iter`, `-sample`, `-imbalance`).
///
/// ```
/// use taskbench_core::graph::KernelType;
/// use taskbench_core::kernel::Kernel;
/// let k = Kernel { kind: KernelType::ComputeBound, iterations: 10, ..Kernel::default() };
/// assert_eq!(k.flops(0, 0, 0), 128 * 10 + 64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kernel {
    /// Which kernel.
    pub kind: KernelType,
    /// `N`, the iteration count.
    pub iterations: i64,
    /// How many samples `memory_bound` divides the scratch buffer into.
    pub samples: i64,
    /// Spread of `load_imbalance` iteration counts, in `[0, 2]`.
    pub imbalance: f64,
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel {
            kind: KernelType::Empty,
            iterations: 0,
            samples: 16,
            imbalance: 0.0,
        }
    }
}

impl Kernel {
    /// The iteration count `load_imbalance` uses for task `(t, point)` of graph `graph_index`.
    pub fn imbalanced_iterations(&self, graph_index: i64, t: i64, point: i64) -> i64 {
        let u = random_uniform(&[graph_index, t, point]);
        ((1.0 + (u - 0.5) * self.imbalance) * self.iterations as f64).round() as i64
    }

    /// FLOPs credited to one task, as the reference counts them.
    pub fn flops(&self, graph_index: i64, t: i64, point: i64) -> i64 {
        // Saturating: an absurd -iter makes the totals refuse the graph instead of wrapping.
        let compute = |n: i64| n.saturating_mul(128).saturating_add(64);
        match self.kind {
            KernelType::ComputeBound => compute(self.iterations),
            KernelType::ComputeBound2 => self.iterations.saturating_mul(64),
            KernelType::LoadImbalance => compute(self.imbalanced_iterations(graph_index, t, point)),
            _ => 0,
        }
    }

    /// Bytes credited to one task, as the reference counts them.
    pub fn bytes(&self, scratch_bytes: usize) -> i64 {
        match self.kind {
            KernelType::MemoryBound if self.samples > 0 => {
                let b =
                    scratch_bytes as i128 * i128::from(self.iterations) / i128::from(self.samples);
                i64::try_from(b).unwrap_or(i64::MAX)
            }
            _ => 0,
        }
    }

    /// Runs the kernel for task `(t, point)` on its point's scratch buffer.
    ///
    /// Unsupported kernels are rejected when the graph is validated, so they never reach here.
    pub fn execute(&self, graph_index: i64, t: i64, point: i64, scratch: &mut [u8]) {
        match self.kind {
            KernelType::Empty => {}
            KernelType::BusyWait => {
                std::hint::black_box(busy_wait(self.iterations));
            }
            KernelType::ComputeBound => {
                std::hint::black_box(compute_bound(self.iterations));
            }
            KernelType::ComputeBound2 => {
                std::hint::black_box(compute_bound2(self.iterations));
            }
            KernelType::LoadImbalance => {
                let n = self.imbalanced_iterations(graph_index, t, point);
                std::hint::black_box(compute_bound(n));
            }
            KernelType::MemoryBound => memory_bound(scratch, self.iterations, self.samples, t),
            KernelType::ComputeDgemm | KernelType::MemoryDaxpy | KernelType::IoBound => {
                unreachable!("kernel {} is rejected by validation", self.kind)
            }
        }
    }
}

/// The reference's integer recurrence; returns the accumulator so it is not optimised away.
pub fn busy_wait(iterations: i64) -> i64 {
    let mut acc: i64 = 113;
    for _ in 0..iterations {
        acc = acc * 139 % 2_147_483_647;
    }
    acc
}

/// Walks `iterations` samples cyclically from sample `(t * iterations) mod samples`, copying
/// each sample's first half onto its second half. The working set stays the whole buffer
/// whatever the iteration count.
///
/// The buffer is handled in 8-byte words: it holds one 64-bit value repeated
/// ([`new_scratch`]), and a copy by whole words keeps every word intact, so validation can
/// check all of it ([`scratch_intact`]). The reference cuts samples at byte
/// `scratch / samples` and copies halves of any length, which tears words whenever a sample is
/// not a multiple of 16 bytes (it only ever checks the first word). Here sample `s` is words
/// `[s·W/samples, (s+1)·W/samples)` of the `W` words: the samples tile the whole buffer and
/// differ in size by at most one word. The bytes credited are the reference's
/// ([`Kernel::bytes`]).
pub fn memory_bound(scratch: &mut [u8], iterations: i64, samples: i64, t: i64) {
    if samples <= 0 || iterations <= 0 {
        return;
    }
    let words = (scratch.len() / 8) as u128;
    let n = samples as u128;
    // u128: s · W can exceed 64 bits for absurd sample counts.
    let edge = |s: u128| (s * words / n) as usize * 8;
    let mut s = (t.rem_euclid(samples) as u128 * iterations as u128) % n;
    for _ in 0..iterations {
        let (start, end) = (edge(s), edge(s + 1));
        let half = (end - start) / 16 * 8;
        scratch.copy_within(start..start + half, start + half);
        s += 1;
        if s == n {
            s = 0;
        }
    }
}

/// Whether every whole word of `scratch` still holds [`SCRATCH_MAGIC`].
///
/// ```
/// use taskbench_core::kernel::{memory_bound, new_scratch, scratch_intact};
/// let mut s = new_scratch(1000);
/// memory_bound(&mut s, 37, 16, 5);
/// assert!(scratch_intact(&s));
/// s[517] ^= 1;
/// assert!(!scratch_intact(&s));
/// ```
pub fn scratch_intact(scratch: &[u8]) -> bool {
    let magic = SCRATCH_MAGIC.to_ne_bytes();
    scratch.chunks_exact(8).all(|w| w == magic)
}

/// A scratch buffer of `bytes` filled with [`SCRATCH_MAGIC`].
pub fn new_scratch(bytes: usize) -> Vec<u8> {
    let mut v = vec![0u8; bytes];
    for chunk in v.chunks_exact_mut(8) {
        chunk.copy_from_slice(&SCRATCH_MAGIC.to_ne_bytes());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_bound_keeps_every_word_for_every_size() {
        for bytes in (8..=1024).step_by(8) {
            for samples in [1, 2, 3, 7, 16, 64, 200, 1 << 40] {
                for iterations in [1, 5, 33] {
                    let mut s = new_scratch(bytes);
                    memory_bound(&mut s, iterations, samples, 3);
                    assert!(scratch_intact(&s), "{bytes} B, {samples} samples");
                }
            }
        }
    }

    #[test]
    fn memory_bound_touches_the_whole_buffer() {
        // Each sample's second half is written: mark the buffer and see the marks replaced.
        let (bytes, samples) = (1000, 16);
        let mut s = vec![0u8; bytes];
        s.iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i % 251) as u8);
        let before = s.clone();
        memory_bound(&mut s, samples, samples, 0);
        let changed = s.iter().zip(&before).filter(|(a, b)| a != b).count();
        assert!(changed > bytes / 3, "{changed} of {bytes} bytes changed");
    }

    #[test]
    fn busy_wait_is_the_reference_recurrence() {
        assert_eq!(busy_wait(0), 113);
        assert_eq!(busy_wait(1), 113 * 139);
        // The modulus first bites on the fourth round: 113 * 139^4 = 42183017633.
        assert_eq!(busy_wait(4), 42_183_017_633 % 2_147_483_647);
        assert_eq!(busy_wait(4), 1_380_828_340);
    }

    #[test]
    fn load_imbalance_spreads_iterations_around_n() {
        let k = Kernel {
            kind: KernelType::LoadImbalance,
            iterations: 1000,
            imbalance: 0.5,
            ..Kernel::default()
        };
        for p in 0..50 {
            let n = k.imbalanced_iterations(0, 3, p);
            assert!((750..=1250).contains(&n), "{n}");
        }
        let flat = Kernel {
            imbalance: 0.0,
            ..k
        };
        assert_eq!(flat.imbalanced_iterations(0, 3, 4), 1000);
    }
}
