//! Conjugate gradients for the 1-D Poisson problem on Tactor's implicit face: the tridiagonal
//! matrix [-1, 2, -1] of `n` unknowns, the right-hand side of the known solution "all ones"
//! (PETSc's `ex23`), the vectors block-partitioned over the workers of a job. The two dot
//! products of an iteration are reductions whose totals feed the next launches; on ranks the
//! runtime makes them all-reduces. The same program runs in one process and under `mpirun`.

use crate::blocks::Blocks;
use crate::fragments::Fragments;
use std::sync::Arc;
use tactor::implicit::{read, read_write, reduce, write, Region, Replicated, Sum};
use tactor::job::Job;
use tactor::Runtime;

/// A run's size.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Unknowns.
    pub n: usize,
    /// Iterations at most.
    pub iterations: usize,
    /// Stop once the residual's norm is at most this fraction of the first (0: never).
    pub tolerance: f64,
    /// Blocks of unknowns per worker of the job.
    pub blocks_per_worker: usize,
    /// Record a fragment of iterations once and replay it.
    pub traced: bool,
    /// Iterations per traced fragment (one with a tolerance: the residual is read after each).
    pub span: usize,
}

/// What a solve found.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The solution after the last iteration.
    pub x: Vec<f64>,
    /// Iterations done.
    pub iterations: usize,
    /// The residual's 2-norm, `|b - A x|` as the recurrence kept it.
    pub residual: f64,
    /// Seconds of the iterations (setup and the read-back of `x` aside).
    pub seconds: f64,
    /// Launches this rank's program took per iteration (copies included; 0 when serial).
    pub launches_per_iteration: f64,
}

impl Outcome {
    /// The error's 2-norm against the known solution (all ones).
    pub fn error(&self) -> f64 {
        self.x
            .iter()
            .map(|v| (v - 1.0) * (v - 1.0))
            .sum::<f64>()
            .sqrt()
    }
}

/// Entry `i` of the right-hand side `b = A·1`: the ends' missing neighbours leave a 1 there.
fn rhs(i: usize, n: usize) -> f64 {
    if n == 1 {
        2.0
    } else if i == 0 || i + 1 == n {
        1.0
    } else {
        0.0
    }
}

/// Sums `f(i)` over `0..n` in four interleaved partial sums: a single running sum waits
/// on the adder's latency at every term.
#[inline(always)]
fn sum4(n: usize, mut f: impl FnMut(usize) -> f64) -> f64 {
    let mut s = [0.0; 4];
    let whole = n / 4 * 4;
    for i in (0..whole).step_by(4) {
        s[0] += f(i);
        s[1] += f(i + 1);
        s[2] += f(i + 2);
        s[3] += f(i + 3);
    }
    for (k, i) in (whole..n).enumerate() {
        s[k] += f(i);
    }
    (s[0] + s[1]) + (s[2] + s[3])
}

/// `q = A p` for the unknowns of `p`, with `left` and `right` the values beyond them (0 past
/// the problem's ends); returns `p · q`.
fn apply(p: &[f64], left: f64, right: f64, q: &mut [f64]) -> f64 {
    let n = p.len();
    if n == 1 {
        q[0] = 2.0 * p[0] - left - right;
        return p[0] * q[0];
    }
    q[0] = 2.0 * p[0] - left - p[1];
    q[n - 1] = 2.0 * p[n - 1] - p[n - 2] - right;
    let (l, c, r) = (&p[..n - 2], &p[1..n - 1], &p[2..]);
    for (i, q) in q[1..n - 1].iter_mut().enumerate() {
        *q = 2.0 * c[i] - l[i] - r[i];
    }
    let q = &q[..n];
    sum4(n, |i| p[i] * q[i])
}

/// `x += alpha p`, `r -= alpha q`; returns `r · r`.
fn update(alpha: f64, p: &[f64], q: &[f64], x: &mut [f64], r: &mut [f64]) -> f64 {
    for (x, p) in x.iter_mut().zip(p) {
        *x += alpha * p;
    }
    for (r, q) in r.iter_mut().zip(q) {
        *r -= alpha * q;
    }
    let r = &*r;
    sum4(r.len(), |i| r[i] * r[i])
}

/// `p = r + beta p`.
fn direction(beta: f64, r: &[f64], p: &mut [f64]) {
    for (p, r) in p.iter_mut().zip(r) {
        *p = r + beta * *p;
    }
}

/// `a / b`, or 0 once the solve has converged exactly (`b` is 0 only when the residual is):
/// the iterations that remain then change nothing, as a solver that stopped would.
fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

/// Whether an iteration with residual `rr` (squared) is done for the tolerance.
fn converged(rr: f64, rr0: f64, tolerance: f64) -> bool {
    tolerance > 0.0 && rr.sqrt() <= tolerance * rr0.sqrt()
}

/// The same recurrences in one thread: what a run is checked against.
pub fn serial(p: Params) -> Outcome {
    let n = p.n;
    let start = std::time::Instant::now();
    let mut x = vec![0.0; n];
    let mut r: Vec<f64> = (0..n).map(|i| rhs(i, n)).collect();
    let mut d = r.clone();
    let mut q = vec![0.0; n];
    let rr0: f64 = r.iter().map(|v| v * v).sum();
    let mut rr = rr0;
    let mut done = 0;
    while done < p.iterations && !converged(rr, rr0, p.tolerance) {
        let pq = apply(&d, 0.0, 0.0, &mut q);
        let next = update(ratio(rr, pq), &d, &q, &mut x, &mut r);
        direction(ratio(next, rr), &r, &mut d);
        rr = next;
        done += 1;
    }
    Outcome {
        x,
        iterations: done,
        residual: rr.sqrt(),
        seconds: start.elapsed().as_secs_f64(),
        launches_per_iteration: 0.0,
    }
}

/// Solves over every worker of `job` on `rt` (collective: every rank calls it alike).
pub fn run(rt: &Runtime, job: &Arc<Job>, p: Params) -> Result<Outcome, String> {
    let mut prog = Replicated::new(rt, job);
    let workers = prog.workers();
    let blocks = Blocks::new(p.n, workers * p.blocks_per_worker)?;
    let owner = |b: usize| b / p.blocks_per_worker;
    let n = p.n;
    let slice = |b: usize, f: &dyn Fn(usize) -> f64| blocks.range(b).map(f).collect::<Vec<_>>();
    let mut x = Vec::new();
    let (mut r, mut d, mut q, mut edges) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for b in 0..blocks.count() {
        let w = owner(b);
        let rb = slice(b, &|i| rhs(i, n));
        let (first, last) = (rb[0], rb[rb.len() - 1]);
        x.push(prog.region(w, vec![0.0; rb.len()]));
        q.push(prog.region(w, vec![0.0; rb.len()]));
        d.push(prog.region(w, rb.clone()));
        r.push(prog.region(w, rb));
        edges.push(prog.region(w, [first, last]));
    }
    let rr0: f64 = (0..n).map(|i| rhs(i, n) * rhs(i, n)).sum();
    // `r · r` of the last iteration and of this one, alternating (each iteration reduces
    // into the one the last did not).
    let rr: [Region<f64>; 2] = [prog.region(0, rr0), prog.region(0, 0.0)];
    let pq = prog.region(0, 0.0);
    let start = std::time::Instant::now();
    let launched = prog.local().launched();
    // With a tolerance, the residual is read after every iteration: a fragment is one.
    let span = if p.tolerance > 0.0 { 1 } else { p.span };
    let fragments = Fragments::new(span, p.iterations);
    let mut done = 0;
    let mut last = rr0;
    while done < p.iterations && !converged(last, rr0, p.tolerance) {
        let k = done;
        let (old, new) = (&rr[k % 2], &rr[(k + 1) % 2]);
        if let Some(id) = fragments.begins(k).filter(|_| p.traced) {
            prog.begin_trace(id).map_err(|e| e.to_string())?;
        }
        prog.launch(0, (write(&pq), write(new)), |(pq, new)| {
            *pq = 0.0;
            *new = 0.0;
        });
        for b in 0..blocks.count() {
            let beside: Vec<_> = [b.checked_sub(1), Some(b + 1)]
                .into_iter()
                .flatten()
                .filter(|&o| o < blocks.count())
                .map(|o| read(&edges[o]))
                .collect();
            let (has_left, has_right) = (b > 0, b + 1 < blocks.count());
            let access = (beside, read(&d[b]), write(&q[b]), reduce::<Sum, _>(&pq));
            prog.launch(owner(b), access, move |(e, d, q, mut pq)| {
                let left = if has_left { e.get(0)[1] } else { 0.0 };
                let right = if has_right {
                    e.get(e.len() - 1)[0]
                } else {
                    0.0
                };
                pq.apply(apply(d, left, right, q));
            });
        }
        for b in 0..blocks.count() {
            let access = (
                (read(old), read(&pq)),
                (read(&d[b]), read(&q[b])),
                (read_write(&x[b]), read_write(&r[b])),
                reduce::<Sum, _>(new),
            );
            prog.launch(owner(b), access, |((old, pq), (d, q), (x, r), mut new)| {
                new.apply(update(ratio(*old, *pq), d, q, x, r));
            });
        }
        for b in 0..blocks.count() {
            let access = (read(old), read(new), read(&r[b]), read_write(&d[b]));
            let access = (access, write(&edges[b]));
            prog.launch(owner(b), access, |((old, new, r, d), e)| {
                direction(ratio(*new, *old), r, d);
                *e = [d[0], d[d.len() - 1]];
            });
        }
        if p.traced && fragments.ends(k) {
            prog.end_trace().map_err(|e| e.to_string())?;
        }
        done += 1;
        if p.tolerance > 0.0 {
            last = prog.with(new, |v| *v).map_err(|e| e.to_string())?;
        }
    }
    last = prog
        .with(&rr[done % 2], |v| *v)
        .map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let launches = (prog.local().launched() - launched) as f64 / done.max(1) as f64;
    let mut all = Vec::with_capacity(n);
    for part in &x {
        all.extend(prog.with(part, Clone::clone).map_err(|e| e.to_string())?);
    }
    Ok(Outcome {
        x: all,
        iterations: done,
        residual: last.sqrt(),
        seconds,
        launches_per_iteration: launches,
    })
}
