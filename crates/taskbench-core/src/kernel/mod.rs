//! Task bodies (SPEC §2): what each task computes, and the FLOPs and bytes it is credited with.

mod compute;

use crate::graph::{random_uniform, KernelType};

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
        match self.kind {
            KernelType::ComputeBound => 128 * self.iterations + 64,
            KernelType::ComputeBound2 => 64 * self.iterations,
            KernelType::LoadImbalance => {
                128 * self.imbalanced_iterations(graph_index, t, point) + 64
            }
            _ => 0,
        }
    }

    /// Bytes credited to one task, as the reference counts them.
    pub fn bytes(&self, scratch_bytes: usize) -> i64 {
        match self.kind {
            KernelType::MemoryBound if self.samples > 0 => {
                scratch_bytes as i64 * self.iterations / self.samples
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
pub fn memory_bound(scratch: &mut [u8], iterations: i64, samples: i64, t: i64) {
    if samples <= 0 || iterations <= 0 {
        return;
    }
    let sample_bytes = scratch.len() / samples as usize;
    let half = sample_bytes / 2;
    if half == 0 {
        return;
    }
    let mut s = ((t.rem_euclid(samples) as i128 * iterations as i128) % samples as i128) as usize;
    for _ in 0..iterations {
        let sample = &mut scratch[s * sample_bytes..(s + 1) * sample_bytes];
        let (first, second) = sample.split_at_mut(half);
        second[..half].copy_from_slice(first);
        s += 1;
        if s == samples as usize {
            s = 0;
        }
    }
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
    fn memory_bound_keeps_the_magic_value() {
        let mut s = new_scratch(1024);
        memory_bound(&mut s, 100, 16, 7);
        for c in s.chunks_exact(8) {
            assert_eq!(u64::from_ne_bytes(c.try_into().unwrap()), SCRATCH_MAGIC);
        }
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
