//! Data entering an implicit program from outside: `Program::launch_after` (a task that also
//! waits for an outside event, as a message from another rank) and lists of writes.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tactor::implicit::{read, read_write, write, Program, Write};
use tactor::{Event, Placement, Runtime, UserEvent};

fn runtime() -> Runtime {
    Runtime::builder().workers(2).pin(false).build().unwrap()
}

/// The task waits for the event and for the program's earlier conflicting launches (a reader
/// of the old value keeps it), and later launches wait for it.
#[test]
fn a_launch_after_an_event_is_ordered_among_the_programs_launches() {
    let rt = runtime();
    let rounds = if cfg!(miri) { 3 } else { 20 };
    for round in 0..rounds {
        let mut p = Program::new(&rt);
        let x = p.region(1u64);
        let seen = p.region(0u64);
        let later = p.region(0u64);
        let arrived = UserEvent::new();
        p.launch(Placement::Any, (read(&x), write(&seen)), |(x, s)| *s = *x);
        p.launch_after(&arrived.event(), Placement::Any, write(&x), move |x| {
            *x = 10 + round
        });
        p.launch(Placement::Any, (read(&x), write(&later)), |(x, l)| *l = *x);
        if round % 2 == 0 {
            std::thread::yield_now();
        }
        arrived.trigger().unwrap();
        assert_eq!(p.with(&seen, |s| *s).unwrap(), 1, "the reader before it");
        assert_eq!(
            p.with(&later, |l| *l).unwrap(),
            10 + round,
            "the reader after"
        );
    }
}

/// Until the event triggers, the task does not run, whatever else is ready.
#[test]
fn nothing_waits_on_the_event_but_the_task_and_what_depends_on_it() {
    let rt = runtime();
    let mut p = Program::new(&rt);
    let a = p.region(0u64);
    let b = p.region(0u64);
    let ran = Arc::new(AtomicU64::new(0));
    let arrived = UserEvent::new();
    let r = ran.clone();
    p.launch_after(&arrived.event(), Placement::Any, write(&a), move |a| {
        r.fetch_add(1, Relaxed);
        *a = 7;
    });
    p.launch(Placement::Any, read_write(&b), |b| *b += 1);
    assert_eq!(p.with(&b, |b| *b).unwrap(), 1, "independent work ran");
    assert_eq!(ran.load(Relaxed), 0, "the task waits for its event");
    arrived.trigger().unwrap();
    assert_eq!(p.with(&a, |a| *a).unwrap(), 7);
    assert_eq!(ran.load(Relaxed), 1);
}

#[test]
fn a_poisoned_event_poisons_the_task_and_its_readers() {
    let rt = runtime();
    let mut p = Program::new(&rt);
    let a = p.region(0u64);
    let b = p.region(0u64);
    let arrived = UserEvent::new();
    p.launch_after(&arrived.event(), Placement::Any, write(&a), |a| *a = 1);
    p.launch(Placement::Any, (read(&a), write(&b)), |(a, b)| *b = *a);
    let _ = arrived.poison("rank 1 failed");
    let err = p.with(&b, |b| *b).unwrap_err();
    assert!(err.to_string().contains("rank 1 failed"), "{err}");
}

/// Inside a trace each execution waits for its own outside event: recorded once, replayed
/// with the events of later executions (none of which runs before its event).
#[test]
fn inside_a_trace_each_execution_waits_for_its_own_outside_event() {
    let rt = runtime();
    let mut p = Program::new(&rt);
    let x = p.region(0u64);
    let y = p.region(0u64);
    let ran = Arc::new(AtomicU64::new(0));
    let events: Vec<UserEvent> = (0..4).map(|_| UserEvent::new()).collect();
    for (i, e) in events.iter().enumerate() {
        let r = ran.clone();
        p.trace(7, |p| {
            p.launch_after(&e.event(), Placement::Any, write(&x), move |x| {
                r.fetch_add(1, Relaxed);
                *x = 10 * i as u64;
            });
            p.launch(Placement::Any, (read(&x), write(&y)), |(x, y)| *y = *x + 1);
        })
        .unwrap();
    }
    assert_eq!(
        p.recorded_traces(),
        1,
        "recorded once, replayed three times"
    );
    assert_eq!(ran.load(Relaxed), 0, "no execution runs before its event");
    events[0].trigger().unwrap();
    while ran.load(Relaxed) == 0 {
        std::thread::yield_now();
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        ran.load(Relaxed),
        1,
        "the second execution waits for the second event"
    );
    for e in &events[1..] {
        e.trigger().unwrap();
    }
    assert_eq!(p.with(&y, |y| *y).unwrap(), 31);
    assert_eq!(ran.load(Relaxed), 4);
}

/// An outside event that triggered, or failed, before the replay that waits for it ended
/// reaches the replay's instance all the same (its precondition is opened at once), a failure
/// with its reason.
#[test]
fn a_replay_takes_an_outside_event_that_already_triggered_or_failed() {
    let rt = runtime();
    let mut p = Program::new(&rt);
    let x = p.region(0u64);
    let y = p.region(0u64);
    for i in 0..3u64 {
        let e = UserEvent::new();
        match i {
            2 => e.poison("no copy came").unwrap(),
            _ => e.trigger().unwrap(),
        }
        p.trace(7, |p| {
            p.launch_after(&e.event(), Placement::Any, write(&x), move |x| *x = 10 * i);
            p.launch(Placement::Any, (read(&x), write(&y)), |(x, y)| *y = *x + 1);
        })
        .unwrap();
        let got = p.with(&y, |y| *y);
        if i == 2 {
            let why = got.unwrap_err().to_string();
            assert!(why.contains("no copy came"), "{why}");
        } else {
            assert_eq!(got.unwrap(), 10 * i + 1, "execution {i}");
        }
    }
    assert_eq!(p.recorded_traces(), 1);
}

/// A replay that launches without the outside event the recording waited for differs.
#[test]
fn a_replay_without_the_recorded_outside_event_is_refused() {
    let rt = runtime();
    let mut p = Program::new(&rt);
    let x = p.region(0u64);
    let task = |x: &mut u64| *x += 1;
    p.trace(3, |p| {
        p.launch_after(&Event::triggered(), Placement::Any, write(&x), task)
    })
    .unwrap();
    let err = p
        .trace(3, |p| p.launch(Placement::Any, write(&x), task))
        .unwrap_err();
    assert!(err.to_string().contains("after an outside event"), "{err}");
    // Both launches are named by their sites in this file, not inside the runtime.
    assert_eq!(
        err.to_string().matches("implicit_outside.rs").count(),
        2,
        "{err}"
    );
}

/// A list of writes: every region written by one task, each one's readers after it.
#[test]
fn a_list_of_writes_fills_every_region() {
    let rt = runtime();
    let mut p = Program::new(&rt);
    let rs: Vec<_> = (0..5).map(|_| p.region(0u64)).collect();
    let outs: Vec<Write<u64>> = rs.iter().map(write).collect();
    let arrived = UserEvent::new();
    p.launch_after(&arrived.event(), Placement::Any, outs, |mut o| {
        for i in 0..o.len() {
            *o.get_mut(i) = 100 + i as u64;
        }
    });
    arrived.trigger().unwrap();
    for (i, r) in rs.iter().enumerate() {
        assert_eq!(p.with(r, |v| *v).unwrap(), 100 + i as u64);
    }
}

#[test]
#[should_panic(expected = "twice")]
fn a_list_of_writes_naming_a_region_twice_is_refused() {
    let rt = runtime();
    let mut p = Program::new(&rt);
    let a = p.region(0u64);
    p.launch(Placement::Any, vec![write(&a), write(&a)], |_| {});
}

/// Automatic tracing over launches after outside events: fragments hold them (each
/// execution waiting for its own events, half of them triggered late), and a
/// fragment that breaks hands each buffered launch back with its event.
#[test]
fn automatic_tracing_takes_launches_after_events_and_falls_back_with_them() {
    let rt = runtime();
    let mut p = Program::new(&rt);
    p.auto_trace(true);
    let x = p.region(0u64);
    let sum = p.region(0u64);
    let n = if cfg!(miri) { 36 } else { 3000 };
    let events: Vec<UserEvent> = (0..n).map(|_| UserEvent::new()).collect();
    // What arrives with event `i`: set just before it triggers, so a task that ran before
    // its event would read 0.
    let arrived: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let value = |i: usize| i as u64 * 3 + 1;
    let mut expect = 0u64;
    for (i, e) in events.iter().enumerate() {
        let v = value(i);
        let a = arrived.clone();
        p.launch_after(&e.event(), Placement::Any, write(&x), move |x| {
            *x = a[i].load(Relaxed)
        });
        if i % 997 == 500 {
            // The pattern breaks inside a replayed fragment.
            p.launch(Placement::Any, read_write(&sum), |s| *s += 1_000_000);
            expect += 1_000_000;
        }
        p.launch(Placement::Any, (read(&x), read_write(&sum)), |(x, s)| {
            *s += *x
        });
        expect += v;
        if i % 2 == 0 {
            arrived[i].store(v, Relaxed);
            e.trigger().unwrap();
        }
    }
    let late: Vec<(usize, UserEvent)> = events
        .iter()
        .cloned()
        .enumerate()
        .skip(1)
        .step_by(2)
        .collect();
    let a = arrived.clone();
    // In order and slowly: each launch after an event is free to run as soon as the launch
    // before it ran, so one that did not wait for its own event would read 0.
    let trigger = std::thread::spawn(move || {
        for (k, (i, e)) in late.iter().enumerate() {
            if k % 8 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            a[*i].store(value(*i), Relaxed);
            e.trigger().unwrap();
        }
    });
    assert_eq!(p.with(&sum, |s| *s).unwrap(), expect);
    trigger.join().unwrap();
    let stats = p.auto_stats();
    assert!(stats.fragments > 0, "{stats:?}");
    if !cfg!(miri) {
        assert!(stats.fell_back > 0, "{stats:?}");
    }
}
