//! Which outputs of a graph cross ranks ([`Cut`]: points are block-distributed over every
//! rank's workers), this rank's end of those edges ([`Remote`]: the runtime's [`Exchange`],
//! through which the faults of the rank-failure tests are injected), and a runtime whose
//! workers progress it ([`runtime`]).
//!
//! After timestep `t`, the outputs that one rank's points read from another rank's at `t + 1`
//! travel as **one message per (stream, timestep, pair of ranks)**, a stream being a graph
//! (`tasks`, `implicit`) or all the graphs a `compiled` chain runs in lock-step. Both ends
//! derive a message's point list from the graph, so a message carries outputs only.

use super::interface::{RunConfig, RunError};
use crate::faults::{injected_fault, Fault};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tactor::job::{Exchange, Job};
use tactor::Runtime;
use taskbench_core::app::Placement;
use taskbench_core::plan::Plan;

/// The port of the cross-rank edges of `tasks`, `compiled` and `implicit`.
pub const PORT_EDGES: u16 = tactor::job::FIRST_PORT + 1;

/// The timestep whose message a `slow` rank holds back ([`Fault::Slow`]).
const SLOW_AT: i64 = 20;

/// Which points of a graph this rank computes, on which local worker, and which outputs cross
/// to or from other ranks after each timestep. Both ends of a message derive its point list
/// from the graph (the sender from reverse dependencies, the receiver from dependencies),
/// ascending, so a message carries outputs only.
pub struct Cut {
    place: Placement,
    rank: usize,
    /// The global worker of each point.
    owner: Vec<u32>,
    width: i64,
}

impl Cut {
    /// The cut of `plan` for `rank` under `place`.
    pub fn new(plan: &Plan, place: Placement, rank: usize) -> Cut {
        let width = plan.graph().max_width;
        Cut {
            place,
            rank,
            owner: (0..width)
                .map(|p| place.worker_of(p, width) as u32)
                .collect(),
            width,
        }
    }

    fn rank_of(&self, p: i64) -> usize {
        self.owner[p as usize] as usize / self.place.workers as usize
    }

    /// The local worker that runs point `p` (a point of this rank).
    pub fn worker(&self, p: i64) -> usize {
        self.owner[p as usize] as usize % self.place.workers as usize
    }

    /// The local worker that runs point `p`, and `p`'s place in that worker's block.
    pub fn slot(&self, p: i64) -> (usize, i64) {
        let owner = i64::from(self.owner[p as usize]);
        (self.worker(p), p - self.place.first(owner, self.width))
    }

    /// The points this rank computes, at every timestep.
    pub fn block(&self) -> std::ops::Range<i64> {
        let me = self.rank as i64 * self.place.workers;
        self.place.first(me, self.width)..self.place.first(me + self.place.workers, self.width)
    }

    /// The points of timestep `t` this rank computes.
    pub fn local(&self, plan: &Plan, t: i64) -> std::ops::Range<i64> {
        let block = self.block();
        block.start.max(plan.offset(t))..block.end.min(plan.offset(t) + plan.width(t))
    }

    /// (destination rank, point) of every output of `t` this rank sends, grouped by rank,
    /// points ascending.
    pub fn sends(&self, plan: &Plan, t: i64, out: &mut Vec<(usize, i64)>) {
        out.clear();
        if t + 1 >= plan.graph().timesteps {
            return;
        }
        for q in self.local(plan, t) {
            out.extend(
                plan.rdeps(t + 1, q)
                    .iter()
                    .map(|&p| (self.rank_of(p), q))
                    .filter(|&(r, _)| r != self.rank),
            );
        }
        out.sort_unstable();
        out.dedup();
    }

    /// (source rank, point) of every output of `t` this rank receives, grouped by rank,
    /// points ascending.
    pub fn receives(&self, plan: &Plan, t: i64, out: &mut Vec<(usize, i64)>) {
        out.clear();
        if t + 1 >= plan.graph().timesteps {
            return;
        }
        for p in self.local(plan, t + 1) {
            out.extend(
                plan.deps(t + 1, p)
                    .iter()
                    .map(|&d| (self.rank_of(d), d))
                    .filter(|&(r, _)| r != self.rank),
            );
        }
        out.sort_unstable();
        out.dedup();
    }
}

/// A runtime with the run's workers and pinning, and on several ranks this rank's end of the
/// cross-rank edges, whose network progress the workers run.
pub fn runtime(cfg: &RunConfig) -> Result<(Runtime, Option<Arc<Remote>>), RunError> {
    let remote = match &cfg.job {
        Some(job) => Some(Remote::new(job).map_err(|e| RunError::Runtime(e.to_string()))?),
        None => None,
    };
    let allowed = core_affinity::get_core_ids().map_or(0, |c| c.len());
    let first = super::interface::first_core_here(cfg.workers, cfg.job.is_some(), allowed);
    let mut b = Runtime::builder()
        .workers(cfg.workers)
        .pin(cfg.pin && first.is_some())
        .first_core(first.unwrap_or(0));
    if let Some(r) = &remote {
        b = b.poller(r.exchange());
    }
    let rt = b
        .build()
        .map_err(|e| RunError::Runtime(format!("starting the Tactor runtime: {e}")))?;
    Ok((rt, remote))
}

/// The stream of a message that carries several outputs of one timestep, of any graphs (a
/// message of one output is on its graph's stream).
pub const ALL_GRAPHS: u32 = u32::MAX;

/// (rank, graph, point) of every output of timestep `t` that this rank sends (`sends`) or
/// receives after `t`, over every graph: grouped by rank, then graph by graph, points
/// ascending — one message per rank, both ends listing it alike.
pub fn crossing(
    cuts: &[Cut],
    plans: &[Plan],
    t: i64,
    sends: bool,
    out: &mut Vec<(usize, u32, i64)>,
) {
    out.clear();
    let mut list = Vec::new();
    for (gi, (cut, plan)) in cuts.iter().zip(plans).enumerate() {
        if t >= plan.graph().timesteps {
            continue;
        }
        match sends {
            true => cut.sends(plan, t, &mut list),
            false => cut.receives(plan, t, &mut list),
        }
        out.extend(list.iter().map(|&(r, p)| (r, gi as u32, p)));
    }
    out.sort_unstable();
}

/// The stream of the message of `group` (one rank's part of [`crossing`]).
pub fn stream_of(group: &[(usize, u32, i64)]) -> u32 {
    match group {
        [(_, gi, _)] => *gi,
        _ => ALL_GRAPHS,
    }
}

/// Per timestep, the outputs this rank sends alone in their message ([`crossing`]), as
/// (graph, point, destination rank): their producer can send them as it ends, with no send
/// task of their own.
pub struct Lone {
    /// Where each timestep's entries start in `sends` (one more entry than timesteps).
    start: Vec<usize>,
    sends: Vec<(u32, i64, usize)>,
}

impl Lone {
    /// The outputs of every graph of this rank that go alone to another rank, per timestep.
    pub fn new(cuts: &[Cut], plans: &[Plan]) -> Lone {
        let steps = plans.iter().map(|p| p.graph().timesteps).max().unwrap_or(0);
        let mut list = Vec::new();
        let mut lone = Lone {
            start: vec![0],
            sends: Vec::new(),
        };
        for t in 0..steps {
            crossing(cuts, plans, t, true, &mut list);
            let single = list.chunk_by(|a, b| a.0 == b.0).filter(|g| g.len() == 1);
            lone.sends.extend(single.map(|g| (g[0].1, g[0].2, g[0].0)));
            lone.start.push(lone.sends.len());
        }
        lone
    }

    /// The outputs of timestep `t` sent alone.
    pub fn at(&self, t: i64) -> &[(u32, i64, usize)] {
        let t = t as usize;
        match (self.start.get(t), self.start.get(t + 1)) {
            (Some(&a), Some(&b)) => &self.sends[a..b],
            _ => &[],
        }
    }
}

/// This rank's end of the cross-rank edges: the job's [`Exchange`] on [`PORT_EDGES`] (which it
/// dereferences to), sending through [`Remote::send`] so that a rank told to by
/// `TASKBENCH_FAULT` injects its fault there.
pub struct Remote {
    exchange: Arc<Exchange>,
    fault: Option<Fault>,
    faulted: AtomicBool,
}

impl Deref for Remote {
    type Target = Exchange;

    fn deref(&self) -> &Exchange {
        &self.exchange
    }
}

impl Remote {
    /// Opens the edges' exchange on `job`.
    pub fn new(job: &Arc<Job>) -> Result<Arc<Remote>, tactor::job::JobError> {
        Ok(Arc::new(Remote {
            exchange: Exchange::open(job, PORT_EDGES)?,
            fault: injected_fault(job.rank()),
            faulted: AtomicBool::new(false),
        }))
    }

    /// The exchange, for the runtime to poll.
    pub fn exchange(&self) -> Arc<Exchange> {
        self.exchange.clone()
    }

    /// Sends `outputs` (`count` of them, `len` bytes in all) of timestep `t` of `stream` to
    /// rank `dest` ([`Exchange::send`]), injecting this rank's fault if it has one.
    pub fn send<'a>(
        &self,
        channel: usize,
        dest: usize,
        (stream, t): (u32, i64),
        (count, len): (usize, usize),
        outputs: impl Iterator<Item = &'a [u8]>,
    ) {
        // A slow rank holds back a message of the middle of the run, when the receiver is
        // sure to be waiting for it.
        let due = self.fault != Some(Fault::Slow) || t == SLOW_AT;
        if self.fault.is_some() && count > 0 && due && !self.faulted.swap(true, Ordering::Relaxed) {
            let mut buf = Vec::with_capacity(len);
            outputs.for_each(|o| buf.extend_from_slice(o));
            match self.fault {
                Some(Fault::Panic) => panic!("injected fault (TASKBENCH_FAULT)"),
                Some(Fault::Slow) => std::thread::sleep(crate::faults::SLOW),
                _ => {
                    if let Some(b) = buf.first_mut() {
                        *b ^= 1;
                    }
                }
            }
            return self
                .exchange
                .send_buffer(channel, dest, (stream, t), count, &buf);
        }
        self.exchange
            .send(channel, dest, (stream, t), count, len, outputs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskbench_core::app::App;
    use taskbench_core::graph::DependenceType;

    fn plan(flags: &str) -> Plan {
        let args: Vec<&str> = flags.split_whitespace().collect();
        let (app, _) = App::parse(&args, &[]).expect("valid flags");
        Plan::new(app.graphs[0].clone())
    }

    /// `crossing` agrees at both ends of every message over several graphs, and `Lone`
    /// lists, per timestep, exactly the messages of one output.
    #[test]
    fn messages_over_all_graphs_agree_and_lone_outputs_are_listed() {
        let plans = [
            plan("-steps 6 -width 5 -type stencil_1d"),
            plan("-steps 4 -width 9 -type nearest -radix 3"),
            plan("-steps 6 -width 8 -type fft"),
        ];
        for (ranks, workers) in [(2, 1), (3, 2)] {
            let place = Placement { ranks, workers };
            let cuts: Vec<Vec<Cut>> = (0..ranks as usize)
                .map(|r| plans.iter().map(|p| Cut::new(p, place, r)).collect())
                .collect();
            let (mut s, mut r) = (Vec::new(), Vec::new());
            for t in 0..6 {
                for (a, ca) in cuts.iter().enumerate() {
                    crossing(ca, &plans, t, true, &mut s);
                    let lone = Lone::new(ca, &plans);
                    let want: Vec<(u32, i64, usize)> = s
                        .chunk_by(|x, y| x.0 == y.0)
                        .filter(|g| g.len() == 1)
                        .map(|g| (g[0].1, g[0].2, g[0].0))
                        .collect();
                    assert_eq!(lone.at(t), &want[..], "rank {a} t={t}");
                    for (b, cb) in cuts.iter().enumerate() {
                        crossing(cb, &plans, t, false, &mut r);
                        let sent: Vec<_> =
                            s.iter().filter(|x| x.0 == b).map(|x| (x.1, x.2)).collect();
                        let got: Vec<_> =
                            r.iter().filter(|x| x.0 == a).map(|x| (x.1, x.2)).collect();
                        assert_eq!(sent, got, "t={t}: rank {a} to rank {b}");
                    }
                }
            }
        }
    }

    /// What rank `a` sends rank `b` after each timestep is exactly what `b` expects from `a`,
    /// in the same order, and it is every dependency that crosses between them.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "no unsafe code here, and thousands of plans are slow under Miri"
    )]
    fn both_ends_of_every_message_agree() {
        let types = DependenceType::ALL
            .into_iter()
            .filter(|&t| t != DependenceType::RandomSpread)
            .map(DependenceType::name);
        for ty in types {
            for (ranks, workers, width) in [(2, 1, 5i64), (3, 2, 7), (3, 1, 3), (2, 2, 9)] {
                let mut flags = format!("-steps 7 -width {width} -type {ty} -radix 3");
                if ty == "spread" {
                    flags += &format!(" -period {}", 3.min((width + 2) / 3));
                }
                let p = plan(&flags);
                let place = Placement { ranks, workers };
                let cuts: Vec<Cut> = (0..ranks as usize)
                    .map(|r| Cut::new(&p, place, r))
                    .collect();
                let (mut s, mut r) = (Vec::new(), Vec::new());
                for t in 0..p.graph().timesteps {
                    let mut crossing = 0;
                    for (a, ca) in cuts.iter().enumerate() {
                        ca.sends(&p, t, &mut s);
                        for (b, cb) in cuts.iter().enumerate() {
                            cb.receives(&p, t, &mut r);
                            let sent: Vec<i64> =
                                s.iter().filter(|x| x.0 == b).map(|x| x.1).collect();
                            let expected: Vec<i64> =
                                r.iter().filter(|x| x.0 == a).map(|x| x.1).collect();
                            assert_eq!(sent, expected, "{ty} t={t}: rank {a} to rank {b}");
                            crossing += sent.len();
                        }
                    }
                    // Every output read on another rank is sent once per reading rank.
                    let mut want = 0;
                    if t + 1 < p.graph().timesteps {
                        let lo = p.offset(t + 1);
                        let mut pairs = Vec::new();
                        for q in lo..lo + p.width(t + 1) {
                            for &d in p.deps(t + 1, q) {
                                let (rd, rq) = (place.rank_of(d, width), place.rank_of(q, width));
                                if rd != rq {
                                    pairs.push((d, rq));
                                }
                            }
                        }
                        pairs.sort_unstable();
                        pairs.dedup();
                        want = pairs.len();
                    }
                    assert_eq!(crossing, want, "{ty} t={t}");
                }
            }
        }
    }
}
