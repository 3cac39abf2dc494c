//! Futures and events across the ranks of a job, by control replication: every rank runs the
//! same program and makes the same [`Spmd::spawn`]s and [`Spmd::launch`]es; each runs on the
//! rank that owns the worker it names, and its value (or, for a launch, its trigger) reaches
//! another rank only when a task there takes it as an input or precondition — one message per
//! value and rank, sent when the value is ready, carrying the value (or the failure that
//! poisoned it, so that poison crosses ranks too).

use super::rendezvous::Rendezvous;
use super::Wire;
use super::{Job, OpenPort, PORT_FUTURES};
use crate::{Future, Handle, Placement, Promise, TaskFailed};
use std::sync::{Arc, Mutex, PoisonError};

/// A value that a spawn of an [`Spmd`] program makes: the same handle on every rank, its value
/// held by the rank that computed it and by the ranks it was copied to.
pub struct Value<T> {
    id: u64,
    home: usize,
    /// Per rank, whether it holds the value (or will: its copy is on the way); the same record
    /// on every rank.
    held: Arc<Mutex<Vec<bool>>>,
    /// This rank's future of it, once this rank holds it.
    here: Arc<Mutex<Option<Future<T>>>>,
}

impl<T> Clone for Value<T> {
    fn clone(&self) -> Self {
        Value {
            id: self.id,
            home: self.home,
            held: self.held.clone(),
            here: self.here.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Value<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Value({} at rank {})", self.id, self.home)
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

    fn event_here(&self) -> crate::Event {
        local(self).event().clone()
    }
}

impl<T: Wire + Clone + Default> Held for Value<T> {}

/// What a copy message's first byte says.
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
    inbox: Arc<Rendezvous<u64>>,
    /// The tasks that send this rank's values to other ranks, not yet waited for: a rank
    /// must not end (its runtime cancelling them) while another waits for their messages.
    sends: Vec<crate::Event>,
    _port: OpenPort,
}

impl Drop for Spmd {
    /// Waits until this rank sent every value another rank asked for.
    fn drop(&mut self) {
        let _ = crate::Event::merge(&self.sends).wait();
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
        let port = job
            .open_reserved(
                PORT_FUTURES,
                Arc::new(move |m| {
                    let id = u64::from_le_bytes(m.data[..8].try_into().expect("an id"));
                    deliver.arrive(id, m.data[8..].to_vec());
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
            sends: Vec::new(),
            _port: port,
        }
    }

    /// Workers of the whole job: what [`Spmd::spawn`] names (worker `w` is worker `w % W` of
    /// rank `w / W`).
    pub fn workers(&self) -> usize {
        self.local * self.job.ranks()
    }

    /// Runs `task` on job-wide worker `worker` once `inputs` are ready, with their values;
    /// returns the value it makes. On other ranks only the bookkeeping happens (and the sends
    /// of the inputs this rank holds).
    ///
    /// # Panics
    /// If `worker` is not a worker of the job.
    #[track_caller]
    pub fn spawn<T, F>(&mut self, worker: usize, inputs: &[&Value<T>], task: F) -> Value<T>
    where
        T: Wire + Clone + Default,
        F: FnOnce(&[T]) -> T + Send + 'static,
    {
        let rank = self.rank_of(worker);
        for v in inputs {
            self.bring(v, rank);
        }
        let here = (rank == self.job.rank()).then(|| {
            let futures = inputs.iter().map(|v| local(v));
            let at = Placement::Worker(worker % self.local);
            (self.handle).dataflow(at, futures, |ins| {
                task(&ins.iter().cloned().collect::<Vec<T>>())
            })
        });
        self.value(rank, here)
    }

    /// Runs `task` on job-wide worker `worker` once every one of `after` has triggered (any
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
    /// If `worker` is not a worker of the job.
    #[track_caller]
    pub fn launch<F>(&mut self, worker: usize, after: &[&dyn Held], task: F) -> Value<()>
    where
        F: FnOnce() + Send + 'static,
    {
        let rank = self.rank_of(worker);
        for v in after {
            v.bring_to(self, rank);
        }
        let here = (rank == self.job.rank()).then(|| {
            let events: Vec<crate::Event> = after.iter().map(|v| v.event_here()).collect();
            (self.handle).spawn(Placement::Worker(worker % self.local), &events, task)
        });
        self.value(rank, here)
    }

    /// The rank that owns job-wide worker `worker`.
    #[track_caller]
    fn rank_of(&self, worker: usize) -> usize {
        assert!(
            worker < self.workers(),
            "worker {worker} is not one of the job's {} workers",
            self.workers()
        );
        worker / self.local
    }

    /// The next value of the program, computed on `rank` (`here` on that rank).
    fn value<T>(&mut self, rank: usize, here: Option<Future<T>>) -> Value<T> {
        let id = self.next;
        self.next += 1;
        let mut held = vec![false; self.job.ranks()];
        held[rank] = true;
        Value {
            id,
            home: rank,
            held: Arc::new(Mutex::new(held)),
            here: Arc::new(Mutex::new(here)),
        }
    }

    /// Makes `rank` hold `v`: its home sends it there once it is ready, and there a promise
    /// waits for it.
    fn bring<T: Wire + Clone + Default>(&mut self, v: &Value<T>, rank: usize) {
        {
            let mut held = v.held.lock().unwrap_or_else(PoisonError::into_inner);
            if held[rank] {
                return;
            }
            held[rank] = true;
        }
        let me = self.job.rank();
        if me == v.home {
            let (job, id, from) = (self.job.clone(), v.id, local(v));
            let channel = 0;
            // Not a precondition: a value that failed must be sent too (as its poison).
            let sent = self.handle.launch(Placement::Any, &[], move || {
                let mut msg = crate::job::buffer(9);
                msg.extend_from_slice(&id.to_le_bytes());
                match from.get() {
                    Ok(value) => {
                        msg.push(VALUE);
                        value.encode(&mut msg);
                    }
                    Err(e) => {
                        msg.push(POISON);
                        msg.extend_from_slice(e.to_string().as_bytes());
                    }
                }
                job.send(channel, rank, PORT_FUTURES, msg);
            });
            self.sends.retain(|e| !e.has_triggered());
            self.sends.push(sent);
        } else if me == rank {
            let (promise, future) = Promise::<T>::new();
            *v.here.lock().unwrap_or_else(PoisonError::into_inner) = Some(future);
            self.inbox.expect(
                v.id,
                Box::new(move |got| match got.as_deref().map(<[u8]>::split_first) {
                    Ok(Some((&VALUE, bytes))) => {
                        let mut value = T::default();
                        value.decode(bytes);
                        promise.set(value);
                    }
                    Ok(Some((_, why))) => promise.fail(&String::from_utf8_lossy(why)),
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
        let _ = crate::Event::merge(&std::mem::take(&mut self.sends)).wait();
        value
    }
}

/// This rank's future of `v` (it holds it: its home, or a copy was brought).
fn local<T>(v: &Value<T>) -> Future<T> {
    v.here
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .expect("a value this rank holds")
}
