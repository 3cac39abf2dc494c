//! Compiled subgraphs over the ranks of a job (`tactor::job::ShardedBuilder`) on ranks of
//! threads: random graphs whose edges cross ranks back and forth within an instance, chained
//! instances, values carried by edges checked against a serial run, every edge's order
//! checked on a clock shared by the ranks, and a failure poisoning dependents on other ranks.

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use tactor::job::{Exchange, Job, ShardedBuilder, FIRST_PORT};
use tactor::{Cause, Event, Failure, SubgraphTask};

/// A random graph: per task its job-wide worker, and its edges `(from, to, carries)`.
struct Graph {
    workers: Vec<usize>,
    edges: Vec<(usize, usize, bool)>,
}

fn random_graph(seed: u64, tasks: usize, workers: usize) -> Graph {
    let mut rng = StdRng::seed_from_u64(seed);
    let placed = (0..tasks).map(|_| rng.gen_range(0..workers)).collect();
    let mut edges = Vec::new();
    for to in 1..tasks {
        let mut from: Vec<usize> = (0..rng.gen_range(0..4))
            .map(|_| rng.gen_range(0..to))
            .collect();
        from.sort_unstable();
        from.dedup();
        edges.extend(from.into_iter().map(|f| (f, to, rng.gen_bool(0.7))));
    }
    Graph {
        workers: placed,
        edges,
    }
}

/// Task `t`'s value in instance `k`, from the values its carrying edges bring.
fn value(k: u64, t: usize, inputs: u64) -> u64 {
    (k * 1_000_003 + t as u64 * 7919).wrapping_add(inputs.wrapping_mul(31))
}

/// What every task's value is after `instances` instances, serially.
fn serial(g: &Graph, instances: u64) -> Vec<u64> {
    let mut v = vec![0u64; g.workers.len()];
    for k in 0..instances {
        for t in 0..v.len() {
            let ins = (g.edges.iter().filter(|e| e.1 == t && e.2))
                .fold(0u64, |a, e| a.wrapping_add(v[e.0]));
            v[t] = value(k, t, ins);
        }
    }
    v
}

#[test]
fn values_cross_ranks_in_every_instance_and_every_edge_keeps_its_order() {
    let (tasks, instances) = if cfg!(miri) { (12, 2) } else { (60, 12) };
    for (seed, (ranks, workers)) in [(2, 1), (3, 1), (2, 2), (3, 2)].into_iter().enumerate() {
        let g = Arc::new(random_graph(seed as u64, tasks, ranks * workers));
        let expect = serial(&g, instances);
        // The job-wide clock, and each task's start and end in the instance running.
        let clock = Arc::new(AtomicU64::new(1));
        let stamps: Arc<Vec<[AtomicU64; 2]>> =
            Arc::new((0..tasks).map(|_| Default::default()).collect());
        let late = Arc::new(AtomicU64::new(0));
        let runs = Job::run_in_process(ranks, workers, |rt, job| {
            let ex = Exchange::open(job, FIRST_PORT).unwrap();
            ex.expect(true);
            // This rank's tasks' values (slots of other ranks' tasks stay 0).
            let v: Arc<Vec<AtomicU64>> = Arc::new((0..tasks).map(|_| AtomicU64::new(0)).collect());
            let mut b = ShardedBuilder::<u64>::new(ex.clone(), 3);
            let after = b.precondition();
            let mut ids = Vec::new();
            for t in 0..tasks {
                let ins: Vec<usize> = (g.edges.iter().filter(|e| e.1 == t && e.2))
                    .map(|e| e.0)
                    .collect();
                let preds: Vec<usize> =
                    (g.edges.iter().filter(|e| e.1 == t)).map(|e| e.0).collect();
                let (v, clock, stamps, late) =
                    (v.clone(), clock.clone(), stamps.clone(), late.clone());
                let id = b.task(g.workers[t], move |&k, got| {
                    let start = clock.fetch_add(1, SeqCst);
                    for &p in &preds {
                        if stamps[p][1].load(SeqCst) >= start || stamps[p][1].load(SeqCst) == 0 {
                            late.fetch_add(1, SeqCst);
                        }
                    }
                    // An input from another rank is in the message; one from this rank, here.
                    let input = |i: usize| match got.from(SubgraphTask(i as u32)) {
                        Some(bytes) => u64::from_le_bytes(bytes.try_into().unwrap()),
                        None => v[i].load(SeqCst),
                    };
                    let sum = ins.iter().fold(0u64, |a, &i| a.wrapping_add(input(i)));
                    v[t].store(value(k, t, sum), SeqCst);
                    stamps[t][0].store(start, SeqCst);
                    stamps[t][1].store(clock.fetch_add(1, SeqCst), SeqCst);
                });
                b.wait_for(after, id);
                ids.push(id);
            }
            for &(from, to, carries) in &g.edges {
                let (f, t) = (ids[from], ids[to]);
                if carries {
                    let vp = v.clone();
                    b.edge_carrying(f, t, 8, move |_, out| {
                        out.copy_from_slice(&vp[from].load(SeqCst).to_le_bytes())
                    });
                } else {
                    b.edge(f, t);
                }
            }
            let graph = b.compile(rt).unwrap();
            let mut last = Event::triggered();
            for k in 0..instances {
                last = graph.instantiate(k, &[last]).completion;
                // Stamps are per instance: the next starts once every rank is done.
                last.wait().unwrap();
                job.barrier().unwrap();
                if job.rank() == 0 {
                    stamps.iter().for_each(|s| s[1].store(0, SeqCst));
                }
                job.barrier().unwrap();
                last = Event::triggered();
            }
            let mine = (0..tasks).filter(|&t| g.workers[t] / workers == job.rank());
            mine.map(|t| (t, v[t].load(SeqCst))).collect::<Vec<_>>()
        });
        let mut seen = 0;
        for run in runs {
            for (t, got) in run.unwrap() {
                assert_eq!(got, expect[t], "task {t} on {ranks} ranks × {workers}");
                seen += 1;
            }
        }
        assert_eq!(seen, tasks);
        assert_eq!(
            late.load(SeqCst),
            0,
            "a task started before a predecessor ended"
        );
    }
}

#[test]
fn chained_instances_overlap_across_ranks_and_keep_their_messages() {
    // Rank 0 writes each count into one buffer; rank 1 reads each count from its message,
    // with instances chained by their completions only (no barrier between ranks): each
    // instance's message is kept for it, whatever the sender did since.
    let n = if cfg!(miri) { 3 } else { 200 };
    let runs = Job::run_in_process(2, 1, |rt, job| {
        let ex = Exchange::open(job, FIRST_PORT).unwrap();
        ex.expect(true);
        let (count, seen) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(std::sync::Mutex::new(Vec::new())),
        );
        let mut b = ShardedBuilder::<u64>::new(ex, 0);
        let after = b.precondition();
        let c = count.clone();
        let up = b.task(0, move |&k, _| c.store(k * k, SeqCst));
        let s = seen.clone();
        let read = b.task(1, move |_, got| {
            let bytes = got.from(up).expect("a count from rank 0");
            s.lock()
                .unwrap()
                .push(u64::from_le_bytes(bytes.try_into().unwrap()))
        });
        b.wait_for(after, up);
        b.wait_for(after, read);
        let c = count.clone();
        b.edge_carrying(up, read, 8, move |_, out| {
            out.copy_from_slice(&c.load(SeqCst).to_le_bytes())
        });
        let graph = b.compile(rt).unwrap();
        let mut last = Event::triggered();
        for k in 0..n {
            last = graph.instantiate(k, &[last]).completion;
        }
        last.wait().unwrap();
        let got = seen.lock().unwrap().clone();
        got
    });
    let runs: Vec<_> = runs.into_iter().map(Result::unwrap).collect();
    assert!(runs[0].is_empty());
    assert_eq!(runs[1], (0..n).map(|k| k * k).collect::<Vec<_>>());
}

#[test]
fn a_failed_task_poisons_its_dependents_on_other_ranks() {
    // 0 → 1 → 2 over three ranks; task 0 fails in instance 1 only.
    let runs = Job::run_in_process(3, 1, |rt, job| {
        let ex = Exchange::open(job, FIRST_PORT).unwrap();
        ex.expect(true);
        let mut b = ShardedBuilder::<u64>::new(ex, 1);
        let first = b.task(0, |&k, _| {
            if k == 1 {
                tactor::fail("no input in instance 1");
            }
        });
        let mid = b.task(1, |_, _| ());
        let end = b.task(2, |_, _| ());
        b.edge_carrying(first, mid, 4, |_, _| ());
        b.edge(mid, end);
        let graph = b.compile(rt).unwrap();
        let ok = graph.instantiate(0, &[]).completion.wait();
        let bad = graph.instantiate(1, &[]).completion.wait();
        (ok, bad)
    });
    for (rank, run) in runs.into_iter().enumerate() {
        let (ok, bad) = run.unwrap();
        ok.unwrap();
        let e = bad.unwrap_err();
        let Failure::Task { cause, .. } = e.failure() else {
            panic!("rank {rank}: {e}");
        };
        let Cause::Failed(why) = cause else {
            panic!("rank {rank}: {e}");
        };
        assert!(why.contains("no input in instance 1"), "rank {rank}: {why}");
        if rank > 0 {
            assert!(why.starts_with(&format!("rank {}: ", rank - 1)), "{why}");
        }
    }
}

#[test]
fn a_bad_worker_is_refused_on_every_rank() {
    let runs = Job::run_in_process(2, 2, |rt, job| {
        let ex = Exchange::open(job, FIRST_PORT).unwrap();
        let mut b = ShardedBuilder::<()>::new(ex, 0);
        b.task(3, |_, _| ());
        b.task(4, |_, _| ());
        b.compile(rt).err().map(|e| e.to_string())
    });
    for run in runs {
        let e = run.unwrap().expect("worker 4 of 4 is refused");
        assert!(e.contains("worker 4"), "{e}");
    }
}

#[test]
fn a_cycle_through_two_ranks_is_refused_on_every_rank() {
    // Each rank's shard alone is acyclic (rank 0: the receive, then d, then a; rank 1: the
    // receive, then c); the cycle closes only through the other rank, so only the whole
    // graph's check can see it.
    let runs = Job::run_in_process(2, 2, |rt, job| {
        let ex = Exchange::open(job, FIRST_PORT).unwrap();
        let mut b = ShardedBuilder::<()>::new(ex, 0);
        let a = b.task(0, |_, _| ());
        let c = b.task(2, |_, _| ());
        let d = b.task(1, |_, _| ());
        b.edge(a, c);
        b.edge_carrying(c, d, 8, |_, _| ());
        b.edge(d, a);
        b.compile(rt).err()
    });
    for run in runs {
        let e = run.unwrap().expect("the cycle a -> c -> d -> a is refused");
        assert!(matches!(e, tactor::SubgraphError::Cycle(0..=2)), "{e:?}");
    }
}

#[test]
fn a_rank_with_one_worker_receives_only_after_it_sent_what_its_level_owes() {
    // Each rank's source waits for a late precondition and sends to the other rank; each
    // rank's receive, ready at once, pulls its message holding its worker's part of the
    // instance. Pulled before its own rank's send of the same level, each would hold the
    // source the other rank waits for: both ranks would wait for good.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runs = Job::run_in_process(2, 1, |rt, job| {
            let ex = Exchange::open(job, FIRST_PORT).unwrap();
            ex.expect(true);
            let me = job.rank();
            let mut b = ShardedBuilder::<u64>::new(ex, 2);
            let late = b.precondition();
            let src: Vec<SubgraphTask> = (0..2)
                .map(|w| b.task(w, move |&k, _| assert!(k < 10)))
                .collect();
            let seen = Arc::new(AtomicU64::new(0));
            for (w, &from) in [src[1], src[0]].iter().enumerate() {
                let s = seen.clone();
                let dst = b.task(w, move |_, got| {
                    let bytes = got.from(from).expect("a value from the other rank");
                    s.store(u64::from_le_bytes(bytes.try_into().unwrap()), SeqCst)
                });
                b.edge_carrying(from, dst, 8, move |&k, out| {
                    out.copy_from_slice(&(k * 10 + 1 - w as u64).to_le_bytes())
                });
                b.wait_for(late, src[w]);
            }
            let graph = b.compile(rt).unwrap();
            let go = tactor::UserEvent::new();
            let instance = graph.instantiate(3, &[go.event()]);
            std::thread::sleep(std::time::Duration::from_millis(20));
            go.trigger().unwrap();
            instance.completion.wait().unwrap();
            (me, seen.load(SeqCst))
        });
        let _ = tx.send(runs);
    });
    let runs = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the ranks finish (a minute is far beyond what they need)");
    for run in runs {
        let (me, seen) = run.unwrap();
        assert_eq!(seen, 30 + 1 - me as u64, "rank {me}");
    }
}
