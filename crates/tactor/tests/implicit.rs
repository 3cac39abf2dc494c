//! Implicit parallelism against sequential execution: random programs over a few regions
//! (random reads, writes, read-writes and reductions) run launched one by one, traced, and
//! interpreted in program order must observe and leave the same values; traces that differ
//! from their recording are refused; panics poison what depends on them.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tactor::implicit::{
    constant, read, read_write, reduce, write, Program, Read, Region, Sum, TraceError,
};
use tactor::{Placement, Runtime};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Read,
    Write,
    ReadWrite,
    Reduce,
}

/// One launch: reads `inputs`, then applies `kind` to `target` (nothing for a pure read).
#[derive(Clone, Debug)]
struct Op {
    id: u64,
    inputs: Vec<usize>,
    target: usize,
    kind: Kind,
}

fn mix(a: u64, b: u64) -> u64 {
    (a ^ b.rotate_left(17))
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(29)
}

/// What op `id` computes from what it read.
fn value(id: u64, seen: u64) -> u64 {
    mix(id, seen)
}

fn random_ops(rng: &mut StdRng, regions: usize, n: usize, first_id: u64) -> Vec<Op> {
    (0..n)
        .map(|i| {
            let target = rng.gen_range(0..regions);
            let kind = match rng.gen_range(0..10) {
                0..=2 => Kind::Read,
                3..=4 => Kind::Write,
                5..=6 => Kind::ReadWrite,
                _ => Kind::Reduce,
            };
            let mut inputs: Vec<usize> = (0..rng.gen_range(0..3))
                .map(|_| rng.gen_range(0..regions))
                .filter(|&r| r != target)
                .collect();
            inputs.sort();
            inputs.dedup();
            Op {
                id: first_id + i as u64,
                inputs,
                target,
                kind,
            }
        })
        .collect()
}

/// Program order, one op after the other: the reference. Returns what each op saw.
fn sequential(ops: &[Op], state: &mut [u64], seen: &mut Vec<(u64, u64)>) {
    for op in ops {
        let mut s = op.inputs.iter().fold(0, |acc, &r| mix(acc, state[r]));
        if matches!(op.kind, Kind::Read | Kind::ReadWrite) {
            s = mix(s, state[op.target]);
        }
        seen.push((op.id, s));
        let v = value(op.id, s);
        match op.kind {
            Kind::Read => {}
            Kind::Write | Kind::ReadWrite => state[op.target] = v,
            Kind::Reduce => state[op.target] = state[op.target].wrapping_add(v % 1000),
        }
    }
}

/// Where tasks report what they saw: one slot per op id.
struct Log(Vec<AtomicU64>);

impl Log {
    fn new(n: usize) -> Arc<Log> {
        Arc::new(Log((0..n).map(|_| AtomicU64::new(u64::MAX)).collect()))
    }
    fn seen(&self, id: u64) -> u64 {
        self.0[id as usize].load(Relaxed)
    }
}

fn jitter(id: u64) {
    if id % 7 == 0 {
        std::thread::yield_now();
    }
    if id % 5 == 0 {
        for _ in 0..(id % 300) {
            std::hint::spin_loop();
        }
    }
}

/// Launches `op` on `p`.
fn launch(p: &mut Program, regions: &[Region<u64>], op: &Op, log: &Arc<Log>) {
    let inputs: Vec<_> = op.inputs.iter().map(|&r| read(&regions[r])).collect();
    let t = &regions[op.target];
    let (id, log) = (op.id, log.clone());
    let place = Placement::Any;
    let fold = move |ins: tactor::implicit::Inputs<'_, u64>| ins.iter().fold(0, |a, &v| mix(a, v));
    match op.kind {
        Kind::Read => p.launch(place, (inputs, read(t)), move |(ins, t)| {
            jitter(id);
            log.0[id as usize].store(mix(fold(ins), *t), Relaxed);
        }),
        Kind::Write => p.launch(place, (inputs, write(t)), move |(ins, t)| {
            jitter(id);
            let s = fold(ins);
            log.0[id as usize].store(s, Relaxed);
            *t = value(id, s);
        }),
        Kind::ReadWrite => p.launch(place, (inputs, read_write(t)), move |(ins, t)| {
            jitter(id);
            let s = mix(fold(ins), *t);
            log.0[id as usize].store(s, Relaxed);
            *t = value(id, s);
        }),
        Kind::Reduce => p.launch(place, (inputs, reduce::<Sum, _>(t)), move |(ins, mut t)| {
            jitter(id);
            let s = fold(ins);
            log.0[id as usize].store(s, Relaxed);
            t.apply(value(id, s) % 1000);
        }),
    }
}

fn values(p: &mut Program, regions: &[Region<u64>]) -> Vec<u64> {
    regions.iter().map(|r| p.with(r, |v| *v).unwrap()).collect()
}

/// Checks that `p` ended with `expect` and that every op read what the sequential run did.
fn check_run(
    p: &mut Program,
    regions: &[Region<u64>],
    expect: &[u64],
    seen: &[(u64, u64)],
    log: &Log,
    seed: u64,
) {
    assert_eq!(values(p, regions), expect, "seed {seed}: final values");
    p.finish().unwrap();
    for &(id, s) in seen {
        assert_eq!(log.seen(id), s, "seed {seed}: what op {id} read");
    }
}

/// `ops` with `offset` added to their ids.
fn numbered(ops: &[Op], offset: u64) -> Vec<Op> {
    ops.iter()
        .map(|o| Op {
            id: o.id + offset,
            ..o.clone()
        })
        .collect()
}

#[test]
fn random_programs_equal_their_sequential_execution() {
    let rt = Runtime::builder().workers(3).pin(false).build().unwrap();
    let (seeds, len) = if cfg!(miri) { (2, 12) } else { (40, 60) };
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let n_regions = rng.gen_range(1..6);
        let ops = random_ops(&mut rng, n_regions, len, 0);
        let init: Vec<u64> = (0..n_regions as u64).map(|i| i * 1000 + seed).collect();
        let mut expect = init.clone();
        let mut seen = Vec::new();
        sequential(&ops, &mut expect, &mut seen);

        let mut p = Program::new(&rt);
        let regions: Vec<_> = init.iter().map(|&v| p.region(v)).collect();
        let log = Log::new(ops.len());
        for op in &ops {
            launch(&mut p, &regions, op, &log);
        }
        check_run(&mut p, &regions, &expect, &seen, &log, seed);
    }
}

#[test]
fn traced_fragments_equal_their_sequential_execution() {
    let rt = Runtime::builder().workers(3).pin(false).build().unwrap();
    let (seeds, longest, reps) = if cfg!(miri) { (2, 6, 3) } else { (30, 25, 6) };
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(1000 + seed);
        let n_regions = rng.gen_range(1..6);
        let len = rng.gen_range(1..longest);
        let body = random_ops(&mut rng, n_regions, len, 0);
        let init: Vec<u64> = (0..n_regions as u64).map(|i| i + seed).collect();
        let mut expect = init.clone();
        let mut p = Program::new(&rt);
        let regions: Vec<_> = init.iter().map(|&v| p.region(v)).collect();
        // Ids: each repetition's ops and the launches between repetitions get their own.
        let per = body.len() as u64 + 10;
        let log = Log::new((reps * per) as usize);
        let mut seen = Vec::new();
        for rep in 0..reps {
            let ops = numbered(&body, rep * per);
            sequential(&ops, &mut expect, &mut seen);
            p.trace(7, |p| {
                for op in &ops {
                    launch(p, &regions, op, &log);
                }
            })
            .unwrap();
            // Untraced launches between executions change the state the trace enters.
            let len = rng.gen_range(0..4);
            let between = random_ops(&mut rng, n_regions, len, rep * per + body.len() as u64);
            sequential(&between, &mut expect, &mut seen);
            for op in &between {
                launch(&mut p, &regions, op, &log);
            }
        }
        assert_eq!(p.recorded_traces(), 1);
        check_run(&mut p, &regions, &expect, &seen, &log, seed);
    }
}

#[test]
fn a_replay_that_differs_is_refused_naming_the_launch_and_does_not_run() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let mut p = Program::new(&rt);
    let a = p.region(1u64);
    let b = p.region(2u64);
    // `swap`: the second launch's accesses change; `first_only`: it is left out.
    let body = |p: &mut Program, swap: bool, first_only: bool| {
        p.launch(Placement::Any, read_write(&a), |a| *a += 1);
        if first_only {
            return;
        }
        let (src, dst) = if swap { (&a, &b) } else { (&b, &a) };
        p.launch(Placement::Any, (read(src), read_write(dst)), |(s, d)| {
            *d += *s
        });
    };
    p.trace(3, |p| body(p, false, false)).unwrap();
    assert_eq!(p.with(&a, |a| *a).unwrap(), 4);
    let err = p.trace(3, |p| body(p, true, false)).unwrap_err();
    match &err {
        TraceError::Mismatch {
            id: 3, launch: 1, ..
        } => {}
        other => panic!("wrong error: {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("launch 1") && text.contains("region 0") && text.contains("region 1"),
        "{text}"
    );
    // Nothing of the refused fragment ran, not even its matching first launch.
    assert_eq!(p.with(&a, |a| *a).unwrap(), 4);
    assert_eq!(p.with(&b, |b| *b).unwrap(), 2);

    let err = p.trace(3, |p| body(p, false, true)).unwrap_err();
    assert!(
        matches!(
            err,
            TraceError::Shorter {
                id: 3,
                recorded: 2,
                got: 1
            }
        ),
        "{err}"
    );
    let err = p
        .trace(3, |p| {
            body(p, false, false);
            p.launch(Placement::Any, read(&a), |_| {});
        })
        .unwrap_err();
    assert!(
        matches!(err, TraceError::Mismatch { launch: 2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("recording ends"), "{err}");
    // A different closure with the same accesses is a different task.
    let err = p
        .trace(3, |p| {
            p.launch(Placement::Any, read_write(&a), |a| *a += 2);
            p.launch(Placement::Any, (read(&b), read_write(&a)), |(s, d)| {
                *d += *s
            });
        })
        .unwrap_err();
    assert!(
        matches!(err, TraceError::Mismatch { launch: 0, .. }),
        "{err}"
    );
    // A matching replay still works.
    p.trace(3, |p| body(p, false, false)).unwrap();
    assert_eq!(p.with(&a, |a| *a).unwrap(), 7);

    assert!(matches!(p.end_trace(), Err(TraceError::NotOpen)));
    p.begin_trace(1).unwrap();
    assert!(matches!(
        p.begin_trace(2),
        Err(TraceError::AlreadyOpen { open: 1, id: 2 })
    ));
    p.end_trace().unwrap();
}

#[test]
fn a_panicking_task_poisons_what_depends_on_it_and_nothing_else() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let mut p = Program::new(&rt);
    let a = p.region(0u64);
    let b = p.region(0u64);
    let ran = Arc::new(AtomicU64::new(0));
    p.launch(Placement::Any, write(&a), |_| panic!("boom in the writer"));
    let r = ran.clone();
    p.launch(Placement::Any, (read(&a), write(&b)), move |(_, _)| {
        r.fetch_add(1, Relaxed);
    });
    let c = p.region(5u64);
    p.launch(Placement::Any, read_write(&c), |c| *c += 1);
    let err = p.with(&b, |b| *b).unwrap_err();
    assert!(err.to_string().contains("boom in the writer"), "{err}");
    assert_eq!(
        ran.load(Relaxed),
        0,
        "the reader of a poisoned region did not run"
    );
    assert_eq!(p.with(&c, |c| *c).unwrap(), 6);
    assert!(p.finish().is_err());

    // The same inside a trace.
    let mut p = Program::new(&rt);
    let a = p.region(0u64);
    let b = p.region(0u64);
    for i in 0..3u64 {
        p.trace(9, |p| {
            p.launch(Placement::Any, write(&a), move |a| {
                assert!(i != 1, "boom in replay {i}");
                *a = i;
            });
            p.launch(Placement::Any, (read(&a), write(&b)), |(a, b)| *b = *a);
        })
        .unwrap();
        let got = p.with(&b, |b| *b);
        // Poison flows along every dependence, write-after-read included: the replay after
        // the failing one waits for the poisoned readers and does not run either.
        match i {
            0 => assert_eq!(got.unwrap(), 0),
            _ => assert!(got.unwrap_err().to_string().contains("boom in replay 1")),
        }
    }
}

#[test]
fn reductions_of_one_group_all_apply() {
    let rt = Runtime::builder().workers(3).pin(false).build().unwrap();
    let mut p = Program::new(&rt);
    let total = p.region(0u64);
    let other = p.region(0u64);
    // Under Miri fewer launches a group (each sums 0..n).
    let (rounds, n) = if cfg!(miri) { (2, 20) } else { (20, 50) };
    for round in 0..rounds {
        for i in 0..n {
            p.launch(Placement::Any, reduce::<Sum, _>(&total), move |mut t| {
                t.apply(i)
            });
        }
        p.launch(Placement::Any, (read(&total), write(&other)), |(t, o)| {
            *o = *t
        });
        assert_eq!(
            p.with(&other, |o| *o).unwrap(),
            (round + 1) * (n * (n - 1) / 2)
        );
    }
}

#[test]
#[should_panic(expected = "declares region 0 twice")]
fn declaring_a_region_twice_for_writing_is_refused() {
    let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
    let mut p = Program::new(&rt);
    let a = p.region(0u64);
    p.launch(Placement::Any, (read(&a), write(&a)), |_| {});
}

#[test]
#[should_panic(expected = "belongs to another program")]
fn a_region_of_another_program_is_refused() {
    let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
    let mut p = Program::new(&rt);
    let mut q = Program::new(&rt);
    let a = q.region(0u64);
    let _ = p.region(0u64);
    p.launch(Placement::Any, read(&a), |_| {});
}

#[test]
fn constants_and_inline_input_lists_reach_tasks() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let mut p = Program::new(&rt);
    let k = p.constant(vec![10u64, 20, 30]);
    let xs: Vec<_> = (0..3u64).map(|i| p.region(i)).collect();
    let sum = p.region(0u64);
    for _ in 0..3 {
        let inputs: smallvec::SmallVec<[Read<u64>; 2]> = xs.iter().map(read).collect();
        p.launch(
            Placement::Any,
            (constant(&k), inputs, read_write(&sum)),
            |(k, ins, s)| *s += ins.iter().zip(k.iter()).map(|(x, k)| x * k).sum::<u64>(),
        );
        for x in &xs {
            p.launch(Placement::Any, (constant(&k), read_write(x)), |(k, x)| {
                *x += k[0]
            });
        }
    }
    // Each round reads what the previous round's increments left: [0, 1, 2], then +10, +20.
    assert_eq!(p.with(&sum, |s| *s).unwrap(), 80 + 680 + 1280);
    assert_eq!(k[2], 30);
}

#[test]
fn a_program_dropped_after_a_failure_keeps_its_data_for_tasks_still_running() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let started = Arc::new(AtomicU64::new(0));
    {
        let mut p = Program::new(&rt);
        let a = p.region(0u64);
        let b = p.region(vec![7u64; 64]);
        let c = p.region(0u64);
        let s = started.clone();
        // `slow` still reads `b` when `late` is poisoned by `boom`: the program's fence
        // fails before `slow` is done, and its storage must outlive the program.
        p.launch(Placement::Worker(0), read(&b), move |b| {
            s.store(1, Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(if cfg!(miri) {
                1
            } else {
                30
            }));
            assert_eq!(b.iter().sum::<u64>(), 7 * 64);
            s.store(2, Relaxed);
        });
        p.launch(Placement::Worker(1), write(&a), |_| panic!("boom"));
        p.launch(Placement::Any, (read(&a), read(&b), write(&c)), |_| {});
        while started.load(Relaxed) == 0 {
            std::thread::yield_now();
        }
    }
    drop(rt);
    assert_eq!(
        started.load(Relaxed),
        2,
        "the slow reader finished before the runtime ended"
    );
}

// Not under Miri: automatic tracing adds no unsafe code of its own (replays are traced
// fragments, which `traced_fragments_equal_their_sequential_execution` checks there, and
// `implicit_outside`'s automatic-tracing test runs there too), and this one took a tenth of
// Miri's time.
#[test]
#[cfg_attr(miri, ignore = "no unsafe code of its own; see above")]
fn automatic_tracing_finds_repeats_falls_back_on_breaks_and_never_changes_results() {
    let rt = Runtime::builder().workers(3).pin(false).build().unwrap();
    let (seeds, reps) = (12, 400);
    let mut traced = 0;
    let mut fell_back = 0;
    for seed in 0..seeds {
        let mut rng = StdRng::seed_from_u64(5000 + seed);
        let n_regions = rng.gen_range(2..6);
        let len = rng.gen_range(3..12);
        let body = random_ops(&mut rng, n_regions, len, 0);
        let init: Vec<u64> = (0..n_regions as u64).map(|i| 3 * i + seed).collect();
        let mut expect = init.clone();
        let mut p = Program::new(&rt);
        p.auto_trace(true);
        let regions: Vec<_> = init.iter().map(|&v| p.region(v)).collect();
        let per = body.len() as u64 + 4;
        let log = Log::new((reps * per) as usize);
        let mut seen = Vec::new();
        for rep in 0..reps {
            let mut ops = numbered(&body, rep * per);
            // Now and then the pattern breaks: an op changes its kind, or extra ops come.
            if rng.gen_ratio(1, 300) {
                let k = rng.gen_range(0..ops.len());
                ops[k].kind = Kind::Write;
            }
            if rng.gen_ratio(1, 400) {
                let extra = random_ops(&mut rng, n_regions, 2, rep * per + body.len() as u64);
                ops.extend(extra);
            }
            sequential(&ops, &mut expect, &mut seen);
            for op in &ops {
                launch(&mut p, &regions, op, &log);
            }
            // Reading back mid-stream closes an open fragment.
            if rng.gen_ratio(1, 300) {
                let r = rng.gen_range(0..n_regions);
                assert_eq!(
                    p.with(&regions[r], |v| *v).unwrap(),
                    expect[r],
                    "seed {seed}"
                );
            }
        }
        check_run(&mut p, &regions, &expect, &seen, &log, seed);
        let stats = p.auto_stats();
        assert!(stats.recorded <= stats.fragments);
        traced += stats.fragments;
        fell_back += stats.fell_back;
    }
    assert!(traced > 0, "some fragments were traced");
    assert!(fell_back > 0, "some replays broke and fell back");
}
