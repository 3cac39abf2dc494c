//! Futures: values travel with their events, `get` inside a task suspends it, failures
//! poison the futures downstream, promises set by hand or dropped.

use tactor::{Cause, Failure, Future, Placement, Promise};

// The shared helpers; this file uses `rt` alone.
#[allow(dead_code)]
mod common;
use common::rt;

#[test]
fn a_chain_of_futures_carries_each_value_to_the_next() {
    // Under Miri (which checks the futures' unsafe code) smaller.
    let (workers, n): (&[usize], u64) = if cfg!(miri) {
        (&[2], 20)
    } else {
        (&[1, 2, 3], 200)
    };
    for &workers in workers {
        let rt = rt(workers);
        let mut f = Future::ready(0u64);
        for i in 1..=n {
            let prev = f.clone();
            f = rt.spawn(Placement::Any, &[prev.event().clone()], move || {
                // The precondition has triggered: the value is there without waiting.
                prev.try_get().expect("ready").unwrap() + i
            });
        }
        assert_eq!(*f.get().unwrap(), n * (n + 1) / 2);
    }
}

#[test]
fn get_inside_a_task_suspends_it_until_the_value_comes() {
    let rt = rt(1);
    let (promise, future) = Promise::new();
    // On one worker: the reader suspends, and the worker runs the writer.
    let reader = rt.spawn(Placement::Worker(0), &[], move || {
        *future.get().unwrap() * 2
    });
    rt.launch(Placement::Worker(0), &[], move || promise.set(21u32));
    assert_eq!(*reader.get().unwrap(), 42);
}

#[test]
fn a_panicking_task_poisons_its_future_and_those_that_wait_for_it() {
    let rt = rt(2);
    let bad = rt.spawn(Placement::Any, &[], || -> u32 { panic!("no value") });
    let after = rt.spawn(Placement::Any, &[bad.event().clone()], || 1u32);
    let err = bad.get().unwrap_err();
    assert!(matches!(
        err.failure(),
        Failure::Task {
            cause: Cause::Panicked(m),
            ..
        } if m == "no value"
    ));
    // Poisoned upstream: never ran, and says why.
    assert!(after.get().unwrap_err().to_string().contains("no value"));
}

#[test]
fn a_promise_dropped_unset_poisons_its_future() {
    let rt = rt(2);
    let (promise, future) = Promise::<String>::new();
    let reader = {
        let future = future.clone();
        rt.spawn(Placement::Any, &[], move || {
            future.get().map(|s| s.len()).is_err()
        })
    };
    drop(promise);
    assert!(future.get().is_err());
    assert!(*reader.get().unwrap());
}

#[test]
fn many_readers_of_one_future_see_the_same_value() {
    let rt = rt(if cfg!(miri) { 2 } else { 3 });
    let (promise, future) = Promise::<Vec<u8>>::new();
    let readers: Vec<_> = (0..if cfg!(miri) { 8 } else { 64 })
        .map(|i| {
            let f = future.clone();
            rt.spawn(Placement::Any, &[], move || f.get().unwrap().len() + i)
        })
        .collect();
    promise.set(vec![7u8; 10]);
    for (i, r) in readers.iter().enumerate() {
        assert_eq!(*r.get().unwrap(), 10 + i);
    }
}

/// A random DAG of `dataflow` tasks, each summing its inputs plus its own number, on 1–3
/// workers: every value equals the sequential one, and every task ran once (a task that ran
/// before an input was set would panic on the missing value).
#[test]
fn dataflow_tasks_see_every_input_in_order_and_run_once() {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;
    let n = if cfg!(miri) { 30 } else { 3000 };
    let runs: &[(u64, usize)] = if cfg!(miri) {
        &[(2, 2)]
    } else {
        &[(1, 1), (2, 2), (3, 3)]
    };
    for &(seed, workers) in runs {
        let rt = rt(workers);
        let mut rng = StdRng::seed_from_u64(seed);
        let ran = Arc::new(AtomicUsize::new(0));
        let (mut futures, mut expect): (Vec<Future<u64>>, Vec<u64>) = (Vec::new(), Vec::new());
        for i in 0..n as u64 {
            let ins: Vec<usize> = match i {
                0 => Vec::new(),
                _ => (0..rng.gen_range(0..5))
                    .map(|_| rng.gen_range(0..i as usize))
                    .collect(),
            };
            // Order matters: the value weighs each input by its position.
            let weigh = move |vals: &mut dyn Iterator<Item = u64>| {
                vals.enumerate().fold(i, |acc, (k, v)| {
                    acc.wrapping_add(v.wrapping_mul(k as u64 + 1))
                })
            };
            expect.push(weigh(&mut ins.iter().map(|&d| expect[d])));
            let inputs: Vec<_> = ins.iter().map(|&d| futures[d].clone()).collect();
            let ran = ran.clone();
            futures.push(rt.dataflow(Placement::Any, inputs, move |vals| {
                ran.fetch_add(1, Relaxed);
                weigh(&mut vals.iter().copied())
            }));
        }
        let got: Vec<u64> = futures.iter().map(|f| *f.get().unwrap()).collect();
        assert_eq!(got, expect, "seed {seed}, {workers} workers");
        assert_eq!(ran.load(Relaxed), n);
    }
}

#[test]
fn a_failed_input_poisons_a_dataflow_task_which_does_not_run() {
    let rt = rt(2);
    let good = rt.spawn(Placement::Any, &[], || 1u32);
    let (promise, bad) = Promise::<u32>::new();
    let after = rt.dataflow(Placement::Any, vec![good, bad], |_| -> u32 {
        panic!("a task with a failed input ran")
    });
    promise.fail("no value came");
    let err = after.get().unwrap_err();
    assert!(err.to_string().contains("no value came"), "{err}");
    // Its own dependents are poisoned too, without running.
    let later = rt.dataflow(Placement::Any, vec![after], |_| -> u32 { panic!("ran") });
    assert!(later.get().is_err());
}

/// Counts its drops: a future's value lives in its task's node (or its promise's cell) and
/// is dropped once, with the last future, event or task that holds that allocation.
struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>, u32);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn every_value_is_dropped_once_with_the_last_holder_of_its_future() {
    use std::sync::{atomic::AtomicUsize, atomic::Ordering::SeqCst, Arc};
    let dropped = Arc::new(AtomicUsize::new(0));
    let made = {
        let rt = rt(2);
        let d = dropped.clone();
        let spawned = rt.spawn(Placement::Any, &[], move || Counted(d, 1));
        let ready = Future::ready(Counted(dropped.clone(), 2));
        let (promise, set) = Promise::new();
        promise.set(Counted(dropped.clone(), 3));
        let (unset, poisoned) = Promise::<Counted>::new();
        drop(unset);
        let d = dropped.clone();
        let mut sums = Vec::new();
        rt.scope(|s| {
            let ins = [spawned.clone(), ready.clone(), set.clone()];
            sums.push(s.dataflow(Placement::Any, ins, move |ins| {
                Counted(d, ins.iter().map(|c| c.1).sum())
            }));
            // Its input failed: the task does not run and makes no value.
            let d = dropped.clone();
            let never = s.dataflow(Placement::Any, [poisoned.clone()], move |_| Counted(d, 0));
            sums.push(never);
        })
        .unwrap_err();
        assert_eq!(sums[0].get().unwrap().1, 6);
        assert!(sums[1].get().is_err());
        // Values still held are not dropped; an event alone keeps its value alive too.
        let event = spawned.event().clone();
        drop(spawned);
        assert_eq!(dropped.load(SeqCst), 0);
        drop(event);
        4
    };
    assert_eq!(dropped.load(SeqCst), made);
}
