//! Which iterations of a solver a trace covers: fragments of `span` iterations from the third
//! on (the first two find their data on every rank and record other copies), each fragment
//! recorded once per parity of the data that alternates between iterations and replayed after.

/// The traced fragments of a run of `iterations` (numbered from 0).
///
/// ```
/// use tactor_apps::fragments::Fragments;
///
/// let f = Fragments::new(4, 11);
/// // Iterations 2..6 and 6..10 are traced; 10 is not (no whole fragment is left).
/// assert_eq!(f.begins(2), Some(0));
/// assert!(f.ends(5) && f.begins(6) == Some(0) && f.ends(9));
/// assert_eq!(f.begins(10), None);
/// // A span of one iteration alternates two traces, one per parity.
/// let g = Fragments::new(1, 5);
/// assert_eq!((g.begins(2), g.begins(3)), (Some(0), Some(1)));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Fragments {
    span: usize,
    iterations: usize,
}

impl Fragments {
    /// Fragments of `span` iterations (at least one) in a run of `iterations`.
    pub fn new(span: usize, iterations: usize) -> Fragments {
        Fragments {
            span: span.max(1),
            iterations,
        }
    }

    /// The fragment iteration `k` falls in, if a whole one covers it: its first iteration.
    fn first(&self, k: usize) -> Option<usize> {
        let first = k.checked_sub(2)? / self.span * self.span + 2;
        (first + self.span <= self.iterations).then_some(first)
    }

    /// The trace to begin before iteration `k`, if a fragment starts there.
    pub fn begins(&self, k: usize) -> Option<u64> {
        let first = self.first(k).filter(|&f| f == k)?;
        // An odd span changes the parity from one fragment to the next.
        Some(if self.span % 2 == 0 {
            0
        } else {
            ((first - 2) / self.span % 2) as u64
        })
    }

    /// Whether a fragment ends after iteration `k`.
    pub fn ends(&self, k: usize) -> bool {
        self.first(k).is_some_and(|f| f + self.span - 1 == k)
    }
}
