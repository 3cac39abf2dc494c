//! What implicit parallelism costs the thread that issues the program, per launch: the
//! dependence analysis (every launch analysed), recording a trace (the analysis on symbols,
//! plus compiling the fragment at its end), replaying it (each launch checked against the
//! recording), automatic tracing (the same launches without annotations: detection,
//! then replays), and replaying the same stencil written as one index launch per timestep
//! (per point: the issuing thread matches the launch once, each point is checked where it
//! runs). The program is a 1-D stencil over `width` regions in two rows, each task
//! reading three neighbours and writing its own region; tasks are empty and run on the
//! runtime's one worker while this thread issues.
//!
//! ```text
//! cargo run --release -p tactor --example implicit -- [width] [steps] [reps]
//! ```

use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use tactor::implicit::{read, read_write, ConstRef, Constant, Program, Read, ReadWrite, Region};
use tactor::{Placement, Runtime};

fn step(p: &mut Program, rows: &[Vec<Region<u64>>; 2], t: usize) {
    let (row, prev) = (&rows[t % 2], &rows[(t + 1) % 2]);
    let w = row.len();
    for (i, mine) in row.iter().enumerate() {
        let inputs: smallvec::SmallVec<[Read<u64>; 4]> = (i.saturating_sub(1)..(i + 2).min(w))
            .map(|j| read(&prev[j]))
            .collect();
        p.launch(Placement::Any, (inputs, read_write(mine)), |(ins, me)| {
            *me = ins.iter().sum::<u64>() + 1
        });
    }
}

/// A point's inputs: its neighbours in the last row.
type Inputs = smallvec::SmallVec<[Read<u64>; 4]>;

/// Point `i` of timestep `t` of the stencil as an index launch.
fn project(
    rows: ConstRef<'_, [Vec<Region<u64>>; 2]>,
    t: usize,
    i: u32,
) -> (Placement, (Inputs, ReadWrite<u64>)) {
    let (row, prev) = (&rows[t % 2], &rows[(t + 1) % 2]);
    let (i, w) = (i as usize, row.len());
    let inputs = (i.saturating_sub(1)..(i + 2).min(w))
        .map(|j| read(&prev[j]))
        .collect();
    (Placement::Any, (inputs, read_write(&row[i])))
}

fn index_step(p: &mut Program, rows: &Constant<[Vec<Region<u64>>; 2]>, t: usize) {
    let w = rows[0].len() as u32;
    p.index_launch(w, rows, t, project, |_, _, _, (ins, me)| {
        *me = ins.iter().sum::<u64>() + 1
    });
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("arguments are numbers: width steps reps"))
        .collect();
    let width = args.first().copied().unwrap_or(8);
    let steps = args.get(1).copied().unwrap_or(20_000);
    let reps = args.get(2).copied().unwrap_or(5);
    let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
    let per_trace = 64;
    let launches = (width * steps) as f64;
    let mut rows = Vec::new();
    let (mut analysed, mut recorded, mut replayed) = (Vec::new(), Vec::new(), Vec::new());
    let (mut automatic, mut indexed) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let mut p = Program::new(&rt);
        let mut row = || (0..width).map(|_| p.region(0u64)).collect::<Vec<_>>();
        let r = [row(), row()];
        let start = Instant::now();
        for t in 0..steps {
            step(&mut p, &r, t);
        }
        analysed.push(start.elapsed().as_secs_f64() * 1e9 / launches);
        p.finish().unwrap();

        // Recording: a new trace id for every fragment, so each is analysed and compiled.
        let mut id = 0;
        let start = Instant::now();
        for t0 in (0..steps).step_by(per_trace) {
            id += 1;
            p.trace(id, |p| (t0..t0 + per_trace).for_each(|t| step(p, &r, t)))
                .unwrap();
        }
        recorded.push(start.elapsed().as_secs_f64() * 1e9 / launches);
        p.finish().unwrap();

        let start = Instant::now();
        for t0 in (0..steps).step_by(per_trace) {
            p.trace(1, |p| (t0..t0 + per_trace).for_each(|t| step(p, &r, t)))
                .unwrap();
        }
        replayed.push(start.elapsed().as_secs_f64() * 1e9 / launches);
        p.finish().unwrap();

        let shared = p.constant(r.clone());
        let start = Instant::now();
        for t0 in (0..steps).step_by(per_trace) {
            p.trace(u64::MAX, |p| {
                (t0..t0 + per_trace).for_each(|t| index_step(p, &shared, t))
            })
            .unwrap();
        }
        indexed.push(start.elapsed().as_secs_f64() * 1e9 / launches);
        p.finish().unwrap();

        let mut q = Program::new(&rt);
        q.auto_trace(true);
        let mut row = || (0..width).map(|_| q.region(0u64)).collect::<Vec<_>>();
        let r2 = [row(), row()];
        let start = Instant::now();
        for t in 0..steps {
            step(&mut q, &r2, t);
        }
        q.flush();
        automatic.push(start.elapsed().as_secs_f64() * 1e9 / launches);
        q.finish().unwrap();
        assert!(
            q.auto_stats().fragments > 0,
            "automatic tracing found the fragment"
        );
        rows.push(r);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    println!("issuing cost per launch, ns (median [min, max] of {reps}; width {width}, {steps} steps, {per_trace} per trace)");
    for (name, v) in [
        ("analysed", &mut analysed),
        ("recorded", &mut recorded),
        ("replayed", &mut replayed),
        ("automatic", &mut automatic),
        ("index replayed", &mut indexed),
    ] {
        let (m, lo, hi) = median(v);
        println!("{name:>14} {m:8.0} [{lo:.0}, {hi:.0}]");
    }
}
