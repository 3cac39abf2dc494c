//! The `taskbench` command: Task Bench systems and the command line.
//!
//! ```
//! use taskbench::systems::{by_name, RunConfig};
//! use taskbench_core::app::App;
//!
//! let (app, _) = App::parse(&["-steps", "20", "-width", "4", "-type", "stencil_1d"], &[]).unwrap();
//! let bsp = by_name("bsp").unwrap();
//! let pass = bsp.run(&app, &RunConfig { workers: 2, pin: false, ..RunConfig::default() }).unwrap();
//! assert_eq!(pass.tasks, 80);
//! ```

// The METG summary is one nested `serde_json::json!`, deeper than the default limit.
#![warn(missing_docs)]
#![recursion_limit = "256"]

pub mod cli;
pub mod faults;
pub mod metg;
pub mod study;
pub mod systems;
