//! Futures: values travel with their events, `get` inside a task suspends it, failures
//! poison the futures downstream, promises set by hand or dropped.

use tactor::{Cause, Failure, Future, Placement, Promise};

// The shared helpers; this file uses `rt` alone.
#[allow(dead_code)]
mod common;
use common::rt;

#[test]
fn a_chain_of_futures_carries_each_value_to_the_next() {
    for workers in [1, 2, 3] {
        let rt = rt(workers);
        let mut f = Future::ready(0u64);
        for i in 1..=200u64 {
            let prev = f.clone();
            f = rt.spawn(Placement::Any, &[prev.event().clone()], move || {
                // The precondition has triggered: the value is there without waiting.
                prev.try_get().expect("ready").unwrap() + i
            });
        }
        assert_eq!(*f.get().unwrap(), 200 * 201 / 2);
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
    let rt = rt(3);
    let (promise, future) = Promise::<Vec<u8>>::new();
    let readers: Vec<_> = (0..64)
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
