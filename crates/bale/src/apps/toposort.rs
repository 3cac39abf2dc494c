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

use super::{on_pes, Outcome, Pes};
use crate::matrix::{generate, local_rows, owner, Matrix};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;
use tactor::actor::{Handler, Outbox, Spec};
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

/// The mailboxes of the selector version, each message three words:
/// - `ASK` `[row, col, _]` to PE 0, which counts the positions down: row `row` is left with
///   column `col`;
/// - `PIVOT` `[col, pos, row]` to the column's owner: the column takes position `pos`, row
///   `row` keeps it;
/// - `REMOVE` `[local row, col, _]`: take the column out of the row;
/// - `PLACE` `[local row, pos, _]` to the pivot row's owner: the row takes position `pos`.
const ASK: usize = 0;
const PIVOT: usize = 1;
const REMOVE: usize = 2;
const PLACE: usize = 3;

type Msg = [u32; 3];

/// A PE's rows (counts and column sums, and whether each asked for a position), its columns
/// (the rows that have each), the positions found, the next position if it is PE 0, and
/// whether a removal hit a row that had pivoted already (the input was not morally upper
/// triangular).
struct Pe {
    count: Vec<u32>,
    sum: Vec<u64>,
    asked: Vec<bool>,
    col_rows: Vec<Vec<u32>>,
    row_pos: Vec<u32>,
    col_pos: Vec<u32>,
    next: i64,
    pes: usize,
    bad: bool,
}

impl Pe {
    /// Local row `l` (global `row`) is left with one column: the position counter hears of
    /// it. The counter is PE 0's, so a row freed by a pivot always asks after that pivot got
    /// its position, and sits above it.
    fn ask(&mut self, l: usize, row: u32) -> Msg {
        self.asked[l] = true;
        [row, self.sum[l] as u32, 0]
    }
}

impl Handler<Msg> for Pe {
    fn process(&mut self, mailbox: usize, m: Msg, _from: usize, out: &mut Outbox<'_, Msg>) {
        match mailbox {
            ASK => {
                let pos = u32::try_from(self.next).expect("a position per row");
                self.next -= 1;
                let [row, col, _] = m;
                out.send(PIVOT, [col, pos, row], owner(col, self.pes).0);
            }
            PIVOT => {
                let [col, pos, row] = m;
                let l = col as usize / self.pes;
                self.col_pos[l] = pos;
                for &r in &self.col_rows[l] {
                    let (dest, local) = owner(r, self.pes);
                    if r == row {
                        out.send(PLACE, [local as u32, pos, 0], dest);
                    } else {
                        out.send(REMOVE, [local as u32, col, 0], dest);
                    }
                }
            }
            REMOVE => {
                let [l, col, _] = m;
                let l = l as usize;
                if self.count[l] <= 1 {
                    self.bad = true;
                    return;
                }
                self.count[l] -= 1;
                self.sum[l] -= u64::from(col);
                if self.count[l] == 1 {
                    let global = (l * self.pes + out.pe()) as u32;
                    let msg = self.ask(l, global);
                    out.send(ASK, msg, 0);
                }
            }
            _ => self.row_pos[m[0] as usize] = m[1],
        }
    }
}

/// The rows and columns of `m` that PE `pe` of `pes` owns, set up for the elimination.
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
        asked: vec![false; rows],
        col_rows: t.rows_of(pe, pes).map(|(_, rs)| rs.to_vec()).collect(),
        row_pos: vec![u32::MAX; rows],
        col_pos: vec![u32::MAX; local_rows(m.cols, pe, pes)],
        next: if pe == 0 { i64::from(m.rows) - 1 } else { 0 },
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

/// Toposort on a selector, collectively over `pes`: asks, pivots, removals and placements
/// feed each other (a cycle of mailboxes that terminates together when no message is left
/// anywhere). Every rank gathers the positions and checks the whole result.
pub fn selector(pes: &Pes, m: &Matrix) -> Result<Outcome, String> {
    refuse_unless_square(m)?;
    let n = pes.count();
    let t = m.transpose();
    let states: Vec<Pe> = pes.mine().map(|pe| setup(m, &t, pe, n)).collect();
    let spec = Spec::new(4)
        .fed_by(PIVOT, &[ASK])
        .fed_by(REMOVE, &[PIVOT])
        .fed_by(PLACE, &[PIVOT])
        .fed_by(ASK, &[REMOVE]);
    let run = || {
        pes.select(&spec, states, |pe| {
            let me = pe.pe();
            for l in 0..pe.state().count.len() {
                // Handlers run while this loop sends (`yield`): a row they took to one
                // column has asked already.
                let s = pe.state();
                if s.count[l] == 1 && !s.asked[l] {
                    let msg = s.ask(l, (l * n + me) as u32);
                    pe.send(ASK, msg, 0);
                }
            }
        })
    };
    let first = pes.mine().start;
    let check_all = |states: Vec<Pe>| {
        let bad = pes.any(states.iter().any(|s| s.bad));
        let (rows, cols) = positions(pes, m, first, &states);
        if bad || rows.iter().chain(&cols).any(|&p| p == u32::MAX) {
            return Err(NOT_TRIANGULAR.to_string());
        }
        check(m, &rows, &cols)
    };
    let seconds = pes.timed(run, check_all)?;
    Ok(Outcome::new(
        "toposort",
        pes.model(),
        n,
        seconds,
        u64::from(m.rows),
        "rows",
    ))
}

/// The global row and column permutations from every PE's positions (gathered over the
/// ranks); `u32::MAX` where a row or column found none.
fn positions(pes: &Pes, m: &Matrix, first: usize, states: &[Pe]) -> (Vec<u32>, Vec<u32>) {
    let n = pes.count();
    let (mut rows, mut cols) = (
        vec![u32::MAX; m.rows as usize],
        vec![u32::MAX; m.cols as usize],
    );
    for (pe, s) in (first..).zip(states) {
        for (l, &p) in s.row_pos.iter().enumerate() {
            rows[l * n + pe] = p;
        }
        for (l, &p) in s.col_pos.iter().enumerate() {
            cols[l * n + pe] = p;
        }
    }
    // Each rank filled its own PEs' entries; the others stay u32::MAX.
    let merge = |mine: Vec<u32>| -> Vec<u32> {
        let parts = pes.gather(&mine);
        (0..mine.len())
            .map(|i| parts.iter().map(|p| p[i]).min().unwrap_or(u32::MAX))
            .collect()
    };
    (merge(rows), merge(cols))
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
