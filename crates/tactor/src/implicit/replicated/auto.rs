//! Automatic tracing of a replicated program: the program's own calls (its launches and index
//! launches, the same on every rank) are what repeats, so the fragments are found here, above
//! the copies, and each runs as a trace of the replicated program — a script on every rank
//! ([`Replicated::begin_trace`]) — instead of each rank tracing only its own share while every
//! rank still books every point of the job. In a job of one the trace is the process's own,
//! where an index launch replays as one call instead of one launch per point.
//!
//! The detector is the one-process program's ([`Program::auto_trace`]), fed a hash of each
//! call: its task's type, its rank and placement (or its projection's type and number of
//! points) and the rank and accesses of every point, all of which every rank computes alike,
//! so every rank makes the same decisions. A predicted fragment's calls are held, not
//! issued, until the last one has come and matched: a script's replay sends and awaits copies
//! as each call is replayed, which cannot be taken back. The first call that does not match
//! issues the held ones one by one, untraced, in order (as does reading data back, making a
//! region or a constant, or opening a trace by hand), so results never change.
//!
//! [`Program::auto_trace`]: super::super::Program::auto_trace

use super::super::access::{Access, Declared, Mode};
use super::super::auto::{mix, Detector, Prediction};
use super::super::region::Constant;
use super::super::{signature, AutoStats, ConstRef};
use super::Replicated;
use crate::Placement;
use std::any::TypeId;

/// A call held in an open fragment: issues it (untraced, or inside the fragment's trace).
type Held = Box<dyn FnOnce(&mut Replicated) + Send>;

/// The replicated program's automatic tracing.
pub(super) struct Auto {
    detector: Detector,
    /// The fragment predicted to come next, with its calls held so far.
    open: Option<(Prediction, Vec<Held>)>,
    pub(super) stats: AutoStats,
}

/// The shortest fragment, in calls (whole periods of at least this many). Shorter than a
/// process's [`MIN_FRAGMENT`](crate::implicit::MIN_FRAGMENT): a fragment's calls are held
/// until it is whole, and what is held when the program ends (or reads data back) is issued
/// untraced, so long fragments leave long untraced tails; a script's replay costs little per
/// fragment besides. Measured on Task Bench's `auto` on 2 ranks (stencil, 1000 steps,
/// `-iter 256`): 64 calls −23 % against 256 (32: −15 %); in one process the stencil 64 −9 %
/// against 256, four graphs of `nearest` alike within 3 %. Under Miri, which interprets every
/// call, 16.
const FRAGMENT: usize = if cfg!(miri) { 16 } else { 64 };

impl Default for Auto {
    fn default() -> Auto {
        Auto {
            detector: Detector::with_min(FRAGMENT),
            open: None,
            stats: AutoStats::default(),
        }
    }
}

impl Replicated {
    /// Turns automatic tracing on or off ([`Program::auto_trace`] one level up). It finds the
    /// repeating fragments of the program's own calls (launches and index launches, hashed
    /// with every point's rank and accesses, so every rank decides alike) and runs each as a
    /// trace of this program ([`begin_trace`](Self::begin_trace)): its script replays, so a
    /// rank books only its own points and copies. A fragment's calls are held until it is
    /// whole; the first call that breaks it, and [`with`](Self::with), [`finish`](Self::finish),
    /// making a region or a constant, or a trace begun by hand, issue what is held, untraced
    /// and in order (a [`fence`](Self::fence) does not cover held calls). A held index launch
    /// projects its points again when issued: projections must give the same answer then, as
    /// a replay requires of them anyway. In a job of one the trace is the process's program's
    /// own (an index launch then replays as one call, not a launch per point).
    ///
    /// ```
    /// use tactor::implicit::{read, read_write, Replicated};
    /// use tactor::{job::Job, Runtime};
    ///
    /// let job = Job::launched().unwrap();
    /// let rt = job.runtime(Runtime::builder().workers(1).pin(false)).unwrap();
    /// let mut p = Replicated::new(&rt, &job);
    /// p.auto_trace(true);
    /// let (x, y) = (p.region(0, 0u64), p.region(0, 0u64));
    /// for _ in 0..1000 {
    ///     p.launch(0, read_write(&x), |x| *x += 1);
    ///     p.launch(0, (read(&x), read_write(&y)), |(x, y)| *y += *x);
    /// }
    /// assert_eq!(p.with(&y, |y| *y).unwrap(), 1000 * 1001 / 2);
    /// assert!(p.auto_stats().fragments > 0);
    /// ```
    ///
    /// [`Program::auto_trace`]: super::super::Program::auto_trace
    pub fn auto_trace(&mut self, on: bool) {
        if !on {
            self.flush_auto();
            self.auto = None;
        } else if self.auto.is_none() {
            self.auto = Some(Auto::default());
        }
    }

    /// What automatic tracing did so far ([`Program::auto_stats`]): the fragments of the
    /// program's calls that ran as traces of the replicated program.
    ///
    /// [`Program::auto_stats`]: super::super::Program::auto_stats
    pub fn auto_stats(&self) -> AutoStats {
        self.auto
            .as_ref()
            .map_or_else(AutoStats::default, |auto| auto.stats)
    }

    /// Whether automatic tracing takes the next call (it is on, no trace is open, and the call
    /// is not one it issues itself: it is out of the program while it does).
    pub(in crate::implicit) fn auto_takes(&self) -> bool {
        self.auto.is_some() && !self.traces.is_open() && !self.program.manual_trace_open()
    }

    /// Takes a call whose hash is `hash`: holds it in the open fragment if it matches it
    /// (running the fragment as a trace once whole), or issues it after whatever was held.
    fn auto_offer(&mut self, hash: u64, call: Held) {
        let mut auto = self.auto.take().expect("automatic tracing is on");
        if let Some((prediction, held)) = &mut auto.open {
            if prediction.expected[held.len()] == hash {
                held.push(call);
                auto.detector.observe(hash, false);
                if held.len() == prediction.expected.len() {
                    // The prediction holds until a call breaks it: the next fragment opens
                    // at once.
                    let (id, calls) = (prediction.id, std::mem::take(held));
                    let recorded = self.run_fragment(id, calls);
                    auto.stats.fragments += 1;
                    auto.stats.recorded += u64::from(recorded);
                }
                self.auto = Some(auto);
                return;
            }
            self.issue_held(&mut auto);
        }
        call(self);
        if let Some(prediction) = auto.detector.observe(hash, true) {
            let n = prediction.expected.len();
            auto.open = Some((prediction, Vec::with_capacity(n)));
        }
        self.auto = Some(auto);
    }

    /// Issues the calls an open fragment holds, untraced, and closes it.
    pub(super) fn flush_auto(&mut self) {
        if let Some(mut auto) = self.auto.take() {
            self.issue_held(&mut auto);
            self.auto = Some(auto);
        }
    }

    fn issue_held(&mut self, auto: &mut Auto) {
        if let Some((_, held)) = auto.open.take() {
            auto.stats.fell_back += held.len() as u64;
            for call in held {
                call(self);
            }
        }
    }

    /// Runs a whole fragment's calls as trace `id`; returns whether this was its recording.
    fn run_fragment(&mut self, id: u64, calls: Vec<Held>) -> bool {
        self.begin_trace(id)
            .expect("no trace is open while automatic tracing holds a fragment");
        let recording = match self.job.ranks() {
            1 => self.program.traces.is_recording(),
            _ => self.traces.is_recording(),
        };
        for call in calls {
            call(self);
        }
        match self.end_trace() {
            Ok(done) => self.program.push_loose(done),
            // Every call matched the prediction, point by point: only a hash collision or a
            // rank whose own launches left its recording gets here, and the job is told.
            Err(e) => panic!("automatic tracing replayed a fragment that differs: {e}"),
        }
        recording
    }

    /// Takes a launch of `task` on `rank` at `at` (see [`auto_offer`](Self::auto_offer)),
    /// hashed by its task's type, rank, placement and accesses.
    pub(super) fn offer_launch<A, F>(&mut self, rank: usize, at: Placement, access: A, task: F)
    where
        A: Access,
        F: for<'a> FnOnce(A::Ref<'a>) + Send + 'static,
    {
        let mut declared = std::mem::take(&mut self.declared);
        declared.clear();
        access.declare(&mut declared);
        let hash = launch_hash(TypeId::of::<F>(), rank, at, &declared);
        self.declared = declared;
        let call = move |p: &mut Replicated| p.launch_at(rank, at, access, task);
        self.auto_offer(hash, Box::new(call));
    }

    /// Takes an index launch (see [`auto_offer`](Self::auto_offer)), hashed by its task's and
    /// projection's types, its constant, and each point's rank and accesses.
    pub(in crate::implicit) fn offer_index<S, X, A, P, F>(
        &mut self,
        points: u32,
        shared: &Constant<S>,
        arg: X,
        project: P,
        task: F,
    ) where
        S: Send + Sync + 'static,
        X: Copy + Send + Sync + 'static,
        A: Access,
        P: Fn(ConstRef<'_, S>, X, u32) -> (usize, A) + Send + Sync + 'static,
        F: for<'a> Fn(&S, X, u32, A::Ref<'a>) + Send + Sync + 'static,
    {
        let mut declared = std::mem::take(&mut self.declared);
        let start = [Declared {
            region: shared.0.key,
            mode: Mode::Constant,
        }];
        let mut hash = mix(
            signature(TypeId::of::<F>(), Placement::Any, &start, false),
            u64::from(points),
        );
        for i in 0..points {
            declared.clear();
            let (rank, access) = project(self.constant_ref(shared), arg, i);
            access.declare(&mut declared);
            let point = launch_hash(TypeId::of::<P>(), rank, Placement::Any, &declared);
            hash = mix(hash, point);
        }
        self.declared = declared;
        let shared = shared.clone();
        let call = move |p: &mut Replicated| p.index_launch(points, &shared, arg, project, task);
        self.auto_offer(hash, Box::new(call));
    }
}

/// The hash automatic tracing compares a launch (or an index launch's point) by.
fn launch_hash(task: TypeId, rank: usize, at: Placement, declared: &[Declared]) -> u64 {
    mix(signature(task, at, declared, false), rank as u64)
}

impl Drop for Replicated {
    /// Issues what automatic tracing holds, as [`finish`](Replicated::finish) would: every
    /// launch made runs (not while unwinding, when the program's calls stop where they are).
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.flush_auto();
        }
    }
}
