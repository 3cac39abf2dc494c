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
use crate::baseline::Exstack;
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
                if self.col_pos[l] != u32::MAX {
                    // Two rows were left with this column: not morally upper triangular
                    // (and a second round of removals would corrupt the rows' sums).
                    self.bad = true;
                    return;
                }
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
        let bad = states.iter().any(|s| s.bad);
        let found = states.iter().map(|s| (&s.row_pos[..], &s.col_pos[..]));
        check_found(pes, m, first, bad, found)
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

/// Checks the positions this rank's PEs (from `first` on) found for their rows and
/// columns, gathered with every rank's; `bad` if one of them saw that the input is not
/// morally upper triangular. Collective.
fn check_found<'s>(
    pes: &Pes,
    m: &Matrix,
    first: usize,
    bad: bool,
    found: impl Iterator<Item = (&'s [u32], &'s [u32])>,
) -> Result<(), String> {
    let bad = pes.any(bad);
    let (rows, cols) = positions(pes, m, first, found);
    if bad || rows.iter().chain(&cols).any(|&p| p == u32::MAX) {
        return Err(NOT_TRIANGULAR.to_string());
    }
    check(m, &rows, &cols)
}

/// The global row and column permutations from every PE's positions (gathered over the
/// ranks); `u32::MAX` where a row or column found none.
fn positions<'s>(
    pes: &Pes,
    m: &Matrix,
    first: usize,
    found: impl Iterator<Item = (&'s [u32], &'s [u32])>,
) -> (Vec<u32>, Vec<u32>) {
    let n = pes.count();
    let (mut rows, mut cols) = (
        vec![u32::MAX; m.rows as usize],
        vec![u32::MAX; m.cols as usize],
    );
    for (pe, (row_pos, col_pos)) in (first..).zip(found) {
        for (l, &p) in row_pos.iter().enumerate() {
            rows[l * n + pe] = p;
        }
        for (l, &p) in col_pos.iter().enumerate() {
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

/// What a PE of the exstack version found: per local row its level (one more than the
/// highest level of the pivots that took its other columns) and its pivot column, and
/// whether the input showed it is not morally upper triangular.
struct Levels {
    level: Vec<u32>,
    matched: Vec<u32>,
    bad: bool,
}

/// Toposort in the exstack style (as Bale's), collectively over `pes`: phases of two
/// exchanges — each PE's rows left with one column send that column to its owner with the
/// row's level, whose other rows hear of the removal in the second exchange — until no PE
/// has such a row. Positions then come from the levels, counting down level by level (a
/// row sits above every pivot that freed it), and columns take their rows' positions in a
/// last exchange. No shared counter: the levels replace it.
pub fn exstack(pes: &Pes, m: &Matrix) -> Result<Outcome, String> {
    refuse_unless_square(m)?;
    let n = pes.count();
    let first = pes.mine().start;
    let t = m.transpose();
    // Exchanges are collective: made once per rank, in the same order on every rank.
    let exchanges = (Exstack::new(pes), Exstack::new(pes));
    let columns = Exstack::new(pes);
    let run = || {
        let found = super::per_pe(pes.runtime(), |l| {
            eliminate(&exchanges, n, m, &t, first + l)
        });
        let starts = level_starts(pes, first, &found);
        let placed = super::per_pe(pes.runtime(), |l| {
            place(&columns, n, m, first + l, &found[l], starts[l].clone())
        });
        (found.iter().any(|f| f.bad), placed)
    };
    let seconds = pes.timed(run, |(bad, placed)| {
        let found = placed.iter().map(|(r, c)| (&r[..], &c[..]));
        check_found(pes, m, first, bad, found)
    })?;
    Ok(Outcome::new(
        "toposort",
        "exstack",
        n,
        seconds,
        u64::from(m.rows),
        "rows",
    ))
}

/// The elimination phases of PE `me` of `n` (see [`exstack`]): pivots, then removals.
fn eliminate(
    (pivots, removals): &(Exstack<Msg>, Exstack<Msg>),
    n: usize,
    m: &Matrix,
    t: &Matrix,
    me: usize,
) -> Levels {
    let cap = pivots.capacity();
    let rows = local_rows(m.rows, me, n);
    let (mut count, mut sum) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for (_, cs) in m.rows_of(me, n) {
        count.push(cs.len() as u32);
        sum.push(cs.iter().map(|&c| u64::from(c)).sum::<u64>());
    }
    let col_rows: Vec<&[u32]> = t.rows_of(me, n).map(|(_, rs)| rs).collect();
    let mut col_done = vec![false; col_rows.len()];
    let mut queue: Vec<u32> = (0..rows as u32)
        .filter(|&l| count[l as usize] == 1)
        .collect();
    let mut found = Levels {
        level: vec![0; rows],
        matched: vec![u32::MAX; rows],
        bad: false,
    };
    let (mut out, mut inbox) = (vec![Vec::with_capacity(cap); n], Vec::new());
    let (mut back, mut got) = (vec![Vec::new(); n], Vec::new());
    loop {
        let more = !queue.is_empty();
        while let Some(&l) = queue.last() {
            let col = sum[l as usize] as u32;
            let dest = owner(col, n).0;
            if out[dest].len() == cap {
                break;
            }
            queue.pop();
            found.matched[l as usize] = col;
            let row = (l as usize * n + me) as u32;
            out[dest].push([col, found.level[l as usize], row]);
        }
        // Nobody had a row to pivot: nothing was sent anywhere, and every PE stops here.
        if !pivots.exchange(me, &mut out, &mut inbox, more) {
            return found;
        }
        for [col, level, row] in inbox.drain(..) {
            let c = col as usize / n;
            if std::mem::replace(&mut col_done[c], true) {
                found.bad = true;
                continue;
            }
            for &r in col_rows[c] {
                if r != row {
                    let (dest, local) = owner(r, n);
                    back[dest].push([local as u32, col, level]);
                }
            }
        }
        removals.exchange(me, &mut back, &mut got, false);
        for [l, col, level] in got.drain(..) {
            let l = l as usize;
            if count[l] <= 1 {
                found.bad = true;
                continue;
            }
            count[l] -= 1;
            sum[l] -= u64::from(col);
            found.level[l] = found.level[l].max(level + 1);
            if count[l] == 1 {
                queue.push(l as u32);
            }
        }
    }
}

/// For each of this rank's PEs (from `first` on), where each of its levels starts in the
/// order (level, PE, local row), counted over every PE of every rank. Collective.
fn level_starts(pes: &Pes, first: usize, found: &[Levels]) -> Vec<Vec<u64>> {
    // [level, PE, rows] for every level a PE's matched rows reached.
    let mut mine: Vec<[u64; 3]> = Vec::new();
    for (pe, f) in (first..).zip(found) {
        let mut sizes: Vec<u64> = Vec::new();
        for (&level, &col) in f.level.iter().zip(&f.matched) {
            if col != u32::MAX {
                let level = level as usize;
                if sizes.len() <= level {
                    sizes.resize(level + 1, 0);
                }
                sizes[level] += 1;
            }
        }
        let sizes = sizes.into_iter().enumerate().filter(|&(_, k)| k > 0);
        mine.extend(sizes.map(|(level, k)| [level as u64, pe as u64, k]));
    }
    let mut all: Vec<[u64; 3]> = pes.gather(&mine).concat();
    all.sort_unstable();
    let levels = |f: &Levels| f.level.iter().max().map_or(0, |&l| l as usize + 1);
    let mut starts: Vec<Vec<u64>> = found.iter().map(|f| vec![0; levels(f)]).collect();
    let mut at = 0;
    for [level, pe, k] in all {
        if let Some(s) = (pe as usize)
            .checked_sub(first)
            .and_then(|l| starts.get_mut(l))
        {
            s[level as usize] = at;
        }
        at += k;
    }
    starts
}

/// PE `me`'s row positions (`next[level]`: the next free slot of each level, counted from
/// the bottom), and its column positions from the rows that pivoted on them, by one
/// exchange.
fn place(
    cols: &Exstack<[u32; 2]>,
    n: usize,
    m: &Matrix,
    me: usize,
    f: &Levels,
    mut next: Vec<u64>,
) -> (Vec<u32>, Vec<u32>) {
    let mut out = vec![Vec::new(); n];
    let mut row_pos = vec![u32::MAX; f.level.len()];
    for (l, (&level, &col)) in f.level.iter().zip(&f.matched).enumerate() {
        if col != u32::MAX {
            let slot = &mut next[level as usize];
            let pos = u64::from(m.rows) - 1 - *slot;
            *slot += 1;
            row_pos[l] = pos as u32;
            out[owner(col, n).0].push([col, pos as u32]);
        }
    }
    let mut inbox = Vec::new();
    cols.exchange(me, &mut out, &mut inbox, false);
    let mut col_pos = vec![u32::MAX; local_rows(m.cols, me, n)];
    for [col, pos] in inbox {
        col_pos[col as usize / n] = pos;
    }
    (row_pos, col_pos)
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
            // A column pivots once: a second row left with it means bad input, and its
            // removals again would take columns from rows that no longer have them (the
            // sums would stop naming a column).
            let first = col_pos[col as usize].compare_exchange(
                u32::MAX,
                pos,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            if first.is_err() {
                bad.store(true, Ordering::Relaxed);
                continue;
            }
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
