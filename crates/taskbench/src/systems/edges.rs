//! Which outputs of a graph cross ranks ([`Cut`]: points are block-distributed over every
//! rank's workers), for `compiled`'s hand-cut graph on ranks.
//!
//! After timestep `t`, the outputs that one rank's points read from another rank's at `t + 1`
//! travel as **one message per (stream, timestep, pair of ranks)**, a stream being all the
//! graphs a `compiled` chain runs in lock-step. Both ends derive a message's point list from
//! the graph, so a message carries outputs only.

use taskbench_core::app::Placement;
use taskbench_core::plan::Plan;

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
    /// The points of this rank (asked for by every timestep's lists: kept, not re-derived
    /// with the placement's 128-bit arithmetic).
    block: std::ops::Range<i64>,
}

impl Cut {
    /// The cut of `plan` for `rank` under `place`.
    pub fn new(plan: &Plan, place: Placement, rank: usize) -> Cut {
        let width = plan.graph().max_width;
        let me = rank as i64 * place.workers;
        Cut {
            place,
            rank,
            owner: (0..width)
                .map(|p| place.worker_of(p, width) as u32)
                .collect(),
            width,
            block: place.first(me, width)..place.first(me + place.workers, width),
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
        self.block.clone()
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
        self.each_crossing(plan, t, true, |r, p| out.push((r, p)));
        out.sort_unstable();
        out.dedup();
    }

    /// (source rank, point) of every output of `t` this rank receives, grouped by rank,
    /// points ascending.
    pub fn receives(&self, plan: &Plan, t: i64, out: &mut Vec<(usize, i64)>) {
        out.clear();
        self.each_crossing(plan, t, false, |r, p| out.push((r, p)));
        out.sort_unstable();
        out.dedup();
    }

    /// Calls `f(rank, point)` for each output of `t` that this rank sends to (`sends`: the
    /// readers of its points at `t + 1`) or receives from (the inputs of its points at
    /// `t + 1`) another rank, as often as it is read.
    fn each_crossing(&self, plan: &Plan, t: i64, sends: bool, mut f: impl FnMut(usize, i64)) {
        if t + 1 >= plan.graph().timesteps {
            return;
        }
        let mine = self.local(plan, if sends { t } else { t + 1 });
        for x in mine {
            let other = match sends {
                true => plan.rdeps(t + 1, x),
                false => plan.deps(t + 1, x),
            };
            for &y in other {
                let r = self.rank_of(y);
                if r != self.rank {
                    f(r, if sends { x } else { y });
                }
            }
        }
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
