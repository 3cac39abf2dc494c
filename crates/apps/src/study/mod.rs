//! The strong-scaling study of the two solvers (`apps-study`): time per iteration against the
//! problem's size, Tactor in one process (1 and 2 workers) and on 2 ranks, untraced and
//! traced, beside the peers a user would otherwise run — PRK's `MPI1` and `OPENMP` Stencil,
//! PETSc's `ex23` with CG — built outside this repository and named by path.

pub mod plot;

use serde::Serialize;
use std::process::Command;

/// Which application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    /// PRK Stencil (size: the grid's side).
    Stencil,
    /// CG for 1-D Poisson (size: unknowns).
    Cg,
}

impl App {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            App::Stencil => "stencil",
            App::Cg => "cg",
        }
    }

    /// The study's sizes, from overhead-bound to bandwidth-bound.
    pub fn sizes(self) -> Vec<u64> {
        match self {
            App::Stencil => vec![256, 512, 1024, 2048, 4096, 8192],
            App::Cg => vec![10_000, 100_000, 1_000_000, 10_000_000],
        }
    }

    /// Iterations at `size`: enough that a run is not all start-up, few at the large sizes
    /// (but at least 20: runs of ~50 ms at the cache-bound sizes moved ±20 % between runs).
    pub fn iterations(self, size: u64) -> u64 {
        match self {
            App::Stencil => (200_000_000 / (size * size)).clamp(20, 1000),
            App::Cg => (10_000_000 / size).clamp(20, 1000),
        }
    }
}

/// One contender: a name for the table and how to run it.
#[derive(Clone, Debug)]
pub struct Contender {
    /// E.g. `tactor w2 traced`, `prk-mpi1 r2`.
    pub name: String,
    /// Ranks under mpirun (0: no mpirun).
    pub ranks: usize,
    /// The program and its arguments before the size's own.
    kind: Kind,
}

#[derive(Clone, Debug)]
enum Kind {
    Tactor {
        exe: String,
        workers: usize,
        traced: bool,
        /// Tiles (stencil) or blocks (cg) per worker.
        pieces: usize,
    },
    PrkMpi(String),
    PrkOpenmp(String),
    Petsc(String),
}

/// The contenders of `app`: Tactor's six placements (with `pieces` tiles or blocks a worker),
/// and the peers whose programs were given.
pub fn contenders(app: App, tactor: &str, pieces: usize, peers: &Peers) -> Vec<Contender> {
    let mut v = Vec::new();
    for traced in [false, true] {
        for (ranks, workers) in [(0, 1), (0, 2), (2, 1)] {
            let place = if ranks > 0 {
                format!("r{ranks}")
            } else {
                format!("w{workers}")
            };
            v.push(Contender {
                name: format!("tactor {place}{}", if traced { " traced" } else { "" }),
                ranks,
                kind: Kind::Tactor {
                    exe: tactor.to_string(),
                    workers,
                    traced,
                    pieces,
                },
            });
        }
    }
    let peer = |name: &str, ranks, kind| Contender {
        name: name.to_string(),
        ranks,
        kind,
    };
    match app {
        App::Stencil => {
            if let Some(p) = &peers.prk_mpi1 {
                v.push(peer("prk-mpi1 r1", 1, Kind::PrkMpi(p.clone())));
                v.push(peer("prk-mpi1 r2", 2, Kind::PrkMpi(p.clone())));
            }
            if let Some(p) = &peers.prk_openmp {
                v.push(peer("prk-openmp t2", 0, Kind::PrkOpenmp(p.clone())));
            }
        }
        App::Cg => {
            if let Some(p) = &peers.petsc_ex23 {
                v.push(peer("petsc r1", 1, Kind::Petsc(p.clone())));
                v.push(peer("petsc r2", 2, Kind::Petsc(p.clone())));
            }
        }
    }
    v
}

/// The peers' programs, where given.
#[derive(Clone, Debug, Default)]
pub struct Peers {
    /// PRK's `MPI1/Stencil/stencil`.
    pub prk_mpi1: Option<String>,
    /// PRK's `OPENMP/Stencil/stencil`.
    pub prk_openmp: Option<String>,
    /// PETSc's `ex23`, built against Debian's `petsc-dev`.
    pub petsc_ex23: Option<String>,
}

impl Contender {
    /// Runs once at `size` for `iterations`; seconds per iteration.
    pub fn run(&self, app: App, size: u64, iterations: u64) -> Result<f64, String> {
        let (n, its) = (size.to_string(), iterations.to_string());
        let mut args: Vec<String> = Vec::new();
        let mut env: Vec<(&str, String)> = Vec::new();
        let exe = match &self.kind {
            Kind::Tactor {
                exe,
                workers,
                traced,
                pieces,
            } => {
                args.extend(["-w".into(), workers.to_string(), "--json".into()]);
                if *traced {
                    args.push("--trace".into());
                }
                args.push(app.name().into());
                let k = if app == App::Stencil { "-i" } else { "-k" };
                let per = if app == App::Stencil { "-t" } else { "-b" };
                args.extend([
                    "-n".into(),
                    n,
                    k.into(),
                    its,
                    per.into(),
                    pieces.to_string(),
                ]);
                if app == App::Cg {
                    args.push("--no-serial".into());
                }
                exe
            }
            Kind::PrkMpi(exe) => {
                args.extend([its, n]);
                exe
            }
            Kind::PrkOpenmp(exe) => {
                env.push(("OMP_NUM_THREADS", "2".into()));
                args.extend(["2".into(), its, n]);
                exe
            }
            Kind::Petsc(exe) => {
                let flags = "-ksp_type cg -pc_type none -ksp_rtol 1e-50 -ksp_atol 1e-50 -log_view";
                args.extend(["-n".into(), n, "-ksp_max_it".into(), its]);
                args.extend(flags.split(' ').map(String::from));
                exe
            }
        };
        let out = if self.ranks > 0 {
            tactor_comm::launcher::run_mpirun(|c| {
                for (k, v) in &env {
                    c.args(["-x", &format!("{k}={v}")]);
                }
                c.args(["-np", &self.ranks.to_string(), exe]).args(&args);
            })
        } else {
            Command::new(exe).args(&args).envs(env.clone()).output()
        }
        .map_err(|e| format!("{}: could not start {exe}: {e}", self.name))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().chain(text.lines()).last().unwrap_or("").trim();
            return Err(format!("{} at size {size} failed: {last}", self.name));
        }
        parse(&self.kind, &text, size, iterations)
            .ok_or_else(|| format!("{} at size {size}: no time in its output", self.name))
    }
}

/// Seconds per iteration from a contender's output.
fn parse(kind: &Kind, text: &str, size: u64, iterations: u64) -> Option<f64> {
    match kind {
        Kind::Tactor { .. } => {
            let v: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
            v["seconds_per_iteration"].as_f64()
        }
        // "Rate (MFlops/s): R  Avg time (s): T": the time has six decimals (a microsecond),
        // the rate more digits; PRK derives one from the other with the same flop count.
        Kind::PrkMpi(_) | Kind::PrkOpenmp(_) => {
            let line = text.lines().find(|l| l.contains("Rate (MFlops/s):"))?;
            let rate: f64 = line.split_whitespace().nth(2)?.parse().ok()?;
            Some(crate::stencil::flops(size as usize) / (rate * 1e6))
        }
        // `-log_view`'s KSPSolve row: the name, the count, the ratio, then the max time.
        Kind::Petsc(_) => {
            let line = text.lines().find(|l| l.starts_with("KSPSolve "))?;
            let secs: f64 = line.split_whitespace().nth(3)?.parse().ok()?;
            Some(secs / iterations as f64)
        }
    }
}

/// The median, least and greatest of `v` (not empty).
pub fn summary(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1])
}

/// One line of the study's table.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The application.
    pub app: App,
    /// Its size.
    pub size: u64,
    /// Iterations per run.
    pub iterations: u64,
    /// The contender.
    pub contender: String,
    /// Median seconds per iteration over the repetitions.
    pub median_s: f64,
    /// The fastest repetition.
    pub min_s: f64,
    /// The slowest repetition.
    pub max_s: f64,
    /// Repetitions.
    pub reps: usize,
}

/// What tracing bought at each size: for every Tactor placement measured both ways, its
/// untraced median over its traced one, as `(app, size, placement, ratio)`.
pub fn traced_speedups(rows: &[Row]) -> Vec<(App, u64, String, f64)> {
    let mut out = Vec::new();
    for traced in rows.iter().filter(|r| r.contender.ends_with(" traced")) {
        let place = traced.contender.trim_end_matches(" traced");
        if let Some(plain) = rows
            .iter()
            .find(|r| r.app == traced.app && r.size == traced.size && r.contender == place)
        {
            let name = place.trim_start_matches("tactor ").to_string();
            out.push((
                traced.app,
                traced.size,
                name,
                plain.median_s / traced.median_s,
            ));
        }
    }
    out
}
