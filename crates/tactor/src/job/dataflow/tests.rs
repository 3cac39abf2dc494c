use super::*;
use crate::job::neighbours::tests::{in_one_process, on_ranks, value, Last, Near, Table};
use crate::job::neighbours::tests::{BYTES, SIZES, STEPS};
use crate::job::{exchange::RoundError, Job, FIRST_PORT};
use crate::Runtime;
use std::sync::atomic::AtomicUsize;

/// The last step of every array on this rank, after two runs; every item's state counts its
/// steps, and each step checks that the ones before it ran first.
fn run(rt: &Handle, exchange: Option<Arc<Exchange>>, seed: u64) -> Last {
    let table = Table::new(&SIZES, STEPS, seed);
    // The bodies' own copy of the pattern, to know what they read.
    let pattern = table.clone();
    let arrays: Vec<_> = SIZES.iter().copied().zip(BYTES).collect();
    // Per array and item, how many steps it is live before each step.
    let before: Vec<Vec<Vec<u64>>> = (0..2)
        .map(|a| {
            (0..SIZES[a])
                .map(|i| {
                    let live = |t: usize| u64::from(table.live(a, t as i64).contains(&i));
                    (0..=STEPS)
                        .scan(0, |n, t| Some(std::mem::replace(n, *n + live(t))))
                        .collect()
                })
                .collect()
        })
        .collect();
    let flow = Dataflow::new(
        rt,
        exchange.clone(),
        table,
        &arrays,
        STEPS as i64,
        |_, _| 0u64,
        move |p| {
            let runs = &before[p.array][p.item];
            let per_run = runs[STEPS];
            if *p.state % per_run != runs[p.step as usize] {
                return Err(format!(
                    "{}:{} step {} ran out of order",
                    p.array, p.item, p.step
                ));
            }
            *p.state += 1;
            let ins: Vec<&[u8]> = (pattern.reads(p.array, p.step, p.item))
                .map(|d| p.before.get(d))
                .collect();
            p.out
                .copy_from_slice(&value(p.array, p.step, p.item, ins.into_iter()));
            Ok(())
        },
    )
    .unwrap();
    for _run in 0..2 {
        match &exchange {
            Some(ex) => ex.round(rt, || flow.run()).unwrap(),
            None => flow.run().unwrap(),
        }
    }
    (0..2).map(|a| flow.last(a, STEPS as i64 - 1)).collect()
}

#[test]
fn every_split_of_workers_computes_what_one_thread_does() {
    // Under Miri one seed, whose steps have classes.
    let seeds: &[u64] = if cfg!(miri) { &[1] } else { &[1, 2, 3] };
    in_one_process(seeds, |rt, seed| run(rt, None, seed));
}

/// Not under Miri: the ranks' idle workers poll the network all along.
#[test]
#[cfg_attr(miri, ignore)]
fn ranks_of_one_and_more_workers_compute_what_one_thread_does() {
    on_ranks(|rt, ex, seed| run(rt, Some(ex), seed));
}

#[test]
fn a_failing_body_stops_the_run_and_the_next_run_starts_afresh() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    // Under Miri the least that fails in the second chunk (building the graph is the cost).
    let (n, steps, bad) = if cfg!(miri) { (5, 5, 3) } else { (9, 200, 7) };
    let fail = Arc::new(AtomicBool::new(true));
    let fail2 = fail.clone();
    let flow = Dataflow::new(
        &rt,
        None,
        Near(n),
        &[(n, 1)],
        steps,
        |_, _| (),
        move |p| match p.step == bad && p.item == 4 && fail2.load(Ordering::Relaxed) {
            true => Err("bad input"),
            false => Ok(()),
        },
    )
    .unwrap();
    assert_eq!(flow.run(), Err(Stopped::Failed("bad input")));
    fail.store(false, Ordering::Relaxed);
    assert_eq!(flow.run(), Ok(()));
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_rank_whose_body_fails_ends_the_run_of_the_others() {
    let got = Job::run_in_process(2, 1, |rt, job| {
        let ex = Exchange::open(job, FIRST_PORT).unwrap();
        let me = job.rank();
        let job2 = job.clone();
        let flow = Dataflow::new(rt, Some(ex.clone()), Near(4), &[(4, 1)], 500, |_, _| (), {
            move |p| match (me, p.step) {
                (1, 20) => {
                    job2.tell_failure("rank 1's input is bad");
                    Err("bad")
                }
                _ => Ok(()),
            }
        })
        .unwrap();
        ex.round(rt, || flow.run()).map(|_| ())
    });
    let rank0 = got[0].as_ref().unwrap();
    assert!(
        matches!(rank0, Err(RoundError::Remote { rank: 1, .. })),
        "{rank0:?}"
    );
}

/// A point reads the items the pattern says it reads and no other: another item's task may
/// not have run yet, or may be writing its slot again.
#[test]
fn a_point_reads_only_what_it_reads() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    // What point 0 of step 1 reads besides its own: first item 1 (its neighbour), then 3.
    let stray = Arc::new(AtomicUsize::new(1));
    let stray2 = stray.clone();
    let flow = Dataflow::new(
        &rt,
        None,
        Near(4),
        &[(4, 1)],
        2,
        |_, _| (),
        move |p| {
            if (p.step, p.item) == (1, 0) {
                p.before.get(stray2.load(Ordering::Relaxed));
            }
            Ok::<(), ()>(())
        },
    )
    .unwrap();
    assert_eq!(flow.run(), Ok(()));
    // The body's panic ends the run, and the run says why.
    stray.store(3, Ordering::Relaxed);
    let got = flow.run();
    assert!(
        matches!(&got, Err(Stopped::Broken(why) | Stopped::Aborted(why))
            if why.contains("item 3 is not one that this point reads")),
        "{got:?}"
    );
}

/// Each of `n` items reads itself and its mirror image (`n - 1 - i`), far from it.
struct Mirror(usize);

// SAFETY: `readers` is `reads` (the mirror is its own inverse), which names live items at
// steps after 0 only, and every step after 0 is alike.
unsafe impl Pattern for Mirror {
    fn live(&self, _: usize, _: i64) -> std::ops::Range<usize> {
        0..self.0
    }
    fn reads(&self, _: usize, t: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
        (t > 0).then(|| [i, self.0 - 1 - i]).into_iter().flatten()
    }
    fn readers(&self, a: usize, t: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.reads(a, t, i)
    }
    fn class(&self, _: usize, t: i64) -> Option<u32> {
        Some(u32::from(t > 0))
    }
}

/// Reads farther than a member keeps as bits go through its inputs, and are checked there.
#[test]
#[cfg_attr(
    miri,
    ignore = "the inputs' path, which the tests of ranks run there too"
)]
fn a_point_reads_its_far_items_and_no_other() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let n = 80;
    let flow = |stray: Option<usize>| {
        Dataflow::new(
            &rt,
            None,
            Mirror(n),
            &[(n, 8)],
            3,
            |_, _| (),
            move |p| {
                let v = match p.step {
                    0 => p.item as u64,
                    _ => [p.item, n - 1 - p.item]
                        .map(|d| u64::from_le_bytes(p.before.get(d).try_into().unwrap()))
                        .iter()
                        .sum(),
                };
                if let Some(d) = stray.filter(|_| (p.step, p.item) == (1, 0)) {
                    p.before.get(d);
                }
                p.out.copy_from_slice(&v.to_le_bytes());
                Ok::<(), ()>(())
            },
        )
        .unwrap()
    };
    let ok = flow(None);
    assert_eq!(ok.run(), Ok(()));
    let want = (2 * (n as u64 - 1)).to_le_bytes().to_vec();
    assert!(ok.last(0, 2).iter().all(|v| *v == want));
    let got = flow(Some(40)).run();
    assert!(
        matches!(&got, Err(Stopped::Broken(why) | Stopped::Aborted(why))
            if why.contains("item 40 is not one that this point reads")),
        "{got:?}"
    );
}
