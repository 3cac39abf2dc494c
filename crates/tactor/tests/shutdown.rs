//! Dropping a runtime never hangs: not on a task suspended on an event nobody triggers, not
//! when the drop happens inside one of the runtime's own tasks.

use std::sync::mpsc;
use std::time::{Duration, Instant};
use tactor::{Failure, Placement, Runtime, UserEvent};

// The shared helpers; this file uses `rt` alone.
#[allow(dead_code)]
mod common;
use common::rt;

/// Drops `rt` on another thread and fails (instead of hanging the test run) if that takes
/// longer than `limit`.
fn drop_within(rt: Runtime, limit: Duration) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        tx.send(()).unwrap();
    });
    let t = Instant::now();
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("dropping the runtime hung for {:?}", t.elapsed()));
}

#[test]
fn a_wait_nobody_can_end_is_given_up_at_drop_with_an_error() {
    for workers in [1, 2] {
        let rt = rt(workers);
        let never = UserEvent::new();
        let (tx, rx) = mpsc::channel();
        let (started_tx, started) = mpsc::channel();
        let started_tx2 = started_tx.clone();
        let e = never.event();
        rt.launch(Placement::Worker(0), &[], move || {
            started_tx.send(()).unwrap();
            tx.send(e.wait()).unwrap();
        });
        // A second waiter on another worker (or the same one), behind the first.
        let (tx2, rx2) = mpsc::channel();
        let e2 = never.event();
        let started_tx2 = started_tx2.clone();
        rt.launch(Placement::Worker(workers - 1), &[], move || {
            started_tx2.send(()).unwrap();
            tx2.send(e2.wait()).unwrap();
        });
        started.recv().unwrap();
        started.recv().unwrap();
        drop_within(rt, Duration::from_secs(10));
        for rx in [rx, rx2] {
            let err = rx
                .recv_timeout(Duration::from_secs(1))
                .unwrap()
                .unwrap_err();
            assert_eq!(*err.failure(), Failure::Abandoned);
            assert!(err.to_string().contains("shut down"), "{err}");
        }
        // The event itself is untouched: its owner may still trigger it.
        never.trigger().unwrap();
    }
}

#[test]
fn a_wait_that_another_task_ends_is_not_given_up() {
    let rt = rt(2);
    let gate = UserEvent::new();
    let (tx, rx) = mpsc::channel();
    let e = gate.event();
    rt.launch(Placement::Worker(0), &[], move || {
        tx.send(e.wait()).unwrap()
    });
    // Triggered by a task that runs past the grace period while the runtime is dropped.
    rt.launch(Placement::Worker(1), &[], move || {
        std::thread::sleep(tactor::ABANDON_AFTER * 3);
        gate.trigger().unwrap();
    });
    std::thread::sleep(Duration::from_millis(20));
    drop_within(rt, Duration::from_secs(10));
    assert!(rx.recv().unwrap().is_ok());
}

#[test]
fn a_runtime_dropped_by_its_own_task_shuts_down_without_waiting_for_it() {
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let (rt_tx, rt_rx) = mpsc::channel::<Runtime>();
    let handle = rt.handle();
    rt_tx.send(rt).unwrap();
    let done = handle.launch(Placement::Worker(1), &[], move || {
        let rt = rt_rx.recv().unwrap();
        drop(rt);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the task that dropped its runtime went on");
    // Its own event still triggers: the task ended normally.
    assert!(done.wait().is_ok());
}
