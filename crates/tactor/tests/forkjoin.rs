//! Fork-join: `join`, `for_each` and `Handle::run` — results, exactly-once execution under
//! stealing, panics, nesting inside tasks and waits, and depths past a deque's capacity.

#[allow(dead_code)]
mod common;

use common::rt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use tactor::{Placement, UserEvent};

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = tactor::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

/// fib(n) sequentially, to compare with.
fn fib_seq(n: u64) -> u64 {
    (0..n).fold((0, 1), |(a, b), _| (b, a + b)).0
}

const FIB: u64 = if cfg!(miri) { 8 } else { 24 };

#[test]
fn join_computes_fib_on_one_two_and_four_workers() {
    for w in [1, 2, 4] {
        let rt = rt(w);
        for _ in 0..3 {
            assert_eq!(rt.run(|| fib(FIB)), fib_seq(FIB), "{w} workers");
        }
    }
}

#[test]
fn join_off_the_workers_runs_both_closures_in_turn() {
    assert_eq!(fib(12), 144);
    let mut order = Vec::new();
    let (a, b) = tactor::join(|| 1, || 2);
    order.push(a);
    order.push(b);
    assert_eq!(order, [1, 2]);
}

#[test]
fn join_closures_borrow_from_the_caller_and_each_runs_once() {
    let rt = rt(2);
    let mut left = vec![0u32; 64];
    let mut right = vec![0u32; 64];
    rt.run(|| {
        fn fill(s: &mut [u32]) {
            if s.len() <= 2 {
                s.iter_mut().for_each(|x| *x += 1);
                return;
            }
            let (a, b) = s.split_at_mut(s.len() / 2);
            tactor::join(|| fill(a), || fill(b));
        }
        tactor::join(|| fill(&mut left), || fill(&mut right));
    });
    assert!(left.iter().chain(&right).all(|&x| x == 1));
}

/// A panic on either side is resumed by `join` after the other side finished.
#[test]
fn a_panic_on_either_side_reaches_the_caller_after_both_sides_ran() {
    let rt = rt(2);
    for side in 0..2 {
        let other_ran = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            rt.run(|| {
                tactor::join(
                    || {
                        if side == 0 {
                            panic!("left side fails");
                        }
                        other_ran.fetch_add(1, Relaxed);
                    },
                    || {
                        if side == 1 {
                            panic!("right side fails");
                        }
                        other_ran.fetch_add(1, Relaxed);
                    },
                )
            })
        }));
        let msg = r.expect_err("the panic reaches run's caller");
        let msg = msg.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(msg.contains("side fails"), "{msg}");
        assert_eq!(other_ran.load(Relaxed), 1, "side {side}");
    }
    // The runtime is still usable.
    assert_eq!(rt.run(|| fib(10)), 55);
}

/// Panics deep inside a parallel recursion, on whichever worker: every leaf that did not
/// panic ran once, and the runtime goes on.
#[test]
fn panics_inside_a_stolen_recursion_are_resumed_once() {
    let rt = rt(2);
    let n = if cfg!(miri) { 16 } else { 4096 };
    let ran: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.run(|| {
            tactor::for_each(0..n, 1, |i| {
                ran[i].fetch_add(1, Relaxed);
                if i == n / 3 {
                    panic!("leaf {i} fails");
                }
            })
        })
    }));
    assert!(r.is_err());
    assert!(ran.iter().all(|r| r.load(Relaxed) <= 1));
    assert_eq!(rt.run(|| fib(12)), 144);
}

#[test]
fn for_each_calls_every_index_exactly_once_for_any_grain() {
    let rt = rt(2);
    let n = if cfg!(miri) { 40 } else { 10_000 };
    for grain in [0, 1, 3, 64, n, n * 2] {
        let hits: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
        rt.run(|| {
            tactor::for_each(5..n, grain, |i| {
                hits[i].fetch_add(1, Relaxed);
            })
        });
        for (i, h) in hits.iter().enumerate() {
            let want = u8::from(i >= 5);
            assert_eq!(h.load(Relaxed), want, "grain {grain}, index {i}");
        }
    }
    // Empty and reversed ranges call nothing.
    rt.run(|| tactor::for_each(7..7, 1, |_| panic!("empty range")));
    #[allow(clippy::reversed_empty_ranges)]
    rt.run(|| tactor::for_each(9..3, 1, |_| panic!("reversed range")));
}

#[test]
fn nested_loops_and_loops_in_tasks_are_exact() {
    let rt = rt(2);
    let (outer, inner) = if cfg!(miri) { (4, 4) } else { (64, 100) };
    let sum = AtomicU64::new(0);
    rt.scope(|s| {
        for t in 0..3u64 {
            let sum = &sum;
            s.launch(Placement::Any, &[], move |_| {
                tactor::for_each(0..outer, 1, |i| {
                    tactor::for_each(0..inner, 4, |j| {
                        sum.fetch_add(t + (i * inner + j) as u64, Relaxed);
                    })
                })
            });
        }
    })
    .unwrap();
    let cells = (outer * inner) as u64;
    let want = 3 * cells * (cells - 1) / 2 + cells * 3;
    assert_eq!(sum.into_inner(), want);
}

/// A join whose first half waits for an event (the task suspends, and the worker may run the
/// second half from its own deque meanwhile) still returns both results, on one worker too.
#[test]
fn a_join_whose_first_half_waits_completes_on_one_worker() {
    for w in [1, 2] {
        let rt = rt(w);
        let gate = UserEvent::new();
        let g = gate.event();
        let opener = gate.clone();
        let (a, b) = rt.run(|| {
            tactor::join(
                move || {
                    g.wait().unwrap();
                    1
                },
                move || {
                    // On one worker this runs only once the first half has suspended.
                    opener.trigger().unwrap();
                    2
                },
            )
        });
        assert_eq!((a, b), (1, 2), "{w} workers");
    }
}

/// Joins nested deeper than a worker's deque holds: the forks past its capacity run inline.
#[test]
fn joins_nested_deeper_than_the_deque_run_inline() {
    fn chain(n: usize, count: &AtomicUsize) {
        if n == 0 {
            return;
        }
        tactor::join(
            || {
                count.fetch_add(1, Relaxed);
            },
            || chain(n - 1, count),
        );
    }
    let depth = if cfg!(miri) { 50 } else { 3000 };
    // Deep recursion needs a deep stack: run it in a task of a runtime whose coroutine stacks
    // hold it (2 MiB), from a join at the top.
    let rt = rt(2);
    let count = AtomicUsize::new(0);
    rt.run(|| chain(depth, &count));
    assert_eq!(count.into_inner(), depth);
}

#[test]
fn run_from_a_worker_runs_in_place_and_resumes_panics_elsewhere() {
    let rt = rt(2);
    let h = rt.handle();
    let inner = rt.run(move || h.run(|| tactor::current_worker().is_some()));
    assert!(inner);
    let r = catch_unwind(AssertUnwindSafe(|| rt.run(|| panic!("boom"))));
    assert_eq!(r.unwrap_err().downcast_ref::<&str>(), Some(&"boom"));
}

#[test]
fn for_each_mut_hands_every_item_to_one_call_with_its_index() {
    let rt = rt(2);
    let n = if cfg!(miri) { 37 } else { 5_001 };
    for grain in [1, 7, n] {
        let mut items: Vec<(usize, u32)> = vec![(usize::MAX, 0); n];
        rt.run(|| {
            tactor::for_each_mut(&mut items, grain, |i, item| {
                item.0 = i;
                item.1 += 1;
            })
        });
        for (i, item) in items.iter().enumerate() {
            assert_eq!(*item, (i, 1), "grain {grain}");
        }
    }
    // Nested: rows of a matrix, each row's cells in parallel too.
    let mut m = vec![vec![0usize; 9]; 11];
    rt.run(|| {
        tactor::for_each_mut(&mut m, 1, |r, row| {
            tactor::for_each_mut(row, 1, |c, x| *x = r * 100 + c)
        })
    });
    assert!(m
        .iter()
        .enumerate()
        .all(|(r, row)| row.iter().enumerate().all(|(c, &x)| x == r * 100 + c)));
    let mut empty: [u8; 0] = [];
    tactor::for_each_mut(&mut empty, 1, |_, _| panic!("no items"));
}

/// Slow bodies bunched in one piece of a loop's first cut: the piece splits off its rest once
/// nothing of its worker's can be stolen, so the other worker, idle after the fast bodies,
/// takes slow ones too (cut in advance, the piece ran them all on one worker).
#[test]
#[cfg_attr(miri, ignore = "timing: a body sleeps while the other worker steals")]
fn a_loop_evens_out_slow_bodies_bunched_in_one_piece() {
    let rt = rt(2);
    let slow = |i: usize| {
        if i < 8 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    };
    let on: Vec<AtomicUsize> = (0..64).map(|_| AtomicUsize::new(usize::MAX)).collect();
    let at = |i: usize| on[i].store(tactor::current_worker().expect("a worker"), Relaxed);
    let workers_of_slow = |on: &[AtomicUsize]| {
        let mut w: Vec<usize> = on[..8].iter().map(|w| w.load(Relaxed)).collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    rt.run(|| tactor::for_each(0..64, 1, |i| (slow(i), at(i)).1));
    assert_eq!(workers_of_slow(&on), [0, 1], "for_each");
    let mut items = vec![0u8; 64];
    rt.run(|| tactor::for_each_mut(&mut items, 1, |i, _| (slow(i), at(i)).1));
    assert_eq!(workers_of_slow(&on), [0, 1], "for_each_mut");
}

#[test]
fn try_for_each_mut_returns_a_failing_items_error_and_runs_each_item_at_most_once() {
    let rt = rt(2);
    let n = if cfg!(miri) { 37 } else { 5_001 };
    for grain in [1, 7, n] {
        for fails in [vec![], vec![n / 3], vec![n - 1], vec![0, n - 1, n / 2]] {
            let mut items = vec![0u32; n];
            let r = rt.run(|| {
                tactor::try_for_each_mut(&mut items, grain, |i, item| {
                    *item += 1;
                    if fails.contains(&i) {
                        return Err(i);
                    }
                    Ok(())
                })
            });
            match r {
                Ok(()) => assert!(fails.is_empty(), "grain {grain}: missed {fails:?}"),
                Err(i) => assert!(fails.contains(&i), "grain {grain}: {i} did not fail"),
            }
            assert!(
                items.iter().all(|&x| x <= 1),
                "grain {grain}: an item ran twice"
            );
            if fails.is_empty() {
                assert!(
                    items.iter().all(|&x| x == 1),
                    "grain {grain}: an item never ran"
                );
            }
        }
    }
}

/// Two-way splits one after another from one task, as a fork-join timestep loop makes them:
/// the forker's deque is empty at each, so the other half goes to an idle worker's offer when
/// one is open and onto the deque otherwise. Each half runs exactly once, sees what the forker
/// wrote before forking, and its result comes back; a panic in a half handed over or stolen
/// reaches the forker.
#[test]
fn two_way_splits_in_a_row_run_each_half_once_wherever_it_goes() {
    let n = if cfg!(miri) { 20 } else { 20_000 };
    for w in [2, 3] {
        let rt = rt(w);
        let ran: Vec<AtomicU8> = (0..n).map(|_| AtomicU8::new(0)).collect();
        let total = rt.run(|| {
            let mut total = 0u64;
            let mut before = vec![0u64; 2];
            for (i, ran) in ran.iter().enumerate() {
                before[1] = i as u64;
                let b = &before;
                let (x, y) = tactor::join(
                    || i as u64,
                    || {
                        ran.fetch_add(1, Relaxed);
                        b[1] * 2
                    },
                );
                total += x + y;
            }
            total
        });
        let n64 = n as u64;
        assert_eq!(total, 3 * n64 * (n64 - 1) / 2, "{w} workers");
        assert!(ran.iter().all(|r| r.load(Relaxed) == 1), "{w} workers");
        let caught = rt.run(|| {
            (0..n.min(200))
                .filter(|&i| {
                    catch_unwind(AssertUnwindSafe(|| {
                        tactor::join(|| (), || assert!(i % 2 == 0, "half {i}"))
                    }))
                    .is_err()
                })
                .count()
        });
        assert_eq!(caught, n.min(200) / 2, "{w} workers");
    }
}

/// A forked half that waits for a task launched just before the fork: an idle worker may
/// take the task (stealing it) and be handed the half at the same moment. Whichever it runs,
/// the other must stay where a worker can reach it: run first, a half that suspends would
/// otherwise hold the task on its stack, and the task is what it waits for. A watchdog turns
/// that deadlock into a failure.
#[test]
fn a_half_handed_over_while_its_worker_steals_a_task_it_waits_for_completes() {
    let rounds = if cfg!(miri) { 20 } else { 3000 };
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = rt(2);
        let h = rt.handle();
        rt.run(|| {
            for _ in 0..rounds {
                let gate = UserEvent::new();
                let opens = gate.event();
                h.launch(Placement::Any, &[], move || gate.trigger().unwrap());
                tactor::join(|| (), move || opens.wait().unwrap());
            }
        });
        let _ = done.send(());
    });
    finished
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("every round ends: no half waits for a task held beneath it");
}
