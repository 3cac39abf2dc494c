//! What seed 004's styles (`forkjoin`, `parfor`, `futures`) share: a runtime, each graph's
//! outputs and scratch as plain vectors, passes timed from a barrier of every worker, and on
//! several ranks ([`Ranks`]) the outputs that cross ranks, exchanged between timesteps.

use super::interface::{check_workers, RunConfig, RunError};
use super::team::Pass;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};

use std::time::Instant;
use tactor::job::Blocks;
use tactor::{Placement, Runtime};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::{tasks_executed_on_this_thread, Plan};

/// A graph's plan, two rows of outputs (timestep parity), a scratch buffer per point, and the
/// points this rank computes.
pub struct Buffers {
    pub plan: Plan,
    rows: [Vec<Vec<u8>>; 2],
    scratch: Vec<Vec<u8>>,
    block: Range<i64>,
}

/// Timestep `t` of one graph: its plan, its points each with its output and scratch, and the
/// outputs of the timestep before.
pub type Step<'a> = (
    &'a Plan,
    Vec<(i64, &'a mut Vec<u8>, &'a mut Vec<u8>)>,
    &'a [Vec<u8>],
);

impl Buffers {
    /// Every graph of `app`, with the points of this rank (`ranks`) or all of them.
    pub fn all(app: &App, ranks: Option<&Ranks>) -> Vec<Buffers> {
        let new = |(gi, g): (usize, &taskbench_core::graph::TaskGraph)| Buffers {
            rows: [0, 1].map(|_| vec![vec![0; g.output_bytes_per_task]; g.max_width as usize]),
            scratch: vec![new_scratch(g.scratch_bytes_per_task); g.max_width as usize],
            plan: Plan::new(g.clone()),
            block: ranks.map_or(0..g.max_width, |r| {
                let mine = r.blocks.mine(gi);
                mine.start as i64..mine.end as i64
            }),
        };
        app.graphs.iter().enumerate().map(new).collect()
    }

    /// The points of timestep `t` this rank computes (none once the graph has ended).
    pub fn step(&mut self, t: i64) -> Step<'_> {
        let Buffers {
            plan,
            rows,
            scratch,
            block,
        } = self;
        let [even, odd] = rows;
        let (row, prev) = if t % 2 == 0 { (even, odd) } else { (odd, even) };
        let first = plan.offset(t).max(block.start);
        let end = (plan.offset(t) + plan.width(t)).min(block.end);
        let live = if t < plan.graph().timesteps {
            (end - first).max(0) as usize
        } else {
            0
        };
        let points = (first..).zip(row.iter_mut().zip(scratch).skip(first as usize));
        (
            plan,
            points.take(live).map(|(p, (o, s))| (p, o, s)).collect(),
            prev,
        )
    }
}

/// On several ranks, this rank's part: each graph's outputs an array cut in one block per
/// rank ([`Blocks`]). After timestep `t` it sends the outputs of `t` that other ranks read,
/// before `t + 1` it takes theirs: one message per pair of ranks for all graphs.
pub struct Ranks {
    pub blocks: Blocks,
    plans: Vec<Plan>,
}

impl Ranks {
    /// The points of graph `gi` at `t` that this rank computes.
    pub fn local(&self, gi: usize, t: i64) -> Range<i64> {
        let (mine, plan) = (self.blocks.mine(gi), &self.plans[gi]);
        (mine.start as i64).max(plan.offset(t))
            ..(mine.end as i64).min(plan.offset(t) + plan.width(t))
    }

    /// The points that read point `q` of graph `g` at `t + 1` (`readers`), or that point `q`
    /// reads then.
    pub fn links<'a>(&'a self, t: i64, readers: bool) -> impl Fn(usize, usize) -> Links<'a> + 'a {
        move |g, q| {
            let plan = &self.plans[g];
            let list = match readers {
                true => plan.rdeps(t + 1, q as i64),
                false => plan.deps(t + 1, q as i64),
            };
            list.iter().map((|&p| p as usize) as fn(&i64) -> usize)
        }
    }

    /// Before timestep `t`: the outputs of `t - 1` that this rank's points read from other
    /// ranks, copied into the graphs' rows (waiting for them, the calling task suspended).
    pub fn receive(&self, t: i64, graphs: &mut [Buffers]) -> Result<(), RunError> {
        if t == 0 {
            return Ok(());
        }
        let row = ((t - 1) % 2) as usize;
        let put = |g: usize, d: usize, bytes: &[u8]| graphs[g].rows[row][d].copy_from_slice(bytes);
        (self.blocks.receive(t - 1, self.links(t - 1, false), put))
            .map_err(|why| super::network::failure(self.blocks.exchange(), why))
    }

    /// After timestep `t`: sends the outputs of `t` that other ranks read.
    pub fn send(&self, t: i64, graphs: &[Buffers]) {
        let out = |g: usize, q: usize| &graphs[g].rows[(t % 2) as usize][q][..];
        self.blocks.send(t, self.links(t, true), out);
    }
}

/// The points [`Ranks::links`] gives.
pub type Links<'a> = std::iter::Map<std::slice::Iter<'a, i64>, fn(&i64) -> usize>;

/// A runtime with the run's workers (pinned if they fit the cores), and on several ranks
/// this rank's part of the run, whose messages the workers progress.
pub fn start(app: &App, cfg: &RunConfig) -> Result<(Runtime, Option<Ranks>), RunError> {
    check_workers(cfg)?;
    let (rt, exchange) = super::network::runtime(cfg)?;
    let ranks = exchange.map(|exchange| {
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        let arrays: Vec<(usize, usize)> = (plans.iter().map(|p| p.graph()))
            .map(|g| (g.max_width as usize, g.output_bytes_per_task))
            .collect();
        Ranks {
            blocks: Blocks::new(exchange, 0, &arrays),
            plans,
        }
    });
    Ok((rt, ranks))
}

/// A warm-up pass and a timed one of `body`, each run on worker 0 once every worker arrived
/// (and on several ranks, once every rank did).
pub fn passes(
    rt: &Runtime,
    ranks: Option<&Ranks>,
    body: impl Fn() -> Result<(), RunError> + Sync,
) -> Result<Pass, RunError> {
    let mut last = None;
    for _ in 0..2 {
        if let Some(r) = ranks {
            super::network::start_pass(rt, r.blocks.exchange())?;
        }
        let (arrived, tasks) = (AtomicUsize::new(0), AtomicU64::new(0));
        let (mut elapsed, mut result) = (None, Ok(()));
        // Tasks validated before the pass, taken off (wrapping) what the workers count after it.
        let here = || {
            tasks.fetch_sub(tasks_executed_on_this_thread(), SeqCst);
            arrived.fetch_add(1, SeqCst);
            while arrived.load(SeqCst) < rt.workers() {
                std::thread::yield_now();
            }
        };
        rt.scope(|s| {
            let (here, body, elapsed, result) = (&here, &body, &mut elapsed, &mut result);
            s.launch(Placement::Worker(0), &[], move |_| {
                here();
                let start = Instant::now();
                *result = body();
                *elapsed = Some(start.elapsed());
            });
            (1..rt.workers())
                .for_each(|w| drop(s.launch(Placement::Worker(w), &[], move |_| here())));
        })
        .map_err(|e| RunError::Runtime(e.to_string()))?;
        match ranks {
            Some(r) => super::network::end_pass(r.blocks.exchange(), result)?,
            None => result?,
        }
        rt.scope(|s| {
            for w in 0..rt.workers() {
                let tasks = &tasks;
                s.launch(Placement::Worker(w), &[], move |_| {
                    tasks.fetch_add(tasks_executed_on_this_thread(), SeqCst);
                });
            }
        })
        .map_err(|e| RunError::Runtime(e.to_string()))?;
        last = elapsed.map(|elapsed| Pass {
            elapsed,
            tasks: tasks.into_inner(),
        });
    }
    Ok(last.expect("the timed pass ran"))
}
