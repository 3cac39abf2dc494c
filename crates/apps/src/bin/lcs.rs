//! `lcs`: the longest common subsequence of two strings as a wavefront of tiles over every
//! worker of a job, checked against the serial dynamic program.

// Tiles' edges are allocated by the worker that scores them and freed by their readers, often
// on another worker: as in `heat`, glibc would serialise those frees on its arena lock.
#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::Parser;
use std::process::ExitCode;
use tactor_apps::{launch, lcs};

#[derive(Parser)]
#[command(
    name = "lcs",
    version,
    about = "The longest common subsequence of two strings as a wavefront of tiles on Tactor's futures or one compiled subgraph, over every worker of the job (in one process, or every rank's under mpirun), checked against the serial result"
)]
struct Cli {
    /// Length of each string
    #[arg(short = 'n', long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=200_000))]
    length: u64,
    /// Side of a tile of the score table
    #[arg(short = 't', long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=200_000))]
    tile: u64,
    /// Workers per rank
    #[arg(short = 'w', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    workers: u64,
    /// How the tiles run: a task per tile on futures, or one compiled subgraph of the table
    #[arg(long, value_enum, default_value_t = Face::Futures)]
    face: Face,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Face {
    Futures,
    Compiled,
}

fn main() -> ExitCode {
    let cli: Cli = match launch::parse("lcs") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let workers = cli.workers as usize;
    if let Some(why) = lcs::refused(cli.length as usize, cli.tile as usize) {
        if let Some(line) = tactor_cli::args::bad_args_line(&why) {
            tactor_cli::say!("error: {line}");
        }
        return ExitCode::from(2);
    }
    // The strings, the serial check's row, and every tile's task and edges.
    let tiles = (cli.length.div_ceil(cli.tile) as u128).pow(2);
    let bytes = (cli.length as u128) * 16 + tiles * 1024 + (cli.length as u128) * 8 * 4;
    let (job, rt) = match launch::start("lcs", workers, bytes, "the strings") {
        Ok(started) => started,
        Err(code) => return code,
    };
    let fault = std::env::var("LCS_FAULT").ok();
    let params = lcs::Params {
        length: cli.length as usize,
        tile: cli.tile as usize,
        fail_here: fault.and_then(|r| r.trim().parse::<usize>().ok()) == Some(job.rank()),
        face: match cli.face {
            Face::Futures => lcs::Face::Futures,
            Face::Compiled => lcs::Face::Compiled,
        },
    };
    let result = lcs::run(&rt, &job, params).and_then(|o| {
        let (a, b) = lcs::strings(params.length);
        match lcs::serial(&a, &b) {
            want if want == o.lcs => Ok(o),
            want => Err(format!(
                "the wavefront found {} where the serial program finds {want}",
                o.lcs
            )),
        }
    });
    let report = result.map(|o| {
        format!(
            "lcs: two strings of {}, {} tiles on {}, {} ranks x {} workers: length {} in {:.4} s, checked against the serial result",
            params.length,
            o.tiles,
            match params.face {
                lcs::Face::Futures => "futures",
                lcs::Face::Compiled => "a compiled subgraph",
            },
            job.ranks(),
            workers,
            o.lcs,
            o.seconds
        )
    });
    launch::finish(&job, report)
}
