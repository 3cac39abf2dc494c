//! Why a trace did not run ([`TraceError`]).

use super::*;

/// Why a trace did not run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceError {
    /// `begin_trace` while another trace is open.
    AlreadyOpen {
        /// The open trace.
        open: u64,
        /// The one asked for.
        id: u64,
    },
    /// `end_trace` without an open trace.
    NotOpen,
    /// A launch of a replay differs from the recording (or has none at its position).
    Mismatch {
        /// The trace.
        id: u64,
        /// Position of the launch in the fragment, from 0.
        launch: usize,
        /// What the recording has there.
        recorded: String,
        /// What was launched.
        got: String,
    },
    /// A point of an index launch of a replay projected to other accesses or another
    /// placement than the recording has (found by the worker that was to run it).
    PointMismatch {
        /// The trace.
        id: u64,
        /// Position of the launch in the fragment, from 0.
        launch: usize,
        /// What the recording has there.
        recorded: String,
        /// What the projection gave.
        got: String,
    },
    /// A replay ended with fewer launches than the recording.
    Shorter {
        /// The trace.
        id: u64,
        /// Launches recorded.
        recorded: usize,
        /// Launches replayed.
        got: usize,
    },
    /// The recorded fragment does not compile (a task placed on a worker that does not exist).
    Compile {
        /// The trace.
        id: u64,
        /// Why.
        error: SubgraphError,
    },
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::AlreadyOpen { open, id } => {
                write!(f, "cannot begin trace {id}: trace {open} is open")
            }
            TraceError::NotOpen => write!(f, "end_trace without an open trace"),
            TraceError::Mismatch {
                id,
                launch,
                recorded,
                got,
            }
            | TraceError::PointMismatch {
                id,
                launch,
                recorded,
                got,
            } => {
                let outcome = if matches!(self, TraceError::Mismatch { .. }) {
                    "the fragment did not run"
                } else {
                    "that point did not run, and what depends on it is poisoned"
                };
                write!(
                    f,
                    "trace {id}: launch {launch} differs from the recording: recorded \
                     {recorded}, got {got}; {outcome}"
                )
            }
            TraceError::Shorter { id, recorded, got } => write!(
                f,
                "trace {id}: {got} launches, but the recording has {recorded}; the fragment did \
                 not run"
            ),
            TraceError::Compile { id, error } => write!(f, "trace {id} does not compile: {error}"),
        }
    }
}

impl std::error::Error for TraceError {}
