//! Task throughput of the explicit API: empty tasks with no dependencies, and empty tasks in a
//! stencil (each task waits for its three neighbours of the previous step).
//!
//! `cargo run --release -p tactor --example throughput -- [workers] [tasks] [reps]`
//! prints, per shape and worker count, the median and spread of tasks per second and ns per
//! task over `reps` repetitions.

use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use tactor::{Event, Placement, Runtime, Scope};

fn median_spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

/// `n` independent empty tasks, launched by one task on a worker.
fn empty(rt: &Runtime, n: usize) {
    rt.scope(|s| {
        s.launch(Placement::Any, &[], move |s| {
            for _ in 0..n {
                s.launch(Placement::Any, &[], |_| ());
            }
        });
    })
    .unwrap();
}

/// A stencil of empty tasks, `width` points block-placed on the workers, `n / width` steps,
/// launched by a driver that relaunches itself every few steps.
fn stencil(rt: &Runtime, n: usize) {
    let workers = rt.workers();
    let width = workers.max(2);
    let steps = n / width;
    fn drive<'s>(s: &Scope<'s>, prev: Vec<Event>, from: usize, steps: usize, workers: usize) {
        let width = prev.len();
        let mut prev = prev;
        let to = (from + 8).min(steps);
        for _ in from..to {
            prev = (0..width)
                .map(|p| {
                    let lo = p.saturating_sub(1);
                    let hi = (p + 1).min(width - 1);
                    s.launch(
                        Placement::Worker(p * workers / width),
                        &prev[lo..=hi],
                        |_| (),
                    )
                })
                .collect();
        }
        if to < steps {
            s.launch(Placement::Any, &[], move |s| {
                drive(s, prev, to, steps, workers)
            });
        }
    }
    rt.scope(|s| {
        let start: Vec<Event> = (0..width).map(|_| Event::triggered()).collect();
        s.launch(Placement::Any, &[], move |s| {
            drive(s, start, 0, steps, workers)
        });
    })
    .unwrap();
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap_or_else(|_| panic!("not a number: {a}")))
        .collect();
    let max_workers = args.first().copied().unwrap_or(2);
    let n = args.get(1).copied().unwrap_or(200_000);
    let reps = args.get(2).copied().unwrap_or(7);
    println!("shape    workers  tasks/s (median [min, max])          ns/task (median)");
    for workers in 1..=max_workers {
        let rt = Runtime::new(workers).expect("starting the runtime");
        for (name, f) in [
            ("empty", empty as fn(&Runtime, usize)),
            ("stencil", stencil),
        ] {
            f(&rt, n / 10); // warm-up
            let rates: Vec<f64> = (0..reps)
                .map(|_| {
                    let t = Instant::now();
                    f(&rt, n);
                    n as f64 / t.elapsed().as_secs_f64()
                })
                .collect();
            let (med, lo, hi) = median_spread(rates);
            println!(
                "{name:<8} {workers:>7}  {med:>10.3e} [{lo:.3e}, {hi:.3e}]  {:>8.0}",
                1e9 / med
            );
        }
    }
}
