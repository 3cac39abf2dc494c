//! The systems `taskbench` can benchmark, and their registry. Each runs every graph of an
//! [`App`](taskbench_core::app::App) twice (a warm-up pass, then a timed pass) and returns the
//! timed pass's elapsed time. A new system implements [`System`] (in [`interface`]) in a module
//! of its own and is added to [`all`]; what systems share is in [`shared`].

mod bsp;
mod compiled;
mod forkjoin;
mod futures;
mod graphs;
mod implicit;
pub mod interface;
mod parfor;
mod serial;
pub mod shared;
mod styles;
mod tasks;
mod timing;

pub use bsp::Bsp;
pub use compiled::Compiled;
pub use forkjoin::ForkJoin;
pub use futures::Futures;
pub use implicit::{Implicit, Style};
pub use parfor::ParFor;
pub use serial::Serial;
pub use tasks::Tasks;
pub use timing::Pass;

pub use interface::{
    default_workers, first_core, first_core_here, RunConfig, RunError, System, MAX_WORKERS,
};
pub use shared::{block_owners, block_start, footprint, run_inputs, run_shared_task, run_task};

/// Every system, in the order `--list` shows them.
pub fn all() -> Vec<Box<dyn System>> {
    vec![
        Box::new(Serial),
        Box::new(Bsp),
        Box::new(Tasks),
        Box::new(Compiled),
        Box::new(Implicit(Style::Plain)),
        Box::new(Implicit(Style::Traced)),
        Box::new(Implicit(Style::Auto)),
        Box::new(ForkJoin),
        Box::new(Futures { barrier: false }),
        Box::new(Futures { barrier: true }),
        Box::new(ParFor),
    ]
}

/// The system called `name`.
pub fn by_name(name: &str) -> Option<Box<dyn System>> {
    all().into_iter().find(|s| s.name() == name)
}
