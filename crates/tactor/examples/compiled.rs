//! Compiled subgraphs of empty tasks: what an instantiation costs and how many tasks per second
//! a compiled graph runs, against launching the same graph task by task (part 1's API).
//!
//! `cargo run --release -p tactor --example compiled -- [workers] [steps] [reps]`
//!
//! - `hand-off`: the hardware floor, measured before the runtime starts: two threads pass a
//!   counter back and forth through one atomic; half a round trip, i.e. one cross-core hand-off.
//!   A stencil step of `stencil 1` cannot take less than one of these.
//! - `instantiate call`: the `instantiate` call alone, for a subgraph with one empty task per
//!   worker whose instances all wait for one user event (nothing runs while they are timed).
//! - `instance round`: one such instance instantiated from a worker after the previous one
//!   completed: the whole cost (instantiate, activate on every worker, run, complete), per
//!   instance.
//! - `stencil C`: `C` independent chains of a stencil of empty tasks, one point per worker,
//!   each task after its neighbours of the previous step, compiled `CHUNK` steps per subgraph
//!   and instances chained through their boundary; ns per task over all chains. The same
//!   stencil launched task by task (part 1's API) is the `stencil` shape of the `throughput`
//!   example.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use tactor::{Event, Placement, Runtime, Scope, Subgraph, SubgraphBuilder, UserEvent};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CHUNK: usize = 256;

fn median_spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// `steps` steps of a stencil over one point per worker; the previous instance's last step is
/// the preconditions, this one's last step the postconditions.
fn stencil_graph(rt: &Runtime, steps: usize) -> Subgraph<()> {
    let w = rt.workers();
    let mut b = SubgraphBuilder::new();
    let pres: Vec<_> = (0..w).map(|_| b.precondition()).collect();
    let posts: Vec<_> = (0..w).map(|_| b.postcondition()).collect();
    let mut prev = Vec::new();
    for s in 0..steps {
        let row: Vec<_> = (0..w).map(|p| b.task(p, |_| ())).collect();
        for (p, &task) in row.iter().enumerate() {
            for q in p.saturating_sub(1)..(p + 2).min(w) {
                if s == 0 {
                    b.wait_for(pres[q], task);
                } else {
                    b.edge(prev[q], task);
                }
            }
        }
        prev = row;
    }
    for (&task, &post) in prev.iter().zip(&posts) {
        b.signal(task, post);
    }
    b.compile(rt).expect("a valid subgraph")
}

/// Runs `chains` chains of `instances` instances each; returns when all completed.
fn run_chains(rt: &Runtime, graph: &Subgraph<()>, chains: usize, instances: usize) {
    let w = rt.workers();
    let done = Mutex::new(Vec::new());
    rt.scope(|s| {
        for _ in 0..chains {
            let done = &done;
            s.launch(Placement::Any, &[], move |_| {
                let mut pre = vec![Event::triggered(); w];
                let mut last = None;
                for _ in 0..instances {
                    let inst = graph.instantiate((), &pre);
                    pre = inst.postconditions;
                    last = Some(inst.completion);
                }
                done.lock().unwrap().extend(last);
            });
        }
    })
    .unwrap();
    Event::merge(&done.into_inner().unwrap()).wait().unwrap();
}

/// `n` instances one after the other, each instantiated when the previous completes.
fn instantiate_serial(rt: &Runtime, graph: &Subgraph<()>, n: usize) {
    fn next<'s>(s: &Scope<'s>, graph: &'s Subgraph<()>, left: usize) {
        if left > 0 {
            let inst = graph.instantiate((), &[]);
            s.launch(Placement::Any, &[inst.completion], move |s| {
                next(s, graph, left - 1)
            });
        }
    }
    rt.scope(|s| s.launch(Placement::Any, &[], move |s| next(s, graph, n)))
        .unwrap();
}

/// Half the round trip of a counter passed between two threads through one atomic.
fn hand_off(rounds: u64) -> f64 {
    let turn = AtomicU64::new(0);
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..rounds {
                while turn.load(Ordering::Acquire) != 2 * k + 1 {
                    std::hint::spin_loop();
                }
                turn.store(2 * k + 2, Ordering::Release);
            }
        });
        for k in 0..rounds {
            turn.store(2 * k + 1, Ordering::Release);
            while turn.load(Ordering::Acquire) != 2 * k + 2 {
                std::hint::spin_loop();
            }
        }
    });
    t.elapsed().as_nanos() as f64 / (2 * rounds) as f64
}

fn report(name: &str, reps: usize, per_rep: f64, mut f: impl FnMut()) {
    f(); // warm-up
    let ns: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / per_rep
        })
        .collect();
    let (med, lo, hi) = median_spread(ns);
    row(name, (med, lo, hi), &format!("{:.3e}/s", 1e9 / med));
}

/// One line of the table: the columns line up whatever the numbers' widths.
fn row(name: &str, (med, lo, hi): (f64, f64, f64), last: &str) {
    let spread = format!("[{lo:.1}, {hi:.1}]");
    println!("{name:<18} {med:>10.1} ns  {spread:>20}  {last}");
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse().unwrap_or_else(|_| {
                eprintln!("error: not a number: {a}");
                std::process::exit(2)
            })
        })
        .collect();
    let workers = args.first().copied().unwrap_or(2);
    let steps = args.get(1).copied().unwrap_or(100_000).max(CHUNK);
    let reps = args.get(2).copied().unwrap_or(7).max(1);
    println!("{workers} workers, {steps} steps; each line: median time per unit over {reps} runs,");
    println!(
        "[min, max] of those runs in ns, and the rate the median gives (see the file's docs)."
    );
    println!(
        "{:<18} {:>13}  {:>20}  rate",
        "what", "per unit", "[min, max] ns"
    );
    let hand = median_spread((0..reps).map(|_| hand_off(steps as u64)).collect());
    row("hand-off", hand, "one way: the hardware floor");
    let rt = Runtime::new(workers).expect("starting the runtime");
    let single = {
        let mut b = SubgraphBuilder::new();
        for w in 0..workers {
            b.task(w, |_: &()| ());
        }
        b.compile(&rt).expect("a valid subgraph")
    };
    let n = steps / 10;
    let gated = {
        let mut b = SubgraphBuilder::new();
        let gate = b.precondition();
        for w in 0..workers {
            let t = b.task(w, |_: &()| ());
            b.wait_for(gate, t);
        }
        b.compile(&rt).expect("a valid subgraph")
    };
    let calls: Vec<f64> = (0..reps)
        .map(|_| {
            let gate = UserEvent::new();
            let pre = [gate.event()];
            let t = Instant::now();
            let done: Vec<Event> = (0..n)
                .map(|_| gated.instantiate((), &pre).completion)
                .collect();
            let ns = t.elapsed().as_nanos() as f64 / n as f64;
            gate.trigger().expect("triggered once");
            Event::merge(&done).wait().expect("instances run");
            ns
        })
        .collect();
    let call = median_spread(calls);
    row("instantiate call", call, &format!("{:.3e}/s", 1e9 / call.0));
    report("instance round", reps, n as f64, || {
        instantiate_serial(&rt, &single, n)
    });
    let graph = stencil_graph(&rt, CHUNK);
    let instances = steps / CHUNK;
    for chains in [1, 2, 4] {
        let tasks = (chains * instances * CHUNK * workers) as f64;
        report(&format!("stencil {chains}"), reps, tasks, || {
            run_chains(&rt, &graph, chains, instances)
        });
    }
}
