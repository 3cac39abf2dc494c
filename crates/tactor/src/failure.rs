//! Why an event was poisoned. A failure is created once, where it happens (a panicking task, a
//! cancelled task, a user event dropped or poisoned by hand), and shared by every event it
//! poisons downstream, so whoever waits learns the root cause, not just "something failed".

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

/// Which task failed: its name when it was launched with one, and where it was launched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskLabel {
    /// The name given at launch, if any.
    pub name: Option<String>,
    /// The source location of the `launch` call.
    pub launched_at: &'static Location<'static>,
}

impl fmt::Display for TaskLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(n) => write!(f, "task '{n}' (launched at {})", self.launched_at),
            None => write!(f, "task launched at {}", self.launched_at),
        }
    }
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The task panicked with this message.
    Panicked(String),
    /// The runtime shut down before the task could run.
    Cancelled,
}

/// The root cause of a poisoned event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A task failed.
    Task {
        /// The task that failed.
        task: TaskLabel,
        /// How.
        cause: Cause,
    },
    /// A user event was poisoned by hand, with this reason.
    Poisoned(String),
    /// The last handle of a user event was dropped before it was triggered.
    UserEventDropped,
    /// The runtime shut down while a task waited for an event that nothing could trigger any
    /// more (see `Drop for Runtime`): the wait gave up.
    Abandoned,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Task {
                task,
                cause: Cause::Panicked(msg),
            } => write!(f, "{task} panicked: {msg}"),
            Failure::Task {
                task,
                cause: Cause::Cancelled,
            } => write!(f, "{task} was cancelled: the runtime shut down"),
            Failure::Poisoned(why) => write!(f, "a user event was poisoned: {why}"),
            Failure::UserEventDropped => {
                write!(f, "a user event was dropped without being triggered")
            }
            Failure::Abandoned => write!(
                f,
                "the runtime shut down while this task waited for an event nothing could trigger any more"
            ),
        }
    }
}

/// The error of waiting on a poisoned event: the failure upstream of it, shared.
///
/// ```
/// let rt = tactor::Runtime::new(1).unwrap();
/// let e = rt.launch_named("boom", tactor::Placement::Any, &[], || panic!("no"));
/// let err = e.wait().unwrap_err();
/// assert!(err.to_string().contains("task 'boom'"), "{err}");
/// assert!(err.to_string().contains("panicked: no"), "{err}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFailed(pub Arc<Failure>);

impl TaskFailed {
    /// The root cause.
    pub fn failure(&self) -> &Failure {
        &self.0
    }
}

impl fmt::Display for TaskFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TaskFailed {}

/// Triggering an event that already triggered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AlreadyTriggered;

impl fmt::Display for AlreadyTriggered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the user event was already triggered")
    }
}

impl std::error::Error for AlreadyTriggered {}

/// The message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}
