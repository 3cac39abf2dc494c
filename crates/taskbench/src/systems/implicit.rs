//! `implicit`, `traced` and `auto`: the graph written as a sequential program on Tactor's implicit
//! parallelism. Each timestep is one index launch (Legion's) whose points are the timestep's
//! points of every graph; each point declares what it touches — a read of each dependency's
//! output, a read-write of its own output slot — and the program's dependence analysis
//! derives every edge, the write-after-read ones of buffer reuse included. Nothing in this
//! file computes an edge.
//!
//! Data are regions: per graph, two rows (timestep parity) of one region per point, holding
//! the point's output and its scratch, as `tasks` keeps them in slots.
//!
//! The program is issued by a driver task that analyses a few timesteps, then relaunches
//! itself behind the fence of an earlier chunk, so launching overlaps execution and the
//! analysis never runs far ahead.
//!
//! `traced` is the same program with each chunk of timesteps (the chunks of `compiled`: all
//! graphs in lock-step, about 512 tasks, an even number of timesteps) in a trace whose id is
//! the chunk's sequence of timestep shapes: recorded and compiled at its first execution
//! (the warm-up pass), replayed as one compiled-subgraph instance after that. Its points are
//! placed by the block distribution (a compiled subgraph places every task); `implicit`
//! places them anywhere, like `tasks`.
//!
//! `auto` is `implicit`'s program, placed like `traced`, with no annotation at all: the
//! program's automatic tracing finds the repeating fragment (two timesteps, for the parity of
//! the rows) and traces runs of it.
//!
//! On several ranks every rank runs the same program over the same
//! regions — control replication — but launches only its own points (the block distribution
//! over ranks, as `tasks`). The regions of other ranks' points are this rank's replicas: after
//! timestep `t`, a launch reading the outputs another rank needs, of every graph, sends them
//! in one message ([`super::edges`]; a message of one output is sent by its point's task
//! instead), and on that rank a launch that waits for the message
//! ([`Program::launch_after`]) writes them into the replicas, where the readers find them. The
//! analysis orders those launches like any other: a replica is rewritten only after its
//! readers of the previous timestep ran. In `traced` the sends and receives are recorded with
//! the chunk: each rank's trace holds its own points and its edges, and every execution
//! hands the receives the arrival events of its own timesteps (external preconditions of the
//! instance, seed 000's Figure 9). In `auto` the fragments automatic tracing finds hold them
//! the same way; the driver then waits only behind fences made before every launch its open
//! fragment holds (see [`behind`]).

use super::edges::{stream_of, Crossings, Cut, Lone, ALL_GRAPHS};
use super::interface::{check_workers, RunConfig, RunError, System};
use super::on_tactor::{self, ErrorSlot};
use super::shared::{footprint, run_inputs};
use super::slots::LineBuf;
use super::team::Pass;
use smallvec::SmallVec;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use tactor::implicit::{
    constant, read, read_write, write, ConstRef, Constant, Inputs as Reads, Program, Read,
    ReadList, ReadWrite, Region, Write,
};
use tactor::job::Exchange;
use tactor::{Event, Handle, Placement, UserEvent};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// The sequential program with its data declared, analysed launch by launch or traced.
pub struct Implicit {
    style: Style,
}

/// How the program is traced.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Not: every launch analysed.
    Plain,
    /// Each chunk of timesteps in a trace of its own.
    Traced,
    /// No annotations; the program finds the repeated fragments itself.
    Auto,
}

impl Implicit {
    /// Every launch analysed.
    pub const PLAIN: Implicit = Implicit {
        style: Style::Plain,
    };
    /// The repeating timesteps traced.
    pub const TRACED: Implicit = Implicit {
        style: Style::Traced,
    };
    /// Automatic tracing.
    pub const AUTO: Implicit = Implicit { style: Style::Auto };
}

/// Timesteps the driver of `implicit` analyses before relaunching itself.
const CHUNK: i64 = 4;

/// Batches of `implicit` and `auto` between two fences (the driver relaunches itself behind
/// the fence before the last, so at most about 2 × FENCE_EVERY × CHUNK timesteps are in flight).
const FENCE_EVERY: i64 = 8;

/// The driver relaunches itself behind the fence this many batches (traced chunks) back: it
/// issues ahead of the execution by up to this many, so that a chunk is issued before the one
/// it follows ends even though the driver only gets the gaps between vertices on its worker.
const ISSUE_AHEAD: usize = 3;

/// Tasks per chunk of `traced` (cut as `compiled` cuts its chunks): its first chunk of each
/// shape is analysed and recorded, the rest replayed, so `compiled`'s longer chunks (4096
/// tasks) would leave a run of 1000 timesteps half recorded.
const TRACE_CHUNK_TASKS: i64 = 512;

/// Timesteps the driver of `traced` issues per driver task (at most a chunk).
const TRACED_SLICE: i64 = i64::MAX / 2;

/// A point's region: its output and its scratch. An output of up to [`INLINE`] bytes fills
/// the region's first line, which a traced vertex asks for before running its launches (a
/// reader on another worker then takes the misses of its inputs together, not one after
/// another); a larger one, and the scratch, are on lines of their own. What the point only
/// reads (its graph, point, the output's length) is on the second line: were it on the
/// output's line, a writer's first read would wait for the line its readers took
/// (`docs/measurements.md`, "implicit's point layout").
#[repr(C, align(64))]
struct Point {
    inline: [u8; INLINE],
    /// The output's length.
    len: u32,
    /// Its graph and point: the task that runs it need not find them from its index.
    graph: u32,
    point: i64,
    /// The output, when longer than [`INLINE`].
    spill: Option<LineBuf>,
    scratch: LineBuf,
}

/// Output bytes kept on a point region's first line.
const INLINE: usize = 64;

impl Point {
    fn new(graph: usize, point: i64, output: usize, scratch: usize) -> Point {
        Point {
            inline: [0; INLINE],
            len: u32::try_from(output).expect("outputs of fewer than 2^32 bytes"),
            graph: u32::try_from(graph).expect("fewer than 2^32 graphs"),
            point,
            spill: (output > INLINE).then(|| LineBuf::from(&vec![0; output])),
            scratch: LineBuf::from(&new_scratch(scratch)),
        }
    }

    fn output(&self) -> &[u8] {
        match &self.spill {
            Some(b) => b.as_slice(),
            None => &self.inline[..self.len as usize],
        }
    }

    fn output_mut(&mut self) -> &mut [u8] {
        self.output_and_scratch().0
    }

    /// The output and the scratch, both for writing.
    fn output_and_scratch(&mut self) -> (&mut [u8], &mut [u8]) {
        let output = match &mut self.spill {
            Some(b) => b.as_mut_slice(),
            None => &mut self.inline[..self.len as usize],
        };
        (output, self.scratch.as_mut_slice())
    }
}

/// What every task reaches.
struct Ctx {
    plans: Vec<Plan>,
    error: ErrorSlot,
    /// On several ranks: the cross-rank edges, and per graph this rank's points.
    ranks: Option<(Arc<Exchange>, Vec<Cut>)>,
    /// The outputs sent alone in their message: their point's task sends them (a send
    /// launch per timestep and rank was a third of a rank's launches on a stencil).
    lone: Option<Lone>,
    /// Other workers of this process read the outputs: claim and share their lines
    /// (`compiled` and `tasks` now only share them, see [`super::run_shared_task`]; the claim
    /// was not measured again here); with one worker the hints only push out lines that this
    /// core reads next.
    shared: bool,
}

/// A point's inputs: reads of its dependencies' outputs.
type Inputs = SmallVec<[Read<Point>; 4]>;

/// What the points of every timestep reach: the graphs, the regions and where points run. A
/// constant of the program, which index launches hand their points uncounted: what the
/// issuing thread writes for a timestep is then the timestep alone.
struct Table {
    ctx: Constant<Ctx>,
    graphs: Vec<GraphTable>,
    /// Points run at their block owners (as a compiled subgraph needs), else anywhere.
    pinned: bool,
    /// Every point's input list is kept: in its timestep's kind, or in its graph's cache.
    cached: bool,
    /// Each timestep's kind (the shape of every graph and the row), when the program has few
    /// enough kinds to keep each one's points whole (see [`KIND_ENTRIES`]); else empty.
    kind_of: Vec<u32>,
    /// Per kind, its points, built at the first use.
    kinds: Vec<OnceLock<Kind>>,
}

/// The points of one kind of timestep, in the order of its index launch: a projection is a
/// lookup here instead of a search through the graphs (measured: `docs/measurements.md`,
/// "Lists of reads without a copy").
struct Kind {
    points: Vec<KindPoint>,
    /// The points' input lists, back to back.
    reads: Vec<Read<Point>>,
}

/// A point of a [`Kind`]: where it runs, its input list in [`Kind::reads`], and its graph and
/// point (its region in the timestep's row).
struct KindPoint {
    place: Placement,
    start: u32,
    len: u32,
    graph: u32,
    point: u32,
}

/// Kinds are kept when their points and input lists hold at most this many entries in all.
const KIND_ENTRIES: usize = 1 << 20;

/// At most this many kinds of timestep are kept.
const KINDS: usize = 256;

impl Kind {
    fn of(table: &Table, t: i64) -> Kind {
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
fn kinds(graphs: &[GraphTable], plans: &[Plan], steps: i64) -> (Vec<u32>, usize) {
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
struct GraphTable {
    /// Per row, per point.
    regions: [Vec<Region<Point>>; 2],
    /// The worker of each point (block distribution).
    owners: Vec<usize>,
    /// Each timestep's shape ([`Plan::shape_id`]).
    shape_of: Vec<u32>,
    /// Per shape, this rank's points of a timestep of that shape.
    local: Vec<Local>,
    /// Per `shape × 2 + row`, each point's inputs, built at their first use (see
    /// [`CACHED_SHAPES`]).
    inputs: Vec<OnceLock<Vec<Inputs>>>,
}

/// This rank's points of a timestep: `len` of them from `first`, which is the `skip`-th point
/// of the timestep.
#[derive(Clone, Copy, Default)]
struct Local {
    first: i64,
    len: u32,
    skip: u32,
}

impl GraphTable {
    /// The shape of timestep `t`; `None` past the graph's last timestep.
    fn shape(&self, t: i64) -> Option<u32> {
        self.shape_of.get(t as usize).copied()
    }
}

/// Graphs with at most this many timestep shapes keep each shape's input lists (per row
/// parity): a projection then copies a list instead of looking the dependencies up, which
/// was a fifth of the issuing thread's time on `traced` when it projected every point, and
/// a quarter of a point's time on the worker when the worker does.
const CACHED_SHAPES: usize = 64;

impl Table {
    /// The graph of the `i`-th point of timestep `t`'s index launch (this rank's points of
    /// every graph, graph by graph, ascending), its rank among that graph's points, and the
    /// timestep's shape in that graph.
    fn locate(&self, t: i64, mut i: u32) -> (usize, u32, u32) {
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
    fn points(&self, t: i64) -> u32 {
        self.graphs
            .iter()
            .filter_map(|g| Some(g.local[g.shape(t)? as usize].len))
            .sum()
    }
}

/// The points of graph `gi` at `t` that this rank computes.
fn local(ctx: &Ctx, gi: usize, plan: &Plan, t: i64) -> Local {
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
fn point_at(table: &Table, t: i64, i: u32) -> At<'_> {
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
struct At<'a> {
    place: Placement,
    /// The region it writes.
    output: &'a Region<Point>,
    graph: usize,
    point: i64,
    inputs: Listed<'a>,
}

/// A point's inputs, kept in the table or built for it.
enum Listed<'a> {
    Kept(&'a [Read<Point>]),
    Built(Inputs),
}

/// Where point `i` of a timestep runs and what it declares (see [`point_at`]), when every
/// graph keeps its input lists: the point gets its list from the table without a copy
/// (measured: `docs/measurements.md`, "Lists of reads without a copy").
fn project(
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
fn project_built(
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
fn run_point(table: &Table, t: i64, _: u32, (inputs, me): (Reads<'_, Point>, &mut Point)) {
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

/// The program and its data.
struct State {
    program: Program,
    table: Constant<Table>,
    /// `traced`: the chunks, and the trace id of each.
    chunks: Vec<(i64, i64, u64)>,
    steps: i64,
    /// On ranks, what crosses after each class of timestep.
    crossings: Crossings,
}

impl State {
    fn new(ctx: Ctx, handle: &Handle, style: Style) -> State {
        let traced = style == Style::Traced;
        let mut program = Program::new(handle);
        program.auto_trace(style == Style::Auto);
        let mut graphs = Vec::new();
        for (gi, plan) in ctx.plans.iter().enumerate() {
            let g = plan.graph();
            let mut row = || -> Vec<Region<Point>> {
                (0..g.max_width)
                    .map(|point| {
                        program.region(Point::new(
                            gi,
                            point,
                            g.output_bytes_per_task,
                            g.scratch_bytes_per_task,
                        ))
                    })
                    .collect()
            };
            let regions = [row(), row()];
            let owners = match &ctx.ranks {
                // The local worker of each of this rank's points (others are not launched).
                Some((_, cuts)) => (0..g.max_width).map(|p| cuts[gi].worker(p)).collect(),
                None => super::shared::block_owners(handle.workers(), g.max_width),
            };
            let shape_of: Vec<u32> = (0..g.timesteps)
                .map(|t| plan.shape_id(t).expect("a timestep of the graph"))
                .collect();
            // A shape fixes the timestep's points, so one timestep of each gives its part.
            let mut locals = vec![None; plan.shapes()];
            for (t, &sh) in shape_of.iter().enumerate() {
                locals[sh as usize].get_or_insert_with(|| local(&ctx, gi, plan, t as i64));
            }
            let cached = if plan.shapes() <= CACHED_SHAPES {
                plan.shapes() * 2
            } else {
                0
            };
            graphs.push(GraphTable {
                regions,
                owners,
                shape_of,
                local: locals.into_iter().map(Option::unwrap_or_default).collect(),
                inputs: (0..cached).map(|_| OnceLock::new()).collect(),
            });
        }
        let plans: Vec<&Plan> = ctx.plans.iter().collect();
        let steps = plans.iter().map(|p| p.graph().timesteps).max().unwrap_or(0);
        let mut chunks = Vec::new();
        if traced {
            let mut ids: HashMap<(Vec<Vec<u32>>, i64, i64), u64> = HashMap::new();
            // On ranks a chunk's last timestep sends what the next timestep reads: its shape
            // is part of what the chunk launches.
            let after = i64::from(ctx.ranks.is_some());
            // Chunks cut as `compiled` cuts them, smaller. Chunks that grew from two timesteps (so that the first
            // replay need not wait for a whole chunk's launches) lost to these in 5 of 5
            // paired METG runs (stencil w2, 1000 steps; e.g. 0.42 vs 0.41, 0.46 vs 0.38,
            // 0.58 vs 0.48 µs): a small chunk's boundary costs more than the wait. Level on
            // 4 × nearest.
            for (t0, len) in super::compiled::chunks(&plans, TRACE_CHUNK_TASKS) {
                let shapes = plans
                    .iter()
                    .map(|p| {
                        (t0..t0 + len + after)
                            .filter_map(|t| p.shape_id(t))
                            .collect()
                    })
                    .collect();
                let next = ids.len() as u64;
                let id = *ids.entry((shapes, t0 % 2, len)).or_insert(next);
                chunks.push((t0, len, id));
            }
        }
        let (kind_of, kinds) = kinds(&graphs, &ctx.plans, steps);
        let cached = kinds > 0 || graphs.iter().all(|g| !g.inputs.is_empty());
        let table = Table {
            ctx: program.constant(ctx),
            cached,
            kind_of,
            kinds: (0..kinds).map(|_| OnceLock::new()).collect(),
            graphs,
            pinned: style != Style::Plain,
        };
        State {
            table: program.constant(table),
            program,
            chunks,
            steps,
            crossings: Crossings::default(),
        }
    }

    /// Launches timestep `t` of every graph: one index launch for this rank's points of all
    /// graphs (on ranks, then each graph's sends and receives).
    fn timestep(&mut self, t: i64) {
        let points = self.table.points(t);
        let p = &mut self.program;
        if self.table.cached {
            p.index_launch(points, &self.table, t, project, run_point);
        } else {
            p.index_launch(points, &self.table, t, project_built, run_point);
        }
        edges(&mut self.program, &self.table, &mut self.crossings, t);
    }
}

/// Launches the sends and receives of the outputs of timestep `t` that cross ranks, one
/// message per pair of ranks for every graph together ([`crossing`]; a message of one output
/// is sent by its point's task, `run_point`): what they read and write is declared, and the
/// analysis orders them.
fn edges(program: &mut Program, table: &Constant<Table>, crossings: &mut Crossings, t: i64) {
    let ctx = &table.ctx;
    let Some((remote, cuts)) = &ctx.ranks else {
        return;
    };
    let row = (t % 2) as usize;
    let region = |gi: u32, p: i64| &table.graphs[gi as usize].regions[row][p as usize];
    let [sends, receives] = crossings.at(cuts, &ctx.plans, t);
    for group in sends.chunk_by(|a, b| a.0 == b.0).filter(|g| g.len() > 1) {
        let dest = group[0].0;
        let outputs: Vec<Read<Point>> = group.iter().map(|&(_, g, q)| read(region(g, q))).collect();
        program.launch(
            Placement::Any,
            (constant(ctx), outputs),
            move |(ctx, outputs)| {
                let Some((remote, _)) = &ctx.ranks else {
                    return;
                };
                let channel = tactor::current_worker().unwrap_or(0);
                let len = outputs.iter().map(|o| o.output().len()).sum();
                let data = outputs.iter().map(|o| o.output());
                remote.send(channel, dest, (ALL_GRAPHS, t), outputs.len(), len, data);
            },
        );
    }
    for group in receives.chunk_by(|a, b| a.0 == b.0) {
        let key = (stream_of(group), t, group[0].0);
        let replicas: Vec<Write<Point>> =
            group.iter().map(|&(_, g, d)| write(region(g, d))).collect();
        let bytes =
            |&(_, g, _): &(usize, u32, i64)| ctx.plans[g as usize].graph().output_bytes_per_task;
        let (count, len) = (group.len(), group.iter().map(bytes).sum());
        program.launch_after(
            &remote.arrival(key),
            Placement::Any,
            (constant(ctx), replicas),
            move |(ctx, mut replicas)| {
                let Some((remote, _)) = &ctx.ranks else {
                    return;
                };
                let Some(m) = remote.receive(key, count, len) else {
                    return;
                };
                let mut items = tactor::job::Exchange::payload(&m);
                for i in 0..count {
                    let out = replicas.get_mut(i).output_mut();
                    let (item, rest) = items.split_at(out.len());
                    out.copy_from_slice(item);
                    items = rest;
                }
            },
        );
    }
}

/// What the driver hands back when the program has been issued: the program, its fence, and
/// the first error of the tracing.
type Done = (State, Event, Option<String>);

/// The driver's end of the pass: where it leaves the program when the pass ends. Dropped
/// without sending (the driver task failed), it poisons the event the pass waits for.
struct Handback {
    slot: Arc<Mutex<Option<Done>>>,
    ready: UserEvent,
}

/// The pass's end: waits for the program on a worker (suspended, not blocking the thread).
struct Pickup {
    slot: Arc<Mutex<Option<Done>>>,
    ready: Event,
}

fn handback() -> (Handback, Pickup) {
    let slot = Arc::new(Mutex::new(None));
    let ready = UserEvent::new();
    let pickup = Pickup {
        slot: slot.clone(),
        ready: ready.event(),
    };
    (Handback { slot, ready }, pickup)
}

impl Handback {
    fn send(self, done: Done) {
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(done);
        let _ = self.ready.trigger();
    }
}

impl Pickup {
    /// The program, or `None` if the driver ended without handing it back.
    fn take(self) -> Option<Done> {
        self.ready.wait().ok()?;
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Where the driver is: the next timestep, and for `traced` the chunk it is in.
#[derive(Clone, Copy)]
struct Cursor {
    t: i64,
    chunk: usize,
}

/// The driver's fences, oldest first, each with the launches the program had taken when it
/// was made.
type Fences = VecDeque<(Event, u64)>;

/// The fence the driver relaunches behind: the oldest once [`ISSUE_AHEAD`] are kept, so that it
/// issues at most that many batches (traced chunks) ahead of the execution; but only a fence
/// made before every launch the program still holds (`issued` of them are issued). On ranks,
/// held launches of `auto` (a fragment not yet complete) may be sends another rank needs to
/// reach its own fence: waiting behind a later fence while holding them could leave two ranks
/// each waiting for the other. The driver then issues on until the fragment completes.
fn behind(fences: &mut Fences, issued: u64) -> Option<Event> {
    while fences.len() > ISSUE_AHEAD && fences[1].1 <= issued {
        fences.pop_front();
    }
    let (oldest, at) = fences.front()?;
    (fences.len() >= ISSUE_AHEAD && *at <= issued).then(|| oldest.clone())
}

/// Where the driver runs: always on one worker (the last). Placed anywhere, each relaunch
/// went to whichever worker took it, and the issuing moved between cores with the arena
/// lines it writes (measured: `docs/measurements.md`, "Where the driver runs").
fn driver_place(handle: &Handle) -> Placement {
    Placement::Worker(handle.workers().saturating_sub(1))
}

/// Issues the program from `at` on. `implicit` and `auto` issue `CHUNK` timesteps per driver
/// task, and relaunch the driver behind the fence of the batch before last. `traced` issues
/// chunk after chunk in one task, relaxing (its worker runs its share of the instances in
/// flight meanwhile), and waits only when it is `ISSUE_AHEAD` chunks ahead of the execution.
fn drive(
    handle: Handle,
    mut st: State,
    at: Cursor,
    style: Style,
    mut fences: Fences,
    done: Handback,
) {
    let traced = style == Style::Traced;
    let mut at = at;
    loop {
        let mut next = at;
        let result = (|| {
            let to = if traced {
                let (t0, len, id) = st.chunks[at.chunk];
                if at.t == t0 {
                    st.program.begin_trace(id)?;
                }
                (at.t + TRACED_SLICE).min(t0 + len)
            } else {
                (at.t + CHUNK).min(st.steps)
            };
            for t in at.t..to {
                st.timestep(t);
            }
            next.t = to;
            // A fence merges every region's state (a subscription per event): `implicit` and
            // `auto` take one every FENCE_EVERY batches. `traced` keeps the event of each
            // chunk's execution instead, which costs nothing (all it launches is in chunks).
            if traced {
                let (t0, len, _) = st.chunks[at.chunk];
                if to == t0 + len {
                    let executed = st.program.end_trace()?;
                    next.chunk += 1;
                    fences.push_back((executed, st.program.launched()));
                }
            } else if (to / CHUNK) % FENCE_EVERY == 0 {
                let fence = st.program.fence();
                fences.push_back((fence, st.program.launched()));
            }
            Ok::<(), tactor::implicit::TraceError>(())
        })();
        if let Err(e) = result {
            let fence = st.program.fence();
            done.send((st, fence, Some(e.to_string())));
            return;
        }
        if next.t >= st.steps || st.table.ctx.error.failed() {
            st.program.flush();
            let fence = st.program.fence();
            // Waiting here suspends this task, not the worker: the program goes back when the
            // pass has ended, so the thread that started it wakes once, as for the other
            // systems (a second wake-up, mid-pass, cost a tail of up to 0.3 ms at METG sizes).
            let _ = fence.wait();
            done.send((st, fence, None));
            return;
        }
        let older = behind(&mut fences, st.program.issued());
        // `traced` goes on in this task while it need not wait: everything it issues runs in
        // compiled instances, which start and run on this worker at its `relax` calls. A new
        // driver task per chunk cost a few microseconds of a worker that bounds the pass.
        // The others hand the worker back between batches: their analysed tasks run from
        // the worker's task queues, which only the end of this task lets it reach.
        if traced && older.as_ref().is_none_or(Event::has_triggered) {
            at = next;
            continue;
        }
        let h = handle.clone();
        handle.launch(driver_place(&handle), older.as_slice(), move || {
            drive(h, st, next, style, fences, done)
        });
        return;
    }
}

impl System for Implicit {
    fn name(&self) -> &'static str {
        match self.style {
            Style::Plain => "implicit",
            Style::Traced => "traced",
            Style::Auto => "auto",
        }
    }

    fn about(&self) -> &'static str {
        match self.style {
            Style::Plain => {
                "Tactor's implicit parallelism: each point a task declaring what it reads and \
                 writes; the runtime derives every edge"
            }
            Style::Traced => {
                "Tactor's implicit parallelism with each chunk of timesteps traced: analysed \
                 once, replayed as a compiled subgraph"
            }
            Style::Auto => {
                "Tactor's implicit parallelism with automatic tracing: the runtime finds the \
                 repeated fragments without annotations"
            }
        }
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Two rows of outputs and scratch, the tasks of the timesteps in flight (up to three
        // fences of the driver, or a whole traced chunk and its recording), and the runtime.
        let ahead = match self.style {
            Style::Plain => 3 * FENCE_EVERY * CHUNK + 2,
            Style::Traced | Style::Auto => 2048,
        };
        footprint::rows(app, 2, 2)
            .saturating_add(footprint::per_task(app, |_| ahead, 768, 96))
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let (rt, remote) = cfg.tactor()?;
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        let (place, rank) = on_tactor::placement(cfg);
        let ranks = remote.clone().map(|r| {
            let cuts: Vec<Cut> = plans.iter().map(|p| Cut::new(p, place, rank)).collect();
            (r, cuts)
        });
        let lone = ranks.as_ref().map(|(_, cuts)| Lone::new(cuts, &plans));
        let ctx = Ctx {
            ranks,
            lone,
            plans,
            error: ErrorSlot::new(remote.clone()),
            shared: cfg.workers > 1,
        };
        let first = State::new(ctx, &rt.handle(), self.style);
        let ctx = first.table.ctx.clone();
        let mut state = Some(first);
        let style = self.style;
        on_tactor::passes(&rt, &ctx.error, remote.as_deref(), || {
            let st = state
                .take()
                .expect("the program comes back after every pass");
            let (tx, rx) = handback();
            let h = rt.handle();
            let empty = st.steps == 0;
            if empty {
                tx.send((st, Event::triggered(), None));
            } else {
                let start = Fences::new();
                let at = Cursor { t: 0, chunk: 0 };
                rt.launch(driver_place(&h), &[], move || {
                    drive(h, st, at, style, start, tx)
                });
            }
            let (st, fence, trace_error) = rx
                .take()
                .ok_or_else(|| RunError::Runtime("the program's driver task failed".into()))?;
            state = Some(st);
            if let Some(e) = trace_error {
                return Err(RunError::Runtime(e));
            }
            fence.wait().map_err(|e| RunError::Runtime(e.to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Point, INLINE};

    #[test]
    fn outputs_up_to_a_line_stay_inline_and_longer_ones_spill() {
        for len in [0, 1, 16, INLINE, INLINE + 1, 1024] {
            let mut p = Point::new(3, 7, len, 8);
            assert_eq!(p.spill.is_some(), len > INLINE);
            assert_eq!(p.output().len(), len);
            p.output_mut().fill(5);
            assert!(p.output().iter().all(|&b| b == 5));
            assert_eq!((p.graph, p.point), (3, 7));
        }
        // The output's line holds nothing the point's task reads first.
        assert_eq!(std::mem::offset_of!(Point, len), INLINE);
        assert_eq!(std::mem::align_of::<Point>(), 64);
    }
}
