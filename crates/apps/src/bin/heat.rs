//! `heat`: a 1-D heat equation over every worker of a job, checked against its serial result.

// An untraced launch allocates its task and events on the launching thread and a worker frees
// them: glibc serialises those frees on its arena lock (CG with 16 blocks a worker, untraced:
// 83-90 us an iteration on glibc, 48 on mimalloc), as in `taskbench`'s main.
#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use std::process::ExitCode;
use tactor_apps::{heat, launch};

#[derive(Parser)]
#[command(
    name = "heat",
    version,
    about = "A 1-D heat equation on Tactor's implicit face, one block of cells per worker of the job (in one process, or every rank's under mpirun), checked against the serial result"
)]
struct Cli {
    /// Cells per block
    #[arg(short = 'n', long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    cells: u64,
    /// Timesteps
    #[arg(short = 's', long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=100_000_000))]
    steps: u64,
    /// Workers per rank
    #[arg(short = 'w', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    workers: u64,
    /// Trace the timesteps (record a pair once, replay it)
    #[arg(long)]
    trace: bool,
}

fn main() -> ExitCode {
    let cli: Cli = match launch::parse("heat") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let workers = cli.workers as usize;
    let ranks = tactor_comm::launcher::job().map_or(1, |(n, _)| n);
    let blocks = workers.saturating_mul(ranks);
    let bytes = (cli.cells as u128) * (blocks as u128) * 8 * 3;
    let (job, rt) = match launch::start("heat", workers, bytes, "the rod") {
        Ok(started) => started,
        Err(code) => return code,
    };
    let fault = std::env::var("HEAT_FAULT").ok();
    let params = heat::Params {
        cells: cli.cells as usize,
        steps: cli.steps as usize,
        traced: cli.trace,
        fail_here: fault.and_then(|r| r.trim().parse::<usize>().ok()) == Some(job.rank()),
    };
    let result = heat::run(&rt, &job, params).and_then(|o| {
        let want = heat::serial(o.rod.len(), params.steps);
        let worst = o
            .rod
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        if worst > 1e-12 {
            return Err(format!(
                "the rod differs from the serial result by {worst:e}"
            ));
        }
        Ok(o)
    });
    let report = result.map(|o| {
        format!(
            "heat: {} cells, {} steps, {} ranks x {} workers{}: {:.4} s, checked against the serial result",
            o.rod.len(),
            params.steps,
            job.ranks(),
            workers,
            if params.traced { ", traced" } else { "" },
            o.seconds
        )
    });
    launch::finish(&job, report)
}
