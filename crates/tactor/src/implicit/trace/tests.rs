use super::compile::{fuse, FUSE_MAX};
use super::replay::{Ahead, Run};
use super::{AccessMode, Declared, Sig, Sym, TaskKind, ONCE};
use crate::implicit::region::RegionKey;
use crate::Placement;
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::sync::Arc;

#[test]
fn a_vertex_runs_consecutive_points_of_one_index_launch_together() {
    // Launches 0–2: points 0, 2, 4 of entry 0; 3: a launch of its own (entry 1); 4–5:
    // points 1, 3 of entry 2; 6: point 5 of entry 0 again.
    let places = [(0, 0), (0, 2), (0, 4), (1, ONCE), (2, 1), (2, 3), (0, 5)];
    let shown = |runs: Vec<Run>| -> Vec<String> {
        runs.iter()
            .map(|r| match r {
                Run::One(k) => format!("one {k}"),
                Run::Points(e, p, l) => format!("entry {e} points {p:?} launches {l:?}"),
            })
            .collect()
    };
    assert_eq!(
        shown(Run::of(&[0, 1, 2, 3, 4, 5, 6], Some(&places))),
        [
            "entry 0 points [0, 2, 4] launches [0, 1, 2]",
            "one 3",
            "entry 2 points [1, 3] launches [4, 5]",
            "entry 0 points [5] launches [6]",
        ]
    );
    assert_eq!(shown(Run::of(&[1, 3], None)), ["one 1", "one 3"]);
}

#[test]
fn a_vertex_asks_for_the_cells_its_launches_read_and_write_once_each() {
    let cells: Vec<Arc<dyn Send + Sync>> = (0..5u64).map(|i| Arc::new(i) as _).collect();
    let at = |i: usize| Arc::as_ptr(&cells[i]).cast::<u8>() as usize;
    let sig = |accesses: &[(u32, AccessMode)]| Sig {
        kind: TaskKind::of::<fn()>(),
        placement: Placement::Any,
        accesses: accesses
            .iter()
            .map(|&(index, mode)| Declared {
                region: RegionKey { program: 0, index },
                mode,
            })
            .collect(),
        outside: false,
        index: None,
    };
    let sigs = [
        sig(&[(0, AccessMode::Read), (1, AccessMode::ReadWrite)]),
        sig(&[(0, AccessMode::Read), (2, AccessMode::Write)]),
        sig(&[(3, AccessMode::Constant), (4, AccessMode::Read)]),
    ];
    let ahead = Ahead::of(&[0, 1, 2], &sigs, &cells);
    let mut reads = [at(0), at(4)];
    let mut writes = [at(1), at(2)];
    reads.sort_unstable();
    writes.sort_unstable();
    assert_eq!(&*ahead.reads, &reads[..]);
    assert_eq!(&*ahead.writes, &writes[..]);
    // Only the vertex's own launches count.
    let one = Ahead::of(&[2], &sigs, &cells);
    assert_eq!(&*one.reads, &[at(4)][..]);
    assert!(one.writes.is_empty());
    ahead.ask();
}

/// Checks what `fuse` promises: each launch in one vertex, a vertex's launches on one
/// worker, in launch order, independent of each other, and the vertices acyclic.
fn check(workers: &[usize], deps: &[Vec<Sym>]) -> Vec<Vec<u32>> {
    let groups = fuse(workers, deps);
    let mut vertex = vec![usize::MAX; workers.len()];
    for (g, members) in groups.iter().enumerate() {
        assert!(!members.is_empty() && members.len() <= FUSE_MAX);
        assert!(members.windows(2).all(|w| w[0] < w[1]), "launch order");
        for &k in members {
            assert_eq!(vertex[k as usize], usize::MAX, "launch {k} in two vertices");
            vertex[k as usize] = g;
            assert_eq!(workers[k as usize], workers[members[0] as usize]);
        }
    }
    assert!(
        vertex.iter().all(|&v| v != usize::MAX),
        "every launch placed"
    );
    let n = groups.len();
    let mut succ = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for (k, d) in deps.iter().enumerate() {
        for s in d {
            if let Sym::Task(j) = *s {
                let (a, b) = (vertex[j as usize], vertex[k]);
                assert_ne!(a, b, "launch {k} depends on {j} of its own vertex");
                succ[a].push(b);
                indeg[b] += 1;
            }
        }
    }
    let mut stack: Vec<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut seen = 0;
    while let Some(v) = stack.pop() {
        seen += 1;
        for &s in &succ[v] {
            indeg[s] -= 1;
            if indeg[s] == 0 {
                stack.push(s);
            }
        }
    }
    assert_eq!(seen, n, "the vertices form a cycle");
    groups
}

#[test]
#[cfg_attr(miri, ignore = "safe code only: the fusion of a recorded graph")]
fn independent_graphs_in_lock_step_fuse_per_worker_and_timestep() {
    // 4 graphs of width 2 on 2 workers; each point reads both points of its graph's last
    // timestep (nearest, radix 3), launched timestep by timestep.
    let (graphs, steps) = (4usize, 5usize);
    let (mut workers, mut deps) = (Vec::new(), Vec::new());
    for t in 0..steps {
        for g in 0..graphs {
            for p in 0..2 {
                let prev = |q: usize| (((t - 1) * graphs + g) * 2 + q) as u32;
                deps.push(if t == 0 {
                    vec![Sym::Version(0)]
                } else {
                    vec![Sym::Task(prev(0)), Sym::Task(prev(1))]
                });
                workers.push(p);
            }
        }
    }
    let groups = check(&workers, &deps);
    assert_eq!(
        groups.len(),
        2 * steps,
        "one vertex per worker and timestep"
    );
    assert_eq!(groups[0], vec![0, 2, 4, 6]);
    // A receive (an outside event) on worker 0 with no other dependence: the level of
    // the first timestep's launches there, but a vertex of its own.
    let (mut w, mut d) = (workers.clone(), deps.clone());
    w.push(0);
    d.push(vec![Sym::Outside(0)]);
    let groups = check(&w, &d);
    assert_eq!(groups[0], vec![0, 2, 4, 6]);
    assert_eq!(groups.last(), Some(&vec![(graphs * 2 * steps) as u32]));
}

#[test]
#[cfg_attr(miri, ignore = "safe code only: the fusion of a recorded graph")]
fn random_fragments_fuse_into_acyclic_vertices_of_independent_launches() {
    let mut rng = StdRng::seed_from_u64(11);
    for round in 0..300 {
        let n = rng.gen_range(1..80);
        let w = rng.gen_range(1..4);
        let workers: Vec<usize> = (0..n).map(|_| rng.gen_range(0..w)).collect();
        let deps: Vec<Vec<Sym>> = (0..n)
            .map(|k| {
                let mut d = Vec::new();
                if k > 0 {
                    for _ in 0..rng.gen_range(0..4) {
                        // Mostly recent launches, as in a program's stream.
                        let back = rng.gen_range(1..=k.min(if round % 2 == 0 { 6 } else { k }));
                        d.push(Sym::Task((k - back) as u32));
                    }
                }
                if rng.gen_bool(0.2) {
                    d.push(Sym::All(0));
                }
                if rng.gen_bool(0.1) {
                    d.push(Sym::Outside(k as u32));
                }
                d
            })
            .collect();
        let groups = check(&workers, &deps);
        // Every launch of a vertex waits (directly or not) for the same outside events.
        let mut waits: Vec<Vec<u32>> = Vec::new();
        for d in &deps {
            let mut set = Vec::new();
            for &s in d {
                match s {
                    Sym::Task(j) => set.extend(waits[j as usize].iter().copied()),
                    Sym::Outside(n) => set.push(n),
                    _ => {}
                }
            }
            set.sort_unstable();
            set.dedup();
            waits.push(set);
        }
        for g in &groups {
            let first = &waits[g[0] as usize];
            assert!(g.iter().all(|&k| &waits[k as usize] == first), "{g:?}");
        }
    }
    // Many independent launches on one worker: vertices of at most FUSE_MAX.
    let groups = check(&[0; 40], &vec![Vec::new(); 40]);
    assert_eq!(groups.len(), 40usize.div_ceil(FUSE_MAX));
}
