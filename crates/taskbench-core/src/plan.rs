//! A graph with its dependencies precomputed, and the one function every system calls to run a
//! task: [`Plan::execute_point`], which validates the task's inputs, runs the kernel and writes
//! the task's output.
//!
//! Dependencies depend only on the timestep's shape (dependence set and the two windows), so
//! each distinct shape is materialised once; looking a task's dependencies up is then O(1), which
//! matters when tasks last a microsecond.

use crate::graph::KernelType;
use crate::graph::{Interval, TaskGraph};
use crate::kernel::{scratch_intact, SCRATCH_MAGIC};
use crate::validate::{TaskError, Violation};
use std::cell::Cell;
use std::collections::HashMap;

thread_local! {
    static EXECUTED: Cell<u64> = const { Cell::new(0) };
}

/// How many tasks passed validation and ran on the calling thread since it started. Systems
/// read it on each of their threads to prove they ran every task of the graph: a system that
/// skipped tasks would otherwise never trip validation.
pub fn tasks_executed_on_this_thread() -> u64 {
    EXECUTED.with(Cell::get)
}

/// One distinct timestep shape and its materialised dependencies.
#[derive(Debug, Clone)]
struct Shape {
    offset: i64,
    width: i64,
    last_offset: i64,
    last_width: i64,
    dep_start: Vec<u32>,
    deps: Vec<i64>,
    rdep_start: Vec<u32>,
    rdeps: Vec<i64>,
}

/// A [`TaskGraph`] ready to run: dependencies and reverse dependencies of every timestep,
/// filtered by the windows, in delivery order.
///
/// ```
/// use taskbench_core::graph::{DependenceType, TaskGraph};
/// use taskbench_core::plan::Plan;
/// let plan = Plan::new(TaskGraph { dependence: DependenceType::Stencil1D, ..TaskGraph::default() });
/// assert_eq!(plan.deps(1, 0), &[0, 1]);
/// assert_eq!(plan.rdeps(1, 3), &[2, 3]);
/// let mut out = vec![0u8; 16];
/// let inputs = [Plan::output_of(0, 0, 16), Plan::output_of(0, 1, 16)];
/// let refs: Vec<&[u8]> = inputs.iter().map(|v| v.as_slice()).collect();
/// plan.execute_point(1, 0, &mut out, &refs, &mut []).unwrap();
/// assert_eq!(out, Plan::output_of(1, 0, 16));
/// ```
#[derive(Debug, Clone)]
pub struct Plan {
    graph: TaskGraph,
    shape_of: Vec<u32>,
    shapes: Vec<Shape>,
}

impl Plan {
    /// Materialises the dependencies of every timestep of `graph`.
    pub fn new(graph: TaskGraph) -> Plan {
        let mut index: HashMap<(i64, i64, i64, i64, i64), u32> = HashMap::new();
        let mut shapes = Vec::new();
        let mut shape_of = Vec::with_capacity(graph.timesteps.max(0) as usize);
        let mut raw: Vec<Interval> = Vec::new();
        for t in 0..graph.timesteps {
            let key = (
                graph.dependence_set_at_timestep(t),
                graph.offset_at_timestep(t),
                graph.width_at_timestep(t),
                graph.offset_at_timestep(t - 1),
                graph.width_at_timestep(t - 1),
            );
            let id = *index.entry(key).or_insert_with(|| {
                shapes.push(Self::shape(&graph, key, &mut raw));
                (shapes.len() - 1) as u32
            });
            shape_of.push(id);
        }
        Plan {
            graph,
            shape_of,
            shapes,
        }
    }

    fn shape(g: &TaskGraph, key: (i64, i64, i64, i64, i64), raw: &mut Vec<Interval>) -> Shape {
        let (dset, offset, width, last_offset, last_width) = key;
        let mut s = Shape {
            offset,
            width,
            last_offset,
            last_width,
            dep_start: vec![0],
            deps: Vec::new(),
            rdep_start: vec![0],
            rdeps: Vec::new(),
        };
        for p in offset..offset + width {
            g.dependencies_into(dset, p, raw);
            let window = last_offset..last_offset + last_width;
            s.deps.extend(
                raw.iter()
                    .flat_map(|&(a, b)| a..=b)
                    .filter(|d| window.contains(d)),
            );
            s.dep_start.push(s.deps.len() as u32);
        }
        for q in last_offset..last_offset + last_width {
            g.reverse_dependencies_into(dset, q, raw);
            let window = offset..offset + width;
            s.rdeps.extend(
                raw.iter()
                    .flat_map(|&(a, b)| a..=b)
                    .filter(|c| window.contains(c)),
            );
            s.rdep_start.push(s.rdeps.len() as u32);
        }
        s
    }

    /// The graph this plan runs.
    pub fn graph(&self) -> &TaskGraph {
        &self.graph
    }

    fn shape_at(&self, t: i64) -> Option<&Shape> {
        usize::try_from(t)
            .ok()
            .and_then(|t| self.shape_of.get(t))
            .map(|&s| &self.shapes[s as usize])
    }

    /// Identifies timestep `t`'s shape (dependence set and windows): timesteps with the same
    /// id have the same dependencies, point for point. `None` outside the graph.
    pub fn shape_id(&self, t: i64) -> Option<u32> {
        usize::try_from(t)
            .ok()
            .and_then(|t| self.shape_of.get(t))
            .copied()
    }

    /// Number of distinct timestep shapes.
    pub fn shapes(&self) -> usize {
        self.shapes.len()
    }

    /// First point of timestep `t` (0 outside the graph).
    pub fn offset(&self, t: i64) -> i64 {
        self.shape_at(t).map_or(0, |s| s.offset)
    }

    /// Number of points of timestep `t` (0 outside the graph).
    pub fn width(&self, t: i64) -> i64 {
        self.shape_at(t).map_or(0, |s| s.width)
    }

    /// The points of timestep `t`, as indices (empty outside the graph).
    ///
    /// ```
    /// use taskbench_core::{app::App, plan::Plan};
    /// let (app, _) = App::parse(&["-type", "tree", "-width", "4"], &[]).unwrap();
    /// let plan = Plan::new(app.graphs[0].clone());
    /// assert_eq!(plan.points(0), 0..1); // a tree starts with one point
    /// assert_eq!(plan.points(2), 0..4);
    /// assert_eq!(plan.points(-1), 0..0);
    /// ```
    pub fn points(&self, t: i64) -> std::ops::Range<usize> {
        self.offset(t) as usize..(self.offset(t) + self.width(t)) as usize
    }

    /// The points of `t-1` that task `(t, point)` reads, in delivery order. Empty for points
    /// outside the timestep.
    pub fn deps(&self, t: i64, point: i64) -> &[i64] {
        match self.shape_at(t) {
            Some(s) if point >= s.offset && point < s.offset + s.width => {
                let k = (point - s.offset) as usize;
                &s.deps[s.dep_start[k] as usize..s.dep_start[k + 1] as usize]
            }
            _ => &[],
        }
    }

    /// The points of timestep `t` that read `point` of timestep `t-1`, ascending by the
    /// reference's reverse-dependency order.
    pub fn rdeps(&self, t: i64, point: i64) -> &[i64] {
        match self.shape_at(t) {
            Some(s) if point >= s.last_offset && point < s.last_offset + s.last_width => {
                let k = (point - s.last_offset) as usize;
                &s.rdeps[s.rdep_start[k] as usize..s.rdep_start[k + 1] as usize]
            }
            _ => &[],
        }
    }

    /// [`Plan::deps`] as indices, for a program that keeps a timestep's points in a vector
    /// (points are never negative).
    ///
    /// ```
    /// use taskbench_core::{app::App, plan::Plan};
    /// let app = App::parse(&["-steps", "3", "-width", "4", "-type", "stencil_1d"], &[]).unwrap().0;
    /// let plan = Plan::new(app.graphs[0].clone());
    /// assert_eq!(plan.dep_indices(1, 0).collect::<Vec<_>>(), [0, 1]);
    /// assert_eq!(plan.rdep_indices(1, 3).collect::<Vec<_>>(), [2, 3]);
    /// ```
    pub fn dep_indices(&self, t: i64, point: usize) -> impl Iterator<Item = usize> + '_ {
        self.deps(t, point as i64).iter().map(|&d| d as usize)
    }

    /// [`Plan::rdeps`] as indices (see [`Plan::dep_indices`]).
    pub fn rdep_indices(&self, t: i64, point: usize) -> impl Iterator<Item = usize> + '_ {
        self.rdeps(t, point as i64).iter().map(|&r| r as usize)
    }

    /// The output task `(t, point)` must produce: `(t, point)` pairs of native 64-bit integers.
    pub fn output_of(t: i64, point: i64, bytes: usize) -> Vec<u8> {
        let mut v = vec![0u8; bytes];
        write_output(t, point, &mut v);
        v
    }

    /// Runs task `(t, point)`: checks that `inputs` are exactly the outputs of its dependencies
    /// in delivery order, that its scratch still holds the magic value, runs the kernel and
    /// writes `output`. Any violation is returned and names graph, timestep, point and input.
    pub fn execute_point(
        &self,
        t: i64,
        point: i64,
        output: &mut [u8],
        inputs: &[&[u8]],
        scratch: &mut [u8],
    ) -> Result<(), TaskError> {
        let g = &self.graph;
        let fail = |violation| {
            Err(TaskError {
                graph: g.graph_index,
                timestep: t,
                point,
                violation,
            })
        };
        if !g.contains(t, point) {
            return fail(Violation::NoSuchTask);
        }
        let deps = self.deps(t, point);
        if inputs.len() != deps.len() {
            return fail(Violation::InputCount {
                expected: deps.len(),
                got: inputs.len(),
            });
        }
        let bytes = g.output_bytes_per_task;
        for (k, (input, &dep)) in inputs.iter().zip(deps).enumerate() {
            if input.len() != bytes {
                return fail(Violation::InputSize {
                    input: k,
                    dep,
                    expected: bytes,
                    got: input.len(),
                });
            }
            for pair in input.chunks_exact(16) {
                let ft = i64::from_ne_bytes(pair[..8].try_into().expect("8 bytes"));
                let fp = i64::from_ne_bytes(pair[8..].try_into().expect("8 bytes"));
                if (ft, fp) != (t - 1, dep) {
                    return fail(Violation::InputContent {
                        input: k,
                        dep,
                        found: (ft, fp),
                    });
                }
            }
        }
        if scratch.len() != g.scratch_bytes_per_task {
            return fail(Violation::ScratchSize {
                expected: g.scratch_bytes_per_task,
                got: scratch.len(),
            });
        }
        if scratch.len() >= 8 && scratch[..8] != SCRATCH_MAGIC.to_ne_bytes() {
            return fail(Violation::ScratchCorrupted);
        }
        if output.len() != bytes {
            return fail(Violation::OutputSize {
                expected: bytes,
                got: output.len(),
            });
        }
        g.kernel.execute(g.graph_index, t, point, scratch);
        // memory_bound rewrites the scratch: check all of it in the last two tasks of the
        // point's run of consecutive timesteps (systems that alternate two scratch rows have
        // each row checked), which costs two passes over the buffer per point per run instead
        // of one per task.
        if g.kernel.kind == KernelType::MemoryBound
            && !(g.contains(t + 1, point) && g.contains(t + 2, point))
            && !scratch_intact(scratch)
        {
            return fail(Violation::ScratchCorrupted);
        }
        write_output(t, point, output);
        EXECUTED.with(|c| c.set(c.get() + 1));
        Ok(())
    }
}

fn write_output(t: i64, point: i64, output: &mut [u8]) {
    let mut pair = [0u8; 16];
    pair[..8].copy_from_slice(&t.to_ne_bytes());
    pair[8..].copy_from_slice(&point.to_ne_bytes());
    for chunk in output.chunks_exact_mut(16) {
        chunk.copy_from_slice(&pair);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{DependenceType, KernelType};
    use crate::kernel::{new_scratch, Kernel};

    /// A word torn in the middle of the scratch (where the first-word check cannot see it) is
    /// caught by the full check at the end of the point's run.
    #[test]
    fn a_torn_scratch_word_is_caught_at_the_end_of_the_run() {
        let g = TaskGraph {
            dependence: DependenceType::NoComm,
            timesteps: 3,
            max_width: 1,
            scratch_bytes_per_task: 1000,
            kernel: Kernel {
                kind: KernelType::MemoryBound,
                iterations: 2,
                ..Kernel::default()
            },
            ..TaskGraph::default()
        };
        let plan = Plan::new(g);
        let mut scratch = new_scratch(1000);
        let mut out = vec![0u8; 16];
        let mut prev = Plan::output_of(0, 0, 16);
        plan.execute_point(0, 0, &mut out, &[], &mut scratch)
            .unwrap();
        scratch[515] ^= 0x40;
        // Timestep 1 is one of the point's last two (of 3): all of the scratch is checked.
        prev.copy_from_slice(&out);
        let e = plan
            .execute_point(1, 0, &mut out, &[&prev], &mut scratch)
            .unwrap_err();
        assert_eq!(e.violation, Violation::ScratchCorrupted);
        assert_eq!(e.timestep, 1);
    }
}
