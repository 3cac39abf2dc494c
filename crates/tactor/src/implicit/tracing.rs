//! A program's traces: manual ones (`begin_trace`/`end_trace`), recorded at their first
//! run and replayed after that, and automatic tracing (`auto_trace`), which finds the
//! repeating fragments itself.

use super::*;

impl Program {
    /// Begins trace `id`: the launches until [`end_trace`](Self::end_trace) are recorded, or
    /// matched against the recording if `id` was traced before.
    pub fn begin_trace(&mut self, id: u64) -> Result<(), TraceError> {
        self.flush_auto();
        self.traces.begin(id)
    }

    /// Ends the open trace and runs its fragment: compiled at its first execution, replayed
    /// later. A replay that differs from the recording is an error, and none of its tasks
    /// run.
    ///
    /// Returns the event of this execution: it triggers once every task of the fragment has
    /// finished (poisoned if one failed), whatever ran before or after it. It costs nothing
    /// to take, unlike a [`fence`](Self::fence), which covers the whole program: a driver
    /// that keeps a few executions in flight waits for the one before last with it.
    ///
    /// ```
    /// use tactor::implicit::{read_write, Program};
    /// use tactor::{Placement, Runtime};
    ///
    /// let rt = Runtime::new(2).unwrap();
    /// let mut p = Program::new(&rt);
    /// let x = p.region(0u64);
    /// for _ in 0..3 {
    ///     p.begin_trace(7).unwrap();
    ///     p.launch(Placement::Any, read_write(&x), |x| *x += 1);
    ///     let done = p.end_trace().unwrap();
    ///     done.wait().unwrap();
    /// }
    /// assert_eq!(p.with(&x, |x| *x).unwrap(), 3);
    /// ```
    pub fn end_trace(&mut self) -> Result<Event, TraceError> {
        let handle = self.handle.clone();
        let instance = self.traces.end(&handle, &mut self.regions, &self.cells)?;
        self.push_loose(instance.clone());
        Ok(instance)
    }

    /// [`begin_trace`](Self::begin_trace) of this program's trace `id`, whose replays' errors
    /// name trace `shown` (what a replicated program's user called it).
    pub(super) fn begin_trace_as(&mut self, id: u64, shown: u64) -> Result<(), TraceError> {
        self.flush_auto();
        self.traces.begin_as(id, shown)
    }

    /// Closes the open trace without running its launches (a replicated program whose replay
    /// failed on every rank; a rank's own launches may all have matched).
    pub(super) fn discard_trace(&mut self) {
        self.traces.discard();
    }

    /// Runs `body` as trace `id` ([`begin_trace`](Self::begin_trace), the body,
    /// [`end_trace`](Self::end_trace)).
    pub fn trace<R>(
        &mut self,
        id: u64,
        body: impl FnOnce(&mut Program) -> R,
    ) -> Result<R, TraceError> {
        self.begin_trace(id)?;
        let r = body(self);
        self.end_trace()?;
        Ok(r)
    }

    /// How many traces have been recorded.
    pub fn recorded_traces(&self) -> usize {
        self.traces.recorded()
    }

    /// Whether a trace the program opened itself (not automatic tracing's fragment) is open.
    pub(super) fn manual_trace_open(&self) -> bool {
        self.traces.is_open() && self.auto.as_ref().is_none_or(|a| a.open.is_none())
    }

    /// Analyses one launch and hands it to the task engine, the task also waiting for `after`
    /// if given.
    pub(super) fn analyse_after(
        &mut self,
        placement: Placement,
        declared: &[Declared],
        job: impl FnOnce() + Send + 'static,
        after: Option<&Event>,
    ) {
        let mut deps = std::mem::take(&mut self.deps);
        deps.clear();
        deps.extend(after.cloned());
        for d in declared {
            let versions = &mut self.regions[d.region.index as usize];
            versions.compact(d.mode);
            versions.dependences(d.mode, &mut deps);
        }
        let done = self.handle.launch_job(placement, &deps, job, None, None);
        self.deps = deps;
        self.record(declared, done);
    }

    /// A launch with automatic tracing on (and no trace of the program's own open).
    #[track_caller]
    pub(super) fn launch_auto(
        &mut self,
        kind: trace::TaskKind,
        placement: Placement,
        declared: &[Declared],
        mut job: impl FnOnce() + Send + 'static,
        after: Option<&Event>,
    ) {
        let hash = signature(kind.id, placement, declared, after.is_some());
        let auto = self.auto.as_mut().expect("automatic tracing is on");
        if let Some((prediction, at)) = &mut auto.open {
            let offered = if prediction.expected[*at] == hash {
                let program = self.id;
                self.traces
                    .offer(kind, placement, declared, job, |d| check(program, d), after)
            } else {
                Err(job)
            };
            match offered {
                Ok(()) => {
                    *at += 1;
                    let whole = *at == prediction.expected.len();
                    auto.detector.observe(hash, false);
                    if whole {
                        let recording = self.traces.is_recording();
                        self.end_auto_fragment();
                        let auto = self.auto.as_mut().expect("on");
                        auto.stats.fragments += 1;
                        auto.stats.recorded += u64::from(recording);
                        // The prediction holds until a launch breaks it: the next fragment
                        // opens.
                        let (prediction, at) = auto.open.as_mut().expect("still open");
                        *at = 0;
                        let id = prediction.id;
                        self.traces.begin(id).expect("no trace is open");
                    }
                    return;
                }
                Err(back) => job = back,
            }
            self.flush_auto();
        }
        check(self.id, declared);
        self.analyse_after(placement, declared, job, after);
        let auto = self.auto.as_mut().expect("automatic tracing is on");
        if let Some(prediction) = auto.detector.observe(hash, true) {
            self.traces.begin(prediction.id).expect("no trace is open");
            auto.open = Some((prediction, 0));
        }
    }

    /// Ends the open automatic fragment's trace and runs it.
    pub(super) fn end_auto_fragment(&mut self) {
        let handle = self.handle.clone();
        let done = self
            .traces
            .end(&handle, &mut self.regions, &self.cells)
            .expect("a fragment whose launches all matched compiles and runs");
        self.push_loose(done);
    }

    /// Closes an open automatic fragment early: a recording runs as far as it got (it is
    /// the analysis of what was launched) but is not kept; a replay's launches are analysed
    /// one by one.
    pub(super) fn flush_auto(&mut self) {
        let Some(auto) = self.auto.as_mut() else {
            return;
        };
        let Some((prediction, _)) = auto.open.take() else {
            return;
        };
        if self.traces.is_recording() {
            self.end_auto_fragment();
            self.traces.forget(prediction.id);
        } else {
            let launches = self.traces.abandon();
            if let Some(auto) = self.auto.as_mut() {
                auto.stats.fell_back += launches.len() as u64;
            }
            for (placement, declared, job, after) in launches {
                self.analyse_after(placement, &declared, job, after.as_ref());
            }
        }
    }

    /// Turns automatic tracing on or off (off by default). Each launch is hashed (closure
    /// type, placement, accesses); once the last stretch of launches repeats with a period,
    /// for whole periods of at least [`MIN_FRAGMENT`] launches, the next stretch is predicted
    /// to repeat too and is traced — recorded the first time, replayed after — for as long as
    /// launches match. The first launch that does not match makes the buffered ones be
    /// analysed one by one, in order, so results never change. It costs a hash and a few
    /// table updates per launch (`examples/implicit.rs` measures it against a manual replay).
    ///
    /// ```
    /// use tactor::implicit::{read, read_write, Program};
    /// use tactor::{Placement, Runtime};
    ///
    /// let rt = Runtime::new(2).unwrap();
    /// let mut p = Program::new(&rt);
    /// p.auto_trace(true);
    /// let x = p.region(0u64);
    /// let y = p.region(0u64);
    /// for _ in 0..1000 {
    ///     p.launch(Placement::Any, read_write(&x), |x| *x += 1);
    ///     p.launch(Placement::Any, (read(&x), read_write(&y)), |(x, y)| *y += *x);
    /// }
    /// assert_eq!(p.with(&y, |y| *y).unwrap(), 1000 * 1001 / 2);
    /// assert!(p.auto_stats().fragments > 0);
    /// ```
    pub fn auto_trace(&mut self, on: bool) {
        if !on {
            self.flush_auto();
            self.auto = None;
        } else if self.auto.is_none() {
            self.auto = Some(Auto::default());
        }
    }
}
