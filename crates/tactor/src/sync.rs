//! The synchronisation primitives the lock-free parts of the runtime are written against: the
//! standard library's normally, loom's under `--cfg loom` so the model checker can explore every
//! interleaving of events, countdowns and the sleep protocol (see `loom_tests.rs`). Reference
//! counts stay `std::sync::Arc`: loom's `Arc` cannot hold trait objects, and the counts are not
//! what the models check.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(loom)]
pub(crate) use loom::sync::Mutex;
#[cfg(loom)]
pub(crate) use loom::thread::{current, park, Thread};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
#[cfg(not(loom))]
pub(crate) use std::sync::Mutex;
#[cfg(not(loom))]
pub(crate) use std::thread::{current, park, Thread};

/// Locks `m`, ignoring poisoning: the data behind the runtime's mutexes stays consistent even
/// if a holder panicked (they only store or take a value).
#[cfg(not(loom))]
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(loom)]
pub(crate) fn lock<T>(m: &Mutex<T>) -> loom::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
