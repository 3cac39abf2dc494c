//! What seed 004's styles (`forkjoin`, `parfor`, `futures`) share: a runtime, each graph's
//! outputs and scratch as plain vectors, passes timed from a barrier of every worker, and on
//! several ranks ([`Ranks`]) the outputs that cross ranks, exchanged between timesteps.

use super::edges::{crossing, stream_of, Cut, Remote};
use super::interface::{check_workers, RunConfig, RunError};
use super::team::Pass;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tactor::job::exchange::Key;
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
            block: ranks.map_or(0..g.max_width, |r| r.cuts[gi].block()),
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

/// On several ranks, this rank's part: its end of the cross-rank edges and each graph's cut.
/// After timestep `t` it sends every output of `t` another rank reads, one message per rank
/// with every graph's outputs in it ([`crossing`]); before `t + 1` it takes those of the
/// other ranks.
pub struct Ranks {
    pub remote: Arc<Remote>,
    cuts: Vec<Cut>,
    plans: Vec<Plan>,
    list: Mutex<Vec<(usize, u32, i64)>>,
}

impl Ranks {
    /// The points of graph `gi` at `t` that this rank computes.
    pub fn local(&self, gi: usize, t: i64) -> Range<i64> {
        self.cuts[gi].local(&self.plans[gi], t)
    }

    /// Calls `f` with the key and the (rank, graph, point) list of every message of
    /// timestep `t`'s outputs that this rank sends (`sends`) or receives (none before 0).
    pub fn messages(&self, t: i64, sends: bool, mut f: impl FnMut(Key, &[(usize, u32, i64)])) {
        if t < 0 {
            return;
        }
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        crossing(&self.cuts, &self.plans, t, sends, &mut list);
        for group in list.chunk_by(|a, b| a.0 == b.0) {
            f((stream_of(group), t, group[0].0), group);
        }
    }

    /// Before timestep `t`: the outputs of `t - 1` that this rank's points read from other
    /// ranks, copied into the graphs' rows (waiting for them, the calling task suspended).
    pub fn receive(&self, t: i64, graphs: &mut [Buffers]) -> Result<(), RunError> {
        let mut result = Ok(());
        self.messages(t - 1, false, |key, group| {
            let len = group
                .iter()
                .map(|&(_, gi, _)| graphs[gi as usize].bytes())
                .sum();
            let mut took = false;
            let mut take = |m: &[u8]| {
                let Some(mut items) = self.remote.check(key, Some(m), group.len(), len) else {
                    return;
                };
                for &(_, gi, d) in group {
                    let out = &mut graphs[gi as usize].rows[((t - 1) % 2) as usize][d as usize];
                    let (mine, rest) = items.split_at(out.len());
                    out.copy_from_slice(mine);
                    items = rest;
                }
                took = true;
            };
            if result.is_ok() {
                result = match self.remote.pull(key, &mut take) {
                    Err(why) => Err(self.failure(why)),
                    Ok(()) if !took => Err(self.failure(String::new())),
                    Ok(()) => Ok(()),
                };
            }
        });
        result
    }

    /// After timestep `t`: sends the outputs of `t` that other ranks read.
    pub fn send(&self, t: i64, graphs: &[Buffers]) {
        let channel = tactor::current_worker().unwrap_or(0);
        self.messages(t, true, |(stream, t, dest), group| {
            let out = |&(_, gi, q): &(usize, u32, i64)| {
                &graphs[gi as usize].rows[(t % 2) as usize][q as usize][..]
            };
            let len = group.iter().map(|e| out(e).len()).sum();
            let outputs = group.iter().map(out);
            (self.remote).send(channel, dest, (stream, t), (group.len(), len), outputs);
        });
    }

    /// Why the exchange stopped: a protocol error of this rank's, another rank's failure, or
    /// `why`.
    pub fn failure(&self, why: String) -> RunError {
        if let Some(e) = self.remote.take_error() {
            return RunError::Runtime(e);
        }
        match self.remote.job().failed_rank() {
            Some(rank) => RunError::Remote { rank },
            None => RunError::Runtime(why),
        }
    }
}

impl Buffers {
    fn bytes(&self) -> usize {
        self.plan.graph().output_bytes_per_task
    }
}

/// A runtime with the run's workers (pinned if they fit the cores), and on several ranks
/// this rank's part of the run, whose messages the workers progress.
pub fn start(app: &App, cfg: &RunConfig) -> Result<(Runtime, Option<Ranks>), RunError> {
    check_workers(cfg)?;
    let (rt, remote) = super::edges::runtime(cfg)?;
    let ranks = remote.zip(cfg.job.as_ref()).map(|(remote, job)| {
        let place = taskbench_core::app::Placement {
            ranks: job.ranks() as i64,
            workers: cfg.workers as i64,
        };
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        Ranks {
            cuts: plans
                .iter()
                .map(|p| Cut::new(p, place, job.rank()))
                .collect(),
            plans,
            remote,
            list: Mutex::default(),
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
            (r.remote.job().barrier()).map_err(|e| r.failure(e.to_string()))?;
            r.remote.expect(true);
            rt.wake();
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
        if let Some(r) = ranks {
            r.remote.expect(false);
            if let Err(e) = result {
                // Nothing more is sent, and what waits here for other ranks ends.
                r.remote.abandon();
                return Err(
                    match (r.remote.take_error(), r.remote.job().failed_rank()) {
                        (Some(why), _) => RunError::Runtime(why),
                        // What failed here because another rank did: that rank says why.
                        (None, Some(rank)) if !matches!(e, RunError::Validation(_)) => {
                            RunError::Remote { rank }
                        }
                        _ => e,
                    },
                );
            }
            if r.remote.pending() != 0 {
                return Err(RunError::Runtime(format!(
                    "{} messages from other ranks arrived but no task used them",
                    r.remote.pending()
                )));
            }
        }
        result?;
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
