//! The command line: `taskbench [Task Bench flags] [-system NAME] [-worker N]`, `taskbench
//! --list`, `taskbench -h`.

use crate::systems::{self, RunConfig, RunError, MAX_WORKERS};
use std::io::Write;
use std::process::ExitCode;
use tactor::job::{Job, Reduce};
use taskbench_core::app::{check_memory, App, ExtraFlag};
use taskbench_core::graph::{DependenceType, KernelType, TaskGraph};

/// Flags the systems add to the Task Bench flags.
pub const SYSTEM_FLAGS: [ExtraFlag; 4] = [
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
    // `-system NAME -barrier` is `-system NAME-barrier` (futures: seed 004's per-step barrier).
    ExtraFlag {
        name: "-barrier",
        takes_value: false,
    },
];

/// The system `taskbench` runs when `-system` is not given.
pub const DEFAULT_SYSTEM: &str = "bsp";

/// `taskbench --job`: prints `job: rank R of N` as the launcher started this process (`metg`
/// checks a `--launcher` with it before trusting its runs to be on N ranks).
pub const JOB_FLAG: &str = "--job";

/// Points per timestep from which the setup is announced on stderr.
const LARGE_WIDTH: i64 = 1_000_000;

/// `taskbench --version`: the crate version and the git revision it was built from.
pub fn version() -> String {
    format!(
        "taskbench {} ({})",
        env!("CARGO_PKG_VERSION"),
        env!("TASKBENCH_GIT_REVISION")
    )
}

/// A failure, with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    /// One line, printed after `error: `; empty when nothing is to be printed (another rank
    /// reports the cause).
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

    fn run(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 1,
        }
    }

    /// The same failure, printed by one rank only: every rank of a job parses the same
    /// command line, and one line is enough.
    fn once(mut self) -> Failure {
        if tactor_cli::args::other_rank() {
            self.message.clear();
        }
        self
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
         \x20      taskbench --job    (prints the rank and rank count its launcher gave it)\n\
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
         \x20 -h, --help      this help (--version: the version and git revision)\n\n\
         System flags:\n\
         \x20 -system NAME    the system to run (default {DEFAULT_SYSTEM}; see --list)\n\
         \x20 -worker N       worker threads (default: the number of cores, {})\n\
         \x20 -no-pin         do not pin workers to cores\n\
         \x20 -barrier        with -system futures: a barrier after each timestep (= futures-barrier)\n\n\
         On several ranks (systems that say so in --list): mpirun -np R taskbench -system compiled -worker W ...\n\
         points are block-distributed over the R x W workers; rank 0 prints the report.\n",
        types.join(", "),
        kernels.join(", "),
        systems::default_workers()
    )
}

fn list() -> String {
    let mut s = String::from("Systems:\n");
    let all = systems::all();
    let pad = all.iter().map(|sys| sys.name().len()).max().unwrap_or(0);
    for sys in all {
        s.push_str(&format!("  {:<pad$} {}\n", sys.name(), sys.about()));
    }
    s
}

/// Parses the Task Bench and system flags into a configuration, a system and its run config.
pub fn parse_run(args: &[String]) -> Result<(App, Box<dyn systems::System>, RunConfig), Failure> {
    let (app, extras) =
        App::parse(args, &SYSTEM_FLAGS).map_err(|e| Failure::usage(e.to_string()))?;
    let mut cfg = RunConfig::default();
    let mut name = DEFAULT_SYSTEM.to_string();
    let mut barrier = false;
    for (flag, value) in extras {
        let v = value.unwrap_or_default();
        match flag.as_str() {
            "-system" => name = v,
            "-worker" => {
                cfg.workers = match v.trim().parse::<usize>() {
                    Ok(n) if n > 0 && n <= MAX_WORKERS => n,
                    _ => {
                        return Err(Failure::usage(format!(
                        "Invalid flag \"-worker {v}\" must be an integer from 1 to {MAX_WORKERS}"
                    )))
                    }
                }
            }
            "-no-pin" => cfg.pin = false,
            "-barrier" => barrier = true,
            _ => unreachable!("only SYSTEM_FLAGS are returned"),
        }
    }
    // A system with a per-step barrier variant is registered as `NAME-barrier`.
    if barrier && !name.ends_with("-barrier") {
        if systems::by_name(&format!("{name}-barrier")).is_none() {
            return Err(Failure::usage(format!(
                "Invalid flag \"-barrier\": -system {name} has no barrier variant (futures has)"
            )));
        }
        name.push_str("-barrier");
    }
    let system = systems::by_name(&name).ok_or_else(|| {
        let names: Vec<_> = systems::all().iter().map(|s| s.name()).collect();
        Failure::usage(format!(
            "Invalid flag \"-system {name}\": expected one of {}",
            names.join(", ")
        ))
    })?;
    let plans = app
        .graphs
        .iter()
        .map(TaskGraph::plan_bytes)
        .fold(0, u128::saturating_add);
    let needed = plans.saturating_add(system.memory(&app, &cfg));
    let what = format!("this run (-system {name}, -worker {})", cfg.workers);
    check_memory(needed, &what).map_err(|e| Failure::usage(e.to_string()))?;
    Ok((app, system, cfg))
}

/// Runs `system` on `app` and checks that it executed exactly the graph's tasks.
pub fn run_checked(
    system: &dyn systems::System,
    app: &App,
    cfg: &RunConfig,
) -> Result<systems::Pass, Failure> {
    let mut pass = system.run(app, cfg).map_err(|e| match e {
        RunError::Validation(v) => Failure::run(v.to_string()),
        RunError::Config(m) => Failure::usage(m),
        RunError::Runtime(m) => Failure::run(m),
        RunError::Remote { .. } => Failure::run(""),
    });
    if let Some(c) = &cfg.job {
        pass = match pass {
            Ok(p) => combine_ranks(c, p),
            Err(mut f) if !f.message.is_empty() => {
                // This rank failed: it tells every other rank (each then gives this one time
                // to print before it ends), and the caller says why, naming this rank, and
                // ends at once (with the message kept, it does not wait for a speaker).
                c.tell_failure(&f.message);
                f.message = format!("rank {}: {}", c.rank(), f.message);
                Err(f)
            }
            Err(f) => Err(f),
        };
    }
    let pass = pass?;
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

/// The job's pass: the slowest rank's time (each rank times from the same barrier, as the
/// reference MPI programs do) and the tasks of every rank.
fn combine_ranks(c: &Job, p: systems::Pass) -> Result<systems::Pass, Failure> {
    let stopped = |_| Failure::run("");
    let nanos = u64::try_from(p.elapsed.as_nanos()).unwrap_or(u64::MAX);
    let elapsed = c.all_reduce(Reduce::Max, nanos).map_err(stopped)?;
    let tasks = c.all_reduce(Reduce::Sum, p.tasks).map_err(stopped)?;
    Ok(systems::Pass {
        elapsed: std::time::Duration::from_nanos(elapsed),
        tasks,
    })
}

/// Joins the job when launched on several ranks, and checks that the run can use them.
fn join_ranks(
    app: &mut App,
    system: &dyn systems::System,
    cfg: &mut RunConfig,
    args: &[String],
) -> Result<(), Failure> {
    if tactor_comm::launcher::job().is_none_or(|(n, _)| n < 2) {
        return Ok(());
    }
    if !system.runs_on_ranks() {
        let on: Vec<_> = systems::all()
            .into_iter()
            .filter(|s| s.runs_on_ranks())
            .map(|s| s.name())
            .collect();
        let cause = format!(
            "-system {} runs in one process only; on several ranks use {}",
            system.name(),
            on.join(", ")
        );
        // Said through the job: another rank may have been started with another system.
        return Err(Failure::usage(
            tactor_cli::args::bad_args_line(&cause).unwrap_or_default(),
        ));
    }
    let one_thread = system.one_thread_on_ranks(cfg.workers);
    let builder = Job::builder()
        .program("taskbench")
        .channels(cfg.workers)
        .config(args)
        .agree_on(format!("workers={}", cfg.workers));
    let builder = if one_thread {
        // SAFETY: a system that runs on one thread with these workers says so, and nothing
        // of this command starts a thread before or beside it (the `metg` driver, which
        // does, never runs under a launcher).
        unsafe { builder.one_thread() }
    } else {
        builder
    };
    // Ranks started differently are refused here, with one line naming the difference.
    let c = tactor_cli::signals::silent_unless_ok(|| builder.join()).map_err(|e| {
        let rank = tactor_comm::launcher::job().map_or(0, |(_, r)| r);
        let message = if e.speaks(rank) {
            e.to_string()
        } else {
            String::new()
        };
        Failure { message, code: 2 }
    })?;
    // More ranks than points is a job where some ranks own no point of a graph: they take
    // part in its collectives and wait, as the reference's ranks do.
    app.place(taskbench_core::app::Placement {
        ranks: c.ranks() as i64,
        workers: cfg.workers as i64,
    })
    .map_err(|e| Failure::usage(e.to_string()).once())?;
    cfg.job = Some(c);
    Ok(())
}

/// Runs the command line `args` (without the program name), writing to `out`.
pub fn run(args: &[String], out: &mut dyn Write) -> Result<(), Failure> {
    let io = |e: std::io::Error| Failure {
        message: format!("writing output: {e}"),
        code: 1,
    };
    // Help, version and the list are the same on every rank of a job: rank 0 prints them.
    let mut sink = std::io::sink();
    let out: &mut dyn Write =
        if tactor_cli::args::other_rank() && args.first().map(String::as_str) != Some(JOB_FLAG) {
            &mut sink
        } else {
            out
        };
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return quiet_on_closed_pipe(out.write_all(help().as_bytes()))
            .map(|_| ())
            .map_err(io);
    }
    if args.iter().any(|a| a == "--version" || a == "-V") {
        return quiet_on_closed_pipe(writeln!(out, "{}", version()))
            .map(|_| ())
            .map_err(io);
    }
    if args.first().map(String::as_str) == Some(JOB_FLAG) {
        let (n, r) = tactor_comm::launcher::job().unwrap_or((1, 0));
        return quiet_on_closed_pipe(writeln!(out, "job: rank {r} of {n}"))
            .map(|_| ())
            .map_err(io);
    }
    if args.first().map(String::as_str) == Some("--list") {
        return quiet_on_closed_pipe(out.write_all(list().as_bytes()))
            .map(|_| ())
            .map_err(io);
    }
    // A rank whose arguments are wrong still joins the job to say so: every rank ends, and
    // the job prints one line (naming the rank when it alone was started so).
    let (mut app, system, mut cfg) = parse_run(args).map_err(|mut f| {
        f.message = tactor_cli::args::bad_args_line(&f.message).unwrap_or_default();
        f
    })?;
    join_ranks(&mut app, system.as_ref(), &mut cfg, args)?;
    // On several ranks, rank 0 alone prints, as in the reference MPI programs.
    let printer = cfg.job.as_ref().is_none_or(|c| c.rank() == 0);
    let width: i64 = app.graphs.iter().map(|g| g.max_width).sum();
    if width >= LARGE_WIDTH && printer {
        // Setting up buffers and plans this wide takes seconds to minutes before the run.
        tactor_cli::say!("taskbench: setting up {width} points per timestep; this takes a while");
    }
    // A reader that went away (`| head -1`) does not stop the run or turn it into an error:
    // the report is simply not shown.
    let shown = quiet_on_closed_pipe(
        out.write_all(app.display().as_bytes())
            .and_then(|_| out.flush()),
    )
    .map_err(io)?;
    let pass = match run_checked(system.as_ref(), &app, &cfg) {
        Ok(p) => p,
        Err(f) if cfg.job.is_some() => {
            // Not through MPI_Finalize: it waits for every rank, and a failing job's ranks
            // need not all get there.
            if !f.message.is_empty() {
                tactor_cli::say!("error: {}", f.message);
                tactor_cli::signals::silence();
            } else {
                // Another rank reports: exiting first, this rank could end the job (the
                // launcher ends it at the first rank that exits) before that line is out.
                tactor_cli::signals::let_another_rank_speak();
            }
            std::process::exit(f.code.into())
        }
        Err(f) => return Err(f),
    };
    if shown.is_some() {
        let report = app.report_timing(pass.elapsed.as_secs_f64());
        quiet_on_closed_pipe(out.write_all(report.as_bytes())).map_err(io)?;
    }
    Ok(())
}

/// `Ok(Some(()))` for a write that worked, `Ok(None)` for one whose reader closed the pipe
/// (the program then ends quietly, as `cat` does), the error otherwise.
pub fn quiet_on_closed_pipe(r: std::io::Result<()>) -> std::io::Result<Option<()>> {
    match r {
        Ok(()) => Ok(Some(())),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(None),
        Err(e) => Err(e),
    }
}

/// The entry point of the `taskbench` binary.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match args.first().map(String::as_str) {
        Some("metg") => Some(crate::metg::main as fn(&[String]) -> anyhow::Result<()>),
        Some("study") => Some(crate::study::main as fn(&[String]) -> anyhow::Result<()>),
        _ => None,
    };
    if let Some(command) = command {
        let code = match command(&args[1..]) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tactor_cli::say!("error: {e:#}");
                // Bad input is 2, as for the runs; a failed sweep is 1.
                ExitCode::from(if e.is::<crate::metg::Usage>() { 2 } else { 1 })
            }
        };
        // A table that could not be written (a full disk) is a failure too.
        return match tactor_cli::output::finish() {
            Ok(()) => code,
            Err(e) => {
                tactor_cli::say!("error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // A scheduler's SIGTERM or a hang-up ends a run with one line (from rank 0 of a job).
    let quiet = tactor_cli::args::other_rank();
    if let Err(e) = tactor_cli::signals::exit_on_termination("taskbench", quiet) {
        tactor_cli::say!("error: could not handle termination signals: {e}");
        return ExitCode::FAILURE;
    }
    let stdout = std::io::stdout();
    match run(&args, &mut stdout.lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                tactor_cli::say!("error: {}", f.message);
            } else {
                // Another rank prints the line (`Failure::once`, a verdict, a failed rank).
                tactor_cli::signals::let_another_rank_speak();
            }
            ExitCode::from(f.code)
        }
    }
}
