//! What a stepped program's items read ([`Pattern`]): the one description that both
//! executions of such a program take — in lock-step per worker
//! ([`Neighbours`](super::Neighbours)) or as compiled dataflow ([`Dataflow`](super::Dataflow)).

use std::ops::Range;

/// What a program's items read: for each array, which items a step computes, and which items
/// of the step before each of them reads. Every rank gives the same pattern.
///
/// # Safety
///
/// [`Neighbours`](super::Neighbours) and [`Dataflow`](super::Dataflow) order their workers'
/// reads and writes of the items' memory by the pattern alone, so a pattern that contradicts
/// itself lets a read race with a write. An implementation promises, for every array, step and
/// item, on every call and every rank alike:
/// - [`Pattern::readers`] is exactly the inverse of [`Pattern::reads`]: `j` is among
///   `readers(a, t, i)` if and only if `i` is among `reads(a, t, j)`;
/// - [`Pattern::reads`] at `t` names only items live at `t - 1`, and none at step 0;
/// - two steps of one array with the same [`Pattern::class`] have the same live items,
///   reads and readers.
///
/// ```
/// use tactor::job::Pattern;
///
/// /// Each of `n` cells reads itself and its two neighbours at the step before.
/// struct Near(usize);
/// // SAFETY: `readers` is `reads` (a symmetric neighbourhood), which names live cells at
/// // steps after 0 only, and every step after 0 is alike.
/// unsafe impl Pattern for Near {
///     fn live(&self, _array: usize, _step: i64) -> std::ops::Range<usize> {
///         0..self.0
///     }
///     fn reads(&self, _: usize, step: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
///         (step > 0).then(|| i.saturating_sub(1)..(i + 2).min(self.0)).into_iter().flatten()
///     }
///     fn readers(&self, a: usize, step: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
///         self.reads(a, step, i) // symmetric
///     }
///     fn class(&self, _: usize, step: i64) -> Option<u32> {
///         Some(u32::from(step > 0)) // the first step reads nothing; the others are alike
///     }
/// }
/// assert_eq!(Near(4).reads(0, 1, 3).collect::<Vec<_>>(), [2, 3]);
/// ```
pub unsafe trait Pattern: Sync {
    /// The items of `array` computed at `step` (the others are not written then).
    fn live(&self, array: usize, step: i64) -> Range<usize>;
    /// The items of `array` at `step - 1` that `item` reads at `step`: items live then (none
    /// at step 0, whose step before holds the arrays' first values).
    fn reads(&self, array: usize, step: i64, item: usize) -> impl Iterator<Item = usize> + '_;
    /// The items of `array` at `step` that read `item` of `step - 1`: the inverse of
    /// [`Pattern::reads`].
    fn readers(&self, array: usize, step: i64, item: usize) -> impl Iterator<Item = usize> + '_;
    /// An identifier of `step`'s shape in `array`: two steps with the same one have the same
    /// live items, reads and readers, so what a worker waits for, receives and sends is worked
    /// out once per shape. `None` (the default) works it out at every step.
    fn class(&self, array: usize, step: i64) -> Option<u32> {
        let _ = (array, step);
        None
    }
}

/// The block distribution of an array's items over the workers of a job, which both
/// executions of a [`Pattern`] use: worker `w` (of the job) owns `starts[w]..starts[w + 1]`,
/// and `owner[i]` is the worker of item `i`.
pub(super) struct Cut {
    pub(super) starts: Vec<usize>,
    pub(super) owner: Vec<u32>,
}

impl Cut {
    /// `n` items over `all` workers.
    ///
    /// # Panics
    /// If `all` is 0 or not below 2^32.
    pub(super) fn new(n: usize, all: usize) -> Cut {
        assert!(
            all > 0 && u32::try_from(all).is_ok(),
            "1 to 2^32 - 1 workers, not {all}"
        );
        let starts: Vec<usize> = (0..=all)
            .map(|w| (w as u128 * n as u128 / all as u128) as usize)
            .collect();
        let owner = (0..all)
            .flat_map(|w| std::iter::repeat_n(w as u32, starts[w + 1] - starts[w]))
            .collect();
        Cut { starts, owner }
    }

    /// The items of the job's workers `workers`.
    pub(super) fn block(&self, workers: Range<usize>) -> Range<usize> {
        self.starts[workers.start]..self.starts[workers.end]
    }
}
