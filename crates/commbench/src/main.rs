//! `commbench`: the communication micro-benchmarks of seed 002 on two ranks.
//!
//! A *chain* is a sequence of tasks that alternate between the two ranks: each task receives
//! one message and sends the next, carrying a fixed payload. `K` chains run concurrently for
//! `S` steps each. Latency rows run many steps (K = 1 … 4096 chains in flight); the message
//! rate row is one step of many chains, a flood from rank 0 to rank 1. Every pattern runs on
//! three implementations, alternated repetition by repetition inside one job so that they
//! see the same machine:
//! - `raw`: MPI directly, one pre-posted `Irecv` per chain, `Isend` per step (the floor);
//! - `parcelport`: the MPI parcelport style that seed 002 analyses: one pre-posted any-source
//!   receive for incoming messages, and sends kept in a request pool tested round-robin, one
//!   request per progress call, under a try-lock;
//! - `tactor`: `tactor-comm`'s MPI transport (active messages to a port, completion queue,
//!   try-lock progress); between ranks on one node its inline messages take the node-local
//!   rings unless `TACTOR_COMM_SHM=0`, and the report says which path they took.
//!
//! ```text
//! mpirun -np 2 commbench [--reps 7] [--out DIR]
//! ```

mod chains;
mod direct;
mod parcelport;
mod raw;
mod report;
mod tactor;

use anyhow::{bail, Context};

// The allocator Tactor's programs use (taskbench too), for every implementation alike.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use clap::Parser;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Most messages a latency row may ask for: about an hour of hops at MPI's latency.
const MAX_MESSAGES: u64 = 10_000_000_000;

/// Most messages of the flood: each is in flight at once (up to 16 KiB payload each).
const MAX_FLOOD: u64 = 100_000_000;

/// Micro-benchmarks of Tactor's communication layer against raw MPI and the parcelport
/// style, on exactly two ranks (`mpirun -np 2 commbench`).
#[derive(Parser, Debug)]
#[command(name = "commbench", version)]
struct Args {
    /// Repetitions of every row and implementation (alternated); the table shows the median
    /// and the spread (min..max).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// Messages per latency row (split over its chains).
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(100..=MAX_MESSAGES))]
    messages: u64,
    /// Messages of the flood (message-rate row).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(100..=MAX_FLOOD))]
    flood: u64,
    /// Directory for results.csv and results.json (rank 0 writes them).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() -> std::process::ExitCode {
    let code = match run() {
        Ok(()) => 0,
        Err(e) => {
            tactor_cli::say!("error: {e:#}");
            2
        }
    };
    if let Err(e) = tactor_cli::output::finish() {
        tactor_cli::say!("error: {e}");
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::from(code)
}

/// What rank 0 reports: the table, and the files in `--out`.
fn report(args: &Args, all: &[chains::Sample]) -> anyhow::Result<()> {
    tactor_cli::out!("{}", report::table(all));
    if let Some(dir) = &args.out {
        report::write(dir, all)?;
        tactor_cli::out!("Wrote {}/results.csv and results.json\n", dir.display());
    }
    Ok(())
}

fn run() -> anyhow::Result<()> {
    let other_rank = tactor_cli::args::other_rank();
    let args: Args = tactor_cli::args::parse();
    match tactor_comm::launcher::job() {
        Some((2, _)) => {}
        Some((n, rank)) => {
            if rank == 0 {
                bail!("commbench needs exactly 2 ranks, not {n}: mpirun -np 2 commbench");
            }
            std::process::exit(2);
        }
        None => bail!("commbench needs 2 ranks: run it as `mpirun -np 2 commbench` (as root, Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)"),
    }
    // Every flood message is in flight at once, its payload held by both sides.
    tactor_cli::limits::check(
        tactor_cli::limits::mul(args.flood, 2 * 1024u32),
        &format!("--flood {}", args.flood),
    )
    .map_err(anyhow::Error::msg)?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let args = Arc::new(args);
    let samples = Arc::new(Mutex::new(Vec::new()));
    if other_rank {
        tactor_cli::signals::exit_on_termination("commbench", true)?;
    } else {
        // Stopped (a scheduler's SIGTERM, Ctrl-C): the rows measured so far are reported.
        let (args, samples) = (args.clone(), samples.clone());
        tactor_cli::signals::on_termination(move |sig| {
            let all = samples.lock().unwrap_or_else(|p| p.into_inner());
            tactor_cli::say!(
                "commbench: stopped by {}; the table covers the {} measurements taken",
                tactor_cli::signals::name(sig),
                all.len()
            );
            if let Err(e) = report(&args, &all) {
                tactor_cli::say!("error: {e:#}");
            }
            if let Err(e) = tactor_cli::output::finish() {
                tactor_cli::say!("error: {e}");
            }
            // Not through MPI_Finalize: the other rank is being stopped too.
            // SAFETY: _exit ends the process at once; nothing of it is used after.
            unsafe { libc::_exit(128 + sig) }
        })?;
    }
    let net = tactor_comm::mpi::MpiTransport::init(1).context("starting MPI")?;
    let rows = chains::rows(args.messages, args.flood);
    chains::measure(&net, &rows, args.reps, &samples)?;
    if tactor_comm::Transport::rank(&net) == 0 {
        let all = samples.lock().unwrap_or_else(|p| p.into_inner()).clone();
        report(&args, &all)?;
        tactor_cli::out!(
            "tactor: inline messages went {}.\n",
            if net.node_local() {
                "through the node-local rings (TACTOR_COMM_SHM=0 sends them through MPI's path)"
            } else {
                "through MPI's point-to-point path (TACTOR_COMM_SHM=0)"
            }
        );
    }
    Ok(())
}
