//! Sparse matrices as Bale's apps use them: the pattern of nonzeros (no values), in
//! compressed sparse rows with each row's columns ascending, distributed by rows cyclically
//! (row `i` on PE `i % pes`, at local row `i / pes`). Made by a generator (`generate.rs`) or
//! read from a Matrix Market file (`mm.rs`); the serial operations here are the apps'
//! reference answers.

pub mod generate;
pub mod mm;

use std::path::Path;

/// Which random graph a generated input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Graph {
    /// Erdős–Rényi: every entry a nonzero with the same probability.
    ErdosRenyi,
    /// Random geometric: close points of the unit square joined (local: neighbours have
    /// nearby numbers).
    Geometric,
}

/// An app's matrix: the Matrix Market file `file`, or a `graph` of `rows_per_pe × pes` rows
/// and columns with `per_row` nonzeros per row on average. Sizes are checked first, each
/// fault in one line naming the flag.
pub fn input(
    file: Option<&Path>,
    graph: Graph,
    rows_per_pe: u64,
    per_row: f64,
    pes: usize,
    seed: u64,
) -> Result<Matrix, String> {
    if let Some(f) = file {
        return mm::read(f);
    }
    let n = rows_per_pe
        .checked_mul(pes as u64)
        .filter(|&n| n >= 1 && n <= u64::from(u32::MAX))
        .ok_or_else(|| {
            format!(
                "-n {rows_per_pe}: 1 to {} rows per PE on {pes} PEs",
                u64::from(u32::MAX) / pes as u64
            )
        })? as u32;
    if !(per_row.is_finite() && per_row >= 0.0 && per_row <= f64::from(n)) {
        return Err(format!("-z {per_row}: 0 to {n} nonzeros per row"));
    }
    crate::memory::check_matrix(
        u64::from(n),
        (f64::from(n) * per_row).ceil() as u128,
        &format!("-n {rows_per_pe} -z {per_row} on {pes} PEs"),
    )?;
    Ok(match graph {
        Graph::ErdosRenyi => generate::erdos_renyi(n, n, per_row / f64::from(n), seed),
        Graph::Geometric => {
            let r = (per_row / (f64::from(n) * std::f64::consts::PI)).sqrt();
            generate::geometric(n, r, seed)
        }
    })
}

/// A sparse pattern in compressed sparse rows: row `i`'s columns are
/// `cols[offsets[i]..offsets[i + 1]]`, ascending, without repeats.
///
/// ```
/// let m = bale::matrix::Matrix::from_entries(2, 3, vec![(1, 2), (0, 1), (1, 0)]);
/// assert_eq!(m.row(1), &[0, 2]);
/// assert_eq!(m.transpose().row(2), &[1]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Matrix {
    /// Number of rows.
    pub rows: u32,
    /// Number of columns.
    pub cols: u32,
    /// Where each row starts in `cols_of`, and the end.
    pub offsets: Vec<usize>,
    /// The columns of every row, row after row.
    pub cols_of: Vec<u32>,
}

impl Matrix {
    /// The matrix with a nonzero at each `(row, col)` (repeats count once).
    ///
    /// # Panics
    /// If an entry lies outside `rows × cols` (readers and generators check first).
    pub fn from_entries(rows: u32, cols: u32, mut entries: Vec<(u32, u32)>) -> Matrix {
        assert!(
            entries.iter().all(|&(r, c)| r < rows && c < cols),
            "an entry lies outside the {rows} × {cols} matrix"
        );
        entries.sort_unstable();
        entries.dedup();
        let mut offsets = vec![0usize; rows as usize + 1];
        for &(r, _) in &entries {
            offsets[r as usize + 1] += 1;
        }
        for i in 0..rows as usize {
            offsets[i + 1] += offsets[i];
        }
        Matrix {
            rows,
            cols,
            offsets,
            cols_of: entries.into_iter().map(|(_, c)| c).collect(),
        }
    }

    /// Row `i`'s columns, ascending.
    pub fn row(&self, i: u32) -> &[u32] {
        &self.cols_of[self.offsets[i as usize]..self.offsets[i as usize + 1]]
    }

    /// Number of nonzeros.
    pub fn nnz(&self) -> usize {
        self.cols_of.len()
    }

    /// Every nonzero as `(row, col)`, row by row.
    pub fn entries(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.rows).flat_map(move |r| self.row(r).iter().map(move |&c| (r, c)))
    }

    /// The transpose (the serial reference of `bale transpose`).
    pub fn transpose(&self) -> Matrix {
        Matrix::from_entries(
            self.cols,
            self.rows,
            self.entries().map(|(r, c)| (c, r)).collect(),
        )
    }

    /// Row `i` moved to row `rows[i]`, column `j` to column `cols[j]` (the serial reference
    /// of `bale permute`).
    pub fn permute(&self, rows: &[u32], cols: &[u32]) -> Matrix {
        Matrix::from_entries(
            self.rows,
            self.cols,
            self.entries()
                .map(|(r, c)| (rows[r as usize], cols[c as usize]))
                .collect(),
        )
    }

    /// The rows PE `pe` of `pes` owns, as `(global row, columns)`.
    pub fn rows_of(&self, pe: usize, pes: usize) -> impl Iterator<Item = (u32, &[u32])> {
        (pe as u64..u64::from(self.rows))
            .step_by(pes)
            .map(move |r| (r as u32, self.row(r as u32)))
    }
}

/// Which PE owns row `r`, and at which local row.
#[inline]
pub fn owner(r: u32, pes: usize) -> (usize, usize) {
    (r as usize % pes, r as usize / pes)
}

/// Local rows of PE `pe` when `rows` rows are dealt cyclically over `pes` PEs.
pub fn local_rows(rows: u32, pe: usize, pes: usize) -> usize {
    (rows as usize + pes - 1 - pe) / pes
}

/// Builds the global matrix from each PE's local rows: `parts[pe]` holds, per local row,
/// its columns (in any order, no repeats).
pub fn assemble(rows: u32, cols: u32, parts: &[Vec<Vec<u32>>]) -> Matrix {
    let pes = parts.len();
    let mut entries = Vec::new();
    for (pe, part) in parts.iter().enumerate() {
        for (local, cs) in part.iter().enumerate() {
            let r = (local * pes + pe) as u32;
            entries.extend(cs.iter().map(|&c| (r, c)));
        }
    }
    Matrix::from_entries(rows, cols, entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposing_twice_and_permuting_back_give_the_matrix() {
        let m = generate::erdos_renyi(50, 37, 0.1, 9);
        assert_eq!(m.transpose().transpose(), m);
        let rows: Vec<u32> = (0..50).rev().collect();
        let cols: Vec<u32> = (0..37).map(|c| (c + 5) % 37).collect();
        let inv = |p: &[u32]| {
            let mut q = vec![0u32; p.len()];
            for (i, &v) in p.iter().enumerate() {
                q[v as usize] = i as u32;
            }
            q
        };
        let back = m.permute(&rows, &cols).permute(&inv(&rows), &inv(&cols));
        assert_eq!(back, m);
    }

    #[test]
    fn rows_are_dealt_cyclically_and_assemble_back() {
        let m = generate::erdos_renyi(23, 23, 0.2, 3);
        for pes in 1..=4 {
            let parts: Vec<Vec<Vec<u32>>> = (0..pes)
                .map(|pe| m.rows_of(pe, pes).map(|(_, cs)| cs.to_vec()).collect())
                .collect();
            for (pe, part) in parts.iter().enumerate() {
                assert_eq!(part.len(), local_rows(23, pe, pes));
            }
            assert_eq!(assemble(23, 23, &parts), m);
        }
    }
}
