//! What a task found wrong with its inputs (SPEC §3). Any of these stops the run.

use std::fmt;

/// A task that received the wrong inputs, or whose scratch memory was corrupted.
///
/// ```
/// use taskbench_core::validate::{TaskError, Violation};
/// let e = TaskError { graph: 0, timestep: 3, point: 1, violation: Violation::ScratchCorrupted };
/// assert!(e.to_string().contains("graph 0, timestep 3, point 1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskError {
    /// 0-based graph index.
    pub graph: i64,
    /// Timestep of the failing task.
    pub timestep: i64,
    /// Point of the failing task.
    pub point: i64,
    /// What was wrong.
    pub violation: Violation,
}

/// The kinds of validation failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// The task is not part of the graph.
    NoSuchTask,
    /// Inputs were missing or extra.
    InputCount {
        /// Inputs the graph gives the task.
        expected: usize,
        /// Inputs it received.
        got: usize,
    },
    /// Input `input` (the output of `dep`) has the wrong size.
    InputSize {
        /// Which input (0-based, in dependency order).
        input: usize,
        /// The point whose output it should be.
        dep: i64,
        /// The output size of the graph.
        expected: usize,
        /// The size received.
        got: usize,
    },
    /// Input `input` should be the output of `dep` at the previous timestep but holds that of
    /// task `found` (timestep, point): delivered out of order, stale or overwritten.
    InputContent {
        /// Which input (0-based, in dependency order).
        input: usize,
        /// The point whose output it should be.
        dep: i64,
        /// The (timestep, point) whose output it holds.
        found: (i64, i64),
    },
    /// The scratch buffer has the wrong size.
    ScratchSize {
        /// The `-scratch` of the graph.
        expected: usize,
        /// The size of the buffer given.
        got: usize,
    },
    /// The scratch buffer lost its magic value.
    ScratchCorrupted,
    /// The output buffer has the wrong size.
    OutputSize {
        /// The `-output` of the graph.
        expected: usize,
        /// The size of the buffer given.
        got: usize,
    },
}

impl fmt::Display for TaskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (g, t, p) = (self.graph, self.timestep, self.point);
        write!(
            f,
            "validation failed in graph {g}, timestep {t}, point {p}: "
        )?;
        match &self.violation {
            Violation::NoSuchTask => write!(f, "no such task in the graph"),
            Violation::InputCount { expected, got } => {
                write!(f, "expected {expected} inputs (one per dependency), received {got}")
            }
            Violation::InputSize { input, dep, expected, got } => write!(
                f,
                "input {input} (dependency on point {dep} of timestep {}) has {got} bytes, expected {expected}",
                t - 1
            ),
            Violation::InputContent { input, dep, found } => write!(
                f,
                "input {input} should be the output of point {dep} of timestep {} but holds that of point {} of timestep {}",
                t - 1,
                found.1,
                found.0
            ),
            Violation::ScratchSize { expected, got } => {
                write!(f, "scratch buffer has {got} bytes, expected {expected}")
            }
            Violation::ScratchCorrupted => write!(f, "scratch buffer no longer holds its magic value"),
            Violation::OutputSize { expected, got } => {
                write!(f, "output buffer has {got} bytes, expected {expected}")
            }
        }
    }
}

impl std::error::Error for TaskError {}
