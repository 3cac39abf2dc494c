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

#[cfg(test)]
mod tests {
    use super::{by_name, RunConfig};
    use taskbench_core::app::App;

    /// The systems whose runtime parts read memory unchecked on a Task Bench graph: `bsp`
    /// (`Neighbours`' slots), `compiled` (`Dataflow`'s slots and states) and `implicit` (index
    /// launches, whose jobs reach the program's constant unchecked), on two small graphs with two workers, every task validated and counted. Its reason to be is Miri
    /// (`scripts/miri.sh` runs this crate's unit tests): one process for all of them, where a
    /// run of the binary per system spent most of its time in Miri starting the binary.
    #[test]
    fn systems_with_unsafe_code_of_their_own_run_two_small_graphs() {
        let flags = "-steps 3 -width 4 -type nearest -radix 3 -kernel compute_bound -iter 2 \
                     -and -steps 4 -width 3 -type stencil_1d";
        let args: Vec<&str> = flags.split_whitespace().collect();
        let (app, _) = App::parse(&args, &[]).expect("the flags parse");
        for name in ["bsp", "compiled", "implicit"] {
            let system = by_name(name).expect("a system of that name");
            let cfg = RunConfig {
                workers: 2,
                pin: false,
                ..RunConfig::default()
            };
            let pass = crate::cli::run_checked(system.as_ref(), &app, &cfg);
            let pass = pass.unwrap_or_else(|f| panic!("{name}: {}", f.message));
            assert_eq!(pass.tasks, 24, "{name}");
        }
    }
}
