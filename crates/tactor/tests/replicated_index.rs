//! Index launches of a replicated implicit program: every rank gets the serial program's
//! result whether a rank's points are a run of the index space (one index launch of them),
//! scattered (launched one by one) or conflicting with each other (ordered as separate
//! launches), traced or not, after a reduction group or not.

use tactor::implicit::{read, read_write, reduce, write, ConstRef, Read, ReadWrite, Reduce};
use tactor::implicit::{Region, Replicated, Sum, Write};
use tactor::job::Job;

/// Cells of the stencil.
const N: usize = 7;

/// How the points are placed on ranks.
#[derive(Clone, Copy, Debug)]
enum Place {
    Blocks,
    RoundRobin,
}

fn rank_of(place: Place, i: usize, ranks: usize) -> usize {
    match place {
        Place::Blocks => i * ranks / N,
        Place::RoundRobin => i % ranks,
    }
}

/// The serial program: `steps` steps of a 3-point stencil over two rows, then a prefix sum
/// in place, then the sum of the cells.
fn serial(steps: usize) -> (Vec<u64>, u64) {
    let mut rows = [
        (0..N as u64).map(|i| i * i + 1).collect::<Vec<_>>(),
        vec![0; N],
    ];
    for t in 0..steps {
        let (now, before) = ((t + 1) % 2, t % 2);
        let old = rows[before].clone();
        for i in 0..N {
            let l = old[(i + N - 1) % N];
            let r = old[(i + 1) % N];
            rows[now][i] = l.wrapping_mul(3).wrapping_add(old[i]).wrapping_add(r) % 1_000_003;
        }
    }
    let mut cells = rows[steps % 2].clone();
    for i in 1..N {
        cells[i] = cells[i].wrapping_add(cells[i - 1]);
    }
    let total = cells.iter().sum();
    (cells, total)
}

/// What every point reads: the two rows, how the points are placed, the ranks, the total.
type Shared = ([Vec<Region<u64>>; 2], Place, usize, Region<u64>);

/// Point `i` of step `t`: its three neighbours of the row before, its cell of the row now.
fn stencil(c: ConstRef<Shared>, t: usize, i: u32) -> (usize, Stencil) {
    let ((rows, place, ranks, _), i) = (c.get(), i as usize);
    let (now, before) = (&rows[(t + 1) % 2], &rows[t % 2]);
    let ins = (
        read(&before[(i + N - 1) % N]),
        read(&before[i]),
        read(&before[(i + 1) % N]),
    );
    (rank_of(*place, i, *ranks), (ins, write(&now[i])))
}
type Stencil = ((Read<u64>, Read<u64>, Read<u64>), Write<u64>);

/// Point `i` of the prefix sum over `row`: the cell before it, its own cell.
fn prefix(c: ConstRef<Shared>, row: usize, i: u32) -> (usize, Prefix) {
    let ((rows, place, ranks, _), i) = (c.get(), i as usize);
    let before = i
        .checked_sub(1)
        .map(|j| read(&rows[row][j]))
        .into_iter()
        .collect();
    (
        rank_of(*place, i, *ranks),
        (before, read_write(&rows[row][i])),
    )
}
type Prefix = (Vec<Read<u64>>, ReadWrite<u64>);

/// Point `i` adds its cell of `row` to the total.
fn add(c: ConstRef<Shared>, row: usize, i: u32) -> (usize, (Read<u64>, Reduce<Sum, u64>)) {
    let ((rows, place, ranks, total), i) = (c.get(), i as usize);
    let access = (read(&rows[row][i]), reduce::<Sum, _>(total));
    (rank_of(*place, i, *ranks), access)
}

#[test]
fn index_launches_give_every_rank_the_serial_result() {
    let steps = if cfg!(miri) { 3 } else { 12 };
    let (cells, sum) = serial(steps);
    let shapes: &[(usize, usize)] = if cfg!(miri) {
        &[(2, 1)]
    } else {
        &[(1, 2), (2, 1), (3, 1), (2, 2)]
    };
    for &(ranks, workers) in shapes {
        for place in [Place::Blocks, Place::RoundRobin] {
            for traced in [false, true] {
                let what = format!("{ranks} ranks × {workers}, {place:?}, traced {traced}");
                let runs = Job::run_in_process(ranks, workers, |rt, job| {
                    let mut p = Replicated::new(rt, job);
                    let home = |i: usize| rank_of(place, i, ranks) * workers;
                    let first: Vec<Region<u64>> = (0..N)
                        .map(|i| p.region(home(i), (i * i + 1) as u64))
                        .collect();
                    let second: Vec<Region<u64>> = (0..N).map(|i| p.region(home(i), 0)).collect();
                    let total = p.region(0, 0u64);
                    // A reduction group left open before the index launches: they close it.
                    p.launch(0, reduce::<Sum, _>(&total), |mut s| s.apply(5));
                    let rows = [first, second];
                    let shared = p.constant((rows.clone(), place, ranks, total.clone()));
                    for t in 0..steps {
                        if traced && t >= 2 {
                            p.begin_trace((t % 2) as u64).unwrap();
                        }
                        p.index_launch(
                            N as u32,
                            &shared,
                            t,
                            stencil,
                            |_, _, _, ((l, c, r), out)| {
                                *out =
                                    l.wrapping_mul(3).wrapping_add(*c).wrapping_add(*r) % 1_000_003;
                            },
                        );
                        if traced && t >= 2 {
                            p.end_trace().unwrap();
                        }
                    }
                    // Each point reads the cell its neighbour writes: the points conflict and
                    // run as separate launches, in order (a prefix sum).
                    let row = steps % 2;
                    p.index_launch(N as u32, &shared, row, prefix, |_, _, _, (l, c)| {
                        *c = c.wrapping_add(l.iter().copied().sum::<u64>());
                    });
                    p.index_launch(N as u32, &shared, row, add, |_, _, _, (c, mut s)| {
                        s.apply(*c)
                    });
                    let got: Vec<u64> = (rows[row].iter())
                        .map(|c| p.with(c, |v| *v).unwrap())
                        .collect();
                    (got, p.with(&total, |s| *s).unwrap())
                });
                for (rank, run) in runs.into_iter().enumerate() {
                    let (got, total) = run.unwrap();
                    assert_eq!(got, cells, "{what}: rank {rank}");
                    assert_eq!(total, sum.wrapping_add(5), "{what}: rank {rank}");
                }
            }
        }
    }
}
