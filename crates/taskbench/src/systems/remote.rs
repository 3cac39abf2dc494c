//! The cross-rank edges of the systems built on Tactor (`tasks`, `compiled`).
//!
//! Points are block-distributed over every rank's workers ([`Cut`]). After timestep `t`, the
//! outputs that one rank's points read from another rank's at `t + 1` travel as **one message
//! per (stream, timestep, pair of ranks)**, a stream being a graph (`tasks`) or all the graphs
//! a `compiled` chain runs in lock-step: the sender's side is a task (or subgraph vertex)
//! that runs once the producing tasks have, gathers their outputs and sends; the receiver's
//! side is an external precondition that the message opens — an [`Event`] for `tasks`, an
//! [`Inlet`] of the waiting instance for `compiled` (with an [`Inbox`] slot the message goes
//! to) — followed by a task that copies the outputs into the rows the readers use. A remote
//! precondition is registered once (whoever comes first, the message or the local task that
//! waits for it, creates it) and opened by exactly one message.
//!
//! The network is progressed by the runtime's idle workers, through the [`Poller`] that
//! [`Remote`] implements. When another rank fails, every remote precondition of this rank,
//! pending or future, is poisoned: the poison flows through the local tasks that wait on them,
//! and the run ends with that rank's failure.

use crate::faults::{injected_fault, Fault};
use tactor::job::Job;

/// The port of the cross-rank edges of `tasks` and `compiled`.
pub const PORT_TACTOR: u16 = tactor::job::FIRST_PORT + 1;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tactor::{Event, Inlet, Poller, UserEvent};
use tactor_comm::Message;
use taskbench_core::app::Placement;
use taskbench_core::plan::Plan;

/// Bytes before the outputs: stream, output count, timestep.
const HEADER: usize = 16;

/// Network polls a [`Remote::pull`] makes before it waits on an event instead: a message
/// usually comes within a few polls, and this many stay well under a park's cost (measured:
/// `docs/measurements.md`, "Polls before a wait").
const PULL_POLLS: u32 = 1024;

/// The timestep whose message a `slow` rank holds back ([`Fault::Slow`]).
const SLOW_AT: i64 = 20;

/// A message: (stream, timestep of the outputs, source rank). A stream is a graph (`tasks`),
/// or the graphs a `compiled` chain runs together.
pub type Key = (u32, i64, usize);

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

    /// The points of timestep `t` this rank computes.
    pub fn local(&self, plan: &Plan, t: i64) -> std::ops::Range<i64> {
        let width = self.width;
        let me = self.rank as i64 * self.place.workers;
        let (first, end) = (
            self.place.first(me, width),
            self.place.first(me + self.place.workers, width),
        );
        first.max(plan.offset(t))..end.min(plan.offset(t) + plan.width(t))
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

/// Where the messages of one subgraph instance go: a slot per message it waits for, filled
/// once and taken by the vertex that the message's inlet releases (no lookup, and a lock of
/// its own, which nobody else takes at the same time). Taken, not left for the instance's end:
/// buffers freed at once are reused while they are still in the cache.
pub type Inbox = Arc<[Mutex<Option<Vec<u8>>>]>;

/// What waits for a message: an event (`tasks`; the message stays here until taken), or an
/// inlet of a subgraph instance and the inbox slot the message goes to (`compiled`, which
/// spares the event, its subscription, its trigger and the second lookup).
#[derive(Default)]
enum Waiter {
    #[default]
    None,
    Event(UserEvent),
    Slot(Inlet, Inbox, usize),
}

impl Waiter {
    /// The message arrived: `data` is given to a slot waiter (the others find it filed).
    fn open(self, data: Option<Vec<u8>>) {
        match self {
            Waiter::None => {}
            Waiter::Event(e) => {
                let _ = e.trigger();
            }
            Waiter::Slot(inlet, inbox, k) => {
                // Each key is registered once and its entry removed when the message is
                // handed over (a second message with the key would stay filed, and the pass
                // then ends with an error), so the slot is empty.
                *inbox[k].lock().unwrap_or_else(|p| p.into_inner()) = data;
                inlet.open();
            }
        }
    }

    fn poison(self, why: &str) {
        match self {
            Waiter::None => {}
            Waiter::Event(e) => {
                let _ = e.poison(why);
            }
            Waiter::Slot(inlet, ..) => inlet.poison(why),
        }
    }

    fn files_data(&self) -> bool {
        !matches!(self, Waiter::Slot(..))
    }
}

/// A remote precondition: what waits for the message, and the message once it arrived.
#[derive(Default)]
struct Entry {
    waiter: Waiter,
    data: Option<Vec<u8>>,
}

#[derive(Default)]
struct Entries {
    /// Hashed with Fx: the keys are small integers from this job, and SipHash cost a rank
    /// measurable time (`docs/measurements.md`, "Hashing the entries").
    map: FxHashMap<Key, Entry>,
    /// Set once another rank failed: every remote precondition is poisoned with it.
    poisoned: Option<String>,
}

/// This rank's end of the cross-rank edges: the remote preconditions, the sends, and the
/// network progress the runtime's workers run.
pub struct Remote {
    job: Arc<Job>,
    entries: Mutex<Entries>,
    /// Bumped (inside `entries`' lock) whenever a message is filed or the entries are
    /// poisoned: a pull polls this counter, not the map, for what other threads delivered.
    filed: AtomicU64,
    /// A pass is running: idle workers keep polling the network instead of parking.
    running: AtomicBool,
    /// The first message that broke the protocol (a bug, or a corrupted header).
    error: Mutex<Option<String>>,
    fault: Option<Fault>,
    faulted: AtomicBool,
    /// This rank failed: it sends nothing more, and its remote preconditions are poisoned.
    abandoned: AtomicBool,
}

impl Remote {
    pub fn new(job: Arc<Job>) -> Arc<Remote> {
        let fault = injected_fault(job.rank());
        Arc::new(Remote {
            job,
            entries: Mutex::default(),
            filed: AtomicU64::new(0),
            running: AtomicBool::new(false),
            error: Mutex::new(None),
            fault,
            faulted: AtomicBool::new(false),
            abandoned: AtomicBool::new(false),
        })
    }

    fn entries(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The event that the message `key` triggers (poisoned if another rank failed).
    pub fn arrival(&self, key: Key) -> Event {
        let u = UserEvent::new();
        let e = u.event();
        self.expect([(key, Waiter::Event(u))]);
        e
    }

    /// For each `(key, inlet)`, `k`-th in order: when the message of `key` arrives (at once
    /// if it did), puts it in `inbox[k]` and opens the inlet; poisons the inlet if another
    /// rank failed. One lock for them all.
    pub fn inlets(&self, inbox: &Inbox, inlets: impl IntoIterator<Item = (Key, Inlet)>) {
        let waiters = inlets
            .into_iter()
            .enumerate()
            .map(|(k, (key, i))| (key, Waiter::Slot(i, inbox.clone(), k)));
        self.expect(waiters);
    }

    fn expect(&self, waiters: impl IntoIterator<Item = (Key, Waiter)>) {
        let mut now = Vec::new();
        let poisoned = {
            let mut e = self.entries();
            match e.poisoned.clone() {
                Some(why) => {
                    now.extend(waiters.into_iter().map(|(_, w)| (w, None)));
                    Some(why)
                }
                None => {
                    for (key, w) in waiters {
                        let entry = e.map.entry(key).or_default();
                        if entry.data.is_none() {
                            entry.waiter = w;
                        } else if w.files_data() {
                            now.push((w, None));
                        } else {
                            let data = e.map.remove(&key).and_then(|x| x.data);
                            now.push((w, data));
                        }
                    }
                    None
                }
            }
        };
        for (w, data) in now {
            match &poisoned {
                Some(why) => w.poison(why),
                None => w.open(data),
            }
        }
    }

    /// Checks that message `data` of `key` carries `count` outputs in `len` bytes, and
    /// returns its outputs; otherwise records what is wrong as this rank's failure.
    pub fn check<'d>(
        &self,
        key: Key,
        data: Option<&'d [u8]>,
        count: usize,
        len: usize,
    ) -> Option<&'d [u8]> {
        self.checked(key, data, count, len)
            .map_err(|e| self.protocol_error(e))
            .ok()
    }

    fn checked<'d>(
        &self,
        key: Key,
        data: Option<&'d [u8]>,
        count: usize,
        len: usize,
    ) -> Result<&'d [u8], String> {
        let (g, t, src) = key;
        let Some(data) = data else {
            return Err(format!(
                "stream {g}: the outputs of timestep {t} from rank {src} were taken before they arrived"
            ));
        };
        let got = u32::from_le_bytes(data[4..8].try_into().expect("checked on arrival"));
        if got as usize != count || data.len() != HEADER + len {
            return Err(format!(
                "stream {g}: expected {count} outputs of timestep {t} from rank {src} ({len} bytes), got {got} ({} bytes)",
                data.len() - HEADER
            ));
        }
        Ok(&data[HEADER..])
    }

    /// Waits for message `key` and takes it: polls the network for it a while, then waits on
    /// an event it triggers (a worker goes on with other work meanwhile). `Err` with the cause
    /// once another rank failed (or this one gave up).
    ///
    /// `take` gets the message's bytes. On the node they are usually read where the sender's
    /// ring holds them (`Job::take_inline`): no buffer, no completion-queue entry, no
    /// progress call's round of every ring (`docs/measurements.md`, "Taking a message in
    /// place"). Otherwise the message is
    /// taken straight from the progress call that brings it in, never filed; the map is
    /// looked at only when something was filed since the last look (by this thread's
    /// progress or another's), so an empty poll takes no lock of this rank's.
    pub fn pull(&self, key: Key, take: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        let mut seen = self.filed.load(Ordering::Acquire);
        if let Some(taken) = self.take_arrived(key) {
            return taken.map(|data| take(&data));
        }
        let is_mine = |port: u16, source: usize, data: &[u8]| {
            port == PORT_TACTOR && key_of(data, source) == Some(key)
        };
        for _ in 0..PULL_POLLS {
            let mut wanted = |port: u16, data: &[u8]| {
                let mine = is_mine(port, key.2, data);
                if mine {
                    take(data);
                }
                mine
            };
            if self.job.take_inline(key.2, &mut wanted) {
                return Ok(());
            }
            let mut mine = None;
            self.progress_with(&mut |m| match is_mine(m.port, m.source, &m.data) {
                true if mine.is_none() => mine = Some(m.data),
                _ => self.deliver(m),
            });
            if let Some(data) = mine {
                take(&data);
                return Ok(());
            }
            let now = self.filed.load(Ordering::Acquire);
            if now != seen {
                seen = now;
                if let Some(taken) = self.take_arrived(key) {
                    return taken.map(|data| take(&data));
                }
            }
        }
        // Long waits (another rank far behind) must not hold the worker: other chains' work
        // may be what that rank waits for.
        let _ = self.arrival(key).wait();
        self.take_arrived(key)
            .unwrap_or_else(|| Err("a message's event triggered before it arrived".into()))
            .map(|data| take(&data))
    }

    /// Message `key` if it arrived (removed), the cause if this rank's exchange was
    /// poisoned, or `None` while it is still to come.
    fn take_arrived(&self, key: Key) -> Option<Result<Vec<u8>, String>> {
        let mut e = self.entries();
        if let Some(why) = &e.poisoned {
            return Some(Err(why.clone()));
        }
        let MapEntry::Occupied(o) = e.map.entry(key) else {
            return None;
        };
        o.get().data.is_some().then(|| {
            let entry = o.remove();
            // An event registered by an earlier wait has triggered (the message did it).
            entry.waiter.open(None);
            Ok(entry.data.expect("checked"))
        })
    }

    /// Takes message `key`, which arrived (its event triggered), if it carries `count`
    /// outputs in `len` bytes; otherwise records what is wrong as this rank's failure.
    /// [`Remote::payload`] gives its outputs.
    pub fn receive(&self, key: Key, count: usize, len: usize) -> Option<Vec<u8>> {
        let data = self.entries().map.remove(&key).and_then(|e| e.data);
        self.check(key, data.as_deref(), count, len)?;
        data
    }

    /// The outputs in a message from [`Remote::receive`], back to back.
    pub fn payload(message: &[u8]) -> &[u8] {
        &message[HEADER..]
    }

    /// Sends `outputs` (`count` of them, `len` bytes in all) of timestep `t` of `stream` (a
    /// graph, or several graphs sent together) to rank `dest`, from a worker whose channel is
    /// `channel`.
    pub fn send<'a>(
        &self,
        channel: usize,
        dest: usize,
        (stream, t): (u32, i64),
        (count, len): (usize, usize),
        outputs: impl Iterator<Item = &'a [u8]>,
    ) {
        if self.abandoned.load(Ordering::Relaxed) {
            return;
        }
        let mut header = [0u8; HEADER];
        header[0..4].copy_from_slice(&stream.to_le_bytes());
        header[4..8].copy_from_slice(&(count as u32).to_le_bytes());
        header[8..16].copy_from_slice(&t.to_le_bytes());
        let channel = channel % self.job.channels();
        let mut parts = std::iter::once(&header[..]).chain(outputs.map(|o| o as &[u8]));
        // A slow rank holds back a message of the middle of the run, when the receiver is
        // sure to be waiting for it.
        let due = self.fault != Some(Fault::Slow) || t == SLOW_AT;
        if self.fault.is_some() && count > 0 && due && !self.faulted.swap(true, Ordering::Relaxed) {
            let mut buf = tactor_comm::buffer(HEADER + len);
            parts.for_each(|p| buf.extend_from_slice(p));
            match self.fault {
                Some(Fault::Panic) => panic!("injected fault (TASKBENCH_FAULT)"),
                Some(Fault::Slow) => std::thread::sleep(crate::faults::SLOW),
                _ => buf[HEADER] ^= 1,
            }
            return self.job.send(channel, dest, PORT_TACTOR, buf);
        }
        self.job
            .send_parts(channel, dest, PORT_TACTOR, HEADER + len, &mut parts);
    }

    /// Files an arrived message under its key and triggers its event.
    fn deliver(&self, m: Message) {
        let key = message_key(&m).filter(|_| m.port == PORT_TACTOR);
        let Some(key) = key else {
            return self.protocol_error(format!(
                "rank {} sent a message no task expects (port {}, {} bytes)",
                m.source,
                m.port,
                m.data.len()
            ));
        };
        let (waiter, data) = {
            let mut e = self.entries();
            // One hash: the entry is looked up once, and removed through the same handle when
            // its waiter takes the message itself.
            match e.map.entry(key) {
                MapEntry::Occupied(o) if o.get().data.is_some() => {
                    drop(e);
                    return self.protocol_error(format!(
                        "stream {}: the outputs of timestep {} arrived twice from rank {}",
                        key.0, key.1, key.2
                    ));
                }
                MapEntry::Occupied(mut o) if o.get().waiter.files_data() => {
                    o.get_mut().data = Some(m.data);
                    self.filed.fetch_add(1, Ordering::Release);
                    (std::mem::take(&mut o.get_mut().waiter), None)
                }
                MapEntry::Occupied(o) => (o.remove().waiter, Some(m.data)),
                MapEntry::Vacant(v) => {
                    v.insert(Entry {
                        waiter: Waiter::None,
                        data: Some(m.data),
                    });
                    self.filed.fetch_add(1, Ordering::Release);
                    return;
                }
            }
        };
        waiter.open(data);
    }

    fn protocol_error(&self, e: String) {
        self.error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
        self.abandon();
    }

    /// This rank failed: stop sending, and poison every remote precondition so that the pass
    /// ends here (the caller then tells the other ranks).
    pub fn abandon(&self) {
        if !self.abandoned.swap(true, Ordering::AcqRel) {
            self.poison(format!("rank {} failed", self.job.rank()));
        }
    }

    /// The first protocol error, if any.
    pub fn take_error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Progresses the network; on learning that another rank failed, poisons every remote
    /// precondition. Returns whether some message arrived.
    fn progress(&self) -> bool {
        let mut arrived = false;
        self.progress_with(&mut |m| {
            arrived = true;
            self.deliver(m)
        });
        arrived
    }

    /// Progresses the network, handing what arrives to `take` (which files what it does not
    /// keep); on learning that another rank failed, poisons every remote precondition.
    fn progress_with(&self, take: &mut dyn FnMut(Message)) {
        let alive = self.job.progress(&mut |m| {
            take(m);
            None
        });
        if alive.is_err() {
            let rank = self.job.failed_rank().unwrap_or(usize::MAX);
            self.poison(format!("rank {rank} failed"));
        }
    }

    /// Poisons every remote precondition, pending or future, with `why`.
    fn poison(&self, why: String) {
        let pending: Vec<Entry> = {
            let mut e = self.entries();
            if e.poisoned.is_some() {
                return;
            }
            // Messages that arrived stay: their events triggered, and the tasks they released
            // may already be queued to take them.
            let keys: Vec<Key> = e
                .map
                .iter()
                .filter(|(_, v)| v.data.is_none())
                .map(|(k, _)| *k)
                .collect();
            let pending = keys.iter().filter_map(|k| e.map.remove(k)).collect();
            e.poisoned = Some(why.clone());
            self.filed.fetch_add(1, Ordering::Release);
            pending
        };
        for entry in pending {
            entry.waiter.poison(&why);
        }
    }

    /// The rank that failed first, if one did.
    pub fn failed_rank(&self) -> Option<usize> {
        self.job.failed_rank()
    }

    /// A pass starts (`true`) or ended: while one runs, idle workers poll the network.
    pub fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::Release);
    }

    /// A barrier over ranks, filing what arrives meanwhile. `false` if some rank failed.
    pub fn barrier(&self) -> bool {
        self.job
            .barrier_with(&mut |m| {
                self.deliver(m);
                None
            })
            .is_ok()
    }

    /// Remote preconditions still registered (0 after a pass that ran to its end).
    pub fn pending(&self) -> usize {
        self.entries().map.len()
    }
}

/// The key a message of this protocol carries in its header (`None`: too short to have one).
fn message_key(m: &Message) -> Option<Key> {
    key_of(&m.data, m.source)
}

/// The key in the header of `data`, a message from rank `source`.
fn key_of(data: &[u8], source: usize) -> Option<Key> {
    let h = data.get(..HEADER)?;
    let g = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes"));
    let t = i64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
    Some((g, t, source))
}

impl Poller for Remote {
    fn poll(&self, _worker: usize) -> bool {
        self.progress()
    }

    fn expecting(&self) -> bool {
        self.running.load(Ordering::Acquire)
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
