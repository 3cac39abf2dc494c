//! Reductions of a replicated implicit program whose tasks run on several ranks: every rank
//! that reads the region afterwards gets the same total (bit for bit), whatever the ranks,
//! workers, operators and traces; a rank that did not reduce gets a copy; an operator without
//! partials is refused on several ranks and fine on one.

use tactor::implicit::{read, reduce, write, Partials, Reduction, Replicated, Sum};
use tactor::job::Job;

struct Max;
impl Reduction<f64> for Max {
    type Value = f64;
    fn apply(data: &mut f64, value: f64) {
        *data = data.max(value);
    }
    fn partials() -> Option<Partials<f64>> {
        Some(Partials {
            identity: || f64::NEG_INFINITY,
            fold: |a, b| *a = a.max(b),
        })
    }
}

/// A reduction with no partials: it cannot span ranks.
struct Product;
impl Reduction<u64> for Product {
    type Value = u64;
    fn apply(data: &mut u64, value: u64) {
        *data *= value;
    }
}

/// What a worker contributes in round `k`.
fn part(w: usize, k: usize) -> f64 {
    1.0 / (1.0 + w as f64 + 3.0 * k as f64)
}

#[test]
fn every_rank_reads_the_same_total_of_every_round() {
    let rounds = if cfg!(miri) { 2 } else { 12 };
    let shapes: &[(usize, usize)] = if cfg!(miri) {
        &[(2, 1)]
    } else {
        &[(1, 2), (2, 1), (2, 2), (3, 1)]
    };
    for &(ranks, workers) in shapes {
        for traced in [false, true] {
            let runs = Job::run_in_process(ranks, workers, |rt, job| {
                let mut p = Replicated::new(rt, job);
                let n = p.workers();
                let total = p.region(0, 0.0f64);
                let biggest = p.region(n - 1, 0.0f64);
                // Each worker's copy of the last round's total, read after the reductions.
                let seen: Vec<_> = (0..n).map(|w| p.region(w, vec![0.0f64])).collect();
                for k in 0..rounds {
                    if traced && k > 0 {
                        p.begin_trace(7).unwrap();
                    }
                    p.launch(0, write(&total), |t| *t = 0.0);
                    for w in 0..n {
                        p.launch(w, reduce::<Sum, _>(&total), move |mut t| {
                            t.apply(part(w, k))
                        });
                        p.launch(w, reduce::<Max, _>(&biggest), move |mut m| {
                            m.apply(part(w, k) * 10.0)
                        });
                    }
                    for (w, s) in seen.iter().enumerate() {
                        p.launch(w, (read(&total), read(&biggest), write(s)), |(t, b, s)| {
                            *s = vec![*t, *b];
                        });
                    }
                    if traced && k > 0 {
                        p.end_trace().unwrap();
                    }
                }
                let got: Vec<Vec<f64>> = seen
                    .iter()
                    .map(|s| p.with(s, Clone::clone).unwrap())
                    .collect();
                (
                    got,
                    p.with(&total, |t| *t).unwrap(),
                    p.local().recorded_traces(),
                )
            });
            let n = ranks * workers;
            let k = rounds - 1;
            let mut want = 0.0;
            for w in 0..n {
                want += part(w, k);
            }
            for (rank, run) in runs.into_iter().enumerate() {
                let (got, total, traces) = run.unwrap();
                let what = format!("rank {rank}, {ranks} x {workers}, traced {traced}");
                // Within rounding of the serial sum; the same bits on every worker.
                assert!((total - want).abs() < 1e-12, "{what}: {total} vs {want}");
                for s in &got {
                    assert_eq!(s[0].to_bits(), total.to_bits(), "{what}");
                    // Never reset: the largest of every round so far.
                    assert_eq!(s[1], part(0, 0) * 10.0, "{what}: the max");
                }
                assert_eq!(traces, usize::from(traced), "{what}");
            }
        }
    }
}

#[test]
fn a_rank_that_did_not_reduce_gets_the_total_and_one_rank_needs_no_partials() {
    let runs = Job::run_in_process(3, 1, |rt, job| {
        let mut p = Replicated::new(rt, job);
        let sum = p.region(2, 5u64);
        let product = p.region(1, 1u64);
        // Only ranks 0 and 1 reduce the sum; rank 2 held its value and still folds it in.
        for w in 0..2 {
            p.launch(w, reduce::<Sum, _>(&sum), move |mut s| {
                s.apply(w as u64 + 1)
            });
        }
        // A product reduced on one rank only: no partials needed.
        for v in 2..5u64 {
            p.launch(1, reduce::<Product, _>(&product), move |mut t| t.apply(v));
        }
        (
            p.with(&sum, |s| *s).unwrap(),
            p.with(&product, |t| *t).unwrap(),
            p.copies(),
        )
    });
    for (rank, run) in runs.into_iter().enumerate() {
        let (sum, product, copies) = run.unwrap();
        assert_eq!((sum, product), (5 + 1 + 2, 24), "rank {rank}");
        // The sum: every rank sends its partial to the others and takes theirs (2 × 2);
        // the product: rank 1 sends it to 0 and 2 (one each).
        let expect = [4 + 1, 4 + 2, 4 + 1][rank];
        assert_eq!(copies, expect, "rank {rank}");
    }
}

#[test]
fn a_reduction_without_partials_on_several_ranks_is_refused() {
    let runs = Job::run_in_process(2, 1, |rt, job| {
        let mut p = Replicated::new(rt, job);
        let product = p.region(0, 1u64);
        for w in 0..2 {
            p.launch(w, reduce::<Product, _>(&product), |mut t| t.apply(3));
        }
    });
    for run in runs {
        let e = run.expect_err("refused");
        let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("has no Reduction::partials"), "{msg}");
    }
}

/// A ring of cells over the ranks, each step's new cell from its neighbours' old ones, with
/// tasks placed on a rank only (any of its workers) and a reduction spanning the ranks: every
/// rank reads the serial result, untraced and traced.
#[test]
fn launches_on_a_rank_run_on_any_of_its_workers_and_get_their_copies() {
    let (cells, steps) = if cfg!(miri) { (4, 3) } else { (12, 30) };
    let serial = {
        let mut u: Vec<u64> = (0..cells as u64).collect();
        for _ in 0..steps {
            u = (0..cells)
                .map(|i| u[(i + cells - 1) % cells] + 2 * u[i] + u[(i + 1) % cells] + 1)
                .map(|v| v % 1_000_003)
                .collect();
        }
        u
    };
    let shapes: &[(usize, usize)] = if cfg!(miri) {
        &[(2, 2)]
    } else {
        &[(1, 3), (2, 2), (3, 2)]
    };
    for &(ranks, workers) in shapes {
        for traced in [false, true] {
            let runs = Job::run_in_process(ranks, workers, |rt, job| {
                let mut p = Replicated::new(rt, job);
                let rank_of = |i: usize| i * ranks / cells;
                // Two generations of cells, each homed on the first worker of its rank.
                let rows: Vec<Vec<_>> = (0..2)
                    .map(|_| {
                        (0..cells)
                            .map(|i| p.region(rank_of(i) * workers, i as u64))
                            .collect()
                    })
                    .collect();
                let sum = p.region(0, 0.0f64);
                for t in 0..steps {
                    if traced && t >= 2 && t % 2 == 0 && t + 2 <= steps {
                        p.begin_trace(1).unwrap();
                    }
                    let (old, new) = (&rows[t % 2], &rows[(t + 1) % 2]);
                    for (i, cell) in new.iter().enumerate() {
                        let around = [(i + cells - 1) % cells, i, (i + 1) % cells];
                        let ins: Vec<_> = around.iter().map(|&j| read(&old[j])).collect();
                        p.launch_on_rank(rank_of(i), (ins, write(cell)), |(ins, out)| {
                            *out = (ins.get(0) + 2 * ins.get(1) + ins.get(2) + 1) % 1_000_003;
                        });
                    }
                    if traced && t >= 3 && t % 2 == 1 {
                        p.end_trace().unwrap();
                    }
                }
                let last = &rows[steps % 2];
                for (i, cell) in last.iter().enumerate() {
                    p.launch_on_rank(
                        rank_of(i),
                        (read(cell), reduce::<Sum, _>(&sum)),
                        |(c, mut s)| {
                            s.apply(*c as f64);
                        },
                    );
                }
                let cells: Vec<u64> = last.iter().map(|c| p.with(c, |v| *v).unwrap()).collect();
                (cells, p.with(&sum, |s| *s).unwrap())
            });
            for (rank, run) in runs.into_iter().enumerate() {
                let (got, sum) = run.unwrap();
                let what = format!("rank {rank} of {ranks} x {workers}, traced {traced}");
                assert_eq!(got, serial, "{what}");
                assert_eq!(sum, serial.iter().sum::<u64>() as f64, "{what}");
            }
        }
    }
}

/// Faults a rank injects into the copies it sends (`Job::inject`): a corrupt copy reaches its
/// reader with its first byte flipped, the first copy only; a late one (the second copy sent)
/// is waited for and arrives intact.
#[test]
fn injected_faults_act_on_the_one_copy_they_are_due_for() {
    use std::time::Duration;
    use tactor::implicit::read_write;
    use tactor::job::Fault;
    let run = |fault: Fault| {
        let runs = Job::run_in_process(2, 1, move |rt, job| {
            let mut p = Replicated::new(rt, job);
            if job.rank() == 0 {
                job.inject(fault);
            }
            let src = p.region(0, vec![0u8; 2]);
            let seen = p.region(1, Vec::<u8>::new());
            for k in 0..3u8 {
                p.launch(0, write(&src), move |v| *v = vec![k, 7]);
                p.launch(1, (read(&src), read_write(&seen)), |(s, seen)| {
                    seen.extend_from_slice(s)
                });
            }
            p.with(&seen, |s| s.clone()).unwrap()
        });
        runs.into_iter().map(Result::unwrap).collect::<Vec<_>>()
    };
    let corrupt = run(Fault::Corrupt);
    assert_eq!(corrupt, [[1, 7, 1, 7, 2, 7], [1, 7, 1, 7, 2, 7]]);
    let slow = run(Fault::Slow {
        step: 1,
        pause: Duration::from_millis(if cfg!(miri) { 1 } else { 50 }),
    });
    assert_eq!(slow, [[0, 7, 1, 7, 2, 7], [0, 7, 1, 7, 2, 7]]);
}

/// A rank that read a region's last versions is sent the next ones as their writer ends (an
/// eager copy); one that stops reading is sent one more it never reads, then no more. Every
/// rank still reads the right values, untraced and in traces whose launches, copies
/// included, stay the same from one execution to the next.
#[test]
fn eager_copies_follow_their_readers_and_stop_when_they_stop() {
    use tactor::implicit::read_write;
    let steps: u64 = if cfg!(miri) { 4 } else { 20 };
    for traced in [false, true] {
        let runs = Job::run_in_process(2, 1, |rt, job| {
            let mut p = Replicated::new(rt, job);
            let x = p.region(0, 0u64);
            let seen = p.region(1, 0u64);
            let after = p.region(0, 0u64);
            for k in 0..steps {
                if traced && k >= 2 {
                    p.begin_trace(u64::from(k < steps / 2)).unwrap();
                }
                p.launch(0, read_write(&x), move |x| *x += k);
                if k < steps / 2 {
                    // Rank 1 reads every version of the first half, then none.
                    p.launch(1, (read(&x), read_write(&seen)), |(x, s)| *s += *x);
                } else {
                    p.launch(0, (read(&x), read_write(&after)), |(x, a)| *a += *x);
                }
                if traced && k >= 2 {
                    p.end_trace().unwrap();
                }
            }
            let got = [&x, &seen, &after].map(|r| p.with(r, |v| *v).unwrap());
            (got, p.copies())
        });
        let prefix = |k: u64| k * (k + 1) / 2;
        let half = steps / 2;
        let seen: u64 = (0..half).map(prefix).sum();
        let after: u64 = (half..steps).map(prefix).sum();
        for (rank, run) in runs.into_iter().enumerate() {
            let (got, copies) = run.unwrap();
            let what = format!("rank {rank}, traced {traced}");
            assert_eq!(got, [prefix(steps - 1), seen, after], "{what}");
            // A copy of each version read (the first half), one eager copy nobody read,
            // and the three copies `with` makes of the last values to the other rank.
            assert_eq!(copies, half + 1 + 3, "{what}");
        }
    }
}
