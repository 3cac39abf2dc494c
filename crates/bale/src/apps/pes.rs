//! Where an app's PEs run: the workers of this process, one PE each, and when a launcher
//! started several ranks, every rank's workers (PE `rank × W + worker`). An app's selector
//! version is written once against [`Pes`] and runs the same in one process and on ranks.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;
use tactor::actor::{self, Handler, Pe, Spec};
use tactor::job::{Job, JobError, Reduce};
use tactor::Runtime;

/// How an error found on one rank of several starts (then the rank, a colon, the error).
pub const RANK_ERROR: &str = "rank ";

/// The PEs of a run: this process's runtime, and the job's other ranks if there are any.
///
/// ```
/// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
/// let pes = bale::apps::Pes::new(&rt, None);
/// assert_eq!((pes.count(), pes.mine()), (2, 0..2));
/// assert_eq!(pes.sum(5), 5);
/// ```
pub struct Pes<'a> {
    rt: &'a Runtime,
    job: Option<&'a Arc<Job>>,
    /// Every message a batch of its own: the AGP baseline on ranks.
    unbatched: bool,
}

impl<'a> Pes<'a> {
    /// The PEs of `rt`'s workers, spanning `job`'s ranks when given.
    pub fn new(rt: &'a Runtime, job: Option<&'a Arc<Job>>) -> Pes<'a> {
        Pes {
            rt,
            job,
            unbatched: false,
        }
    }

    /// The same PEs running the selector versions without aggregation: one message, one
    /// remote operation (the AGP model over the communication layer).
    pub fn unbatched(self) -> Pes<'a> {
        Pes {
            unbatched: true,
            ..self
        }
    }

    /// The model the selector versions run as: `selector`, or `agp` unbatched.
    pub fn model(&self) -> &'static str {
        if self.unbatched {
            "agp"
        } else {
            "selector"
        }
    }

    /// The runtime whose workers are this rank's PEs.
    pub fn runtime(&self) -> &'a Runtime {
        self.rt
    }

    /// The job, if it has other ranks.
    pub fn job(&self) -> Option<&'a Arc<Job>> {
        self.job
    }

    /// PEs in all.
    pub fn count(&self) -> usize {
        self.rt.workers() * self.job.map_or(1, |j| j.ranks())
    }

    /// This rank's PEs.
    pub fn mine(&self) -> Range<usize> {
        let w = self.rt.workers();
        let first = w * self.job.map_or(0, |j| j.rank());
        first..first + w
    }

    /// Runs a selector over every PE, this rank's starting from `states` (one per PE of
    /// [`Pes::mine`]); returns their final states. Collective over the ranks.
    pub fn select<M, H, F>(&self, spec: &Spec, states: Vec<H>, program: F) -> Vec<H>
    where
        M: bytemuck::Pod + Send,
        H: Handler<M>,
        F: Fn(&mut Pe<'_, M, H>) + Sync,
    {
        let unbatched;
        let spec = if self.unbatched {
            unbatched = spec.clone().batch(1);
            &unbatched
        } else {
            spec
        };
        match self.job {
            Some(j) => actor::run_on(self.rt, j.clone(), spec, states, program),
            None => actor::run(self.rt, spec, states, program),
        }
    }

    /// `value` summed over the ranks.
    pub fn sum(&self, value: u64) -> u64 {
        self.job
            .map_or(value, |j| or_quit(j.all_reduce(Reduce::Sum, value)))
    }

    /// Whether `yes` holds on any rank.
    pub fn any(&self, yes: bool) -> bool {
        self.job.map_or(yes, |j| {
            or_quit(j.all_reduce(Reduce::Max, u64::from(yes))) != 0
        })
    }

    /// Every rank's `part` in rank order (this process's alone when it is the only rank).
    pub fn gather<T: bytemuck::Pod>(&self, part: &[T]) -> Vec<Vec<T>> {
        match self.job {
            None => vec![part.to_vec()],
            Some(j) => or_quit(j.all_gather(bytemuck::cast_slice(part).to_vec()))
                .into_iter()
                .map(|bytes| {
                    let mut v = Vec::new();
                    extend_from_bytes(&mut v, &bytes);
                    v
                })
                .collect(),
        }
    }

    /// Runs `body` on every rank at once and times it by the slowest rank; then each rank
    /// checks its own part with `check`, and the run fails on every rank if it failed on any:
    /// the lowest rank it failed on gives the error, starting with [`RANK_ERROR`] and its
    /// rank, the others an empty one (reported elsewhere). Seconds of `body`.
    pub fn timed<T>(
        &self,
        body: impl FnOnce() -> T,
        check: impl FnOnce(T) -> Result<(), String>,
    ) -> Result<f64, String> {
        let Some(job) = self.job else {
            let start = Instant::now();
            let out = body();
            let seconds = start.elapsed().as_secs_f64();
            check(out)?;
            return Ok(seconds);
        };
        // Another rank's failure ends this one quietly: that rank says why.
        let quiet = |_: JobError| {
            tactor_cli::signals::silence();
            String::new()
        };
        job.barrier().map_err(quiet)?;
        let start = Instant::now();
        let out = body();
        let nanos = start.elapsed().as_nanos() as u64;
        let nanos = job.all_reduce(Reduce::Max, nanos).map_err(quiet)?;
        let (rank, ranks) = (job.rank(), job.ranks());
        let verdict = check(out).and_then(|()| match injected_fault() {
            Some(r) if r == rank => Err("a wrong answer injected by BALE_FAULT".into()),
            _ => Ok(()),
        });
        // The lowest failing rank, as the largest `ranks - rank`; 0 when none failed.
        let mark = if verdict.is_err() { ranks - rank } else { 0 };
        let lowest = job.all_reduce(Reduce::Max, mark as u64).map_err(quiet)? as usize;
        match verdict {
            Err(e) if ranks - lowest == rank => Err(format!("{RANK_ERROR}{rank}: {e}")),
            _ if lowest != 0 => Err(String::new()),
            _ => Ok(nanos as f64 * 1e-9),
        }
    }
}

/// The collective's result; when another rank failed instead (it printed why), this rank ends
/// here, quietly, after giving that rank time to print (a launcher ends the job at the first
/// rank that exits).
fn or_quit<T>(r: Result<T, JobError>) -> T {
    r.unwrap_or_else(|e| {
        if let Some(j) = tactor::job::Job::joined().filter(|j| e.speaks(j.rank())) {
            j.fail(&e.to_string());
        }
        tactor_cli::signals::let_another_rank_speak();
        std::process::exit(1)
    })
}

/// Appends the plain values `bytes` holds (as another rank sent them) to `out`.
///
/// ```
/// let mut v: Vec<u32> = vec![1];
/// bale::apps::extend_from_bytes(&mut v, &7u32.to_le_bytes());
/// assert_eq!(v, [1, 7]);
/// ```
pub fn extend_from_bytes<T: bytemuck::Pod>(out: &mut Vec<T>, bytes: &[u8]) {
    let at = out.len();
    out.resize(
        at + bytes.len() / std::mem::size_of::<T>().max(1),
        T::zeroed(),
    );
    bytemuck::cast_slice_mut(&mut out[at..]).copy_from_slice(bytes);
}

/// The rank whose check `BALE_FAULT=RANK` makes fail, for testing how a job reports it.
fn injected_fault() -> Option<usize> {
    std::env::var("BALE_FAULT").ok()?.parse().ok()
}
