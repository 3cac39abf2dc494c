//! Futures across ranks (`tactor::job::Spmd`) on ranks of threads: values cross ranks with
//! their trigger, each value to each rank once, and a failure crosses ranks as poison.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tactor::job::{At, Job, Spmd};
use tactor::Failure;

/// Runs `body` on every rank of an in-process job, each with a runtime of `workers`.
fn on_ranks<T: Send>(ranks: usize, workers: usize, body: impl Fn(&mut Spmd) -> T + Sync) -> Vec<T> {
    on_ranks_workers_with_job(ranks, workers, |_, s| body(s))
}

fn on_ranks_with_job<T: Send>(
    ranks: usize,
    body: impl Fn(&Arc<Job>, &mut Spmd) -> T + Sync,
) -> Vec<T> {
    on_ranks_workers_with_job(ranks, 1, body)
}

fn on_ranks_workers_with_job<T: Send>(
    ranks: usize,
    workers: usize,
    body: impl Fn(&Arc<Job>, &mut Spmd) -> T + Sync,
) -> Vec<T> {
    Job::run_in_process(ranks, workers, |rt, job| body(job, &mut Spmd::new(rt, job)))
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

#[test]
fn a_chain_that_hops_between_ranks_gets_every_value() {
    let n = if cfg!(miri) { 6 } else { 200 };
    for (ranks, workers) in [(2, 1), (3, 2)] {
        let got = on_ranks(ranks, workers, |s| {
            let all = s.workers();
            let mut last = s.spawn(0, &[], |_| 1u64);
            let mut values = vec![last.clone()];
            for i in 1..n {
                // Each step on another worker (another rank, mostly), reading the last value
                // and one from further back.
                let back = values[i / 2].clone();
                last = s.spawn((i * 7) % all, &[&last, &back], move |ins| ins[0] + ins[1]);
                values.push(last.clone());
            }
            s.get(&last).unwrap()
        });
        let mut want = vec![1u64];
        for i in 1..n {
            let next = want[i - 1].wrapping_add(want[i / 2]);
            want.push(next);
        }
        assert!(
            got.iter().all(|&g| g == want[n - 1]),
            "{ranks} ranks: {got:?}"
        );
    }
}

#[test]
fn vectors_cross_ranks_whole() {
    let got = on_ranks(2, 1, |s| {
        let a = s.spawn(0, &[], |_| (0..1000u32).collect::<Vec<u32>>());
        let b = s.spawn(1, &[&a], |ins| ins[0].iter().map(|x| x * 2).collect());
        s.get(&b).unwrap()
    });
    for v in got {
        assert_eq!(v, (0..1000u32).map(|x| x * 2).collect::<Vec<_>>());
    }
}

#[test]
fn a_failure_crosses_ranks_as_poison() {
    let outcomes = on_ranks(3, 1, |s| {
        let a = s.spawn(0, &[], |_| 5u64);
        let bad = s.spawn(1, &[&a], |_| -> u64 { panic!("injected") });
        let c = s.spawn(2, &[&bad], |ins| ins[0] + 1);
        let d = s.spawn(0, &[&c, &a], |ins| ins[0] + ins[1]);
        let fine = s.spawn(2, &[&a], |ins| ins[0] * 2);
        let failure = |e: tactor::TaskFailed| e.failure().clone();
        let (bad, d) = (s.get(&bad).map_err(failure), s.get(&d).map_err(failure));
        (bad, d, s.get(&fine).unwrap())
    });
    for (rank, (bad, d, fine)) in outcomes.into_iter().enumerate() {
        let bad = bad.expect_err("the task panicked");
        let d = d.expect_err("d depends on a task that panicked");
        assert!(d.to_string().contains("injected"), "rank {rank}: {d}");
        // Where it failed, the task's own failure; elsewhere the rank it failed on, also
        // when the poison came through other ranks (`d`: from rank 1 to 2, to 0, to all).
        match rank {
            1 => assert!(matches!(bad, Failure::Task { .. }), "{bad:?}"),
            _ => assert!(
                matches!(bad, Failure::Remote { rank: 1, .. }),
                "{rank}: {bad:?}"
            ),
        }
        assert!(
            matches!(d, Failure::Remote { rank: 1, .. }),
            "rank {rank}: {d:?}"
        );
        assert_eq!(fine, 10, "rank {rank}");
    }
}

#[test]
fn a_fence_waits_for_every_task_of_its_rank_and_reports_their_failures() {
    let n = if cfg!(miri) { 8 } else { 300 };
    for (ranks, workers) in [(1, 2), (2, 1), (3, 2)] {
        let ran = on_ranks_workers_with_job(ranks, workers, |job, s| {
            let count = Arc::new(AtomicUsize::new(0));
            let all = s.workers();
            // Values nobody reads, on every worker and on any worker of every rank.
            for i in 0..n {
                let c = count.clone();
                let at = if i % 2 == 0 {
                    At::Worker(i % all)
                } else {
                    At::Rank(i % ranks)
                };
                s.spawn(at, &[], move |_| c.fetch_add(1, Ordering::SeqCst) as u64);
            }
            s.fence().unwrap();
            let mine = count.load(Ordering::SeqCst);
            // One that fails on the last rank, read by nobody: only its rank's fence reports.
            let last = ranks - 1;
            s.spawn(At::Rank(last), &[], |_| -> u64 { panic!("unread") });
            let fenced = s.fence().map_err(|e| e.to_string());
            assert_eq!(fenced.is_err(), job.rank() == last, "rank {}", job.rank());
            mine
        });
        assert_eq!(
            ran.iter().sum::<usize>(),
            n,
            "{ranks} ranks × {workers}: {ran:?}"
        );
    }
}

#[test]
fn a_failed_rank_poisons_what_waits_for_it() {
    let outcomes = on_ranks_with_job(2, |job, s| {
        let a = s.spawn(1, &[], |_| 3u64);
        let b = s.spawn(0, &[&a], |ins| ins[0]);
        if job.rank() == 1 {
            // Rank 1 fails before its value could be sent.
            job.tell_failure("gave up");
            return None;
        }
        Some(s.get(&b).map_err(|e| e.to_string()))
    });
    let e = outcomes[0]
        .clone()
        .unwrap()
        .expect_err("b waits for the failed rank");
    assert!(e.contains("rank 1 failed"), "{e}");
}

/// A clock that every rank of an in-process job reads: the order tasks ran in, job-wide.
#[derive(Default)]
struct Clock {
    now: std::sync::atomic::AtomicU64,
    /// Per task id, when it started and when it ended (0: never ran).
    runs: std::sync::Mutex<Vec<(u64, u64, usize)>>,
}

impl Clock {
    fn tick(&self) -> u64 {
        1 + self.now.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }
}

#[test]
fn launches_wait_for_events_of_every_rank_and_run_once() {
    use rand::{Rng, SeedableRng};
    use tactor::job::Held;
    let n = if cfg!(miri) { 12 } else { 300 };
    for (ranks, workers, seed) in [(2, 1, 1u64), (3, 2, 2), (2, 2, 3)] {
        // The same graph on every rank (control replication): drawn once, from a seed.
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let all = ranks * workers;
        let graph: Vec<(usize, Vec<usize>)> = (0..n)
            .map(|i| {
                let deps = (0..rng.gen_range(0..4usize).min(i))
                    .map(|_| rng.gen_range(0..i))
                    .collect();
                (rng.gen_range(0..all), deps)
            })
            .collect();
        let clock = Arc::new(Clock::default());
        clock.runs.lock().unwrap().resize(n, (0, 0, 0));
        on_ranks(ranks, workers, |s| {
            let mut done: Vec<tactor::job::Value<()>> = Vec::new();
            for (i, (worker, deps)) in graph.iter().enumerate() {
                let after: Vec<&dyn Held> = deps.iter().map(|&d| &done[d] as &dyn Held).collect();
                let clock = clock.clone();
                let v = s.launch(*worker, &after, move || {
                    let start = clock.tick();
                    let end = clock.tick();
                    let mut runs = clock.runs.lock().unwrap();
                    let (s0, e0, count) = runs[i];
                    runs[i] = (s0.max(start), e0.max(end), count + 1);
                });
                done.push(v);
            }
            // Every rank waits for every task's end (each rank is sent those it does not run).
            for v in &done {
                s.get(v).unwrap();
            }
        });
        let runs = clock.runs.lock().unwrap();
        for (i, (_, deps)) in graph.iter().enumerate() {
            assert_eq!(
                runs[i].2, 1,
                "task {i} ran {} times ({ranks} ranks)",
                runs[i].2
            );
            for &d in deps {
                assert!(
                    runs[d].1 < runs[i].0,
                    "task {i} started at {} before its precondition {d} ended at {}",
                    runs[i].0,
                    runs[d].1
                );
            }
        }
    }
}

#[test]
fn a_launch_waits_for_values_of_several_types() {
    let got = on_ranks(3, 1, |s| {
        let n = s.spawn(0, &[], |_| 7u64);
        let v = s.spawn(1, &[], |_| vec![0.5f64; 3]);
        let seen = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = seen.clone();
        let after: [&dyn tactor::job::Held; 2] = [&n, &v];
        let done = s.launch(2, &after, move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst)
        });
        // A spawn may wait for the launch through its value of no data, on yet another rank.
        let unit = s.spawn(0, &[&done], |_| ());
        (s.get(&unit).is_ok(), s.get(&n).unwrap(), s.get(&v).unwrap())
    });
    for (rank, (ok, n, v)) in got.into_iter().enumerate() {
        assert!(ok, "rank {rank}");
        assert_eq!((n, v), (7, vec![0.5; 3]), "rank {rank}");
    }
}

#[test]
fn a_failed_launch_poisons_what_waits_for_it_on_other_ranks() {
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let outcomes = on_ranks(3, 1, |s| {
        let bad = s.launch(0, &[], || panic!("injected in a launch"));
        let r = ran.clone();
        let after_bad = s.launch(1, &[&bad], move || {
            r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        let value = s.spawn(2, &[], |_| 4u64);
        let also = s.launch(2, &[&after_bad, &value], || ());
        let fine = s.launch(1, &[&value], || ());
        (
            s.get(&also).map_err(|e| e.to_string()),
            s.get(&fine).is_ok(),
        )
    });
    assert_eq!(
        ran.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "a poisoned task ran"
    );
    for (rank, (also, fine)) in outcomes.into_iter().enumerate() {
        let e = also.expect_err("also waits for a task that panicked");
        assert!(e.contains("injected in a launch"), "rank {rank}: {e}");
        assert!(fine, "rank {rank}: an unrelated task failed");
    }
}

/// Tasks spawned into a scope borrow their context from the stack, hop between ranks and
/// workers, and every rank gets the chain's value; a failure in one of them is the scope's.
#[test]
fn scoped_spawns_borrow_their_context_across_ranks() {
    let n = if cfg!(miri) { 6 } else { 200 };
    for (ranks, workers) in [(2, 1), (3, 2)] {
        let got = Job::run_in_process(ranks, workers, |rt, job| {
            let adds: Vec<u64> = (0..n as u64).collect(); // borrowed, never moved
            let adds = &adds;
            let mut s = Spmd::new(rt, job);
            let all = s.workers();
            let last = rt
                .scope(|scope| {
                    let mut last = s.spawn_in(scope, 0, &[], |_| 1u64);
                    for (i, add) in adds.iter().enumerate().skip(1) {
                        let at = (i * 5) % all;
                        last = s.spawn_in(scope, at, &[&last], move |ins| ins[0] + add);
                    }
                    last
                })
                .unwrap();
            let value = s.get(&last).unwrap();
            // A failing scoped task: its scope reports it (on the rank that ran it, and as
            // poison where its value went).
            let failed = rt.scope(|scope| {
                let bad = s.spawn_in(scope, 0, &[], |_| -> u64 { panic!("injected") });
                s.spawn_in(scope, all - 1, &[&bad], |ins| ins[0] + adds[1])
            });
            let _ = s.fence();
            (value, failed.is_err())
        });
        let want = 1 + (1..n as u64).sum::<u64>();
        for (rank, r) in got.into_iter().enumerate() {
            let (value, failed) = r.unwrap();
            assert_eq!(value, want, "{ranks} ranks, rank {rank}");
            // Rank 0 ran the failing task, the last rank its dependent; no other took part.
            let took_part = rank == 0 || rank == ranks - 1;
            assert_eq!(failed, took_part, "{ranks} ranks, rank {rank}");
        }
    }
}

/// An `Spmd` dropped inside the scope of its tasks, while one still waits for a value from
/// another rank: that task fails, and the failure says why (no hang, no bare "dropped").
#[test]
fn a_scoped_task_whose_spmd_went_first_fails_saying_why() {
    let got = Job::run_in_process(2, 1, |rt, job| {
        let me = job.rank();
        rt.scope(|scope| {
            let mut s = Spmd::new(rt, job);
            // Rank 1's value is ready only after a while; rank 0's task waits for it.
            let slow = s.spawn_in(scope, 1, &[], |_| {
                std::thread::sleep(std::time::Duration::from_millis(200));
                7u64
            });
            s.spawn_in(scope, 0, &[&slow], |ins| ins[0] + 1);
            drop(s);
        })
        .map_err(|e| (me, e.to_string()))
    });
    let rank0 = got[0].as_ref().unwrap();
    let why = rank0.as_ref().unwrap_err().1.clone();
    assert!(why.contains("dropped before the value arrived"), "{why}");
}
