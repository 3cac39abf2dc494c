//! A task that waits inside a worker is suspended and its worker goes on, so a wait never
//! deadlocks on work that needs a task suspended beneath it (the classic failure of
//! help-first waiting, where the waiter runs other tasks on its own stack).
//!
//! Not under Miri: suspension switches stacks with inline assembly, which Miri cannot run;
//! there the runtime falls back to help-first waiting.
#![cfg(not(miri))]

use std::sync::mpsc;
use std::time::Duration;
use tactor::{Event, Placement, Runtime, SubgraphBuilder, UserEvent};

fn rt(n: usize) -> Runtime {
    Runtime::builder().workers(n).pin(false).build().unwrap()
}

/// Waits for `e` from another thread, failing the test instead of hanging it (a deadlocked
/// runtime is leaked: joining its workers would hang too).
fn finishes(rt: &mut Option<Runtime>, e: Event, what: &str) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(e.wait().is_ok()).unwrap());
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(ok) => assert!(ok, "{what}: poisoned"),
        Err(_) => {
            std::mem::forget(rt.take());
            panic!("{what}: deadlocked");
        }
    }
}

/// X waits for a trigger that a later task T gives; A, queued between them, waits for X.
/// Help-first waiting runs A on X's stack, A then waits for X forever.
#[test]
fn a_wait_on_a_task_suspended_beneath_does_not_deadlock() {
    let mut keep = Some(rt(1));
    let rt = keep.as_ref().unwrap();
    let gate = UserEvent::new();
    let g = gate.event();
    let x = rt.launch(Placement::Worker(0), &[], move || g.wait().unwrap());
    let xe = x.clone();
    let a = rt.launch(Placement::Worker(0), &[], move || xe.wait().unwrap());
    let _t = rt.launch(Placement::Worker(0), &[], move || gate.trigger().unwrap());
    finishes(&mut keep, a, "A");
    finishes(&mut keep, x, "X");
}

/// Deep nesting: each task waits for the one launched before it, and the first waits for a
/// trigger given by the last; all on one worker.
#[test]
fn a_chain_of_waits_in_reverse_order_finishes() {
    let mut keep = Some(rt(1));
    let rt = keep.as_ref().unwrap();
    let gate = UserEvent::new();
    let mut prev = gate.event();
    let mut all = Vec::new();
    for _ in 0..50 {
        let p = prev.clone();
        let e = rt.launch(Placement::Worker(0), &[], move || p.wait().unwrap());
        all.push(e.clone());
        prev = e;
    }
    let _t = rt.launch(Placement::Worker(0), &[], move || gate.trigger().unwrap());
    finishes(&mut keep, Event::merge(&all), "chain");
}

/// The same inside a compiled subgraph: vertex X waits for a trigger that a task queued
/// behind the instance gives, and vertex A (same worker, no edge) waits for a task that
/// waits for X's instance to finish.
#[test]
fn a_compiled_vertex_that_waits_does_not_deadlock_its_worker() {
    let mut keep = Some(rt(1));
    let rt = keep.as_ref().unwrap();
    let gate = UserEvent::new();
    let g = gate.event();
    let mut b = SubgraphBuilder::<()>::new();
    let x = b.task(0, move |_| g.wait().unwrap());
    let y = b.task(0, |_| ());
    b.edge(x, y);
    let graph = b.compile(rt).unwrap();
    let inst = graph.instantiate((), &[]);
    let done = inst.completion.clone();
    let waiter = rt.launch(Placement::Worker(0), &[], move || done.wait().unwrap());
    let _t = rt.launch(Placement::Worker(0), &[], move || gate.trigger().unwrap());
    finishes(&mut keep, waiter, "waiter");
    finishes(&mut keep, inst.completion, "instance");
}

/// Waits inside tasks while other workers are busy: nothing is lost when many tasks suspend
/// and resume across two workers.
#[test]
fn many_suspended_tasks_all_resume() {
    let mut keep = Some(rt(2));
    let rt = keep.as_ref().unwrap();
    let gates: Vec<UserEvent> = (0..200).map(|_| UserEvent::new()).collect();
    let mut waiters = Vec::new();
    for (i, g) in gates.iter().enumerate() {
        let e = g.event();
        waiters.push(rt.launch(Placement::Worker(i % 2), &[], move || e.wait().unwrap()));
    }
    for (i, g) in gates.into_iter().enumerate().rev() {
        rt.launch(Placement::Worker((i + 1) % 2), &[], move || {
            g.trigger().unwrap()
        });
    }
    finishes(&mut keep, Event::merge(&waiters), "waiters");
}
