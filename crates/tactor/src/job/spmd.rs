//! Futures and events across the ranks of a job, by control replication: every rank runs the
//! same program and makes the same [`Spmd::spawn`]s and [`Spmd::launch`]es; each runs on the
//! rank that owns the worker it names, and its value (or, for a launch, its trigger) reaches
//! another rank only when a task there takes it as an input or precondition — one message per
//! value and rank, sent when the value is ready, carrying the value (or the failure that
//! poisoned it, so that poison crosses ranks too).

use super::ordered::Sequential;
use super::rendezvous::{Opener, Rendezvous};
use super::Wire;
use super::{Job, OpenPort, PORT_FUTURES};
use crate::countdown::Outcome;
use crate::event::Notify;
use crate::{
    Event, Failure, Future, Handle, Inputs, Placement, Promise, Scope, TaskFailed, UserEvent,
};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// A value that a spawn of an [`Spmd`] program makes: the same handle on every rank, its value
/// held by the rank that computed it and by the ranks it was copied to.
pub struct Value<T>(Arc<Shared<T>>);

/// What every clone of a [`Value`] shares: one allocation per value, on every rank, and no
/// lock (the issuing thread marks who holds it; a worker may drop the last clone).
struct Shared<T> {
    id: u64,
    home: usize,
    /// A bit per rank: whether it holds the value (or will: its copy is on the way); the same
    /// record on every rank.
    held: SmallVec<[AtomicU64; 1]>,
    /// This rank's future of it, once this rank holds it.
    here: OnceLock<Future<T>>,
}

impl<T> Clone for Value<T> {
    fn clone(&self) -> Self {
        Value(self.0.clone())
    }
}

impl<T> std::fmt::Debug for Value<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Value({} at rank {})", self.0.id, self.0.home)
    }
}

/// What a task of an [`Spmd`] program can wait for: a [`Value`] of any type, whichever rank
/// holds it. A task's preconditions ([`Spmd::launch`]) may mix types.
///
/// ```
/// use tactor::job::{Held, Job, Spmd};
///
/// let job = Job::launched().unwrap();
/// let rt = job.runtime(tactor::Runtime::builder().workers(1).pin(false)).unwrap();
/// let mut s = Spmd::new(&rt, &job);
/// let n = s.spawn(0, &[], |_| 7u64);
/// let v = s.spawn(0, &[], |_| vec![1.0f64, 2.0]);
/// let both: [&dyn Held; 2] = [&n, &v];
/// let done = s.launch(0, &both, || println!("after both"));
/// s.get(&done).unwrap();
/// ```
pub trait Held: sealed::Bring {}

mod sealed {
    /// How [`Spmd`](super::Spmd) makes a rank hold a value and waits for it there.
    pub trait Bring {
        /// Makes `rank` hold this value (see `Spmd::bring`).
        fn bring_to(&self, s: &mut super::Spmd, rank: usize);
        /// The event of this rank's copy, once this rank holds it.
        fn event_here(&self) -> crate::Event;
    }
}

impl<T: Wire + Clone + Default> sealed::Bring for Value<T> {
    fn bring_to(&self, s: &mut Spmd, rank: usize) {
        s.bring(self, rank);
    }

    fn event_here(&self) -> Event {
        local(self).event().clone()
    }
}

impl<T: Wire + Clone + Default> Held for Value<T> {}

/// Where a task of an [`Spmd`] program runs: a worker of the job, or whichever worker of a
/// rank is free to take it. A plain number is a worker.
///
/// ```
/// use tactor::job::{At, Job, Spmd};
///
/// let job = Job::launched().unwrap();
/// let rt = job.runtime(tactor::Runtime::builder().workers(2).pin(false)).unwrap();
/// let mut s = Spmd::new(&rt, &job);
/// let a = s.spawn(At::Rank(0), &[], |_| 2u64); // on any worker of rank 0
/// let b = s.spawn(1, &[&a], |ins| ins[0] * 21); // on the job's worker 1
/// assert_eq!(s.get(&b).unwrap(), 42);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// Worker `w` of the job: worker `w % W` of rank `w / W`, `W` workers a rank.
    Worker(usize),
    /// Any worker of the rank.
    Rank(usize),
}

impl From<usize> for At {
    fn from(worker: usize) -> At {
        At::Worker(worker)
    }
}

/// Bytes of a copy message's id, before its kind.
const ID: usize = 8;

/// What a copy message's kind byte says.
const VALUE: u8 = 0;
const POISON: u8 = 1;

/// A program of futures over the ranks of a [`Job`]. Every rank makes the same calls.
///
/// ```
/// use tactor::job::{Job, Spmd};
/// use tactor::Runtime;
///
/// let job = Job::launched().unwrap(); // a job of one here; under mpirun, the launcher's
/// let rt = job.runtime(Runtime::builder().workers(2).pin(false)).unwrap();
/// let mut s = Spmd::new(&rt, &job);
/// let last = s.workers() - 1;
/// let a = s.spawn(0, &[], |_| 20u64);
/// let b = s.spawn(last, &[&a], |ins| ins[0] + 1); // on the last rank: `a` is copied there
/// let c = s.spawn(0, &[&a, &b], |ins| ins[0] + ins[1]);
/// assert_eq!(s.get(&c).unwrap(), 41); // every rank gets it
/// ```
pub struct Spmd {
    handle: Handle,
    job: Arc<Job>,
    local: usize,
    next: u64,
    inbox: Arc<Rendezvous<u64, Opener, Sequential>>,
    /// This rank's values on their way to other ranks: a rank must not end (its runtime
    /// cancelling them) while another waits for their messages.
    sends: Arc<Inflight>,
    /// The tasks this rank ran or runs, not yet known to have ended: what [`Spmd::fence`]
    /// waits for.
    ran: Vec<Event>,
    /// When `ran` next drops the events that triggered ([`keep`]).
    prune_at: usize,
    /// Values this rank sent so far: which send a test's fault is due for ([`Job::inject`]).
    sent: i64,
    _port: OpenPort,
}

impl Drop for Spmd {
    /// Waits until this rank sent every value another rank asked for; a value still on its
    /// way here can no longer arrive, and what waits for it fails saying so.
    fn drop(&mut self) {
        let _ = self.sends.drained().wait();
        self.inbox.poison(
            "its Spmd program was dropped before the value arrived from another rank \
             (a scope's tasks need the Spmd made before the scope)",
        );
    }
}

impl Spmd {
    /// A program over `job`'s ranks on `handle`'s runtime (started by [`Job::runtime`], the
    /// same size on every rank). Every rank makes it.
    ///
    /// # Panics
    /// If another one of this job is still alive.
    pub fn new(handle: &Handle, job: &Arc<Job>) -> Spmd {
        let inbox = Arc::new(Rendezvous::default());
        let deliver = inbox.clone();
        // Read in place: a value's bytes are decoded where its sender wrote them (on the node),
        // with no buffer and no queue between the network and the task that reads them.
        let port = job
            .open_reserved_in_place(
                PORT_FUTURES,
                Arc::new(move |from, data: &[u8]| {
                    let Some(id) = data.get(..ID) else {
                        let n = data.len();
                        return deliver.poison(&format!("rank {from} sent a value of {n} bytes"));
                    };
                    let id = u64::from_le_bytes(id.try_into().expect("8 bytes"));
                    // Whole: the opener reads what follows the id.
                    deliver.arrive(id, Cow::Borrowed(data));
                }),
            )
            .expect("one Spmd program at a time in a job");
        job.on_failure_of(&inbox, |inbox, rank| {
            inbox.poison(&format!("rank {rank} failed"))
        });
        Spmd {
            handle: handle.clone(),
            job: job.clone(),
            local: handle.workers(),
            next: 0,
            inbox,
            sends: Arc::default(),
            ran: Vec::new(),
            prune_at: 64,
            sent: 0,
            _port: port,
        }
    }

    /// Workers of the whole job: what [`Spmd::spawn`] names (worker `w` is worker `w % W` of
    /// rank `w / W`).
    pub fn workers(&self) -> usize {
        self.local * self.job.ranks()
    }

    /// Runs `task` where `at` says once `inputs` are ready, with their values; returns the
    /// value it makes. On other ranks only the bookkeeping happens (and the sends of the
    /// inputs this rank holds).
    ///
    /// # Panics
    /// If `at` is not a worker or rank of the job.
    #[track_caller]
    pub fn spawn<T, F>(&mut self, at: impl Into<At>, inputs: &[&Value<T>], task: F) -> Value<T>
    where
        T: Wire + Clone + Default,
        F: FnOnce(Inputs<'_, T>) -> T + Send + 'static,
    {
        self.spawn_with(at.into(), inputs, |s, at| {
            let f = (s.handle).dataflow(at, inputs.iter().map(|v| local(v)), task);
            s.ran(f.event());
            f
        })
    }

    /// [`spawn`](Self::spawn) into `scope`: the task may borrow what outlives the scope, and
    /// the scope waits for it and reports its failure ([`Handle::scope`]), not
    /// [`fence`](Self::fence) — which still waits for this rank's sends. No count of the
    /// task is kept here: a program whose tasks share one borrowed context pays no counted
    /// reference to it per task. Make the `Spmd` before the scope: the values its tasks take
    /// from other ranks arrive through it (dropped first, it fails the tasks still waiting
    /// for one, with a message that says so).
    ///
    /// ```
    /// use tactor::job::{Job, Spmd};
    ///
    /// let job = Job::launched().unwrap();
    /// let rt = job.runtime(tactor::Runtime::builder().workers(2).pin(false)).unwrap();
    /// let table = vec![3u64, 4]; // borrowed by the tasks, not moved into them
    /// let mut s = Spmd::new(&rt, &job);
    /// let last = s.workers() - 1;
    /// let b = rt
    ///     .scope(|scope| {
    ///         let table = &table;
    ///         let a = s.spawn_in(scope, 0, &[], move |_| table[0]);
    ///         s.spawn_in(scope, last, &[&a], move |ins| ins[0] * table[1])
    ///     })
    ///     .unwrap();
    /// assert_eq!(s.get(&b).unwrap(), 12);
    /// ```
    ///
    /// # Panics
    /// If `at` is not a worker or rank of the job.
    #[track_caller]
    pub fn spawn_in<'scope, T, F>(
        &mut self,
        scope: &Scope<'scope>,
        at: impl Into<At>,
        inputs: &[&Value<T>],
        task: F,
    ) -> Value<T>
    where
        T: Wire + Clone + Default,
        F: FnOnce(Inputs<'_, T>) -> T + Send + 'scope,
    {
        self.spawn_with(at.into(), inputs, |_, at| {
            scope.dataflow(at, inputs.iter().map(|v| local(v)), task)
        })
    }

    /// What the spawns share: places the task, brings its inputs to its rank, and there
    /// launches it (`launch`, on the inputs this rank now holds).
    #[track_caller]
    fn spawn_with<T: Wire + Clone + Default>(
        &mut self,
        at: At,
        inputs: &[&Value<T>],
        launch: impl FnOnce(&mut Self, Placement) -> Future<T>,
    ) -> Value<T> {
        let (rank, at) = self.place(at);
        for v in inputs {
            self.bring(v, rank);
        }
        let here = (rank == self.job.rank()).then(|| launch(self, at));
        self.value(rank, here)
    }

    /// Runs `task` where `at` says once every one of `after` has triggered (any
    /// types, held on any rank: a precondition from another rank arrives as one message, sent
    /// when it triggers); returns the task's completion as a value of no data, which other
    /// tasks on any rank may wait for. A precondition that failed poisons the task, which
    /// then does not run, and through it what waits for it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// use tactor::job::{Job, Spmd};
    ///
    /// let job = Job::launched().unwrap();
    /// let rt = job.runtime(tactor::Runtime::builder().workers(2).pin(false)).unwrap();
    /// let mut s = Spmd::new(&rt, &job);
    /// let ran = Arc::new(AtomicUsize::new(0));
    /// let r = ran.clone();
    /// let first = s.launch(0, &[], move || { r.fetch_add(1, Ordering::SeqCst); });
    /// let r = ran.clone();
    /// let second = s.launch(s.workers() - 1, &[&first], move || {
    ///     assert_eq!(r.fetch_add(1, Ordering::SeqCst), 1, "after the first");
    /// });
    /// s.get(&second).unwrap();
    /// ```
    ///
    /// # Panics
    /// If `at` is not a worker or rank of the job.
    #[track_caller]
    pub fn launch<F>(&mut self, at: impl Into<At>, after: &[&dyn Held], task: F) -> Value<()>
    where
        F: FnOnce() + Send + 'static,
    {
        let (rank, at) = self.place(at.into());
        for v in after {
            v.bring_to(self, rank);
        }
        let here = (rank == self.job.rank()).then(|| {
            let events: Vec<Event> = after.iter().map(|v| v.event_here()).collect();
            let f = (self.handle).spawn(at, &events, task);
            self.ran(f.event());
            f
        });
        self.value(rank, here)
    }

    /// Waits until every task this rank ran so far has ended and every value another rank
    /// asked of it has left; the first failure among them, if any. Not collective: a rank
    /// waits only for its own tasks (which wait for what they take from other ranks).
    ///
    /// ```
    /// use tactor::job::{Job, Spmd};
    ///
    /// let job = Job::launched().unwrap();
    /// let rt = job.runtime(tactor::Runtime::builder().workers(2).pin(false)).unwrap();
    /// let mut s = Spmd::new(&rt, &job);
    /// let a = s.spawn(0, &[], |_| 1u64);
    /// let _unread = s.spawn(1, &[&a], |_| -> u64 { panic!("nobody reads this") });
    /// assert!(s.fence().is_err());
    /// ```
    pub fn fence(&mut self) -> Result<(), TaskFailed> {
        let mut all = std::mem::take(&mut self.ran);
        all.push(self.sends.drained());
        self.prune_at = 64;
        Event::merge(&all).wait()
    }

    /// Keeps `e`, a task this rank runs, for [`Spmd::fence`].
    fn ran(&mut self, e: &Event) {
        keep(&mut self.ran, &mut self.prune_at, e.clone());
    }

    /// The rank a task placed `at` runs on, and its placement there.
    #[track_caller]
    fn place(&self, at: At) -> (usize, Placement) {
        match at {
            At::Worker(w) => {
                let all = self.workers();
                assert!(w < all, "worker {w} is not one of the job's {all} workers");
                (w / self.local, Placement::Worker(w % self.local))
            }
            At::Rank(r) => {
                let all = self.job.ranks();
                assert!(r < all, "rank {r} is not one of the job's {all} ranks");
                (r, Placement::Any)
            }
        }
    }

    /// The next value of the program, computed on `rank` (`here` on that rank).
    fn value<T>(&mut self, rank: usize, here: Option<Future<T>>) -> Value<T> {
        let id = self.next;
        self.next += 1;
        let held: SmallVec<_> = (0..self.job.ranks().div_ceil(64))
            .map(|w| AtomicU64::new(if w == rank / 64 { 1 << (rank % 64) } else { 0 }))
            .collect();
        let cell = OnceLock::new();
        if let Some(f) = here {
            let _ = cell.set(f);
        }
        Value(Arc::new(Shared {
            id,
            home: rank,
            held,
            here: cell,
        }))
    }

    /// Makes `rank` hold `v`: its home sends it there once it is ready, and there a promise
    /// waits for it.
    fn bring<T: Wire + Clone + Default>(&mut self, v: &Value<T>, rank: usize) {
        let (word, bit) = (rank / 64, 1u64 << (rank % 64));
        // Only the issuing thread marks (one `Spmd` at a time in a job, reached through
        // `&mut`): a load and a store, not a read-modify-write, which would be a full barrier
        // for every input of every spawn, most of them already held.
        let held = v.0.held[word].load(Ordering::Relaxed);
        if held & bit != 0 {
            return;
        }
        v.0.held[word].store(held | bit, Ordering::Relaxed);
        let me = self.job.rank();
        if me == v.0.home {
            let from = local(v);
            let fault = self.job.fault_due(self.sent);
            self.sent += 1;
            self.sends.start();
            let event = from.event().clone();
            let copy = SendWhenReady {
                from,
                job: self.job.clone(),
                id: v.0.id,
                rank,
                fault,
                sends: self.sends.clone(),
            };
            // Not a precondition: a value that failed must be sent too (as its poison).
            event.state().subscribe(Arc::new(copy));
        } else if me == rank {
            let (promise, future) = Promise::<T>::new();
            let _ = v.0.here.set(future);
            self.inbox.expect(
                v.0.id,
                Box::new(move |got| match got.map(|m| m[ID..].split_first()) {
                    Ok(Some((&VALUE, bytes))) => {
                        let mut value = T::default();
                        value.decode(bytes);
                        promise.set(value);
                    }
                    Ok(Some((_, poison))) if poison.len() >= 4 => {
                        let (rank, why) = poison.split_at(4);
                        promise.fail_with(Failure::Remote {
                            rank: u32::from_le_bytes(rank.try_into().expect("4 bytes")) as usize,
                            why: String::from_utf8_lossy(why).into_owned(),
                        });
                    }
                    Ok(Some(_)) => promise.fail("a copy arrived cut short"),
                    Ok(None) => promise.fail("an empty copy arrived"),
                    Err(why) => promise.fail(why),
                }),
            );
        }
    }

    /// `v`'s value, on every rank (each rank that does not hold it gets a copy). Collective:
    /// every rank calls it.
    pub fn get<T: Wire + Clone + Default>(&mut self, v: &Value<T>) -> Result<T, TaskFailed> {
        for rank in 0..self.job.ranks() {
            self.bring(v, rank);
        }
        let value = local(v).get().cloned();
        // The other ranks' copies leave before this rank goes on (and perhaps ends).
        let _ = self.sends.drained().wait();
        value
    }
}

/// A value on its way to another rank: sent by the thread that sets it (as its job ends),
/// with no task of its own, or as its poison if it failed.
struct SendWhenReady<T> {
    from: Future<T>,
    job: Arc<Job>,
    id: u64,
    rank: usize,
    /// The fault a test injects into this send ([`Job::inject`]).
    fault: Option<super::Fault>,
    /// Counted down once the message left (or the value will never be sent): a rank ends
    /// only after its sends.
    sends: Arc<Inflight>,
}

impl<T> Drop for SendWhenReady<T> {
    fn drop(&mut self) {
        self.sends.done();
    }
}

/// Sends on their way, counted (a count per rank, not an event per send): an event that
/// triggers when none is left.
#[derive(Default)]
pub(crate) struct Inflight {
    count: crate::sync::AtomicUsize,
    /// What [`Inflight::drained`] handed out, until the count next reaches zero.
    idle: crate::sync::Mutex<Option<UserEvent>>,
}

impl Inflight {
    /// One more send (from the issuing thread only).
    pub(crate) fn start(&self) {
        self.count.fetch_add(1, crate::sync::Ordering::AcqRel);
    }

    /// A send left.
    pub(crate) fn done(&self) {
        if self.count.fetch_sub(1, crate::sync::Ordering::AcqRel) == 1 {
            self.wake();
        }
    }

    fn wake(&self) {
        let idle = crate::sync::lock(&self.idle).take();
        if let Some(idle) = idle {
            let _ = idle.trigger();
        }
    }

    /// An event that triggers once no send is on its way (from the issuing thread, which
    /// starts none meanwhile).
    pub(crate) fn drained(&self) -> Event {
        if self.count.load(crate::sync::Ordering::Acquire) == 0 {
            return Event::triggered();
        }
        let idle = UserEvent::new();
        let event = idle.event();
        *crate::sync::lock(&self.idle) = Some(idle);
        // The last send may have left before the event was there to trigger.
        if self.count.load(crate::sync::Ordering::Acquire) == 0 {
            self.wake();
        }
        event
    }
}

impl<T: Wire + Send + Sync + 'static> Notify for SendWhenReady<T> {
    fn notify(self: Arc<Self>, _: &Outcome) {
        if let (Ok(value), None) = (self.from.get(), self.fault) {
            if let Some(bytes) = value.as_bytes() {
                // Straight from the value to the network: no buffer.
                let mut head = [VALUE; ID + 1];
                head[..ID].copy_from_slice(&self.id.to_le_bytes());
                let len = head.len() + bytes.len();
                let parts: [&[u8]; 2] = [&head, bytes];
                let job = &self.job;
                return job.send_parts(0, self.rank, PORT_FUTURES, len, &mut parts.into_iter());
            }
        }
        let mut msg = crate::job::buffer(ID + 1);
        msg.extend_from_slice(&self.id.to_le_bytes());
        match self.from.get() {
            Ok(value) => {
                msg.push(VALUE);
                value.encode(&mut msg);
                if let Some(f) = self.fault {
                    f.act(&mut msg[ID + 1..]);
                }
            }
            Err(e) => {
                // Where it failed first: here, or the rank whose poison reached here.
                let (origin, why) = match e.failure() {
                    Failure::Remote { rank, why } => (*rank, why.clone()),
                    _ => (self.job.rank(), e.to_string()),
                };
                msg.push(POISON);
                msg.extend_from_slice(&(origin as u32).to_le_bytes());
                msg.extend_from_slice(why.as_bytes());
            }
        }
        self.job.send(0, self.rank, PORT_FUTURES, msg);
    }
}

/// Adds `e` to `events`, first dropping those that succeeded when `events` reached
/// `prune_at`, which then becomes twice what was kept: the pruning costs a constant per
/// event. A poisoned event stays, for the wait that reports it.
fn keep(events: &mut Vec<Event>, prune_at: &mut usize, e: Event) {
    if events.len() >= *prune_at {
        events.retain(|e| !matches!(e.try_outcome(), Some(Ok(()))));
        *prune_at = (2 * events.len()).max(64);
    }
    events.push(e);
}

/// This rank's future of `v` (it holds it: its home, or a copy was brought).
fn local<T>(v: &Value<T>) -> Future<T> {
    v.0.here.get().expect("a value this rank holds").clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends leave on other threads while the issuing thread waits for them to drain, round
    /// after round: every drained event triggers (no lost wake-up), and never while a send
    /// is still on its way.
    #[test]
    fn drained_triggers_once_every_send_left_and_not_before() {
        let rounds = if cfg!(miri) { 12 } else { 4000 };
        let inflight = Arc::new(Inflight::default());
        for k in 0..rounds {
            let n = 1 + k % 3;
            (0..n).for_each(|_| inflight.start());
            use std::sync::atomic::AtomicUsize;
            let (left, go) = (AtomicUsize::new(0), AtomicUsize::new(0));
            std::thread::scope(|s| {
                for t in 0..n {
                    let (i, l, go) = (&inflight, &left, &go);
                    s.spawn(move || {
                        // All released at once, with the issuing thread's `drained`: the
                        // last send leaves while its event is being set up, now and then.
                        while go.load(Ordering::Acquire) == 0 {
                            std::hint::spin_loop();
                        }
                        (0..(k + t) % 7 * 10).for_each(|_| std::hint::spin_loop());
                        l.fetch_add(1, Ordering::SeqCst);
                        i.done();
                    });
                }
                go.store(1, Ordering::Release);
                inflight.drained().wait().unwrap();
                let gone = left.load(Ordering::SeqCst);
                assert_eq!(gone, n, "round {k}: drained with a send on its way");
            });
        }
        assert!(inflight.drained().has_triggered(), "none on its way");
    }

    /// A message on the values' port too short to hold an id (a faulty or foreign sender)
    /// fails the values this rank awaits, naming the sender, instead of panicking on the
    /// thread that progresses the network.
    #[test]
    fn a_value_shorter_than_its_id_fails_what_waits_naming_its_sender() {
        let runs = Job::run_in_process(2, 1, |rt, job| {
            let mut s = Spmd::new(rt, job);
            if job.rank() == 1 {
                // On the channel the value of `a` takes after it: it arrives first.
                job.send(0, 0, PORT_FUTURES, vec![1, 2, 3]);
            }
            let a = s.spawn(1, &[], |_| 5u64);
            let _b = s.spawn(0, &[&a], |ins| ins[0] + 1);
            s.fence()
        });
        let mut runs = runs.into_iter();
        let (zero, one) = (runs.next().expect("rank 0"), runs.next().expect("rank 1"));
        let why = zero.unwrap().unwrap_err().to_string();
        assert!(why.contains("rank 1 sent a value of 3 bytes"), "{why}");
        one.unwrap().unwrap();
    }
}
