//! A 1-D heat equation on Tactor's implicit face, block-partitioned over the workers of a job:
//! the same program in one process and under `mpirun`, checked against its serial result.

use std::sync::Arc;
use tactor::implicit::{read, read_write, write, Region, Replicated};
use tactor::job::Job;
use tactor::Runtime;

/// A run's size.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Cells per block (one block per worker of the job).
    pub cells: usize,
    /// Timesteps.
    pub steps: usize,
    /// Record a pair of timesteps once and replay it.
    pub traced: bool,
    /// For the tests of failures: this rank fails half-way (`HEAT_FAULT=RANK`).
    pub fail_here: bool,
}

/// The diffusion number: stable for explicit Euler below 1/2.
const NU: f64 = 0.25;
/// The rod's ends, held fixed.
const ENDS: [f64; 2] = [1.0, 0.0];

/// The initial temperature of cell `i` of `n`: a bump in the middle.
fn initial(i: usize, n: usize) -> f64 {
    let x = (i as f64 + 0.5) / n as f64;
    (-(x - 0.5) * (x - 0.5) * 40.0).exp()
}

/// One step of cells `u` with `left` and `right` beyond them, into `out`.
fn step(u: &[f64], left: f64, right: f64, out: &mut [f64]) {
    let n = u.len();
    for i in 0..n {
        let l = if i == 0 { left } else { u[i - 1] };
        let r = if i + 1 == n { right } else { u[i + 1] };
        out[i] = u[i] + NU * (l - 2.0 * u[i] + r);
    }
}

/// The serial result: every cell of the rod after `steps`.
pub fn serial(n: usize, steps: usize) -> Vec<f64> {
    let mut u: Vec<f64> = (0..n).map(|i| initial(i, n)).collect();
    let mut next = vec![0.0; n];
    for _ in 0..steps {
        step(&u, ENDS[0], ENDS[1], &mut next);
        std::mem::swap(&mut u, &mut next);
    }
    u
}

/// What a run found: the rod and how long the steps took.
#[derive(Debug)]
pub struct Outcome {
    /// Every cell, in order.
    pub rod: Vec<f64>,
    /// Seconds from the first launch to the last block's result.
    pub seconds: f64,
    /// Copies this rank sent or received (the runtime's cross-rank edges).
    pub copies: u64,
    /// Traces this rank recorded.
    pub traces: usize,
}

/// Runs the heat equation over every worker of `job` (one block each) on `rt`.
pub fn run(rt: &Runtime, job: &Arc<Job>, p: Params) -> Result<Outcome, String> {
    let mut prog = Replicated::new(rt, job);
    let blocks = prog.workers();
    let n = blocks * p.cells;
    let cells = p.cells;
    // A block's cells, and its two edge cells in two generations (a step reads its
    // neighbours' edges of the last step while it writes its own for the next).
    let rod: Vec<Region<Vec<f64>>> = (0..blocks)
        .map(|b| {
            prog.region(
                b,
                (b * cells..(b + 1) * cells)
                    .map(|i| initial(i, n))
                    .collect(),
            )
        })
        .collect();
    let edges: Vec<Vec<Region<[f64; 2]>>> = (0..2)
        .map(|_| {
            (0..blocks)
                .map(|b| {
                    let (first, last) = (b * cells, (b + 1) * cells - 1);
                    prog.region(b, [initial(first, n), initial(last, n)])
                })
                .collect()
        })
        .collect();
    let start = std::time::Instant::now();
    for t in 0..p.steps {
        if p.fail_here && t == p.steps / 2 {
            // Told before this rank's program is dropped: its tasks that wait for other
            // ranks' copies are poisoned with the rest, so nothing waits for them.
            job.fail("injected fault (HEAT_FAULT)");
            return Err(String::new());
        }
        // Traced a pair of steps at a time (the edges' generations alternate), from the
        // third pair on: the first has no copies yet (every rank made the edges), the
        // second fetches them (no rank knows yet who reads its edges, so none sends them as
        // it writes them); the others are all alike, and on ranks a trace replays its
        // script only from the state its recording started from.
        let traced = p.traced && t >= 4 && t / 2 < p.steps / 2;
        if traced && t % 2 == 0 {
            prog.begin_trace(1).map_err(|e| e.to_string())?;
        }
        let (old, new) = (&edges[t % 2], &edges[(t + 1) % 2]);
        for b in 0..blocks {
            let left = (b > 0).then(|| read(&old[b - 1]));
            let right = (b + 1 < blocks).then(|| read(&old[b + 1]));
            let access = (
                left.into_iter().collect::<Vec<_>>(),
                right.into_iter().collect::<Vec<_>>(),
                read_write(&rod[b]),
                write(&new[b]),
            );
            prog.launch(b, access, move |(l, r, u, e)| {
                let left = if l.is_empty() { ENDS[0] } else { l.get(0)[1] };
                let right = if r.is_empty() { ENDS[1] } else { r.get(0)[0] };
                let mut next = vec![0.0; u.len()];
                step(u, left, right, &mut next);
                *u = next;
                *e = [u[0], u[u.len() - 1]];
            });
        }
        if traced && t % 2 == 1 {
            prog.end_trace().map_err(|e| e.to_string())?;
        }
    }
    let mut out = Vec::with_capacity(n);
    for block in &rod {
        let part = prog.with(block, |v| v.clone()).map_err(|e| e.to_string())?;
        out.extend(part);
    }
    Ok(Outcome {
        rod: out,
        seconds: start.elapsed().as_secs_f64(),
        copies: prog.copies(),
        traces: prog.local().recorded_traces(),
    })
}
