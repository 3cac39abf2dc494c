//! The job: the ranks a program runs on, and the one place that owns the network between
//! them — joining, the port table, failure propagation, collectives that keep progressing,
//! and network progress for idle workers.
//!
//! A process started on its own is a job of one (an in-process transport, so the same code
//! runs unchanged); a process started by an MPI launcher as one of several ranks joins the
//! launcher's job with [`JobBuilder::join`] (cargo feature `mpi`, on by default).
//!
//! **Agreement.** Before anything else, the ranks show each other their configuration (for a
//! command, its arguments) or why they cannot take part; they start only if all agree, and
//! otherwise every rank returns the same [`JobError::Verdict`], which one rank prints
//! ([`JobError::speaks`]): a rank started with other arguments, or whose arguments did not
//! parse, is named at once instead of hanging the job.
//!
//! **Ports.** A message goes to a port of a rank. A port opened with [`Job::open_port`] hands
//! each message to its handler, on whichever thread progressed the network; a program that
//! waits for messages itself takes them in passing with [`Job::progress`]'s `take`. Messages
//! for a port nobody took yet are kept for it ([`Job::take_parked`], or its handler once
//! opened), never dropped.
//!
//! **Cross-rank data.** [`Exchange`] carries keyed messages between ranks, each the
//! precondition of work on the rank it reaches (an event, an inlet of a subgraph instance, a
//! task that pulls it); [`Blocks`] cuts arrays in one block per rank and moves the items that
//! cross ranks between two steps, derived from the program's dependences, and [`Lockstep`]
//! keeps such arrays' two generations and fills in the items other ranks own;
//! [`Neighbours`] steps arrays cut in one block per worker of the job, each worker waiting
//! only for the workers it exchanges items with; [`Spmd`] gives futures whose values travel
//! with their trigger.
//!
//! **Failure.** A rank that fails calls [`Job::fail`]: it prints one line naming itself and
//! the cause, and tells every other rank, whose next wait on the job (a collective, a
//! progress call) then returns [`JobError::RankFailed`] so that they end too, quietly. A
//! panic ends the whole job at once through the launcher (`MPI_Abort`), since what the
//! panicking thread would have sent never comes.

mod blocks;
mod collective;
mod dataflow;
pub mod exchange;
mod fault;
mod lockstep;
mod neighbours;
mod ordered;
mod pattern;
mod ports;
pub(crate) mod rendezvous;
mod sharded;
pub(crate) mod spmd;
mod wire;

pub use blocks::{Blocks, Crossing};
pub use dataflow::{Dataflow, Point, Reads};
pub use exchange::Exchange;
pub use fault::Fault;
pub use lockstep::{Lockstep, Step};
pub use neighbours::{Before, Block, Neighbours, Stopped};
pub use pattern::Pattern;
use ports::Ports;
pub use ports::{Handler, OpenPort};
pub use sharded::{Received, Sharded, ShardedBuilder};
pub use spmd::{At, Held, Spmd, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};
use tactor_comm::agree::{Joining, Verdict};
use tactor_comm::{loopback::Loopback, CommError, Completion, Message, Transport};
pub use wire::Wire;

pub use tactor_comm::Reduce;

/// Ports the job keeps for itself: a rank failed.
const PORT_FAIL: u16 = 0;
/// The job's collectives ([`Job::all_gather`], [`Job::broadcast`]).
const PORT_COLLECTIVE: u16 = 1;
/// The first port a program may open; those below are the job's own and the runtime's.
pub const FIRST_PORT: u16 = 8;
/// The port of selectors spanning ranks ([`crate::actor`]).
pub(crate) const PORT_ACTORS: u16 = 2;
/// The port of replicated implicit programs' copies ([`crate::implicit::Replicated`]).
pub(crate) const PORT_IMPLICIT: u16 = 3;
/// The port of futures across ranks ([`Spmd`]).
pub(crate) const PORT_FUTURES: u16 = 4;

pub use tactor_comm::buffer;

/// How long a failing rank waits to learn whether other ranks failed too, so that the job
/// prints one line: ranks that read the same bad input fail within a few milliseconds.
pub const SETTLE: Duration = Duration::from_millis(300);

/// Channels a joined job opens at most: one per worker up to this many (seed 002 finds a few
/// network "devices" enough).
pub const MAX_CHANNELS: usize = 4;

/// What [`Job::on_failure`] runs: given the rank that failed.
pub type FailureHook = Box<dyn FnOnce(usize) + Send>;

/// Whether the owner of a failure hook is still alive ([`Job::on_failure_of`]).
type Alive = Box<dyn Fn() -> bool + Send>;

/// Why a job could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Another rank failed (it printed why).
    #[error("rank {rank} failed")]
    RankFailed {
        /// The first rank that failed.
        rank: usize,
    },
    /// The ranks did not agree to start.
    #[error("{}", .0.line())]
    Verdict(Verdict),
    /// The network could not start or refused a send.
    #[error("{0}")]
    Comm(CommError),
    /// The port is the job's own or is open already.
    #[error("port {0} is taken (a program's ports start at {FIRST_PORT}, and each opens once)")]
    PortTaken(u16),
}

impl JobError {
    /// Whether rank `me` is the one to print this error, so that a job prints each cause
    /// once: a verdict is printed by the rank it names (or rank 0), another rank's failure not
    /// at all (that rank printed it).
    pub fn speaks(&self, me: usize) -> bool {
        match self {
            JobError::RankFailed { .. } => false,
            JobError::Verdict(v) => v.speaks(me),
            _ => true,
        }
    }
}

impl From<CommError> for JobError {
    fn from(e: CommError) -> JobError {
        match e {
            CommError::Verdict(v) => JobError::Verdict(v),
            e => JobError::Comm(e),
        }
    }
}

/// The ranks of a program and the network between them. See the [module docs](self).
///
/// ```
/// use tactor::job::Job;
///
/// // On its own, a process is rank 0 of a job of one: collectives return at once.
/// let job = Job::builder().join().unwrap();
/// assert_eq!((job.rank(), job.ranks()), (0, 1));
/// assert_eq!(job.all_gather(b"mine".to_vec()).unwrap(), vec![b"mine".to_vec()]);
/// ```
pub struct Job {
    net: Box<dyn Transport>,
    /// 0 while no rank failed, else the first failed rank + 1.
    failed: AtomicUsize,
    /// The cause of every rank known to have failed, by rank.
    causes: Mutex<BTreeMap<usize, String>>,
    /// What to do at the first failure of any rank ([`Job::on_failure`]), each with whether
    /// it still matters (a hook of an owner that is gone does not, and is dropped).
    hooks: Mutex<Vec<(Option<Alive>, FailureHook)>>,
    ports: Ports,
    collective: collective::State,
    /// Joined at `MPI_THREAD_SINGLE`: only the joining thread may use the job.
    one_thread: bool,
    /// A fault to inject into one send, for tests ([`Job::inject`]).
    injected: fault::Injected,
    /// The runtimes that poll this job ([`Job::runtime`]): woken when a port opens, since
    /// a worker that parked while none was open would not look again.
    pollers_of: Mutex<Vec<crate::runtime::WeakHandle>>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Job(rank {} of {})", self.rank(), self.ranks())
    }
}

/// The launcher's job this process joined, for the panic hook. Weak: the job ends (and
/// finalises MPI) when its last user drops it.
static JOINED: OnceLock<Weak<Job>> = OnceLock::new();

/// How a process joins its job: [`Job::builder`].
#[derive(Debug)]
pub struct JobBuilder {
    channels: usize,
    part: Joining,
    one_thread: bool,
    program: String,
}

impl JobBuilder {
    /// Network channels, one per worker that sends and polls (clamped to 1..=[`MAX_CHANNELS`]).
    pub fn channels(mut self, n: usize) -> JobBuilder {
        self.channels = n.clamp(1, MAX_CHANNELS);
        self
    }

    /// What every rank must have alike: the command's arguments, each flag with its value
    /// (`tactor_comm::agree::Joining::from_args`). Without it, the process's own arguments.
    pub fn config<S: AsRef<str>>(mut self, args: impl IntoIterator<Item = S>) -> JobBuilder {
        self.part = Joining::from_args(args);
        self
    }

    /// One more item every rank must have alike (a choice the program made, such as a worker
    /// count it derived).
    pub fn agree_on(mut self, item: impl Into<String>) -> JobBuilder {
        self.part = self.part.with(item);
        self
    }

    /// This rank cannot take part (`cause`, one line: its arguments did not parse, say). It
    /// still joins, so that every rank learns it: [`JobBuilder::join`] then fails on every
    /// rank with a [`JobError::Verdict`] that this rank prints.
    pub fn failed(mut self, cause: impl Into<String>) -> JobBuilder {
        self.part = Joining::Failed(cause.into());
        self
    }

    /// The program's name, for errors.
    pub fn program(mut self, name: &str) -> JobBuilder {
        self.program = name.to_string();
        self
    }

    /// Promises that the calling thread is and stays the only one that uses the job, and that
    /// no other thread exists while it joins: MPI then runs at `MPI_THREAD_SINGLE`, without
    /// its internal locks.
    ///
    /// # Safety
    ///
    /// As promised above: MPI takes no precaution for a second thread at this level.
    pub unsafe fn one_thread(mut self) -> JobBuilder {
        self.one_thread = true;
        self
    }

    /// Joins the launcher's job, or makes a job of one when the process was started on its
    /// own. Under a launcher, once per process (MPI starts once); a failed part ends here
    /// with the verdict, on every rank.
    pub fn join(self) -> Result<Arc<Job>, JobError> {
        let launched = tactor_comm::launcher::job().filter(|&(size, _)| size > 1);
        let Some((size, _)) = launched else {
            if let Joining::Failed(cause) = self.part {
                return Err(JobError::Verdict(Verdict::Failed {
                    rank: 0,
                    cause,
                    everywhere: true,
                }));
            }
            let net = Loopback::world(1, self.channels).remove(0);
            return Ok(Job::over(Box::new(net), false));
        };
        if JOINED.get().is_some() {
            return Err(JobError::Comm(CommError::Init(
                "this process joined its job already (MPI starts once per process)".into(),
            )));
        }
        let net = if self.one_thread {
            // SAFETY: the caller promised it through `one_thread`.
            unsafe {
                tactor_comm::connect_one_thread(self.channels, size, &self.program, &self.part)
            }
        } else {
            tactor_comm::connect(self.channels, size, &self.program, &self.part)
        }?;
        let job = Job::over(net, self.one_thread);
        let _ = JOINED.set(Arc::downgrade(&job));
        install_panic_hook();
        Ok(job)
    }
}

impl Job {
    /// How this process joins its job: the arguments it was started with are what the ranks
    /// must agree on, one channel.
    pub fn builder() -> JobBuilder {
        JobBuilder {
            channels: 1,
            part: Joining::from_args(std::env::args().skip(1)),
            one_thread: false,
            program: std::env::args()
                .next()
                .and_then(|p| {
                    std::path::Path::new(&p)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                })
                .unwrap_or_else(|| "program".into()),
        }
    }

    /// This process's job: the launcher's, joined now with the defaults of
    /// [`Job::builder`] if it was not yet (when a launcher started several ranks), or a job
    /// of one. What a program that needs nothing special calls first, before it starts
    /// threads of its own.
    ///
    /// ```
    /// let job = tactor::job::Job::launched().unwrap();
    /// let rt = job.runtime(tactor::Runtime::builder().workers(2).pin(false)).unwrap();
    /// assert_eq!(rt.workers(), 2);
    /// ```
    pub fn launched() -> Result<Arc<Job>, JobError> {
        match Job::joined() {
            Some(job) => Ok(job),
            None => Job::builder().join(),
        }
    }

    /// Starts the runtime `builder` describes with this job's network among what its idle
    /// workers poll (when the job has other ranks), so that messages to the job's ports
    /// keep arriving while its workers wait.
    pub fn runtime(self: &Arc<Self>, builder: crate::Builder) -> std::io::Result<crate::Runtime> {
        if self.ranks() == 1 {
            return builder.build();
        }
        let rt = builder.poller(self.clone()).build()?;
        let mut of = self
            .pollers_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        of.retain(|w| w.alive());
        of.push(rt.handle().downgrade());
        Ok(rt)
    }

    /// Wakes the runtimes that poll this job: a port opened.
    fn wake_pollers(&self) {
        let of = self
            .pollers_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        of.iter().for_each(crate::runtime::WeakHandle::wake);
    }

    /// The launcher's job this process joined, while it lasts (`None` for a process on its
    /// own, whose jobs of one are not registered).
    pub fn joined() -> Option<Arc<Job>> {
        JOINED.get().and_then(Weak::upgrade)
    }

    /// A job whose ranks are `ranks` threads of this process, `channels` channels each: for
    /// tests and examples of multi-rank programs without a launcher.
    ///
    /// ```
    /// use tactor::job::{Job, Reduce};
    ///
    /// let ranks = Job::in_process(3, 1);
    /// let sums: Vec<u64> = std::thread::scope(|s| {
    ///     let runs: Vec<_> = ranks
    ///         .iter()
    ///         .map(|j| s.spawn(move || j.all_reduce(Reduce::Sum, j.rank() as u64).unwrap()))
    ///         .collect();
    ///     runs.into_iter().map(|r| r.join().unwrap()).collect()
    /// });
    /// assert_eq!(sums, [3, 3, 3]);
    /// ```
    pub fn in_process(ranks: usize, channels: usize) -> Vec<Arc<Job>> {
        Loopback::world(ranks, channels)
            .into_iter()
            .map(|t| Job::over(Box::new(t), false))
            .collect()
    }

    /// Runs `f` on every rank of an in-process job ([`Job::in_process`]) of `ranks` ranks,
    /// each a thread with a runtime of `workers` workers that polls the job (unpinned: the
    /// ranks share the machine); each rank's result, or its panic. What the tests of a program
    /// written for the ranks of a job use.
    ///
    /// ```
    /// use tactor::job::{Job, Reduce};
    ///
    /// let got = Job::run_in_process(2, 2, |rt, job| {
    ///     assert_eq!(rt.workers(), 2);
    ///     job.all_reduce(Reduce::Sum, 1 + job.rank() as u64).unwrap()
    /// });
    /// assert_eq!(got.into_iter().map(Result::unwrap).collect::<Vec<_>>(), [3, 3]);
    /// ```
    pub fn run_in_process<R: Send>(
        ranks: usize,
        workers: usize,
        f: impl Fn(&crate::Runtime, &Arc<Job>) -> R + Sync,
    ) -> Vec<std::thread::Result<R>> {
        let jobs = Job::in_process(ranks, workers);
        let f = &f;
        std::thread::scope(|s| {
            let runs: Vec<_> = jobs
                .iter()
                .map(|job| {
                    s.spawn(move || {
                        let builder = crate::Runtime::builder().workers(workers).pin(false);
                        let rt = job.runtime(builder).expect("a runtime for the rank");
                        f(&rt, job)
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join()).collect()
        })
    }

    fn over(net: Box<dyn Transport>, one_thread: bool) -> Arc<Job> {
        Arc::new(Job {
            net,
            failed: AtomicUsize::new(0),
            causes: Mutex::default(),
            hooks: Mutex::default(),
            ports: Ports::default(),
            collective: collective::State::default(),
            one_thread,
            injected: Default::default(),
            pollers_of: Mutex::default(),
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.net.rank()
    }

    /// How many ranks the job has.
    pub fn ranks(&self) -> usize {
        self.net.ranks()
    }

    /// The network's channels.
    pub fn channels(&self) -> usize {
        self.net.channels()
    }

    /// Sends `data` to `port` of rank `dest` on `channel` (taken modulo the channels). A send
    /// the network refuses (no such rank, more than 2 GiB) is an error of the program: it
    /// ends the job with one line.
    pub fn send(&self, channel: usize, dest: usize, port: u16, data: Vec<u8>) {
        let channel = channel % self.channels();
        if let Err(e) = self.net.send(channel, dest, port, data, None) {
            self.die(&format!("send to rank {dest} failed: {e}"));
        }
    }

    /// Sends the `len` bytes of `parts`, back to back, as [`Job::send`] does with them in one
    /// buffer (copied straight to where the message travels from, where the network can).
    pub fn send_parts(
        &self,
        channel: usize,
        dest: usize,
        port: u16,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
    ) {
        let channel = channel % self.channels();
        if let Err(e) = self.net.send_parts(channel, dest, port, len, parts, None) {
            self.die(&format!("send to rank {dest} failed: {e}"));
        }
    }

    /// Offers the oldest inline message from `source` to `want`, in place, on each channel
    /// (see [`tactor_comm::Transport::take_inline`]): whether `want` took one.
    pub fn take_inline(&self, source: usize, want: &mut dyn FnMut(u16, &[u8]) -> bool) -> bool {
        (0..self.channels()).any(|ch| self.net.take_inline(ch, source, want) == Some(true))
    }

    /// Progresses every channel once and routes what arrived: each message for a program's
    /// port goes first to `take`, which keeps it (`None`) or gives it back to go to the port's
    /// handler (or to wait for it). `Err` once some rank failed.
    pub fn progress(
        &self,
        take: &mut dyn FnMut(Message) -> Option<Message>,
    ) -> Result<(), JobError> {
        for ch in 0..self.channels() {
            self.progress_channel(ch, usize::MAX, take);
        }
        self.check()
    }

    /// Routes at most `budget` messages of `channel` as [`Job::progress`] does, progressing
    /// the network when none is waiting. Returns how many arrived.
    pub fn progress_channel(
        &self,
        channel: usize,
        budget: usize,
        take: &mut dyn FnMut(Message) -> Option<Message>,
    ) -> usize {
        self.progress_channel_offering(channel, budget, &mut |_, _, _| false, take)
    }

    /// [`Job::progress_channel`], offering each message the network reads in place to `offer`
    /// first (its source, port and bytes where the sender wrote them: see
    /// [`tactor_comm::Transport::progress_offering`]): one it takes (`true`) goes no
    /// further. For a keyed exchange whose messages need no order among themselves.
    ///
    /// ```
    /// use tactor::job::{Job, FIRST_PORT};
    ///
    /// let job = Job::builder().join().unwrap();
    /// job.send(0, 0, FIRST_PORT, b"hi".to_vec());
    /// let (mut in_place, mut queued) = (0, Vec::new());
    /// let mut offer = |_source, port, _data: &[u8]| {
    ///     in_place += 1;
    ///     port == FIRST_PORT
    /// };
    /// job.progress_channel_offering(0, usize::MAX, &mut offer, &mut |m| {
    ///     queued.push(m.data);
    ///     None
    /// });
    /// // A job of one has no ring to read in place: the message came in a buffer.
    /// assert_eq!((in_place, queued), (0, vec![b"hi".to_vec()]));
    /// ```
    pub fn progress_channel_offering(
        &self,
        channel: usize,
        budget: usize,
        offer: &mut dyn FnMut(usize, u16, &[u8]) -> bool,
        take: &mut dyn FnMut(Message) -> Option<Message>,
    ) -> usize {
        let cq = self.net.completions(channel);
        let mut progressed = false;
        let mut arrived = 0;
        while arrived < budget {
            let c = match cq.pop() {
                Some(c) => c,
                None if progressed => break,
                None => {
                    progressed = true;
                    let in_place = self.ports.any_in_place();
                    let mut offered = |source, port: u16, data: &[u8]| {
                        let taken = offer(source, port, data)
                            || (in_place && self.ports.offer_in_place(source, port, data));
                        arrived += usize::from(taken);
                        taken
                    };
                    self.net.progress_offering(channel, &mut offered);
                    match cq.pop() {
                        Some(c) => c,
                        None => break,
                    }
                }
            };
            if let Completion::Received(m) = c {
                arrived += 1;
                self.route(m, take);
            }
        }
        arrived
    }

    fn route(&self, m: Message, take: &mut dyn FnMut(Message) -> Option<Message>) {
        match m.port {
            PORT_FAIL => self.failed(m.source, String::from_utf8_lossy(&m.data).into_owned()),
            PORT_COLLECTIVE => self.collective.arrived(m),
            _ => {
                if let Some(m) = take(m) {
                    self.ports.deliver(m);
                }
            }
        }
    }

    /// Runs `hook` with the failed rank at the first failure of any rank, this one included
    /// (at once if one failed already): what waits for another rank — an event a message
    /// would trigger — is poisoned there, so that the failure crosses ranks.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    ///
    /// let job = tactor::job::Job::builder().join().unwrap();
    /// let seen = Arc::new(AtomicUsize::new(usize::MAX));
    /// let s = seen.clone();
    /// job.on_failure(Box::new(move |rank| s.store(rank, Ordering::Relaxed)));
    /// job.tell_failure("gave up");
    /// assert_eq!(seen.load(Ordering::Relaxed), 0);
    /// ```
    pub fn on_failure(&self, hook: FailureHook) {
        self.add_hook(None, hook);
    }

    /// [`Job::on_failure`] for a part of the runtime that lives shorter than the job (an
    /// exchange, a program on ranks): `hook` runs with `owner` if it is still alive then, and
    /// is dropped once `owner` is gone, so that opening one after another leaves no hooks
    /// behind.
    pub(crate) fn on_failure_of<T: Send + Sync + 'static>(
        &self,
        owner: &Arc<T>,
        hook: impl FnOnce(&T, usize) + Send + 'static,
    ) {
        let (weak, alive) = (Arc::downgrade(owner), Arc::downgrade(owner));
        self.add_hook(
            Some(Box::new(move || alive.strong_count() > 0)),
            Box::new(move |rank| {
                if let Some(owner) = weak.upgrade() {
                    hook(&owner, rank);
                }
            }),
        );
    }

    fn add_hook(&self, alive: Option<Alive>, hook: FailureHook) {
        let mut hooks = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
        match self.failed_rank() {
            Some(rank) => {
                drop(hooks);
                hook(rank)
            }
            None => {
                hooks.retain(|(alive, _)| alive.as_ref().is_none_or(|a| a()));
                hooks.push((alive, hook));
            }
        }
    }

    /// Failure hooks held now (tests: those of owners that are gone are dropped).
    #[cfg(test)]
    pub(crate) fn hooks_held(&self) -> usize {
        self.hooks.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// `Err` naming the rank once some rank failed.
    pub fn check(&self) -> Result<(), JobError> {
        match self.failed_rank() {
            Some(rank) => Err(JobError::RankFailed { rank }),
            None => Ok(()),
        }
    }

    /// The rank that failed first, if one did (this one included).
    pub fn failed_rank(&self) -> Option<usize> {
        self.failed.load(Ordering::Acquire).checked_sub(1)
    }

    /// This rank failed with `cause` (one line): tells every other rank, whose next wait on
    /// the job returns [`JobError::RankFailed`], and prints one line for the job. Ranks that
    /// fail at about the same time (within [`SETTLE`]) agree on who prints: the lowest,
    /// `error: rank R: cause`, or just `error: cause` when every rank failed alike (bad
    /// input that every rank read). The caller then ends as it would have anyway (returning
    /// its error, dropping the job).
    pub fn fail(&self, cause: &str) {
        self.tell_failure(cause);
        let me = self.rank();
        let start = Instant::now();
        loop {
            let told = self.causes.lock().unwrap_or_else(|p| p.into_inner()).len();
            if told == self.ranks() || start.elapsed() >= SETTLE {
                break;
            }
            for ch in 0..self.channels() {
                self.progress_channel(ch, usize::MAX, &mut Some);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let causes = self
            .causes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let lowest = causes.keys().next().copied().unwrap_or(me);
        let alike = causes.len() == self.ranks() && causes.values().all(|c| c == cause);
        let line = if alike && me == 0 || self.ranks() == 1 {
            format!("error: {cause}")
        } else if !alike && lowest == me {
            format!("error: rank {me}: {cause}")
        } else {
            return;
        };
        say(&line);
        tactor_comm::launcher::said_why();
    }

    /// Records that rank `rank` failed with `cause`; at the first failure, runs the hooks.
    fn failed(&self, rank: usize, cause: String) {
        // Recorded first: the hooks may name it (`cause_of`).
        self.causes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(rank)
            .or_insert(cause);
        let first = self
            .failed
            .compare_exchange(0, rank + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if first {
            let hooks = std::mem::take(&mut *self.hooks.lock().unwrap_or_else(|p| p.into_inner()));
            for (_, h) in hooks {
                h(rank);
            }
        }
    }

    /// Why rank `rank` failed, if this rank was told.
    pub(crate) fn cause_of(&self, rank: usize) -> Option<String> {
        let causes = self.causes.lock().unwrap_or_else(|p| p.into_inner());
        causes.get(&rank).cloned()
    }

    /// [`Job::fail`] without printing (the caller printed the cause its own way).
    pub fn tell_failure(&self, cause: &str) {
        let me = self.rank();
        self.failed(me, cause.to_string());
        for dest in (0..self.ranks()).filter(|&r| r != me) {
            let _ = self
                .net
                .send(0, dest, PORT_FAIL, cause.as_bytes().to_vec(), None);
        }
        // The messages must leave before the process ends; a peer that is gone already
        // cannot take them, so the wait is bounded.
        let start = Instant::now();
        while self.net.in_flight(0) > 0 && start.elapsed() < Duration::from_secs(1) {
            self.net.progress(0);
            std::thread::yield_now();
        }
    }

    /// Prints `cause` for this rank and ends every rank of the job at once.
    fn die(&self, cause: &str) -> ! {
        say(&format!("error: rank {}: {cause}", self.rank()));
        self.net.abort(1)
    }

    /// Ends every rank of the job at once (through the launcher), with status 1.
    pub fn abort(&self) -> ! {
        self.net.abort(1)
    }
}

/// Writes `line` and a newline to stderr in one write: under `mpirun`, which forwards what
/// ranks write as it comes, another process's output could otherwise land inside the line.
fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
}

/// A panic on any thread of a rank ends the job: the other ranks could otherwise wait forever
/// for what the panicking thread would have sent.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        match JOINED.get().and_then(Weak::upgrade) {
            Some(job) => job.die(&format!("panicked: {what}{at}")),
            None => say(&format!("error: panicked: {what}{at}")),
        }
    }));
}

impl crate::Poller for Job {
    /// Routes what arrived on the worker's channel to the ports' handlers, while a port is
    /// open (otherwise nothing is expected and the network is left alone).
    fn poll(&self, worker: usize) -> bool {
        if self.one_thread || !self.ports.any_open() {
            return false;
        }
        self.progress_channel(worker % self.channels(), 64, &mut Some) > 0
    }

    fn expecting(&self) -> bool {
        !self.one_thread && self.ports.any_open()
    }
}
