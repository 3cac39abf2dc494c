//! Memory a run would need, estimated before anything is allocated, and what the machine has.
//! Every size is computed in `u128` with saturating arithmetic, so an absurd flag gives an
//! absurd estimate and a clear refusal instead of a wrapped size or an allocation abort.

use crate::graph::TaskGraph;

pub use tactor_cli::limits::{human, mul};

/// Bytes this process can still allocate: the smallest of the machine's available memory,
/// its address-space and data limits and its cgroup's limit (`tactor_cli::limits`). `None`
/// where none can be read (then no run is refused for memory).
///
/// ```
/// if let Some(bytes) = taskbench_core::memory::available() {
///     assert!(bytes > 0);
/// }
/// ```
pub fn available() -> Option<u64> {
    tactor_cli::limits::Room::now().bytes
}

impl TaskGraph {
    /// An upper bound on the bytes that checking and planning this graph take: the shape of
    /// every timestep (4 bytes each), and per distinct shape the dependency lists both ways
    /// (8 bytes an entry) and their index arrays; plus the graph check's per-point lists.
    pub fn plan_bytes(&self) -> u128 {
        let w = self.max_width.max(0);
        let (deps, rdeps) = (self.max_deps_per_point(), self.max_rdeps_per_point());
        let mut total = mul(self.timesteps.max(0), 4u32);
        for c in self.timestep_classes() {
            let (now, before) = (
                self.width_at_timestep(c.first).max(0),
                self.width_at_timestep(c.first - 1).max(0),
            );
            total = total
                .saturating_add(mul(now.saturating_add(before).saturating_add(2), 4u32))
                .saturating_add(mul(mul(now, deps), 8u32))
                .saturating_add(mul(mul(before, rdeps), 8u32));
        }
        // The check: a stamp per point and each point's kept dependencies (a Vec each).
        total
            .saturating_add(mul(w, 8u32 + 24))
            .saturating_add(mul(mul(w, deps), 8u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DependenceType;

    #[test]
    fn absurd_graphs_have_absurd_estimates_without_overflow() {
        let g = TaskGraph {
            timesteps: i64::MAX,
            max_width: i64::MAX,
            dependence: DependenceType::AllToAll,
            ..TaskGraph::default()
        };
        assert!(g.plan_bytes() > u64::MAX as u128);
        let small = TaskGraph::default();
        assert!(small.plan_bytes() < 4096);
    }
}
