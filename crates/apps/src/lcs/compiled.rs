//! The wavefront as one compiled subgraph over the job ([`tactor::job::ShardedBuilder`]):
//! a task per tile on its column's worker, an edge from each tile to the tile below (its
//! bottom row) and to its right (its right column), which carries those scores when the two
//! tiles are on different ranks (the tile reads them where the message landed). Every rank
//! describes the whole table; the runtime keeps its tiles and batches the edges that cross
//! ranks.

use super::{stand_in, tile, Params};
use std::borrow::Cow;
use std::sync::{Arc, OnceLock};
use tactor::job::{Exchange, Job, Reduce, ShardedBuilder, FIRST_PORT};
use tactor::{Runtime, SubgraphTask};

/// A tile's edges once scored on this rank.
#[derive(Default)]
struct Edges {
    bottom: OnceLock<Vec<u32>>,
    right: OnceLock<Vec<u32>>,
}

/// Scores the table on every worker of `job` and returns the length of the longest common
/// subsequence (on every rank).
pub(super) fn run(
    rt: &Runtime,
    job: &Arc<Job>,
    p: Params,
    a: &[u8],
    b: &[u8],
) -> Result<u32, String> {
    let n = p.length.div_ceil(p.tile);
    let span = move |k: usize| k * p.tile..((k + 1) * p.tile).min(p.length);
    let ex = Exchange::open(job, FIRST_PORT).map_err(|e| e.to_string())?;
    ex.expect(true);
    let tiles: Arc<Vec<Edges>> = Arc::new((0..n * n).map(|_| Edges::default()).collect());
    let (a, b) = (Arc::new(a.to_vec()), Arc::new(b.to_vec()));
    let workers = rt.workers() * job.ranks();
    let mut g = ShardedBuilder::<()>::new(ex.clone(), 0);
    let mut ids = Vec::with_capacity(n * n);
    for i in 0..n {
        for j in 0..n {
            let (rows, cols) = (span(i), span(j));
            let (tiles, a, b) = (tiles.clone(), a.clone(), b.clone());
            ids.push(g.task(j % workers, move |_, got| {
                // A neighbour's edge: from its message if it ran on another rank, else where
                // it ran here (not copied).
                let edge = |k: usize, of: fn(&Edges) -> &OnceLock<Vec<u32>>| match got
                    .from(SubgraphTask(k as u32))
                {
                    Some(bytes) => Cow::Owned(take(bytes)),
                    None => Cow::Borrowed(&of(&tiles[k]).get().expect("a neighbour ran")[..]),
                };
                let zeros = stand_in(rows.len(), cols.len(), i > 0, j > 0);
                let (top, left);
                let top = match i {
                    0 => &zeros[..cols.len()],
                    _ => {
                        top = edge((i - 1) * n + j, |e| &e.bottom);
                        &top[..]
                    }
                };
                let left = match j {
                    0 => &zeros[..rows.len() + 1],
                    _ => {
                        left = edge(i * n + j - 1, |e| &e.right);
                        &left[..]
                    }
                };
                let mut edges = tile(&a[rows.clone()], &b[cols.clone()], top, left);
                let right = edges.split_off(cols.len());
                let me = &tiles[i * n + j];
                let _ = (me.bottom.set(edges), me.right.set(right));
            }));
        }
    }
    // One edge per neighbour, carrying only what it reads.
    for i in 0..n {
        for j in 0..n {
            let from = i * n + j;
            let (t1, t2) = (tiles.clone(), tiles.clone());
            if i + 1 < n {
                let bytes = 4 * span(j).len();
                g.edge_carrying(ids[from], ids[from + n], bytes, move |_, out| {
                    put(out, t1[from].bottom.get())
                });
            }
            if j + 1 < n {
                let bytes = 4 * (span(i).len() + 1);
                g.edge_carrying(ids[from], ids[from + 1], bytes, move |_, out| {
                    put(out, t2[from].right.get())
                });
            }
        }
    }
    let graph = g.compile(rt).map_err(|e| e.to_string())?;
    graph
        .instantiate((), &[])
        .completion
        .wait()
        .map_err(|e| e.to_string())?;
    // The last tile's rank knows the answer; every rank gets it.
    let last = tiles[n * n - 1].right.get().and_then(|r| r.last().copied());
    let answer = job
        .all_reduce(Reduce::Max, last.map_or(0, u64::from))
        .map_err(|e| e.to_string())?;
    Ok(answer as u32)
}

/// Writes `scores` into a message's bytes.
fn put(out: &mut [u8], scores: Option<&Vec<u32>>) {
    let scores = scores.expect("an edge's source ran before its message is packed");
    for (o, s) in out.chunks_exact_mut(4).zip(scores) {
        o.copy_from_slice(&s.to_le_bytes());
    }
}

/// Reads scores from a message's bytes.
fn take(bytes: &[u8]) -> Vec<u32> {
    let word = |c: &[u8]| u32::from_le_bytes(c.try_into().expect("four bytes"));
    bytes.chunks_exact(4).map(word).collect()
}
