//! `apps-study`: the strong-scaling study of PRK Stencil and CG — Tactor beside PRK and PETSc,
//! time per iteration against size, repetitions alternated, a table, CSV, JSON and a plot.

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;
use tactor_apps::study::{self, App, Peers, Row};

#[derive(Parser)]
#[command(
    name = "apps-study",
    version,
    about = "Strong scaling of tactor-apps' stencil and cg beside PRK and PETSc: time per iteration against size, median of alternated repetitions"
)]
struct Cli {
    /// Which applications
    #[arg(long, value_delimiter = ',', default_value = "stencil,cg", value_parser = ["stencil", "cg"])]
    apps: Vec<String>,
    /// Repetitions per size and contender (alternated)
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1000))]
    reps: u64,
    /// Sizes instead of the study's (grid side for stencil, unknowns for cg)
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<u64>,
    /// Tiles (stencil) or blocks (cg) per worker in Tactor's runs: 1 is the fastest
    /// placement; more over-decompose, where the analysis per launch dominates
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pieces: u64,
    /// Directory for the CSV, JSON and plots
    #[arg(long, default_value = "results/apps")]
    out: PathBuf,
    /// PRK's MPI1/Stencil/stencil, built outside this repository
    #[arg(long)]
    prk_mpi1: Option<String>,
    /// PRK's OPENMP/Stencil/stencil
    #[arg(long)]
    prk_openmp: Option<String>,
    /// PETSc's src/ksp/ksp/tutorials/ex23, built against petsc-dev
    #[arg(long)]
    petsc_ex23: Option<String>,
}

fn main() -> ExitCode {
    let cli: Cli = tactor_cli::args::parse();
    match study(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tactor_cli::say!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn study(cli: &Cli) -> Result<(), String> {
    let here = std::env::current_exe().map_err(|e| format!("where am I: {e}"))?;
    let tactor = here.with_file_name("tactor-apps");
    if !tactor.exists() {
        return Err(format!(
            "{} not found: cargo build --release -p tactor-apps",
            tactor.display()
        ));
    }
    let tactor = tactor.display().to_string();
    let peers = Peers {
        prk_mpi1: cli.prk_mpi1.clone(),
        prk_openmp: cli.prk_openmp.clone(),
        petsc_ex23: cli.petsc_ex23.clone(),
    };
    for (name, p) in [
        ("--prk-mpi1", &peers.prk_mpi1),
        ("--prk-openmp", &peers.prk_openmp),
        ("--petsc-ex23", &peers.petsc_ex23),
    ] {
        if let Some(p) = p.as_ref().filter(|p| !std::path::Path::new(p).exists()) {
            return Err(format!("{name} {p}: no such program"));
        }
    }
    std::fs::create_dir_all(&cli.out).map_err(|e| format!("{}: {e}", cli.out.display()))?;
    let mut rows = Vec::new();
    for app in &cli.apps {
        let app = if app == "stencil" {
            App::Stencil
        } else {
            App::Cg
        };
        let sizes = if cli.sizes.is_empty() {
            app.sizes()
        } else {
            cli.sizes.clone()
        };
        let who = study::contenders(app, &tactor, cli.pieces as usize, &peers);
        let total = sizes.len() * who.len() * cli.reps as usize;
        let mut done = 0;
        for &size in &sizes {
            let iterations = app.iterations(size);
            let mut times = vec![Vec::new(); who.len()];
            // Alternated: every contender once per round, the order turned each round.
            for rep in 0..cli.reps as usize {
                for k in 0..who.len() {
                    let c = (k + rep) % who.len();
                    let t = who[c].run(app, size, iterations)?;
                    done += 1;
                    eprintln!(
                        "[{done}/{total}] {} n={size} {}: {:.2} µs/iteration",
                        app.name(),
                        who[c].name,
                        t * 1e6
                    );
                    times[c].push(t);
                }
            }
            for (c, mut t) in who.iter().zip(times) {
                let (median_s, min_s, max_s) = study::summary(&mut t);
                rows.push(Row {
                    app,
                    size,
                    iterations,
                    contender: c.name.clone(),
                    median_s,
                    min_s,
                    max_s,
                    reps: t.len(),
                });
            }
        }
        let stem = format!("{}-scaling", app.name());
        for f in study::plot::draw(&cli.out, &stem, app, &rows)? {
            eprintln!("wrote {f}");
        }
    }
    write(cli, &rows)
}

fn write(cli: &Cli, rows: &[Row]) -> Result<(), String> {
    let csv_path = cli.out.join("apps-study.csv");
    let mut w = csv::Writer::from_path(&csv_path).map_err(|e| e.to_string())?;
    for r in rows {
        w.serialize(r).map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())?;
    let json = serde_json::to_string_pretty(rows).map_err(|e| e.to_string())?;
    std::fs::write(cli.out.join("apps-study.json"), json).map_err(|e| e.to_string())?;
    println!(
        "{:<8} {:>9} {:>6}  {:<22} {:>12} {:>12} {:>12}",
        "app", "size", "iters", "contender", "median µs", "min µs", "max µs"
    );
    for r in rows {
        println!(
            "{:<8} {:>9} {:>6}  {:<22} {:>12.2} {:>12.2} {:>12.2}",
            r.app.name(),
            r.size,
            r.iterations,
            r.contender,
            r.median_s * 1e6,
            r.min_s * 1e6,
            r.max_s * 1e6
        );
    }
    let speedups = study::traced_speedups(rows);
    if !speedups.is_empty() {
        println!(
            "\ntraced speed-up (untraced median / traced median), {} piece(s) a worker:",
            cli.pieces
        );
        for (app, size, place, ratio) in speedups {
            println!(
                "{:<8} {:>9}  {:<6} {:>6.2}x",
                app.name(),
                size,
                place,
                ratio
            );
        }
    }
    eprintln!("wrote {} and apps-study.json", csv_path.display());
    Ok(())
}
