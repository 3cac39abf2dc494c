//! One chunk of a chain — timesteps `[t0, t0 + len)` of every graph the chain runs — compiled
//! into a subgraph.
//!
//! **Vertices.** A vertex runs, on one worker, the `k`-th point of that worker's block at one
//! timestep of every graph of one *half* of the chain's graphs (of all of them when the process
//! has one worker): graphs run in lock-step, as in `bsp`, so `-and` costs two vertices and two
//! messages per cross-worker edge for all graphs together, not one per graph. With one graph a
//! vertex is one point. Its predecessors are the union of its points' (dependencies, and the
//! earlier users of the slots they overwrite).
//!
//! Two halves, not one vertex for all graphs: the first half's messages leave while the
//! second half computes, so the other worker finds them there when it starts its next
//! timestep, instead of both workers waiting for each other's whole timestep (`bsp`, whose
//! waits are per graph, hides the exchange the same way). More than two vertices only add
//! their cost ([`HALVES`]).
//!
//! **Slots.** Inside a chunk, the writer of a slot waits for the slot's previous readers (or
//! its previous writer if none read it), exactly as in `tasks`. Across chunks, one condition:
//! a chunk's precondition is "the previous chunk's last users of every slot and last tasks
//! are done", its postcondition the same from its side. Where a slot's next users wait for
//! what came before the chunk, they wait for that one condition. Per slot and point conditions
//! (24 for 4 graphs of width 2) were each an event, a trigger, a subscription and messages at
//! every hand-over (`docs/measurements.md`, "One condition per chunk"). What the single
//! condition costs — a vertex at
//! a chunk's start also waits for the previous chunk's last vertices it does not need — is
//! one timestep's skew once per chunk.
//!
//! **Ranks.** After each timestep, one send vertex per destination rank (after the producers,
//! among the slots' readers; or none: the send at the end of the one vertex that produces all
//! of the message) and one receive per source rank (after an external precondition that the
//! message triggers, and the readers of the slots it fills: a vertex of its own, or the start
//! of the one vertex of the next timestep that reads what it brings), each carrying every
//! graph's outputs between that pair of ranks.

use super::{Args, Chunk, Item, Shared};
use crate::systems::interface::RunError;
use crate::systems::on_tactor::slot_guards;
use std::collections::BTreeMap;
use std::sync::Arc;
use tactor::{PreId, Runtime, SubgraphBuilder, SubgraphTask};

/// How many vertices share the graphs of a timestep on one worker-block place (the graphs
/// split in order, `j * HALVES / graphs`): the first half's messages leave while the second
/// computes. Only with several workers in the process (with one there is nothing to overlap).
/// Figures: `docs/measurements.md`, "Vertices per timestep".
const HALVES: usize = 2;

/// Who must finish before a slot may be reused: a vertex of this chunk, or what came before
/// the chunk (its precondition).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    Task(SubgraphTask),
    Before,
}

/// One graph's slots while a chunk is built.
struct Track {
    /// Per row and point: the slot's writer, then its readers.
    users: Vec<Vec<Src>>,
    /// Per point: its last vertex.
    last: Vec<Src>,
    width: usize,
}

/// A message of outputs of timestep `t` (chunk-relative `i`) from rank `src`, before its
/// vertex is decided: fused into the one vertex of `t + 1` that reads it (which takes it from
/// the network itself), or a receive vertex of its own (after a precondition the message
/// opens, and an inbox slot it goes to).
struct Pending {
    i: i64,
    t: i64,
    src: usize,
    items: Vec<Item>,
}

impl Pending {
    /// What its writes wait for: the earlier users of the slots it fills.
    fn guards(&self, tracks: &[Track], srcs: &mut Vec<Src>) {
        let row = (self.t % 2) as usize;
        for &(j, d) in &self.items {
            let tr = &tracks[j];
            srcs.extend(write_guards(&tr.users[row * tr.width + d as usize]));
        }
    }

    /// Records vertex `id` as the writer and last task of the slots it fills.
    fn filled_by(&self, tracks: &mut [Track], id: SubgraphTask) {
        let row = (self.t % 2) as usize;
        for &(j, d) in &self.items {
            let tr = &mut tracks[j];
            tr.users[row * tr.width + d as usize] = vec![Src::Task(id)];
            tr.last[d as usize] = Src::Task(id);
        }
    }
}

/// A message fused into the vertex that reads it, with its precondition and inbox slot when
/// it waits as one (not pulled).
type Fused = (Pending, Option<(PreId, usize)>);

/// A receive done at the start of the vertex that reads it: (chunk-relative timestep, source
/// rank, the inbox slot its inlet fills — none when the vertex pulls it off the network —, the
/// (graph, point) outputs it brings).
type Inbound = (i64, usize, Option<usize>, Vec<(usize, i64)>);

/// `(member, point)` items as `(graph, point)`, what the vertices' closures run on.
fn global(members: &[usize], items: &[Item]) -> Vec<(usize, i64)> {
    items.iter().map(|&(j, p)| (members[j], p)).collect()
}

/// What the next writer of a slot waits for, given its users (writer first, then readers).
/// At a chunk's start the "writer" is the precondition "every user of every slot in the
/// earlier chunk is done", which this chunk's readers do not wait for (they wait for the
/// point's last producer): a reader of the earlier chunk that is no producer — a send vertex —
/// would otherwise be ordered before nothing here, and the slot refilled under it. On 3
/// ranks of 2 workers this let a send read the next-but-one timestep's output.
fn write_guards(users: &[Src]) -> &[Src] {
    if matches!(users.first(), Some(Src::Before)) {
        users
    } else {
        slot_guards(users)
    }
}

/// Adds edges from every source in `srcs` (deduplicated; drained) to `to`; `before` is the
/// chunk's precondition.
fn wire(b: &mut SubgraphBuilder<Args>, before: PreId, srcs: &mut Vec<Src>, to: SubgraphTask) {
    srcs.sort_unstable_by_key(|s| match s {
        Src::Task(t) => t.0 as usize + 1,
        Src::Before => 0,
    });
    srcs.dedup();
    for s in srcs.drain(..) {
        match s {
            Src::Task(from) => b.edge(from, to),
            Src::Before => b.wait_for(before, to),
        }
    }
}

/// Compiles timesteps `[t0, t0 + len)` of the graphs `members` (indices into `sh.graphs`).
///
/// A vertex that alone reads a message takes it at its start. On ranks of one worker whose
/// chunk is one vertex per timestep, with every send at the end of its vertex, it pulls the
/// message off the network itself ([`Shared::pull`]): the inlet, inbox slot and mailbox hops
/// were most of what a rank's step cost beyond `bsp`'s (`docs/measurements.md`, "Pulling a
/// message"). A pulling vertex may wait
/// (suspended) with its instance's part on this worker held, so it must never hold back what
/// another rank waits for: its worker's vertices are chained in timestep order (everything it
/// sends before the message it waits for has left), and no other vertex of the chunk sends.
/// Elsewhere the vertex waits for the message as a precondition that the message opens.
pub fn build(
    rt: &Runtime,
    sh: &Arc<Shared>,
    members: &[usize],
    t0: i64,
    len: i64,
) -> Result<Chunk, RunError> {
    if sh.remote.is_some() && !sh.shared_inputs {
        if let Some(c) = build_as(rt, sh, members, (t0, len), true)? {
            return Ok(c);
        }
    }
    Ok(build_as(rt, sh, members, (t0, len), false)?.expect("built with inlets"))
}

/// [`build`], pulling (`None` if the chunk does not allow it) or with inlets.
fn build_as(
    rt: &Runtime,
    sh: &Arc<Shared>,
    members: &[usize],
    (t0, len): (i64, i64),
    pull: bool,
) -> Result<Option<Chunk>, RunError> {
    let mut chained: Option<SubgraphTask> = None;
    let mut b = SubgraphBuilder::<Args>::new();
    let mut tracks = Vec::new();
    for &g in members {
        let w = sh.graphs[g].plan.graph().max_width as usize;
        tracks.push(Track {
            users: vec![vec![Src::Before]; 2 * w],
            last: vec![Src::Before; w],
            width: w,
        });
    }
    // The one condition before and after the chunk: the first precondition (the inlets
    // come after it) and the only postcondition.
    let (before, after) = (b.precondition(), b.postcondition());
    let mut srcs = Vec::new();
    let mut receives = Vec::new();
    let mut vertices: BTreeMap<(usize, i64, usize), Vec<Item>> = BTreeMap::new();
    let mut ids: Vec<(SubgraphTask, Vec<Item>)> = Vec::new();
    // With one worker in the process there is no other worker to overlap with: one vertex.
    let halves = if sh.shared_inputs { HALVES } else { 1 };
    let mut list = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    for i in 0..len {
        let t = t0 + i;
        let row = (t % 2) as usize;
        // The points of `t`, by (worker, place in the worker's block), every graph together.
        for (j, &g) in members.iter().enumerate() {
            let d = &sh.graphs[g];
            if t >= d.plan.graph().timesteps {
                continue;
            }
            let half = j * halves / members.len();
            for p in d.cut.local(&d.plan, t) {
                let (worker, place) = d.cut.slot(p);
                vertices
                    .entry((worker, place, half))
                    .or_default()
                    .push((j, p));
            }
        }
        // A message of `t - 1` that one vertex of `t` alone reads is received at that vertex's
        // start (its precondition and the slots' earlier readers wait for it there): no
        // receive vertex to wake and run. Otherwise the receive gets a vertex of its own.
        let mut fused_in: BTreeMap<(usize, i64, usize), Vec<Fused>> = BTreeMap::new();
        if pull && vertices.len() > 1 {
            return Ok(None);
        }
        for m in std::mem::take(&mut pending) {
            let reads = |items: &Vec<Item>| {
                items.iter().any(|&(j, p)| {
                    sh.graphs[members[j]]
                        .plan
                        .deps(t, p)
                        .iter()
                        .any(|&d| m.items.contains(&(j, d)))
                })
            };
            let mut readers = vertices.iter().filter(|(_, items)| reads(items));
            match (readers.next(), readers.next()) {
                (Some((&key, _)), None) => {
                    let inlet = (!pull).then(|| next_inlet(&mut b, &mut receives, &m));
                    fused_in.entry(key).or_default().push((m, inlet));
                }
                _ => receive_vertex(
                    &mut b,
                    before,
                    &mut srcs,
                    &mut tracks,
                    sh,
                    members,
                    m,
                    &mut receives,
                ),
            }
        }
        ids.clear();
        // A message whose outputs one vertex produces all of is sent at that vertex's end:
        // no vertex of its own to wake and run (on 2 ranks of stencil_1d, every message).
        let mut sends: Vec<(usize, Vec<Item>, bool)> = if sh.remote.is_some() {
            by_rank(sh, members, t, Direction::Send, &mut list)
                .into_iter()
                .map(|(dest, items)| (dest, items, false))
                .collect()
        } else {
            Vec::new()
        };
        for (key, items) in &vertices {
            let worker = key.0;
            let inbound = fused_in.remove(key).unwrap_or_default();
            let inside = |j: usize, d: i64| inbound.iter().any(|(m, _)| m.items.contains(&(j, d)));
            for &(j, p) in items {
                let (plan, tr) = (&sh.graphs[members[j]].plan, &tracks[j]);
                srcs.extend(
                    plan.deps(t, p)
                        .iter()
                        .filter(|&&d| !inside(j, d))
                        .map(|&d| tr.last[d as usize]),
                );
                srcs.extend(write_guards(&tr.users[row * tr.width + p as usize]));
            }
            for (m, _) in &inbound {
                m.guards(&tracks, &mut srcs);
            }
            if pull {
                srcs.extend(chained.map(Src::Task));
            }
            let recv: Vec<Inbound> = inbound
                .iter()
                .map(|(m, inlet)| (m.i, m.src, inlet.map(|x| x.1), global(members, &m.items)))
                .collect();
            let run = global(members, items);
            let inputs = if sh.shared_inputs && run.len() > 1 {
                sh.input_lines(t, &run)
            } else {
                Vec::new()
            };
            let mut fused: Vec<(usize, Vec<(usize, i64)>)> = Vec::new();
            for (dest, out, done) in &mut sends {
                if !*done && out.iter().all(|x| items.contains(x)) {
                    *done = true;
                    fused.push((*dest, global(members, out)));
                }
            }
            let s = sh.clone();
            let id = b.task(worker, move |a: &Args| {
                for (ri, src, slot, pts) in &recv {
                    match slot {
                        Some(k) => s.receive(a, *k, a.t0 + ri, *src, pts),
                        None => s.pull(a.t0 + ri, *src, pts),
                    }
                }
                s.run_points(a.t0 + i, &run, &inputs);
                for (dest, out) in &fused {
                    s.send(a.t0 + i, *dest, out);
                }
            });
            wire(&mut b, before, &mut srcs, id);
            for (m, inlet) in &inbound {
                if let Some((pre, _)) = inlet {
                    b.wait_for(*pre, id);
                }
                m.filled_by(&mut tracks, id);
            }
            chained = Some(id);
            ids.push((id, items.clone()));
        }
        vertices.clear();
        for (id, items) in &ids {
            for &(j, p) in items {
                let plan = &sh.graphs[members[j]].plan;
                let tr = &mut tracks[j];
                tr.users[row * tr.width + p as usize] = vec![Src::Task(*id)];
                for &d in plan.deps(t, p) {
                    tr.users[(1 - row) * tr.width + d as usize].push(Src::Task(*id));
                }
                tr.last[p as usize] = Src::Task(*id);
            }
        }
        if sh.remote.is_none() {
            continue;
        }
        // Outputs of `t` other ranks read: one vertex per destination, after the producers,
        // counted among the slots' readers.
        for (dest, items, _) in sends.into_iter().filter(|s| !s.2) {
            if pull {
                return Ok(None);
            }
            let worker = {
                let (j, p) = items[0];
                sh.graphs[members[j]].cut.worker(p)
            };
            for &(j, q) in &items {
                srcs.push(tracks[j].last[q as usize]);
            }
            let run = global(members, &items);
            let s = sh.clone();
            let id = b.task(worker, move |a: &Args| s.send(a.t0 + i, dest, &run));
            wire(&mut b, before, &mut srcs, id);
            for &(j, q) in &items {
                let tr = &mut tracks[j];
                tr.users[row * tr.width + q as usize].push(Src::Task(id));
            }
        }
        // Outputs of `t` from other ranks: decided at the next timestep (see above).
        for (src, items) in by_rank(sh, members, t, Direction::Receive, &mut list) {
            pending.push(Pending { i, t, src, items });
        }
    }
    for m in pending {
        receive_vertex(
            &mut b,
            before,
            &mut srcs,
            &mut tracks,
            sh,
            members,
            m,
            &mut receives,
        );
    }
    let mut signals = false;
    let finals = tracks.iter().flat_map(|tr| {
        tr.users
            .iter()
            .map(Vec::as_slice)
            .chain(tr.last.iter().map(std::slice::from_ref))
    });
    for srcs in finals {
        for s in srcs {
            if let Src::Task(t) = *s {
                b.signal(t, after);
                signals = true;
            }
        }
    }
    let graph = b
        .compile(rt)
        .map_err(|e| RunError::Runtime(format!("compiling a subgraph: {e}")))?;
    Ok(Some(Chunk {
        graph,
        signals,
        receives,
    }))
}

/// The precondition message `m` opens and its inbox slot: the next of each. Preconditions and
/// `receives` grow together, so the `k`-th inlet of an instance fills slot `k`.
fn next_inlet(
    b: &mut SubgraphBuilder<Args>,
    receives: &mut Vec<(i64, usize)>,
    m: &Pending,
) -> (PreId, usize) {
    let k = receives.len();
    receives.push((m.i, m.src));
    (b.precondition(), k)
}

/// A vertex of its own for message `m`: after its precondition (the next external one; its
/// inbox slot is the next in `receives`) and the readers of the slots it fills, on the worker
/// nearest that rank's points.
#[allow(clippy::too_many_arguments)]
fn receive_vertex(
    b: &mut SubgraphBuilder<Args>,
    before: PreId,
    srcs: &mut Vec<Src>,
    tracks: &mut [Track],
    sh: &Arc<Shared>,
    members: &[usize],
    m: Pending,
    receives: &mut Vec<(i64, usize)>,
) {
    let (pre, k) = next_inlet(b, receives, &m);
    let worker = {
        let (j, d) = m.items[0];
        let data = &sh.graphs[members[j]];
        let readers = data.cut.local(&data.plan, m.t + 1);
        let near = if d < readers.start {
            readers.start
        } else {
            readers.end - 1
        };
        data.cut.worker(near)
    };
    m.guards(tracks, srcs);
    let run = global(members, &m.items);
    let s = sh.clone();
    let (i, src) = (m.i, m.src);
    let id = b.task(worker, move |a: &Args| s.receive(a, k, a.t0 + i, src, &run));
    b.wait_for(pre, id);
    wire(b, before, srcs, id);
    m.filled_by(tracks, id);
}

#[derive(Clone, Copy)]
enum Direction {
    Send,
    Receive,
}

/// The outputs of `t` that cross to (or from) each other rank, every graph of the chain
/// together: (rank, [(member, point)]), ranks ascending, graphs in order, points ascending —
/// the order of the message's outputs on both sides.
fn by_rank(
    sh: &Shared,
    members: &[usize],
    t: i64,
    dir: Direction,
    list: &mut Vec<(usize, i64)>,
) -> Vec<(usize, Vec<Item>)> {
    let mut out: BTreeMap<usize, Vec<Item>> = BTreeMap::new();
    for (j, &g) in members.iter().enumerate() {
        let d = &sh.graphs[g];
        if t >= d.plan.graph().timesteps {
            continue;
        }
        match dir {
            Direction::Send => d.cut.sends(&d.plan, t, list),
            Direction::Receive => d.cut.receives(&d.plan, t, list),
        }
        for &(rank, p) in list.iter() {
            out.entry(rank).or_default().push((j, p));
        }
    }
    out.into_iter().collect()
}
