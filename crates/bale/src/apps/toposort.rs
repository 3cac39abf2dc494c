//! Toposort (Bale's `toposort`): given a matrix that is an upper-triangular matrix with a
//! full diagonal whose rows and columns were permuted at random ("morally upper
//! triangular"), find row and column permutations that make it upper triangular again.
//!
//! A row with one nonzero left pivots on that column: it takes the last free position, and
//! the column takes the same one; the column is then removed from every other row that has
//! it, which may leave those with one nonzero. Each row keeps a count and the sum of its
//! remaining columns, so the last column is the sum. Positions come from one shared
//! counter, counting down: a row found later always sits above the rows that freed it.
//!
//! On a selector: a row left with one nonzero sends its pivot column to the column's owner
//! (mailbox 0), which forwards the removal to every other row of the column (mailbox 1),
//! whose owner may find the row left with one nonzero and send its pivot: the two mailboxes
//! feed each other and terminate together, when no pivot or removal is left anywhere.
//! Checked: the permuted matrix is upper triangular with a full diagonal.

use super::{on_pes, Outcome};
use crate::matrix::{generate, local_rows, owner, Matrix};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;
use tactor::actor::{self, Handler, Outbox, Spec};
use tactor::Runtime;

/// A morally upper-triangular matrix made from `base` (square): its entries above the
/// diagonal, a full diagonal, and rows and columns permuted at random.
pub fn morally_upper(base: &Matrix, seed: u64) -> Result<Matrix, String> {
    if base.rows != base.cols {
        return Err(format!(
            "toposort: a {} × {} matrix is not square",
            base.rows, base.cols
        ));
    }
    let n = base.rows;
    let upper = Matrix::from_entries(
        n,
        n,
        base.entries()
            .filter(|&(r, c)| r < c)
            .chain((0..n).map(|i| (i, i)))
            .collect(),
    );
    let op_rows = generate::permutation(n, seed, 2);
    let op_cols = generate::permutation(n, seed, 3);
    Ok(upper.permute(&op_rows, &op_cols))
}

/// Whether `rows`/`cols` make `m` upper triangular with a full diagonal; names the first
/// fault.
pub fn check(m: &Matrix, rows: &[u32], cols: &[u32]) -> Result<(), String> {
    let is_perm = |p: &[u32], what: &str| {
        let mut seen = vec![false; p.len()];
        for &v in p {
            match seen.get_mut(v as usize) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(format!(
                        "toposort: the {what} permutation repeats or skips {v}"
                    ))
                }
            }
        }
        Ok(())
    };
    is_perm(rows, "row")?;
    is_perm(cols, "column")?;
    let t = m.permute(rows, cols);
    for r in 0..t.rows {
        let row = t.row(r);
        if row.first() != Some(&r) {
            return Err(format!(
                "toposort: row {r} of the result starts at column {:?}, not on the diagonal",
                row.first()
            ));
        }
    }
    Ok(())
}

const NOT_TRIANGULAR: &str =
    "toposort: the matrix is not a permuted upper triangle with a full diagonal";

/// A pivot (mailbox 0: column `col` takes position `pos`; `row` is the pivot row, which
/// keeps the column) or a removal (mailbox 1: take column `col` out of local row `row`).
#[derive(Clone, Copy)]
enum Msg {
    Pivot { col: u32, pos: u32, row: u32 },
    Remove { row: u32, col: u32 },
}

/// A PE's rows (counts and column sums), its columns (the rows that have each), the
/// positions found, and whether a removal hit a row that had pivoted already (the input was
/// not morally upper triangular).
struct Pe {
    count: Vec<u32>,
    sum: Vec<u64>,
    col_rows: Vec<Vec<u32>>,
    row_pos: Vec<u32>,
    col_pos: Vec<u32>,
    pes: usize,
    bad: bool,
}

/// A PE in the selector: its part, and the shared next position (counting down).
struct Node<'a> {
    pe: Pe,
    next: &'a AtomicI64,
}

impl Node<'_> {
    /// Local row `l` (global `row`) is left with one column: it takes the next position down
    /// and tells the column's owner.
    fn pivot(&mut self, l: usize, row: u32) -> (Msg, usize) {
        let pos = self.next.fetch_sub(1, Ordering::Relaxed);
        let pos = u32::try_from(pos).expect("a position per row");
        self.pe.row_pos[l] = pos;
        let col = self.pe.sum[l] as u32;
        (Msg::Pivot { col, pos, row }, owner(col, self.pe.pes).0)
    }
}

impl Handler<Msg> for Node<'_> {
    fn process(&mut self, _: usize, m: Msg, _from: usize, out: &mut Outbox<'_, Msg>) {
        match m {
            Msg::Pivot { col, pos, row } => {
                let pe = &mut self.pe;
                let l = col as usize / pe.pes;
                pe.col_pos[l] = pos;
                for &r in &pe.col_rows[l] {
                    if r != row {
                        let (dest, local) = owner(r, pe.pes);
                        out.send(
                            1,
                            Msg::Remove {
                                row: local as u32,
                                col,
                            },
                            dest,
                        );
                    }
                }
            }
            Msg::Remove { row, col } => {
                let l = row as usize;
                let pe = &mut self.pe;
                if pe.count[l] <= 1 {
                    pe.bad = true;
                    return;
                }
                pe.count[l] -= 1;
                pe.sum[l] -= u64::from(col);
                if pe.count[l] == 1 {
                    let global = (l * pe.pes + out.pe()) as u32;
                    let (msg, dest) = self.pivot(l, global);
                    out.send(0, msg, dest);
                }
            }
        }
    }
}

/// The rows and columns of `m` that PE `pe` owns, set up for the rounds.
fn setup(m: &Matrix, t: &Matrix, pe: usize, pes: usize) -> Pe {
    let rows = local_rows(m.rows, pe, pes);
    let (mut count, mut sum) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for (_, cs) in m.rows_of(pe, pes) {
        count.push(cs.len() as u32);
        sum.push(cs.iter().map(|&c| u64::from(c)).sum());
    }
    Pe {
        count,
        sum,
        col_rows: t.rows_of(pe, pes).map(|(_, rs)| rs.to_vec()).collect(),
        row_pos: vec![u32::MAX; rows],
        col_pos: vec![u32::MAX; local_rows(m.cols, pe, pes)],
        pes,
        bad: false,
    }
}

fn refuse_unless_square(m: &Matrix) -> Result<(), String> {
    if m.rows != m.cols {
        return Err(format!(
            "toposort: a {} × {} matrix is not square",
            m.rows, m.cols
        ));
    }
    Ok(())
}

/// Toposort on a selector: pivots (mailbox 0) and removals (mailbox 1) feed each other.
pub fn selector(rt: &Runtime, m: &Matrix) -> Result<Outcome, String> {
    refuse_unless_square(m)?;
    let pes = rt.workers();
    let t = m.transpose();
    let next = AtomicI64::new(i64::from(m.rows) - 1);
    let states: Vec<Node> = (0..pes)
        .map(|pe| Node {
            pe: setup(m, &t, pe, pes),
            next: &next,
        })
        .collect();
    let spec = Spec::new(2).fed_by(1, &[0]).fed_by(0, &[1]);
    let start = Instant::now();
    let states = actor::run(rt, &spec, states, |pe| {
        let me = pe.pe();
        for l in 0..pe.state().pe.count.len() {
            // Handlers run while this loop sends (`yield`): a row they pivoted is skipped.
            let s = &pe.state().pe;
            if s.count[l] == 1 && s.row_pos[l] == u32::MAX {
                let (msg, dest) = pe.state().pivot(l, (l * pes + me) as u32);
                pe.send(0, msg, dest);
            }
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let (rows, cols) = gather(m, states.into_iter().map(|s| s.pe).collect())?;
    check(m, &rows, &cols)?;
    Ok(Outcome::new(
        "toposort",
        "selector",
        pes,
        seconds,
        u64::from(m.rows),
        "rows",
    ))
}

/// The global row and column permutations from the PEs' positions; a row or column without
/// one means the matrix was not morally upper triangular.
fn gather(m: &Matrix, pes: Vec<Pe>) -> Result<(Vec<u32>, Vec<u32>), String> {
    if pes.iter().any(|p| p.bad) {
        return Err(NOT_TRIANGULAR.into());
    }
    let n = pes.len();
    let (mut rows, mut cols) = (vec![0; m.rows as usize], vec![0; m.cols as usize]);
    for (pe, s) in pes.into_iter().enumerate() {
        for (l, &p) in s.row_pos.iter().enumerate() {
            rows[l * n + pe] = p;
        }
        for (l, &p) in s.col_pos.iter().enumerate() {
            cols[l * n + pe] = p;
        }
    }
    if rows.iter().chain(&cols).any(|&p| p == u32::MAX) {
        return Err(NOT_TRIANGULAR.into());
    }
    Ok((rows, cols))
}

/// Toposort in the AGP model: the same elimination with one atomic operation per removal on
/// the row's count and sum, each PE pivoting the rows it finds at once (a queue per PE).
pub fn agp(rt: &Runtime, m: &Matrix) -> Result<Outcome, String> {
    refuse_unless_square(m)?;
    let pes = rt.workers();
    let t = m.transpose();
    let n = m.rows as usize;
    let count: Vec<AtomicU32> = (0..n as u32)
        .map(|r| AtomicU32::new(m.row(r).len() as u32))
        .collect();
    let sum: Vec<AtomicU64> = (0..n as u32)
        .map(|r| AtomicU64::new(m.row(r).iter().map(|&c| u64::from(c)).sum()))
        .collect();
    let row_pos: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(u32::MAX)).collect();
    let col_pos: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(u32::MAX)).collect();
    let next = AtomicI64::new(n as i64 - 1);
    let bad = AtomicBool::new(false);
    let start = Instant::now();
    // Each PE's rows with one column, found before any removal (a row another PE's removal
    // takes to one column is that PE's to pivot).
    let queues: Vec<std::sync::Mutex<Vec<u32>>> = (0..pes)
        .map(|me| {
            let own = (me..n).step_by(pes).filter(|&r| m.row(r as u32).len() == 1);
            std::sync::Mutex::new(own.map(|r| r as u32).collect())
        })
        .collect();
    on_pes(rt, |me| {
        let mut queue = std::mem::take(&mut *queues[me].lock().unwrap_or_else(|e| e.into_inner()));
        while let Some(r) = queue.pop() {
            let pos = next.fetch_sub(1, Ordering::Relaxed) as u32;
            row_pos[r as usize].store(pos, Ordering::Relaxed);
            // The last column: every other was subtracted by the removals that got here.
            let col = sum[r as usize].load(Ordering::Acquire) as u32;
            col_pos[col as usize].store(pos, Ordering::Relaxed);
            for &other in t.row(col) {
                if other != r {
                    let o = other as usize;
                    // The sum first: the count's release then publishes it to whoever takes
                    // the count to 1 and reads the sum for the last column.
                    sum[o].fetch_sub(u64::from(col), Ordering::Relaxed);
                    let left = count[o].fetch_update(Ordering::AcqRel, Ordering::Acquire, |k| {
                        (k > 1).then(|| k - 1)
                    });
                    match left {
                        // The last column of a row that pivoted already: bad input.
                        Err(_) => bad.store(true, Ordering::Relaxed),
                        Ok(2) => queue.push(other),
                        Ok(_) => {}
                    }
                }
            }
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let rows: Vec<u32> = row_pos.into_iter().map(AtomicU32::into_inner).collect();
    let cols: Vec<u32> = col_pos.into_iter().map(AtomicU32::into_inner).collect();
    if bad.into_inner() || rows.iter().chain(&cols).any(|&p| p == u32::MAX) {
        return Err(NOT_TRIANGULAR.into());
    }
    check(m, &rows, &cols)?;
    Ok(Outcome::new(
        "toposort", "agp", pes, seconds, n as u64, "rows",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_matrix_is_morally_upper_triangular_and_the_check_sees_it() {
        let m = morally_upper(&generate::erdos_renyi(60, 60, 0.1, 5), 5).unwrap();
        assert!(m.nnz() >= 60);
        let id: Vec<u32> = (0..60).collect();
        assert!(
            check(&m, &id, &id).is_err(),
            "permuted: not upper triangular as is"
        );
        let u = Matrix::from_entries(3, 3, vec![(0, 0), (0, 2), (1, 1), (2, 2)]);
        assert!(check(&u, &[0, 1, 2], &[0, 1, 2]).is_ok());
        assert!(check(&u, &[0, 1, 1], &[0, 1, 2])
            .unwrap_err()
            .contains("repeats"));
        assert!(check(&u, &[2, 1, 0], &[2, 1, 0])
            .unwrap_err()
            .contains("diagonal"));
    }
}
