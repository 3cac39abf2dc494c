//! What seed 004's styles (`forkjoin`, `parfor`, `futures`) share: a runtime and every graph
//! of the run ([`Graphs`]): its plan, its outputs and scratch as plain vectors, and on
//! several ranks this rank's block of its points and the outputs that cross ranks, exchanged
//! between timesteps.

use super::interface::{RunConfig, RunError};
use std::ops::Range;
use tactor::job::{Blocks, Exchange};
use tactor::Runtime;
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// A graph's plan, two rows of outputs (timestep parity) and a scratch buffer per point.
pub struct Buffers {
    pub plan: Plan,
    rows: [Vec<Vec<u8>>; 2],
    scratch: Vec<Vec<u8>>,
    block: Range<i64>,
}

/// Timestep `t` of one graph: its plan, this rank's points each with its output and
/// scratch, and the outputs of the timestep before.
pub type Step<'a> = (
    &'a Plan,
    Vec<(i64, &'a mut Vec<u8>, &'a mut Vec<u8>)>,
    &'a [Vec<u8>],
);

/// Every graph of a run; on several ranks each graph's outputs are an array cut in one block
/// per rank ([`Blocks`]): after timestep `t` [`Graphs::send`] sends the outputs of `t` that
/// other ranks read, before `t + 1` [`Graphs::receive`] takes theirs, one message per pair
/// of ranks for all graphs. In one process both do nothing.
pub struct Graphs {
    pub graphs: Vec<Buffers>,
    blocks: Option<Blocks>,
}

impl Buffers {
    /// The points of timestep `t` this rank computes (none once the graph has ended).
    pub fn step(&mut self, t: i64) -> Step<'_> {
        let points = live(&self.plan, &self.block, t);
        let [even, odd] = &mut self.rows;
        let (row, prev) = if t % 2 == 0 { (even, odd) } else { (odd, even) };
        let mine = (row.iter_mut().zip(&mut self.scratch)).skip(points.start as usize);
        let points = points.zip(mine).map(|(p, (o, s))| (p, o, s)).collect();
        (&self.plan, points, prev)
    }
}

/// This rank's points of `plan` at `t` (its `block`), none once the graph has ended.
fn live(plan: &Plan, block: &Range<i64>, t: i64) -> Range<i64> {
    let first = plan.offset(t).max(block.start);
    let end = (plan.offset(t) + plan.width(t)).min(block.end);
    match t < plan.graph().timesteps {
        true => first..end.max(first),
        false => first..first,
    }
}

/// A runtime with the run's workers, and every graph of `app` (with its rows of outputs and
/// scratch if `rows`), on several ranks this rank's part.
pub fn start(app: &App, cfg: &RunConfig, rows: bool) -> Result<(Runtime, Graphs), RunError> {
    let (rt, exchange) = cfg.tactor()?;
    let sizes: Vec<(usize, usize)> = (app.graphs.iter())
        .map(|g| (g.max_width as usize, g.output_bytes_per_task))
        .collect();
    let blocks = exchange.map(|ex| Blocks::new(ex, 0, &sizes));
    let buffers = |(gi, g): (usize, &taskbench_core::graph::TaskGraph)| {
        let (width, n) = (
            g.max_width as usize,
            if rows { g.max_width as usize } else { 0 },
        );
        let mine = blocks.as_ref().map_or(0..width, |b| b.mine(gi));
        Buffers {
            rows: [0, 1].map(|_| vec![vec![0; g.output_bytes_per_task]; n]),
            scratch: vec![new_scratch(g.scratch_bytes_per_task); n],
            plan: Plan::new(g.clone()),
            block: mine.start as i64..mine.end as i64,
        }
    };
    let graphs = app.graphs.iter().enumerate().map(buffers).collect();
    Ok((rt, Graphs { graphs, blocks }))
}

impl Graphs {
    /// The timesteps of the longest graph.
    pub fn steps(&self) -> i64 {
        (self.graphs.iter())
            .map(|g| g.plan.graph().timesteps)
            .max()
            .unwrap_or(0)
    }

    /// On several ranks, the exchange the outputs go through.
    pub fn exchange(&self) -> Option<std::sync::Arc<Exchange>> {
        self.blocks.as_ref().map(|b| b.exchange().clone())
    }

    /// The points of graph `gi` at `t` that this rank computes.
    pub fn points(&self, gi: usize, t: i64) -> Range<i64> {
        live(&self.graphs[gi].plan, &self.graphs[gi].block, t)
    }

    /// On several ranks, the blocks and the points that read point `q` of graph `g` at
    /// `t + 1` (`readers`), or that point `q` reads then.
    pub fn links<'a>(
        &'a self,
        t: i64,
        readers: bool,
    ) -> Option<(&'a Blocks, impl Fn(usize, usize) -> Links<'a> + 'a)> {
        let links = move |g: usize, q: usize| {
            let plan = &self.graphs[g].plan;
            let list = match readers {
                true => plan.rdeps(t + 1, q as i64),
                false => plan.deps(t + 1, q as i64),
            };
            list.iter().map((|&p| p as usize) as fn(&i64) -> usize)
        };
        self.blocks.as_ref().map(|b| (b, links))
    }

    /// Before timestep `t`: the outputs of `t - 1` that this rank's points read from other
    /// ranks, copied into the graphs' rows (waiting for them, the calling task suspended).
    pub fn receive(&mut self, t: i64) -> Result<(), RunError> {
        let row = ((t - 1) % 2) as usize;
        let Some(blocks) = self.blocks.as_ref().filter(|_| t > 0) else {
            return Ok(());
        };
        let (mut rows, plans): (Vec<_>, Vec<_>) = (self.graphs.iter_mut())
            .map(|g| (&mut g.rows[row], &g.plan))
            .unzip();
        let links = |g: usize, q: usize| plans[g].deps(t, q as i64).iter().map(|&p| p as usize);
        let put = |g: usize, d: usize, bytes: &[u8]| rows[g][d].copy_from_slice(bytes);
        (blocks.receive(t - 1, links, put)).map_err(|why| RunError::waiting(blocks.exchange(), why))
    }

    /// After timestep `t`: sends the outputs of `t` that other ranks read.
    pub fn send(&self, t: i64) {
        if let Some((blocks, readers)) = self.links(t, true) {
            let out = |g: usize, q: usize| &self.graphs[g].rows[(t % 2) as usize][q][..];
            blocks.send(t, readers, out);
        }
    }
}

/// The points [`Graphs::links`] gives.
pub type Links<'a> = std::iter::Map<std::slice::Iter<'a, i64>, fn(&i64) -> usize>;
