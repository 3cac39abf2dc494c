//! Cutting `n` items into nearly equal contiguous blocks, and a grid of tiles into a nearly
//! square arrangement.

use std::ops::Range;

/// `n` items cut into `count` contiguous blocks whose sizes differ by at most one.
///
/// ```
/// use tactor_apps::blocks::Blocks;
///
/// let b = Blocks::new(10, 3).unwrap();
/// assert_eq!((0..3).map(|i| b.range(i)).collect::<Vec<_>>(), [0..3, 3..6, 6..10]);
/// assert!(Blocks::new(2, 3).is_err());
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Blocks {
    n: usize,
    count: usize,
}

impl Blocks {
    /// The blocks, or why `n` items cannot fill `count` of them.
    pub fn new(n: usize, count: usize) -> Result<Blocks, String> {
        if count == 0 || n < count {
            return Err(format!(
                "{n} cannot be cut into {count} blocks of at least one"
            ));
        }
        Ok(Blocks { n, count })
    }

    /// How many blocks.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The items of block `b`.
    pub fn range(&self, b: usize) -> Range<usize> {
        b * self.n / self.count..(b + 1) * self.n / self.count
    }
}

/// The arrangement of `tiles` tiles closest to a square, `(across, down)` with
/// `across <= down` (rows of tiles are contiguous in memory).
///
/// ```
/// assert_eq!(tactor_apps::blocks::near_square(2), (1, 2));
/// assert_eq!(tactor_apps::blocks::near_square(12), (3, 4));
/// assert_eq!(tactor_apps::blocks::near_square(7), (1, 7));
/// ```
pub fn near_square(tiles: usize) -> (usize, usize) {
    let mut across = (tiles as f64).sqrt() as usize;
    while across > 1 && tiles % across != 0 {
        across -= 1;
    }
    let across = across.max(1);
    (across, tiles / across)
}
