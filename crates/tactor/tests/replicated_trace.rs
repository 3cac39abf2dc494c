//! Traces of a replicated program on several ranks: a replay that starts from the record its
//! recording started from replays its script (each rank projects and books only its own
//! points and copies) and gets what the untraced program gets, copies included; a replay
//! that differs fails on every rank, runs none of its tasks and leaves the program usable; a
//! point that moves to another rank fails the job instead of hanging it.

use std::sync::atomic::{AtomicUsize, Ordering};
use tactor::implicit::Write;
use tactor::implicit::{read, read_write, write, ConstRef, Read, Region, Replicated, TraceError};
use tactor::job::Job;

/// Cells of the stencil.
const N: usize = 8;

/// What the points read: the two rows, the ranks, and where point 0 is placed (a test moves
/// it).
type Shared = ([Vec<Region<u64>>; 2], usize, AtomicUsize);
type Stencil = ((Read<u64>, Read<u64>, Read<u64>), Write<u64>);

fn rank_of(i: usize, ranks: usize) -> usize {
    i * ranks / N
}

/// Point `i` of step `t`: its three neighbours of the row before, its cell of the row now.
fn stencil(c: ConstRef<Shared>, t: usize, i: u32) -> (usize, Stencil) {
    let ((rows, ranks, first), i) = (c.get(), i as usize);
    let (now, before) = (&rows[(t + 1) % 2], &rows[t % 2]);
    // A test changes point 0: 1 places it on rank 1, 2 makes it read its own cell twice.
    let change = if i == 0 {
        first.load(Ordering::Relaxed)
    } else {
        0
    };
    let left = if change == 2 { i } else { (i + N - 1) % N };
    let ins = (
        read(&before[left]),
        read(&before[i]),
        read(&before[(i + 1) % N]),
    );
    let rank = if change == 1 { 1 } else { rank_of(i, *ranks) };
    (rank, (ins, write(&now[i])))
}

fn step(((l, c, r), out): ((&u64, &u64, &u64), &mut u64)) {
    *out = l.wrapping_mul(3).wrapping_add(*c).wrapping_add(*r) % 1_000_003;
}

/// The serial program's rows after `steps` steps, and the sum a last task adds up.
fn serial(steps: usize) -> Vec<u64> {
    let mut row: Vec<u64> = (0..N as u64).map(|i| i * i + 1).collect();
    for _ in 0..steps {
        let old = row.clone();
        for (i, cell) in row.iter_mut().enumerate() {
            step(((&old[(i + N - 1) % N], &old[i], &old[(i + 1) % N]), cell));
        }
    }
    row
}

/// How the stencil's program is traced.
#[derive(Clone, Copy, PartialEq)]
enum Style {
    Plain,
    /// Steps in traces of two, by hand.
    Traced,
    /// By the runtime ([`Replicated::auto_trace`]).
    Auto,
}

/// The stencil's program: steps in traces of two (by parity), each also a launch on the last
/// rank that adds cell 0 into an accumulator.
struct Run {
    rows: Vec<u64>,
    acc: u64,
    copies: u64,
    replays: u64,
    recorded: usize,
    auto: tactor::implicit::AutoStats,
}

fn stencil_program(
    rt: &tactor::Runtime,
    job: &std::sync::Arc<Job>,
    style: Style,
    steps: usize,
) -> Run {
    let mut p = Replicated::new(rt, job);
    p.auto_trace(style == Style::Auto);
    let (ranks, local) = (job.ranks(), rt.workers());
    let home = |i: usize| rank_of(i, ranks) * local;
    let rows: [Vec<Region<u64>>; 2] = [
        (0..N)
            .map(|i| p.region(home(i), (i * i + 1) as u64))
            .collect(),
        (0..N).map(|i| p.region(home(i), 0)).collect(),
    ];
    let acc = p.region(p.workers() - 1, 0u64);
    let shared = p.constant((rows.clone(), ranks, AtomicUsize::new(0)));
    let mut t = 0;
    while t < steps {
        let traced = style == Style::Traced && t + 2 <= steps;
        if traced {
            p.begin_trace(3).unwrap();
        }
        for _ in 0..if traced { 2 } else { 1 } {
            p.index_launch(N as u32, &shared, t, stencil, |_, _, _, r| step(r));
            let now = &rows[(t + 1) % 2][0];
            p.launch_on_rank(ranks - 1, (read(now), read_write(&acc)), |(c, a)| {
                *a = a.wrapping_add(*c)
            });
            t += 1;
        }
        if traced {
            p.end_trace().unwrap();
        }
    }
    let rows = (rows[steps % 2].iter())
        .map(|c| p.with(c, |v| *v).unwrap())
        .collect();
    Run {
        rows,
        acc: p.with(&acc, |a| *a).unwrap(),
        copies: p.copies(),
        replays: p.script_replays(),
        recorded: p.local().recorded_traces(),
        auto: p.auto_stats(),
    }
}

/// Runs the stencil untraced and in `style` for `steps` steps on each shape (ranks ×
/// workers): both get the serial rows and accumulator on every rank, and `style` issues the
/// copies the full bookkeeping issues; `more` checks the rest of each rank's run.
fn against_untraced(
    style: Style,
    steps: usize,
    shapes: &[(usize, usize)],
    more: impl Fn(&str, usize, &Run),
) {
    let want = serial(steps);
    let acc: u64 = (1..=steps).map(|t| serial(t)[0]).fold(0, u64::wrapping_add);
    for &(ranks, workers) in shapes {
        let run = |style| {
            Job::run_in_process(ranks, workers, move |rt, job| {
                stencil_program(rt, job, style, steps)
            })
        };
        let (plain, styled) = (run(Style::Plain), run(style));
        for (rank, (plain, styled)) in plain.into_iter().zip(styled).enumerate() {
            let (plain, styled) = (plain.unwrap(), styled.unwrap());
            let what = format!("{ranks} ranks × {workers}, rank {rank}");
            assert_eq!(plain.rows, want, "{what}, untraced");
            assert_eq!(styled.rows, want, "{what}");
            assert_eq!((plain.acc, styled.acc), (acc, acc), "{what}");
            // The scripts issued the copies the full bookkeeping issues.
            assert_eq!(styled.copies, plain.copies, "{what}");
            assert_eq!(plain.auto, Default::default(), "{what}");
            more(&what, ranks, &styled);
        }
    }
}

#[test]
fn a_replay_from_the_same_record_replays_its_script_and_gets_the_serial_result() {
    let steps = if cfg!(miri) { 9 } else { 41 };
    let shapes: &[(usize, usize)] = if cfg!(miri) {
        &[(2, 1)]
    } else {
        &[(2, 1), (3, 1), (2, 2), (3, 2)]
    };
    against_untraced(Style::Traced, steps, shapes, |what, _, traced| {
        // Three starting records (nothing copied yet; copies fetched; copies sent eagerly),
        // each recorded once; every later execution replayed its script.
        assert_eq!(traced.recorded, 3, "{what}");
        assert_eq!(traced.replays, steps as u64 / 2 - 3, "{what}");
    });
}

/// Automatic tracing finds the stencil's repeating calls (an index launch and a launch each
/// step) and runs them as traces of the replicated program: on several ranks every rank
/// replays scripts, issues the copies the full bookkeeping issues, and gets the serial
/// result; in a job of one the process's own traces do.
#[test]
fn automatic_tracing_on_ranks_replays_scripts_and_gets_the_serial_result() {
    let steps = if cfg!(miri) { 40 } else { 201 };
    let shapes: &[(usize, usize)] = if cfg!(miri) {
        &[(2, 1)]
    } else {
        &[(1, 2), (2, 1), (3, 2)]
    };
    against_untraced(Style::Auto, steps, shapes, |what, ranks, auto| {
        let s = auto.auto;
        assert!(s.fragments >= 2 && s.recorded >= 1, "{what}: {s:?}");
        // In a job of one the fragments are the process's own traces, not scripts.
        let scripts = if ranks == 1 {
            0
        } else {
            s.fragments - s.recorded
        };
        assert!(auto.replays >= scripts, "{what}: {s:?}");
    });
}

/// Where the calls stop repeating in the middle of a fragment, and where data is read back
/// there, the calls held so far are issued untraced, in order: results never change.
#[test]
fn automatic_tracing_on_ranks_falls_back_where_calls_change_and_keeps_the_serial_result() {
    let rounds = if cfg!(miri) { 40 } else { 200 };
    let (odd, read_at) = (rounds * 3 / 4 + 1, rounds / 2 + 1);
    let runs = Job::run_in_process(2, 1, move |rt, job| {
        let mut p = Replicated::new(rt, job);
        p.auto_trace(true);
        let (x, y) = (p.region(0, 0u64), p.region(1, 0u64));
        let mut seen = 0;
        for k in 0..rounds {
            two_launches(&mut p, &x, &y, k == odd);
            if k == read_at {
                seen = p.with(&y, |y| *y).unwrap();
            }
        }
        let got = [&x, &y].map(|r| p.with(r, |v| *v).unwrap());
        (got, seen, p.auto_stats(), p.script_replays())
    });
    let y = |upto: u64| {
        (1..=upto)
            .map(|k| if k == odd + 1 { 100 * k } else { k })
            .sum::<u64>()
    };
    for (rank, run) in runs.into_iter().enumerate() {
        let (got, seen, stats, replays) = run.unwrap();
        assert_eq!(got, [rounds, y(rounds)], "rank {rank}");
        assert_eq!(seen, y(read_at + 1), "rank {rank}");
        assert!(
            stats.fell_back > 0 && stats.fragments > 0,
            "rank {rank}: {stats:?}"
        );
        assert!(replays > 0, "rank {rank}");
    }
}

/// Launches `x`'s step on rank 0 and, on the last rank, adds `x` into `y` (or, with `other`,
/// a task of another kind there).
fn two_launches(p: &mut Replicated, x: &Region<u64>, y: &Region<u64>, other: bool) {
    let last = p.workers() - 1;
    p.launch(0, read_write(x), |x| *x += 1);
    if other {
        p.launch(last, (read(x), read_write(y)), |(x, y)| *y += 100 * *x);
    } else {
        p.launch(last, (read(x), read_write(y)), |(x, y)| *y += *x);
    }
}

#[test]
fn a_replay_whose_calls_differ_fails_on_every_rank_runs_nothing_and_leaves_the_program_usable() {
    let runs = Job::run_in_process(2, 1, |rt, job| {
        let mut p = Replicated::new(rt, job);
        let (x, y) = (p.region(0, 0u64), p.region(1, 0u64));
        for _ in 0..4 {
            p.begin_trace(9).unwrap();
            two_launches(&mut p, &x, &y, false);
            p.end_trace().unwrap();
        }
        p.begin_trace(9).unwrap();
        two_launches(&mut p, &x, &y, true);
        let err = p.end_trace().unwrap_err();
        // None of its tasks ran; later launches get their copies as before.
        two_launches(&mut p, &x, &y, false);
        let got = [&x, &y].map(|r| p.with(r, |v| *v).unwrap());
        (err, got, p.script_replays())
    });
    for (rank, run) in runs.into_iter().enumerate() {
        let (err, got, replays) = run.unwrap();
        assert!(
            matches!(
                err,
                TraceError::Mismatch {
                    id: 9,
                    launch: 1,
                    ..
                }
            ),
            "rank {rank}: {err}"
        );
        assert_eq!(got, [5, 1 + 2 + 3 + 4 + 5], "rank {rank}");
        assert_eq!(replays, 1, "rank {rank}");
    }
}

/// Runs the stencil on 2 ranks in traces of one step (ids 100 and 101 by parity), changing
/// point 0 as `change` says from step 8 on: what each rank's `finish` says.
fn changed_at_step_8(change: usize) -> Vec<String> {
    let runs = Job::run_in_process(2, 1, move |rt, job| {
        let mut p = Replicated::new(rt, job);
        let rows: [Vec<Region<u64>>; 2] = [
            (0..N).map(|i| p.region(rank_of(i, 2), 1)).collect(),
            (0..N).map(|i| p.region(rank_of(i, 2), 0)).collect(),
        ];
        let shared = p.constant((rows.clone(), 2, AtomicUsize::new(0)));
        for t in 0..12 {
            if t == 8 {
                // Every rank's copy of the constant, once the steps before ran: point 0 now
                // differs from its recording.
                p.fence().wait().unwrap();
                shared.2.store(change, Ordering::Relaxed);
            }
            p.begin_trace(100 + t as u64 % 2).unwrap();
            p.index_launch(N as u32, &shared, t, stencil, |_, _, _, r| step(r));
            p.end_trace().unwrap();
        }
        p.finish()
    });
    (runs.into_iter())
        .map(|run| run.unwrap().unwrap_err().to_string())
        .collect()
}

#[test]
fn a_point_that_moves_to_another_rank_in_a_replay_fails_every_rank() {
    let shown = changed_at_step_8(1);
    // Rank 0 recorded the point and finds it moved: its own error says so, or its copies
    // still awaited do (a failing rank poisons them too); rank 1 is told rank 0 failed, why.
    let why = "point 0 of a replayed index launch placed on rank 1, recorded on rank 0";
    assert!(shown[0].contains(why), "{}", shown[0]);
    assert!(
        shown[1].contains("rank 0 failed") && shown[1].contains(why),
        "{}",
        shown[1]
    );
}

#[test]
fn a_point_whose_reads_change_in_a_replay_fails_every_rank_and_names_the_trace() {
    let shown = changed_at_step_8(2);
    // Rank 0 finds the difference where the point runs, in step 8's trace: the program's
    // trace 100, not the rank's own recording of a variant (numbered from 0).
    for (rank, shown) in shown.iter().enumerate() {
        let named = shown.contains("trace 100: launch ") && shown.contains("differs from the");
        assert!(named, "rank {rank}: {shown}");
    }
    assert!(shown[1].contains("rank 0 failed"), "{}", shown[1]);
}

#[test]
fn a_rank_with_no_point_of_an_index_launch_replays_its_copies() {
    // Three ranks, points on the first two only: the third takes part through its launch.
    type Access = (Read<u64>, Read<u64>, Write<u64>);
    let runs = Job::run_in_process(3, 1, |rt, job| {
        let mut p = Replicated::new(rt, job);
        let a: Vec<Region<u64>> = (0..4).map(|i| p.region(i / 2, i as u64)).collect();
        let b: Vec<Region<u64>> = (0..4).map(|i| p.region(i / 2, 0)).collect();
        let sum = p.region(2, 0u64);
        let shared = p.constant([a.clone(), b.clone()]);
        let pairs = |c: ConstRef<[Vec<Region<u64>>; 2]>, from: usize, i: u32| -> (usize, Access) {
            let (i, rows) = (i as usize, c.get());
            let (src, dst) = (&rows[from], &rows[1 - from]);
            (
                i / 2,
                (read(&src[i]), read(&src[(i + 1) % 4]), write(&dst[i])),
            )
        };
        for _ in 0..10 {
            p.begin_trace(1).unwrap();
            for from in [0, 1] {
                p.index_launch(4, &shared, from, pairs, |_, _, _, (x, y, out)| *out = x + y);
            }
            p.launch(2, (read(&a[3]), read_write(&sum)), |(c, s)| *s += *c);
            p.end_trace().unwrap();
        }
        (p.with(&sum, |s| *s).unwrap(), p.script_replays())
    });
    // The serial program.
    let mut cells = [0u64, 1, 2, 3];
    let mut sum = 0;
    for _ in 0..10 {
        for _ in 0..2 {
            let old = cells;
            for i in 0..4 {
                cells[i] = old[i] + old[(i + 1) % 4];
            }
        }
        sum += cells[3];
    }
    for (rank, run) in runs.into_iter().enumerate() {
        let (got, replays) = run.unwrap();
        assert_eq!(got, sum, "rank {rank}");
        assert!(replays >= 7, "rank {rank}: {replays} replays");
    }
}

/// A trace that writes a region a reduction group is open on, after every round of
/// reductions: the write replaces the group's partial results in every execution (a replay
/// must not leave the group open).
#[test]
fn a_trace_that_writes_over_an_open_reduction_gets_the_serial_result() {
    use tactor::implicit::{reduce, Sum};
    let rounds: u64 = if cfg!(miri) { 4 } else { 12 };
    let runs = Job::run_in_process(2, 1, move |rt, job| {
        let mut p = Replicated::new(rt, job);
        let total = p.region(0, 0u64);
        let seen = p.region(1, 0u64);
        for k in 0..rounds {
            // Both ranks reduce into the total: a group over ranks, left open.
            for w in 0..p.workers() {
                p.launch(w, reduce::<Sum, _>(&total), move |mut s| {
                    s.apply(k + w as u64)
                });
            }
            p.begin_trace(4).unwrap();
            p.launch(0, write(&total), move |t| *t = 1000 * k);
            p.launch(1, (read(&total), read_write(&seen)), |(t, s)| *s += *t);
            p.end_trace().unwrap();
        }
        (
            p.with(&seen, |s| *s).unwrap(),
            p.with(&total, |t| *t).unwrap(),
        )
    });
    let seen: u64 = (0..rounds).map(|k| 1000 * k).sum();
    for (rank, run) in runs.into_iter().enumerate() {
        assert_eq!(run.unwrap(), (seen, 1000 * (rounds - 1)), "rank {rank}");
    }
}

/// Automatic tracing over rounds that reduce over ranks, read the total on one rank and
/// reset it on another: the fragments reduce over ranks (replayed with the bookkeeping in
/// full), and every round's total is the serial one.
#[test]
fn automatic_tracing_over_reductions_across_ranks_gets_the_serial_totals() {
    use tactor::implicit::{reduce, Sum};
    let rounds: u64 = if cfg!(miri) { 12 } else { 120 };
    let runs = Job::run_in_process(2, 1, move |rt, job| {
        let mut p = Replicated::new(rt, job);
        p.auto_trace(true);
        let total = p.region(0, 0u64);
        let seen = p.region(1, 0u64);
        for k in 0..rounds {
            for w in 0..p.workers() {
                p.launch(w, reduce::<Sum, _>(&total), move |mut s| {
                    s.apply(k + w as u64)
                });
            }
            p.launch(1, (read(&total), read_write(&seen)), |(t, s)| *s += *t);
            p.launch(0, write(&total), |t| *t = 0);
        }
        (p.with(&seen, |s| *s).unwrap(), p.auto_stats())
    });
    let seen: u64 = (0..rounds).map(|k| 2 * k + 1).sum();
    for (rank, run) in runs.into_iter().enumerate() {
        let (got, stats) = run.unwrap();
        assert_eq!(got, seen, "rank {rank}");
        assert!(stats.fragments > 0, "rank {rank}: {stats:?}");
    }
}

/// A trace begun by hand while automatic tracing holds calls runs after them: the held calls
/// are issued first, in order, in a job of one as on ranks.
#[test]
fn a_trace_begun_by_hand_runs_after_the_calls_automatic_tracing_holds() {
    let rounds = if cfg!(miri) { 40 } else { 100 };
    for ranks in [1, 2] {
        let runs = Job::run_in_process(ranks, 1, move |rt, job| {
            let mut p = Replicated::new(rt, job);
            p.auto_trace(true);
            let x = p.region(0, 1u64);
            for _ in 0..rounds {
                p.launch(0, read_write(&x), |x| {
                    *x = x.wrapping_mul(3).wrapping_add(1)
                });
            }
            p.begin_trace(9).unwrap();
            p.launch(0, read_write(&x), |x| *x = x.wrapping_add(1000));
            p.end_trace().unwrap();
            (p.with(&x, |x| *x).unwrap(), p.auto_stats())
        });
        let want = (0..rounds).fold(1u64, |x, _| x.wrapping_mul(3).wrapping_add(1));
        for (rank, run) in runs.into_iter().enumerate() {
            let (got, stats) = run.unwrap();
            assert_eq!(got, want.wrapping_add(1000), "{ranks} ranks, rank {rank}");
            assert!(stats.fell_back > 0, "{ranks} ranks, rank {rank}: {stats:?}");
        }
    }
}
