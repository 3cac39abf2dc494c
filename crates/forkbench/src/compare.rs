//! The comparison: every contender on every benchmark and worker count, repetitions
//! alternated, each run's check value compared with Tactor's, medians and ranges in a table.

use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct Options {
    /// Worker counts, comma-separated (never more than the cores: workers spin)
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// Repetitions of each contender, alternated
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    reps: u32,
    /// Timed runs inside each repetition's process (its median counts)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    inner: u32,
    /// Benchmarks, comma-separated: fib, tree, loop100ns, loop1us
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fib,tree,loop100ns,loop1us"
    )]
    benches: Vec<String>,
    /// fib's n
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(2..=50))]
    fib: u64,
    /// The tree's depth limit (T1-shaped: about 4^depth / 3 nodes, unevenly spread)
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u64).range(1..=20))]
    tree: u64,
    /// Sequential milliseconds of work in each loop benchmark
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    loop_ms: u64,
    /// Another contender: NAME=PROGRAM, run as `PROGRAM BENCH WORKERS SIZE SPIN INNER`
    #[arg(long, value_name = "NAME=PROGRAM")]
    peer: Vec<String>,
    /// Folder for results.csv, results.json and table.md
    #[arg(long)]
    out: Option<PathBuf>,
}

/// One contender: a name and the command line before the protocol's arguments.
struct Contender {
    name: String,
    command: Vec<String>,
}

/// One benchmark as run: its label, the protocol's name and size, and its spin.
#[derive(Clone, Debug)]
struct Bench {
    label: String,
    name: &'static str,
    size: u64,
    spin: u32,
}

#[derive(Serialize, Debug)]
struct Row {
    bench: String,
    workers: usize,
    system: String,
    /// Median over repetitions of each repetition's median run, seconds.
    median_s: f64,
    min_s: f64,
    max_s: f64,
    /// This system's median over Tactor's (above 1: slower than Tactor).
    vs_tactor: f64,
    reps: usize,
}

pub fn run(o: &Options) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for &w in &o.workers {
        if w == 0 || w > cores {
            bail!("--workers {w}: between 1 and this machine's {cores} cores (workers spin)");
        }
    }
    let contenders = contenders(o)?;
    let benches = benches(o)?;
    let mut rows = Vec::new();
    for b in &benches {
        for &w in &o.workers {
            rows.extend(measure(o, &contenders, b, w)?);
        }
    }
    let table = table(&rows);
    tactor_cli::out!("{table}");
    if let Some(dir) = &o.out {
        write(dir, &rows, &table)?;
    }
    Ok(())
}

fn contenders(o: &Options) -> Result<Vec<Contender>> {
    let me = std::env::current_exe()
        .context("finding this program")?
        .display()
        .to_string();
    let mut all: Vec<Contender> = ["tactor", "rayon"]
        .iter()
        .map(|s| Contender {
            name: s.to_string(),
            command: vec![me.clone(), "run".into(), s.to_string()],
        })
        .collect();
    for p in &o.peer {
        let Some((name, program)) = p.split_once('=') else {
            bail!("--peer '{p}': expected NAME=PROGRAM");
        };
        if name.is_empty() || all.iter().any(|c| c.name == name) {
            bail!("--peer '{p}': the name must be new and not empty");
        }
        let command = shell_words::split(program).with_context(|| format!("--peer '{p}'"))?;
        let Some(first) = command.first() else {
            bail!("--peer '{p}': no program given");
        };
        if !std::path::Path::new(first).exists() && which(first).is_none() {
            bail!("--peer '{p}': no program '{first}'");
        }
        all.push(Contender {
            name: name.to_string(),
            command,
        });
    }
    Ok(all)
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// The benchmarks asked for, loop bodies calibrated to their time on this machine.
fn benches(o: &Options) -> Result<Vec<Bench>> {
    let steps_per_ns = calibrate();
    o.benches
        .iter()
        .map(|name| {
            let looped = |ns: f64| {
                let spin = ((ns * steps_per_ns).round() as u32).max(1);
                let n = (o.loop_ms as f64 * 1e6 / ns) as u64;
                Bench {
                    label: name.clone(),
                    name: "loop",
                    size: n.max(1),
                    spin,
                }
            };
            Ok(match name.as_str() {
                "fib" => Bench {
                    label: format!("fib({})", o.fib),
                    name: "fib",
                    size: o.fib,
                    spin: 0,
                },
                "tree" => Bench {
                    label: format!("tree(depth {})", o.tree),
                    name: "tree",
                    size: o.tree,
                    spin: 0,
                },
                "loop100ns" => looped(100.0),
                "loop1us" => looped(1000.0),
                other => {
                    bail!("--benches: unknown benchmark '{other}' (fib, tree, loop100ns, loop1us)")
                }
            })
        })
        .collect()
}

/// xorshift steps per nanosecond of one body on this core (the best of a few tries).
fn calibrate() -> f64 {
    let steps = 10_000u32;
    let best = (0..20)
        .map(|i| {
            let t = Instant::now();
            std::hint::black_box(crate::kernels::body(std::hint::black_box(i), steps));
            t.elapsed().as_nanos().max(1) as f64
        })
        .fold(f64::INFINITY, f64::min);
    steps as f64 / best
}

/// Every contender on `b` with `w` workers, `reps` times in a rotating order.
fn measure(o: &Options, contenders: &[Contender], b: &Bench, w: usize) -> Result<Vec<Row>> {
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let mut check: Option<(String, u64)> = None;
    for rep in 0..o.reps as usize {
        for k in 0..contenders.len() {
            let i = (rep + k) % contenders.len();
            let c = &contenders[i];
            tactor_cli::say!(
                "forkbench: {} on {w} worker(s), rep {}/{}: {}",
                b.label,
                rep + 1,
                o.reps,
                c.name
            );
            let (t, value) = run_contender(c, b, w, o.inner)?;
            match &check {
                None => check = Some((c.name.clone(), value)),
                Some((first, v)) if *v != value => bail!(
                    "{} computed {value} for {}, but {first} computed {v}",
                    c.name,
                    b.label
                ),
                Some(_) => {}
            }
            times[i].push(t);
        }
    }
    let tactor = median(&times[0]);
    Ok(contenders
        .iter()
        .zip(&times)
        .map(|(c, t)| Row {
            bench: b.label.clone(),
            workers: w,
            system: c.name.clone(),
            median_s: median(t),
            min_s: t.iter().copied().fold(f64::INFINITY, f64::min),
            max_s: t.iter().copied().fold(0.0, f64::max),
            vs_tactor: median(t) / tactor,
            reps: t.len(),
        })
        .collect())
}

/// One process of contender `c`: the median of its timed runs, and their common check value.
fn run_contender(c: &Contender, b: &Bench, w: usize, inner: u32) -> Result<(f64, u64)> {
    let out = Command::new(&c.command[0])
        .args(&c.command[1..])
        .args([b.name.to_string(), w.to_string(), b.size.to_string()])
        .args([b.spin.to_string(), inner.to_string()])
        .output()
        .with_context(|| format!("starting {}", c.command.join(" ")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!("{} failed ({}): {}", c.name, out.status, err.trim());
    }
    let mut times = Vec::new();
    let mut checks = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let mut f = line.split_whitespace();
        let (Some(t), Some(v), None) = (f.next(), f.next(), f.next()) else {
            bail!("{}: expected 'SECONDS CHECK', got '{line}'", c.name);
        };
        let t: f64 = t
            .parse()
            .with_context(|| format!("{}: seconds in '{line}'", c.name))?;
        let v: u64 = v
            .parse()
            .with_context(|| format!("{}: check in '{line}'", c.name))?;
        times.push(t);
        checks.push(v);
    }
    if times.len() != inner as usize {
        bail!(
            "{}: {} timed runs reported, {inner} asked for",
            c.name,
            times.len()
        );
    }
    if checks.iter().any(|&v| v != checks[0]) {
        bail!("{}: its runs disagree on {}'s check value", c.name, b.label);
    }
    Ok((median(&times), checks[0]))
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn table(rows: &[Row]) -> String {
    let mut t = String::from(
        "| benchmark | workers | system | median | range | × Tactor |\n|---|---|---|---|---|---|\n",
    );
    for r in rows {
        t += &format!(
            "| {} | {} | {} | {:.2} ms | {:.2}–{:.2} ms | {:.2} |\n",
            r.bench,
            r.workers,
            r.system,
            r.median_s * 1e3,
            r.min_s * 1e3,
            r.max_s * 1e3,
            r.vs_tactor
        );
    }
    t
}

fn write(dir: &std::path::Path, rows: &[Row], table: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut csv = csv::Writer::from_path(dir.join("results.csv"))?;
    for r in rows {
        csv.serialize(r)?;
    }
    csv.flush()?;
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(rows)?,
    )?;
    std::fs::write(dir.join("table.md"), table)?;
    Ok(())
}
