//! Compiling a recording: its launches fused into vertices per worker and level, its edges,
//! outside events and region states turned into a subgraph.

use super::replay::{places_of, Ahead, Run};
use super::*;

/// Launches fused into one vertex at most: a vertex signals its successors when all its
/// launches ran, so a bound keeps a worker from holding back another for long.
pub(super) const FUSE_MAX: usize = 16;

/// The vertices of a recording: which launches each runs, in launch order.
///
/// A launch's *depth* counts the worker changes on its longest chain of dependences in the
/// fragment; its *rank* counts same-worker dependences at its depth. Launches of one worker
/// with the same depth and rank (at most [`FUSE_MAX`] of them) become one vertex. Every
/// dependence goes to a strictly greater (depth, rank), so the launches of a vertex do not
/// depend on each other and the vertices form no cycle. This is what `compiled` does by hand
/// for `-and` (one vertex runs a point of every graph): with 4 graphs of `nearest` a recorded
/// timestep is 2 vertices instead of 8, and 2 messages instead of 8 per edge between workers.
///
/// Only launches that wait, directly or through others, for the same outside events fuse:
/// a vertex waits for all its launches' events, and an event may come from another rank only
/// once some launch of this fragment ran (a receive fused beside the sends that feed the
/// other side, or a send beside the readers of a receive, deadlock two ranks). With equal
/// sets no launch waits for an event it did not wait for already.
pub(super) fn fuse(workers: &[usize], deps: &[Vec<Sym>]) -> Vec<Vec<u32>> {
    let waits = outside_sets(deps);
    let mut level = Vec::with_capacity(workers.len());
    let mut open: HashMap<(usize, u32, u32, u32), usize> = HashMap::default();
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for (k, (&w, deps)) in workers.iter().zip(deps).enumerate() {
        let (mut depth, mut rank) = (0u32, 0u32);
        for &s in deps {
            if let Sym::Task(j) = s {
                let (dj, _) = level[j as usize];
                depth = depth.max(dj + u32::from(workers[j as usize] != w));
            }
        }
        for &s in deps {
            if let Sym::Task(j) = s {
                let (dj, rj) = level[j as usize];
                if workers[j as usize] == w && dj == depth {
                    rank = rank.max(rj + 1);
                }
            }
        }
        level.push((depth, rank));
        let key = (w, depth, rank, waits[k]);
        let g = match open.get(&key) {
            Some(&g) if groups[g].len() < FUSE_MAX => g,
            _ => {
                groups.push(Vec::new());
                open.insert(key, groups.len() - 1);
                groups.len() - 1
            }
        };
        groups[g].push(k as u32);
    }
    groups
}

/// For each launch, which outside events it waits for, directly or through earlier launches:
/// equal sets get equal numbers (0: none). Recording only, once per trace.
fn outside_sets(deps: &[Vec<Sym>]) -> Vec<u32> {
    let mut ids: HashMap<Vec<u32>, u32> = HashMap::from_iter([(Vec::new(), 0)]);
    let mut sets: Vec<Vec<u32>> = vec![Vec::new()];
    // A launch's set is the union of the sets of the launches it waits for and its own
    // outside events: launches alike (an all-to-all step's, each waiting for hundreds of
    // launches and outside events) share one union, made once (made per launch, recording
    // 600 points a step on 3 ranks took seconds).
    let mut unions: HashMap<(Vec<u32>, Vec<u32>), u32> = HashMap::default();
    let mut of = Vec::with_capacity(deps.len());
    for d in deps {
        let (mut via, mut own): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
        for &s in d {
            match s {
                Sym::Task(j) => via.push(of[j as usize]),
                Sym::Outside(n) => own.push(n),
                Sym::Version(_) | Sym::All(_) => {}
            }
        }
        for list in [&mut via, &mut own] {
            list.sort_unstable();
            list.dedup();
        }
        if own.is_empty() && via.len() <= 1 {
            of.push(via.first().copied().unwrap_or(0));
            continue;
        }
        let id = *unions.entry((via, own)).or_insert_with_key(|(via, own)| {
            let mut set = own.clone();
            for &v in via {
                set.extend_from_slice(&sets[v as usize]);
            }
            set.sort_unstable();
            set.dedup();
            let next = sets.len() as u32;
            let id = *ids.entry(set.clone()).or_insert(next);
            if id == next {
                sets.push(set);
            }
            id
        });
        of.push(id);
    }
    of
}

/// Builds the subgraph of a recording.
pub(super) fn compile(
    id: u64,
    handle: &Handle,
    rec: Recording,
    units: usize,
    cells: &[Arc<dyn Send + Sync>],
) -> Result<Recorded, TraceError> {
    let mut b = SubgraphBuilder::<Arena>::new();
    let groups = fuse(&rec.workers, &rec.deps);
    let mut vertex = vec![0u32; rec.workers.len()];
    let several = handle.workers() > 1;
    let (places, entry_workers) = places_of(&rec.sigs, &rec.workers);
    for (g, members) in groups.into_iter().enumerate() {
        for &k in &members {
            vertex[k as usize] = g as u32;
        }
        let w = rec.workers[members[0] as usize];
        let ahead = if several {
            Ahead::of(&members, &rec.sigs, cells)
        } else {
            Ahead::default()
        };
        let runs = Run::of(&members, places.as_deref());
        b.task(w, move |jobs: &Arena| {
            ahead.ask();
            for run in &runs {
                // SAFETY: vertex `g` of an instance runs at most once (the subgraph's
                // exactly-once execution, tested in `tests/subgraph.rs`), each launch is in
                // one vertex only, and the vertex's arguments are its own closures, placed
                // as `places_of` says (a run of points names their shared entry).
                unsafe {
                    match run {
                        Run::One(k) => jobs.run_launch(*k as usize),
                        Run::Points(entry, points, launches) => {
                            jobs.run_points(*entry, points, launches)
                        }
                    }
                }
            }
        });
    }
    let mut edges = HashSet::default();
    // Each entry state a vertex waits for, once; the outside conditions become the last
    // preconditions, in launch order (the instance's inlets).
    let mut waits: Vec<(Sym, u32)> = Vec::new();
    let mut seen = HashSet::default();
    for (k, deps) in rec.deps.iter().enumerate() {
        let v = vertex[k];
        let task = crate::subgraph::TaskId(v);
        for &s in deps {
            match s {
                Sym::Task(j) => {
                    debug_assert_ne!(vertex[j as usize], v, "fused launches are independent");
                    if edges.insert((vertex[j as usize], v)) {
                        b.edge(crate::subgraph::TaskId(vertex[j as usize]), task);
                    }
                }
                entry => {
                    if seen.insert((entry, v)) {
                        waits.push((entry, v));
                    }
                }
            }
        }
    }
    let outside = |s: &Sym| matches!(s, Sym::Outside(_));
    let mut order: Vec<Sym> = Vec::new();
    let mut pre_ids: HashMap<Sym, PreId> = HashMap::default();
    // Each outside condition belongs to one launch and is numbered in launch order, so
    // `waits` holds them in that order already.
    let inside = waits.iter().filter(|(s, _)| !outside(s));
    for &(s, _) in inside.chain(waits.iter().filter(|(s, _)| outside(s))) {
        pre_ids.entry(s).or_insert_with(|| {
            order.push(s);
            b.precondition()
        });
    }
    debug_assert!(
        (order.iter().filter(|s| outside(s)).enumerate())
            .all(|(i, s)| *s == Sym::Outside(i as u32)),
        "every outside condition is a precondition, in launch order"
    );
    for (s, v) in waits {
        b.wait_for(pre_ids[&s], crate::subgraph::TaskId(v));
    }
    let pres = order;
    let mut regions: Vec<_> = rec.states.into_iter().collect();
    regions.sort_by_key(|(r, _)| *r);
    let mut exits = Vec::with_capacity(regions.len());
    // One postcondition per distinct set of vertices: the regions a vertex leaves share it
    // (4 graphs of `nearest` on 2 workers leave 5 sets, not one per region and side), so
    // the next execution subscribes to a few events instead of dozens — each a cache line
    // the other workers last wrote (24 subscriptions were 5 µs of every instance's start).
    let mut posts: HashMap<Vec<u32>, PostId> = HashMap::default();
    for (r, state) in regions {
        let mut side = |list: &[Sym]| {
            let mut out = Vec::new();
            let mut vertices: Vec<u32> = Vec::new();
            for &s in list {
                match s {
                    Sym::Task(k) => vertices.push(vertex[k as usize]),
                    entry => out.push(Out::Entry(entry)),
                }
            }
            if !vertices.is_empty() {
                vertices.sort_unstable();
                vertices.dedup();
                let p = *posts.entry(vertices).or_insert_with_key(|vs| {
                    let p = b.postcondition();
                    for &v in vs {
                        b.signal(crate::subgraph::TaskId(v), p);
                    }
                    p
                });
                out.insert(0, Out::Post(p));
            }
            out
        };
        let producers = side(&state.producers);
        let readers = side(&state.readers);
        exits.push((r, producers, readers));
    }
    let graph = b
        .compile(handle)
        .map_err(|error| TraceError::Compile { id, error })?;
    // Sized at once: an all-to-all launch makes hundreds of accesses.
    let mut accesses = Vec::with_capacity(rec.sigs.iter().map(|s| s.accesses.len()).sum());
    let steps = rec
        .sigs
        .iter()
        .map(|s| {
            let start = accesses.len() as u32;
            accesses.extend_from_slice(&s.accesses);
            Step {
                kind: s.kind.id,
                placement: s.placement,
                accesses: (start, accesses.len() as u32),
                outside: s.outside,
                index: s.index,
            }
        })
        .collect();
    let replay_slots = crate::implicit::arena::slots_for(&entry_workers);
    Ok(Recorded {
        typed: Arc::new(Typed {
            boxes: rec.typed,
            id,
            sigs: rec.sigs,
            steps,
            accesses,
        }),
        slots: crate::implicit::arena::slots_for(&rec.workers),
        entries: entry_workers.len(),
        places: places.map(Arc::from),
        replay_slots,
        graph,
        pres,
        exits,
        units,
    })
}
