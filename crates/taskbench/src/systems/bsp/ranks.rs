//! `bsp`'s timestep on several ranks: before timestep `t`, a worker gathers one message from
//! each worker on another rank that owns an input of any graph at `t`; after `t`, it scatters
//! one message to each worker on another rank that reads any of its outputs at `t + 1`. All
//! graphs of an `-and` travel together, so a timestep costs one exchange per pair of workers
//! however many graphs run, as in one process.
//!
//! A message carries, graph by graph in order and point by point ascending, the outputs its
//! receiver reads; both ends derive that list from the graph (dependencies on one side,
//! reverse dependencies on the other), and the receiver checks the count and size before
//! Task Bench's validation checks every output.
//!
//! The messages go through the runtime's [`Exchange`] on [`PORT_BSP`], keyed by the stream
//! of the pair of workers (and the pass), the timestep of the outputs and the source rank; a
//! worker takes its message in passing ([`Exchange::pulling`]) while it spins its own way.

use super::lists::Classes;
use super::{Graph, Place, WorkerState};
use crate::systems::interface::RunError;
use crate::systems::team::{Net, Team, NET_POLLS_BEFORE_BACKOFF};
use tactor::job::exchange::Key;
use tactor::job::Exchange;
use tactor::Poller;

/// The port of `bsp`'s neighbour exchange.
pub const PORT_BSP: u16 = tactor::job::FIRST_PORT;

/// The stream of the messages from (global) worker `src` to `dst` in pass `pass`: one per
/// ordered pair of local indices and pass, so that the key names the pair of workers.
fn stream(place: Place, pass: usize, src: i64, dst: i64) -> u32 {
    let w = place.all.workers;
    let s = (pass as i64 * w + dst % w) * w + src % w;
    u32::try_from(s).expect("fewer than 2^32 pairs of workers")
}

impl Net for Exchange {
    fn idle(&self) -> bool {
        self.poll(0);
        self.job().check().is_ok()
    }

    fn barrier(&self) -> bool {
        self.job().barrier().is_ok()
    }

    fn failed_rank(&self) -> usize {
        self.job().failed_rank().unwrap_or(usize::MAX)
    }
}

/// The points of `gr` local worker `w` computes at `t`.
pub fn active(gr: &Graph, w: usize, t: i64) -> std::ops::Range<i64> {
    let (first, end) = gr.mine[w];
    let plan = &gr.plan;
    if t >= plan.graph().timesteps {
        return 0..0;
    }
    first.max(plan.offset(t))..end.min(plan.offset(t) + plan.width(t))
}

/// What a worker receives before a timestep: per graph, the points of other ranks it reads,
/// ascending, and where each one's output is (message, byte offset); the source workers of
/// the messages, ascending, and each message's expected (length, output count).
#[derive(Default)]
pub struct Inputs {
    remote: Vec<Vec<i64>>,
    at: Vec<Vec<(usize, usize)>>,
    sources: Vec<u32>,
    ends: Vec<(usize, u32)>,
}

impl Inputs {
    /// Graph `gi`'s remote points and where each one's output is (none in one process,
    /// where nothing is gathered).
    pub fn of(&self, gi: usize) -> (&[i64], &[(usize, usize)]) {
        match (self.remote.get(gi), self.at.get(gi)) {
            (Some(r), Some(a)) => (r, a),
            _ => (&[], &[]),
        }
    }
}

fn inputs_of(l: &mut Inputs, graphs: &[Graph], place: Place, t: i64, w: usize) {
    l.remote.resize_with(graphs.len(), Vec::new);
    l.at.resize_with(graphs.len(), Vec::new);
    l.sources.clear();
    for (gi, gr) in graphs.iter().enumerate() {
        let remote = &mut l.remote[gi];
        remote.clear();
        for p in active(gr, w, t) {
            remote.extend(
                gr.plan
                    .deps(t, p)
                    .iter()
                    .copied()
                    .filter(|&d| place.local(i64::from(gr.owner[d as usize])).is_none()),
            );
        }
        remote.sort_unstable();
        remote.dedup();
        l.sources
            .extend(remote.iter().map(|&d| gr.owner[d as usize]));
    }
    l.sources.sort_unstable();
    l.sources.dedup();
    // Where each remote input sits: graph by graph, point by point, in its source's message.
    l.ends.clear();
    l.ends.resize(l.sources.len(), (0, 0));
    for (gi, gr) in graphs.iter().enumerate() {
        let bytes = gr.plan.graph().output_bytes_per_task;
        let at = &mut l.at[gi];
        at.clear();
        for &d in &l.remote[gi] {
            let m = l
                .sources
                .binary_search(&gr.owner[d as usize])
                .expect("every source is listed");
            let (end, count) = &mut l.ends[m];
            at.push((m, *end));
            *end += bytes;
            *count += 1;
        }
    }
}

/// Gathers the inputs of timestep `t` that come from other ranks into `st` (`inputs`,
/// `arrived`). `Err` when the run stops (the team knows why).
pub fn gather(
    ex: &Exchange,
    st: &mut WorkerState,
    (graphs, classes): (&[Graph], &Classes),
    place: Place,
    (pass, t, w): (usize, i64, usize),
    team: &Team,
) -> Result<(), ()> {
    st.inputs
        .select(classes.gather(t), |l| inputs_of(l, graphs, place, t, w));
    let l = st.inputs.current();
    st.arrived.resize_with(l.sources.len(), Vec::new);
    let me = place.global(w);
    let workers = place.all.workers;
    for (m, &src) in l.sources.iter().enumerate() {
        let src = i64::from(src);
        let key: Key = (
            stream(place, pass, src, me),
            t - 1,
            (src / workers) as usize,
        );
        wait(ex, key, l.ends[m], &mut st.arrived[m], team)?;
    }
    Ok(())
}

/// Waits for the message `key`, which must carry `count` outputs in `len` bytes, and copies
/// them into `into`; polls the network (without backoff until the wait is long: see
/// `Team::wait_until`).
fn wait(
    ex: &Exchange,
    key: Key,
    (len, count): (usize, u32),
    into: &mut Vec<u8>,
    team: &Team,
) -> Result<(), ()> {
    let mut pulling = ex.pulling(key);
    let mut bad = false;
    let mut take = |m: &[u8]| match ex.check(key, Some(m), count as usize, len) {
        Some(items) => {
            into.clear();
            into.extend_from_slice(items);
        }
        None => bad = true,
    };
    let mut polls = 0u32;
    loop {
        match pulling.poll(&mut take) {
            Ok(true) => break,
            Ok(false) => {}
            Err(_) => {
                // Another rank failed (the team learns which), or this one gave up.
                let _ = team.idle();
                return Err(());
            }
        }
        if team.aborted() {
            return Err(());
        }
        polls = polls.saturating_add(1);
        if polls > NET_POLLS_BEFORE_BACKOFF {
            std::thread::yield_now();
        }
    }
    if bad {
        let why = ex.take_error().unwrap_or_default();
        team.fail_with(RunError::Runtime(format!("bsp: {why}")));
        return Err(());
    }
    Ok(())
}

/// (destination worker, graph, point) of the outputs a worker sends after a timestep,
/// destination by destination.
#[derive(Default)]
pub struct Sends(Vec<(i64, usize, i64)>);

fn sends_of(l: &mut Sends, graphs: &[Graph], place: Place, t: i64, w: usize) {
    let sends = &mut l.0;
    sends.clear();
    for (gi, gr) in graphs.iter().enumerate() {
        for q in active(gr, w, t) {
            for &p in gr.plan.rdeps(t + 1, q) {
                let o = i64::from(gr.owner[p as usize]);
                if place.local(o).is_none() {
                    sends.push((o, gi, q));
                }
            }
        }
    }
    sends.sort_unstable();
    sends.dedup();
}

/// Sends the outputs of timestep `t` that workers on other ranks read at `t + 1`: one message
/// per destination worker, on the channel of the destination's local index. With `corrupt`,
/// one byte of the first output sent is flipped (an injected fault).
pub fn scatter(
    ex: &Exchange,
    st: &mut WorkerState,
    (graphs, classes): (&[Graph], &Classes),
    place: Place,
    (pass, t, w): (usize, i64, usize),
    corrupt: bool,
) {
    st.sends
        .select(classes.scatter(t), |l| sends_of(l, graphs, place, t, w));
    let sends = &st.sends.current().0;
    if sends.is_empty() {
        return;
    }
    let workers = place.all.workers;
    let me = place.global(w);
    for group in sends.chunk_by(|a, b| a.0 == b.0) {
        let dest = group[0].0;
        let bytes: usize = group
            .iter()
            .map(|&(_, gi, _)| graphs[gi].plan.graph().output_bytes_per_task)
            .sum();
        // SAFETY: this worker wrote slot `q` of this row in timestep `t` and is its only
        // writer; it writes it again only at `t + 2`, after this call returns.
        let outputs = group
            .iter()
            .map(|&(_, gi, q)| unsafe { graphs[gi].rows[(t % 2) as usize].read(q as usize) });
        let channel = (dest % workers) as usize;
        let (rank, key) = (
            (dest / workers) as usize,
            (stream(place, pass, me, dest), t),
        );
        if corrupt {
            let mut buf: Vec<u8> = outputs.flatten().copied().collect();
            if let Some(b) = buf.first_mut() {
                *b ^= 1;
            }
            ex.send_buffer(channel, rank, key, group.len(), &buf);
        } else {
            ex.send(channel, rank, key, group.len(), bytes, outputs);
        }
    }
}
