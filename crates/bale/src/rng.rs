//! The random streams of the apps: splitmix64, one stream per (seed, PE), so a serial replay
//! of any PE's stream gives the reference answer.

/// A splitmix64 generator.
///
/// ```
/// let mut a = bale::rng::Stream::new(1, 0);
/// let mut b = bale::rng::Stream::new(1, 0);
/// assert_eq!(a.next_u64(), b.next_u64());
/// assert!(a.below(10) < 10);
/// ```
#[derive(Clone, Debug)]
pub struct Stream(u64);

impl Stream {
    /// The stream of PE `pe` for `seed`.
    pub fn new(seed: u64, pe: usize) -> Stream {
        let mut s = Stream(seed ^ 0x5851_f42d_4c95_7f2d);
        for _ in 0..=pe % 4 {
            s.next_u64();
        }
        Stream(s.0 ^ (pe as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`), by multiply-shift (no division on the hot path).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}
