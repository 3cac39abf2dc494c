//! # taskbench-core
//!
//! The runtime-independent core of Task Bench (Slaughter et al., SC'20), conformant with the
//! reference implementation: the task graphs and their dependence patterns ([`graph`]), the
//! kernels ([`kernel`]), per-task validation of every dependency ([`plan`], [`validate`]), the
//! reference command-line flags ([`app`]) and the printed display and report ([`report`]).
//!
//! A system (a runtime under test) needs only [`plan::Plan`]: for each task `(t, point)` it
//! delivers the outputs of [`plan::Plan::deps`] to [`plan::Plan::execute_point`] in order.
//!
//! ```
//! use taskbench_core::{app::App, plan::Plan};
//!
//! let (app, _) = App::parse(&["-steps", "3", "-width", "2", "-type", "stencil_1d"], &[]).unwrap();
//! let plan = Plan::new(app.graphs[0].clone());
//! let bytes = plan.graph().output_bytes_per_task;
//! // A serial system: two rows of outputs, previous and current.
//! let mut prev = vec![vec![0u8; bytes]; 2];
//! let mut cur = prev.clone();
//! for t in 0..plan.graph().timesteps {
//!     for p in plan.offset(t)..plan.offset(t) + plan.width(t) {
//!         let inputs: Vec<&[u8]> = plan.deps(t, p).iter().map(|&d| prev[d as usize].as_slice()).collect();
//!         plan.execute_point(t, p, &mut cur[p as usize], &inputs, &mut []).unwrap();
//!     }
//!     std::mem::swap(&mut prev, &mut cur);
//! }
//! assert!(app.report_timing(1.0).starts_with("Total Tasks 6\nTotal Dependencies 8\n"));
//! ```

#![warn(missing_docs)]
pub mod app;
pub mod error;
pub mod graph;
pub mod kernel;
pub mod memory;
pub mod plan;
pub mod random;
pub mod report;
pub mod validate;

pub use error::ConfigError;
