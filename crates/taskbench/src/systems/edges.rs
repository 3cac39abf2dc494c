//! Which outputs of a graph cross ranks ([`Cut`]: points are block-distributed over every
//! rank's workers), and a timestep's messages over several graphs ([`crossing`], [`Lone`]);
//! they travel through this rank's exchange (`super::network`).
//!
//! After timestep `t`, the outputs that one rank's points read from another rank's at `t + 1`
//! travel as **one message per (stream, timestep, pair of ranks)**, a stream being a graph
//! (`tasks`, `implicit`) or all the graphs a `compiled` chain runs in lock-step. Both ends
//! derive a message's point list from the graph, so a message carries outputs only.

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
    for (gi, (cut, plan)) in cuts.iter().zip(plans).enumerate() {
        cut.each_crossing(plan, t, sends, |r, p| out.push((r, gi as u32, p)));
    }
    out.sort_unstable();
    out.dedup();
}

/// [`crossing`] remembered per class of timestep: what crosses after `t` depends only on the
/// shape of `t + 1` in every graph ([`Plan::shape_id`]: its dependences and windows, those of
/// `t` included), and a run has few shapes — listed once each, not at every timestep by the
/// rank's one issuing thread.
#[derive(Default)]
pub struct Crossings {
    /// Per class (the shape ids of `t + 1`), what this rank sends and receives.
    lists: std::collections::HashMap<Vec<Option<u32>>, SendsReceives>,
    key: Vec<Option<u32>>,
    /// Past [`CROSSING_CLASSES`] classes, the lists of the last timestep asked for.
    last: SendsReceives,
}

/// What a rank sends after a timestep, and what it receives ([`crossing`]'s two lists).
type SendsReceives = [Vec<(usize, u32, i64)>; 2];

/// At most this many classes of timestep are remembered.
const CROSSING_CLASSES: usize = 1024;

impl Crossings {
    /// What this rank sends after `t` and what it receives ([`crossing`]).
    pub fn at(&mut self, cuts: &[Cut], plans: &[Plan], t: i64) -> [&[(usize, u32, i64)]; 2] {
        self.key.clear();
        self.key.extend(plans.iter().map(|p| p.shape_id(t + 1)));
        if !self.lists.contains_key(self.key.as_slice()) {
            let mut both: SendsReceives = Default::default();
            crossing(cuts, plans, t, true, &mut both[0]);
            crossing(cuts, plans, t, false, &mut both[1]);
            if self.lists.len() >= CROSSING_CLASSES {
                self.last = both;
                return [&self.last[0], &self.last[1]];
            }
            self.lists.insert(self.key.clone(), both);
        }
        let lists = &self.lists[self.key.as_slice()];
        [&lists[0], &lists[1]]
    }
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
    #[cfg_attr(
        miri,
        ignore = "no unsafe code here, and hundreds of plans' lists are slow under Miri"
    )]
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

    /// `Crossings` gives, at every timestep, what `crossing` lists there, over graphs whose
    /// timesteps change shape (fft, tree, random_nearest), past its class limit too.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "no unsafe code here, and hundreds of plans' lists are slow under Miri"
    )]
    fn remembered_crossings_are_the_timesteps_own() {
        let plans = [
            plan("-steps 12 -width 8 -type fft"),
            plan("-steps 9 -width 7 -type tree"),
            plan("-steps 12 -width 6 -type random_nearest -radix 3"),
        ];
        let place = Placement {
            ranks: 3,
            workers: 1,
        };
        for rank in 0..3 {
            let cuts: Vec<Cut> = plans.iter().map(|p| Cut::new(p, place, rank)).collect();
            let mut c = Crossings::default();
            // What `c` gives at `t` is what `crossing` lists there.
            let check = |c: &mut Crossings, t: i64| {
                let mut want = [Vec::new(), Vec::new()];
                crossing(&cuts, &plans, t, true, &mut want[0]);
                crossing(&cuts, &plans, t, false, &mut want[1]);
                assert_eq!(
                    c.at(&cuts, &plans, t),
                    [&want[0][..], &want[1][..]],
                    "t {t}"
                );
            };
            (0..12).chain(0..12).for_each(|t| check(&mut c, t));
            let classes = c.lists.len();
            // Past the class limit: listed afresh each time.
            c.lists.clear();
            c.lists.extend(
                (0..CROSSING_CLASSES)
                    .map(|k| (vec![Some(u32::MAX - k as u32)], Default::default())),
            );
            (0..12).for_each(|t| check(&mut c, t));
            assert!(classes < 12, "{classes} classes");
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
