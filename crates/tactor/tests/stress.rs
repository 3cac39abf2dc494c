//! Random DAGs with random placements, millions of tasks in all: every task must run exactly
//! once and only after all its predecessors. Run also with workers that park at once (no
//! spinning), which exercises the sleep/wake protocol on nearly every hand-off: a lost
//! wake-up shows up as a hang, caught by the watchdog.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::mpsc;
use std::time::Duration;
use tactor::{Event, Placement, Runtime, UserEvent};

/// Runs `f` on another thread and fails the test if it takes longer than `limit`.
fn watchdog(what: &str, limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => t.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            t.join().unwrap(); // re-raises the panic
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no progress in {limit:?} (hang)"),
    }
}

struct Dag {
    preds: Vec<Vec<usize>>,
    placement: Vec<Placement>,
    /// Tasks whose launch is deferred into a predecessor-free "launcher" task (nested launch).
    gate: Vec<bool>,
}

fn random_dag(rng: &mut StdRng, n: usize, workers: usize) -> Dag {
    let preds = (0..n)
        .map(|i| {
            let k = if i == 0 {
                0
            } else {
                rng.gen_range(0..=4.min(i))
            };
            let mut p: Vec<usize> = (0..k)
                .map(|_| i - 1 - rng.gen_range(0..i.min(64)))
                .collect();
            p.sort_unstable();
            p.dedup();
            p
        })
        .collect();
    let placement = (0..n)
        .map(|_| match rng.gen_range(0..=workers) {
            0 => Placement::Any,
            w => Placement::Worker(w - 1),
        })
        .collect();
    let gate = (0..n).map(|_| rng.gen_bool(0.05)).collect();
    Dag {
        preds,
        placement,
        gate,
    }
}

/// Launches `dag` behind a user event, triggers it, waits, and checks exactly-once order.
fn run_dag(rt: &Runtime, dag: &Dag) {
    let n = dag.preds.len();
    let runs: Vec<AtomicU32> = (0..n).map(|_| AtomicU32::new(0)).collect();
    let start = UserEvent::new();
    rt.scope(|s| {
        let mut events: Vec<Event> = Vec::with_capacity(n);
        for i in 0..n {
            let mut pre: Vec<Event> = dag.preds[i].iter().map(|&p| events[p].clone()).collect();
            if i % 97 == 0 {
                pre.push(start.event());
            }
            if pre.len() > 2 && i % 3 == 0 {
                pre = vec![Event::merge(&pre)];
            }
            let runs = &runs;
            let preds = &dag.preds[i];
            let body = move |_: &tactor::Scope<'_>| {
                for &p in preds {
                    assert_eq!(
                        runs[p].load(SeqCst),
                        1,
                        "task {i} ran before predecessor {p}"
                    );
                }
                assert_eq!(runs[i].fetch_add(1, SeqCst), 0, "task {i} ran twice");
            };
            let ev = if dag.gate[i] {
                // Launched from inside another task: the event comes back through a user event.
                let relay = UserEvent::new();
                let out = relay.event();
                let place = dag.placement[i];
                s.launch(Placement::Any, &[], move |s| {
                    let inner = s.launch(place, &pre, body);
                    s.launch(Placement::Any, &[inner], move |_| relay.trigger().unwrap());
                });
                out
            } else {
                s.launch(dag.placement[i], &pre, body)
            };
            events.push(ev);
        }
        start.trigger().unwrap();
    })
    .unwrap();
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.load(SeqCst), 1, "task {i} ran {} times", r.load(SeqCst));
    }
}

fn stress(workers: usize, spin: Duration, dags: usize, tasks: usize, seed: u64) {
    watchdog(
        &format!("{workers} workers, spin {spin:?}"),
        Duration::from_secs(120),
        move || {
            let rt = Runtime::builder()
                .workers(workers)
                .pin(false)
                .spin(spin)
                .build()
                .unwrap();
            let mut rng = StdRng::seed_from_u64(seed);
            for _ in 0..dags {
                let dag = random_dag(&mut rng, tasks, workers);
                run_dag(&rt, &dag);
            }
        },
    );
}

#[test]
fn random_dags_two_spinning_workers() {
    stress(2, Duration::from_micros(100), 10, 120_000, 1);
}

#[test]
fn random_dags_one_worker() {
    stress(1, Duration::from_micros(100), 4, 60_000, 2);
}

#[test]
fn random_dags_workers_that_park_at_once() {
    stress(3, Duration::ZERO, 6, 60_000, 3);
}

#[test]
fn ping_pong_between_parked_workers_loses_no_wake_up() {
    watchdog("ping-pong", Duration::from_secs(60), || {
        let rt = Runtime::builder()
            .workers(2)
            .pin(false)
            .spin(Duration::ZERO)
            .build()
            .unwrap();
        let mut prev = Event::triggered();
        for i in 0..20_000 {
            prev = rt.launch(Placement::Worker(i % 2), &[prev], || ());
            if i % 1000 == 0 {
                prev.wait().unwrap();
            }
        }
        prev.wait().unwrap();
    });
}
