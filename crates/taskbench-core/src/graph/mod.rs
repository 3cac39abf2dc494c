//! Task graphs: which tasks exist and which tasks each depends on (SPEC §1).
//!
//! Everything here is a pure function of the graph's parameters, exactly as in the reference
//! `core.cc`, so that every system runs the same graph and every count matches published ones.

mod check;
mod shapes;
mod types;

pub use crate::kernel::KernelType;
pub use crate::random::random_uniform;
pub use check::check_graph;
pub use shapes::TimestepClass;
pub use types::DependenceType;

use crate::kernel::Kernel;

/// An inclusive interval of points `[first, last]`, as the reference returns dependencies.
pub type Interval = (i64, i64);

/// One task graph of `timesteps × max_width` points with a dependence pattern and a kernel.
///
/// ```
/// use taskbench_core::graph::{DependenceType, TaskGraph};
/// let g = TaskGraph { dependence: DependenceType::Stencil1D, ..TaskGraph::default() };
/// assert_eq!(g.dependencies(0, 0), vec![(0, 1)]);
/// assert_eq!(g.dependencies(0, 2), vec![(1, 3)]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct TaskGraph {
    /// 0-based index of this graph among the `-and` graphs (seeds the random patterns).
    pub graph_index: i64,
    /// `T`, the number of timesteps (`-steps`).
    pub timesteps: i64,
    /// `W`, the maximum width (`-width`).
    pub max_width: i64,
    /// The dependence pattern (`-type`).
    pub dependence: DependenceType,
    /// `R` (`-radix`).
    pub radix: i64,
    /// `P` (`-period`), already resolved to the type's default when not given.
    pub period: i64,
    /// `f` (`-fraction`), used by `random_nearest`.
    pub fraction_connected: f64,
    /// The task body.
    pub kernel: Kernel,
    /// Bytes each task outputs (`-output`, at least 16).
    pub output_bytes_per_task: usize,
    /// Bytes of scratch each point owns (`-scratch`).
    pub scratch_bytes_per_task: usize,
}

impl Default for TaskGraph {
    fn default() -> Self {
        TaskGraph {
            graph_index: 0,
            timesteps: 4,
            max_width: 4,
            dependence: DependenceType::Trivial,
            radix: 3,
            period: 0,
            fraction_connected: 0.25,
            kernel: Kernel::default(),
            output_bytes_per_task: 16,
            scratch_bytes_per_task: 0,
        }
    }
}

fn ceil_log2(w: i64) -> i64 {
    if w <= 1 {
        0
    } else {
        64 - i64::from((w - 1).leading_zeros())
    }
}

impl TaskGraph {
    /// First point of timestep `t` (0 before the first timestep).
    pub fn offset_at_timestep(&self, t: i64) -> i64 {
        if t < 0 {
            return 0;
        }
        match self.dependence {
            DependenceType::Dom => (t + self.max_width - self.timesteps).max(0),
            _ => 0,
        }
    }

    /// Number of points of timestep `t` (0 before the first timestep).
    pub fn width_at_timestep(&self, t: i64) -> i64 {
        if t < 0 {
            return 0;
        }
        match self.dependence {
            DependenceType::Dom => self.max_width.min(t + 1).min(self.timesteps - t),
            DependenceType::Tree => self.max_width.min(1i64 << t.min(62)),
            _ => self.max_width,
        }
    }

    /// `S`: how many distinct dependence sets the pattern cycles through.
    pub fn max_dependence_sets(&self) -> i64 {
        match self.dependence {
            DependenceType::Fft => ceil_log2(self.max_width),
            t if t.has_period() => self.period,
            _ => 1,
        }
    }

    /// After how many timesteps the pattern repeats (the reference's `timestep_period`).
    pub fn timestep_period(&self) -> i64 {
        self.max_dependence_sets()
    }

    /// The dependence set used by timestep `t`.
    pub fn dependence_set_at_timestep(&self, t: i64) -> i64 {
        let s = self.max_dependence_sets();
        match self.dependence {
            DependenceType::Fft => (t + s - 1) % s,
            d if d.has_period() => t % s,
            _ => 0,
        }
    }

    /// Points of the previous timestep that `point` reads, as raw intervals (not yet
    /// filtered by the previous timestep's window).
    pub fn dependencies(&self, dset: i64, point: i64) -> Vec<Interval> {
        let mut out = Vec::new();
        self.dependencies_into(dset, point, &mut out);
        out
    }

    /// Points of the next timestep that read `point`, as raw intervals (the exact mirror of
    /// [`TaskGraph::dependencies`]).
    pub fn reverse_dependencies(&self, dset: i64, point: i64) -> Vec<Interval> {
        let mut out = Vec::new();
        self.reverse_dependencies_into(dset, point, &mut out);
        out
    }

    /// [`TaskGraph::dependencies`] into a caller's buffer (cleared first).
    pub fn dependencies_into(&self, dset: i64, point: i64, out: &mut Vec<Interval>) {
        self.pattern(dset, point, false, out)
    }

    /// [`TaskGraph::reverse_dependencies`] into a caller's buffer (cleared first).
    pub fn reverse_dependencies_into(&self, dset: i64, point: i64, out: &mut Vec<Interval>) {
        self.pattern(dset, point, true, out)
    }

    fn pattern(&self, dset: i64, i: i64, reverse: bool, out: &mut Vec<Interval>) {
        out.clear();
        let w = self.max_width;
        let r = self.radix;
        match self.dependence {
            DependenceType::Trivial | DependenceType::RandomSpread => {}
            DependenceType::NoComm => out.push((i, i)),
            DependenceType::Stencil1D => out.push(((i - 1).max(0), (i + 1).min(w - 1))),
            DependenceType::Stencil1DPeriodic => {
                out.push(((i - 1).max(0), (i + 1).min(w - 1)));
                if i == 0 {
                    out.push((w - 1, w - 1));
                }
                if i == w - 1 {
                    out.push((0, 0));
                }
            }
            DependenceType::Dom if reverse => out.push((i, (i + 1).min(w - 1))),
            DependenceType::Dom => out.push(((i - 1).max(0), i)),
            DependenceType::Tree if reverse => {
                let (c1, c2) = (2 * i, 2 * i + 1);
                if c2 < w {
                    out.push((c1, c2));
                } else if c1 < w {
                    out.push((c1, c1));
                }
            }
            DependenceType::Tree => out.push((i / 2, i / 2)),
            DependenceType::Fft => {
                let d = 1i64 << dset;
                if i - d >= 0 {
                    out.push((i - d, i - d));
                }
                out.push((i, i));
                if i + d < w {
                    out.push((i + d, i + d));
                }
            }
            DependenceType::AllToAll => out.push((0, w - 1)),
            DependenceType::Nearest => {
                if r > 0 {
                    out.push(self.nearest_window(i, reverse));
                }
            }
            DependenceType::Spread => {
                for k in 0..r {
                    let shift = (k * w) / r + if k > 0 { dset } else { 0 };
                    let p = if reverse {
                        (i - shift).rem_euclid(w)
                    } else {
                        (i + shift) % w
                    };
                    out.push((p, p));
                }
            }
            DependenceType::RandomNearest => self.random_nearest(dset, i, reverse, out),
        }
    }

    /// The `nearest` window of `i`; the reverse window is its mirror image.
    fn nearest_window(&self, i: i64, reverse: bool) -> Interval {
        let (before, after) = if reverse {
            ((self.radix - 1) / 2, self.radix / 2)
        } else {
            (self.radix / 2, (self.radix - 1) / 2)
        };
        ((i - before).max(0), (i + after).min(self.max_width - 1))
    }

    fn random_nearest(&self, dset: i64, i: i64, reverse: bool, out: &mut Vec<Interval>) {
        if self.radix <= 0 {
            return;
        }
        let (first, last) = self.nearest_window(i, reverse);
        let mut run: Option<Interval> = None;
        for c in first..=last {
            // The key is always (producer, consumer), whichever side asks.
            let (producer, consumer) = if reverse { (i, c) } else { (c, i) };
            let seed = [self.graph_index, self.radix, dset, producer, consumer];
            let kept = c == i || random_uniform(&seed) < self.fraction_connected;
            run = match (run, kept) {
                (Some((a, _)), true) => Some((a, c)),
                (None, true) => Some((c, c)),
                (Some(done), false) => {
                    out.push(done);
                    None
                }
                (None, false) => None,
            };
        }
        out.extend(run);
    }

    /// The points of timestep `t-1` that task `(t, point)` reads, filtered by the previous
    /// timestep's window, in the order inputs are delivered (SPEC §3).
    pub fn filtered_dependencies(&self, t: i64, point: i64) -> Vec<i64> {
        self.filtered(t, point, false)
    }

    /// The points of timestep `t` that read `point` of timestep `t-1`, filtered by the window
    /// of timestep `t`.
    pub fn filtered_reverse_dependencies(&self, t: i64, point: i64) -> Vec<i64> {
        self.filtered(t, point, true)
    }

    fn filtered(&self, t: i64, point: i64, reverse: bool) -> Vec<i64> {
        // Dependencies land in the previous timestep's window, reverse ones in this one's.
        let window_t = if reverse { t } else { t - 1 };
        let lo = self.offset_at_timestep(window_t);
        let hi = lo + self.width_at_timestep(window_t);
        let mut raw = Vec::new();
        self.pattern(self.dependence_set_at_timestep(t), point, reverse, &mut raw);
        raw.into_iter()
            .flat_map(|(a, b)| a..=b)
            .filter(|&d| d >= lo && d < hi)
            .collect()
    }

    /// Whether task `(t, point)` exists.
    pub fn contains(&self, t: i64, point: i64) -> bool {
        let off = self.offset_at_timestep(t);
        t >= 0 && t < self.timesteps && point >= off && point < off + self.width_at_timestep(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_log2_matches_definition() {
        assert_eq!(ceil_log2(1), 0);
        assert_eq!(ceil_log2(2), 1);
        assert_eq!(ceil_log2(3), 2);
        assert_eq!(ceil_log2(8), 3);
        assert_eq!(ceil_log2(9), 4);
    }

    #[test]
    fn tree_width_does_not_overflow_for_long_graphs() {
        let g = TaskGraph {
            dependence: DependenceType::Tree,
            timesteps: 1000,
            max_width: 5,
            ..TaskGraph::default()
        };
        assert_eq!(g.width_at_timestep(999), 5);
        assert_eq!(g.width_at_timestep(2), 4);
    }
}
