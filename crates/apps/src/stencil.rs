//! The Parallel Research Kernels' Stencil on Tactor's implicit face: a star stencil of radius
//! 2 with PRK's weights on an `n × n` grid, the grid tiled into regions (each tile keeps its
//! halo; its edge strips are regions of their own that the neighbours read), `iterations + 1`
//! sweeps of which the first is not timed, and PRK's verification (the L1 norm of the output
//! over the interior against `(iterations + 1) · 2`) and MFlop/s. The same program runs in one
//! process and under `mpirun`.

use crate::blocks::{near_square, Blocks};
use crate::fragments::Fragments;
use std::ops::Range;
use std::sync::Arc;
use tactor::implicit::{read, read_write, reduce, write, Region, Replicated, Sum};
use tactor::job::Job;
use tactor::Runtime;

/// The stencil's radius.
pub const RADIUS: usize = 2;
const R: usize = RADIUS;
/// PRK's weights of the star: `WEIGHT[d - 1]` for the points `d` away, `1 / (2 d R)`.
const WEIGHT: [f64; R] = [1.0 / (2.0 * R as f64), 1.0 / (4.0 * R as f64)];
/// PRK's verification tolerance (double precision).
pub const EPSILON: f64 = 1e-8;

/// A run's size.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// The grid's side.
    pub n: usize,
    /// Timed iterations (one more sweep runs first, untimed).
    pub iterations: usize,
    /// Tiles per worker of the job.
    pub tiles_per_worker: usize,
    /// Tiles across the grid (the rest go down); `None`: the arrangement closest to square.
    pub across: Option<usize>,
    /// Record a fragment of sweeps once and replay it.
    pub traced: bool,
    /// Sweeps per traced fragment.
    pub span: usize,
    /// Read the whole output grid back (for checks against [`serial`]).
    pub gather: bool,
}

/// What a run found.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The L1 norm of the output over the interior, divided by the interior's points.
    pub norm: f64,
    /// Seconds of the timed iterations.
    pub seconds: f64,
    /// Tiles across and down.
    pub tiles: (usize, usize),
    /// Launches this rank's program took per timed iteration (copies included).
    pub launches_per_iteration: f64,
    /// The output grid, row after row, if asked for.
    pub out: Option<Vec<f64>>,
}

/// The norm a correct run finds after `iterations + 1` sweeps.
pub fn reference_norm(iterations: usize) -> f64 {
    (iterations + 1) as f64 * 2.0
}

/// PRK's floating-point operations per sweep: 2 per point of the stencil and 1 for the
/// update, over the interior.
pub fn flops(n: usize) -> f64 {
    let active = (n - 2 * R) as f64 * (n - 2 * R) as f64;
    (2 * (4 * R + 1) + 1) as f64 * active
}

/// The tiles across and down of a grid of side `n` cut into `tiles` (`across` of them across,
/// or the arrangement closest to square), or why it cannot be.
pub fn check(n: usize, tiles: usize, across: Option<usize>) -> Result<(usize, usize), String> {
    if n < 2 * R + 1 {
        return Err(format!(
            "a grid of side {n} is smaller than the stencil (side {})",
            2 * R + 1
        ));
    }
    let (across, down) = match across {
        None => near_square(tiles),
        Some(a) if a > 0 && tiles % a == 0 => (a, tiles / a),
        Some(a) => return Err(format!("{tiles} tiles cannot be laid {a} across")),
    };
    if n / across < R || n / down < R {
        return Err(format!(
            "a grid of side {n} cannot be cut into {across} x {down} tiles of at least {R} x {R} points"
        ));
    }
    Ok((across, down))
}

/// One tile: where it lies, and its part of `in` with a halo of `R` on every side.
#[derive(Clone, Copy, Debug)]
struct Tile {
    /// Its first column and row in the grid.
    at: (usize, usize),
    /// Its width and height.
    size: (usize, usize),
    /// The grid's side.
    n: usize,
}

/// The edge strips a tile shares, by the neighbour that reads each.
const BELOW: usize = 0;
const ABOVE: usize = 1;
const LEFT: usize = 2;
const RIGHT: usize = 3;

impl Tile {
    /// The padded row length.
    fn pitch(&self) -> usize {
        self.size.0 + 2 * R
    }

    /// Where local point `(i, j)` lies in the padded array (`-R <= i < width + R`).
    fn at(&self, i: isize, j: isize) -> usize {
        (i + R as isize) as usize + (j + R as isize) as usize * self.pitch()
    }

    /// The tile's `in` at the start: `x + y` at every point, the halo included.
    fn initial(&self) -> Vec<f64> {
        let (w, h) = self.size;
        let mut v = vec![0.0; (w + 2 * R) * (h + 2 * R)];
        for j in -(R as isize)..(h + R) as isize {
            for i in -(R as isize)..(w + R) as isize {
                let (x, y) = (self.at.0 as isize + i, self.at.1 as isize + j);
                v[self.at(i, j)] = (x + y) as f64;
            }
        }
        v
    }

    /// The points of strip `side` (local columns and rows).
    fn strip(&self, side: usize) -> (Range<usize>, Range<usize>) {
        let (w, h) = self.size;
        match side {
            BELOW => (0..w, 0..R),
            ABOVE => (0..w, h - R..h),
            LEFT => (0..R, 0..h),
            _ => (w - R..w, 0..h),
        }
    }

    /// Where a neighbour's strip goes in this tile's halo: the strip the neighbour on
    /// `side` shares with this tile lands in the halo on that side.
    fn halo(&self, side: usize) -> (Range<isize>, Range<isize>) {
        let (w, h) = (self.size.0 as isize, self.size.1 as isize);
        let r = R as isize;
        match side {
            BELOW => (0..w, -r..0),
            ABOVE => (0..w, h..h + r),
            LEFT => (-r..0, 0..h),
            _ => (w..w + r, 0..h),
        }
    }

    /// Copies strip `side` of `inp` out.
    fn take_strip(&self, inp: &[f64], side: usize, out: &mut Vec<f64>) {
        let (cols, rows) = self.strip(side);
        out.clear();
        for j in rows {
            let row = self.at(cols.start as isize, j as isize);
            out.extend_from_slice(&inp[row..row + cols.len()]);
        }
    }

    /// Copies a neighbour's strip into the halo on `side`.
    fn put_halo(&self, inp: &mut [f64], side: usize, strip: &[f64]) {
        let (cols, rows) = self.halo(side);
        let width = cols.len();
        for (k, j) in rows.enumerate() {
            let row = self.at(cols.start, j);
            inp[row..row + width].copy_from_slice(&strip[k * width..(k + 1) * width]);
        }
    }

    /// The local rows and columns of this tile inside the grid's interior.
    fn interior(&self) -> (Range<usize>, Range<usize>) {
        let clip = |at: usize, len: usize| {
            let (lo, hi) = (R.max(at), (self.n - R).min(at + len));
            lo - at..hi.max(lo) - at
        };
        (clip(self.at.0, self.size.0), clip(self.at.1, self.size.1))
    }

    /// One sweep: the stencil into `out` over the interior, then `in += 1` on the tile.
    fn sweep(&self, inp: &mut [f64], out: &mut [f64]) {
        let w = self.size.0;
        let (cols, rows) = self.interior();
        let m = cols.len();
        for j in rows {
            let start = |dj: isize| self.at(cols.start as isize, j as isize + dj);
            let row = &inp[start(0) - R..start(0) + m + R];
            let (l2, l1, r1, r2) = (&row[..m], &row[1..m + 1], &row[3..m + 3], &row[4..m + 4]);
            let (d2, d1) = (&inp[start(-2)..][..m], &inp[start(-1)..][..m]);
            let (u1, u2) = (&inp[start(1)..][..m], &inp[start(2)..][..m]);
            let o = &mut out[j * w + cols.start..][..m];
            // PRK's compact loop body, term by term in its order (the centre's weight of
            // zero aside): the same operations, so that its MFlop/s count is ours too.
            for k in 0..m {
                let mut v = o[k];
                v += -WEIGHT[1] * d2[k];
                v += -WEIGHT[0] * d1[k];
                v += WEIGHT[0] * u1[k];
                v += WEIGHT[1] * u2[k];
                v += -WEIGHT[1] * l2[k];
                v += -WEIGHT[0] * l1[k];
                v += WEIGHT[0] * r1[k];
                v += WEIGHT[1] * r2[k];
                o[k] = v;
            }
        }
        for j in 0..self.size.1 {
            let row = self.at(0, j as isize);
            inp[row..row + w].iter_mut().for_each(|v| *v += 1.0);
        }
    }

    /// The sum of `|out|` over the interior.
    fn norm(&self, out: &[f64]) -> f64 {
        let (cols, rows) = self.interior();
        rows.map(|j| {
            out[j * self.size.0 + cols.start..][..cols.len()]
                .iter()
                .map(|v| v.abs())
                .sum::<f64>()
        })
        .sum()
    }
}

/// The tiles of a grid of side `n` cut `across × down`, row of tiles after row.
fn tiles(n: usize, across: usize, down: usize) -> Vec<Tile> {
    let (xs, ys) = (Blocks::new(n, across), Blocks::new(n, down));
    let (xs, ys) = (xs.expect("checked"), ys.expect("checked"));
    let mut all = Vec::with_capacity(across * down);
    for ty in 0..down {
        for tx in 0..across {
            let (c, r) = (xs.range(tx), ys.range(ty));
            all.push(Tile {
                at: (c.start, r.start),
                size: (c.len(), r.len()),
                n,
            });
        }
    }
    all
}

/// The kernel in one thread (one tile): the output grid and its norm.
pub fn serial(n: usize, iterations: usize) -> Result<(Vec<f64>, f64), String> {
    check(n, 1, None)?;
    let tile = tiles(n, 1, 1)[0];
    let (mut inp, mut out) = (tile.initial(), vec![0.0; n * n]);
    for _ in 0..=iterations {
        tile.sweep(&mut inp, &mut out);
    }
    let norm = tile.norm(&out) / ((n - 2 * R) as f64 * (n - 2 * R) as f64);
    Ok((out, norm))
}

/// Runs the kernel over every worker of `job` on `rt` (collective: every rank calls it alike).
pub fn run(rt: &Runtime, job: &Arc<Job>, p: Params) -> Result<Outcome, String> {
    let mut prog = Replicated::new(rt, job);
    let count = prog.workers() * p.tiles_per_worker;
    let (across, down) = check(p.n, count, p.across)?;
    let grid = tiles(p.n, across, down);
    let owner = |t: usize| t / p.tiles_per_worker;
    // Each tile's `in`, and the strips every tile shares, in two generations (a sweep reads
    // its neighbours' of this one and writes its own of the next): both start as the tile's
    // initial edges, cut from its initial `in`, computed once.
    let mut inp: Vec<Region<Vec<f64>>> = Vec::with_capacity(count);
    let mut strips: Vec<Vec<[Region<Vec<f64>>; 4]>> = vec![Vec::new(), Vec::new()];
    for (t, tile) in grid.iter().enumerate() {
        let start = tile.initial();
        for generation in &mut strips {
            generation.push([BELOW, ABOVE, LEFT, RIGHT].map(|side| {
                let mut s = Vec::new();
                tile.take_strip(&start, side, &mut s);
                prog.region(owner(t), s)
            }));
        }
        inp.push(prog.region(owner(t), start));
    }
    let out: Vec<Region<Vec<f64>>> = (0..count)
        .map(|t| prog.region(owner(t), vec![0.0; grid[t].size.0 * grid[t].size.1]))
        .collect();
    // Per tile, its neighbours: (the side of this tile, the neighbour, the neighbour's strip).
    let beside = |t: usize| {
        let (tx, ty) = (t % across, t / across);
        let mut v = Vec::new();
        if ty > 0 {
            v.push((BELOW, t - across, ABOVE));
        }
        if ty + 1 < down {
            v.push((ABOVE, t + across, BELOW));
        }
        if tx > 0 {
            v.push((LEFT, t - 1, RIGHT));
        }
        if tx + 1 < across {
            v.push((RIGHT, t + 1, LEFT));
        }
        v
    };
    let mut start = std::time::Instant::now();
    let mut launched = prog.local().launched();
    let fragments = Fragments::new(p.span, p.iterations + 1);
    for k in 0..=p.iterations {
        if k == 1 {
            prog.finish().map_err(|e| e.to_string())?;
            job.barrier().map_err(|e| e.to_string())?;
            start = std::time::Instant::now();
            launched = prog.local().launched();
        }
        let (now, next) = (&strips[k % 2], &strips[(k + 1) % 2]);
        if let Some(id) = fragments.begins(k).filter(|_| p.traced) {
            prog.begin_trace(id).map_err(|e| e.to_string())?;
        }
        for (t, tile) in grid.iter().copied().enumerate() {
            let near = beside(t);
            let sides: Vec<usize> = near.iter().map(|&(side, _, _)| side).collect();
            let halos: Vec<_> = near.iter().map(|&(_, o, s)| read(&now[o][s])).collect();
            // Only the strips a neighbour reads: the sides this tile has a neighbour on.
            let mine: Vec<_> = sides.iter().map(|&side| write(&next[t][side])).collect();
            let access = (halos, read_write(&inp[t]), read_write(&out[t]), mine);
            prog.launch(owner(t), access, move |(halos, inp, out, mut mine)| {
                for (i, &side) in sides.iter().enumerate() {
                    tile.put_halo(inp, side, halos.get(i));
                }
                tile.sweep(inp, out);
                for (i, &side) in sides.iter().enumerate() {
                    tile.take_strip(inp, side, mine.get_mut(i));
                }
            });
        }
        if p.traced && fragments.ends(k) {
            prog.end_trace().map_err(|e| e.to_string())?;
        }
    }
    prog.finish().map_err(|e| e.to_string())?;
    job.barrier().map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    let launches = (prog.local().launched() - launched) as f64 / p.iterations as f64;
    let norm = prog.region(0, 0.0f64);
    for (t, tile) in grid.iter().copied().enumerate() {
        let access = (read(&out[t]), reduce::<Sum, _>(&norm));
        prog.launch(owner(t), access, move |(out, mut norm)| {
            norm.apply(tile.norm(out))
        });
    }
    let active = (p.n - 2 * R) as f64 * (p.n - 2 * R) as f64;
    let norm = prog
        .with(&norm, |v| *v / active)
        .map_err(|e| e.to_string())?;
    let out = if p.gather {
        let mut all = vec![0.0; p.n * p.n];
        for (t, tile) in grid.iter().enumerate() {
            let part = prog
                .with(&out[t], Clone::clone)
                .map_err(|e| e.to_string())?;
            let (w, h) = tile.size;
            for j in 0..h {
                let row = (tile.at.1 + j) * p.n + tile.at.0;
                all[row..row + w].copy_from_slice(&part[j * w..(j + 1) * w]);
            }
        }
        Some(all)
    } else {
        None
    };
    Ok(Outcome {
        norm,
        seconds,
        tiles: (across, down),
        launches_per_iteration: launches,
        out,
    })
}
