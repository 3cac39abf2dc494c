//! What the subgraph test files share.

use tactor::{Event, Runtime, TaskFailed};

/// A runtime of `n` unpinned workers (tests run beside each other).
pub fn rt(n: usize) -> Runtime {
    Runtime::builder().workers(n).pin(false).build().unwrap()
}

/// Waits for `e` on another thread, failing instead of hanging if it never triggers.
pub fn wait_or_fail(e: &Event, what: &str) -> Result<(), TaskFailed> {
    let (tx, rx) = std::sync::mpsc::channel();
    let e = e.clone();
    std::thread::spawn(move || {
        let _ = tx.send(e.wait());
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what}: the event never triggered"))
}
