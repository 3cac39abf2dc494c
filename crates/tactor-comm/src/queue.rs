//! The completion queue: how received messages and finished sends reach the program.

use crate::Completion;
use crossbeam_queue::SegQueue;

/// A lock-free multi-producer multi-consumer queue of [`Completion`]s, one per channel.
///
/// The thread that progresses a channel pushes; any thread pops. A completion is popped by
/// exactly one thread, so consumers need no further coordination. It is an unbounded
/// segmented queue: a burst of arrivals never makes the progress path wait for consumers.
///
/// ```
/// use tactor_comm::{Completion, CompletionQueue};
///
/// let cq = CompletionQueue::default();
/// cq.push(Completion::Sent { token: 1 });
/// assert_eq!(cq.len(), 1);
/// assert_eq!(cq.pop(), Some(Completion::Sent { token: 1 }));
/// assert_eq!(cq.pop(), None);
/// ```
#[derive(Default, Debug)]
pub struct CompletionQueue {
    entries: SegQueue<Completion>,
}

impl CompletionQueue {
    /// Appends a completion.
    #[inline]
    pub fn push(&self, c: Completion) {
        self.entries.push(c);
    }

    /// Takes the oldest completion, if any.
    #[inline]
    pub fn pop(&self) -> Option<Completion> {
        self.entries.pop()
    }

    /// How many completions wait (a snapshot).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no completion waits (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
