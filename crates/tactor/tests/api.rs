//! The task API's contract: ordering by preconditions, placement, user events, merges,
//! waiting inside and outside tasks, and poisoning.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tactor::{Cause, Event, Failure, Placement, Runtime, UserEvent};

fn rt(n: usize) -> Runtime {
    Runtime::builder().workers(n).pin(false).build().unwrap()
}

#[test]
fn a_task_runs_after_its_preconditions_and_on_its_worker() {
    let rt = rt(3);
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut prev = Vec::new();
    // Under Miri (which interprets the runtime's unsafe code) fewer steps.
    let steps = if cfg!(miri) { 12 } else { 50 };
    for step in 0..steps {
        let mut cur = Vec::new();
        for w in 0..3 {
            let log = log.clone();
            cur.push(rt.launch(Placement::Worker(w), &prev, move || {
                let name = std::thread::current().name().unwrap().to_string();
                assert_eq!(name, format!("tactor-worker-{w}"));
                log.lock().unwrap().push(step);
            }));
        }
        prev = cur;
    }
    Event::merge(&prev).wait().unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 3 * steps);
    assert!(
        log.windows(2).all(|p| p[0] <= p[1]),
        "steps interleaved: {log:?}"
    );
}

/// Launches a task counting its runs in `ran` after `pre`, which `go` holds back; checks it
/// has not run, triggers `go` and checks it ran once. Returns the task's event.
fn held_until(rt: &Runtime, go: &UserEvent, pre: &[Event], ran: &Arc<AtomicUsize>) -> Event {
    let r = ran.clone();
    let t = rt.launch(Placement::Any, pre, move || {
        r.fetch_add(1, SeqCst);
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(ran.load(SeqCst), 0);
    assert!(!t.has_triggered());
    go.trigger().unwrap();
    t.wait().unwrap();
    assert_eq!(ran.load(SeqCst), 1);
    t
}

#[test]
fn user_events_hold_tasks_until_triggered_and_trigger_only_once() {
    let rt = rt(2);
    let go = UserEvent::new();
    let ran = Arc::new(AtomicUsize::new(0));
    let t = held_until(&rt, &go, &[go.event()], &ran);
    assert_eq!(go.trigger(), Err(tactor::AlreadyTriggered));
    assert_eq!(go.poison("late"), Err(tactor::AlreadyTriggered));
    assert_eq!(t.try_outcome(), Some(Ok(())));
}

#[test]
fn a_precondition_named_twice_or_already_triggered_is_waited_for_once() {
    // A launch subscribes once per distinct pending precondition and counts only those: a
    // miscount would run the task early (before `go`) or never (this test would hang).
    let rt = rt(2);
    let go = UserEvent::new();
    let ran = Arc::new(AtomicUsize::new(0));
    let done = Event::triggered();
    let pre = [go.event(), done.clone(), go.event(), done, go.event()];
    held_until(&rt, &go, &pre, &ran);

    // A poisoned precondition is never skipped as "triggered", however often it is named.
    let bad = UserEvent::new();
    bad.poison("broken input").unwrap();
    let r = ran.clone();
    let t = rt.launch(
        Placement::Any,
        &[bad.event(), Event::triggered(), bad.event()],
        move || {
            r.fetch_add(1, SeqCst);
        },
    );
    let err = t.wait().unwrap_err();
    assert!(err.to_string().contains("broken input"), "{err}");
    assert_eq!(ran.load(SeqCst), 1, "a poisoned task does not run");
}

#[test]
fn merge_of_nothing_or_triggered_events_is_triggered() {
    assert!(Event::merge(&[]).has_triggered());
    let e = Event::merge(&[Event::triggered(), Event::triggered()]);
    assert_eq!(e.try_outcome(), Some(Ok(())));
    let u = UserEvent::new();
    let one = Event::merge(&[Event::triggered(), u.event()]);
    assert!(
        one.ptr_eq(&u.event()),
        "a single pending event is returned as is"
    );
}

#[test]
fn merge_waits_for_all_and_carries_the_first_failure() {
    let (a, b, c) = (UserEvent::new(), UserEvent::new(), UserEvent::new());
    let m = Event::merge(&[a.event(), b.event(), c.event()]);
    a.trigger().unwrap();
    b.poison("b broke").unwrap();
    assert!(!m.has_triggered(), "c is still pending");
    c.poison("c broke").unwrap();
    let err = m.wait().unwrap_err();
    assert_eq!(*err.failure(), Failure::Poisoned("b broke".into()));
}

#[test]
fn a_panic_poisons_every_dependent_and_names_the_task() {
    let rt = rt(2);
    let ran = Arc::new(AtomicUsize::new(0));
    let bad = rt.launch_named("divider", Placement::Any, &[], || panic!("divided by zero"));
    let r = ran.clone();
    let child = rt.launch(Placement::Any, std::slice::from_ref(&bad), move || {
        r.fetch_add(1, SeqCst);
    });
    let r = ran.clone();
    let grandchild = rt.launch(
        Placement::Worker(1),
        &[child, Event::triggered()],
        move || {
            r.fetch_add(1, SeqCst);
        },
    );
    let err = grandchild.wait().unwrap_err();
    assert_eq!(
        ran.load(SeqCst),
        0,
        "dependents of a failed task must not run"
    );
    match err.failure() {
        Failure::Task { task, cause } => {
            assert_eq!(task.name.as_deref(), Some("divider"));
            assert_eq!(*cause, Cause::Panicked("divided by zero".into()));
            assert!(task.launched_at.file().ends_with("api.rs"));
        }
        other => panic!("wrong failure {other:?}"),
    }
    assert!(err.to_string().contains("task 'divider'"), "{err}");
    assert!(bad.wait().is_err());
    // The runtime stays usable.
    rt.launch(Placement::Any, &[], || ()).wait().unwrap();
}

#[test]
fn dropping_an_untriggered_user_event_poisons_it() {
    let rt = rt(1);
    let u = UserEvent::new();
    let t = rt.launch(Placement::Any, &[u.event()], || ());
    let u2 = u.clone();
    drop(u);
    assert!(!t.has_triggered(), "a clone still holds the event");
    drop(u2);
    assert_eq!(*t.wait().unwrap_err().failure(), Failure::UserEventDropped);
}

#[test]
fn tasks_launch_tasks_and_wait_inside_without_losing_the_worker() {
    // One worker: a task that blocked its thread while waiting for a task queued behind it
    // would deadlock; `wait` on a worker runs other work instead.
    let rt = rt(1);
    let h = rt.handle();
    let out = rt.launch(Placement::Any, &[], move || {
        let inner = h.launch(Placement::Worker(0), &[], || ());
        inner.wait().unwrap();
        let nested = h.launch(Placement::Any, &[inner], || ());
        nested.wait().unwrap();
    });
    out.wait().unwrap();
}

#[test]
fn continuation_launched_from_inside_a_task() {
    let rt = rt(2);
    let h = rt.handle();
    let (tx, rx) = std::sync::mpsc::channel();
    let first = rt.launch(Placement::Worker(0), &[], || ());
    let f2 = first.clone();
    rt.launch(Placement::Worker(1), &[], move || {
        // Not blocking: the continuation runs whenever `first` completes.
        h.launch(Placement::Any, &[f2], move || tx.send(7).unwrap());
    });
    assert_eq!(rx.recv().unwrap(), 7);
}

#[test]
fn scope_tasks_borrow_and_report_the_first_failure() {
    let rt = rt(2);
    let mut cells = vec![0u64; if cfg!(miri) { 16 } else { 64 }];
    let res = rt.scope(|s| {
        for (i, c) in cells.iter_mut().enumerate() {
            s.launch(Placement::Any, &[], move |s| {
                *c = i as u64;
                s.launch(Placement::Any, &[], |_| ());
            });
        }
    });
    res.unwrap();
    assert!(cells.iter().enumerate().all(|(i, &c)| c == i as u64));
    let err = rt
        .scope(|s| {
            s.launch_named("bad", Placement::Any, &[], |_| panic!("scoped panic"));
        })
        .unwrap_err();
    assert!(err.to_string().contains("scoped panic"), "{err}");
}

/// `Scope::dataflow`: a chain of tasks that borrow a counter from the caller's stack; the
/// scope returns once all ran (every future set, the count complete), a failed task's
/// dependents do not run, and the scope reports the root cause.
#[test]
fn scoped_dataflow_tasks_borrow_are_waited_for_and_fail_as_a_scope() {
    use tactor::Future;
    let rt = rt(2);
    let ran = AtomicUsize::new(0);
    let n = if cfg!(miri) { 12 } else { 500 };
    let mut chain = vec![Future::ready(1u64)];
    rt.scope(|s| {
        for i in 1..n {
            let (ran, ins) = (&ran, [chain[i - 1].clone(), chain[i / 2].clone()]);
            chain.push(s.dataflow(Placement::Any, ins, move |v| {
                ran.fetch_add(1, SeqCst);
                v.get(0) + v.get(1)
            }));
        }
    })
    .unwrap();
    assert_eq!(ran.load(SeqCst), n - 1);
    let mut want = vec![1u64];
    for i in 1..n {
        want.push(want[i - 1].wrapping_add(want[i / 2]));
    }
    // Set, not waited for: the scope waited.
    let got: Vec<u64> = chain
        .iter()
        .map(|f| *f.try_get().unwrap().unwrap())
        .collect();
    assert_eq!(got, want);
    let after_bad = AtomicUsize::new(0);
    let err = rt
        .scope(|s| {
            let bad = s.dataflow(Placement::Any, [Future::ready(0u8)], |_| -> u8 {
                tactor::fail("a bad value")
            });
            s.dataflow(Placement::Any, [bad], |_| after_bad.fetch_add(1, SeqCst));
        })
        .unwrap_err();
    assert!(err.to_string().contains("a bad value"), "{err}");
    assert_eq!(after_bad.load(SeqCst), 0);
}

#[test]
fn on_each_worker_runs_once_per_worker_and_reports_a_panic() {
    let rt = rt(3);
    // Called from inside a task too: the calling task waits suspended, so its worker is
    // free to run its own share.
    let from_task = rt.handle();
    let got = rt
        .spawn(Placement::Worker(1), &[], move || {
            from_task.on_each_worker(|w| (w, tactor::current_worker()))
        })
        .get()
        .unwrap()
        .clone()
        .unwrap();
    assert_eq!(got, [(0, Some(0)), (1, Some(1)), (2, Some(2))]);
    let err = rt
        .on_each_worker(|w| assert_ne!(w, 2, "worker two refuses"))
        .unwrap_err();
    assert!(err.to_string().contains("worker two refuses"), "{err}");
}

#[test]
fn dropping_the_runtime_cancels_queued_work_and_poisons_it() {
    let rt = rt(1);
    let gate = UserEvent::new();
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let g = gate.event();
    let blocker = rt.launch(Placement::Worker(0), &[], move || {
        s.fetch_add(1, SeqCst);
        // Hold the only worker until the runtime is being dropped.
        while !g.has_triggered() {
            std::hint::spin_loop();
        }
    });
    let queued: Vec<Event> = (0..if cfg!(miri) { 20 } else { 100 })
        .map(|_| rt.launch(Placement::Any, &[], || panic!("must not run")))
        .collect();
    let waiting = rt.launch(Placement::Any, &[UserEvent::new().event()], || ());
    while started.load(SeqCst) == 0 {
        std::hint::spin_loop();
    }
    let h = rt.handle();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        gate.trigger().unwrap();
    });
    drop(rt);
    releaser.join().unwrap();
    blocker.wait().unwrap();
    for q in &queued {
        match q.wait().unwrap_err().failure() {
            Failure::Task { cause, .. } => assert_eq!(*cause, Cause::Cancelled),
            other => panic!("{other:?}"),
        }
    }
    assert!(
        waiting.wait().is_err(),
        "a dropped user event poisons its task"
    );
    let late = h.launch(Placement::Any, &[], || ());
    assert!(late.wait().is_err(), "launching after shutdown cancels");
}

#[test]
#[should_panic(expected = "Placement::Worker(5) but the runtime has 2 workers")]
fn placing_on_a_missing_worker_is_a_clear_panic() {
    rt(2).launch(Placement::Worker(5), &[], || ());
}

#[test]
fn zero_workers_is_an_error() {
    let err = Runtime::builder().workers(0).build().err().unwrap();
    assert!(err.to_string().contains("got 0"));
}

/// A value whose `Drop` panics (and whose panic payload panics again when dropped).
struct Bomb;

struct BombPayload;

impl Drop for BombPayload {
    fn drop(&mut self) {
        panic!("the payload's drop panics too");
    }
}

impl Drop for Bomb {
    fn drop(&mut self) {
        std::panic::panic_any(BombPayload);
    }
}

#[test]
fn a_panicking_drop_of_an_abandoned_task_poisons_and_the_worker_lives() {
    let rt = rt(1);
    let gate = UserEvent::new();
    let bomb = Bomb;
    let abandoned = rt.launch(Placement::Worker(0), &[gate.event()], move || {
        let _keep = &bomb;
    });
    // Poisoned from inside a task, so the abandoned closure is dropped on the worker.
    let trigger = rt.launch(Placement::Worker(0), &[], move || {
        gate.poison("upstream failed").unwrap();
    });
    trigger.wait().unwrap();
    assert!(abandoned.wait().is_err());
    // The worker still runs tasks.
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    rt.launch(Placement::Worker(0), &[], move || {
        r.fetch_add(1, SeqCst);
    })
    .wait()
    .unwrap();
    assert_eq!(ran.load(SeqCst), 1);
}

#[test]
fn a_panic_payload_whose_drop_panics_poisons_and_the_worker_lives() {
    let rt = rt(1);
    let e = rt.launch(Placement::Worker(0), &[], || {
        std::panic::panic_any(BombPayload)
    });
    let err = e.wait().unwrap_err();
    assert!(
        matches!(
            err.failure(),
            Failure::Task {
                cause: Cause::Panicked(_),
                ..
            }
        ),
        "{err}"
    );
    rt.launch(Placement::Worker(0), &[], || {}).wait().unwrap();
}

/// `tactor::fail` ends a task as failed with its reason, not a panic: in a task launched
/// directly and in a traced program's replay (a compiled instance), its dependents do not run
/// and whoever waits learns the reason.
#[test]
fn a_task_that_fails_poisons_its_dependents_with_its_reason() {
    use tactor::implicit::{read_write, Program};
    let reason = |e: &tactor::TaskFailed| match e.failure() {
        Failure::Task { cause, .. } => cause.clone(),
        other => panic!("wrong failure {other:?}"),
    };
    let rt = Runtime::new(2).unwrap();
    let bad = rt.launch(Placement::Any, &[], || tactor::fail("no input"));
    let after = rt.launch(Placement::Any, &[bad], || {
        unreachable!("after a failed task")
    });
    let e = after.wait().unwrap_err();
    assert_eq!(reason(&e), Cause::Failed("no input".into()));
    assert!(e.to_string().contains("failed: no input"), "{e}");
    let mut p = Program::new(&rt);
    let x = p.region(0u64);
    for k in 0..3u64 {
        p.begin_trace(1).unwrap();
        p.launch(Placement::Any, read_write(&x), move |x| {
            if k == 2 {
                tactor::fail(format!("round {k}"));
            }
            *x += 1
        });
        p.launch(Placement::Any, read_write(&x), |x| *x += 10);
        let done = p.end_trace().unwrap().wait();
        match k {
            2 => assert_eq!(reason(&done.unwrap_err()), Cause::Failed("round 2".into())),
            _ => done.unwrap(),
        }
    }
}
