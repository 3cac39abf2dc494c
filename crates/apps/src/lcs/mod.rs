//! The longest common subsequence of two strings, as a wavefront of tiles across the ranks of
//! a job, on Tactor's futures ([`tactor::job::Spmd`]) or as one compiled subgraph
//! ([`tactor::job::ShardedBuilder`], in `compiled.rs`): the same program in one process and under
//! `mpirun`, checked against the serial dynamic program.
//!
//! Tile `(i, j)` of the score table needs the bottom row of the tile above and the right
//! column of the tile to its left; each tile's future carries both of its edges, and a tile
//! whose neighbour ran on another rank receives that neighbour's edges with its trigger. Tile
//! columns are dealt to the job's workers in turn, so the wavefront runs as a pipeline.

mod compiled;

use std::sync::Arc;
use std::time::Instant;
use tactor::job::{Job, Spmd, Value};
use tactor::Runtime;

/// A run's size.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Length of each string.
    pub length: usize,
    /// Side of a tile of the score table.
    pub tile: usize,
    /// For the tests of failures: this rank fails before its first tile (`LCS_FAULT=RANK`).
    pub fail_here: bool,
    /// Which of the runtime's faces runs the tiles.
    pub face: Face,
}

/// How the tiles run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Face {
    /// A task per tile spawned on futures that carry its edges ([`Spmd`]).
    #[default]
    Futures,
    /// One compiled subgraph of the whole table, whose edges carry the scores across ranks
    /// ([`tactor::job::ShardedBuilder`]).
    Compiled,
}

/// What a run found.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The length of the longest common subsequence.
    pub lcs: u32,
    /// Tiles of the table.
    pub tiles: usize,
    /// Seconds from the first tile's launch to the answer on this rank.
    pub seconds: f64,
}

/// The most tiles a run may have: every tile's task and future are made before the first
/// is waited for (about a kilobyte each with their edges in flight), so a table cut finer
/// than this would take the machine's memory before it took its cores.
pub const MAX_TILES: usize = 1 << 20;

/// Why `length` strings cut in tiles of `tile` cannot run, if they cannot.
///
/// ```
/// use tactor_apps::lcs::refused;
/// assert!(refused(20_000, 500).is_none());
/// assert!(refused(200_000, 1).unwrap().contains("tiles"));
/// ```
pub fn refused(length: usize, tile: usize) -> Option<String> {
    if length == 0 || tile == 0 {
        return Some(format!(
            "the strings ({length}) and tiles ({tile}) must not be empty"
        ));
    }
    let side = length.div_ceil(tile);
    match side.checked_mul(side).filter(|&n| n <= MAX_TILES) {
        Some(_) => None,
        None => Some(format!(
            "-n {length} -t {tile} makes {side} x {side} tiles, more than {MAX_TILES}: take larger tiles (-t {} or more)",
            length.div_ceil(1 << 10)
        )),
    }
}

/// The two strings of a run: `length` letters of a four-letter alphabet each, drawn from a
/// fixed seed (the same on every rank).
///
/// ```
/// let (a, b) = tactor_apps::lcs::strings(8);
/// assert_eq!((a.len(), b.len()), (8, 8));
/// assert!(a.iter().chain(&b).all(|c| b"ACGT".contains(c)));
/// ```
pub fn strings(length: usize) -> (Vec<u8>, Vec<u8>) {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut letter = move || {
        // xorshift64*: any fixed sequence will do; both strings come from one stream.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        b"ACGT"[(state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 62) as usize]
    };
    let a = (0..length).map(|_| letter()).collect();
    let b = (0..length).map(|_| letter()).collect();
    (a, b)
}

/// The length of the longest common subsequence of `a` and `b`, row by row.
///
/// ```
/// assert_eq!(tactor_apps::lcs::serial(b"ABCBDAB", b"BDCABA"), 4);
/// ```
pub fn serial(a: &[u8], b: &[u8]) -> u32 {
    let mut row = vec![0u32; b.len() + 1];
    for &x in a {
        let mut diag = 0;
        for (j, &y) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = if x == y { diag + 1 } else { up.max(row[j]) };
            diag = up;
        }
    }
    row[b.len()]
}

/// Zeros that stand in for the edges beyond the table's, for a tile of `rows` × `cols` with
/// (`up`, `left`) or without a neighbour above and to its left: only the first row and
/// column of tiles need them.
fn stand_in(rows: usize, cols: usize, up: bool, left: bool) -> Vec<u32> {
    vec![0; if up && left { 0 } else { rows.max(cols) + 1 }]
}

/// Scores tile `a × b` of the table from its edges: `top` is the row above it (one per
/// column), `left` the column before it from the row above the tile down (one more than the
/// tile's rows; all zeros at the table's edges). Returns the tile's edges the same way: its
/// bottom row, then its right column from the row above it down.
fn tile(a: &[u8], b: &[u8], top: &[u32], left: &[u32]) -> Vec<u32> {
    let mut row = top.to_vec();
    let mut right = Vec::with_capacity(a.len() + 1);
    right.push(*top.last().expect("a tile has columns"));
    for (i, &x) in a.iter().enumerate() {
        let (mut diag, mut before) = (left[i], left[i + 1]);
        for (j, &y) in b.iter().enumerate() {
            let up = row[j];
            row[j] = if x == y { diag + 1 } else { up.max(before) };
            (diag, before) = (up, row[j]);
        }
        right.push(before);
    }
    row.extend(right);
    row
}

/// Runs the wavefront over every worker of `job` (every rank calls it, with the same
/// `params`), each rank getting the answer.
///
/// ```
/// use tactor::job::Job;
/// use tactor_apps::lcs::{run, serial, strings, Params};
///
/// let job = Job::launched().unwrap(); // a job of one here; under mpirun, the launcher's
/// let rt = job.runtime(tactor::Runtime::builder().workers(2).pin(false)).unwrap();
/// let p = Params { length: 100, tile: 16, fail_here: false, face: Default::default() };
/// let (a, b) = strings(100);
/// assert_eq!(run(&rt, &job, p).unwrap().lcs, serial(&a, &b));
/// ```
pub fn run(rt: &Runtime, job: &Arc<Job>, p: Params) -> Result<Outcome, String> {
    if let Some(why) = refused(p.length, p.tile) {
        return Err(why);
    }
    let (a, b) = strings(p.length);
    let n = p.length.div_ceil(p.tile);
    let spmd = (p.face == Face::Futures).then(|| Spmd::new(rt, job));
    if p.fail_here {
        // Told before this rank's program is dropped, so that no rank waits for its tiles.
        job.fail("injected fault (LCS_FAULT)");
        return Err(String::new());
    }
    let start = Instant::now();
    let lcs = match spmd {
        Some(mut s) => on_futures(&mut s, p, a, b)?,
        None => compiled::run(rt, job, p, &a, &b)?,
    };
    Ok(Outcome {
        lcs,
        tiles: n * n,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The wavefront on futures: a task per tile, spawned on the futures of its neighbours.
fn on_futures(s: &mut Spmd, p: Params, a: Vec<u8>, b: Vec<u8>) -> Result<u32, String> {
    let (a, b) = (Arc::new(a), Arc::new(b));
    let n = p.length.div_ceil(p.tile);
    let span = |k: usize| k * p.tile..((k + 1) * p.tile).min(p.length);
    let mut above: Vec<Option<Value<Vec<u32>>>> = vec![None; n];
    for i in 0..n {
        let mut left: Option<Value<Vec<u32>>> = None;
        for (j, up) in above.iter_mut().enumerate() {
            let (rows, cols) = (span(i), span(j));
            let ins: Vec<&Value<Vec<u32>>> = up.iter().chain(&left).collect();
            let (has_up, has_left) = (up.is_some(), left.is_some());
            let (a, b) = (a.clone(), b.clone());
            let t = s.spawn(j % s.workers(), &ins, move |ins| {
                let zeros = stand_in(rows.len(), cols.len(), has_up, has_left);
                let top = if has_up {
                    &ins[0][..cols.len()]
                } else {
                    &zeros[..cols.len()]
                };
                // The left tile's right column is the end of its edges.
                let left = match (has_left, ins.iter().last()) {
                    (true, Some(l)) => &l[l.len() - rows.len() - 1..],
                    _ => &zeros[..rows.len() + 1],
                };
                tile(&a[rows], &b[cols], top, left)
            });
            *up = Some(t.clone());
            left = Some(t);
        }
    }
    let last = above[n - 1].as_ref().expect("one tile at least");
    let edges = s.get(last).map_err(|e| e.to_string())?;
    Ok(edges[edges.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_put_together_give_the_serial_table() {
        for (length, side) in [(1, 1), (7, 3), (20, 20), (33, 5), (40, 64)] {
            let (a, b) = strings(length);
            let runs = Job::run_in_process(1, 1, |rt, job| {
                [Face::Futures, Face::Compiled].map(|face| {
                    let p = Params {
                        length,
                        tile: side,
                        fail_here: false,
                        face,
                    };
                    run(rt, job, p).unwrap().lcs
                })
            });
            let got = runs.into_iter().map(Result::unwrap).collect::<Vec<_>>();
            let want = serial(&a, &b);
            assert_eq!(got, [[want, want]], "length {length}, tiles of {side}");
        }
    }

    #[test]
    fn the_serial_program_knows_small_cases() {
        assert_eq!(serial(b"", b"ABC"), 0);
        assert_eq!(serial(b"ABC", b"ABC"), 3);
        assert_eq!(serial(b"AGGTAB", b"GXTXAYB"), 4);
    }
}
