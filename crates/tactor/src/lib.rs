//! # Tactor: task programming at actor speed
//!
//! A runtime for task graphs with four faces over one set of workers: the explicit,
//! Realm-style task API; compiled subgraphs; actors and selectors ([`actor`]); and implicit
//! parallelism with tracing ([`implicit`]). The ranks of an MPI job are the [`job`]'s: it
//! joins the launcher's job (checking that every rank was started alike), owns the ports,
//! collectives and failure protocol, and serves selectors across ranks. On it: keyed
//! messages that open events, subgraph inlets or pulls ([`job::Exchange`]), arrays cut in
//! blocks over the ranks with their halo messages ([`job::Blocks`]), futures whose values
//! cross ranks ([`job::Spmd`]) and control-replicated implicit programs
//! ([`implicit::Replicated`]). The first face:
//!
//! - a [`Runtime`] owns worker threads (one per core by default, pinned), each with a
//!   work-stealing deque; idle workers spin briefly, then park;
//! - [`Handle::launch`] runs a closure at a [`Placement`] (a given worker, or anywhere) once its
//!   preconditions — [`Event`]s — have triggered, and returns the task's own completion event;
//! - [`UserEvent`]s are triggered by hand, once; [`Event::merge`] joins events;
//! - [`Event::wait`] blocks a thread outside the runtime; inside a task it suspends the task
//!   (its stack is set aside) and the worker goes on, so waits never deadlock on work queued
//!   behind them. The cheaper idiom is still to launch the continuation with the event as a
//!   precondition;
//! - [`Handle::scope`] lets tasks borrow from the caller's stack, like `std::thread::scope`;
//! - [`Handle::spawn`] returns a [`Future`]: the task's value, taken as a precondition or
//!   read with [`Future::get`]; a [`Promise`] is a future set by hand;
//! - [`join`] and [`for_each`] fork and join inside tasks, rayon's way: the second half is
//!   pushed where the caller takes it back unless an idle worker stole it, so a fork that is
//!   not stolen costs a push and a pop; [`Handle::run`] enters the runtime from outside;
//! - a task that panics **poisons** its event: dependents do not run, the poison propagates,
//!   and every waiter gets a [`TaskFailed`] naming the task that failed.
//!
//! The second: a graph that repeats (a timestep of a stencil, the body of a loop) is built
//! once with [`SubgraphBuilder`] — tasks placed on workers, edges, external pre- and
//! postconditions — and [`SubgraphBuilder::compile`]d into per-worker actors: each worker owns
//! private dependency counters for its tasks, a same-worker edge is a plain decrement and a
//! cross-worker edge one 64-bit message through the ring of that worker pair. Each
//! [`Subgraph::instantiate`] runs the graph once with new arguments, chained to other
//! instances or tasks through [`Event`]s, at a fraction of the cost of launching its tasks.
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
//!
//! The third face, [`actor`]: selectors whose mailboxes take messages sent to a PE (a
//! worker), aggregated per destination, with termination detected per mailbox; a selector's
//! end is an [`Event`] like a task's ([`actor::launch`]). The fourth, [`implicit`]: a
//! sequential program of launches that declare what they read and write; the runtime derives
//! every dependence, and a traced fragment is analysed once and replayed as a compiled
//! subgraph.
//!
//! A compiled subgraph, instantiated twice, the second instance after the first:
//!
//! ```
//! use tactor::{Runtime, SubgraphBuilder};
//! use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
//! use std::sync::Arc;
//!
//! let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
//! let mut b = SubgraphBuilder::<Arc<AtomicU64>>::new();
//! let first = b.task(0, |n: &Arc<AtomicU64>| { n.fetch_add(1, SeqCst); });
//! let second = b.task(1, |n: &Arc<AtomicU64>| { assert!(n.fetch_add(1, SeqCst) % 2 == 1); });
//! b.edge(first, second);
//! let after = b.precondition(); // an external condition: `first` waits for it
//! b.wait_for(after, first);
//! let graph = b.compile(&rt).unwrap();
//! let n = Arc::new(AtomicU64::new(0));
//! let one = graph.instantiate(n.clone(), &[tactor::Event::triggered()]);
//! let two = graph.instantiate(n.clone(), &[one.completion.clone()]);
//! two.completion.wait().unwrap();
//! assert_eq!(n.load(SeqCst), 4);
//! ```

#![warn(missing_docs)]
pub mod actor;
mod countdown;
mod event;
mod failure;
mod forkjoin;
mod future;
pub mod hint;
pub mod implicit;
pub mod job;
mod runtime;
mod scope;
pub mod slots;
mod subgraph;
mod sync;

pub use event::{Event, UserEvent};
pub use failure::{fail, AlreadyTriggered, Cause, Failure, TaskFailed, TaskLabel};
pub use forkjoin::{for_each, for_each_mut, join, try_for_each_mut};
pub use future::{Future, Inputs, Promise};
pub use runtime::ABANDON_AFTER;
pub use runtime::{
    current_handle, current_worker, relax, Builder, Handle, Placement, Poller, Runtime,
};
pub use scope::Scope;
pub use subgraph::{
    Inlet, Instance, PostId, PreId, Subgraph, SubgraphBuilder, SubgraphError,
    TaskId as SubgraphTask,
};

#[cfg(all(test, loom))]
mod loom_tests;
