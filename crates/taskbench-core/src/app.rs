//! A benchmark: one or more graphs (`-and`) and the global flags, parsed from the reference's
//! single-dash command line (SPEC §4).

use crate::error::ConfigError;
use crate::graph::{check_graph, DependenceType, KernelType, TaskGraph};
use crate::report::Totals;

/// A flag a system adds to the Task Bench flags (for example `-worker N`).
#[derive(Clone, Copy, Debug)]
pub struct ExtraFlag {
    /// The flag as typed, with its dash: `"-worker"`.
    pub name: &'static str,
    /// Whether it takes a value.
    pub takes_value: bool,
}

/// System flags found on a command line, in order, with their values.
pub type ExtraValues = Vec<(String, Option<String>)>;

/// A parsed, validated Task Bench configuration.
///
/// ```
/// use taskbench_core::app::App;
/// let (app, extra) = App::parse(&["-steps", "10", "-type", "fft", "-and", "-width", "2"], &[]).unwrap();
/// assert_eq!(app.graphs.len(), 2);
/// assert_eq!(app.graphs[1].max_width, 2);
/// assert_eq!(app.graphs[1].timesteps, 4); // each graph starts from the defaults
/// assert!(extra.is_empty());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct App {
    /// The graphs, run together.
    pub graphs: Vec<TaskGraph>,
    /// `-nodes`: only used to estimate local and nonlocal dependencies in the report.
    pub nodes: i64,
    /// 0, 1 (`-v`) or 2 (`-vv`).
    pub verbose: u8,
    /// `-skip-graph-validation`: skip the mirror check (the rules of SPEC §1 still apply).
    pub skip_graph_validation: bool,
    /// Where points really run when the benchmark runs on several ranks ([`App::place`]); the
    /// report's local/nonlocal lines then count that placement instead of `-nodes`'s estimate.
    pub placement: Option<Placement>,
    /// The report's counts, computed once by [`App::parse`] (which refuses graphs whose
    /// counts overflow); see [`App::totals`].
    pub(crate) totals: Totals,
}

/// Points block-distributed over `ranks × workers` workers (worker `w` of rank `r` is global
/// worker `r * workers + w`), as the reference MPI implementation distributes them over ranks.
///
/// ```
/// use taskbench_core::app::Placement;
/// let pl = Placement { ranks: 2, workers: 2 };
/// // 10 points over 4 workers: [0,2) [2,5) [5,7) [7,10).
/// let owners: Vec<i64> = (0..10).map(|p| pl.worker_of(p, 10)).collect();
/// assert_eq!(owners, [0, 0, 1, 1, 1, 2, 2, 3, 3, 3]);
/// assert_eq!(pl.rank_of(4, 10), 0);
/// assert_eq!(pl.rank_of(5, 10), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Ranks (processes) of the job.
    pub ranks: i64,
    /// Workers per rank.
    pub workers: i64,
}

impl Placement {
    /// Workers in the whole job.
    pub fn total(&self) -> i64 {
        self.ranks * self.workers
    }

    /// The first point of global worker `w` in a graph of `width` points; worker `w` owns
    /// `[first(w), first(w + 1))`.
    pub fn first(&self, w: i64, width: i64) -> i64 {
        (i128::from(w) * i128::from(width) / i128::from(self.total())) as i64
    }

    /// The global worker that owns point `p` of a graph of `width` points: the last worker
    /// whose first point is at most `p`.
    pub fn worker_of(&self, p: i64, width: i64) -> i64 {
        let n = i128::from(self.total());
        ((i128::from(p + 1) * n - 1) / i128::from(width)) as i64
    }

    /// The rank that owns point `p`.
    pub fn rank_of(&self, p: i64, width: i64) -> i64 {
        self.worker_of(p, width) / self.workers
    }
}

/// The flags that belong to the graph being built.
const GRAPH_FLAGS: [&str; 12] = [
    "-steps",
    "-width",
    "-type",
    "-radix",
    "-period",
    "-fraction",
    "-kernel",
    "-iter",
    "-output",
    "-scratch",
    "-sample",
    "-imbalance",
];

fn parse_int(flag: &str, v: &str) -> Result<i64, ConfigError> {
    v.trim().parse::<i64>().map_err(|_| ConfigError::BadValue {
        flag: flag.into(),
        value: v.into(),
        expected: "an integer".into(),
    })
}

fn parse_float(flag: &str, v: &str) -> Result<f64, ConfigError> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(ConfigError::BadValue {
            flag: flag.into(),
            value: v.into(),
            expected: "a number".into(),
        }),
    }
}

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> String {
    all.iter().map(|&t| name(t)).collect::<Vec<_>>().join(", ")
}

impl App {
    /// Records that the benchmark runs on `placement` and recounts the report's local and
    /// nonlocal dependencies for it.
    pub fn place(&mut self, placement: Placement) -> Result<(), ConfigError> {
        self.placement = Some(placement);
        self.totals = self.try_totals()?;
        Ok(())
    }

    /// Parses Task Bench flags (without the program name). Flags listed in `extra` are
    /// accepted and returned in order with their values; any other unknown flag is an error.
    pub fn parse<S: AsRef<str>>(
        args: &[S],
        extra: &[ExtraFlag],
    ) -> Result<(App, ExtraValues), ConfigError> {
        let mut app = App {
            graphs: Vec::new(),
            nodes: 0,
            placement: None,
            verbose: 0,
            skip_graph_validation: false,
            totals: Totals::default(),
        };
        let mut extras = Vec::new();
        let mut graph = TaskGraph::default();
        let mut period: Option<i64> = None;
        let mut i = 0;
        while i < args.len() {
            let flag = args[i].as_ref();
            let takes_value = GRAPH_FLAGS.contains(&flag) || flag == "-nodes";
            let value = if takes_value {
                i += 1;
                Some(
                    args.get(i)
                        .ok_or_else(|| ConfigError::MissingArgument(flag.into()))?
                        .as_ref(),
                )
            } else {
                None
            };
            let v = value.unwrap_or_default();
            match flag {
                "-steps" => graph.timesteps = parse_int(flag, v)?,
                "-width" => graph.max_width = parse_int(flag, v)?,
                "-type" => {
                    graph.dependence = v.parse().map_err(|_| ConfigError::BadValue {
                        flag: flag.into(),
                        value: v.into(),
                        expected: format!(
                            "one of {}",
                            names(&DependenceType::ALL, DependenceType::name)
                        ),
                    })?
                }
                "-radix" => graph.radix = parse_int(flag, v)?,
                "-period" => period = Some(parse_int(flag, v)?),
                "-fraction" => graph.fraction_connected = parse_float(flag, v)?,
                "-kernel" => {
                    graph.kernel.kind = v.parse().map_err(|_| ConfigError::BadValue {
                        flag: flag.into(),
                        value: v.into(),
                        expected: format!("one of {}", names(&KernelType::ALL, KernelType::name)),
                    })?
                }
                "-iter" => graph.kernel.iterations = parse_int(flag, v)?,
                "-output" => graph.output_bytes_per_task = Self::parse_size(flag, v)?,
                "-scratch" => graph.scratch_bytes_per_task = Self::parse_size(flag, v)?,
                "-sample" => graph.kernel.samples = parse_int(flag, v)?,
                "-imbalance" => graph.kernel.imbalance = parse_float(flag, v)?,
                "-nodes" => app.nodes = parse_int(flag, v)?,
                "-v" => app.verbose = app.verbose.max(1),
                "-vv" => app.verbose = 2,
                "-skip-graph-validation" => app.skip_graph_validation = true,
                "-and" => {
                    app.finish_graph(std::mem::take(&mut graph), period.take())?;
                    graph.graph_index = app.graphs.len() as i64;
                }
                _ => match extra.iter().find(|e| e.name == flag) {
                    Some(e) if e.takes_value => {
                        i += 1;
                        let v = args
                            .get(i)
                            .ok_or_else(|| ConfigError::MissingArgument(flag.into()))?;
                        extras.push((flag.to_string(), Some(v.as_ref().to_string())));
                    }
                    Some(_) => extras.push((flag.to_string(), None)),
                    None => return Err(ConfigError::UnknownFlag(flag.into())),
                },
            }
            i += 1;
        }
        app.finish_graph(graph, period)?;
        if app.nodes < 0 {
            return Err(range("-nodes", app.nodes.to_string(), ">= 0"));
        }
        app.totals = app.try_totals()?;
        Ok((app, extras))
    }

    fn parse_size(flag: &str, v: &str) -> Result<usize, ConfigError> {
        let n = parse_int(flag, v)?;
        usize::try_from(n).map_err(|_| range(flag, n.to_string(), ">= 0"))
    }

    fn finish_graph(&mut self, mut g: TaskGraph, period: Option<i64>) -> Result<(), ConfigError> {
        g.period = match period {
            Some(p) => p,
            None if g.dependence.has_period() => 3,
            None => 0,
        };
        validate_graph(&g, period.is_some())?;
        let planned: u128 = self.graphs.iter().map(TaskGraph::plan_bytes).sum();
        check_memory(
            planned.saturating_add(g.plan_bytes()),
            "planning the graphs",
        )?;
        if !self.skip_graph_validation {
            check_graph(&g)?;
        }
        self.graphs.push(g);
        Ok(())
    }
}

/// Refuses `needed` bytes of memory for `what` when this process may not use them (the
/// machine's available memory, `RLIMIT_AS`, `RLIMIT_DATA`, the cgroup's limit), with one line
/// that says both and names the limit.
///
/// ```
/// use taskbench_core::app::check_memory;
/// assert!(check_memory(1024, "a test").is_ok());
/// let e = check_memory(u128::MAX, "a test").unwrap_err().to_string();
/// assert!(e.starts_with("a test would need about "), "{e}");
/// ```
pub fn check_memory(needed: u128, what: &str) -> Result<(), ConfigError> {
    tactor_cli::limits::check(needed, what).map_err(ConfigError::TooLarge)
}

fn range(flag: &str, shown: String, rule: &str) -> ConfigError {
    ConfigError::OutOfRange {
        flag: flag.into(),
        shown,
        rule: rule.into(),
    }
}

/// Applies the rules of SPEC §1 to one graph. `period_given` says whether `-period` was on the
/// command line (types without periods reject it even when it is 0, as the reference does).
pub fn validate_graph(g: &TaskGraph, period_given: bool) -> Result<(), ConfigError> {
    let k = &g.kernel;
    let positive = [("-steps", g.timesteps), ("-width", g.max_width)];
    for (flag, v) in positive {
        if v <= 0 {
            return Err(range(flag, v.to_string(), "> 0"));
        }
    }
    let nonneg = [
        ("-radix", g.radix),
        ("-period", g.period),
        ("-iter", k.iterations),
        ("-sample", k.samples),
    ];
    for (flag, v) in nonneg {
        if v < 0 {
            return Err(range(flag, v.to_string(), ">= 0"));
        }
    }
    if g.output_bytes_per_task < 16 {
        return Err(range(
            "-output",
            g.output_bytes_per_task.to_string(),
            ">= 16",
        ));
    }
    if g.scratch_bytes_per_task % 8 != 0 {
        return Err(range(
            "-scratch",
            g.scratch_bytes_per_task.to_string(),
            "a multiple of 8",
        ));
    }
    if !(0.0..=1.0).contains(&g.fraction_connected) {
        return Err(range(
            "-fraction",
            format!("{:.6}", g.fraction_connected),
            ">= 0 and <= 1",
        ));
    }
    if !(0.0..=2.0).contains(&k.imbalance) {
        return Err(range(
            "-imbalance",
            format!("{:.6}", k.imbalance),
            ">= 0 and <= 2",
        ));
    }
    let ty = g.dependence;
    if period_given && !ty.has_period() {
        return Err(ConfigError::PeriodNotSupported(ty.name().into()));
    }
    let (w, r) = (g.max_width, g.radix);
    match ty {
        DependenceType::RandomSpread => {
            return Err(ConfigError::NotSupported(
                "Graph type \"random_spread\" is not implemented by the reference Task Bench; use random_nearest or spread"
                    .into(),
            ))
        }
        DependenceType::Spread | DependenceType::RandomNearest if g.period == 0 => {
            return Err(ConfigError::PeriodRequired(ty.name().into()))
        }
        // More dependencies than points: the reference fails its duplicate check, after
        // looping over every one of them.
        DependenceType::Spread if r > w => {
            return Err(range("-radix", r.to_string(), &format!("at most the width ({w}) for spread")))
        }
        // ceil(w / r), written so that it cannot overflow.
        DependenceType::Spread if r > 0 && g.period > (w - 1) / r + 1 => {
            return Err(ConfigError::PeriodTooLarge { ty: ty.name().into(), max: (w - 1) / r + 1 })
        }
        DependenceType::Stencil1DPeriodic if w < 3 => {
            return Err(ConfigError::WidthTooSmall {
                ty: ty.name().into(),
                min: 3,
                width: w,
                why: "a smaller width lists a neighbour twice".into(),
            })
        }
        DependenceType::Fft if w < 2 => {
            return Err(ConfigError::WidthTooSmall {
                ty: ty.name().into(),
                min: 2,
                width: w,
                why: "one point has no butterfly (the reference divides by zero)".into(),
            })
        }
        _ => {}
    }
    match k.kind {
        KernelType::IoBound => Err(ConfigError::NotSupported(
            "Kernel \"io_bound\" is not implemented by the reference Task Bench".into(),
        )),
        KernelType::ComputeDgemm | KernelType::MemoryDaxpy => Err(ConfigError::NotSupported(format!(
            "Kernel \"{}\" is not supported by this build (the reference needs a BLAS library such as MKL)",
            k.kind
        ))),
        KernelType::MemoryBound if k.samples == 0 => Err(range("-sample", "0".into(), "> 0 for memory_bound")),
        // The reference asserts this inside the kernel.
        KernelType::MemoryBound if g.scratch_bytes_per_task == 0 => {
            Err(range("-scratch", "0".into(), "> 0 for memory_bound"))
        }
        _ => Ok(()),
    }
}
