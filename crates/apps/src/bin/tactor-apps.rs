//! `tactor-apps`: the Parallel Research Kernels' Stencil and conjugate gradients for the 1-D
//! Poisson problem, on Tactor's implicit face, in one process or on every rank under mpirun.

// An untraced launch allocates its task and events on the launching thread and a worker frees
// them: glibc serialises those frees on its arena lock (CG with 16 blocks a worker, untraced:
// 83-90 us an iteration on glibc, 48 on mimalloc), as in `taskbench`'s main.
#[cfg(not(miri))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};
use serde_json::json;
use std::process::ExitCode;
use std::sync::Arc;
use tactor::job::Job;
use tactor::Runtime;
use tactor_apps::{cg, launch, stencil};

#[derive(Parser)]
#[command(
    name = "tactor-apps",
    version,
    about = "Applications on Tactor's implicit face: the same program in one process or on every rank under mpirun"
)]
struct Cli {
    #[command(subcommand)]
    app: App,
    /// Workers per rank
    #[arg(short = 'w', long, global = true, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=256))]
    workers: u64,
    /// Record a fragment of iterations once and replay it
    #[arg(long, global = true)]
    trace: bool,
    /// Iterations per traced fragment
    #[arg(long, global = true, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    span: u64,
    /// Print one JSON object instead of text
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand)]
enum App {
    /// PRK Stencil: a radius-2 star stencil on an n x n grid, tiled over the workers
    Stencil {
        /// Timed iterations (one untimed sweep runs first, as in PRK)
        #[arg(short = 'i', long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        iterations: u64,
        /// The grid's side
        #[arg(short = 'n', long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
        n: u64,
        /// Tiles per worker (one: each worker streams its own contiguous rows)
        #[arg(short = 't', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=65_536))]
        tiles_per_worker: u64,
        /// Tiles across the grid, the rest down (default: closest to square, fewer across)
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=65_536))]
        across: Option<u64>,
    },
    /// Conjugate gradients for the 1-D Poisson problem (PETSc's ex23: tridiagonal [-1 2 -1], solution all ones)
    Cg {
        /// Unknowns
        #[arg(short = 'n', long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..=2_000_000_000))]
        n: u64,
        /// Iterations at most
        #[arg(short = 'k', long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
        iterations: u64,
        /// Stop once the residual is at most this fraction of the first (0: run every iteration)
        #[arg(long, default_value_t = 0.0, value_parser = tolerance)]
        tol: f64,
        /// Blocks of unknowns per worker
        #[arg(short = 'b', long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=65_536))]
        blocks_per_worker: u64,
        /// Skip the serial solve the result is checked against
        #[arg(long)]
        no_serial: bool,
    },
}

fn tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!("{s} is not a tolerance in [0, 1)")),
    }
}

fn main() -> ExitCode {
    let cli: Cli = match launch::parse("tactor-apps") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let workers = cli.workers as usize;
    let bytes = match cli.app {
        // in and out, with two generations of strips (small beside them).
        App::Stencil { n, .. } => (n as u128) * (n as u128) * 8 * 2,
        // x, r, p, q (and the serial check's as many again, in one process).
        App::Cg { n, .. } => (n as u128) * 8 * 8,
    };
    let (job, rt) = match launch::start("tactor-apps", workers, bytes, "the problem") {
        Ok(started) => started,
        Err(code) => return code,
    };
    let total = workers.saturating_mul(job.ranks());
    let report = match cli.app {
        App::Stencil {
            iterations,
            n,
            tiles_per_worker,
            across,
        } => {
            let p = stencil::Params {
                n: n as usize,
                iterations: iterations as usize,
                tiles_per_worker: tiles_per_worker as usize,
                across: across.map(|a| a as usize),
                traced: cli.trace,
                span: cli.span as usize,
                gather: false,
            };
            run_stencil(&rt, &job, p, &cli, total)
        }
        App::Cg {
            n,
            iterations,
            tol,
            blocks_per_worker,
            no_serial,
        } => {
            let p = cg::Params {
                n: n as usize,
                iterations: iterations as usize,
                tolerance: tol,
                blocks_per_worker: blocks_per_worker as usize,
                traced: cli.trace,
                span: cli.span as usize,
            };
            run_cg(&rt, &job, p, !no_serial, &cli)
        }
    };
    launch::finish(&job, report)
}

/// Where the run was: ranks, workers, traced.
fn placement(job: &Job, cli: &Cli) -> String {
    format!(
        "{} rank{} x {} worker{}{}",
        job.ranks(),
        if job.ranks() == 1 { "" } else { "s" },
        cli.workers,
        if cli.workers == 1 { "" } else { "s" },
        if cli.trace { ", traced" } else { "" }
    )
}

fn run_stencil(
    rt: &Runtime,
    job: &Arc<Job>,
    p: stencil::Params,
    cli: &Cli,
    workers: usize,
) -> Result<String, String> {
    stencil::check(p.n, workers * p.tiles_per_worker, p.across)?;
    let o = stencil::run(rt, job, p)?;
    let reference = stencil::reference_norm(p.iterations);
    if (o.norm - reference).abs() > stencil::EPSILON {
        return Err(format!(
            "the L1 norm is {}, not the reference {reference}",
            o.norm
        ));
    }
    let per = o.seconds / p.iterations as f64;
    let mflops = 1e-6 * stencil::flops(p.n) / per;
    Ok(if cli.json {
        json!({
            "app": "stencil", "n": p.n, "iterations": p.iterations, "radius": stencil::RADIUS,
            "ranks": job.ranks(), "workers": cli.workers, "tiles": [o.tiles.0, o.tiles.1],
            "traced": p.traced, "norm": o.norm, "reference_norm": reference,
            "seconds_per_iteration": per, "mflops": mflops,
            "launches_per_iteration": o.launches_per_iteration,
        })
        .to_string()
    } else {
        format!(
            "stencil: n = {}, {} iterations, radius {}, {} x {} tiles, {}: solution validates (L1 norm {})\nRate (MFlops/s): {:.3}  Avg time (s): {:.6}",
            p.n, p.iterations, stencil::RADIUS, o.tiles.0, o.tiles.1, placement(job, cli), o.norm, mflops, per
        )
    })
}

fn run_cg(
    rt: &Runtime,
    job: &Arc<Job>,
    p: cg::Params,
    against_serial: bool,
    cli: &Cli,
) -> Result<String, String> {
    let o = cg::run(rt, job, p)?;
    let (error, residual) = (o.error(), o.residual);
    if !residual.is_finite() || !error.is_finite() {
        return Err(format!(
            "the solve broke down: residual {residual}, error {error}"
        ));
    }
    let mut serial_note = String::new();
    if against_serial {
        let s = cg::serial(p);
        let scale = s.x.iter().map(|v| v * v).sum::<f64>().sqrt().max(1.0);
        let apart =
            o.x.iter()
                .zip(&s.x)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt();
        if s.iterations != o.iterations || apart > 1e-9 * scale {
            return Err(format!(
                "the solution differs from the serial solve's: {apart:e} apart after {} iterations ({} serial)",
                o.iterations, s.iterations
            ));
        }
        serial_note = format!(", within {apart:.1e} of the serial solve");
    }
    if p.tolerance > 0.0 && o.iterations == p.iterations {
        let first = cg::serial(cg::Params { iterations: 0, ..p }).residual;
        if residual > p.tolerance * first {
            return Err(format!(
                "did not converge to {} in {} iterations (residual {residual:e})",
                p.tolerance, p.iterations
            ));
        }
    }
    let per = o.seconds / o.iterations.max(1) as f64;
    Ok(if cli.json {
        json!({
            "app": "cg", "n": p.n, "iterations": o.iterations, "ranks": job.ranks(),
            "workers": cli.workers, "blocks_per_worker": p.blocks_per_worker, "traced": p.traced,
            "residual": residual, "error": error, "seconds_per_iteration": per,
            "checked_against_serial": against_serial,
            "launches_per_iteration": o.launches_per_iteration,
        })
        .to_string()
    } else {
        format!(
            "cg: {} unknowns, {} iterations, {}: residual {residual:.6e}, error {error:.6e}{serial_note}\nAvg time per iteration (s): {per:.6e}",
            p.n, o.iterations, placement(job, cli)
        )
    })
}
