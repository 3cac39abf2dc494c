//! Triangle counting (Bale's `triangle`): the triangles of an undirected graph given by the
//! strictly lower triangle `L` of its adjacency matrix — `sum(L ∘ (L · Lᵀ))`: for every edge
//! `(i, j)` with `j < i`, the `k < j` adjacent to both.
//!
//! On a selector, two hops per edge: the owner of row `i` asks the owner of row `j`
//! (mailbox 0) for `j`'s neighbours below it, which sends each `k` back as a question to the
//! owner of row `i` (mailbox 1, fed by 0): is `k` in row `i`? Hits are counted where they
//! land. The AGP baseline reads row `j` of the shared matrix directly. Checked against the
//! serial count.

use super::{on_my_pes, on_pes, Outcome, Pes};
use crate::matrix::{generate, owner, Matrix};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tactor::actor::{Handler, Outbox, Spec};
use tactor::Runtime;

/// The graph `-K MODE:S1xS2x...` names (Bale's spelling): the lower triangle of
/// [`generate::kronecker`], and its triangle count in closed form.
pub fn kronecker(spec: &str) -> Result<(Matrix, u64), String> {
    let bad = || format!("-K {spec}: expected MODE:S1xS2x... (MODE 0, 1 or 2; star sizes)");
    let (mode, stars) = spec.split_once(':').ok_or_else(bad)?;
    let mode: u8 = mode.parse().map_err(|_| bad())?;
    let stars: Vec<u32> = stars
        .split('x')
        .map(|s| s.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let g = generate::kronecker(mode, &stars)?;
    let known = u64::try_from(generate::kronecker_triangles(mode, &stars)).map_err(|_| bad())?;
    Ok((lower_of(&g)?, known))
}

/// The lower triangle of `m`'s pattern taken as an undirected graph (both triangles merged,
/// the diagonal dropped): what a Matrix Market input is counted on.
pub fn lower_of(m: &Matrix) -> Result<Matrix, String> {
    if m.rows != m.cols {
        return Err(format!(
            "triangles: a {} × {} matrix is not a graph's adjacency (not square)",
            m.rows, m.cols
        ));
    }
    let entries = m
        .entries()
        .filter(|&(r, c)| r != c)
        .map(|(r, c)| (r.max(c), r.min(c)))
        .collect();
    Ok(Matrix::from_entries(m.rows, m.cols, entries))
}

/// How many of `a` are in `b` (both ascending).
fn common(a: &[u32], b: &[u32]) -> u64 {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// The serial count (the reference).
pub fn serial(l: &Matrix) -> u64 {
    (0..l.rows)
        .flat_map(|i| l.row(i).iter().map(move |&j| (i, j)))
        .map(|(i, j)| common(l.row(i), l.row(j)))
        .sum()
}

/// A question about an edge `[i, j]` to `j`'s owner (mailbox 0), or "is `k` in row `i`?"
/// `[i, k]` to `i`'s owner (mailbox 1): plain words, so that questions cross ranks as they
/// are.
type Msg = [u32; 2];

/// A PE's view: the matrix (every PE reads only its own rows), and its count.
struct Pe<'a> {
    l: &'a Matrix,
    pes: usize,
    count: u64,
}

impl Handler<Msg> for Pe<'_> {
    #[inline]
    fn process(&mut self, mailbox: usize, m: Msg, _from: usize, out: &mut Outbox<'_, Msg>) {
        let [i, x] = m;
        if mailbox == 0 {
            let dest = owner(i, self.pes).0;
            for &k in self.l.row(x) {
                out.send(1, [i, k], dest);
            }
        } else {
            self.count += u64::from(self.l.row(i).binary_search(&x).is_ok());
        }
    }
}

fn finish(
    l: &Matrix,
    model: &'static str,
    pes: usize,
    seconds: f64,
    got: u64,
) -> Result<Outcome, String> {
    let want = serial(l);
    if got != want {
        return Err(format!("triangles: counted {got}, expected {want}"));
    }
    let mut o = Outcome::new("triangles", model, pes, seconds, l.nnz() as u64, "edges");
    o.result = Some(got);
    Ok(o)
}

/// Triangle counting on a selector (two hops per edge), collectively over `pes`; the count
/// is summed over the ranks and checked on each.
pub fn selector(pes: &Pes, l: &Matrix) -> Result<Outcome, String> {
    let n = pes.count();
    let states = pes
        .mine()
        .map(|_| Pe {
            l,
            pes: n,
            count: 0,
        })
        .collect();
    let spec = Spec::new(2).fed_by(1, &[0]);
    let run = || {
        pes.select(&spec, states, |pe| {
            for (i, js) in l.rows_of(pe.pe(), n) {
                for &j in js {
                    pe.send(0, [i, j], owner(j, n).0);
                }
            }
        })
    };
    let mut got = 0;
    let count = |out: Vec<Pe>| {
        got = pes.sum(out.iter().map(|p| p.count).sum());
        Ok(())
    };
    let seconds = pes.timed(run, count)?;
    finish(l, pes.model(), n, seconds, got)
}

/// Triangle counting in the exstack style, collectively over `pes`: each phase sends a
/// buffer of edges `[i, j]` per owner of `j`, whose answers `[i, k]` (every `k` of row `j`)
/// go to the owners of `i` in a second exchange, where the hits are counted.
pub fn exstack(pes: &Pes, l: &Matrix) -> Result<Outcome, String> {
    let n = pes.count();
    let asks = crate::baseline::Exstack::<Msg>::new(pes);
    let checks = crate::baseline::Exstack::<Msg>::new(pes);
    let cap = asks.capacity();
    let total = std::sync::atomic::AtomicU64::new(0);
    let run = || {
        on_my_pes(pes, |me| {
            let mut edges = l
                .rows_of(me, n)
                .flat_map(|(i, js)| js.iter().map(move |&j| [i, j]))
                .peekable();
            let (mut out, mut inbox) = (vec![Vec::with_capacity(cap); n], Vec::new());
            let (mut back, mut questions) = (vec![Vec::new(); n], Vec::new());
            let mut count = 0;
            loop {
                for [i, j] in edges.by_ref() {
                    let dest = owner(j, n).0;
                    out[dest].push([i, j]);
                    if out[dest].len() == cap {
                        break;
                    }
                }
                let more = asks.exchange(me, &mut out, &mut inbox, edges.peek().is_some());
                for [i, j] in inbox.drain(..) {
                    let dest = owner(i, n).0;
                    back[dest].extend(l.row(j).iter().map(|&k| [i, k]));
                }
                checks.exchange(me, &mut back, &mut questions, false);
                for [i, k] in questions.drain(..) {
                    count += u64::from(l.row(i).binary_search(&k).is_ok());
                }
                if !more {
                    break;
                }
            }
            total.fetch_add(count, Ordering::Relaxed);
        });
        total.load(Ordering::Relaxed)
    };
    let mut got = 0;
    let seconds = pes.timed(run, |mine| {
        got = pes.sum(mine);
        Ok(())
    })?;
    finish(l, "exstack", n, seconds, got)
}

/// Triangle counting in the AGP model: each PE reads the rows it needs directly.
pub fn agp(rt: &Runtime, l: &Matrix) -> Result<Outcome, String> {
    let pes = rt.workers();
    let total = AtomicU64::new(0);
    let start = Instant::now();
    on_pes(rt, |me| {
        let mut n = 0;
        for (_, js) in l.rows_of(me, pes) {
            for &j in js {
                n += common(js, l.row(j));
            }
        }
        total.fetch_add(n, Ordering::Relaxed);
    });
    let seconds = start.elapsed().as_secs_f64();
    finish(l, "agp", pes, seconds, total.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_graph_has_n_choose_3_triangles() {
        let k5 = lower_of(&generate::erdos_renyi(5, 5, 1.0, 1)).unwrap();
        assert_eq!(k5.nnz(), 10);
        assert_eq!(serial(&k5), 10);
        // Two triangles sharing the edge (1, 0): {0, 1, 2} and {0, 1, 3}.
        let g = Matrix::from_entries(4, 4, vec![(1, 0), (2, 0), (2, 1), (3, 0), (3, 1)]);
        assert_eq!(serial(&g), 2);
        let sym = Matrix::from_entries(3, 3, vec![(0, 1), (1, 0), (1, 2), (2, 0), (0, 0)]);
        assert_eq!(lower_of(&sym).unwrap().nnz(), 3);
        assert_eq!(serial(&lower_of(&sym).unwrap()), 1);
    }
}
