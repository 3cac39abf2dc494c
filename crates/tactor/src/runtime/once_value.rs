//! A value written at most once and read by any thread afterwards: the result a task keeps
//! for its future, or the value a promise sets.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};

/// What `std::sync::OnceLock` gives a task's result, for less: the one writer is known (the
/// thread that runs the task, or that consumes the promise), so setting is a write and a
/// release store, where `OnceLock::set` paid two read-modify-writes (and a look for waiters)
/// on every task.
pub(crate) struct OnceValue<T> {
    set: AtomicBool,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: as `OnceLock<T>`: a shared cell hands out `&T` to any thread (`T: Sync`) and takes
// its value from whichever thread sets it (`T: Send`).
unsafe impl<T: Send + Sync> Sync for OnceValue<T> {}
// SAFETY: moving the cell moves the value it may hold.
unsafe impl<T: Send> Send for OnceValue<T> {}

impl<T> OnceValue<T> {
    /// An empty cell.
    pub(crate) const fn new() -> Self {
        OnceValue {
            set: AtomicBool::new(false),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// A cell that holds `value`.
    pub(crate) fn with(value: T) -> Self {
        OnceValue {
            set: AtomicBool::new(true),
            value: UnsafeCell::new(MaybeUninit::new(value)),
        }
    }

    /// Stores `value`.
    ///
    /// # Safety
    /// Called at most once per cell, and never while another thread calls it: each caller
    /// is the one thread that runs a task (once) or the owner of a promise (consumed).
    pub(crate) unsafe fn set(&self, value: T) {
        debug_assert!(!self.set.load(Ordering::Relaxed), "a value is set once");
        // SAFETY: the contract: no other writer, and no reader looks before `set` is true.
        unsafe { (*self.value.get()).write(value) };
        // Release: a reader that sees `true` (acquire) sees the value.
        self.set.store(true, Ordering::Release);
    }

    /// The value, if it was set.
    pub(crate) fn get(&self) -> Option<&T> {
        // SAFETY: `set` is true only once the value was written (release/acquire), and the
        // value is never written again nor moved while the cell is shared.
        (self.set.load(Ordering::Acquire)).then(|| unsafe { (*self.value.get()).assume_init_ref() })
    }
}

impl<T> Drop for OnceValue<T> {
    fn drop(&mut self) {
        if *self.set.get_mut() {
            // SAFETY: set, so initialised; dropped once, here.
            unsafe { self.value.get_mut().assume_init_drop() };
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for OnceValue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.get() {
            Some(v) => f.debug_tuple("OnceValue").field(v).finish(),
            None => f.write_str("OnceValue(<not set>)"),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A value set on one thread is seen whole on another, and dropped once with the cell.
    #[test]
    fn a_value_set_on_one_thread_is_read_on_another_and_dropped_once() {
        let drops = Arc::new(());
        let cell = Arc::new(OnceValue::new());
        assert!(cell.get().is_none());
        let (c, d) = (cell.clone(), drops.clone());
        // SAFETY: the one call of `set` for this cell.
        std::thread::spawn(move || unsafe { c.set((7u64, d)) })
            .join()
            .unwrap();
        assert_eq!(cell.get().map(|v| v.0), Some(7));
        assert_eq!(Arc::strong_count(&drops), 2);
        drop(cell);
        assert_eq!(
            Arc::strong_count(&drops),
            1,
            "the value dropped with its cell"
        );
        let unset = OnceValue::<Arc<()>>::new();
        drop(unset);
        assert_eq!(Arc::strong_count(&drops), 1);
    }
}
