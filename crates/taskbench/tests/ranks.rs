//! `taskbench` on several ranks under a real `mpirun` (oversubscribed, so it runs on any core
//! count): the Task Bench matrix for every system that runs on ranks, the report from rank 0,
//! bad input said once, and faults that end every rank.
#![cfg(feature = "mpi")]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tactor_comm::launcher::Mpirun;

/// `mpirun` for `np` ranks of taskbench, exporting `env` to every rank (its session directory
/// goes when it is dropped: keep it until the job ended).
fn mpirun(np: usize, env: &[(&str, &str)]) -> Mpirun {
    let mut c = Mpirun::new().unwrap();
    c.args(["-np", &np.to_string()]);
    for (k, v) in env {
        c.env(k, v).args(["-x", k]);
    }
    c.arg(env!("CARGO_BIN_EXE_taskbench"));
    c
}

fn run(np: usize, args: &str, env: &[(&str, &str)]) -> Output {
    mpirun(np, env)
        .args(args.split_whitespace())
        .output()
        .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn line<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find(|l| l.trim_start().starts_with(key))
        .unwrap_or_else(|| panic!("no line {key:?} in:\n{out}"))
}

fn number(out: &str, key: &str) -> i64 {
    line(out, key)
        .trim_start()
        .trim_start_matches(key)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Runs `graph` on `np` ranks and in one process; both validate, and the multi-rank report
/// (printed once) has the same totals, with local + nonlocal = all dependencies.
fn same_as_one_process(system: &str, np: usize, workers: usize, graph: &str) {
    let args = format!("{graph} -system {system} -worker {workers}");
    let o = run(np, &args, &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{np} ranks: {args}\n{out}\n{err}");
    assert_eq!(out.matches("Running Task Benchmark").count(), 1, "{out}");
    let single = Command::new(env!("CARGO_BIN_EXE_taskbench"))
        .args(args.split_whitespace())
        .output()
        .unwrap();
    let (one, _) = text(&single);
    assert!(single.status.success());
    for key in [
        "Total Tasks",
        "Total Dependencies",
        "Total FLOPs",
        "Total Bytes",
    ] {
        assert_eq!(number(&out, key), number(&one, key), "{key}: {args}");
    }
    let (local, nonlocal) = (
        number(&out, "Local Dependencies"),
        number(&out, "Nonlocal Dependencies"),
    );
    assert_eq!(local + nonlocal, number(&out, "Total Dependencies"));
    assert_eq!(number(&out, "Number of Ranks"), np as i64);
}

const TYPES: [&str; 11] = [
    "trivial",
    "no_comm",
    "stencil_1d",
    "stencil_1d_periodic",
    "dom",
    "tree",
    "fft",
    "all_to_all",
    "nearest",
    "spread",
    "random_nearest",
];

/// Flags of a graph of type `ty`, `width` points wide, with what the type's rules require.
fn graph(ty: &str, steps: i64, width: i64, rest: &str) -> String {
    let mut f = format!("-steps {steps} -width {width} -type {ty} {rest}");
    if ty == "spread" {
        let radix = width.min(3);
        f += &format!(
            " -radix {radix} -period {}",
            3.min((width + radix - 1) / radix)
        );
    }
    f
}

fn matrix(system: &str) {
    matrix_of(&[system]);
}

/// The matrix with the runs dealt out over `systems` in turn (systems that share their
/// exchange code, each run on some of the types).
fn matrix_of(systems: &[&str]) {
    // Every type, two to a run (a job's start is most of a run's time), on 2 and 3 ranks
    // with 1 or 2 workers each, each run with two more graphs (-and) of other types and
    // kernels; odd widths so blocks are uneven; outputs larger than the minimum.
    for k in 0..TYPES.len().div_ceil(2) {
        let system = systems[k % systems.len()];
        let (a, b) = (TYPES[2 * k], TYPES[(2 * k + 1) % TYPES.len()]);
        let other = TYPES[(2 * k + 5) % TYPES.len()];
        let flags = [
            graph(a, 9, 7, "-output 40"),
            graph(b, 8, 5, "-output 24"),
            graph(other, 6, 5, "-kernel memory_bound -scratch 64 -iter 2"),
            graph(a, 4, 3, "-kernel compute_bound -iter 16"),
        ]
        .join(" -and ");
        same_as_one_process(system, 2 + k % 2, 1 + (k / 2) % 2, &flags);
    }
    // Wide enough that a message crosses the inline limit (rendezvous) and many workers talk.
    same_as_one_process(
        systems[systems.len() - 1],
        3,
        2,
        "-steps 6 -width 600 -type all_to_all -output 64",
    );
}

/// Several graphs on ranks of two workers each (random_nearest, so ranks run ahead of each
/// other): a slot's first writer in a chunk must wait for every reader of the chunk before —
/// the send vertex too, which is no producer. `compiled` once ordered it after the point's
/// producer only, and with a timestep's graphs in two vertices a rank overwrote an output
/// before its send read it, in about two runs of three (validation failed on the receiving
/// rank); runs are repeated because the failure needs an interleaving.
#[test]
fn compiled_keeps_refilled_slots_for_their_readers_with_several_graphs_and_workers() {
    let flags = "-steps 20 -width 6 -type random_nearest -radix 3 -and -steps 15 -width 5 \
                 -type nearest -radix 5";
    for _ in 0..6 {
        same_as_one_process("compiled", 3, 2, flags);
    }
}

/// Long and wide enough that `compiled` chains many instances on every rank (chunks of 32
/// timesteps at 128 points across its graphs, and a shorter last one): each instance's
/// messages are expected anew, pulled by the vertex that reads them (one worker a rank) or
/// waited for by inlets (two).
#[test]
fn compiled_chains_many_instances_across_ranks() {
    let flags = "-steps 300 -width 64 -type stencil_1d -and -steps 250 -width 64 -type nearest \
                 -radix 3 -kernel compute_bound -iter 8";
    same_as_one_process("compiled", 2, 1, flags);
    same_as_one_process("compiled", 3, 2, flags);
}

#[test]
fn bsp_matrix_on_two_and_three_ranks() {
    matrix("bsp");
}

#[test]
fn tasks_matrix_on_two_and_three_ranks() {
    matrix("tasks");
}

/// `compiled` has no exchange code: its chunks are subgraphs of the whole job
/// (`tactor::job::Dataflow`), whose edges between ranks the runtime sends. Every type, then
/// many chunks of graphs whose ranks run ahead of each other (random_nearest), where a replica
/// or a slot refilled too early fails validation; repeated, since that needs an interleaving.
#[test]
fn compiled_matrix_on_two_and_three_ranks() {
    matrix("compiled");
    for _ in 0..2 {
        same_as_one_process(
            "compiled",
            3,
            2,
            "-steps 150 -width 9 -type random_nearest -radix 4 -and -steps 100 -width 5 -type stencil_1d",
        );
    }
}

#[test]
fn implicit_matrix_on_two_and_three_ranks() {
    matrix("implicit");
}

#[test]
fn traced_matrix_on_two_and_three_ranks() {
    matrix("traced");
    // Long enough that chunks repeat: the last one, like the middle ones but with no
    // timestep after it to send to, must be a recording of its own.
    same_as_one_process("traced", 2, 1, "-steps 259 -width 4 -type stencil_1d");
}

/// Seed 004's styles exchange through one piece of code (`styles::Ranks` on
/// `tactor::job::Blocks`; `futures` wires its messages into futures): the types are dealt out
/// over the four, with `futures-barrier` (whose timesteps do not overlap) on the wide run,
/// and `futures` runs every type once more.
#[test]
fn styles_matrix_on_two_and_three_ranks() {
    matrix_of(&["forkjoin", "futures", "parfor", "futures-barrier"]);
    matrix("futures");
}

#[test]
fn auto_matrix_on_two_and_three_ranks() {
    matrix("auto");
    // Long enough for automatic tracing to find the repeating fragment of the program's
    // calls (whole periods of at least 64 calls on ranks) and replay its script, the copies
    // the runtime inserts included, on every rank.
    same_as_one_process("auto", 2, 1, "-steps 600 -width 4 -type stencil_1d");
    same_as_one_process(
        "auto",
        3,
        1,
        "-steps 500 -width 6 -type nearest -and -steps 400 -width 5 -type stencil_1d",
    );
}

#[test]
fn systems_that_stay_in_one_process_say_so_once() {
    let o = run(2, "-steps 4 -width 4 -system serial", &[]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("error: ").count(), 1, "{err}");
    assert!(
        err.contains("-system serial runs in one process only"),
        "{err}"
    );
}

/// Graphs narrower than the job (2 points and 1 on 3 ranks): the ranks without points wait,
/// and every system validates every dependency and reports the whole graph's tasks, as the
/// reference does with more ranks than points.
#[test]
fn graphs_narrower_than_the_job_leave_ranks_idle() {
    let graphs = "-steps 4 -width 2 -type stencil_1d -and -steps 3 -width 1 -type trivial";
    for system in RANK_SYSTEMS
        .into_iter()
        .chain(["futures-barrier", "parfor"])
    {
        let o = run(3, &format!("{graphs} -system {system} -worker 1"), &[]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{system}: {err}");
        assert_eq!(
            line(&out, "Total Tasks").trim(),
            "Total Tasks 11",
            "{system}"
        );
    }
}

#[test]
fn bad_flags_are_reported_once() {
    let o = run(2, "-steps x", &[]);
    let (_, err) = text(&o);
    assert_eq!(err.matches("error: ").count(), 1, "{err}");
    assert_ne!(o.status.code(), Some(0));
    for (flag, once) in [
        ("--version", "taskbench 0."),
        ("-h", "Usage:"),
        ("--list", "Systems:"),
    ] {
        let o = run(2, flag, &[]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{flag}: {err}");
        assert_eq!(out.matches(once).count(), 1, "{flag}: {out}");
    }
    // `--job` is the one every rank answers: what metg checks a launcher with.
    let (out, _) = text(&run(3, "--job", &[]));
    let mut ranks: Vec<&str> = out.lines().collect();
    ranks.sort_unstable();
    assert_eq!(
        ranks,
        ["job: rank 0 of 3", "job: rank 1 of 3", "job: rank 2 of 3"]
    );
}

/// Systems that run on ranks (`parfor` exchanges as `forkjoin` does, `futures-barrier` as
/// `futures`); the runtime sends every message (the faults injected there).
const RANK_SYSTEMS: [&str; 8] = [
    "bsp", "tasks", "compiled", "implicit", "traced", "auto", "forkjoin", "futures",
];

/// Ranks that cannot share memory, as on two hosts: no node-local rings
/// (`TACTOR_COMM_SHM=0`) and Open MPI's TCP transport only. Every system with exchange code
/// of its own validates every dependency on 2 ranks × 2 workers, with inline and rendezvous
/// messages (outputs of 40 and 20 000 bytes), and reports the one-process totals.
#[test]
fn every_system_validates_over_tcp_without_shared_memory() {
    let graphs = "-steps 12 -width 5 -type nearest -radix 3 -output 40 \
                  -and -steps 6 -width 4 -type all_to_all -output 20000";
    for system in RANK_SYSTEMS {
        let args = format!("{graphs} -system {system} -worker 2");
        let mut c = Mpirun::new().unwrap();
        c.args(["-np", "2", "--mca", "btl", "self,tcp"]);
        c.env("TACTOR_COMM_SHM", "0")
            .args(["-x", "TACTOR_COMM_SHM"]);
        c.arg(env!("CARGO_BIN_EXE_taskbench"));
        let o = c.args(args.split_whitespace()).output().unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{args}\n{out}\n{err}");
        let one = Command::new(env!("CARGO_BIN_EXE_taskbench"))
            .args(args.split_whitespace())
            .output()
            .unwrap();
        let (one, _) = text(&one);
        for key in ["Total Tasks", "Total Dependencies", "Total Bytes"] {
            assert_eq!(number(&out, key), number(&one, key), "{key}: {args}");
        }
        assert!(number(&out, "Nonlocal Dependencies") > 0, "{out}");
    }
}

fn fault(system: &str, kind: &str, victim: usize) -> String {
    let o = run(
        2,
        &format!("-steps 50 -width 4 -type stencil_1d -worker 1 -system {system}"),
        &[("TASKBENCH_FAULT", &format!("{victim}:{kind}"))],
    );
    let (_, err) = text(&o);
    assert!(!o.status.success(), "{err}");
    let ours: Vec<_> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert_eq!(
        ours.len(),
        1,
        "{system}, {victim}:{kind}: one rank reports, once:\n{err}"
    );
    ours[0].to_string()
}

#[test]
fn a_corrupted_message_fails_validation_on_the_receiving_rank() {
    for system in RANK_SYSTEMS {
        let msg = fault(system, "corrupt", 0);
        assert!(
            msg.starts_with("error: rank 1: validation failed"),
            "{system}: {msg}"
        );
        let msg = fault(system, "corrupt", 1);
        assert!(
            msg.starts_with("error: rank 0: validation failed"),
            "{system}: {msg}"
        );
    }
}

#[test]
fn a_slow_rank_is_waited_for_and_every_rank_validates() {
    // The receivers of the message held back poll for it a while, then wait on an event
    // (`compiled` suspends the vertex that takes it): the job ends normally.
    for (system, workers) in RANK_SYSTEMS.iter().flat_map(|s| [(s, 1), (s, 2)]) {
        let args =
            format!("-steps 50 -width 4 -type stencil_1d -worker {workers} -system {system}");
        let o = run(2, &args, &[("TASKBENCH_FAULT", "0:slow")]);
        let (out, err) = text(&o);
        assert!(o.status.success(), "{system}: {err}");
        assert_eq!(number(&out, "Total Tasks"), 200, "{system}: {out}");
    }
}

#[test]
fn a_panicking_rank_ends_the_job() {
    for system in RANK_SYSTEMS {
        let msg = fault(system, "panic", 1);
        assert!(
            msg.starts_with("error: rank 1: panicked: injected fault"),
            "{system}: {msg}"
        );
    }
}

/// The processes whose parent is `parent`, from /proc (no procps needed).
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The fields after the command name (which may hold spaces) start after the last ')'.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out.sort_unstable();
    out
}

#[test]
fn a_killed_rank_ends_the_job() {
    for system in RANK_SYSTEMS {
        killed_rank_ends_the_job(system);
    }
}

fn killed_rank_ends_the_job(system: &str) {
    let mut c = mpirun(2, &[]);
    let mut child = c
        .args(
            "-steps 100000000 -width 4 -type stencil_1d -kernel compute_bound -iter 1000 -worker 1 -system"
                .split(' '),
        )
        .arg(system)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until both ranks run, then kill one.
    let start = Instant::now();
    let ranks = loop {
        let pids = children(child.id());
        if pids.len() == 2 {
            break pids;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "ranks did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: sends a signal to a process id we just read; no memory is involved.
    assert_eq!(
        unsafe { libc::kill(ranks[1] as libc::pid_t, libc::SIGKILL) },
        0
    );
    let killed = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success());
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "the job did not end after a rank was killed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // No rank outlives the job (a dying one may take a moment to go).
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
    };
    let gone = Instant::now();
    while alive(&ranks[0].to_string()) {
        assert!(
            gone.elapsed() < Duration::from_secs(10),
            "rank 0 outlived the job"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The session directory goes with `c`, now that the job is over.
    drop(c);
}

/// Variables exported to one rank alone.
type Env<'a> = &'a [(&'a str, &'a str)];

/// Ranks started differently (MPMD: `mpirun -np 1 A : -np 1 B`), each an argument string and
/// the `-x` variables of its own.
fn run_apart(ranks: &[(&str, Env)]) -> Output {
    tactor_comm::launcher::run_mpirun(|c| {
        for (i, (args, env)) in ranks.iter().enumerate() {
            if i > 0 {
                c.arg(":");
            }
            c.args(["-np", "1"]);
            for (k, v) in *env {
                c.args(["-x", &format!("{k}={v}")]);
            }
            c.arg(env!("CARGO_BIN_EXE_taskbench"))
                .args(args.split_whitespace());
        }
    })
    .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)")
}

/// Ranks that were started with other arguments, other worker counts, another transport
/// setting or a bad flag of their own are refused at join, every rank ending at once with one
/// line that names the difference (they used to hang or panic).
#[test]
fn ranks_started_differently_are_named_once() {
    let g = "-steps 4 -width 4 -type stencil_1d";
    let other_steps = g.replace("-steps 4", "-steps 5");
    let cases: [(&str, &str, Env, &str); 4] = [
        (
            g,
            &other_steps,
            &[],
            "rank 1 runs with `-steps 5` where rank 0 runs with `-steps 4`",
        ),
        (
            "-steps 4 -width 4 -worker 1",
            "-steps 4 -width 4 -worker 2",
            &[],
            "rank 1 runs with `-worker 2` where rank 0 runs with `-worker 1`",
        ),
        (g, g, &[("TACTOR_COMM_SHM", "0")], "`TACTOR_COMM_SHM=0`"),
        (
            g,
            "-steps 4 -width 4 -type stencil_1d -bogus",
            &[],
            "rank 1: Unknown flag \"-bogus\"",
        ),
    ];
    for (first, second, env, want) in cases {
        let start = Instant::now();
        let o = run_apart(&[(first, &[]), (second, env)]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{second}: {err}");
        assert_eq!(err.matches("error: ").count(), 1, "{second}: {err}");
        assert!(err.contains(want), "{second}: {err}");
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{second}: slow to end"
        );
    }
}
