//! One `taskbench metg` comparison: the contenders and `--out` checked first, the whole sweeps
//! run (`--runs`), then the table and the files.

use super::analyze::{Params, Stat};
use super::args::{usage, MetgArgs};
use super::output;
use super::process;
use super::results::{analyse_run, combine, write_results};
use super::sweep::{self, with_iterations, Contender, SweepConfig};
use anyhow::Context;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use taskbench_core::app::App;
use taskbench_core::graph::KernelType;

/// The name and the command of the `k`-th `--external` value: `NAME=COMMAND` when NAME is a
/// name (letters, digits and `_-.`, and `@` for where it ran, as our own `compiled@2`: the
/// plot then draws it as a run on ranks), else the whole value is the command.
fn split_external(ext: &str, k: usize) -> (String, &str) {
    let named = |n: &str| {
        !n.is_empty() && (n.chars()).all(|ch| ch.is_ascii_alphanumeric() || "_-.@".contains(ch))
    };
    match ext.split_once('=') {
        Some((n, c)) if named(n) => (n.to_string(), c),
        _ => (format!("external{}", k + 1), ext),
    }
}

fn contenders(m: &MetgArgs, workers: usize) -> anyhow::Result<Vec<Contender>> {
    let exe = std::env::current_exe()
        .context("locating the taskbench executable")?
        .display()
        .to_string();
    let names: Vec<String> = if m.system.is_empty() && m.external.is_empty() {
        crate::systems::all()
            .iter()
            .map(|s| s.name().to_string())
            .collect()
    } else {
        m.system.clone()
    };
    let mut out: Vec<Contender> = Vec::new();
    for name in names {
        if crate::systems::by_name(&name).is_none() {
            let known: Vec<_> = crate::systems::all().iter().map(|s| s.name()).collect();
            usage!(
                "Invalid option \"--system {name}\": expected one of {}",
                known.join(", ")
            );
        }
        let command = vec![
            exe.clone(),
            "-system".into(),
            name.clone(),
            "-worker".into(),
            workers.to_string(),
        ];
        out.push(Contender {
            name: name.clone(),
            command: command.clone(),
        });
        let system = crate::systems::by_name(&name).expect("checked above");
        if let Some(ranks) = m.ranks.filter(|_| system.runs_on_ranks()) {
            // Driven exactly like an external MPI program: the launcher prefix, then ours.
            let mut cmd = launcher_prefix(m, ranks)?;
            cmd.extend(command[..4].iter().cloned());
            cmd.push((workers / ranks).max(1).to_string());
            out.push(Contender {
                name: format!("{name}@{ranks}"),
                command: cmd,
            });
        }
    }
    if let Some(ranks) = m.ranks.filter(|_| out.iter().any(|c| c.name.contains('@'))) {
        check_launcher(m, ranks, &exe)?;
    }
    for (k, ext) in m.external.iter().enumerate() {
        let (name, cmd) = split_external(ext, k);
        let Ok(command) = shell_words::split(cmd) else {
            usage!("Invalid option \"--external {ext}\": unbalanced quotes");
        };
        if command.is_empty() {
            usage!("Invalid option \"--external {ext}\": empty command");
        }
        if !runnable(&command[0]) {
            usage!(
                "Invalid option \"--external {ext}\": no program \"{}\" (not an executable file, nor on PATH)",
                command[0]
            );
        }
        out.push(Contender { name, command });
    }
    // Names key the logs and the plot: two of one name would overwrite each other.
    for (i, c) in out.iter().enumerate() {
        if out[..i].iter().any(|o| o.name == c.name) {
            usage!(
                "two contenders are named \"{}\": give each --external its own NAME=",
                c.name
            );
        }
    }
    Ok(out)
}

/// Makes sure `--out` can take the results before anything is measured.
fn prepare_out(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        usage!(
            "Invalid option \"--out {}\": exists and is not a directory",
            dir.display()
        );
    }
    if let Err(e) = std::fs::create_dir_all(dir) {
        usage!(
            "Invalid option \"--out {}\": cannot create it: {e}",
            dir.display()
        );
    }
    let probe = dir.join(format!(".taskbench-metg-probe-{}", std::process::id()));
    if let Err(e) = std::fs::write(&probe, b"") {
        usage!(
            "Invalid option \"--out {}\": cannot write there: {e}",
            dir.display()
        );
    }
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// A fixed `bsp` run of ours on every core of the machine with the given graph flags: the
/// sweep's probes of the machine's state.
fn bsp_probe(exe: &str, graph: &str) -> Vec<String> {
    let cores = crate::systems::default_workers().to_string();
    let mut cmd = vec![
        exe.to_string(),
        "-system".into(),
        "bsp".into(),
        "-worker".into(),
    ];
    cmd.push(cores.clone());
    cmd.extend(["-width".to_string(), cores]);
    cmd.extend(graph.split_whitespace().map(String::from));
    cmd
}

/// The signal that stopped the sweep (SIGINT until one is received).
static STOPPED_BY: AtomicI32 = AtomicI32::new(libc::SIGINT);

/// Whether `program` names an executable file: a path, or a name found on `PATH`, as the shell
/// would run it. A contender that cannot start is found before the sweep, not after it.
fn runnable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.is_file()
            && p.metadata()
                .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| executable(&d.join(program))))
}

/// `--launcher` for `ranks` ranks, split into words.
fn launcher_prefix(m: &MetgArgs, ranks: usize) -> anyhow::Result<Vec<String>> {
    let launcher = m.launcher.replace("{R}", &ranks.to_string());
    let Ok(cmd) = shell_words::split(&launcher) else {
        usage!(
            "Invalid option \"--launcher {}\": unbalanced quotes",
            m.launcher
        );
    };
    Ok(cmd)
}

/// Checks once, before any sweep, that `--launcher` starts `ranks` ranks: otherwise every
/// `S@R` result would be a run on another number of ranks under that name.
fn check_launcher(m: &MetgArgs, ranks: usize, exe: &str) -> anyhow::Result<()> {
    let mut cmd = launcher_prefix(m, ranks)?;
    cmd.extend([exe.to_string(), crate::cli::JOB_FLAG.to_string()]);
    let stop = AtomicBool::new(false);
    let said = process::run_once(&cmd, Duration::from_secs(120), &stop).map_err(|e| {
        anyhow::Error::new(super::Usage(format!(
            "Invalid option \"--launcher {}\": {}",
            m.launcher,
            e.lines().next().unwrap_or("")
        )))
    })?;
    let mut seen: Vec<usize> = said
        .lines()
        .filter_map(|l| l.strip_prefix("job: rank "))
        .filter_map(|l| {
            let (r, n) = l.split_once(" of ")?;
            (n.trim().parse::<usize>().ok()? == ranks).then(|| r.trim().parse::<usize>().ok())?
        })
        .collect();
    seen.sort_unstable();
    seen.dedup();
    if seen != (0..ranks).collect::<Vec<_>>() {
        let started = said.lines().filter(|l| l.starts_with("job: rank ")).count();
        usage!(
            "Invalid option \"--launcher {}\": it must start {ranks} ranks of one job, but `{}` started {started} process(es) that saw {}",
            m.launcher,
            shell_words::join(&cmd),
            said.lines()
                .find(|l| l.starts_with("job: "))
                .map_or("no job".into(), |l| format!("\"{}\"", l.trim_start_matches("job: ")))
        );
    }
    Ok(())
}

pub(super) fn run_sweep(m: &MetgArgs, graph_flags: Vec<String>) -> anyhow::Result<()> {
    if graph_flags.iter().any(|f| f == "-iter") {
        usage!("-iter is set by the sweep; use --max-iter and --min-iter");
    }
    if m.max_iter < m.min_iter {
        usage!(
            "Invalid options \"--min-iter {} --max-iter {}\": need min <= max",
            m.min_iter,
            m.max_iter
        );
    }
    let mut sizes = Vec::new();
    let mut n = m.max_iter;
    while n >= m.min_iter {
        sizes.push(n);
        n /= 2;
    }
    let mut apps = Vec::new();
    for &n in &sizes {
        match App::parse(&with_iterations(&graph_flags, n), &[]) {
            Ok((a, _)) => apps.push(a),
            Err(e) => usage!("{e}"),
        }
    }
    let kinds: Vec<KernelType> = apps[0].graphs.iter().map(|g| g.kernel.kind).collect();
    let bytes = kinds.iter().all(|&k| k == KernelType::MemoryBound);
    if apps[0].totals().flops == 0 && !bytes {
        usage!("METG needs a kernel that does measurable work: -kernel compute_bound, compute_bound2, load_imbalance or memory_bound (got {})", kinds[0]);
    }
    let cores = m.cores.unwrap_or_else(crate::systems::default_workers);
    let workers = m.worker.unwrap_or(cores);
    let contenders = contenders(m, workers)?;
    if let Some(dir) = &m.out {
        prepare_out(dir)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    {
        // SIGTERM (a scheduler's time limit) and SIGHUP end a sweep as Ctrl-C does: what
        // was measured is written, then the exit status says it is incomplete.
        let stop = stop.clone();
        tactor_cli::signals::on_termination(move |sig| {
            STOPPED_BY.store(sig, Ordering::Relaxed);
            if stop.swap(true, Ordering::Relaxed) {
                process::end_all();
                std::process::exit(128 + sig);
            }
            tactor_cli::say!(
                "\n{}: finishing with what was measured (send it again to quit at once)",
                tactor_cli::signals::name(sig)
            );
        })
        .context("handling termination signals")?;
    }
    let names: Vec<&str> = contenders.iter().map(|c| c.name.as_str()).collect();
    tactor_cli::say!(
        "METG sweep: {} on {cores} cores, -iter {}..{} by halves, {} reps, {} run(s): {}",
        names.join(", "),
        m.max_iter,
        m.min_iter,
        m.reps,
        m.runs,
        graph_flags.join(" ")
    );
    let exe = std::env::current_exe()
        .context("locating the taskbench executable")?
        .display()
        .to_string();
    let cfg = SweepConfig {
        graph_flags: graph_flags.clone(),
        sizes,
        reps: m.reps,
        threshold: m.threshold,
        peak: m.peak,
        bytes,
        timeout: Duration::from_secs_f64(m.timeout),
        noise: m.noise,
        retry_budget: m.retry_budget,
        // Compute rate: is the machine as fast as it was?
        calibration: Some(bsp_probe(
            &exe,
            "-steps 100 -type trivial -kernel compute_bound -iter 32768",
        )),
        // Time per lock-step exchange between cores.
        step_probe: Some(bsp_probe(
            &exe,
            "-steps 2000 -type stencil_1d -kernel empty",
        )),
    };
    let params = |peak| Params {
        ngraphs: apps[0].graphs.len(),
        nodes: 1.0,
        cores: cores as f64,
        threshold: m.threshold,
        peak,
        stat: m.stat,
    };
    let mut results = Vec::new();
    for r in 0..m.runs {
        if m.runs > 1 {
            tactor_cli::say!("== run {} of {}", r + 1, m.runs);
        }
        let sw = sweep::sweep(&contenders, &apps, &cfg, stop.clone());
        results.push(analyse_run(m, &contenders, sw, &params, bytes)?);
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    if results.iter().all(|r| r.peak <= 0.0) {
        if stop.load(Ordering::Relaxed) {
            tactor_cli::say!("stopped before any run finished: nothing to write");
            std::process::exit(128 + STOPPED_BY.load(Ordering::Relaxed));
        }
        anyhow::bail!("no run succeeded, so no peak could be measured");
    }
    let outcomes = combine(&results);
    let unit = if bytes { "B/s" } else { "FLOP/s" };
    let shown = results.last().expect("at least one run");
    out!("Peak: {:.4e} {unit} ({})\n", shown.peak, shown.peak_source);
    if results.len() > 1 {
        let peaks: Vec<String> = results.iter().map(|r| format!("{:.3e}", r.peak)).collect();
        out!(
            "Peaks of the {} runs: {} {unit}\n",
            results.len(),
            peaks.join(", ")
        );
    }
    out!("{}", output::table(&outcomes, m.threshold));
    let cal: Vec<f64> = results
        .iter()
        .flat_map(|r| r.sweep.calibration.iter().copied())
        .collect();
    let machine_noise = sweep::drift(&cal);
    // Other programs' share of the CPU, the worst whole run.
    let foreign = results
        .iter()
        .filter_map(|r| r.sweep.foreign_load)
        .reduce(f64::max);
    let loaded = foreign.is_some_and(|f| f > m.noise);
    // The whole result is noisy when the machine was loaded by other programs or some
    // system's METG rests only on noisy sizes; the drift of the machine's own speed is shown
    // for judgement (these VMs drift 10-50 % while idle) and enters each METG's interval.
    let noisy = loaded || outcomes.iter().any(|o| o.noisy);
    let load = foreign.map_or("unknown".to_string(), |f| format!("{:.0}%", f * 100.0));
    out!(
        "Machine: other programs used {load} of its CPU time; its speed drifted by {:.0}% (calibration runs, p10 to p90).\n",
        machine_noise * 100.0
    );
    let step = step_median(&results);
    if let Some(step) = step {
        out!(
            "Machine: one lock-step exchange between cores (bsp, empty stencil) took {:.0} ns (median of the sweep): METGs here scale with it, so compare sittings by it too.\n",
            step * 1e9
        );
    }
    if loaded {
        out!(
            "Noisy: other programs used more than the {:.0}% tolerance of the CPU: this comparison was taken on a loaded machine.\n",
            m.noise * 100.0
        );
    } else if noisy {
        out!("Noisy: some METG above rests only on sizes measured under noise ('*').\n");
    }
    let interrupted = stop.load(Ordering::Relaxed);
    if interrupted {
        out!("(interrupted: results cover what was measured)\n");
    }
    if let Some(dir) = &m.out {
        write_results(
            dir,
            m,
            &contenders,
            &results,
            &outcomes,
            &graph_flags,
            cores,
            workers,
            machine_noise,
            foreign,
            step,
            noisy,
            interrupted,
            unit,
        )?;
    }
    if interrupted {
        // Results are saved; the exit status still tells scripts the sweep is incomplete.
        if let Err(e) = tactor_cli::output::finish() {
            tactor_cli::say!("error: {e}");
        }
        std::process::exit(128 + STOPPED_BY.load(Ordering::Relaxed));
    }
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.error.is_some())
        .map(|o| o.name.as_str())
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "{} failed (the table and the files have what was measured; the error is above)",
            failed.join(", ")
        );
    }
    Ok(())
}

impl MetgArgs {
    pub(super) fn stat_name(&self) -> &'static str {
        match self.stat {
            Stat::Mean => "mean",
            Stat::Median => "median",
            Stat::Min => "min",
        }
    }
}

/// The median step-probe time over every run, in seconds.
fn step_median(results: &[super::results::RunResult]) -> Option<f64> {
    let mut v: Vec<f64> = results
        .iter()
        .flat_map(|r| r.sweep.step_seconds.iter().copied())
        .collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::split_external;

    #[test]
    fn an_external_is_named_before_its_equals_sign_placement_included() {
        let cases = [
            (
                "nonblock@2=mpirun -np 2 ./nonblock",
                "nonblock@2",
                "mpirun -np 2 ./nonblock",
            ),
            ("ref=./nonblock -worker 2", "ref", "./nonblock -worker 2"),
            ("a=b=c", "a", "b=c"),
            (
                "mpirun -np 2 ./nonblock",
                "external3",
                "mpirun -np 2 ./nonblock",
            ),
            ("=./x", "external3", "=./x"),
            ("a b=./x", "external3", "a b=./x"),
        ];
        for (ext, name, cmd) in cases {
            assert_eq!(split_external(ext, 2), (name.to_string(), cmd), "{ext}");
        }
    }
}
