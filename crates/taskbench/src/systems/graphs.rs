//! The graphs as the runtime's stepped programs read them ([`tactor::job::Pattern`]): graph
//! `g` is array `g`, a timestep a step, a point an item.

use std::ops::Range;
use std::sync::Arc;
use tactor::job::Pattern;
use taskbench_core::plan::Plan;

/// Every graph of a run, as one pattern.
#[derive(Clone)]
pub struct Graphs(pub Arc<Vec<Plan>>);

// SAFETY: a plan's dependencies are filtered to the points of the timestep before (none
// before timestep 0) and its reverse dependencies are their inverse (`taskbench_core`'s
// `tests/graphs.rs`, `reverse_dependencies_mirror_forward_ones`, over every type and many
// sizes); timesteps of one shape id have the same points and dependencies (`Plan::shape_id`).
unsafe impl Pattern for Graphs {
    fn live(&self, g: usize, t: i64) -> Range<usize> {
        self.0[g].points(t)
    }

    fn reads(&self, g: usize, t: i64, p: usize) -> impl Iterator<Item = usize> + '_ {
        self.0[g].dep_indices(t, p)
    }

    fn readers(&self, g: usize, t: i64, p: usize) -> impl Iterator<Item = usize> + '_ {
        self.0[g].rdep_indices(t, p)
    }

    fn class(&self, g: usize, t: i64) -> Option<u32> {
        Some(self.0[g].shape_id(t).unwrap_or(u32::MAX))
    }
}
