//! The program a driver issues (`State`): its regions and traced chunks, a timestep's index
//! launch, and on ranks the sends and receives of the outputs that cross them (`edges`).

use super::*;

/// The program and its data.
pub(super) struct State {
    pub(super) program: Program,
    pub(super) table: Constant<Table>,
    /// `traced`: the chunks, and the trace id of each.
    pub(super) chunks: Vec<(i64, i64, u64)>,
    pub(super) steps: i64,
    /// On ranks, what crosses after each class of timestep.
    pub(super) crossings: Crossings,
}

impl State {
    pub(super) fn new(ctx: Ctx, handle: &Handle, style: Style) -> State {
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
                None => crate::systems::shared::block_owners(handle.workers(), g.max_width),
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
            for (t0, len) in crate::systems::compiled::chunks(&plans, TRACE_CHUNK_TASKS) {
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
    pub(super) fn timestep(&mut self, t: i64) {
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
/// message per pair of ranks for every graph together ([`crate::systems::edges`]'s crossings; a message of one output
/// is sent by its point's task, `run_point`): what they read and write is declared, and the
/// analysis orders them.
pub(super) fn edges(
    program: &mut Program,
    table: &Constant<Table>,
    crossings: &mut Crossings,
    t: i64,
) {
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
