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
    /// The task ended itself as failed ([`fail`]), for this reason.
    Failed(String),
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
    /// A value failed on another rank of the job and reached this one as its poison
    /// ([`job::Spmd`](crate::job::Spmd)): the rank where it failed first, and why.
    Remote {
        /// The rank where the failure happened.
        rank: usize,
        /// The failure there, as text.
        why: String,
    },
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
                cause: Cause::Failed(why),
            } => write!(f, "{task} failed: {why}"),
            Failure::Task {
                task,
                cause: Cause::Cancelled,
            } => write!(f, "{task} was cancelled: the runtime shut down"),
            Failure::Poisoned(why) => write!(f, "a user event was poisoned: {why}"),
            Failure::Remote { rank, why } => write!(f, "rank {rank}: {why}"),
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

/// What [`fail`] unwinds with.
struct Failing(String);

/// Ends the running task as failed, for `reason`, without a panic: its event is poisoned
/// with [`Cause::Failed`], and what depends on it does not run, as after a panic. No panic
/// hook runs, so nothing is printed — and on a rank of a [`Job`](crate::job::Job), where a
/// panic ends the whole job, a failed task ends only its dependents (the program decides
/// what the failure means, e.g. from [`TaskFailed`] where it waits).
///
/// Called outside a task, it unwinds like a panic that no hook sees.
///
/// ```
/// use tactor::{Cause, Failure, Placement, Runtime};
///
/// let rt = Runtime::new(1).unwrap();
/// let bad = rt.launch(Placement::Any, &[], || tactor::fail("input 3 is stale"));
/// let after = rt.launch(Placement::Any, &[bad], || unreachable!("a dependent of a failed task"));
/// let e = after.wait().unwrap_err();
/// match e.failure() {
///     Failure::Task { cause, .. } => assert_eq!(*cause, Cause::Failed("input 3 is stale".into())),
///     other => panic!("{other}"),
/// }
/// ```
pub fn fail(reason: impl Into<String>) -> ! {
    std::panic::resume_unwind(Box::new(Failing(reason.into())))
}

/// How a task whose body unwound with `payload` failed.
pub(crate) fn cause_of(payload: &(dyn std::any::Any + Send)) -> Cause {
    if let Some(f) = payload.downcast_ref::<Failing>() {
        Cause::Failed(f.0.clone())
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        Cause::Panicked((*s).to_string())
    } else if let Some(s) = payload.downcast_ref::<String>() {
        Cause::Panicked(s.clone())
    } else {
        Cause::Panicked("a non-string panic payload".to_string())
    }
}
