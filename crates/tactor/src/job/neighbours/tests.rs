use super::*;
use crate::job::{Job, FIRST_PORT};
use std::ops::Range;

/// A pattern given by tables: per array and step, the live items and each one's reads (of
/// live items of the step before), drawn from a seed; readers are their inverse.
#[derive(Clone)]
pub(crate) struct Table {
    live: Vec<Vec<Range<usize>>>,
    reads: Vec<Vec<Vec<Vec<usize>>>>,
    readers: Vec<Vec<Vec<Vec<usize>>>>,
    /// Whether steps have classes (each its own): both ways, kept and made at every step, run.
    keep: bool,
}

impl Table {
    pub(crate) fn new(sizes: &[usize], steps: usize, seed: u64) -> Table {
        let mut x = seed;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let (mut live, mut reads, mut readers) = (Vec::new(), Vec::new(), Vec::new());
        for &n in sizes {
            // The width shrinks and grows back: items that are not live are not read.
            let lv: Vec<Range<usize>> = (0..steps)
                .map(|t| if t % 5 == 3 { 1..n - 1 } else { 0..n })
                .collect();
            let mut rd = vec![vec![Vec::new(); n]; steps];
            let mut rs = vec![vec![Vec::new(); n]; steps + 1];
            for t in 1..steps {
                for i in lv[t].clone() {
                    // Near items, and now and then a far one (another rank's, often).
                    let mut r: Vec<usize> = vec![i.saturating_sub(1), i, (i + 1) % n];
                    if next(3) == 0 {
                        r.push(next(n));
                    }
                    r.retain(|d| lv[t - 1].contains(d));
                    r.sort_unstable();
                    r.dedup();
                    for &d in &r {
                        rs[t][d].push(i);
                    }
                    rd[t][i] = r;
                }
            }
            live.push(lv);
            reads.push(rd);
            readers.push(rs);
        }
        Table {
            live,
            reads,
            readers,
            keep: seed % 2 == 1,
        }
    }

    /// Each item at each step, computed on one thread.
    pub(crate) fn serial(&self, steps: usize, bytes: &[usize]) -> Vec<Vec<Vec<u8>>> {
        let mut rows: Vec<Vec<Vec<u8>>> = bytes
            .iter()
            .zip(&self.reads)
            .map(|(&b, r)| vec![vec![0; b]; r[0].len()])
            .collect();
        for t in 0..steps as i64 {
            for (a, row) in rows.iter_mut().enumerate() {
                let before = row.clone();
                for i in self.live(a, t) {
                    row[i] = value(a, t, i, self.reads(a, t, i).map(|d| &before[d][..]));
                }
            }
        }
        rows
    }
}

// SAFETY: `readers` is built as the inverse of `reads`, which name only items live at the
// step before and none at step 0; each step is its own class.
unsafe impl Pattern for Table {
    fn live(&self, a: usize, t: i64) -> Range<usize> {
        self.live[a].get(t as usize).cloned().unwrap_or(0..0)
    }
    fn reads(&self, a: usize, t: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
        let list = usize::try_from(t).ok().and_then(|t| self.reads[a].get(t));
        list.map_or(&[][..], |l| &l[i]).iter().copied()
    }
    fn readers(&self, a: usize, t: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
        let list = usize::try_from(t).ok().and_then(|t| self.readers[a].get(t));
        list.map_or(&[][..], |l| &l[i]).iter().copied()
    }
    fn class(&self, a: usize, t: i64) -> Option<u32> {
        let _ = a;
        self.keep.then_some(t as u32)
    }
}

/// An item's value at a step: a mix of where it is and what it read.
pub(crate) fn value<'a>(
    a: usize,
    t: i64,
    i: usize,
    ins: impl Iterator<Item = &'a [u8]>,
) -> Vec<u8> {
    let mut h = (a as u64 + 1) * 1_000_003 + t as u64 * 7919 + i as u64;
    for x in ins {
        for &b in x {
            h = h.wrapping_mul(31).wrapping_add(u64::from(b));
        }
    }
    let bytes = [3, 9][a % 2];
    (0..bytes).map(|k| (h >> (k % 8 * 8)) as u8).collect()
}

// Under Miri fewer items: building a `Dataflow`'s graph, ~100 ms of Miri's clock a task, was
// most of these tests' time there (two workers still split both arrays unevenly).
pub(crate) const SIZES: [usize; 2] = if cfg!(miri) { [7, 4] } else { [13, 7] };
pub(crate) const BYTES: [usize; 2] = [3, 9];
// The last step has every item live (see `Table::new`): `last` shows them all.
pub(crate) const STEPS: usize = if cfg!(miri) { 5 } else { 23 };

/// The last step of every array on this rank, after two passes.
fn run(rt: &Runtime, exchange: Option<Arc<Exchange>>, seed: u64) -> Last {
    let table = Table::new(&SIZES, STEPS, seed);
    let arrays: Vec<_> = SIZES.iter().copied().zip(BYTES).collect();
    let nb = Neighbours::new(exchange, rt.workers(), table, &arrays, STEPS as i64);
    let mut states = vec![0u64; rt.workers()];
    for _pass in 0..2 {
        let mut pass = || {
            nb.pass(rt, &mut states, |ran, block| {
                let (a, t) = (block.array(), block.step());
                let (items, before) = block.split();
                for (i, out) in items {
                    let ins = nb.pattern.reads(a, t, i).map(|d| before.get(d));
                    out.copy_from_slice(&value(a, t, i, ins));
                    *ran += 1;
                }
                Ok::<(), ()>(())
            })
        };
        // On ranks a pass starts once every rank finished the last one.
        match &nb.exchange {
            Some(ex) => ex.round(rt, pass).map(|_| ()).unwrap(),
            None => pass().map(|_| ()).unwrap(),
        }
    }
    let ran: u64 = states.iter().sum();
    let mut mine = 0;
    for a in 0..2 {
        for t in 0..STEPS as i64 {
            for w in 0..rt.workers() {
                mine += intersect(nb.pattern.live(a, t), nb.mine(a, w)).len();
            }
        }
    }
    assert_eq!(
        ran,
        2 * mine as u64,
        "every live item of this rank ran once a pass"
    );
    (0..2).map(|a| nb.last(a, STEPS as i64 - 1)).collect()
}

/// What a test program gives back: the last step of every array on this rank.
pub(crate) type Last = Vec<Vec<Vec<u8>>>;

/// Checks that `run(runtime, exchange, seed)` computes in one process of 1–3 workers what one
/// thread does (under Miri, which interprets one thread at a time, one seed whose steps have
/// classes and one without, on two workers).
pub(crate) fn in_one_process(seeds: &[u64], run: impl Fn(&Runtime, u64) -> Last) {
    let splits: &[usize] = if cfg!(miri) { &[2] } else { &[1, 2, 3] };
    for &seed in seeds {
        let expect = Table::new(&SIZES, STEPS, seed).serial(STEPS, &BYTES);
        for &workers in splits {
            let rt = Runtime::builder()
                .workers(workers)
                .pin(false)
                .build()
                .unwrap();
            assert_eq!(run(&rt, seed), expect, "{workers} workers, seed {seed}");
        }
    }
}

/// Checks that `run` computes on 2–3 ranks of 1–2 workers what one thread does.
pub(crate) fn on_ranks(run: impl Fn(&Runtime, Arc<Exchange>, u64) -> Last + Sync) {
    for seed in [4, 5] {
        let expect = Table::new(&SIZES, STEPS, seed).serial(STEPS, &BYTES);
        for (ranks, workers) in [(2, 1), (3, 1), (2, 2)] {
            let got = Job::run_in_process(ranks, workers, |rt, job| {
                run(rt, Exchange::open(job, FIRST_PORT).unwrap(), seed)
            });
            // Each rank holds its blocks: put the arrays back together rank by rank.
            let mut joined = vec![Vec::new(); 2];
            for rank in got {
                for (a, part) in rank.unwrap().into_iter().enumerate() {
                    joined[a].extend(part);
                }
            }
            assert_eq!(
                joined, expect,
                "{ranks} ranks of {workers} workers, seed {seed}"
            );
        }
    }
}

#[test]
fn every_split_of_workers_computes_what_one_thread_does() {
    let seeds: &[u64] = if cfg!(miri) { &[1, 2] } else { &[1, 2, 3] };
    in_one_process(seeds, |rt, seed| run(rt, None, seed));
}

/// Not under Miri: the ranks' idle workers poll the network all along, which Miri runs a
/// thousand times slower (the unsafe code is the same as in one process).
#[test]
#[cfg_attr(miri, ignore)]
fn ranks_of_one_and_more_workers_compute_what_one_thread_does() {
    on_ranks(|rt, ex, seed| run(rt, Some(ex), seed));
}

/// A pattern where each of `n` items reads its neighbours.
pub(crate) struct Near(pub(crate) usize);

// SAFETY: `readers` is `reads` (a symmetric neighbourhood), which names live items at steps
// after 0 only, and every step after 0 is alike.
unsafe impl Pattern for Near {
    fn live(&self, _: usize, _: i64) -> Range<usize> {
        0..self.0
    }
    fn reads(&self, _: usize, t: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
        (t > 0)
            .then(|| i.saturating_sub(1)..(i + 2).min(self.0))
            .into_iter()
            .flatten()
    }
    fn readers(&self, a: usize, t: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.reads(a, t, i)
    }
    fn class(&self, _: usize, t: i64) -> Option<u32> {
        Some(u32::from(t > 0))
    }
}

#[test]
fn a_failing_body_stops_every_worker_and_the_pass_reports_it() {
    let rt = Runtime::builder().workers(3).pin(false).build().unwrap();
    let steps = if cfg!(miri) { 12 } else { 1000 };
    let nb = Neighbours::new(None, 3, Near(9), &[(9, 1)], steps);
    let mut states = vec![(); 3];
    let got = nb.pass(&rt, &mut states, |_, block| match block.step() {
        // The others would wait for the failed worker forever without the stop.
        7 if block.items().contains(&4) => Err("bad input at step 7"),
        _ => Ok(()),
    });
    assert_eq!(got, Err(Stopped::Failed("bad input at step 7")));
    // The next pass starts afresh.
    let again = nb.pass(&rt, &mut states, |_, _| Ok::<(), ()>(()));
    assert!(again.is_ok());
}

#[test]
fn a_panicking_body_stops_every_worker_and_the_panic_carries_on() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let nb = Neighbours::new(
        None,
        2,
        Near(4),
        &[(4, 1)],
        if cfg!(miri) { 8 } else { 100 },
    );
    let mut states = vec![(); 2];
    let got = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        nb.pass(&rt, &mut states, |_, block| {
            assert!(block.step() != 5 || !block.items().contains(&0), "broken");
            Ok::<(), ()>(())
        })
    }));
    // The runtime reports the worker's task as failed; the other worker stopped.
    assert!(!matches!(got, Ok(Ok(_))), "{got:?}");
}

/// A block may read any item of a worker it reads from (the two wait for each other), and no
/// item of a worker it does not read from, which may be writing it.
#[test]
fn a_block_reads_only_items_of_workers_it_reads_from() {
    let rt = Runtime::builder().workers(3).pin(false).build().unwrap();
    // Nine cells on three workers: worker 0 has cells 0..3 and reads cell 3, worker 1's.
    let nb = Neighbours::new(None, 3, Near(9), &[(9, 1)], 3);
    let read = |far: usize| {
        let mut states = vec![(); 3];
        nb.pass(&rt, &mut states, |_, block| {
            let first = block.items().contains(&0) && block.step() == 1;
            let (_, before) = block.split();
            if first {
                before.get(far);
            }
            Ok::<(), ()>(())
        })
    };
    assert!(read(5).is_ok(), "worker 1's cell 5");
    // The body's panic ends the pass, and the pass says why.
    let got = read(6);
    assert!(
        matches!(&got, Err(Stopped::Aborted(why))
            if why.contains("item 6 is of no worker that this block reads from")),
        "worker 2's cell 6: {got:?}"
    );
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_rank_that_fails_ends_the_pass_of_the_others() {
    let got = Job::run_in_process(2, 1, |rt, job| {
        let ex = Exchange::open(job, FIRST_PORT).unwrap();
        let nb = Neighbours::new(Some(ex.clone()), 1, Near(4), &[(4, 1)], 1000);
        let mut states = vec![()];
        let me = job.rank();
        ex.round(rt, || {
            nb.pass(rt, &mut states, |_, block| match (me, block.step()) {
                (1, 20) => {
                    job.tell_failure("rank 1's input is bad");
                    Err("bad")
                }
                _ => Ok(()),
            })
        })
        .map(|_| ())
    });
    let rank0 = got[0].as_ref().unwrap();
    assert!(
        matches!(
            rank0,
            Err(crate::job::exchange::RoundError::Remote { rank: 1, .. })
        ),
        "{rank0:?}"
    );
}
