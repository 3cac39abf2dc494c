//! The program's data and its point task: each point's region (`Point`), the run's
//! constants (`Ctx`, `Table`), the input lists a point reads, kept per kind of point or built
//! (`Kind`, `project`), and the task (`run_point`).

use super::*;

/// A point's region: its output and its scratch. An output of up to [`INLINE`] bytes fills
/// the region's first line, which a traced vertex asks for before running its launches (a
/// reader on another worker then takes the misses of its inputs together, not one after
/// another); a larger one, and the scratch, are on lines of their own. What the point only
/// reads (its graph, point, the output's length) is on the second line: were it on the
/// output's line, a writer's first read would wait for the line its readers took
/// (`docs/measurements.md`, "implicit's point layout").
#[repr(C, align(64))]
pub(super) struct Point {
    pub(super) inline: [u8; INLINE],
    /// The output's length.
    pub(super) len: u32,
    /// Its graph and point: the task that runs it need not find them from its index.
    pub(super) graph: u32,
    pub(super) point: i64,
    /// The output, when longer than [`INLINE`].
    pub(super) spill: Option<LineBuf>,
    pub(super) scratch: LineBuf,
}

/// Output bytes kept on a point region's first line.
pub(super) const INLINE: usize = 64;

impl Point {
    pub(super) fn new(graph: usize, point: i64, output: usize, scratch: usize) -> Point {
        Point {
            inline: [0; INLINE],
            len: u32::try_from(output).expect("outputs of fewer than 2^32 bytes"),
            graph: u32::try_from(graph).expect("fewer than 2^32 graphs"),
            point,
            spill: (output > INLINE).then(|| LineBuf::from(&vec![0; output])),
            scratch: LineBuf::from(&new_scratch(scratch)),
        }
    }

    pub(super) fn output(&self) -> &[u8] {
        match &self.spill {
            Some(b) => b.as_slice(),
            None => &self.inline[..self.len as usize],
        }
    }

    pub(super) fn output_mut(&mut self) -> &mut [u8] {
        self.output_and_scratch().0
    }

    /// The output and the scratch, both for writing.
    pub(super) fn output_and_scratch(&mut self) -> (&mut [u8], &mut [u8]) {
        let output = match &mut self.spill {
            Some(b) => b.as_mut_slice(),
            None => &mut self.inline[..self.len as usize],
        };
        (output, self.scratch.as_mut_slice())
    }
}

/// What every task reaches.
pub(super) struct Ctx {
    pub(super) plans: Vec<Plan>,
    pub(super) error: ErrorSlot,
    /// On several ranks: the cross-rank edges, and per graph this rank's points.
    pub(super) ranks: Option<(Arc<Exchange>, Vec<Cut>)>,
    /// The outputs sent alone in their message: their point's task sends them (a send
    /// launch per timestep and rank was a third of a rank's launches on a stencil).
    pub(super) lone: Option<Lone>,
    /// Other workers of this process read the outputs: claim and share their lines
    /// (`compiled` and `tasks` now only share them, see [`crate::systems::run_shared_task`]; the claim
    /// was not measured again here); with one worker the hints only push out lines that this
    /// core reads next.
    pub(super) shared: bool,
}

/// A point's inputs: reads of its dependencies' outputs.
pub(super) type Inputs = SmallVec<[Read<Point>; 4]>;

/// What the points of every timestep reach: the graphs, the regions and where points run. A
/// constant of the program, which index launches hand their points uncounted: what the
/// issuing thread writes for a timestep is then the timestep alone.
pub(super) struct Table {
    pub(super) ctx: Constant<Ctx>,
    pub(super) graphs: Vec<GraphTable>,
    /// Points run at their block owners (as a compiled subgraph needs), else anywhere.
    pub(super) pinned: bool,
    /// Every point's input list is kept: in its timestep's kind, or in its graph's cache.
    pub(super) cached: bool,
    /// Each timestep's kind (the shape of every graph and the row), when the program has few
    /// enough kinds to keep each one's points whole (see [`KIND_ENTRIES`]); else empty.
    pub(super) kind_of: Vec<u32>,
    /// Per kind, its points, built at the first use.
    pub(super) kinds: Vec<OnceLock<Kind>>,
}

/// The points of one kind of timestep, in the order of its index launch: a projection is a
/// lookup here instead of a search through the graphs (measured: `docs/measurements.md`,
/// "Lists of reads without a copy").
pub(super) struct Kind {
    pub(super) points: Vec<KindPoint>,
    /// The points' input lists, back to back.
    pub(super) reads: Vec<Read<Point>>,
}

/// A point of a [`Kind`]: where it runs, its input list in [`Kind::reads`], and its graph and
/// point (its region in the timestep's row).
pub(super) struct KindPoint {
    pub(super) place: Placement,
    pub(super) start: u32,
    pub(super) len: u32,
    pub(super) graph: u32,
    pub(super) point: u32,
}

/// Kinds are kept when their points and input lists hold at most this many entries in all.
pub(super) const KIND_ENTRIES: usize = 1 << 20;

/// At most this many kinds of timestep are kept.
pub(super) const KINDS: usize = 256;

impl Kind {
    pub(super) fn of(table: &Table, t: i64) -> Kind {
        let n = table.points(t);
        let mut points = Vec::with_capacity(n as usize);
        let mut reads = Vec::new();
        for i in 0..n {
            let at = point_at(table, t, i);
            let list = match &at.inputs {
                Listed::Kept(l) => l,
                Listed::Built(b) => &b[..],
            };
            points.push(KindPoint {
                place: at.place,
                start: u32::try_from(reads.len()).expect("fewer than 2^32 reads in a kind"),
                len: u32::try_from(list.len()).expect("fewer than 2^32 reads in a list"),
                graph: at.graph as u32,
                point: u32::try_from(at.point).expect("fewer than 2^32 points"),
            });
            reads.extend_from_slice(list);
        }
        Kind { points, reads }
    }
}

/// Each timestep's kind and the number of kinds, if the kinds fit [`KINDS`] and
/// [`KIND_ENTRIES`]; else nothing.
pub(super) fn kinds(graphs: &[GraphTable], plans: &[Plan], steps: i64) -> (Vec<u32>, usize) {
    let mut ids: HashMap<(Vec<Option<u32>>, i64), u32> = HashMap::new();
    let mut entries = 0usize;
    let mut kind_of = Vec::new();
    for t in 0..steps {
        let shapes: Vec<Option<u32>> = graphs.iter().map(|g| g.shape(t)).collect();
        let next = ids.len() as u32;
        let id = *ids.entry((shapes, t % 2)).or_insert_with(|| {
            for (g, plan) in graphs.iter().zip(plans) {
                let Some(s) = g.shape(t) else { continue };
                let l = g.local[s as usize];
                for p in l.first..l.first + i64::from(l.len) {
                    entries = entries.saturating_add(1 + plan.deps(t, p).len());
                }
            }
            next
        });
        if ids.len() > KINDS || entries > KIND_ENTRIES {
            return (Vec::new(), 0);
        }
        kind_of.push(id);
    }
    (kind_of, ids.len())
}

/// One graph's part of the [`Table`].
pub(super) struct GraphTable {
    /// Per row, per point.
    pub(super) regions: [Vec<Region<Point>>; 2],
    /// The worker of each point (block distribution).
    pub(super) owners: Vec<usize>,
    /// Each timestep's shape ([`Plan::shape_id`]).
    pub(super) shape_of: Vec<u32>,
    /// Per shape, this rank's points of a timestep of that shape.
    pub(super) local: Vec<Local>,
    /// Per `shape × 2 + row`, each point's inputs, built at their first use (see
    /// [`CACHED_SHAPES`]).
    pub(super) inputs: Vec<OnceLock<Vec<Inputs>>>,
}

/// This rank's points of a timestep: `len` of them from `first`, which is the `skip`-th point
/// of the timestep.
#[derive(Clone, Copy, Default)]
pub(super) struct Local {
    pub(super) first: i64,
    pub(super) len: u32,
    pub(super) skip: u32,
}

impl GraphTable {
    /// The shape of timestep `t`; `None` past the graph's last timestep.
    pub(super) fn shape(&self, t: i64) -> Option<u32> {
        self.shape_of.get(t as usize).copied()
    }
}

/// Graphs with at most this many timestep shapes keep each shape's input lists (per row
/// parity): a projection then copies a list instead of looking the dependencies up, which
/// was a fifth of the issuing thread's time on `traced` when it projected every point, and
/// a quarter of a point's time on the worker when the worker does.
pub(super) const CACHED_SHAPES: usize = 64;

impl Table {
    /// The graph of the `i`-th point of timestep `t`'s index launch (this rank's points of
    /// every graph, graph by graph, ascending), its rank among that graph's points, and the
    /// timestep's shape in that graph.
    pub(super) fn locate(&self, t: i64, mut i: u32) -> (usize, u32, u32) {
        for (gi, g) in self.graphs.iter().enumerate() {
            let Some(s) = g.shape(t) else {
                continue;
            };
            let len = g.local[s as usize].len;
            if i < len {
                return (gi, i, s);
            }
            i -= len;
        }
        unreachable!("a point past the timestep's points")
    }

    /// How many points timestep `t` has on this rank.
    pub(super) fn points(&self, t: i64) -> u32 {
        self.graphs
            .iter()
            .filter_map(|g| Some(g.local[g.shape(t)? as usize].len))
            .sum()
    }
}

/// The points of graph `gi` at `t` that this rank computes.
pub(super) fn local(ctx: &Ctx, gi: usize, plan: &Plan, t: i64) -> Local {
    let (offset, width) = (plan.offset(t), plan.width(t));
    let r = match &ctx.ranks {
        Some((_, cuts)) => cuts[gi].local(plan, t),
        None => offset..offset + width,
    };
    // A rank whose block lies outside the timestep's points has none (the range is then
    // given as backwards).
    Local {
        first: r.start,
        len: u32::try_from((r.end - r.start).max(0)).expect("fewer than 2^32 points"),
        skip: u32::try_from(r.start - offset).unwrap_or(0),
    }
}

/// Point `i` of timestep `t`: where it runs, the region it writes, and its inputs — a read of
/// each dependency's output (last timestep's row), kept in its graph's cache if the graph has
/// one ([`CACHED_SHAPES`]), else built.
pub(super) fn point_at(table: &Table, t: i64, i: u32) -> At<'_> {
    let (gi, j, shape) = table.locate(t, i);
    let g = &table.graphs[gi];
    let at = g.local[shape as usize];
    let p = at.first + i64::from(j);
    let (row, prev) = ((t % 2) as usize, ((t + 1) % 2) as usize);
    let build = |p: i64| -> Inputs {
        table.ctx.plans[gi]
            .deps(t, p)
            .iter()
            .map(|&d| read(&g.regions[prev][d as usize]))
            .collect()
    };
    let inputs = match g.inputs.get(shape as usize * 2 + row) {
        None => Listed::Built(build(p)),
        Some(cache) => {
            let lists = cache.get_or_init(|| {
                let plan = &table.ctx.plans[gi];
                let off = plan.offset(t);
                (off..off + plan.width(t)).map(build).collect()
            });
            Listed::Kept(&lists[(at.skip + j) as usize][..])
        }
    };
    let place = if table.pinned {
        Placement::Worker(g.owners[p as usize])
    } else {
        Placement::Any
    };
    At {
        place,
        output: &g.regions[row][p as usize],
        graph: gi,
        point: p,
        inputs,
    }
}

/// A point as [`point_at`] finds it.
pub(super) struct At<'a> {
    pub(super) place: Placement,
    /// The region it writes.
    pub(super) output: &'a Region<Point>,
    pub(super) graph: usize,
    pub(super) point: i64,
    pub(super) inputs: Listed<'a>,
}

/// A point's inputs, kept in the table or built for it.
pub(super) enum Listed<'a> {
    Kept(&'a [Read<Point>]),
    Built(Inputs),
}

/// Where point `i` of a timestep runs and what it declares (see [`point_at`]), when every
/// graph keeps its input lists: the point gets its list from the table without a copy
/// (measured: `docs/measurements.md`, "Lists of reads without a copy").
pub(super) fn project(
    c: ConstRef<'_, Table>,
    t: i64,
    i: u32,
) -> (Placement, (ReadList<Point>, ReadWrite<Point>)) {
    let table = c.get();
    if let Some(&k) = table.kind_of.get(t as usize) {
        let kind = table.kinds[k as usize].get_or_init(|| Kind::of(table, t));
        let e = &kind.points[i as usize];
        let list = &kind.reads[e.start as usize..(e.start + e.len) as usize];
        let output = &table.graphs[e.graph as usize].regions[(t % 2) as usize][e.point as usize];
        return (e.place, (c.reads(list), read_write(output)));
    }
    let at = point_at(table, t, i);
    let Listed::Kept(list) = at.inputs else {
        unreachable!("`project` is launched only when every input list is kept")
    };
    (at.place, (c.reads(list), read_write(at.output)))
}

/// [`project`] for programs with a graph of too many shapes to keep its input lists.
pub(super) fn project_built(
    c: ConstRef<'_, Table>,
    t: i64,
    i: u32,
) -> (Placement, (Inputs, ReadWrite<Point>)) {
    let at = point_at(c.get(), t, i);
    let inputs = match at.inputs {
        Listed::Kept(list) => Inputs::from_slice(list),
        Listed::Built(built) => built,
    };
    (at.place, (inputs, read_write(at.output)))
}

/// Point `i` of a timestep: the kernel on its inputs, validating each.
pub(super) fn run_point(
    table: &Table,
    t: i64,
    _: u32,
    (inputs, me): (Reads<'_, Point>, &mut Point),
) {
    let ctx = &*table.ctx;
    if ctx.error.failed() {
        return;
    }
    let (gi, p) = (me.graph as usize, me.point);
    let (output, scratch) = me.output_and_scratch();
    if ctx.shared {
        tactor::hint::claim(output);
    }
    let r = run_inputs(
        &ctx.plans[gi],
        t,
        p,
        output,
        scratch,
        inputs.iter().map(Point::output),
    );
    if ctx.shared {
        tactor::hint::share(output);
    }
    if let Err(e) = r {
        return ctx.error.record(e);
    }
    if let (Some((remote, _)), Some(lone)) = (&ctx.ranks, &ctx.lone) {
        let mine = |s: &&(u32, i64, usize)| s.0 as usize == gi && s.1 == p;
        for &(_, _, dest) in lone.at(t).iter().filter(mine) {
            let channel = tactor::current_worker().unwrap_or(0);
            let out = std::iter::once(me.output());
            remote.send(channel, dest, (gi as u32, t), 1, me.output().len(), out);
        }
    }
}
