//! Implicit programs over the ranks of a job, by control replication: every rank runs the
//! same program and issues the same launches; each launch runs on the rank that owns the
//! worker it names, and the runtime inserts the copies its declared accesses need
//! ([`Replicated`]).

mod auto;
mod copies;
mod script;
#[cfg(test)]
mod tests;

use super::access::{Access, Declared, Mode};
use super::region::{Constant, OpId, Region};
use super::{Program, TraceError};
use crate::job::{Job, OpenPort, Wire};
use crate::{Event, Handle, Placement, TaskFailed};
use copies::{dest, Copies, Inbox, Typed, HEADER, PORT};
use script::Op;
pub(super) use script::{sending, Sends, Sig, Step};
use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

/// What a rank records of one region.
struct Shard {
    /// Per rank, whether its copy is the latest version.
    holds: Vec<bool>,
    /// The latest version: counts the writes, the same on every rank.
    version: u64,
    /// The rank, and where on it, that wrote it (or the first holder).
    home: (usize, Placement),
    /// The reduction group open on it, if one is.
    group: Option<Group>,
    /// How this region's copies are launched (its type is known only here).
    copies: Box<dyn Copies>,
    /// Ranks, other than its writer's, that read its last versions: the task that writes the
    /// next version sends it to them as it ends, with no task of its own (an eager copy).
    followers: Vec<usize>,
    /// The ranks the latest version was sent to eagerly.
    eager: Vec<usize>,
    /// On one of those: where the eager copy of the latest version arrives, until a task
    /// here reads it.
    coming: Option<Arc<copies::Landing>>,
    /// The last index launch that touched it (its number), the point, and whether a point
    /// wrote it: how an index launch finds points that conflict.
    touched: (u64, u32, bool),
    /// While a trace's script replays: how far this execution's versions are past the
    /// recording's (what its keys move on by).
    shift: u64,
}

/// A reduction group whose tasks may run on several ranks: each rank that reduces keeps a
/// partial result, and the partials are exchanged and folded when the group closes (the
/// next access of another kind, or `with`), so every rank that reduced then holds the total
/// (an all-reduce done by the runtime).
struct Group {
    op: OpId,
    /// The operator's `Partials` for the region's type, boxed.
    partials: Option<Box<dyn Any + Send>>,
    /// Per rank, where its partial result is kept, if it has one (the rank that held the
    /// value when the group opened always has one: the value itself).
    keeps: Vec<Option<Placement>>,
}

/// An implicit [`Program`] replicated over the ranks of a [`Job`] (control replication):
/// every rank runs the same program and issues the same launches; each launch runs on the
/// rank that owns the worker it names, and the runtime inserts the copies its declared
/// accesses need.
///
/// Every rank keeps, for every region, which ranks hold its latest version (the same record
/// on every rank, since all see the same launches). A launch that reads a region its rank
/// does not hold gets a copy first: the rank that wrote the latest version launches a task
/// that reads it and sends its bytes ([`Wire`]), and the reading rank launches, after the
/// message's arrival (an outside event: `Program::launch_after`), a task that writes them
/// into its replica. Both are ordinary launches of each rank's own [`Program`], so the
/// dependence analysis orders them, traces record them (a cross-rank edge is an external
/// condition of the fragment), and a write to the replica waits for its earlier readers.
/// A launch that writes a region makes its rank the only holder of the new version.
///
/// Reductions may run on several ranks: each rank that reduces keeps a partial result
/// (started from the operator's identity, [`Reduction::partials`](super::Reduction::partials)), and the next access of
/// another kind exchanges the partials and folds them, in rank order, on every rank that
/// reduced — an all-reduce, one message per pair of those ranks.
///
/// ```
/// use tactor::implicit::{read, read_write, Replicated};
/// use tactor::{job::Job, Runtime};
///
/// let job = Job::launched().unwrap(); // a job of one here; under mpirun, the launcher's
/// let rt = job.runtime(Runtime::builder().workers(2).pin(false)).unwrap();
/// let mut p = Replicated::new(&rt, &job);
/// let n = p.workers(); // every worker of the job
/// let parts: Vec<_> = (0..n).map(|w| p.region(w, vec![w as u64; 4])).collect();
/// let total = p.region(0, 0u64);
/// for (w, part) in parts.iter().enumerate() {
///     p.launch(w, read_write(part), |v| v.iter_mut().for_each(|x| *x += 1));
/// }
/// // Reads every part where `total` is kept: the parts of other ranks are copied there.
/// p.launch(0, (parts.iter().map(read).collect::<Vec<_>>(), read_write(&total)), |(ins, t)| {
///     *t = ins.iter().map(|v| v.iter().sum::<u64>()).sum();
/// });
/// let expect: u64 = (0..n as u64).map(|w| 4 * (w + 1)).sum();
/// assert_eq!(p.with(&total, |t| *t).unwrap(), expect);
/// ```
pub struct Replicated {
    pub(super) program: Program,
    job: Arc<Job>,
    /// Workers per rank (every rank runs as many).
    local: usize,
    shards: Vec<Option<Shard>>,
    inbox: Arc<Inbox>,
    pub(super) declared: Vec<Declared>,
    /// Copies this rank took part in (sent or received).
    copies: u64,
    /// Copies this rank sent.
    sent: i64,
    /// Regions whose reduction group may be open (some may have closed since).
    open: Vec<u32>,
    /// Index launches over several ranks so far.
    index_launches: u64,
    /// The traces, and the one open.
    pub(super) traces: script::Traces,
    /// Automatic tracing of the program's calls, while on.
    auto: Option<auto::Auto>,
    _port: OpenPort,
}

impl Replicated {
    /// A program over `job`'s ranks whose tasks run on `handle`'s runtime (one of the same
    /// size on every rank, started by [`Job::runtime`] so that idle workers progress the
    /// network). Every rank makes it, in the same order as its other replicated programs.
    ///
    /// # Panics
    /// If another replicated program of this process is still alive.
    pub fn new(handle: &Handle, job: &Arc<Job>) -> Replicated {
        let inbox = Arc::new(Inbox::default());
        let deliver = inbox.clone();
        let port = job
            .open_reserved(
                PORT,
                Arc::new(move |m| {
                    if m.data.len() < HEADER {
                        let (from, n) = (m.source, m.data.len());
                        let why = format!(
                            "rank {from} sent a copy of {n} bytes, shorter than its header"
                        );
                        return deliver.0.poison(&why);
                    }
                    let word = |at: usize, n: usize| {
                        let mut b = [0u8; 8];
                        b[..n].copy_from_slice(&m.data[at..at + n]);
                        u64::from_le_bytes(b)
                    };
                    let key = (word(0, 4) as u32, word(4, 8), word(12, 4) as u32);
                    // Whole: the receive reads the payload after the header in place.
                    deliver.0.arrive(key, Cow::Owned(m.data));
                }),
            )
            .expect("one replicated program at a time in a process");
        // The copies still awaited say why (the job holds its hooks: a weak reference).
        let told = Arc::downgrade(job);
        job.on_failure_of(&inbox, move |inbox, rank| {
            let cause = told.upgrade().and_then(|job| job.cause_of(rank));
            let why = match cause {
                Some(cause) if !cause.is_empty() => format!("rank {rank} failed: {cause}"),
                _ => format!("rank {rank} failed"),
            };
            inbox.0.poison(&why)
        });
        let mut program = Program::new(handle);
        let tell = job.clone();
        program.on_mismatch = Some(Arc::new(move |why: &str| tell.tell_failure(why)));
        Replicated {
            program,
            job: job.clone(),
            local: handle.workers(),
            shards: Vec::new(),
            inbox,
            declared: Vec::new(),
            copies: 0,
            sent: 0,
            open: Vec::new(),
            index_launches: 0,
            traces: script::Traces::default(),
            auto: None,
            _port: port,
        }
    }

    /// Workers of the whole job: what [`Replicated::launch`] names (worker `w` is worker
    /// `w % W` of rank `w / W`, with `W` workers per rank).
    pub fn workers(&self) -> usize {
        self.local * self.job.ranks()
    }

    /// The job's rank that runs worker `worker`.
    pub fn rank_of(&self, worker: usize) -> usize {
        worker / self.local
    }

    /// A region holding `value`, homed at job-wide worker `worker` (the source of its first
    /// copies). Every rank makes it, with the same value, so every rank holds it until it is
    /// first written.
    pub fn region<T: Wire>(&mut self, worker: usize, value: T) -> Region<T> {
        self.flush_auto();
        let r = self.program.region(value);
        let at = r.index() as usize;
        if self.shards.len() <= at {
            self.shards.resize_with(at + 1, || None);
        }
        self.shards[at] = Some(Shard {
            holds: vec![true; self.job.ranks()],
            version: 0,
            home: (self.rank_of(worker), Placement::Worker(worker % self.local)),
            group: None,
            copies: Box::new(Typed(r.clone())),
            touched: (0, 0, false),
            followers: Vec::new(),
            eager: Vec::new(),
            coming: None,
            shift: 0,
        });
        // A script replays on regions it knows by index: one that makes regions cannot.
        self.traces.unplayable();
        r
    }

    /// A constant holding `value` ([`Program::constant`]): what the points of an
    /// [`index_launch`](Replicated::index_launch) share. Every rank makes it, with the same
    /// value (each reads its own).
    pub fn constant<T: Send + Sync + 'static>(&mut self, value: T) -> Constant<T> {
        self.flush_auto();
        self.program.constant(value)
    }

    /// Launches `task` on job-wide worker `worker` (on the rank that owns it; the others
    /// only record what it does), after the copies its reads need.
    ///
    /// # Panics
    /// If `worker` is not a worker of the job, on a reduction whose tasks run on several
    /// ranks with an operator without [`Partials`](super::Partials), or as [`Program::launch`].
    #[track_caller]
    pub fn launch<A, F>(&mut self, worker: usize, access: A, task: F)
    where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
    {
        assert!(
            worker < self.workers(),
            "worker {worker} is not one of the job's {} workers",
            self.workers()
        );
        let (rank, at) = (self.rank_of(worker), Placement::Worker(worker % self.local));
        self.launch_at(rank, at, access, task);
    }

    /// Launches `task` on rank `rank`, on whichever of its workers is free first (as
    /// [`Placement::Any`] places a task of one process); the others only record what it does.
    /// What [`Replicated::launch`] does otherwise: for programs whose tasks need not stay on
    /// one worker, so that a rank's workers balance its share among themselves.
    ///
    /// ```
    /// use tactor::implicit::{read, write, Replicated};
    /// use tactor::{job::Job, Runtime};
    ///
    /// let job = Job::launched().unwrap();
    /// let rt = job.runtime(Runtime::builder().workers(2).pin(false)).unwrap();
    /// let mut p = Replicated::new(&rt, &job);
    /// let a = p.region(0, 20u64);
    /// let b = p.region(0, 0u64);
    /// let last = job.ranks() - 1;
    /// p.launch_on_rank(last, (read(&a), write(&b)), |(a, b)| *b = a + 22);
    /// assert_eq!(p.with(&b, |b| *b).unwrap(), 42);
    /// ```
    ///
    /// # Panics
    /// If `rank` is not a rank of the job, or as [`Replicated::launch`].
    #[track_caller]
    pub fn launch_on_rank<A, F>(&mut self, rank: usize, access: A, task: F)
    where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
    {
        let ranks = self.job.ranks();
        assert!(
            rank < ranks,
            "rank {rank} is not one of the job's {ranks} ranks"
        );
        self.launch_at(rank, Placement::Any, access, task);
    }

    /// Launches `task` at `at` on `rank`, after the copies its reads need.
    #[track_caller]
    fn launch_at<A, F>(&mut self, rank: usize, at: Placement, access: A, task: F)
    where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
    {
        if self.auto_takes() {
            return self.offer_launch(rank, at, access, task);
        }
        let sig = Sig::Launch {
            task: std::any::TypeId::of::<F>(),
            rank,
            at,
        };
        let sends = match self.step(sig, std::any::type_name::<F>()) {
            Step::Skip => return,
            Step::Play(_, mut sends) => sends.pop().flatten(),
            Step::Full => {
                let mut declared = std::mem::take(&mut self.declared);
                declared.clear();
                access.declare(&mut declared);
                self.touch(&declared);
                self.prepare(&declared, rank, at);
                let sends = self.eager(&declared, rank, 0);
                self.settle(&declared, rank, at);
                self.declared = declared;
                sends
            }
        };
        if rank == self.job.rank() {
            // Sent from the task's job once the task is done with its references.
            self.program
                .launch_then(at, access, task, script::sending(sends));
        }
    }

    /// What a launch with accesses `declared` on `rank` needs before it: the copies its reads
    /// need, its rank's part in the groups it reduces to.
    pub(super) fn prepare(&mut self, declared: &[Declared], rank: usize, at: Placement) {
        for d in declared {
            match d.mode {
                Mode::Read | Mode::ReadWrite => {
                    self.close(d.region.index);
                    self.bring(d.region.index, rank, at);
                }
                Mode::Reduce(op) => self.reduce(d.region.index, op, rank, at),
                // A write replaces whatever partial results a group left.
                Mode::Write => self.shard(d.region.index).group = None,
                Mode::Constant => {}
            }
        }
    }

    /// Plans the eager copies of the versions that a launch on `rank` with accesses
    /// `declared` writes, the same on every rank: each goes to the region's followers (a rank
    /// that was sent the last version eagerly but did not read it stops following). On `rank`,
    /// returns what the launch's task runs as it ends (the sends); on a follower, expects the
    /// copy. Called between [`prepare`](Self::prepare) and [`settle`](Self::settle).
    pub(super) fn eager(
        &mut self,
        declared: &[Declared],
        rank: usize,
        point: u32,
    ) -> Option<script::Sends> {
        let me = self.job.rank();
        let mut sends = None;
        for d in declared {
            if !matches!(d.mode, Mode::Write | Mode::ReadWrite) {
                continue;
            }
            let region = d.region.index;
            let shard = shard_in(&mut self.shards, region);
            let Shard {
                followers,
                eager,
                holds,
                ..
            } = shard;
            followers.retain(|&k| holds[k] || !eager.contains(&k));
            let coming = shard.coming.is_some();
            shard.eager.clear();
            (shard.eager).extend(shard.followers.iter().filter(|&&k| k != rank));
            let key = (region, shard.version + 1, rank as u32);
            // Built only where the sends are (every rank books every point).
            let to: Option<Vec<_>> = (me == rank && !shard.eager.is_empty())
                .then(|| shard.eager.iter().map(|&k| (k, key)).collect());
            let expect = shard.eager.contains(&me);
            if coming {
                self.act(Op::ClearComing { region });
            }
            if let Some(to) = to {
                self.copies += to.len() as u64;
                if let Some(send) = self.act(Op::Eager { point, region, to }) {
                    sends = Some(script::chain(sends, send));
                }
            } else if expect {
                self.copies += 1;
                self.act(Op::Expect { region, key });
            }
        }
        sends
    }

    /// What a launch with accesses `declared` on `rank` leaves: the only holder of the
    /// regions it writes.
    pub(super) fn settle(&mut self, declared: &[Declared], rank: usize, at: Placement) {
        for d in declared {
            if matches!(d.mode, Mode::Write | Mode::ReadWrite) {
                let shard = self.shard(d.region.index);
                shard.version += 1;
                shard.holds.iter_mut().for_each(|h| *h = false);
                shard.holds[rank] = true;
                shard.home = (rank, at);
            }
        }
    }

    fn shard(&mut self, region: u32) -> &mut Shard {
        shard_in(&mut self.shards, region)
    }

    /// Adds a reduction on `rank` (its worker `local`) to `region`'s group, opening one (or
    /// closing one of another operator first): a rank's first reducing task of the group
    /// starts from the identity, unless the rank held the value.
    fn reduce(&mut self, region: u32, op: OpId, rank: usize, at: Placement) {
        self.traces.unplayable();
        if self
            .shard(region)
            .group
            .as_ref()
            .is_some_and(|g| g.op != op)
        {
            self.close(region);
        }
        let me = self.job.rank();
        let ranks = self.job.ranks();
        let shard = shard_in(&mut self.shards, region);
        if shard.group.is_none() {
            self.open.push(region);
        }
        let group = shard.group.get_or_insert_with(|| {
            let mut keeps = vec![None; ranks];
            keeps[shard.home.0] = Some(shard.home.1);
            // The partials are a version of their own: no copy of the value before the group
            // is mistaken for one of them.
            shard.version += 1;
            shard.eager.clear();
            shard.coming = None;
            Group {
                op,
                partials: (op.partials)(),
                keeps,
            }
        });
        if group.keeps[rank].is_some() {
            return;
        }
        group.keeps[rank] = Some(at);
        let partials = group.partials.as_deref().unwrap_or_else(|| {
            panic!(
                "the reduction {} runs on several ranks but has no Reduction::partials",
                op.name
            )
        });
        if rank == me {
            shard.copies.reset(&mut self.program, at, partials);
        }
    }

    /// Closes every reduction group still open.
    pub(super) fn close_all(&mut self) {
        while let Some(region) = self.open.pop() {
            self.close(region);
        }
    }

    /// Whether point `point` of the index launch under way, with accesses `declared`, writes
    /// a region another of its points accesses, or accesses one another wrote (each point's
    /// accesses in turn; `first` for the launch's first point).
    pub(super) fn conflicts(&mut self, point: u32, declared: &[Declared], first: bool) -> bool {
        if first {
            self.index_launches += 1;
        }
        let now = self.index_launches;
        let mut conflict = false;
        for d in declared
            .iter()
            .filter(|d| !matches!(d.mode, Mode::Constant))
        {
            let write = !matches!(d.mode, Mode::Read);
            let t = &mut self.shard(d.region.index).touched;
            if t.0 == now && t.1 != point {
                conflict |= write || t.2;
            } else if t.0 != now {
                *t = (now, point, false);
            }
            t.2 |= write;
        }
        conflict
    }

    /// The job the program is replicated over.
    pub(super) fn job(&self) -> &Arc<Job> {
        &self.job
    }

    /// Closes `region`'s reduction group, if one is open: every rank that keeps a partial
    /// sends it to the others and folds them all, in rank order, once they arrived.
    fn close(&mut self, region: u32) {
        if self.shard(region).group.is_none() {
            return;
        }
        // A script does not replay reductions over ranks.
        self.traces.unplayable();
        let me = self.job.rank();
        let shard = shard_in(&mut self.shards, region);
        let Some(group) = shard.group.take() else {
            return;
        };
        // A version of the group's: no eager copy of an earlier one stands for it.
        shard.eager.clear();
        shard.coming = None;
        let holders: Vec<usize> = (0..group.keeps.len())
            .filter(|&r| group.keeps[r].is_some())
            .collect();
        shard.holds = group.keeps.iter().map(Option::is_some).collect();
        let first = holders[0];
        shard.home = (first, group.keeps[first].unwrap_or(Placement::Worker(0)));
        let version = shard.version;
        shard.version += 1;
        let Some(mine) = group.keeps[me] else {
            return;
        };
        if holders.len() == 1 {
            return;
        }
        // Cloned only past the returns: this runs for every read, and the job's count is a
        // line other threads touch.
        let (job, inbox) = (self.job.clone(), self.inbox.clone());
        let partials = group
            .partials
            .as_deref()
            .expect("a group on several ranks has partials");
        let mut parts = Vec::with_capacity(holders.len());
        let mut arrivals = Vec::with_capacity(holders.len());
        for &r in &holders {
            if r == me {
                parts.push(None);
                continue;
            }
            self.copies += 2;
            let key = (region, version, me as u32);
            let to = dest(&self.job, &mut self.sent, r, key);
            shard.copies.send(&mut self.program, mine, &job, to);
            let landing = inbox.expect((region, version, r as u32));
            arrivals.push(landing.arrival());
            parts.push(Some(landing));
        }
        shard.copies.fold(
            &mut self.program,
            mine,
            Event::merge(&arrivals),
            parts,
            partials,
        );
    }

    /// Makes `rank` hold the latest version of `region`, copying it there from its home (to
    /// `at`, where the task that will read it runs) if it does not.
    fn bring(&mut self, region: u32, rank: usize, at: Placement) {
        let me = self.job.rank();
        let shard = shard_in(&mut self.shards, region);
        if shard.holds[rank] {
            return;
        }
        shard.holds[rank] = true;
        let (home, home_at) = shard.home;
        if shard.eager.contains(&rank) {
            // The version's writer sent it as it ended.
            if me == rank {
                self.act(Op::ReceiveComing { region, at });
            }
            return;
        }
        if rank != home && !shard.followers.contains(&rank) {
            shard.followers.push(rank);
        }
        let key = (region, shard.version, home as u32);
        if me == home {
            self.copies += 1;
            let to = (rank, key);
            self.act(Op::Send {
                region,
                at: home_at,
                to,
            });
        } else if me == rank {
            self.copies += 1;
            self.act(Op::Receive { region, at, key });
        }
    }

    /// Waits until `region`'s latest version is final and held here, then calls `f` on it.
    /// Collective: every rank calls it (each gets the value; the ranks that do not hold it
    /// get a copy).
    ///
    /// # Panics
    /// Inside a trace.
    pub fn with<T, R>(
        &mut self,
        region: &Region<T>,
        f: impl FnOnce(&T) -> R,
    ) -> Result<R, TaskFailed> {
        assert!(!self.traces.is_open(), "Replicated::with inside a trace");
        self.flush_auto();
        self.close(region.index());
        for rank in 0..self.job.ranks() {
            self.bring(region.index(), rank, Placement::Worker(0));
        }
        self.program.with(region, f)
    }

    /// Starts recording (or replaying) trace `id` (see [`Program::begin_trace`]): each rank
    /// traces its own share, the copies' arrivals as outside events.
    ///
    /// On several ranks a trace also records what its launches did to the record every rank
    /// keeps of the regions (who holds which version) and which copies this rank sent and
    /// received. A replay that starts from the record the recording started from replays
    /// that: each rank projects only its own points, on the workers that run them, and
    /// launches only its own copies. The copies a trace needs depend on where its regions'
    /// versions are as it starts (the first execution of a stencil's trace fetches its
    /// copies, the next ones receive them eagerly as their writers end), so each starting
    /// record of a trace id gets a recording of its own. Traces that reduce over ranks, start
    /// on an open reduction group or make regions are replayed with every rank booking every
    /// launch.
    ///
    /// ```
    /// use tactor::implicit::{read, read_write, Replicated};
    /// use tactor::{job::Job, Runtime};
    ///
    /// let job = Job::launched().unwrap(); // a job of one here; under mpirun, the launcher's
    /// let rt = job.runtime(Runtime::builder().workers(2).pin(false)).unwrap();
    /// let mut p = Replicated::new(&rt, &job);
    /// let last = p.workers() - 1;
    /// let (x, y) = (p.region(0, 1u64), p.region(last, 0u64));
    /// for _ in 0..10 {
    ///     p.begin_trace(7).unwrap();
    ///     p.launch(0, read_write(&x), |x| *x *= 2);
    ///     p.launch(last, (read(&x), read_write(&y)), |(x, y)| *y += *x);
    ///     p.end_trace().unwrap();
    /// }
    /// assert_eq!(p.with(&y, |y| *y).unwrap(), 2046);
    /// ```
    pub fn begin_trace(&mut self, id: u64) -> Result<(), TraceError> {
        self.flush_auto();
        if self.job.ranks() == 1 {
            return self.program.begin_trace(id);
        }
        self.begin_script(id)
    }

    /// Ends the trace: see [`Program::end_trace`]. A replay that differs from its recording
    /// is an error and none of its tasks run; where only one rank's launches differ, the job
    /// is told that rank failed.
    pub fn end_trace(&mut self) -> Result<Event, TraceError> {
        if self.job.ranks() == 1 {
            return self.program.end_trace();
        }
        self.end_script()
    }

    /// An event that triggers once every task this rank launched so far has run (see
    /// [`Program::fence`]): what a program that issues far ahead waits behind, to keep the
    /// tasks in flight (and their memory) bounded.
    ///
    /// ```
    /// use tactor::implicit::{read_write, Replicated};
    /// use tactor::{job::Job, Runtime};
    ///
    /// let job = Job::launched().unwrap();
    /// let rt = job.runtime(Runtime::builder().workers(1).pin(false)).unwrap();
    /// let mut p = Replicated::new(&rt, &job);
    /// let x = p.region(0, 0u64);
    /// let mut fences = std::collections::VecDeque::new();
    /// for step in 0..100 {
    ///     p.launch(0, read_write(&x), |x| *x += 1);
    ///     if step % 10 == 9 {
    ///         fences.push_back(p.fence());
    ///         if fences.len() > 2 {
    ///             fences.pop_front().unwrap().wait().unwrap();
    ///         }
    ///     }
    /// }
    /// assert_eq!(p.with(&x, |x| *x).unwrap(), 100);
    /// ```
    pub fn fence(&mut self) -> Event {
        self.program.fence()
    }

    /// Waits for every task this rank launched (a fragment automatic tracing holds is
    /// issued first); the first failure, if one failed.
    pub fn finish(&mut self) -> Result<(), TaskFailed> {
        self.flush_auto();
        self.program.finish()
    }

    /// Copies this rank sent or received so far.
    pub fn copies(&self) -> u64 {
        self.copies
    }

    /// Executions of traces that this rank replayed from their script, projecting only its
    /// own points (see [`begin_trace`](Self::begin_trace)).
    pub fn script_replays(&self) -> u64 {
        self.traces.replays
    }

    /// This rank's program (its own launches, statistics).
    pub fn local(&self) -> &Program {
        &self.program
    }
}

/// What `shards` records of `region` (a borrow of the records alone, beside the program's
/// other fields).
fn shard_in(shards: &mut [Option<Shard>], region: u32) -> &mut Shard {
    (shards.get_mut(region as usize))
        .and_then(Option::as_mut)
        .expect("a region of this replicated program")
}
