//! Timestep classes: which timesteps share a shape (dependence set and the windows of the
//! timestep and the one before), found without walking every timestep. The graph check, the
//! report's totals and the memory estimate all need each distinct shape once, and a graph may
//! have 2^62 timesteps.

use super::{DependenceType, TaskGraph};

/// Timesteps that share a shape: `first`, and every `stride`-th timestep after it, `count` in
/// all. Every timestep of a graph is in exactly one class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestepClass {
    /// The first timestep of the class.
    pub first: i64,
    /// Distance between consecutive members (1 for a class of one).
    pub stride: i64,
    /// How many timesteps the class holds (at least 1).
    pub count: i64,
}

impl TaskGraph {
    /// Timesteps at the start whose window or previous window differs from the steady state.
    fn unsteady_prefix(&self) -> i64 {
        let w = self.max_width;
        match self.dependence {
            // Widths 1, 2, 4, ... reach the width after ceil(log2 w) steps; one more for the
            // previous window.
            DependenceType::Tree => (64 - (w.max(1) - 1).leading_zeros() as i64) + 1,
            // Offsets and widths grow for w steps.
            DependenceType::Dom => w,
            // Only timestep 0 has no previous window.
            _ => 1,
        }
    }

    /// Timesteps at the end whose windows differ from the steady state (`dom` shrinks).
    fn unsteady_suffix(&self) -> i64 {
        match self.dependence {
            DependenceType::Dom => self.max_width,
            _ => 0,
        }
    }

    /// The timesteps of the graph grouped into classes of equal shape: every timestep in the
    /// unsteady prefix and suffix is a class of its own, and the steady middle, where the
    /// windows stay fixed and the dependence set cycles with period `S`
    /// ([`TaskGraph::max_dependence_sets`]), has one class per residue modulo `S`. Two
    /// timesteps in one class have identical dependencies; different classes may still share
    /// a shape. There are at most `prefix + S + suffix` classes whatever `-steps` is.
    ///
    /// ```
    /// use taskbench_core::graph::{DependenceType, TaskGraph};
    /// let g = TaskGraph { dependence: DependenceType::Stencil1D, timesteps: 1_000_000_000_000, ..TaskGraph::default() };
    /// let classes = g.timestep_classes();
    /// assert_eq!(classes.len(), 2); // timestep 0, then every other timestep
    /// assert_eq!(classes.iter().map(|c| c.count).sum::<i64>(), g.timesteps);
    /// ```
    pub fn timestep_classes(&self) -> Vec<TimestepClass> {
        let steps = self.timesteps.max(0);
        let period = self.max_dependence_sets().max(1);
        let prefix = self.unsteady_prefix().clamp(0, steps);
        let suffix_start = steps.saturating_sub(self.unsteady_suffix()).max(prefix);
        let single = |t| TimestepClass {
            first: t,
            stride: 1,
            count: 1,
        };
        let mut out: Vec<TimestepClass> = (0..prefix).map(single).collect();
        let middle = suffix_start - prefix;
        for j in 0..period.min(middle) {
            out.push(TimestepClass {
                first: prefix + j,
                stride: period,
                count: (middle - j + period - 1) / period,
            });
        }
        out.extend((suffix_start..steps).map(single));
        out
    }

    /// An upper bound on the dependencies of one point at one timestep.
    pub fn max_deps_per_point(&self) -> i64 {
        let (w, r) = (self.max_width.max(0), self.radix.max(0));
        let bound = match self.dependence {
            DependenceType::Trivial | DependenceType::RandomSpread => 0,
            DependenceType::NoComm | DependenceType::Tree => 1,
            DependenceType::Dom => 2,
            DependenceType::Stencil1D | DependenceType::Stencil1DPeriodic | DependenceType::Fft => {
                3
            }
            DependenceType::AllToAll => w,
            DependenceType::Nearest | DependenceType::Spread | DependenceType::RandomNearest => r,
        };
        bound.min(w)
    }

    /// An upper bound on the reverse dependencies of one point at one timestep.
    pub fn max_rdeps_per_point(&self) -> i64 {
        match self.dependence {
            // A parent feeds two children.
            DependenceType::Tree => 2.min(self.max_width.max(0)),
            _ => self.max_deps_per_point(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::DependenceType as D;

    /// Every member of a class has the shape of its first timestep, and the classes cover
    /// every timestep exactly once.
    #[test]
    fn classes_partition_the_timesteps_into_equal_shapes() {
        for ty in D::ALL {
            if ty == D::RandomSpread {
                continue;
            }
            for (steps, width) in [(1, 1), (3, 5), (7, 4), (30, 9), (41, 16), (64, 3)] {
                for period in [1, 2, 3] {
                    let g = TaskGraph {
                        dependence: ty,
                        timesteps: steps,
                        max_width: width,
                        radix: 2,
                        period: if ty.has_period() { period } else { 0 },
                        ..TaskGraph::default()
                    };
                    if crate::app::validate_graph(&g, false).is_err() {
                        continue;
                    }
                    let key = |t: i64| {
                        (
                            g.dependence_set_at_timestep(t),
                            g.offset_at_timestep(t),
                            g.width_at_timestep(t),
                            g.offset_at_timestep(t - 1),
                            g.width_at_timestep(t - 1),
                        )
                    };
                    let mut seen = vec![0; steps as usize];
                    for c in g.timestep_classes() {
                        for k in 0..c.count {
                            let t = c.first + k * c.stride;
                            assert_eq!(key(t), key(c.first), "{ty} {steps}x{width} t={t}");
                            seen[t as usize] += 1;
                        }
                    }
                    assert!(
                        seen.iter().all(|&n| n == 1),
                        "{ty} {steps}x{width}: {seen:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn dependency_bounds_hold() {
        for ty in D::ALL {
            if ty == D::RandomSpread {
                continue;
            }
            for width in [1, 2, 5, 8, 13] {
                for radix in [0, 1, 3, 5] {
                    let g = TaskGraph {
                        dependence: ty,
                        timesteps: 12,
                        max_width: width,
                        radix,
                        period: if ty.has_period() { 1 } else { 0 },
                        ..TaskGraph::default()
                    };
                    if crate::app::validate_graph(&g, false).is_err() {
                        continue;
                    }
                    for t in 0..g.timesteps {
                        for p in 0..width {
                            let d = g.filtered_dependencies(t, p).len() as i64;
                            let r = g.filtered_reverse_dependencies(t, p).len() as i64;
                            assert!(d <= g.max_deps_per_point(), "{ty} w{width} r{radix}");
                            assert!(r <= g.max_rdeps_per_point(), "{ty} w{width} r{radix}");
                        }
                    }
                }
            }
        }
    }
}
