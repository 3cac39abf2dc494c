//! Futures across ranks (`tactor::job::Spmd`) on ranks of threads: values cross ranks with
//! their trigger, each value to each rank once, and a failure crosses ranks as poison.

use std::sync::Arc;
use tactor::job::{Job, Spmd};

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
        (s.get(&d).map_err(|e| e.to_string()), s.get(&fine).unwrap())
    });
    for (rank, (d, fine)) in outcomes.into_iter().enumerate() {
        let e = d.expect_err("d depends on a task that panicked");
        assert!(e.contains("injected"), "rank {rank}: {e}");
        assert_eq!(fine, 10, "rank {rank}");
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
