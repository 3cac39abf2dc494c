//! Transpose and permute a sparse matrix distributed by rows: both move every nonzero to the
//! owner of its new row — `(r, c)` becomes `(c, r)` for the transpose, `(rows[r], cols[c])`
//! for a permutation — and each PE builds its new rows from what arrived. One message per
//! nonzero on a selector; the AGP baseline counts each new row's length with one atomic add
//! per nonzero, then places each nonzero with one more. Checked against the serial transpose
//! or permutation of the whole matrix. The exstack baseline moves the same messages in
//! bulk-synchronous phases of per-destination buffers.

use super::{on_my_pes, on_pes, per_pe, Outcome, Pes};
use crate::baseline::Exstack;
use crate::matrix::{generate, local_rows, owner, Matrix};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use tactor::actor::{Handler, Outbox, Spec};
use tactor::Runtime;

/// Which reshaping.
#[derive(Clone, Debug)]
pub enum Op {
    /// `(r, c)` → `(c, r)`.
    Transpose,
    /// `(r, c)` → `(rows[r], cols[c])`.
    Permute {
        /// Where each row goes.
        rows: Vec<u32>,
        /// Where each column goes.
        cols: Vec<u32>,
    },
}

impl Op {
    /// A random row and column permutation of `m` from `seed`.
    pub fn random_permutation(m: &Matrix, seed: u64) -> Op {
        Op::Permute {
            rows: generate::permutation(m.rows, seed, 0),
            cols: generate::permutation(m.cols, seed, 1),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Op::Transpose => "transpose",
            Op::Permute { .. } => "permute",
        }
    }

    /// Where nonzero `(r, c)` goes.
    #[inline]
    fn apply(&self, r: u32, c: u32) -> (u32, u32) {
        match self {
            Op::Transpose => (c, r),
            Op::Permute { rows, cols } => (rows[r as usize], cols[c as usize]),
        }
    }

    /// The shape of the result.
    fn shape(&self, m: &Matrix) -> (u32, u32) {
        match self {
            Op::Transpose => (m.cols, m.rows),
            Op::Permute { .. } => (m.rows, m.cols),
        }
    }

    /// The serial reference.
    fn reference(&self, m: &Matrix) -> Matrix {
        match self {
            Op::Transpose => m.transpose(),
            Op::Permute { rows, cols } => m.permute(rows, cols),
        }
    }
}

/// A PE's new rows: `[local row, column]` pairs as they arrived (plain words, so that they
/// cross ranks as they are).
struct Arrived(Vec<[u32; 2]>);

impl Handler<[u32; 2]> for Arrived {
    #[inline]
    fn process(&mut self, _: usize, m: [u32; 2], _: usize, _: &mut Outbox<'_, [u32; 2]>) {
        self.0.push(m);
    }
}

/// A PE's rows after the reshaping, compressed: local row `l` is
/// `cols[start[l]..start[l + 1]]`, columns ascending.
struct Rows {
    start: Vec<usize>,
    cols: Vec<u32>,
}

impl Rows {
    /// `rows` local rows from `[local row, column]` pairs: counted, placed, and each row's
    /// few columns sorted (linear in the pairs, where sorting them all was not).
    fn from_pairs(rows: usize, pairs: &[[u32; 2]]) -> Rows {
        let mut start = vec![0usize; rows + 1];
        for &[l, _] in pairs {
            start[l as usize + 1] += 1;
        }
        for l in 0..rows {
            start[l + 1] += start[l];
        }
        let mut at = start.clone();
        let mut cols = vec![0u32; pairs.len()];
        for &[l, c] in pairs {
            cols[at[l as usize]] = c;
            at[l as usize] += 1;
        }
        Rows::sorted(start, cols)
    }

    /// Rows from their starts and columns in any order within each row.
    fn sorted(start: Vec<usize>, mut cols: Vec<u32>) -> Rows {
        for w in start.windows(2) {
            cols[w[0]..w[1]].sort_unstable();
        }
        Rows { start, cols }
    }

    fn len(&self) -> usize {
        self.start.len() - 1
    }

    fn row(&self, l: usize) -> &[u32] {
        &self.cols[self.start[l]..self.start[l + 1]]
    }
}

/// Each of this rank's PEs (`first..`, of `pes` in all) files the `[local row, column]`
/// pairs it received into its rows, all at once.
fn build_rows(
    rt: &Runtime,
    rows: u32,
    first: usize,
    pes: usize,
    pairs: Vec<Vec<[u32; 2]>>,
) -> Vec<Rows> {
    let pairs: Vec<Mutex<Vec<[u32; 2]>>> = pairs.into_iter().map(Mutex::new).collect();
    per_pe(rt, |me| {
        let mine = std::mem::take(&mut *pairs[me].lock().unwrap_or_else(|e| e.into_inner()));
        Rows::from_pairs(local_rows(rows, first + me, pes), &mine)
    })
}

/// Checks the rows of PEs `first..` (of `pes`) against the serial answer; names the first
/// wrong row.
fn check(op: &Op, m: &Matrix, first: usize, pes: usize, parts: &[Rows]) -> Result<(), String> {
    let want = op.reference(m);
    for (pe, part) in (first..).zip(parts) {
        let rows = local_rows(want.rows, pe, pes);
        if part.len() != rows {
            return Err(format!(
                "{}: PE {pe} holds {} rows, expected {rows}",
                op.name(),
                part.len()
            ));
        }
        for l in 0..rows {
            let (r, got) = ((l * pes + pe) as u32, part.row(l));
            if got != want.row(r) {
                return Err(format!(
                    "{}: row {r} is {got:?}, expected {:?}",
                    op.name(),
                    want.row(r)
                ));
            }
        }
    }
    Ok(())
}

fn outcome(op: &Op, m: &Matrix, model: &'static str, pes: usize, seconds: f64) -> Outcome {
    Outcome::new(op.name(), model, pes, seconds, m.nnz() as u64, "nonzeros")
}

/// Checks every PE's rows of a one-process baseline; `start` to the end of the rows' building
/// is the app's time.
fn finish(
    op: &Op,
    m: &Matrix,
    model: &'static str,
    pes: usize,
    start: Instant,
    parts: &[Rows],
) -> Result<Outcome, String> {
    let seconds = start.elapsed().as_secs_f64();
    check(op, m, 0, pes, parts)?;
    Ok(outcome(op, m, model, pes, seconds))
}

/// `op` on a selector, collectively over `pes`: one message per nonzero to the owner of its
/// new row, then each PE builds its rows (timed). Each rank checks its own PEs' rows.
pub fn selector(pes: &Pes, m: &Matrix, op: &Op) -> Result<Outcome, String> {
    let n = pes.count();
    let mine = pes.mine();
    let states = mine.clone().map(|_| Arrived(Vec::new())).collect();
    let run = || {
        let out = pes.select(&Spec::new(1), states, |pe| {
            for (r, cs) in m.rows_of(pe.pe(), n) {
                for &c in cs {
                    let (r2, c2) = op.apply(r, c);
                    let (dest, local) = owner(r2, n);
                    pe.send(0, [local as u32, c2], dest);
                }
            }
        });
        let pairs = out.into_iter().map(|a| a.0).collect();
        build_rows(pes.runtime(), op.shape(m).0, mine.start, n, pairs)
    };
    let seconds = pes.timed(run, |parts| check(op, m, mine.start, n, &parts))?;
    Ok(outcome(op, m, pes.model(), n, seconds))
}

/// `op` in the exstack style, collectively over `pes`: each phase hands every destination a
/// buffer of `[local row, column]` pairs, then each PE files what it got.
pub fn exstack(pes: &Pes, m: &Matrix, op: &Op) -> Result<Outcome, String> {
    let n = pes.count();
    let mine = pes.mine();
    let ex = Exstack::<[u32; 2]>::new(pes);
    let cap = ex.capacity();
    let got: Vec<Mutex<Vec<[u32; 2]>>> = mine.clone().map(|_| Mutex::new(Vec::new())).collect();
    let run = || {
        on_my_pes(pes, |me| {
            let mut arrived = got[me - mine.start]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let mut nonzeros = m
                .rows_of(me, n)
                .flat_map(|(r, cs)| cs.iter().map(move |&c| (r, c)))
                .peekable();
            let mut out = vec![Vec::with_capacity(cap); n];
            loop {
                for (r, c) in nonzeros.by_ref() {
                    let (r2, c2) = op.apply(r, c);
                    let (dest, local) = owner(r2, n);
                    out[dest].push([local as u32, c2]);
                    if out[dest].len() == cap {
                        break;
                    }
                }
                if !ex.exchange(me, &mut out, &mut arrived, nonzeros.peek().is_some()) {
                    break;
                }
            }
        });
        let got = got
            .into_iter()
            .map(|g| g.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect();
        build_rows(pes.runtime(), op.shape(m).0, mine.start, n, got)
    };
    let seconds = pes.timed(run, |parts| check(op, m, mine.start, n, &parts))?;
    Ok(outcome(op, m, "exstack", n, seconds))
}

/// `op` in the AGP model: an atomic add on the new row's count per nonzero, then an atomic
/// add on its cursor to place it.
pub fn agp(rt: &Runtime, m: &Matrix, op: &Op) -> Result<Outcome, String> {
    let pes = rt.workers();
    let rows = op.shape(m).0;
    let counts: Vec<Vec<AtomicUsize>> = (0..pes)
        .map(|pe| {
            (0..=local_rows(rows, pe, pes))
                .map(|_| AtomicUsize::new(0))
                .collect()
        })
        .collect();
    let start = Instant::now();
    on_pes(rt, |me| {
        for (r, cs) in m.rows_of(me, pes) {
            for &c in cs {
                let (dest, local) = owner(op.apply(r, c).0, pes);
                counts[dest][local + 1].fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    // Prefix sums: each PE's own (the barrier between phases is the end of `on_pes`).
    let slots: Vec<Vec<AtomicU32>> = counts
        .iter()
        .map(|c| {
            let mut at = 0;
            for x in c {
                at += x.load(Ordering::Relaxed);
                x.store(at, Ordering::Relaxed);
            }
            (0..at).map(|_| AtomicU32::new(0)).collect()
        })
        .collect();
    on_pes(rt, |me| {
        for (r, cs) in m.rows_of(me, pes) {
            for &c in cs {
                let (r2, c2) = op.apply(r, c);
                let (dest, local) = owner(r2, pes);
                let at = counts[dest][local].fetch_add(1, Ordering::Relaxed);
                slots[dest][at].store(c2, Ordering::Relaxed);
            }
        }
    });
    // Each row's cursor ended at the next row's start: row `l` is `[cursor[l - 1], cursor[l])`.
    let parts = per_pe(rt, |pe| {
        let ends: Vec<usize> = counts[pe]
            .iter()
            .map(|x| x.load(Ordering::Relaxed))
            .collect();
        let n = local_rows(rows, pe, pes);
        let start = std::iter::once(0)
            .chain(ends[..n].iter().copied())
            .collect();
        let cols = slots[pe]
            .iter()
            .map(|x| x.load(Ordering::Relaxed))
            .collect();
        Rows::sorted(start, cols)
    });
    finish(op, m, "agp", pes, start, &parts)
}
