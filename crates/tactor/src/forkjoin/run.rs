//! Entering the runtime from outside: run a closure on a worker and wait for its value.

use crate::runtime::{worker_of, Handle, Placement};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

impl Handle {
    /// Runs `f` on one of the runtime's workers and returns its value, blocking the calling
    /// thread meanwhile (rayon's `install`): the way into [`join`](crate::join) and
    /// [`for_each`](crate::for_each) from `main`. `f` may borrow from the caller. Called from
    /// one of this runtime's own workers, it runs `f` in place. A panic of `f` is resumed
    /// here.
    ///
    /// # Panics
    /// If the runtime shut down before `f` could run.
    ///
    /// ```
    /// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
    /// let v: Vec<u64> = (0..100).collect();
    /// let total = rt.run(|| {
    ///     let (a, b) = v.split_at(50);
    ///     let (x, y) = tactor::join(|| a.iter().sum::<u64>(), || b.iter().sum::<u64>());
    ///     x + y
    /// });
    /// assert_eq!(total, 4950);
    /// ```
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if worker_of(self).is_some() {
            return f();
        }
        let mut out = None;
        let ran = self.scope(|s| {
            s.launch(Placement::Any, &[], |_| {
                out = Some(catch_unwind(AssertUnwindSafe(f)));
            });
        });
        match (out, ran) {
            (Some(Ok(r)), _) => r,
            (Some(Err(panic)), _) => resume_unwind(panic),
            (None, Err(e)) => panic!("Handle::run: {e}"),
            (None, Ok(())) => unreachable!("a scope's task that did not fail ran"),
        }
    }
}
