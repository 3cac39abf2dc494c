//! Names of dependence types, as the reference spells them on the command line.

use std::fmt;
use std::str::FromStr;

/// The dependence pattern between consecutive timesteps (SPEC §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DependenceType {
    /// No dependencies at all.
    Trivial,
    /// Each point depends on itself at the previous timestep.
    NoComm,
    /// Each point depends on its neighbours `i-1, i, i+1`.
    Stencil1D,
    /// `stencil_1d` with wrap-around at the edges.
    Stencil1DPeriodic,
    /// A diamond-shaped wavefront (dynamic programming).
    Dom,
    /// A binary tree that widens from one point.
    Tree,
    /// The butterfly of a fast Fourier transform.
    Fft,
    /// Every point depends on every point.
    AllToAll,
    /// A window of `radix` neighbours.
    Nearest,
    /// `radix` points spread across the width, shifted each timestep.
    Spread,
    /// A random subset of the `nearest` window.
    RandomNearest,
    /// Not implemented by the reference; always rejected.
    RandomSpread,
}

impl DependenceType {
    /// Every type, in the reference's order.
    pub const ALL: [DependenceType; 12] = [
        Self::Trivial,
        Self::NoComm,
        Self::Stencil1D,
        Self::Stencil1DPeriodic,
        Self::Dom,
        Self::Tree,
        Self::Fft,
        Self::AllToAll,
        Self::Nearest,
        Self::Spread,
        Self::RandomNearest,
        Self::RandomSpread,
    ];

    /// The name used by `-type`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Trivial => "trivial",
            Self::NoComm => "no_comm",
            Self::Stencil1D => "stencil_1d",
            Self::Stencil1DPeriodic => "stencil_1d_periodic",
            Self::Dom => "dom",
            Self::Tree => "tree",
            Self::Fft => "fft",
            Self::AllToAll => "all_to_all",
            Self::Nearest => "nearest",
            Self::Spread => "spread",
            Self::RandomNearest => "random_nearest",
            Self::RandomSpread => "random_spread",
        }
    }

    /// Whether `-period` applies to this type (its dependence sets cycle with a user period).
    /// The reference rejects `-period` for `random_spread` too.
    pub fn has_period(self) -> bool {
        matches!(self, Self::Spread | Self::RandomNearest)
    }
}

impl fmt::Display for DependenceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DependenceType {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL.into_iter().find(|t| t.name() == s).ok_or(())
    }
}
