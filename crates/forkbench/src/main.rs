//! `forkbench`: fork-join, tree-search and parallel-loop micro-benchmarks, Tactor against rayon
//! and any peer program that speaks the same protocol (the oneTBB and OpenMP programs in
//! `peers/`, built by `scripts/forkbench.sh`).
//!
//! Every contender runs in a process of its own, one after another in a rotating order, so no
//! two pools of spinning workers share the cores; each process warms up once and times
//! `--inner` runs. The protocol, for Tactor, rayon and the peers alike:
//! `PROGRAM BENCH WORKERS SIZE SPIN INNER` prints one line `SECONDS CHECK` per timed run.

use mimalloc::MiMalloc;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

mod compare;
mod kernels;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "forkbench",
    version,
    about = "Fork-join (fib), tree-search (a UTS T1-shaped geometric tree) and parallel-loop \
             micro-benchmarks: Tactor against rayon, and oneTBB and OpenMP peers given with --peer"
)]
struct Cli {
    #[command(subcommand)]
    one: Option<One>,
    #[command(flatten)]
    compare: compare::Options,
}

#[derive(Subcommand, Debug)]
enum One {
    /// Runs one contender in this process (the protocol every peer speaks).
    Run {
        /// tactor or rayon
        system: String,
        /// fib, tree or loop
        bench: String,
        workers: usize,
        /// fib: n; tree: depth limit; loop: iterations
        size: u64,
        /// loop: xorshift steps a body takes
        spin: u32,
        /// timed runs after one warm-up
        inner: usize,
    },
}

fn main() {
    tactor_cli::signals::exit_on_termination("forkbench", false).ok();
    let cli: Cli = tactor_cli::args::parse();
    let result = match cli.one {
        Some(One::Run {
            system,
            bench,
            workers,
            size,
            spin,
            inner,
        }) => run_one(&system, &bench, workers, size, spin, inner),
        None => compare::run(&cli.compare),
    };
    let result = result.and_then(|()| tactor_cli::output::finish().map_err(anyhow::Error::msg));
    if let Err(e) = result {
        tactor_cli::say!("forkbench: {e:#}");
        std::process::exit(1);
    }
}

/// Times `inner` runs of `bench` on `system` after a warm-up, printing each.
fn run_one(
    system: &str,
    bench: &str,
    workers: usize,
    size: u64,
    spin: u32,
    inner: usize,
) -> Result<()> {
    if workers == 0 {
        bail!("workers must be at least 1, got 0");
    }
    let job = Job::parse(bench, size, spin)?;
    match system {
        "tactor" => {
            let rt = tactor::Runtime::builder()
                .workers(workers)
                .build()
                .context("starting Tactor's workers")?;
            time_runs(inner, || rt.run(|| job.run(&kernels::Tactor)))
        }
        "rayon" => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(workers)
                .build()
                .context("starting rayon's pool")?;
            time_runs(inner, || pool.install(|| job.run(&kernels::Rayon)))
        }
        other => bail!("unknown system '{other}' (tactor or rayon)"),
    }
}

fn time_runs(inner: usize, mut f: impl FnMut() -> u64) -> Result<()> {
    f();
    for _ in 0..inner {
        let t = Instant::now();
        let check = f();
        tactor_cli::out!("{:.9} {check}\n", t.elapsed().as_secs_f64());
    }
    Ok(())
}

/// One benchmark with its size.
#[derive(Clone, Copy, Debug)]
enum Job {
    Fib(u64),
    Tree(u32),
    Loop(usize, u32),
}

impl Job {
    fn parse(bench: &str, size: u64, spin: u32) -> Result<Job> {
        Ok(match bench {
            "fib" if size <= 50 => Job::Fib(size),
            "fib" => {
                bail!("fib size must be at most 50 (its run time doubles with each), got {size}")
            }
            "tree" if size <= 20 => Job::Tree(size as u32),
            "tree" => bail!("tree depth must be at most 20, got {size}"),
            "loop" if size <= 1 << 28 => Job::Loop(size as usize, spin),
            "loop" => bail!("loop size must be at most 2^28 iterations, got {size}"),
            other => bail!("unknown benchmark '{other}' (fib, tree or loop)"),
        })
    }

    fn run<S: kernels::Styles>(self, s: &S) -> u64 {
        match self {
            Job::Fib(n) => kernels::fib(s, n),
            Job::Tree(limit) => kernels::tree(s, kernels::tree_root(), 0, limit),
            Job::Loop(n, spin) => kernels::parallel_loop(s, n, spin),
        }
    }
}
