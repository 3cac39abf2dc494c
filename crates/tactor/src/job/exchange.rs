//! Keyed messages between the ranks of a job, each the external precondition of work on the
//! rank it goes to: what SPMD programs that cut their own work across ranks (a stencil's
//! halos, a graph's edges between shards) exchange through ([`Exchange`]).

use super::ordered::Stepped;
use super::{Job, JobError, OpenPort};
use crate::{Event, Inlet, Poller, UserEvent};
use std::borrow::Cow;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tactor_comm::Message;

mod fault;
mod round;
pub use round::RoundError;

/// Which message: its stream (what the program sends in lock-step, e.g. a graph), its step,
/// and the rank that sent it. Each key is sent once.
pub type Key = (u32, i64, usize);

/// Where the messages of one subgraph instance go ([`Exchange::inlets`]): a slot per message
/// it waits for, filled once and taken by the vertex that the message's inlet releases.
pub type Inbox = Arc<[Mutex<Option<Vec<u8>>>]>;

/// Bytes before the payload: stream, item count, step.
const HEADER: usize = 16;

/// Network polls a [`Exchange::pull`] makes before it waits on an event instead: a message
/// usually comes within a few polls, and this many stay well under a park's cost (measured:
/// `docs/measurements.md`, "Polls before a wait").
const PULL_POLLS: u32 = 1024;

/// What waits for a message: an event (the message stays filed until taken), or an inlet of
/// a subgraph instance and the inbox slot the message goes to (which spares the event, its
/// subscription, its trigger and a second lookup).
#[derive(Default)]
enum Waiter {
    #[default]
    None,
    Event(UserEvent),
    Slot(Inlet, Inbox, usize),
    /// Called with the message (or why it will not come), in place of a task woken to take it.
    Call(OnArrival),
}

/// What [`Exchange::on_arrival`] calls: the message where it is, or why it never comes.
type OnArrival = Box<dyn FnOnce(Result<&[u8], String>) + Send>;

impl Waiter {
    /// The message arrived: `data` is given to a slot waiter, or read where it is by a
    /// call (the others find it filed).
    fn open(self, data: Option<Cow<'_, [u8]>>) {
        match self {
            Waiter::None => {}
            Waiter::Event(e) => {
                let _ = e.trigger();
            }
            Waiter::Slot(inlet, inbox, k) => {
                // Each key is registered once and its entry removed when the message is
                // handed over (a second message with the key would stay filed, and is then
                // reported as pending), so the slot is empty.
                *inbox[k].lock().unwrap_or_else(PoisonError::into_inner) =
                    data.map(Cow::into_owned);
                inlet.open();
            }
            Waiter::Call(f) => match &data {
                Some(bytes) => f(Ok(bytes)),
                None => f(Err("the message was taken".to_string())),
            },
        }
    }

    fn poison(self, why: &str) {
        match self {
            Waiter::None => {}
            Waiter::Event(e) => {
                let _ = e.poison(why);
            }
            Waiter::Slot(inlet, ..) => inlet.poison(why),
            Waiter::Call(f) => f(Err(why.to_string())),
        }
    }

    fn files_data(&self) -> bool {
        !matches!(self, Waiter::Slot(..) | Waiter::Call(..))
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
    /// Not SipHash: the keys are small integers of this job, and SipHash cost a rank
    /// measurable time (`docs/measurements.md`, "Hashing the entries"); not Fx either, which
    /// scattered a program's steps over the table (a cache miss per message once thousands
    /// of steps wait): a step's keys sit beside the next step's.
    map: HashMap<Key, Entry, Stepped>,
    /// Set once a rank failed: every remote precondition is poisoned with it.
    poisoned: Option<String>,
}

/// This rank's end of a keyed exchange over one port of a [`Job`]: messages sent to a rank
/// under a [`Key`], each carrying a count of items and their bytes, and on the receiving rank
/// the precondition that the message opens — an [`Event`] ([`Exchange::arrival`]), an
/// [`Inlet`] of a subgraph instance ([`Exchange::inlets`]), or a task that takes it in
/// passing ([`Exchange::pull`]). A precondition is registered once, by whichever comes
/// first, the message or what waits for it, and opened by exactly one message.
///
/// Messages arrive on whichever thread progresses the network: a runtime built with the
/// exchange as its [`Poller`] progresses it on idle workers while [`Exchange::expect`] says
/// messages are due. When a rank fails (this one too: [`Exchange::abandon`]), every
/// precondition, pending or later, is poisoned, so the work behind it ends instead of
/// waiting; a message that breaks the protocol (a key sent twice, a wrong count) is kept as
/// this rank's error ([`Exchange::take_error`]).
///
/// ```
/// use tactor::job::{Exchange, Job, FIRST_PORT};
///
/// // Two ranks in one process; rank 0 sends rank 1 the items of step 3 of stream 0.
/// let got = Job::run_in_process(2, 1, |_rt, job| {
///     let ex = Exchange::open(job, FIRST_PORT).unwrap();
///     if job.rank() == 0 {
///         ex.send(0, 1, (0, 3), 2, 4, [&[1u8, 2][..], &[3, 4]].into_iter());
///         return Vec::new();
///     }
///     let key = (0, 3, 0);
///     let mut seen = Vec::new();
///     ex.pull(key, &mut |m| seen = Exchange::payload(m).to_vec()).unwrap();
///     seen
/// });
/// assert_eq!(got[1].as_ref().unwrap(), &[1, 2, 3, 4]);
/// ```
pub struct Exchange {
    job: Arc<Job>,
    port: u16,
    entries: Mutex<Entries>,
    /// Bumped (inside `entries`' lock) whenever a message is filed or the entries are
    /// poisoned: a pull polls this counter, not the map, for what other threads delivered.
    filed: AtomicU64,
    /// Messages are due: idle workers keep polling the network instead of parking.
    due: AtomicBool,
    /// Preconditions registered whose message has not arrived (changed inside `entries`'
    /// lock): while there are any, messages are due too, whatever `due` says. A task that
    /// waits for one has suspended, and its worker must not park with the message unread.
    awaited: AtomicUsize,
    /// The first message that broke the protocol (a bug, or a corrupted header).
    error: Mutex<Option<String>>,
    /// This rank failed: it sends nothing more, and its preconditions are poisoned.
    abandoned: AtomicBool,
    port_open: Mutex<Option<OpenPort>>,
}

impl Exchange {
    /// Opens the exchange on `port` of `job` (every rank opens it on the same port). Messages
    /// that arrived for it before are taken. Dropping the last `Arc` closes the port.
    ///
    /// # Errors
    /// [`JobError::PortTaken`] if the port is the job's own or open already.
    pub fn open(job: &Arc<Job>, port: u16) -> Result<Arc<Exchange>, JobError> {
        let ex = Arc::new(Exchange {
            job: job.clone(),
            port,
            entries: Mutex::default(),
            filed: AtomicU64::new(0),
            due: AtomicBool::new(false),
            awaited: AtomicUsize::new(0),
            error: Mutex::new(None),
            abandoned: AtomicBool::new(false),
            port_open: Mutex::new(None),
        });
        // Weak: the job's port table and failure hooks outlive the exchange otherwise.
        let weak = Arc::downgrade(&ex);
        let open = job.open_port(
            port,
            Arc::new(move |m| {
                if let Some(ex) = weak.upgrade() {
                    ex.deliver(m.source, Cow::Owned(m.data));
                }
            }),
        )?;
        *ex.port_open.lock().unwrap_or_else(PoisonError::into_inner) = Some(open);
        job.on_failure_of(&ex, |ex, rank| ex.poison(format!("rank {rank} failed")));
        Ok(ex)
    }

    /// The job it exchanges over.
    pub fn job(&self) -> &Arc<Job> {
        &self.job
    }

    fn entries(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends rank `dest` the message of `(stream, step)`: `count` items whose `len` bytes
    /// `items` gives back to back, from a worker whose channel is `channel` (taken modulo
    /// the job's channels). Nothing is sent once this rank abandoned the exchange.
    pub fn send<'a>(
        &self,
        channel: usize,
        dest: usize,
        (stream, step): (u32, i64),
        count: usize,
        len: usize,
        items: impl Iterator<Item = &'a [u8]>,
    ) {
        if self.abandoned.load(Ordering::Relaxed) {
            return;
        }
        if let Some(fault) = (count > 0).then(|| self.job.fault_due(step)).flatten() {
            return self.send_faulty(fault, channel, dest, (stream, step), count, items);
        }
        let header = Self::header(stream, step, count);
        let mut parts = std::iter::once(&header[..]).chain(items.map(|i| i as &[u8]));
        self.job
            .send_parts(channel, dest, self.port, HEADER + len, &mut parts);
    }

    /// The bytes before a message's items.
    fn header(stream: u32, step: i64, count: usize) -> [u8; HEADER] {
        let mut header = [0u8; HEADER];
        header[0..4].copy_from_slice(&stream.to_le_bytes());
        let count = u32::try_from(count).expect("fewer than 2^32 items in a message");
        header[4..8].copy_from_slice(&count.to_le_bytes());
        header[8..16].copy_from_slice(&step.to_le_bytes());
        header
    }

    /// [`Exchange::send`] of a message built whole: `items` is the payload, `count` items.
    pub fn send_buffer(
        &self,
        channel: usize,
        dest: usize,
        (stream, step): (u32, i64),
        count: usize,
        items: &[u8],
    ) {
        self.send(
            channel,
            dest,
            (stream, step),
            count,
            items.len(),
            std::iter::once(items),
        );
    }

    /// The event that message `key` triggers (poisoned if a rank failed); then
    /// [`Exchange::receive`] takes it.
    pub fn arrival(&self, key: Key) -> Event {
        let u = UserEvent::new();
        let e = u.event();
        self.register([(key, Waiter::Event(u))]);
        e
    }

    /// For each `(key, inlet)`, `k`-th in order: when the message of `key` arrives (at once
    /// if it did), puts it in `inbox[k]` and opens the inlet; poisons the inlet if a rank
    /// failed. One lock for them all. [`Exchange::check`] then reads the slot's message.
    pub fn inlets(&self, inbox: &Inbox, inlets: impl IntoIterator<Item = (Key, Inlet)>) {
        let waiters = inlets
            .into_iter()
            .enumerate()
            .map(|(k, (key, i))| (key, Waiter::Slot(i, inbox.clone(), k)));
        self.register(waiters);
    }

    /// Calls `f` with message `key` when it arrives (at once if it did), on the thread that
    /// delivers it, with no task in between (where it can, with the message where the sender
    /// wrote it on the node: no buffer); or with why it never will (a rank failed, the
    /// exchange was abandoned). [`Exchange::check`] then reads its items. `f` runs where the
    /// network is progressed: it should only hand the items on (set promises, copy them).
    ///
    /// ```
    /// use tactor::job::{Exchange, Job, FIRST_PORT};
    ///
    /// let got = Job::run_in_process(2, 1, |rt, job| {
    ///     let ex = Exchange::open(job, FIRST_PORT).unwrap();
    ///     let other = 1 - job.rank();
    ///     let (tx, rx) = std::sync::mpsc::channel();
    ///     ex.on_arrival((0, 0, other), move |m| tx.send(m.map(<[u8]>::to_vec)).unwrap());
    ///     // In a round the workers progress the network, and deliver the message to `f`.
    ///     ex.round(rt, || {
    ///         ex.send(0, other, (0, 0), 1, 1, [&[10 + job.rank() as u8][..]].into_iter());
    ///         Ok::<_, ()>(rx.recv().unwrap().unwrap())
    ///     })
    ///     .unwrap()
    /// });
    /// assert_eq!(Exchange::payload(got[0].as_ref().unwrap()), &[11]);
    /// assert_eq!(Exchange::payload(got[1].as_ref().unwrap()), &[10]);
    /// ```
    pub fn on_arrival(&self, key: Key, f: impl FnOnce(Result<&[u8], String>) + Send + 'static) {
        self.register([(key, Waiter::Call(Box::new(f)))]);
    }

    fn register(&self, waiters: impl IntoIterator<Item = (Key, Waiter)>) {
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
                            if matches!(entry.waiter, Waiter::None) {
                                self.awaited.fetch_add(1, Ordering::Release);
                            }
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
                None => w.open(data.map(Cow::Owned)),
            }
        }
    }

    /// The items of message `data` of `key`, if it carries `count` of them in `len` bytes;
    /// otherwise (or if the message is missing) records what is wrong as this rank's error
    /// and abandons the exchange.
    pub fn check<'d>(
        &self,
        key: Key,
        data: Option<&'d [u8]>,
        count: usize,
        len: usize,
    ) -> Option<&'d [u8]> {
        Self::checked(key, data, count, len)
            .map_err(|e| self.protocol_error(e))
            .ok()
    }

    fn checked(key: Key, data: Option<&[u8]>, count: usize, len: usize) -> Result<&[u8], String> {
        let (g, t, src) = key;
        let Some(data) = data else {
            return Err(format!(
                "stream {g}: the message of step {t} from rank {src} was taken before it arrived"
            ));
        };
        let got = u32::from_le_bytes(data[4..8].try_into().expect("checked on arrival"));
        if got as usize != count || data.len() != HEADER + len {
            return Err(format!(
                "stream {g}: expected {count} items of step {t} from rank {src} ({len} bytes), got {got} ({} bytes)",
                data.len() - HEADER
            ));
        }
        Ok(&data[HEADER..])
    }

    /// Waits for message `key` and takes it: polls the network for it a while, then, in a
    /// task, waits on an event it triggers (suspending the task, so its worker goes on with
    /// other work); a thread outside the runtime keeps polling, with a backoff.
    /// `Err` with the cause once a rank failed (or this one abandoned the exchange).
    ///
    /// `take` gets the whole message ([`Exchange::payload`] gives its items). On the node it
    /// is usually read where the sender's ring holds it ([`Job::take_inline`]): no buffer, no
    /// completion-queue entry (`docs/measurements.md`, "Taking a message in place").
    /// Otherwise it is taken straight from the progress call that brings it in, never filed;
    /// the map is looked at only when something was filed since the last look, so an empty
    /// poll takes no lock of this rank's.
    pub fn pull(&self, key: Key, take: &mut dyn FnMut(&[u8])) -> Result<(), String> {
        let mut pulling = self.pulling(key);
        for _ in 0..PULL_POLLS {
            if pulling.poll(take)? {
                return Ok(());
            }
        }
        if crate::current_worker().is_none() {
            // A thread outside the runtime goes on progressing the network itself: it cannot
            // count on a runtime polling this exchange (its runtime may poll another, or
            // none; seen: four ranks of threads each waiting here for a message that sat in
            // the channel of a parked worker). Inside the runtime, the arrival registered
            // below keeps the workers polling (`expecting`).
            let backoff = crossbeam_utils::Backoff::new();
            loop {
                if pulling.poll(take)? {
                    return Ok(());
                }
                backoff.snooze();
            }
        }
        // Long waits (another rank far behind) must not hold the worker: other work on it
        // may be what that rank waits for.
        let _ = self.arrival(key).wait();
        self.take_arrived(key)
            .unwrap_or_else(|| Err("a message's event triggered before it arrived".into()))
            .map(|data| take(&data))
    }

    /// A pull of message `key` that the caller drives, one look at a time
    /// ([`Pulling::poll`]): for threads that wait their own way (a team that spins with a
    /// backoff of its own), where [`Exchange::pull`] would park the thread in the end.
    pub fn pulling(&self, key: Key) -> Pulling<'_> {
        Pulling {
            ex: self,
            key,
            seen: None,
        }
    }

    /// Message `key` if it arrived (removed), the cause if the exchange was poisoned, or
    /// `None` while it is still to come.
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

    /// Takes message `key`, which arrived (its [`Exchange::arrival`] triggered), if it
    /// carries `count` items in `len` bytes; otherwise records what is wrong as this rank's
    /// error. [`Exchange::payload`] gives its items.
    pub fn receive(&self, key: Key, count: usize, len: usize) -> Option<Vec<u8>> {
        let data = self.entries().map.remove(&key).and_then(|e| e.data);
        self.check(key, data.as_deref(), count, len)?;
        data
    }

    /// The items of a whole message (from [`Exchange::receive`] or [`Exchange::pull`]), back
    /// to back.
    pub fn payload(message: &[u8]) -> &[u8] {
        &message[HEADER..]
    }

    /// Delivers `m` if it is this exchange's, else gives it back for its port: the port
    /// table's handler would reach the same place through a lock and two reference counts,
    /// 7 % of `tasks`' time on 2 ranks at its METG (`docs/2026-11-27-exchange.md`).
    fn take_own(&self, m: Message) -> Option<Message> {
        if m.port != self.port {
            return Some(m);
        }
        self.deliver(m.source, Cow::Owned(m.data));
        None
    }

    /// [`Exchange::take_own`] for a message read in place: whether it is this exchange's
    /// (then delivered, and copied only if it must be filed or kept).
    fn take_own_in_place(&self, source: usize, port: u16, data: &[u8]) -> bool {
        let own = port == self.port;
        if own {
            self.deliver(source, Cow::Borrowed(data));
        }
        own
    }

    /// Files an arrived message under its key and opens what waits for it.
    fn deliver(&self, source: usize, data: Cow<'_, [u8]>) {
        let Some(key) = key_of(&data, source) else {
            return self.protocol_error(format!(
                "rank {source} sent a message of {} bytes, shorter than its header",
                data.len()
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
                        "stream {}: the message of step {} arrived twice from rank {}",
                        key.0, key.1, key.2
                    ));
                }
                MapEntry::Occupied(mut o) if o.get().waiter.files_data() => {
                    o.get_mut().data = Some(data.into_owned());
                    self.filed.fetch_add(1, Ordering::Release);
                    let waiter = std::mem::take(&mut o.get_mut().waiter);
                    if !matches!(waiter, Waiter::None) {
                        self.awaited.fetch_sub(1, Ordering::Release);
                    }
                    (waiter, None)
                }
                MapEntry::Occupied(o) => {
                    self.awaited.fetch_sub(1, Ordering::Release);
                    (o.remove().waiter, Some(data))
                }
                MapEntry::Vacant(v) => {
                    v.insert(Entry {
                        waiter: Waiter::None,
                        data: Some(data.into_owned()),
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
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
        self.abandon();
    }

    /// This rank failed: stop sending, and poison every precondition so that the work
    /// waiting on other ranks ends here (the caller then tells the other ranks).
    pub fn abandon(&self) {
        if !self.abandoned.swap(true, Ordering::AcqRel) {
            self.poison(format!("rank {} failed", self.job.rank()));
        }
    }

    /// The first protocol error, if any (taken).
    pub fn take_error(&self) -> Option<String> {
        self.error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Poisons every precondition, pending or future, with `why`.
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
            self.awaited.store(0, Ordering::Release);
            e.poisoned = Some(why.clone());
            self.filed.fetch_add(1, Ordering::Release);
            pending
        };
        for entry in pending {
            entry.waiter.poison(&why);
        }
    }

    /// Messages are due (`true`) or not: while they are, idle workers of a runtime polling
    /// the exchange keep polling instead of parking. Call [`Handle::wake`](crate::Handle::wake)
    /// after setting it, for the workers that parked before. A precondition registered and
    /// not yet met (an [`arrival`](Exchange::arrival), an inlet, a task waiting in
    /// [`pull`](Exchange::pull)) makes messages due as well, whatever this says.
    pub fn expect(&self, due: bool) {
        self.due.store(due, Ordering::Release);
    }

    /// Preconditions still registered and messages not taken (0 once every message sent
    /// here was taken and nothing more is awaited).
    pub fn pending(&self) -> usize {
        self.entries().map.len()
    }
}

/// A pull of one message driven by its caller ([`Exchange::pulling`]).
pub struct Pulling<'e> {
    ex: &'e Exchange,
    key: Key,
    /// The exchange's count of filed messages when this pull last looked at the map.
    seen: Option<u64>,
}

impl Pulling<'_> {
    /// One look for the message: in the map if something was filed since the last look (by
    /// this thread's progress or another's), in the sender's ring in place, then in what one
    /// progress call of every channel brings in. `Ok(true)` once `take` got the whole
    /// message; `Err` with the cause once a rank failed or this one abandoned the exchange.
    pub fn poll(&mut self, take: &mut dyn FnMut(&[u8])) -> Result<bool, String> {
        let ex = self.ex;
        let key = self.key;
        let now = ex.filed.load(Ordering::Acquire);
        if self.seen != Some(now) {
            self.seen = Some(now);
            if let Some(taken) = ex.take_arrived(key) {
                return taken.map(|data| {
                    take(&data);
                    true
                });
            }
        }
        let port = ex.port;
        let is_mine =
            |p: u16, source: usize, data: &[u8]| p == port && key_of(data, source) == Some(key);
        let mut wanted = |p: u16, data: &[u8]| {
            let mine = is_mine(p, key.2, data);
            if mine {
                take(data);
            }
            mine
        };
        if ex.job.take_inline(key.2, &mut wanted) {
            return Ok(true);
        }
        let mut mine = None;
        let _ = ex.job.progress(&mut |m| {
            if mine.is_none() && is_mine(m.port, m.source, &m.data) {
                mine = Some(m.data);
                return None;
            }
            ex.take_own(m)
        });
        Ok(mine.map(|data| take(&data)).is_some())
    }
}

/// The key in the header of `data`, a message from rank `source` (`None`: too short to have
/// one).
fn key_of(data: &[u8], source: usize) -> Option<Key> {
    let h = data.get(..HEADER)?;
    let g = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes"));
    let t = i64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
    Some((g, t, source))
}

impl Poller for Exchange {
    /// Progresses every channel: this exchange's messages are delivered straight away (read
    /// in place where the transport can), the others go to their ports.
    fn poll(&self, _worker: usize) -> bool {
        let mut arrived = 0;
        for ch in 0..self.job.channels() {
            arrived += self.job.progress_channel_offering(
                ch,
                usize::MAX,
                &mut |source, port, data| self.take_own_in_place(source, port, data),
                &mut |m| self.take_own(m),
            );
        }
        arrived > 0
    }

    fn expecting(&self) -> bool {
        self.due.load(Ordering::Acquire) || self.awaited.load(Ordering::Acquire) > 0
    }
}

#[cfg(test)]
mod tests;
