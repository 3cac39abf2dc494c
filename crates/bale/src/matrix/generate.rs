//! Random sparse matrices from a seed, the same on every PE count (the apps' inputs).

use super::Matrix;
use crate::rng::Stream;

/// An Erdős–Rényi pattern: each of the `rows × cols` entries is a nonzero with probability
/// `p`, independently. Columns are drawn by geometric skips (one random number per nonzero,
/// not per entry), so a sparse matrix costs time in its nonzeros.
///
/// ```
/// let m = bale::matrix::generate::erdos_renyi(1000, 1000, 0.01, 1);
/// assert!(m.nnz() > 8000 && m.nnz() < 12000);
/// ```
pub fn erdos_renyi(rows: u32, cols: u32, p: f64, seed: u64) -> Matrix {
    let mut s = Stream::new(seed, usize::MAX);
    let mut entries = Vec::new();
    if p <= 0.0 || cols == 0 {
        return Matrix::from_entries(rows, cols, entries);
    }
    let log_q = (1.0 - p.min(1.0)).ln();
    for r in 0..rows {
        let mut c: i64 = -1;
        loop {
            // The gap to the next nonzero is geometric: floor(ln U / ln(1 - p)).
            let skip = if p >= 1.0 {
                0
            } else {
                let u = ((s.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                (u.ln() / log_q).floor().min(f64::from(u32::MAX)) as i64
            };
            c += skip + 1;
            if c >= i64::from(cols) {
                break;
            }
            entries.push((r, c as u32));
        }
    }
    Matrix::from_entries(rows, cols, entries)
}

/// The adjacency pattern of a random geometric graph: `n` points uniform in the unit square,
/// joined when closer than `r` (no loops). Vertices are numbered cell by cell of a grid of
/// side at least `r`, as Bale numbers them, so that neighbours have nearby numbers (and
/// mostly the same owner): the local counterpart of Erdős–Rényi's uniform scatter.
///
/// ```
/// let g = bale::matrix::generate::geometric(2000, 0.05, 1);
/// assert_eq!(g, g.transpose()); // undirected
/// ```
pub fn geometric(n: u32, r: f64, seed: u64) -> Matrix {
    let mut s = Stream::new(seed, usize::MAX - 1);
    let unit = |s: &mut Stream| ((s.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let points: Vec<(f64, f64)> = (0..n).map(|_| (unit(&mut s), unit(&mut s))).collect();
    let across = if r > 0.0 {
        ((1.0 / r).floor() as usize).clamp(1, 4096)
    } else {
        1
    };
    let cell_of = |(x, y): (f64, f64)| {
        let c = |v: f64| ((v * across as f64) as usize).min(across - 1);
        (c(y), c(x))
    };
    // Points by cell, row-major: a point's number is its place in this order.
    let mut cells: Vec<Vec<(f64, f64)>> = vec![Vec::new(); across * across];
    for &p in &points {
        let (cy, cx) = cell_of(p);
        cells[cy * across + cx].push(p);
    }
    let mut first = Vec::with_capacity(cells.len());
    let mut at = 0u32;
    for c in &cells {
        first.push(at);
        at += c.len() as u32;
    }
    let mut entries = Vec::new();
    let r2 = r * r;
    for cy in 0..across {
        for cx in 0..across {
            let here = cy * across + cx;
            for (i, &(x, y)) in cells[here].iter().enumerate() {
                let me = first[here] + i as u32;
                for ny in cy.saturating_sub(1)..(cy + 2).min(across) {
                    for nx in cx.saturating_sub(1)..(cx + 2).min(across) {
                        let there = ny * across + nx;
                        for (j, &(u, v)) in cells[there].iter().enumerate() {
                            let other = first[there] + j as u32;
                            let d2 = (x - u) * (x - u) + (y - v) * (y - v);
                            if other != me && d2 < r2 {
                                entries.push((me, other));
                            }
                        }
                    }
                }
            }
        }
    }
    Matrix::from_entries(n, n, entries)
}

/// The adjacency pattern of the Kronecker product of the stars `K(1, m)` for each `m` in
/// `stars` (a star: vertex 0 joined to vertices `1..=m`), with a self-loop on every star's
/// centre (`mode` 1) or on its last leaf (`mode` 2), or none (`mode` 0). The loops are what
/// makes triangles: the product of loop-free stars is bipartite. The graph's triangle count
/// has a closed form ([`kronecker_triangles`]).
///
/// ```
/// let g = bale::matrix::generate::kronecker(1, &[2, 3]).unwrap();
/// assert_eq!(g.rows, 12);
/// ```
pub fn kronecker(mode: u8, stars: &[u32]) -> Result<Matrix, String> {
    if mode > 2 || stars.is_empty() || stars.contains(&0) {
        return Err(format!(
            "-K {mode}:{}: a mode of 0, 1 or 2 and star sizes of at least 1",
            stars
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join("x")
        ));
    }
    let n = stars
        .iter()
        .try_fold(1u64, |n, &m| n.checked_mul(u64::from(m) + 1))
        .filter(|&n| n <= 1 << 26)
        .ok_or("-K: the product graph would have more than 2^26 vertices")?;
    let star = |m: u32| {
        let mut e: Vec<(u32, u32)> = (1..=m).flat_map(|l| [(0, l), (l, 0)]).collect();
        match mode {
            1 => e.push((0, 0)),
            2 => e.push((m, m)),
            _ => {}
        }
        Matrix::from_entries(m + 1, m + 1, e)
    };
    let mut g = star(stars[0]);
    for &m in &stars[1..] {
        let b = star(m);
        let mut e = Vec::with_capacity(g.nnz() * b.nnz());
        for (i, j) in g.entries() {
            for (k, l) in b.entries() {
                e.push((i * b.rows + k, j * b.rows + l));
            }
        }
        g = Matrix::from_entries(g.rows * b.rows, g.cols * b.cols, e);
    }
    debug_assert_eq!(u64::from(g.rows), n);
    Ok(g)
}

/// The triangles of [`kronecker`]`(mode, stars)` (loops ignored), in closed form: none in
/// mode 0; `(Π(3m + 1) − 3 Π(m + 1) + 2) / 6` in mode 1; `(4^k − 3 · 2^k + 2) / 6` for `k`
/// stars in mode 2.
pub fn kronecker_triangles(mode: u8, stars: &[u32]) -> u128 {
    let prod = |f: &dyn Fn(u128) -> u128| stars.iter().map(|&m| f(u128::from(m))).product::<u128>();
    match mode {
        1 => (prod(&|m| 3 * m + 1) + 2 - 3 * prod(&|m| m + 1)) / 6,
        2 => {
            let k = stars.len() as u32;
            (4u128.pow(k) + 2 - 3 * 2u128.pow(k)) / 6
        }
        _ => 0,
    }
}

/// A random permutation of `0..n` (Fisher–Yates on the seed's stream `which`).
pub fn permutation(n: u32, seed: u64, which: usize) -> Vec<u32> {
    let mut s = Stream::new(seed, which);
    let mut p: Vec<u32> = (0..n).collect();
    for i in (1..n as usize).rev() {
        let j = s.below(i as u64 + 1) as usize;
        p.swap(i, j);
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erdos_renyi_has_about_p_of_its_entries_and_is_reproducible() {
        let m = erdos_renyi(400, 300, 0.05, 7);
        let expected = 400.0 * 300.0 * 0.05;
        let got = m.nnz() as f64;
        assert!((got - expected).abs() < 0.1 * expected, "{got} nonzeros");
        assert_eq!(m, erdos_renyi(400, 300, 0.05, 7));
        assert_ne!(m, erdos_renyi(400, 300, 0.05, 8));
        assert_eq!(erdos_renyi(5, 4, 1.0, 1).nnz(), 20);
        assert_eq!(erdos_renyi(5, 4, 0.0, 1).nnz(), 0);
    }

    #[test]
    fn kronecker_graphs_have_their_closed_form_triangle_count() {
        let lower = |g: &Matrix| {
            Matrix::from_entries(
                g.rows,
                g.cols,
                g.entries().filter(|&(r, c)| c < r).collect(),
            )
        };
        for (mode, stars) in [
            (0u8, vec![3u32, 4]),
            (1, vec![2]),
            (1, vec![2, 3]),
            (1, vec![3, 4, 2]),
            (2, vec![2, 3]),
            (2, vec![3, 4, 5]),
            (2, vec![1, 1, 1, 1]),
        ] {
            let g = kronecker(mode, &stars).unwrap();
            assert_eq!(g, g.transpose(), "symmetric");
            let counted = crate::apps::triangles::serial(&lower(&g));
            assert_eq!(
                u128::from(counted),
                kronecker_triangles(mode, &stars),
                "mode {mode}, stars {stars:?}"
            );
        }
        assert!(kronecker(3, &[2]).is_err());
        assert!(kronecker(1, &[0]).is_err());
        assert!(kronecker(1, &[]).is_err());
        assert!(kronecker(1, &[1000, 1000, 1000])
            .unwrap_err()
            .contains("2^26"));
    }

    #[test]
    fn a_geometric_graph_joins_exactly_the_close_points() {
        let (n, r) = (400, 0.08);
        let g = geometric(n, r, 3);
        assert_eq!(g, g.transpose());
        // Against all pairs: the same points, renumbered by cell, give the same degrees.
        let mut s = Stream::new(3, usize::MAX - 1);
        let unit = |s: &mut Stream| ((s.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        let pts: Vec<(f64, f64)> = (0..n).map(|_| (unit(&mut s), unit(&mut s))).collect();
        let mut degrees: Vec<usize> = pts
            .iter()
            .map(|a| {
                pts.iter()
                    .filter(|b| {
                        let d2 = (a.0 - b.0).powi(2) + (a.1 - b.1).powi(2);
                        d2 > 0.0 && d2 < r * r
                    })
                    .count()
            })
            .collect();
        let mut got: Vec<usize> = (0..n).map(|i| g.row(i).len()).collect();
        degrees.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, degrees);
        let mean = g.nnz() as f64 / f64::from(n);
        let expected = f64::from(n) * std::f64::consts::PI * r * r;
        assert!(
            mean > 0.6 * expected && mean < 1.2 * expected,
            "{mean} vs {expected}"
        );
    }

    #[test]
    fn a_permutation_holds_every_value_once() {
        let mut p = permutation(1000, 3, 0);
        assert_ne!(p, (0..1000).collect::<Vec<_>>());
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<_>>());
    }
}
