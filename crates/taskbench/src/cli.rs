//! The command line: `taskbench [Task Bench flags] [-system NAME] [-worker N]`, `taskbench
//! --list`, `taskbench -h`.

use crate::systems::{self, RunConfig, RunError};
use std::io::Write;
use std::process::ExitCode;
use taskbench_core::app::{App, ExtraFlag};
use taskbench_core::graph::{DependenceType, KernelType};

/// Flags the systems add to the Task Bench flags.
pub const SYSTEM_FLAGS: [ExtraFlag; 3] = [
    ExtraFlag {
        name: "-system",
        takes_value: true,
    },
    ExtraFlag {
        name: "-worker",
        takes_value: true,
    },
    ExtraFlag {
        name: "-no-pin",
        takes_value: false,
    },
];

/// The system `taskbench` runs when `-system` is not given.
pub const DEFAULT_SYSTEM: &str = "bsp";

/// A failure, with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    /// One line, printed after `error: `.
    pub message: String,
    /// 2 for bad input, 1 for a failed run.
    pub code: u8,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 2,
        }
    }
}

fn help() -> String {
    let types: Vec<_> = DependenceType::ALL.iter().map(|t| t.name()).collect();
    let kernels: Vec<_> = KernelType::ALL
        .iter()
        .filter(|k| k.is_supported())
        .map(|k| k.name())
        .collect();
    format!(
        "taskbench: Task Bench (Slaughter et al., SC'20) for Tactor's systems\n\n\
         Usage: taskbench [GRAPH FLAGS] [-and GRAPH FLAGS ...] [GLOBAL FLAGS] [-system NAME] [-worker N]\n\
         \x20      taskbench --list\n\
         \x20      taskbench metg [--system A,B] [--external CMD] [--out DIR] [GRAPH FLAGS]  (taskbench metg -h)\n\
         \x20      taskbench metg analyze LOG... --cores N [--peak FLOPS] [--graphs G] [--json]\n\n\
         Graph flags (apply to the graph being built; -and starts the next one from the defaults):\n\
         \x20 -steps N        timesteps (default 4)\n\
         \x20 -width N        maximum width (default 4)\n\
         \x20 -type NAME      dependence type (default trivial): {}\n\
         \x20 -radix N        dependencies per task for nearest, spread, random_nearest (default 3)\n\
         \x20 -period N       dependence sets of spread and random_nearest (default 3)\n\
         \x20 -fraction F     fraction of random_nearest candidates kept (default 0.25)\n\
         \x20 -kernel NAME    task body (default empty): {}\n\
         \x20 -iter N         kernel iterations (default 0)\n\
         \x20 -output N       bytes each task outputs, >= 16 (default 16)\n\
         \x20 -scratch N      scratch bytes per point, a multiple of 8 (default 0)\n\
         \x20 -sample N       samples of the scratch buffer for memory_bound (default 16)\n\
         \x20 -imbalance F    load_imbalance spread in [0, 2] (default 0)\n\n\
         Global flags:\n\
         \x20 -nodes N        estimate local/nonlocal dependencies for N nodes in the report\n\
         \x20 -v, -vv         show each timestep's points and dependencies (-vv: and reverse ones)\n\
         \x20 -skip-graph-validation  skip the dependency mirror check before the run\n\
         \x20 -h              this help\n\n\
         System flags:\n\
         \x20 -system NAME    the system to run (default {DEFAULT_SYSTEM}; see --list)\n\
         \x20 -worker N       worker threads (default: the number of cores, {})\n\
         \x20 -no-pin         do not pin workers to cores\n",
        types.join(", "),
        kernels.join(", "),
        systems::default_workers()
    )
}

fn list() -> String {
    let mut s = String::from("Systems:\n");
    for sys in systems::all() {
        s.push_str(&format!("  {:<10} {}\n", sys.name(), sys.about()));
    }
    s
}

/// Parses the Task Bench and system flags into a configuration, a system and its run config.
pub fn parse_run(args: &[String]) -> Result<(App, Box<dyn systems::System>, RunConfig), Failure> {
    let (app, extras) =
        App::parse(args, &SYSTEM_FLAGS).map_err(|e| Failure::usage(e.to_string()))?;
    let mut cfg = RunConfig::default();
    let mut name = DEFAULT_SYSTEM.to_string();
    for (flag, value) in extras {
        let v = value.unwrap_or_default();
        match flag.as_str() {
            "-system" => name = v,
            "-worker" => {
                cfg.workers = match v.parse::<usize>() {
                    Ok(n) if n > 0 => n,
                    _ => {
                        return Err(Failure::usage(format!(
                            "Invalid flag \"-worker {v}\" must be an integer > 0"
                        )))
                    }
                }
            }
            "-no-pin" => cfg.pin = false,
            _ => unreachable!("only SYSTEM_FLAGS are returned"),
        }
    }
    let system = systems::by_name(&name).ok_or_else(|| {
        let names: Vec<_> = systems::all().iter().map(|s| s.name()).collect();
        Failure::usage(format!(
            "Invalid flag \"-system {name}\": expected one of {}",
            names.join(", ")
        ))
    })?;
    Ok((app, system, cfg))
}

/// Runs `system` on `app` and checks that it executed exactly the graph's tasks.
pub fn run_checked(
    system: &dyn systems::System,
    app: &App,
    cfg: &RunConfig,
) -> Result<systems::Pass, Failure> {
    let pass = system.run(app, cfg).map_err(|e| match e {
        RunError::Validation(v) => Failure {
            message: v.to_string(),
            code: 1,
        },
        RunError::Config(m) => Failure::usage(m),
        RunError::Runtime(m) => Failure {
            message: m,
            code: 1,
        },
    })?;
    let expected = app.totals().tasks as u64;
    if pass.tasks != expected {
        return Err(Failure {
            message: format!(
                "system {} executed {} tasks in the timed pass, but the graphs have {expected}",
                system.name(),
                pass.tasks
            ),
            code: 1,
        });
    }
    Ok(pass)
}

/// Runs the command line `args` (without the program name), writing to `out`.
pub fn run(args: &[String], out: &mut dyn Write) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure {
        message: format!("writing output: {e}"),
        code: 1,
    };
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return out.write_all(help().as_bytes()).map_err(io);
    }
    if args.first().map(String::as_str) == Some("--list") {
        return out.write_all(list().as_bytes()).map_err(io);
    }
    let (app, system, cfg) = parse_run(args)?;
    out.write_all(app.display().as_bytes()).map_err(io)?;
    out.flush().map_err(io)?;
    let pass = run_checked(system.as_ref(), &app, &cfg)?;
    out.write_all(app.report_timing(pass.elapsed.as_secs_f64()).as_bytes())
        .map_err(io)
}

/// The entry point of the `taskbench` binary.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("metg") {
        return match crate::metg::main(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(1)
            }
        };
    }
    let stdout = std::io::stdout();
    match run(&args, &mut stdout.lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
