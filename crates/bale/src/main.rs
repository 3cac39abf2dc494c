//! `bale`: run a Bale mini-app on Tactor's selectors and print its time and rate.

// mimalloc: aggregation hands whole buffers between threads, freed on the receiving side.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bale::apps::{self, histogram, index_gather, randperm, reshape, toposort, triangles, Outcome};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "bale",
    version,
    about = "The Bale mini-apps on Tactor's actors and selectors (one PE per worker), each checking its answer"
)]
struct Cli {
    #[command(subcommand)]
    app: App,
}

#[derive(Subcommand)]
enum App {
    /// Every PE adds 1 to -n random entries of a table of -T entries per PE
    Histogram {
        /// Updates per PE
        #[arg(short = 'n', default_value_t = 1_000_000)]
        updates: u64,
        /// Table entries per PE
        #[arg(short = 'T', default_value_t = 1000)]
        table: u64,
        /// How the handler is written
        #[arg(long, value_enum, default_value_t = Model::Selector)]
        model: Model,
        #[command(flatten)]
        common: Common,
    },
    /// Every PE reads -n random entries of a table of -T entries per PE (request, then reply)
    Ig {
        /// Requests per PE
        #[arg(short = 'n', default_value_t = 1_000_000)]
        requests: u64,
        /// Table entries per PE
        #[arg(short = 'T', default_value_t = 100_000)]
        table: u64,
        /// How it is written (no lambda version)
        #[arg(long, value_enum, default_value_t = Model::Selector)]
        model: Model,
        #[command(flatten)]
        common: Common,
    },
    /// Transposes a sparse matrix (checked against the serial transpose)
    Transpose {
        #[command(flatten)]
        matrix: MatrixArgs,
    },
    /// Permutes the rows and columns of a sparse matrix at random (checked against the serial
    /// permutation)
    Permute {
        #[command(flatten)]
        matrix: MatrixArgs,
    },
    /// Finds the row and column permutations that make a morally upper-triangular matrix
    /// upper triangular (generated: a permuted upper triangle with a full diagonal)
    Toposort {
        #[command(flatten)]
        matrix: MatrixArgs,
    },
    /// Counts the triangles of a graph (generated: Erdős–Rényi of average degree -z; or the
    /// pattern of -f, taken as undirected)
    Triangles {
        #[command(flatten)]
        matrix: MatrixArgs,
        /// A Kronecker product graph instead, Bale's `-K MODE:S1xS2x...` (the product of the
        /// stars K(1,Si); MODE 1 or 2 puts loops that make triangles): its count is also
        /// checked against the closed form
        #[arg(short = 'K')]
        kronecker: Option<String>,
    },
    /// A random permutation of -n values per PE by dart throwing (checked: each value once)
    Randperm {
        /// Values per PE
        #[arg(short = 'n', default_value_t = 1_000_000)]
        per_pe: u64,
        /// How it is written (selector or agp)
        #[arg(long, value_enum, default_value_t = Model::Selector)]
        model: Model,
        #[command(flatten)]
        common: Common,
    },
}

/// A sparse matrix input: a Matrix Market file, or a random graph.
#[derive(Args)]
struct MatrixArgs {
    /// The generated matrix's graph
    #[arg(long, value_enum, default_value_t = GraphKind::Er)]
    graph: GraphKind,
    /// Rows (and columns) per PE of the generated matrix
    #[arg(short = 'n', default_value_t = 10_000)]
    rows: u64,
    /// Nonzeros per row of the generated matrix, on average
    #[arg(short = 'z', default_value_t = 10.0, allow_negative_numbers = true)]
    per_row: f64,
    /// Read the matrix from this Matrix Market file instead
    #[arg(short = 'f', long = "file")]
    file: Option<std::path::PathBuf>,
    /// How it is written (selector or agp)
    #[arg(long, value_enum, default_value_t = Model::Selector)]
    model: Model,
    #[command(flatten)]
    common: Common,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum GraphKind {
    /// Erdős–Rényi (uniform)
    Er,
    /// Random geometric (local)
    Geometric,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Model {
    /// A selector with a typed handler
    Selector,
    /// A selector with closures as messages (the seed's lambda style)
    Lambda,
    /// Baseline: one remote operation (atomic, get) per update
    Agp,
    /// Baseline: bulk-synchronous exchange of per-destination buffers
    Exstack,
}

#[derive(Args)]
struct Common {
    /// PEs (worker threads of this process); default: the cores this process may use
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pes: Option<u64>,
    /// Seed of the random streams
    #[arg(short = 's', long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of a line
    #[arg(long)]
    json: bool,
}

fn runtime(c: &Common) -> Result<tactor::Runtime, String> {
    let pes = c.pes.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |p| p as usize,
    );
    tactor::Runtime::builder()
        .workers(pes)
        .build()
        .map_err(|e| format!("could not start {pes} PEs: {e}"))
}

/// What runs on several ranks so far.
const ON_RANKS: &str = "histogram and ig with --model selector";

/// What a run on several ranks refuses, for now.
fn ranks_only(what: &str) -> String {
    format!(
        "on several ranks only {what} runs so far; run this app in one process (without mpirun)"
    )
}

fn run(cli: Cli) -> Result<(Outcome, bool), String> {
    if !matches!(cli.app, App::Histogram { .. } | App::Ig { .. })
        && tactor_comm::launcher::job().is_some_and(|(n, _)| n > 1)
    {
        return Err(ranks_only(ON_RANKS));
    }
    match cli.app {
        App::Histogram {
            updates,
            table,
            model,
            common,
        } => {
            let rt = runtime(&common)?;
            let p = histogram::Params {
                updates,
                table,
                seed: common.seed,
            };
            if let Some(c) = bale::net::Cluster::join(rt.workers())? {
                if model != Model::Selector {
                    return Err(ranks_only(ON_RANKS));
                }
                let o = histogram::selector_on_ranks(&rt, &c, &p)?;
                return Ok((o, common.json));
            }
            let o = match model {
                Model::Selector => histogram::selector(&rt, &p)?,
                Model::Lambda => histogram::lambda(&rt, &p)?,
                Model::Agp => histogram::agp(&rt, &p)?,
                Model::Exstack => histogram::exstack(&rt, &p)?,
            };
            Ok((o, common.json))
        }
        App::Ig {
            requests,
            table,
            model,
            common,
        } => {
            let p = index_gather::Params {
                requests,
                table,
                seed: common.seed,
            };
            let run = match model {
                Model::Selector => index_gather::selector,
                Model::Agp => index_gather::agp,
                Model::Exstack => index_gather::exstack,
                Model::Lambda => {
                    return Err("--model lambda: ig has no lambda version (histogram has)".into())
                }
            };
            let rt = runtime(&common)?;
            if let Some(c) = bale::net::Cluster::join(rt.workers())? {
                if model != Model::Selector {
                    return Err(ranks_only(ON_RANKS));
                }
                let o = index_gather::selector_on_ranks(&rt, &c, &p)?;
                return Ok((o, common.json));
            }
            Ok((run(&rt, &p)?, common.json))
        }
        App::Transpose { matrix } => reshape_app(&matrix, |_| reshape::Op::Transpose),
        App::Permute { matrix } => {
            let seed = matrix.common.seed;
            reshape_app(&matrix, |m| reshape::Op::random_permutation(m, seed))
        }
        App::Toposort { matrix: a } => {
            let run = if agp_model(a.model)? {
                toposort::agp
            } else {
                toposort::selector
            };
            let rt = runtime(&a.common)?;
            let m = match &a.file {
                Some(f) => bale::matrix::mm::read(f)?,
                None => toposort::morally_upper(&input(&a, rt.workers())?, a.common.seed)?,
            };
            Ok((run(&rt, &m)?, a.common.json))
        }
        App::Triangles {
            matrix: a,
            kronecker,
        } => {
            let run = if agp_model(a.model)? {
                triangles::agp
            } else {
                triangles::selector
            };
            let rt = runtime(&a.common)?;
            let (l, known) = match (&a.file, &kronecker) {
                (Some(_), Some(_)) => return Err("-f and -K: give one input".into()),
                (_, Some(k)) => {
                    let (l, known) = triangles::kronecker(k)?;
                    (l, Some(known))
                }
                (_, None) => (triangles::lower_of(&input(&a, rt.workers())?)?, None),
            };
            let o = run(&rt, &l)?;
            if let (Some(k), Some(got)) = (known, o.result) {
                if k != got {
                    return Err(format!(
                        "triangles: counted {got}, the closed form says {k}"
                    ));
                }
            }
            Ok((o, a.common.json))
        }
        App::Randperm {
            per_pe,
            model,
            common,
        } => {
            let p = randperm::Params {
                per_pe,
                seed: common.seed,
            };
            let run = if agp_model(model)? {
                randperm::agp
            } else {
                randperm::selector
            };
            let rt = runtime(&common)?;
            Ok((run(&rt, &p)?.0, common.json))
        }
    }
}

/// Whether `model` asks for the AGP version of an app written as a selector and in the AGP
/// model only.
fn agp_model(model: Model) -> Result<bool, String> {
    match model {
        Model::Selector => Ok(false),
        Model::Agp => Ok(true),
        Model::Lambda | Model::Exstack => Err(
            "--model: this app has a selector and an agp version (lambda and exstack: histogram, ig)"
                .into(),
        ),
    }
}

/// The app's matrix (`-f`, or the `--graph` of `-n` rows per PE and `-z` per row).
fn input(a: &MatrixArgs, pes: usize) -> Result<bale::matrix::Matrix, String> {
    let graph = match a.graph {
        GraphKind::Er => bale::matrix::Graph::ErdosRenyi,
        GraphKind::Geometric => bale::matrix::Graph::Geometric,
    };
    let file = a.file.as_deref();
    bale::matrix::input(file, graph, a.rows, a.per_row, pes, a.common.seed)
}

/// Transpose or permute: the input, then the model.
fn reshape_app(
    a: &MatrixArgs,
    op: impl FnOnce(&bale::matrix::Matrix) -> reshape::Op,
) -> Result<(Outcome, bool), String> {
    let run = match a.model {
        Model::Selector => reshape::selector,
        Model::Agp => reshape::agp,
        Model::Exstack => reshape::exstack,
        Model::Lambda => return Err("--model lambda: only histogram has a lambda version".into()),
    };
    let rt = runtime(&a.common)?;
    let m = input(a, rt.workers())?;
    let op = op(&m);
    Ok((run(&rt, &m, &op)?, a.common.json))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok((o, json)) => {
            if tactor_comm::launcher::job().is_some_and(|(n, r)| n > 1 && r > 0) {
                // Rank 0 reports for the job.
                return ExitCode::SUCCESS;
            }
            if json {
                println!("{}", serde_json::to_string(&o).expect("plain data"));
            } else {
                print_line(&o);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_line(o: &apps::Outcome) {
    let found = o.result.map_or(String::new(), |r| format!(", {r} found"));
    println!(
        "{} ({}, {} PEs): {:.4} s, {:.2} M {}/s, {} {} checked{found}",
        o.app, o.model, o.pes, o.seconds, o.rate_millions, o.unit, o.operations, o.unit
    );
}
