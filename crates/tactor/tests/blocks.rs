//! `job::Blocks` on in-process jobs: every item a rank reads from another arrives once, with
//! its bytes, over several arrays and steps whose dependences change; blocks and owners
//! agree; a failed rank ends a receive instead of hanging it. `job::Lockstep` on the same
//! dependences computes what one process does; items as futures arrive as futures with their
//! bytes, and a failed item poisons its message's send.

use tactor::job::{Blocks, Exchange, Job, Lockstep, Step, FIRST_PORT};

/// The items of step `t + 1` that item `i` of an array of `n` reads at that step: itself, its
/// neighbours at a distance that changes with the step, and one far item.
fn reads(t: i64, n: usize, i: usize) -> Vec<usize> {
    let d = 1 + (t as usize % 3);
    let mut r = vec![
        i,
        (i + d) % n,
        (i + 3 * n - d) % n,
        (i * 7 + t as usize) % n,
    ];
    r.sort_unstable();
    r.dedup();
    r
}

/// The items that read item `i` at step `t + 1` (`reads` turned around).
fn readers(t: i64, n: usize, i: usize) -> Vec<usize> {
    (0..n).filter(|&j| reads(t, n, j).contains(&i)).collect()
}

/// The bytes of item `i` of array `a` at step `t`.
fn value(t: i64, a: usize, i: usize, bytes: usize) -> Vec<u8> {
    (0..bytes)
        .map(|k| (t as usize * 31 + a * 7 + i * 3 + k) as u8)
        .collect()
}

#[test]
fn every_item_read_across_ranks_arrives_once_with_its_bytes() {
    let arrays = [(11usize, 3usize), (5, 8), (2, 1)];
    for ranks in [2, 3, 4] {
        let got = Job::run_in_process(ranks, 1, move |_rt, job| {
            let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 7, &arrays);
            for (a, &(n, _)) in arrays.iter().enumerate() {
                for i in 0..n {
                    let r = blocks.owner(a, i);
                    assert!(blocks_of(&arrays, ranks, a, r).contains(&i), "owner of {i}");
                }
                assert_eq!(blocks.mine(a), blocks_of(&arrays, ranks, a, job.rank()));
            }
            for t in 0..6 {
                let vals: Vec<Vec<Vec<u8>>> = (arrays.iter().enumerate())
                    .map(|(a, &(n, b))| (0..n).map(|i| value(t, a, i, b)).collect())
                    .collect();
                let n = |a: usize| arrays[a].0;
                blocks.send(t, |a, i| readers(t, n(a), i), |a, i| &vals[a][i]);
                let mut got = Vec::new();
                blocks
                    .receive(
                        t,
                        |a, i| reads(t, n(a), i),
                        |a, i, b| got.push((a, i, b.to_vec())),
                    )
                    .unwrap();
                // Exactly the items of other ranks that this rank's items read, once each.
                let want: Vec<_> = (far_reads(&blocks, &arrays, t).into_iter())
                    .map(|(a, j)| (a, j, vals[a][j].clone()))
                    .collect();
                got.sort();
                assert_eq!(got, want, "rank {} step {t}", job.rank());
            }
            assert_eq!(blocks.exchange().pending(), 0);
        });
        for (r, g) in got.into_iter().enumerate() {
            assert!(g.is_ok(), "{ranks} ranks: rank {r} failed");
        }
    }
}

/// The items of other ranks that this rank's items read at step `t + 1`, once each, array
/// by array, ascending.
fn far_reads(blocks: &Blocks, arrays: &[(usize, usize)], t: i64) -> Vec<(usize, usize)> {
    let mut want = Vec::new();
    for (a, &(n, _)) in arrays.iter().enumerate() {
        let mine = blocks.mine(a);
        let mut far: Vec<usize> = (mine.clone())
            .flat_map(|i| reads(t, n, i))
            .filter(|j| !mine.contains(j))
            .collect();
        far.sort_unstable();
        far.dedup();
        want.extend(far.into_iter().map(|j| (a, j)));
    }
    want
}

fn blocks_of(
    arrays: &[(usize, usize)],
    ranks: usize,
    a: usize,
    r: usize,
) -> std::ops::Range<usize> {
    let n = arrays[a].0;
    r * n / ranks..(r + 1) * n / ranks
}

#[test]
fn a_failed_rank_ends_the_receives_that_wait_for_it() {
    let got = Job::run_in_process(2, 1, |_rt, job| {
        let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 0, &[(4, 1)]);
        if job.rank() == 0 {
            job.fail("gave up");
            return Ok(());
        }
        blocks.receive(0, |_, i| [i.saturating_sub(1)], |_, _, _| ())
    });
    let why = got[1].as_ref().unwrap().as_ref().unwrap_err();
    assert!(why.contains("rank 0"), "{why}");
}

/// Faults injected into a rank's exchange: a late message still arrives intact; a panicking
/// send ends its rank; a corrupt one flips a byte of the first message only.
#[test]
fn injected_faults_act_once_on_the_message_they_are_due_for() {
    use std::time::Duration;
    use tactor::job::Fault;
    let run = |fault: Fault| {
        Job::run_in_process(2, 1, move |_rt, job| {
            let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 0, &[(2, 2)]);
            if job.rank() == 0 {
                job.inject(fault);
            }
            let mut seen = Vec::new();
            for t in 0..3 {
                let vals = [[t as u8, 1], [t as u8, 2]];
                blocks.send(t, |_, i| [1 - i], |_, i| &vals[i][..]);
                let put = |_: usize, _: usize, b: &[u8]| seen.push(b.to_vec());
                blocks.receive(t, |_, i| [1 - i], put).unwrap();
            }
            seen
        })
    };
    let slow = run(Fault::Slow {
        step: 1,
        pause: Duration::from_millis(50),
    });
    assert_eq!(slow[1].as_ref().unwrap(), &[[0, 1], [1, 1], [2, 1]]);
    let corrupt = run(Fault::Corrupt);
    assert_eq!(corrupt[1].as_ref().unwrap(), &[[1, 1], [1, 1], [2, 1]]);
    assert_eq!(corrupt[0].as_ref().unwrap(), &[[0, 2], [1, 2], [2, 2]]);
}

/// Arrays of several item sizes stepped by `reads`' changing dependences: each item a hash of
/// what it read. On 2, 3 and 4 ranks every rank's items end as in one process, so each rank
/// read every item of another at its own index, from the right step.
#[test]
fn lockstep_arrays_on_ranks_end_as_in_one_process() {
    let arrays = [(11usize, 3usize), (5, 8), (2, 1)];
    let steps = if cfg!(miri) { 3 } else { 7 };
    let program = move |exchange: Option<std::sync::Arc<Exchange>>| {
        let mut rows = Lockstep::new(exchange, 3, &arrays);
        let n = |a: usize| arrays[a].0;
        for t in 0..steps {
            rows.receive(t, |a, i| match t {
                0 => vec![],
                _ => reads(t - 1, n(a), i),
            })
            .unwrap();
            for (a, Step { mine, now, before }) in rows.step(t).enumerate() {
                for (i, item) in mine.zip(now.iter_mut()) {
                    let mut v = value(t, a, i, item.len());
                    if t > 0 {
                        for (j, r) in reads(t - 1, n(a), i).into_iter().enumerate() {
                            for (x, b) in v.iter_mut().zip(&before[r]) {
                                *x = x.wrapping_mul(31).wrapping_add(*b ^ j as u8);
                            }
                        }
                    }
                    item.copy_from_slice(&v);
                }
            }
            rows.send(t, |a, i| readers(t, n(a), i));
        }
        rows.step(steps)
            .map(|s| s.before[s.mine].to_vec())
            .collect::<Vec<_>>()
    };
    let one = program(None);
    for ranks in [2, 3, 4] {
        let got = Job::run_in_process(ranks, 1, move |_rt, job| {
            program(Some(Exchange::open(job, FIRST_PORT).unwrap()))
        });
        for (a, whole) in one.iter().enumerate() {
            let joined: Vec<_> = (got.iter())
                .flat_map(|r| r.as_ref().expect("every rank ran")[a].clone())
                .collect();
            assert_eq!(&joined, whole, "{ranks} ranks, array {a}");
        }
    }
}

/// `Blocks::send_when_ready` and `receive_later`: every item a rank reads from another comes
/// as a future with its bytes, over several arrays and steps, though each item's value is
/// made late by a task; an item that failed poisons the send of its message.
#[test]
fn items_as_futures_arrive_as_futures_with_their_bytes() {
    use tactor::{Future, Placement};
    let arrays = [(11usize, 3usize), (5, 8), (2, 1)];
    let steps = if cfg!(miri) { 2 } else { 5 };
    for ranks in [2, 3] {
        let got = Job::run_in_process(ranks, 2, move |rt, job| {
            let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 5, &arrays);
            let n = |a: usize| arrays[a].0;
            for t in 0..steps {
                let make = |a: usize, i: usize| -> Future<Vec<u8>> {
                    let b = arrays[a].1;
                    rt.spawn(Placement::Any, &[], move || value(t, a, i, b))
                };
                let mut got = Vec::new();
                rt.scope(|s| {
                    blocks.send_when_ready(s, t, |a, i| readers(t, n(a), i), make);
                    blocks.receive_later(
                        s,
                        t,
                        |a, i| reads(t, n(a), i),
                        |a, i, f| got.push((a, i, f)),
                    );
                })
                .unwrap();
                let mut far = Vec::new();
                for (a, i, f) in got {
                    assert_eq!(*f.get().unwrap(), value(t, a, i, arrays[a].1), "step {t}");
                    far.push((a, i));
                }
                far.sort_unstable();
                let want = far_reads(&blocks, &arrays, t);
                assert_eq!(far, want, "rank {} step {t}", job.rank());
            }
        });
        for (r, g) in got.into_iter().enumerate() {
            assert!(g.is_ok(), "{ranks} ranks: rank {r} failed");
        }
    }
    // A failed item: its message is not sent, and its send's failure says why.
    let got = Job::run_in_process(2, 1, |rt, job| {
        let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 0, &[(2, 1)]);
        let bad = rt.spawn(Placement::Any, &[], || -> Vec<u8> {
            tactor::fail("a bad item")
        });
        let sent = rt.scope(|s| blocks.send_when_ready(s, 0, |_, i| [1 - i], |_, _| bad.clone()));
        sent.unwrap_err().to_string()
    });
    for g in got {
        assert!(g.unwrap().contains("a bad item"));
    }
    // Rank 1 reads rank 0's failed item at step 0 and so never sends its own of step 1:
    // rank 0's failed send abandons the exchange, so its scope does not wait for that
    // message, and once rank 0 tells the job, rank 1's scope ends too.
    let got = Job::run_in_process(2, 1, |rt, job| {
        let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 0, &[(2, 1)]);
        let me = job.rank();
        let mut item = rt.spawn(Placement::Any, &[], move || -> Vec<u8> {
            match me {
                0 => tactor::fail("a bad item"),
                _ => vec![1],
            }
        });
        let ended = rt.scope(|s| {
            for t in 0..2 {
                let mut theirs = None;
                blocks.send_when_ready(s, t, |_, i| [1 - i], |_, _| item.clone());
                blocks.receive_later(s, t, |_, i| [1 - i], |_, _, f| theirs = Some(f));
                let theirs = theirs.expect("one item from the other rank");
                item = s.dataflow(Placement::Any, [theirs], |v| v.get(0).clone());
            }
        });
        if let Err(e) = &ended {
            job.tell_failure(&e.to_string());
        }
        ended.map_err(|e| e.to_string())
    });
    let why = |r: usize| got[r].as_ref().unwrap().as_ref().unwrap_err().clone();
    assert!(why(0).contains("a bad item"), "{}", why(0));
    assert!(why(1).contains("failed"), "{}", why(1));
}
