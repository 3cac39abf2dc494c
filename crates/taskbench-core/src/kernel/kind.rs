//! Names of kernels, as the reference spells them on the command line.

use std::fmt;
use std::str::FromStr;

/// The work each task does (SPEC §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelType {
    /// No work.
    Empty,
    /// An integer recurrence, `-iter` rounds.
    BusyWait,
    /// Copies within the scratch buffer.
    MemoryBound,
    /// BLAS dgemm (not supported here).
    ComputeDgemm,
    /// BLAS daxpy (not supported here).
    MemoryDaxpy,
    /// Fused multiply-adds at the machine's peak.
    ComputeBound,
    /// A 32-element multiply-accumulate loop.
    ComputeBound2,
    /// Not implemented by the reference; rejected.
    IoBound,
    /// `compute_bound` with a per-task random iteration count.
    LoadImbalance,
}

impl KernelType {
    /// Every kernel, in the reference's order.
    pub const ALL: [KernelType; 9] = [
        Self::Empty,
        Self::BusyWait,
        Self::MemoryBound,
        Self::ComputeDgemm,
        Self::MemoryDaxpy,
        Self::ComputeBound,
        Self::ComputeBound2,
        Self::IoBound,
        Self::LoadImbalance,
    ];

    /// The name used by `-kernel`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::BusyWait => "busy_wait",
            Self::MemoryBound => "memory_bound",
            Self::ComputeDgemm => "compute_dgemm",
            Self::MemoryDaxpy => "memory_daxpy",
            Self::ComputeBound => "compute_bound",
            Self::ComputeBound2 => "compute_bound2",
            Self::IoBound => "io_bound",
            Self::LoadImbalance => "load_imbalance",
        }
    }

    /// Whether this build can run the kernel.
    pub fn is_supported(self) -> bool {
        !matches!(self, Self::ComputeDgemm | Self::MemoryDaxpy | Self::IoBound)
    }
}

impl fmt::Display for KernelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KernelType {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|t| t.name() == s).ok_or(())
    }
}
