//! The three benchmarks, written once over a `join` and a parallel loop so that Tactor and
//! rayon run the very same code. The C and C++ peers (`peers/`) compute the same values the
//! same way: a run's check value must match across systems.

/// What a system offers the benchmarks.
pub trait Styles: Sync {
    /// Runs both closures, potentially in parallel.
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send;
    /// Calls `body(i)` for each `i` in `0..n`, in parallel, pieces of at least one index.
    fn for_each(&self, n: usize, body: &(dyn Fn(usize) + Sync));
}

/// fib(n) with a join at every call: leaves are a comparison and a return.
pub fn fib<S: Styles>(s: &S, n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = s.join(|| fib(s, n - 1), || fib(s, n - 2));
    a + b
}

/// SplitMix64's finaliser: a node's identity from its parent's and its index.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The root's identity (UTS's T1 uses seed 19 too); an identity of 0 would draw the most
/// children possible.
pub fn tree_root() -> u64 {
    mix(19)
}

/// Mean children of a node: the UTS benchmark's T1 tree (geometric, b0 = 4).
pub const TREE_BRANCHING: f64 = 4.0;

/// A node's children in the geometric tree: geometric with mean `TREE_BRANCHING` above
/// `depth_limit`, none at it (UTS's T1 shape: small, unpredictable subtrees everywhere).
pub fn children(id: u64, depth: u32, depth_limit: u32) -> u64 {
    if depth >= depth_limit {
        return 0;
    }
    // u in (0, 1], from the top 53 bits.
    let u = ((id >> 11) as f64 + 1.0) * (1.0 / (1u64 << 53) as f64);
    let q = 1.0 / (1.0 + TREE_BRANCHING);
    (u.ln() / (1.0 - q).ln()).floor() as u64
}

/// Counts the nodes of the subtree at `id`, its children searched in parallel by halving
/// their index range.
pub fn tree<S: Styles>(s: &S, id: u64, depth: u32, limit: u32) -> u64 {
    let m = children(id, depth, limit);
    1 + kids(s, id, 0, m, depth + 1, limit)
}

fn kids<S: Styles>(s: &S, parent: u64, lo: u64, hi: u64, depth: u32, limit: u32) -> u64 {
    match hi - lo {
        0 => 0,
        1 => tree(s, mix(parent ^ lo), depth, limit),
        n => {
            let mid = lo + n / 2;
            let (a, b) = s.join(
                || kids(s, parent, lo, mid, depth, limit),
                || kids(s, parent, mid, hi, depth, limit),
            );
            a + b
        }
    }
}

/// The loop body: `spin` dependent xorshift steps from `i` (the driver calibrates `spin` to
/// the body time asked for).
pub fn body(i: usize, spin: u32) -> u64 {
    let mut x = (i as u64) | 1;
    for _ in 0..spin {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// A loop of `n` bodies, each storing its value; returns their wrapping sum.
pub fn parallel_loop<S: Styles>(s: &S, n: usize, spin: u32) -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    let out: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    s.for_each(n, &|i| out[i].store(body(i, spin), Relaxed));
    out.iter()
        .map(|x| x.load(Relaxed))
        .fold(0, u64::wrapping_add)
}

/// Tactor: `tactor::join` and `tactor::for_each` (grain 1).
pub struct Tactor;

impl Styles for Tactor {
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        tactor::join(a, b)
    }

    fn for_each(&self, n: usize, body: &(dyn Fn(usize) + Sync)) {
        tactor::for_each(0..n, 1, body)
    }
}

/// rayon: `rayon::join` and `into_par_iter().for_each` (its adaptive splitting, min length 1).
pub struct Rayon;

impl Styles for Rayon {
    fn join<A, B, RA, RB>(&self, a: A, b: B) -> (RA, RB)
    where
        A: FnOnce() -> RA + Send,
        B: FnOnce() -> RB + Send,
        RA: Send,
        RB: Send,
    {
        rayon::join(a, b)
    }

    fn for_each(&self, n: usize, body: &(dyn Fn(usize) + Sync)) {
        use rayon::prelude::*;
        (0..n).into_par_iter().for_each(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same answers from both systems, and the known ones.
    #[test]
    fn tactor_and_rayon_agree() {
        let rt = tactor::Runtime::builder()
            .workers(2)
            .pin(false)
            .build()
            .unwrap();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        assert_eq!(rt.run(|| fib(&Tactor, 20)), 6765);
        assert_eq!(pool.install(|| fib(&Rayon, 20)), 6765);
        let t = rt.run(|| tree(&Tactor, tree_root(), 0, 6));
        assert_eq!(pool.install(|| tree(&Rayon, tree_root(), 0, 6)), t);
        assert!(t > 100, "a tree of depth 6 has {t} nodes");
        let l = rt.run(|| parallel_loop(&Tactor, 1000, 10));
        assert_eq!(pool.install(|| parallel_loop(&Rayon, 1000, 10)), l);
        let seq = (0..1000).map(|i| body(i, 10)).fold(0, u64::wrapping_add);
        assert_eq!(l, seq);
    }
}
