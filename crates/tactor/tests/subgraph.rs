//! Compiled subgraphs: builder errors, equivalence with dynamic execution on random DAGs,
//! many instances in flight, chaining, and poisoning.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use tactor::{Event, Failure, Placement, Runtime, SubgraphBuilder, SubgraphError, UserEvent};

mod common;
use common::{rt, wait_or_fail};

/// `normal`, or `miri` under Miri (which runs these tests about a thousand times slower).
fn scaled<T>(normal: T, miri: T) -> T {
    if cfg!(miri) {
        miri
    } else {
        normal
    }
}

#[test]
fn builder_errors_are_named() {
    let rt = rt(2);
    let mut b = SubgraphBuilder::<()>::new();
    b.task(2, |_| ());
    assert_eq!(
        b.compile(&rt).err().unwrap(),
        SubgraphError::BadWorker {
            task: 0,
            worker: 2,
            workers: 2
        }
    );
    let mut b = SubgraphBuilder::<()>::new();
    let a = b.task(0, |_| ());
    b.edge(a, tactor::SubgraphTask(7));
    assert_eq!(b.compile(&rt).err().unwrap(), SubgraphError::NoSuchTask(7));
    let mut b = SubgraphBuilder::<()>::new();
    let a = b.task(0, |_| ());
    b.edge(a, a);
    assert_eq!(b.compile(&rt).err().unwrap(), SubgraphError::SelfEdge(0));
    let mut b = SubgraphBuilder::<()>::new();
    let ids: Vec<_> = (0..4).map(|i| b.task(i % 2, |_| ())).collect();
    b.edge(ids[0], ids[1]);
    b.edge(ids[1], ids[2]);
    b.edge(ids[2], ids[3]);
    b.edge(ids[3], ids[1]);
    let err = b.compile(&rt).err().unwrap();
    assert!(matches!(err, SubgraphError::Cycle(1..=3)), "{err:?}");
    assert!(err.to_string().contains("cycle"));
    let mut b = SubgraphBuilder::<()>::new();
    let a = b.task(0, |_| ());
    b.wait_for(tactor::PreId(0), a);
    assert_eq!(
        b.compile(&rt).err().unwrap(),
        SubgraphError::NoSuchCondition(0)
    );
}

/// A random DAG run compiled, many instances chained, against the same DAG run with dynamic
/// tasks: the same values come out, and every task runs once per instance after its
/// predecessors.
#[test]
fn compiled_random_dags_match_dynamic_execution() {
    let rt = rt(2);
    let mut rng = StdRng::seed_from_u64(5);
    for _ in 0..scaled(20, 2) {
        let n = rng.gen_range(1..scaled(200, 16));
        let preds: Vec<Vec<usize>> = (0..n)
            .map(|i| {
                let mut p: Vec<usize> = (0..rng.gen_range(0..=3.min(i)))
                    .map(|_| rng.gen_range(0..i))
                    .collect();
                p.sort_unstable();
                p.dedup();
                p
            })
            .collect();
        let workers: Vec<usize> = (0..n).map(|_| rng.gen_range(0..2)).collect();
        // value[i] = instance + sum of predecessors' values (mod 2^64), stamped per instance.
        let instances = scaled(30u64, 3);
        let compiled_vals = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
        let runs = Arc::new((0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>());
        let mut b = SubgraphBuilder::<u64>::new();
        let pre = b.precondition();
        let post = b.postcondition();
        let ids: Vec<_> = (0..n)
            .map(|i| {
                let (vals, runs, preds) = (compiled_vals.clone(), runs.clone(), preds[i].clone());
                b.task(workers[i], move |k: &u64| {
                    let r = runs[i].fetch_add(1, SeqCst);
                    assert_eq!(r as u64, *k, "task {i} ran out of instance order");
                    let mut v = *k;
                    for &p in &preds {
                        assert_eq!(runs[p].load(SeqCst) as u64, k + 1, "{i} before {p}");
                        v = v.wrapping_mul(31).wrapping_add(vals[p].load(SeqCst));
                    }
                    vals[i].store(v, SeqCst);
                })
            })
            .collect();
        for (i, ps) in preds.iter().enumerate() {
            for &p in ps {
                b.edge(ids[p], ids[i]);
            }
            b.wait_for(pre, ids[i]);
            b.signal(ids[i], post);
        }
        let g = b.compile(&rt).unwrap();
        assert_eq!(g.tasks(), n);
        let mut after = Event::triggered();
        for k in 0..instances {
            let inst = g.instantiate(k, &[after]);
            after = inst.postconditions[0].clone();
        }
        after.wait().unwrap();
        // The same graph, dynamically, for the last instance only.
        let dyn_vals: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        let k = instances - 1;
        rt.scope(|s| {
            let mut evs: Vec<Event> = Vec::new();
            for i in 0..n {
                let pre: Vec<Event> = preds[i].iter().map(|&p| evs[p].clone()).collect();
                let (dv, preds) = (&dyn_vals, &preds[i]);
                evs.push(s.launch(Placement::Worker(workers[i]), &pre, move |_| {
                    let mut v = k;
                    for &p in preds {
                        v = v.wrapping_mul(31).wrapping_add(dv[p].load(SeqCst));
                    }
                    dv[i].store(v, SeqCst);
                }));
            }
        })
        .unwrap();
        for i in 0..n {
            assert_eq!(
                compiled_vals[i].load(SeqCst),
                dyn_vals[i].load(SeqCst),
                "task {i}"
            );
            assert_eq!(runs[i].load(SeqCst) as u64, instances);
        }
    }
}

#[test]
fn many_unordered_instances_in_flight() {
    let rt = rt(2);
    let hits = Arc::new(AtomicU64::new(0));
    let mut b = SubgraphBuilder::<u64>::new();
    let mut prev = None;
    for i in 0..16 {
        let h = hits.clone();
        let t = b.task(i % 2, move |x| {
            h.fetch_add(*x, SeqCst);
        });
        if let Some(p) = prev {
            b.edge(p, t);
        }
        prev = Some(t);
    }
    let g = b.compile(&rt).unwrap();
    let n = scaled(500, 12);
    let done: Vec<Event> = (1..=n).map(|k| g.instantiate(k, &[]).completion).collect();
    Event::merge(&done).wait().unwrap();
    assert_eq!(hits.load(SeqCst), 16 * (n * (n + 1) / 2));
}

#[test]
fn a_panic_poisons_the_instance_and_skips_its_successors() {
    let rt = rt(2);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mut b = SubgraphBuilder::<()>::new();
    let r = ran.clone();
    let a = b.task(0, move |_| r.lock().unwrap().push("a"));
    let bad = b.task(1, |_| panic!("vertex failed"));
    let r = ran.clone();
    let c = b.task(0, move |_| r.lock().unwrap().push("c"));
    b.edge(a, bad);
    b.edge(bad, c);
    let post = b.postcondition();
    b.signal(c, post);
    let g = b.compile(&rt).unwrap();
    let inst = g.instantiate((), &[]);
    let err = inst.completion.wait().unwrap_err();
    assert!(err.to_string().contains("subgraph task 1"), "{err}");
    assert!(err.to_string().contains("vertex failed"), "{err}");
    assert!(inst.postconditions[0].wait().is_err());
    assert_eq!(*ran.lock().unwrap(), ["a"]);
    // A dynamic task after the poisoned instance does not run either.
    let after = rt.launch(
        Placement::Any,
        std::slice::from_ref(&inst.completion),
        || panic!("ran"),
    );
    assert!(after.wait().is_err());
    // The runtime and the subgraph remain usable.
    let ok = SubgraphBuilder::<()>::new().compile(&rt).unwrap();
    ok.instantiate((), &[]).completion.wait().unwrap();
}

#[test]
fn a_poisoned_precondition_poisons_the_instance() {
    let rt = rt(1);
    let mut b = SubgraphBuilder::<()>::new();
    let pre = b.precondition();
    let t = b.task(0, |_| panic!("must not run"));
    b.wait_for(pre, t);
    let g = b.compile(&rt).unwrap();
    let u = UserEvent::new();
    let inst = g.instantiate((), &[u.event()]);
    u.poison("upstream").unwrap();
    assert_eq!(
        *inst.completion.wait().unwrap_err().failure(),
        Failure::Poisoned("upstream".into())
    );
}

#[test]
fn one_event_given_for_several_preconditions_opens_each_of_them() {
    // Preconditions 0 and 2 are the same event, 1 another: each gates a task of its own, and
    // the tasks of 0 and 2 run once that event triggers (not before), the task of 1 after its
    // own; a poisoned shared event poisons the tasks of both.
    let rt = rt(2);
    let ran = Arc::new(AtomicU32::new(0));
    let mut b = SubgraphBuilder::<Arc<AtomicU32>>::new();
    for (i, w) in [(0u32, 0usize), (1, 1), (2, 1)] {
        let pre = b.precondition();
        let t = b.task(w, move |r: &Arc<AtomicU32>| {
            r.fetch_or(1 << i, SeqCst);
        });
        b.wait_for(pre, t);
    }
    let g = b.compile(&rt).unwrap();
    let (shared, other) = (UserEvent::new(), UserEvent::new());
    let pres = [shared.event(), other.event(), shared.event()];
    let inst = g.instantiate(ran.clone(), &pres);
    other.trigger().unwrap();
    while ran.load(SeqCst) & 2 == 0 {
        std::thread::yield_now();
    }
    assert_eq!(ran.load(SeqCst), 2, "the shared event's tasks wait for it");
    shared.trigger().unwrap();
    inst.completion.wait().unwrap();
    assert_eq!(ran.load(SeqCst), 7);

    let (shared, other) = (UserEvent::new(), UserEvent::new());
    let pres = [shared.event(), other.event(), shared.event()];
    let inst = g.instantiate(Arc::new(AtomicU32::new(0)), &pres);
    shared.poison("upstream").unwrap();
    other.trigger().unwrap();
    assert_eq!(
        *inst.completion.wait().unwrap_err().failure(),
        Failure::Poisoned("upstream".into())
    );
}

/// Two tasks on workers 1 and 0, the first after a precondition.
fn waiting_pair(rt: &Runtime) -> tactor::Subgraph<()> {
    let mut b = SubgraphBuilder::<()>::new();
    let pre = b.precondition();
    let t = b.task(1, |_| ());
    b.task(0, |_| ());
    b.wait_for(pre, t);
    b.compile(rt).unwrap()
}

#[test]
fn dropping_the_runtime_with_an_instance_waiting_poisons_it() {
    let rt = rt(2);
    let g = waiting_pair(&rt);
    let u = UserEvent::new();
    let inst = g.instantiate((), &[u.event()]);
    std::thread::sleep(std::time::Duration::from_millis(10));
    drop(rt);
    assert!(inst.completion.wait().is_err());
    drop(u);
}

#[test]
fn dropping_the_runtime_before_its_workers_took_an_instance_poisons_it() {
    // Both workers are in long tasks when the instance is made, so neither has taken its part
    // when the runtime begins to go; and a second instance is made once it has gone. Parts
    // still on their way to a worker must be cancelled, not forgotten.
    for _ in 0..scaled(20, 2) {
        let rt = rt(2);
        let g = waiting_pair(&rt);
        let go = UserEvent::new();
        let busy: Vec<Event> = (0..2)
            .map(|w| {
                let go = go.event();
                rt.launch(Placement::Worker(w), &[], move || {
                    while !go.has_triggered() {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let u = UserEvent::new();
        let inst = g.instantiate((), &[u.event()]);
        go.trigger().unwrap();
        drop(rt);
        assert!(wait_or_fail(&inst.completion, "the instance").is_err());
        // Made after the runtime went: no worker will ever take it.
        let late = g.instantiate((), &[Event::triggered()]);
        assert!(wait_or_fail(&late.completion, "the late instance").is_err());
        for e in busy {
            let _ = wait_or_fail(&e, "a busy task");
        }
        drop(u);
    }
}

#[test]
fn an_instance_made_inside_a_task_starts_on_that_worker_at_its_next_relax() {
    // The task that makes the instance keeps worker 0 and relaxes until the instance's vertex
    // on worker 0 has run: the instance must start there without the task ending.
    let rt = rt(2);
    let ran = Arc::new(AtomicU32::new(0));
    let mut b = SubgraphBuilder::<()>::new();
    let r = ran.clone();
    let a = b.task(1, |_| ());
    let z = b.task(0, move |_| {
        r.fetch_add(1, SeqCst);
    });
    b.edge(a, z);
    let g = Arc::new(b.compile(&rt).unwrap());
    let (g2, r) = (g.clone(), ran.clone());
    let maker = rt.launch(Placement::Worker(0), &[], move || {
        let _inst = g2.instantiate((), &[]);
        let start = std::time::Instant::now();
        while r.load(SeqCst) == 0 {
            tactor::relax();
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "the instance's vertex on this worker never ran while its maker relaxed"
            );
        }
    });
    wait_or_fail(&maker, "the maker").unwrap();
    assert_eq!(ran.load(SeqCst), 1);
}

#[test]
fn a_compiled_task_may_wait_for_another_instance_on_its_own_worker() {
    // a0 (worker 0) releases instance B and waits for it. B's middle task is on worker 0
    // too, so worker 0 must run it while a0 waits (nested polling), and the message a1 -> a2
    // reaches worker 0 while a0's actor is out running: it must be held, not lost.
    for _ in 0..scaled(200, 2) {
        let rt = rt(2);
        let log = Arc::new(Mutex::new(Vec::new()));
        let go = UserEvent::new();
        let b_graph = {
            let mut b = SubgraphBuilder::<()>::new();
            let start = b.precondition();
            let l = log.clone();
            let b0 = b.task(1, move |_| l.lock().unwrap().push("b0"));
            let l = log.clone();
            let b1 = b.task(0, move |_| l.lock().unwrap().push("b1"));
            let l = log.clone();
            let b2 = b.task(1, move |_| l.lock().unwrap().push("b2"));
            b.wait_for(start, b0);
            b.edge(b0, b1);
            b.edge(b1, b2);
            b.compile(&rt).unwrap()
        };
        let b_inst = b_graph.instantiate((), &[go.event()]);
        let a_graph = {
            let mut b = SubgraphBuilder::<()>::new();
            let (l, go, done) = (log.clone(), go.clone(), b_inst.completion.clone());
            let a0 = b.task(0, move |_| {
                go.trigger().unwrap();
                done.wait().unwrap();
                l.lock().unwrap().push("a0");
            });
            let l = log.clone();
            let a1 = b.task(1, move |_| l.lock().unwrap().push("a1"));
            let l = log.clone();
            let a2 = b.task(0, move |_| l.lock().unwrap().push("a2"));
            b.edge(a0, a2);
            b.edge(a1, a2);
            b.compile(&rt).unwrap()
        };
        let done = a_graph.instantiate((), &[]).completion;
        // A lost message shows as a hang: fail instead of waiting forever.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(done.wait()));
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("instance A never completed: a message was lost")
            .unwrap();
        let log = log.lock().unwrap();
        let at = |s| log.iter().position(|x| *x == s).unwrap();
        assert_eq!(log.len(), 6, "{log:?}");
        assert!(at("b0") < at("b1") && at("b1") < at("b2") && at("b2") < at("a0"));
        assert!(at("a0") < at("a2") && at("a1") < at("a2"), "{log:?}");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a scheduling property, the largest test under Miri; the rings and mailboxes it \
              drives run under Miri in the other tests"
)]
fn a_task_released_mid_instance_runs_before_the_instance_ends() {
    // Chains of vertices bouncing between the two workers keep both busy with compiled work:
    // with many chains in flight, a message is nearly always waiting (with 8, the rings ran
    // empty often enough that a resident taking its own messages without limit still let the
    // task through). A task that becomes ready on worker 0 early on must still run while the
    // chains go on: compiled work must not starve the task queues. Worker 0 must have more
    // vertices to run than a worker takes between two looks at its queues (16 polls of up to
    // 16 messages): with fewer, all of them may run before the first look.
    let (chains, n) = (64, 1000);
    let rt = rt(2);
    let go = UserEvent::new();
    let ran = Arc::new(AtomicU32::new(0));
    let r = ran.clone();
    let task = rt.launch(Placement::Worker(0), &[go.event()], move || {
        r.store(1, SeqCst);
    });
    let seen_at_end = Arc::new(AtomicU32::new(0));
    let mut b = SubgraphBuilder::<()>::new();
    for c in 0..chains {
        let mut prev = None;
        for i in 0..n {
            let (go, ran, seen) = (go.clone(), ran.clone(), seen_at_end.clone());
            let v = b.task(i % 2, move |_| {
                if c == 0 && i == 2 {
                    go.trigger().unwrap();
                }
                if i == n - 1 {
                    seen.fetch_add(ran.load(SeqCst), SeqCst);
                }
            });
            if let Some(p) = prev {
                b.edge(p, v);
            }
            prev = Some(v);
        }
    }
    let graph = b.compile(&rt).unwrap();
    graph.instantiate((), &[]).completion.wait().unwrap();
    task.wait().unwrap();
    assert!(
        seen_at_end.load(SeqCst) > 0,
        "the task waited for all {chains} chains of {n} vertices to end"
    );
}

#[test]
fn a_long_task_that_relaxes_lets_its_workers_vertices_run() {
    // A chain bouncing between workers 0 and 1 while a task on worker 0 spins until the
    // chain is done: worker 0's vertices can only run inside the task's `relax` calls (the
    // task never returns before), so without them this never ends.
    for _ in 0..scaled(20, 2) {
        let rt = rt(2);
        let n = scaled(64, 24);
        let count = Arc::new(AtomicU64::new(0));
        let mut b = SubgraphBuilder::<Arc<AtomicU64>>::new();
        let mut last = None;
        for k in 0..n {
            let v = b.task(k % 2, |c: &Arc<AtomicU64>| {
                c.fetch_add(1, SeqCst);
            });
            if let Some(p) = last {
                b.edge(p, v);
            }
            last = Some(v);
        }
        let start = b.precondition();
        b.wait_for(start, tactor::SubgraphTask(0));
        let graph = b.compile(&rt).unwrap();
        let go = UserEvent::new();
        let chain = graph.instantiate(count.clone(), &[go.event()]);
        let (c, go2) = (count.clone(), go.clone());
        let spinner = rt.launch(Placement::Worker(0), &[], move || {
            go2.trigger().unwrap();
            let mut relaxed = 0u64;
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while c.load(SeqCst) < n as u64 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the chain never finished"
                );
                relaxed += u64::from(tactor::relax());
            }
            assert!(relaxed > 0, "worker 0's vertices ran inside relax");
        });
        spinner.wait().unwrap();
        chain.completion.wait().unwrap();
        assert_eq!(count.load(SeqCst), n as u64);
    }
}

/// Of the successors a vertex makes ready on its worker, the first in builder order runs
/// first: in a traced program that is launch order, so a send launched right after its
/// producer goes out before the producer's next step (run the other way round, two ranks
/// stopped overlapping and took turns). One worker, so the order is deterministic.
#[test]
fn successors_made_ready_together_run_in_builder_order() {
    let rt = rt(1);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut b = SubgraphBuilder::<()>::new();
    let log = |name: &'static str| {
        let order = order.clone();
        move |_: &()| order.lock().unwrap().push(name)
    };
    let producer = b.task(0, log("producer"));
    let send = b.task(0, log("send"));
    let other = b.task(0, log("other"));
    let next_step = b.task(0, log("next step"));
    for v in [send, other, next_step] {
        b.edge(producer, v);
    }
    let graph = b.compile(&rt).unwrap();
    for _ in 0..scaled(20, 2) {
        order.lock().unwrap().clear();
        graph.instantiate((), &[]).completion.wait().unwrap();
        assert_eq!(
            *order.lock().unwrap(),
            ["producer", "send", "other", "next step"]
        );
    }
}

/// A running instance takes the messages waiting for it straight from the rings, but never
/// one for another instance: here, when instance A's long vertex on worker 0 ends, the ring
/// from worker 1 holds a message for instance B first, then one for A. Taken by A, B's
/// message would count for the wrong vertex (one that already ran, or never runs).
#[test]
fn a_running_instance_leaves_another_instances_message_alone() {
    for _ in 0..scaled(10, 1) {
        let rt = rt(2);
        let log = Arc::new(Mutex::new(Vec::new()));
        let a_started = Arc::new(AtomicU32::new(0));
        let go = UserEvent::new();
        // B: x (worker 1) -> y (worker 0); x opens A's vertex `a` once it has run.
        let mut gb = SubgraphBuilder::<()>::new();
        let (l, g) = (log.clone(), go.clone());
        let x = gb.task(1, move |_| {
            l.lock().unwrap().push("B.x");
            g.trigger().unwrap();
        });
        let l = log.clone();
        let y = gb.task(0, move |_| l.lock().unwrap().push("B.y"));
        gb.edge(x, y);
        let start_b = gb.precondition();
        gb.wait_for(start_b, x);
        // A: z (worker 0) waits until `a` ran and its message has had time to leave; a
        // (worker 1, after `go`) -> b (worker 0, after z).
        let mut ga = SubgraphBuilder::<()>::new();
        let (l, started) = (log.clone(), a_started.clone());
        let z = ga.task(0, move |_| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while started.load(SeqCst) == 0 {
                assert!(std::time::Instant::now() < deadline, "`a` never ran");
                std::hint::spin_loop();
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            l.lock().unwrap().push("A.z");
        });
        let (l, started) = (log.clone(), a_started.clone());
        let a = ga.task(1, move |_| {
            l.lock().unwrap().push("A.a");
            started.store(1, SeqCst);
        });
        let l = log.clone();
        let b = ga.task(0, move |_| l.lock().unwrap().push("A.b"));
        ga.edge(a, b);
        ga.edge(z, b);
        let after_go = ga.precondition();
        ga.wait_for(after_go, a);
        let (ga, gb) = (ga.compile(&rt).unwrap(), gb.compile(&rt).unwrap());
        let go_b = UserEvent::new();
        let inst_a = ga.instantiate((), &[go.event()]);
        let inst_b = gb.instantiate((), &[go_b.event()]);
        go_b.trigger().unwrap();
        wait_or_fail(&inst_a.completion, "instance A").unwrap();
        wait_or_fail(&inst_b.completion, "instance B").unwrap();
        let log = log.lock().unwrap().clone();
        let at = |name| log.iter().position(|&n| n == name).unwrap();
        assert_eq!(log.len(), 5, "each vertex once: {log:?}");
        assert!(at("B.x") < at("A.a") && at("A.a") < at("A.z") && at("A.z") < at("A.b"));
        assert!(at("B.x") < at("B.y"), "{log:?}");
    }
}

/// Postconditions signalled by the same tasks share one event per instance; each still
/// triggers exactly when its own signalling tasks have run (and one nobody signals, at the
/// instance's end), and a signal given twice counts once.
#[test]
fn postconditions_trigger_when_their_own_tasks_ran() {
    let rt = rt(2);
    let mut b = SubgraphBuilder::<()>::new();
    let first = b.task(0, |_| ());
    let second = b.task(1, |_| ());
    let go = b.precondition();
    b.wait_for(go, second);
    let posts: Vec<_> = (0..5).map(|_| b.postcondition()).collect();
    b.signal(first, posts[0]);
    b.signal(first, posts[1]);
    b.signal(first, posts[2]);
    b.signal(second, posts[2]);
    b.signal(first, posts[3]);
    b.signal(first, posts[3]);
    let graph = b.compile(&rt).unwrap();
    for _ in 0..scaled(20, 2) {
        let go = UserEvent::new();
        let inst = graph.instantiate((), &[go.event()]);
        let p = &inst.postconditions;
        assert_eq!(p.len(), 5);
        wait_or_fail(&p[0], "signalled by the first task").unwrap();
        wait_or_fail(&p[1], "signalled by the first task too").unwrap();
        wait_or_fail(&p[3], "signalled twice by the first task").unwrap();
        assert!(!p[2].has_triggered(), "the second task has not run");
        assert!(!p[4].has_triggered(), "signalled by none: at the end");
        go.trigger().unwrap();
        wait_or_fail(&inst.completion, "the instance").unwrap();
        for (k, e) in p.iter().enumerate() {
            assert!(e.has_triggered(), "postcondition {k} after the end");
        }
    }
}
