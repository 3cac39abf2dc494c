//! # Tactor: task programming at actor speed
//!
//! A runtime for task graphs. Part 1 is the explicit, Realm-style task API:
//!
//! - a [`Runtime`] owns worker threads (one per core by default, pinned), each with a
//!   work-stealing deque; idle workers spin briefly, then park;
//! - [`Handle::launch`] runs a closure at a [`Placement`] (a given worker, or anywhere) once its
//!   preconditions — [`Event`]s — have triggered, and returns the task's own completion event;
//! - [`UserEvent`]s are triggered by hand, once; [`Event::merge`] joins events;
//! - [`Event::wait`] blocks a thread outside the runtime, and on a worker runs other tasks
//!   while it waits; inside a task the idiomatic way to wait is to launch the continuation with
//!   the event as a precondition;
//! - [`Runtime::scope`] lets tasks borrow from the caller's stack, like `std::thread::scope`;
//! - a task that panics **poisons** its event: dependents do not run, the poison propagates,
//!   and every waiter gets a [`TaskFailed`] naming the task that failed.
//!
//! ```
//! use tactor::{Event, Placement, Runtime, UserEvent};
//! use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
//!
//! let rt = Runtime::new(2).unwrap();
//! let sum = AtomicU64::new(0);
//! let start = UserEvent::new();
//! rt.scope(|s| {
//!     // A diamond: a -> (b, c) -> d, all held back until `start` triggers.
//!     let a = s.launch(Placement::Worker(0), &[start.event()], |_| { sum.fetch_add(1, SeqCst); });
//!     let b = s.launch(Placement::Any, &[a.clone()], |_| { sum.fetch_add(10, SeqCst); });
//!     let c = s.launch(Placement::Any, &[a], |_| { sum.fetch_add(100, SeqCst); });
//!     let d = s.launch(Placement::Worker(1), &[Event::merge(&[b, c])], |_| {
//!         assert_eq!(sum.load(SeqCst), 111);
//!     });
//!     start.trigger().unwrap();
//!     d
//! })
//! .unwrap()
//! .wait()
//! .unwrap();
//! assert_eq!(sum.load(SeqCst), 111);
//! ```

mod countdown;
mod event;
mod failure;
pub mod hint;
mod runtime;
mod scope;
mod subgraph;
mod sync;

pub use event::{Event, UserEvent};
pub use failure::{AlreadyTriggered, Cause, Failure, TaskFailed, TaskLabel};
pub use runtime::{Builder, Handle, Placement, Runtime};
pub use scope::Scope;
pub use subgraph::{
    Instance, PostId, PreId, Subgraph, SubgraphBuilder, SubgraphError, TaskId as SubgraphTask,
};

#[cfg(all(test, loom))]
mod loom_tests;
