//! `bale`: run a Bale mini-app on Tactor's selectors and print its time and rate.

// mimalloc: aggregation hands whole buffers between threads, freed on the receiving side.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use bale::apps::{
    self, histogram, index_gather, randperm, reshape, toposort, triangles, Outcome, Pes,
};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::process::ExitCode;
use std::sync::Arc;
use tactor::job::Job;

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
    #[command(alias = "histo")]
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
    #[command(alias = "transpose_matrix")]
    Transpose {
        #[command(flatten)]
        matrix: MatrixArgs,
    },
    /// Permutes the rows and columns of a sparse matrix at random (checked against the serial
    /// permutation)
    #[command(alias = "permute_matrix")]
    Permute {
        #[command(flatten)]
        matrix: MatrixArgs,
    },
    /// Finds the row and column permutations that make a morally upper-triangular matrix
    /// upper triangular (generated: a permuted upper triangle with a full diagonal, -z
    /// nonzeros per row with the diagonal, as in Bale)
    #[command(alias = "topo")]
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
        #[arg(short = 'K', conflicts_with_all = ["file", "rows", "per_row", "graph"])]
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
    #[arg(short = 'f', long = "file", conflicts_with_all = ["rows", "per_row", "graph"])]
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

fn runtime(pes: usize) -> Result<tactor::Runtime, String> {
    tactor::Runtime::builder()
        .workers(pes)
        .build()
        .map_err(|e| format!("could not start {pes} PEs: {e}"))
}

/// The PEs this process runs (`--pes`, or the cores it may use).
fn pes_of(c: &Common) -> usize {
    c.pes.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |p| p as usize,
    )
}

impl App {
    fn common(&self) -> &Common {
        match self {
            App::Histogram { common, .. }
            | App::Ig { common, .. }
            | App::Randperm { common, .. } => common,
            App::Transpose { matrix }
            | App::Permute { matrix }
            | App::Toposort { matrix, .. }
            | App::Triangles { matrix, .. } => &matrix.common,
        }
    }
}

/// Joins the job when a launcher started several ranks, before this process has threads of
/// its own (MPI starts first); `None` on its own. Ranks started with other arguments are
/// refused, one line naming the first difference. The error is empty on a rank that is not
/// the one to print it.
fn join(pes: usize) -> Result<Option<Arc<Job>>, String> {
    let Some((_, rank)) = tactor_comm::launcher::job().filter(|&(n, _)| n > 1) else {
        return Ok(None);
    };
    tactor_cli::signals::silent_unless_ok(|| Job::builder().program("bale").channels(pes).join())
        .map(Some)
        .map_err(|e| {
            if e.speaks(rank) {
                e.to_string()
            } else {
                String::new()
            }
        })
}

/// This process's PEs, and the job's other ranks when a launcher started several.
struct Run {
    rt: tactor::Runtime,
    job: Option<Arc<Job>>,
}

impl Run {
    /// Starts the PEs; on several ranks only the selector versions run.
    fn start(
        c: &Common,
        job: Option<&Arc<Job>>,
        model: Model,
        mailboxes: usize,
    ) -> Result<Run, String> {
        let pes = pes_of(c);
        let all = pes.saturating_mul(job.map_or(1, |j| j.ranks()));
        bale::memory::check_selector(mailboxes, all, pes)?;
        if job.is_some() && model == Model::Lambda {
            return Err(
                "--model lambda runs in one process (without mpirun): closures do not cross ranks"
                    .into(),
            );
        }
        Ok(Run {
            rt: runtime(pes)?,
            job: job.cloned(),
        })
    }

    fn pes(&self) -> Pes<'_> {
        Pes::new(&self.rt, self.job.as_ref())
    }

    /// On several ranks the AGP model is the selector version unbatched (one message per
    /// remote operation through the communication layer); `None` in one process, where it
    /// is an atomic or a read of the owner's memory.
    fn agp_on_ranks(&self) -> Option<Pes<'_>> {
        self.job.is_some().then(|| self.pes().unbatched())
    }
}

fn run(cli: Cli, net: Option<&Arc<Job>>) -> Result<(Outcome, bool), String> {
    match cli.app {
        App::Histogram {
            updates,
            table,
            model,
            common,
        } => {
            let job = Run::start(&common, net, model, 1)?;
            let p = histogram::Params {
                updates,
                table,
                seed: common.seed,
            };
            let o = match model {
                Model::Selector => histogram::selector(&job.pes(), &p)?,
                Model::Lambda => histogram::lambda(&job.rt, &p)?,
                Model::Agp => match job.agp_on_ranks() {
                    Some(pes) => histogram::selector(&pes, &p)?,
                    None => histogram::agp(&job.rt, &p)?,
                },
                Model::Exstack => histogram::exstack(&job.pes(), &p)?,
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
            if model == Model::Lambda {
                return Err("--model lambda: ig has no lambda version (histogram has)".into());
            }
            let job = Run::start(&common, net, model, 2)?;
            let o = match model {
                Model::Agp => match job.agp_on_ranks() {
                    Some(pes) => index_gather::selector(&pes, &p)?,
                    None => index_gather::agp(&job.rt, &p)?,
                },
                Model::Exstack => index_gather::exstack(&job.pes(), &p)?,
                _ => index_gather::selector(&job.pes(), &p)?,
            };
            Ok((o, common.json))
        }
        App::Transpose { matrix } => reshape_app(&matrix, net, |_| reshape::Op::Transpose),
        App::Permute { matrix } => {
            let seed = matrix.common.seed;
            reshape_app(&matrix, net, |m| reshape::Op::random_permutation(m, seed))
        }
        App::Toposort { matrix: a } => {
            refuse_lambda(a.model)?;
            let job = Run::start(&a.common, net, a.model, 4)?;
            let pes = job.pes();
            let m = match &a.file {
                Some(f) => bale::matrix::mm::read(f)?,
                None => toposort_input(&a, pes.count())?,
            };
            let o = match (a.model, job.agp_on_ranks()) {
                (Model::Agp, None) => toposort::agp(&job.rt, &m)?,
                (Model::Agp, Some(unbatched)) => toposort::selector(&unbatched, &m)?,
                (Model::Exstack, _) => toposort::exstack(&pes, &m)?,
                _ => toposort::selector(&pes, &m)?,
            };
            Ok((o, a.common.json))
        }
        App::Triangles {
            matrix: a,
            kronecker,
        } => {
            refuse_lambda(a.model)?;
            let job = Run::start(&a.common, net, a.model, 2)?;
            let pes = job.pes();
            let (l, known) = match &kronecker {
                Some(k) => {
                    let (l, known) = triangles::kronecker(k)?;
                    (l, Some(known))
                }
                None => (triangles::lower_of(&input(&a, pes.count())?)?, None),
            };
            let o = match (a.model, job.agp_on_ranks()) {
                (Model::Agp, None) => triangles::agp(&job.rt, &l)?,
                (Model::Agp, Some(unbatched)) => triangles::selector(&unbatched, &l)?,
                (Model::Exstack, _) => triangles::exstack(&pes, &l)?,
                _ => triangles::selector(&pes, &l)?,
            };
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
            refuse_lambda(model)?;
            let job = Run::start(&common, net, model, 2)?;
            let o = match (model, job.agp_on_ranks()) {
                (Model::Agp, None) => randperm::agp(&job.rt, &p)?,
                (Model::Agp, Some(unbatched)) => randperm::selector(&unbatched, &p)?,
                (Model::Exstack, _) => randperm::exstack(&job.pes(), &p)?,
                _ => randperm::selector(&job.pes(), &p)?,
            };
            Ok((o, common.json))
        }
    }
}

/// Only histogram has a lambda version.
fn refuse_lambda(model: Model) -> Result<(), String> {
    match model {
        Model::Lambda => Err("--model lambda: only histogram has a lambda version".into()),
        _ => Ok(()),
    }
}

/// The app's matrix (`-f`, or the `--graph` of `-n` rows per PE and `-z` per row).
fn input(a: &MatrixArgs, pes: usize) -> Result<bale::matrix::Matrix, String> {
    input_with(a, pes, a.per_row)
}

/// The app's matrix, generated with `per_row` nonzeros per row instead of `-z`.
fn input_with(a: &MatrixArgs, pes: usize, per_row: f64) -> Result<bale::matrix::Matrix, String> {
    let graph = match a.graph {
        GraphKind::Er => bale::matrix::Graph::ErdosRenyi,
        GraphKind::Geometric => bale::matrix::Graph::Geometric,
    };
    let file = a.file.as_deref();
    bale::matrix::input(file, graph, a.rows, per_row, pes, a.common.seed)
}

/// Toposort's generated matrix: `-z` counts the nonzeros of a row of the morally
/// upper-triangular matrix, the diagonal included, as Bale's `topo` does. The base graph
/// keeps its entries above the diagonal, half of them: it gets `2 (z - 1)` per row (at most
/// every column).
fn toposort_input(a: &MatrixArgs, pes: usize) -> Result<bale::matrix::Matrix, String> {
    let rows = a.rows.saturating_mul(pes as u64) as f64;
    // No rows: `input` names -n.
    let fits = a.per_row.is_finite() && a.per_row >= 0.0 && a.per_row <= rows;
    if rows >= 1.0 && a.file.is_none() && !fits {
        return Err(format!("-z {}: 0 to {rows} nonzeros per row", a.per_row));
    }
    let base = (2.0 * (a.per_row - 1.0)).clamp(0.0, rows);
    toposort::morally_upper(&input_with(a, pes, base)?, a.common.seed)
}

/// Transpose or permute: the input, then the model.
fn reshape_app(
    a: &MatrixArgs,
    net: Option<&Arc<Job>>,
    op: impl FnOnce(&bale::matrix::Matrix) -> reshape::Op,
) -> Result<(Outcome, bool), String> {
    refuse_lambda(a.model)?;
    let job = Run::start(&a.common, net, a.model, 1)?;
    let pes = job.pes();
    let m = input(a, pes.count())?;
    let op = op(&m);
    let o = match a.model {
        Model::Agp => match job.agp_on_ranks() {
            Some(unbatched) => reshape::selector(&unbatched, &m, &op)?,
            None => reshape::agp(&job.rt, &m, &op)?,
        },
        Model::Exstack => reshape::exstack(&pes, &m, &op)?,
        _ => reshape::selector(&pes, &m, &op)?,
    };
    Ok((o, a.common.json))
}

fn main() -> ExitCode {
    // Every rank would say the same: rank 0 speaks for the job.
    let other_rank = tactor_cli::args::other_rank();
    if let Err(e) = tactor_cli::signals::exit_on_termination("bale", other_rank) {
        tactor_cli::say!("error: could not handle termination signals: {e}");
        return ExitCode::FAILURE;
    }
    let cli: Cli = tactor_cli::args::parse();
    let net = join(pes_of(cli.app.common()));
    // Every rank decides the arguments and the input alike, so their errors are rank 0's
    // too; a check that failed is reported by the lowest rank it failed on, named
    // (`Pes::timed`), and the others exit quietly.
    let result = net.and_then(|net| {
        run(cli, net.as_ref()).map_err(|e| match &net {
            // This rank's own failure (perhaps every rank's: bad input): the job says it
            // once and tells the others, which would otherwise wait for this one.
            Some(job) if !e.is_empty() && !e.starts_with(apps::RANK_ERROR) => {
                job.fail(&e);
                String::new()
            }
            _ => e,
        })
    });
    let code = match result {
        Ok((o, json)) => {
            if !other_rank {
                if json {
                    tactor_cli::out!("{}\n", serde_json::to_string(&o).expect("plain data"));
                } else {
                    print_line(&o);
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            if !e.is_empty() && (!other_rank || e.starts_with(apps::RANK_ERROR)) {
                tactor_cli::say!("error: {e}");
            } else {
                tactor_cli::signals::let_another_rank_speak();
            }
            ExitCode::FAILURE
        }
    };
    match tactor_cli::output::finish() {
        Ok(()) => code,
        Err(e) => {
            tactor_cli::say!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn print_line(o: &apps::Outcome) {
    let found = o.result.map_or(String::new(), |r| format!(", {r} found"));
    tactor_cli::out!(
        "{} ({}, {} PEs): {:.4} s, {:.2} M {}/s, {} {} checked{found}\n",
        o.app,
        o.model,
        o.pes,
        o.seconds,
        o.rate_millions,
        o.unit,
        o.operations,
        o.unit
    );
}
