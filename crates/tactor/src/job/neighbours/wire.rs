//! A [`Neighbours`] step across ranks: before step `t`, a worker gathers one message from
//! each worker of another rank that owns an item its items read; after `t`, it scatters one
//! message to each worker of another rank that reads one of its items at `t + 1`. All arrays
//! travel together, so a step costs one message per pair of workers however many arrays
//! there are.
//!
//! A message carries, array by array in order and item by item ascending, the items its
//! receiver reads; both ends derive that list from the pattern (reads on one side, readers on
//! the other), and the receiver checks the count and size. Messages are keyed by the pair of
//! workers (the stream), the step of their items and the source rank; a worker takes its
//! message in passing ([`Exchange::pulling`]) while it spins its own way.

use super::classes::Cached;
use super::team::Team;
use super::{Neighbours, Pattern, Stopped, Waits};
use crate::job::exchange::{Exchange, Key};

/// What a worker keeps from step to step: its lists per class of steps, and the messages of
/// this step.
pub(super) struct Lists {
    pub(super) inputs: Cached<Inputs>,
    sends: Cached<Sends>,
    pub(super) waits: Cached<Vec<Waits>>,
    /// This step's messages, in the order of the inputs' sources.
    pub(super) arrived: Vec<Vec<u8>>,
}

impl Lists {
    pub(super) fn new((classes, pairs): (usize, usize)) -> Lists {
        Lists {
            inputs: Cached::new(classes),
            sends: Cached::new(pairs),
            waits: Cached::new(pairs),
            arrived: Vec::new(),
        }
    }
}

/// What a worker receives before a step: per array, the items of other ranks it reads,
/// ascending, and where each one is (message, byte offset); the source workers of the
/// messages, ascending, and each message's expected (length, item count).
#[derive(Default)]
pub(super) struct Inputs {
    remote: Vec<Vec<usize>>,
    at: Vec<Vec<(usize, usize)>>,
    sources: Vec<u32>,
    ends: Vec<(usize, u32)>,
}

impl Inputs {
    /// Array `i`'s remote items and where each one is (none in one process).
    pub(super) fn of(&self, i: usize) -> (&[usize], &[(usize, usize)]) {
        match (self.remote.get(i), self.at.get(i)) {
            (Some(r), Some(a)) => (r, a),
            _ => (&[], &[]),
        }
    }
}

/// (destination worker, array, item) of the items a worker sends after a step, destination
/// by destination.
#[derive(Default)]
struct Sends(Vec<(u32, usize, usize)>);

/// The stream of the messages from the job's worker `src` to `dst`: one per ordered pair of
/// local indices, so that with the source rank the key names the pair of workers.
fn stream(workers: usize, src: usize, dst: usize) -> u32 {
    let s = (dst % workers) * workers + src % workers;
    u32::try_from(s).expect("fewer than 2^32 pairs of workers")
}

impl<P: Pattern> Neighbours<P> {
    fn inputs_of(&self, l: &mut Inputs, t: i64, w: usize) {
        l.remote.resize_with(self.arrays.len(), Vec::new);
        l.at.resize_with(self.arrays.len(), Vec::new);
        l.sources.clear();
        for (i, a) in self.arrays.iter().enumerate() {
            let remote = &mut l.remote[i];
            remote.clear();
            for p in super::intersect(self.pattern.live(i, t), self.mine(i, w)) {
                let reads = self.pattern.reads(i, t, p);
                remote.extend(reads.filter(|&d| self.at.local(a.cut.owner[d] as usize).is_none()));
            }
            remote.sort_unstable();
            remote.dedup();
            l.sources.extend(remote.iter().map(|&d| a.cut.owner[d]));
        }
        l.sources.sort_unstable();
        l.sources.dedup();
        // Where each remote item sits: array by array, item by item, in its source's message.
        l.ends.clear();
        l.ends.resize(l.sources.len(), (0, 0));
        for (i, a) in self.arrays.iter().enumerate() {
            let at = &mut l.at[i];
            at.clear();
            for &d in &l.remote[i] {
                let m = (l.sources.binary_search(&a.cut.owner[d])).expect("every source is listed");
                let (end, count) = &mut l.ends[m];
                at.push((m, *end));
                *end += a.bytes;
                *count += 1;
            }
        }
    }

    fn sends_of(&self, l: &mut Sends, t: i64, w: usize) {
        let sends = &mut l.0;
        sends.clear();
        for (i, a) in self.arrays.iter().enumerate() {
            for q in super::intersect(self.pattern.live(i, t), self.mine(i, w)) {
                for p in self.pattern.readers(i, t + 1, q) {
                    let o = a.cut.owner[p];
                    if self.at.local(o as usize).is_none() {
                        sends.push((o, i, q));
                    }
                }
            }
        }
        sends.sort_unstable();
        sends.dedup();
    }
}

/// Gathers the items of step `t - 1` that local worker `w`'s items read at `t` from other
/// ranks (none at step 0). `Err` when the pass stops (the team knows why).
pub(super) fn gather<P: Pattern>(
    nb: &Neighbours<P>,
    ex: &Exchange,
    lists: &mut Lists,
    t: i64,
    w: usize,
    team: &Team<impl Sized>,
) -> Result<(), ()> {
    let l = lists
        .inputs
        .select(nb.classes.now(t).filter(|_| t > 0), |l| match t {
            0 => *l = Inputs::default(),
            _ => nb.inputs_of(l, t, w),
        });
    lists.arrived.resize_with(l.sources.len(), Vec::new);
    let (me, workers) = (nb.at.global(w), nb.at.workers);
    for (m, &src) in l.sources.iter().enumerate() {
        let src = src as usize;
        let key: Key = (stream(workers, src, me), t - 1, src / workers);
        wait(ex, key, l.ends[m], &mut lists.arrived[m], team)?;
    }
    Ok(())
}

/// Waits for message `key`, which must carry `count` items in `len` bytes, and copies them
/// into `into`, polling the network.
fn wait(
    ex: &Exchange,
    key: Key,
    (len, count): (usize, u32),
    into: &mut Vec<u8>,
    team: &Team<impl Sized>,
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
            Err(why) => {
                team.stop(Some(Stopped::Aborted(why)));
                return Err(());
            }
        }
        if team.stopped() {
            return Err(());
        }
        if team.backing_off(&mut polls) {
            std::thread::yield_now();
        }
    }
    if bad {
        let why = ex.take_error().unwrap_or_default();
        team.stop(Some(Stopped::Broken(why)));
        return Err(());
    }
    Ok(())
}

/// Sends the items of step `t` that workers of other ranks read at `t + 1` (none after the
/// last step): one message per destination worker, on the channel of its local index.
pub(super) fn scatter<P: Pattern>(
    nb: &Neighbours<P>,
    ex: &Exchange,
    lists: &mut Lists,
    t: i64,
    w: usize,
) {
    if t + 1 >= nb.steps {
        return;
    }
    let sends = &lists
        .sends
        .select(nb.classes.pair(t), |l| nb.sends_of(l, t, w))
        .0;
    let (me, workers) = (nb.at.global(w), nb.at.workers);
    for group in sends.chunk_by(|a, b| a.0 == b.0) {
        let dest = group[0].0 as usize;
        let bytes: usize = group.iter().map(|&(_, i, _)| nb.arrays[i].bytes).sum();
        // SAFETY: this worker wrote item `q` of this step and is its only writer; it writes
        // it again only at `t + 2`, after this call returns.
        let items =
            (group.iter()).map(|&(_, i, q)| unsafe { nb.arrays[i].rows[(t % 2) as usize].read(q) });
        let key = (stream(workers, me, dest), t);
        ex.send(
            dest % workers,
            dest / workers,
            key,
            group.len(),
            bytes,
            items,
        );
    }
}
