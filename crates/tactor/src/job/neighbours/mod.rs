//! Arrays block-distributed over every worker of a job and stepped by one long-running task
//! per worker, each waiting only for the neighbours it exchanges items with
//! ([`Neighbours`]): the bulk-synchronous style of an MPI program with point-to-point
//! synchronisation, given by the runtime.

mod classes;
mod team;
mod wire;

use super::exchange::Exchange;
use super::pattern::Cut;
use super::Pattern;
use crate::slots::Slots;
use crate::Runtime;
use classes::Classes;
use crossbeam_utils::CachePadded;
use std::ops::Range;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use team::Team;

/// Arrays of fixed-size items stepped by every worker of a job, as an MPI program with
/// point-to-point synchronisation steps its blocks: the items of each array are cut in one
/// block per worker of the job (worker `w` of rank `r` is the job's worker `r × W + w`, `W`
/// workers per rank); each worker runs, step after step, a body over its block, reading the
/// step before; and before a step it waits only for the workers it reads from and for those
/// that read what it overwrites — an atomic counter per worker in a rank, one message per
/// pair of workers and step across ranks (all arrays together, on an [`Exchange`]). A worker
/// spins while it waits, polling the network: no thread sleeps on the way.
///
/// Items are kept in two generations (by the parity of the step): at step `t` a body writes
/// its items of `t` and reads items of `t - 1` ([`Before::get`]): those its items read, its
/// own rank's in place and other ranks' from their message, and any other item of a worker of
/// this rank that it reads from.
///
/// ```
/// use tactor::job::{Exchange, Job, Neighbours, Pattern, FIRST_PORT};
/// use tactor::Runtime;
///
/// struct Near(usize);
/// // SAFETY: `readers` is `reads` (a symmetric neighbourhood), which names live cells at
/// // steps after 0 only, and every step after 0 is alike.
/// unsafe impl Pattern for Near {
///     fn live(&self, _: usize, _: i64) -> std::ops::Range<usize> {
///         0..self.0
///     }
///     fn reads(&self, _: usize, step: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
///         (step > 0).then(|| i.saturating_sub(1)..(i + 2).min(self.0)).into_iter().flatten()
///     }
///     fn readers(&self, a: usize, step: i64, i: usize) -> impl Iterator<Item = usize> + '_ {
///         self.reads(a, step, i)
///     }
/// }
/// // Six cells of one byte, three steps: each cell becomes the sum of its neighbourhood.
/// let program = |rt: &Runtime, exchange: Option<_>| {
///     let cells = Neighbours::new(exchange, rt.workers(), Near(6), &[(6, 1)], 3);
///     let mut states = vec![(); rt.workers()];
///     cells
///         .pass(rt, &mut states, |_, block| {
///             let (step, (items, before)) = (block.step(), block.split());
///             for (i, cell) in items {
///                 cell[0] = match step {
///                     0 => i as u8,
///                     _ => Near(6).reads(0, step, i).map(|j| before.get(j)[0]).sum(),
///                 };
///             }
///             Ok::<(), ()>(())
///         })
///         .unwrap();
///     cells.last(0, 2)
/// };
/// let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
/// let one = program(&rt, None);
/// assert_eq!(one, [[4], [10], [18], [27], [30], [21]].map(|c| c.to_vec()));
/// let ranks = Job::run_in_process(2, 1, |rt, job| {
///     program(rt, Some(Exchange::open(job, FIRST_PORT).unwrap()))
/// });
/// let joined: Vec<_> = ranks.into_iter().flat_map(|r| r.unwrap()).collect();
/// assert_eq!(joined, one);
/// ```
pub struct Neighbours<P> {
    pattern: P,
    arrays: Vec<Array>,
    at: Place,
    exchange: Option<Arc<Exchange>>,
    classes: Classes,
    /// Per worker of this rank, its lists per class of steps, kept from pass to pass.
    lists: Vec<Mutex<wire::Lists>>,
    steps: i64,
}

/// One array: its two generations, the job-wide worker of each item, and per worker of this
/// rank the steps it finished in the current pass.
struct Array {
    rows: [Slots; 2],
    bytes: usize,
    cut: Cut,
    done: Vec<CachePadded<AtomicI64>>,
}

/// This rank's workers among the job's.
#[derive(Clone, Copy)]
struct Place {
    ranks: usize,
    workers: usize,
    rank: usize,
}

impl Place {
    fn all(&self) -> usize {
        self.ranks * self.workers
    }

    fn global(&self, w: usize) -> usize {
        self.rank * self.workers + w
    }

    /// The local index of the job's worker `o`, if it is on this rank (no division: a
    /// body's read of another worker's item asks).
    fn local(&self, o: usize) -> Option<usize> {
        let l = o.wrapping_sub(self.global(0));
        (l < self.workers).then_some(l)
    }
}

/// One worker's step of one array: the items it writes and the step before.
pub struct Block<'a> {
    array: usize,
    step: i64,
    items: Range<usize>,
    now: &'a Slots,
    before: Before<'a>,
}

/// The items of an array at the step before a [`Block`]'s that it may read: this rank's in
/// place, other ranks' from the messages that brought them.
#[derive(Clone, Copy)]
pub struct Before<'a> {
    row: &'a Slots,
    /// The items of other ranks this worker reads, ascending, and where each one is in
    /// `arrived` (message, offset).
    remote: &'a [usize],
    at: &'a [(usize, usize)],
    arrived: &'a [Vec<u8>],
    bytes: usize,
    /// This worker's block: its first item and length.
    start: usize,
    len: usize,
    /// The job-wide worker of each item, and this rank's workers among the job's.
    owner: &'a [u32],
    place: Place,
    /// The other local workers whose items this worker's items read at this step, ascending.
    sources: &'a [usize],
}

impl<'a> Before<'a> {
    /// Item `item` at the step before: one that this worker's items read at this step (as the
    /// [`Pattern`] says), or any other item of this rank's workers they read from (those
    /// workers finished the step before, and wait for this one before they write the next).
    ///
    /// # Panics
    /// If `item` is neither: an item of a worker (of this rank or another) that none of the
    /// block's items reads from.
    pub fn get(&self, item: usize) -> &'a [u8] {
        // Most reads are of the worker's own block: asked first, they skip the search of the
        // other ranks' items (which never include an item of this rank).
        let own = item.wrapping_sub(self.start) < self.len;
        if !own {
            if let Ok(k) = self.remote.binary_search(&item) {
                let (m, from) = self.at[k];
                return &self.arrived[m][from..from + self.bytes];
            }
            // Not another rank's: it must be of a local worker among the sources.
            let source = (self.place.local(self.owner[item] as usize))
                .is_some_and(|o| self.sources.binary_search(&o).is_ok());
            assert!(
                source,
                "item {item} is of no worker that this block reads from"
            );
        }
        // SAFETY: the item's owner is this worker, or a worker of this rank whose items this
        // block reads (checked above): that worker published its step before (a Release store
        // of its count) before this worker passed its waits, and it writes the item's slot
        // again two steps later only after it saw this worker finish this step, since this
        // worker reads its items (the readers that `Pattern`'s contract makes the inverse of
        // the reads; `Neighbours::pass`'s waits). A worker writes its own items only between
        // its steps.
        unsafe { self.row.read(item) }
    }
}

impl<'a> Block<'a> {
    /// The array.
    pub fn array(&self) -> usize {
        self.array
    }

    /// The step.
    pub fn step(&self) -> i64 {
        self.step
    }

    /// The items this worker writes at this step: its block's live ones.
    pub fn items(&self) -> Range<usize> {
        self.items.clone()
    }

    /// Each item to write, with its slot, and the step before to read.
    pub fn split(&mut self) -> (impl Iterator<Item = (usize, &mut [u8])> + '_, Before<'a>) {
        let now = self.now;
        // SAFETY: only this worker, the owner of the block, writes these slots, each once
        // here (`&mut self` keeps a second iterator out); readers of their old contents (two
        // steps back) were waited for, and readers of the new ones wait for this worker's
        // count, stored after the body returns.
        let items = self
            .items
            .clone()
            .map(move |i| (i, unsafe { now.write(i) }));
        (items, self.before)
    }
}

/// Why a [`Neighbours::pass`] stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped<E> {
    /// A body failed (the first failure).
    Failed(E),
    /// A message from another rank broke the protocol (its count or size).
    Broken(String),
    /// Another rank failed, or this rank gave up the exchange: the job knows which.
    Aborted(String),
}

impl<P: Pattern> Neighbours<P> {
    /// `arrays` (items, bytes per item) read as `pattern` says, stepped `steps` times, every
    /// byte zero at the start, on `workers` workers per rank. With an `exchange`, over every
    /// worker of its job (each rank makes it the same), items that cross ranks travel on it.
    ///
    /// # Panics
    /// If `workers` is 0, or the job has more than 2^32 workers or items.
    pub fn new(
        exchange: Option<Arc<Exchange>>,
        workers: usize,
        pattern: P,
        arrays: &[(usize, usize)],
        steps: i64,
    ) -> Self {
        assert!(workers > 0, "a job's ranks have a worker at least");
        let job = exchange.as_ref().map(|ex| ex.job());
        let at = Place {
            ranks: job.map_or(1, |j| j.ranks()),
            workers,
            rank: job.map_or(0, |j| j.rank()),
        };
        let arrays = (arrays.iter())
            .map(|&(n, bytes)| Array {
                rows: [0, 1].map(|_| Slots::new(n, bytes)),
                bytes,
                cut: Cut::new(n, at.all()),
                done: (0..workers)
                    .map(|_| CachePadded::new(AtomicI64::new(0)))
                    .collect(),
            })
            .collect::<Vec<_>>();
        let classes = match exchange.is_some() || workers > 1 {
            true => Classes::new(arrays.len(), steps, |a, t| pattern.class(a, t)),
            false => Classes::new(0, 0, |_, _| None),
        };
        Neighbours {
            pattern,
            arrays,
            at,
            exchange,
            lists: (0..workers)
                .map(|_| Mutex::new(wire::Lists::new(classes.counts())))
                .collect(),
            classes,
            steps,
        }
    }

    /// The pattern the arrays are read by.
    pub fn pattern(&self) -> &P {
        &self.pattern
    }

    /// The items of `array` that local worker `worker` writes (its block).
    pub fn mine(&self, array: usize, worker: usize) -> Range<usize> {
        let g = self.at.global(worker);
        self.arrays[array].cut.block(g..g + 1)
    }

    /// The items of `array` this rank wrote at `step` (its workers' blocks, live or not),
    /// once a pass ended: `step` must be one of the last two.
    pub fn last(&self, array: usize, step: i64) -> Vec<Vec<u8>> {
        let a = &self.arrays[array];
        let mine = a
            .cut
            .block(self.at.global(0)..self.at.global(self.at.workers));
        // SAFETY: `&self` outside a pass: no worker writes.
        mine.map(|i| unsafe { a.rows[(step % 2) as usize].read(i) }.to_vec())
            .collect()
    }

    /// Runs every step once on every worker of `rt` (which has the `workers` given to
    /// [`Neighbours::new`]), each from a barrier of them all, with `states[w]` (one per
    /// worker) handed to worker `w`'s `body` at every step of every array. Returns the time
    /// from the barrier to the last worker's end. On ranks each rank calls it for every pass
    /// (an [`Exchange::round`] starts them together).
    ///
    /// # Panics
    /// If `states` has not one state per worker. A body that panics stops every worker, and
    /// the panic carries on from here.
    pub fn pass<S: Send, E: Send>(
        &self,
        rt: &Runtime,
        states: &mut [S],
        body: impl Fn(&mut S, &mut Block) -> Result<(), E> + Sync,
    ) -> Result<Duration, Stopped<E>> {
        let n = self.at.workers;
        assert_eq!(
            rt.workers(),
            n,
            "one worker per worker given to Neighbours::new"
        );
        assert_eq!(states.len(), n, "one state per worker");
        let states: Vec<Mutex<&mut S>> = states.iter_mut().map(Mutex::new).collect();
        let team = Team::new(n, self.exchange.as_deref());
        let times = rt.on_each_worker(|w| {
            let mut state = states[w].lock().unwrap_or_else(PoisonError::into_inner);
            for a in &self.arrays {
                a.done[w].store(0, Ordering::Relaxed);
            }
            let run = std::panic::AssertUnwindSafe(|| {
                team.barrier()?;
                let start = Instant::now();
                self.work(w, &mut **state, &team, &body)?;
                team.barrier()?;
                Ok(start.elapsed())
            });
            match std::panic::catch_unwind(run) {
                Ok(time) => time,
                Err(panic) => {
                    team.stop(None);
                    std::panic::resume_unwind(panic)
                }
            }
        });
        let times = times.map_err(|e| Stopped::Aborted(e.to_string()))?;
        match team.take() {
            Some(stopped) => Err(stopped),
            None => times[0].map_err(|()| Stopped::Aborted("stopped".into())),
        }
    }

    /// Local worker `w`'s steps.
    fn work<S, E>(
        &self,
        w: usize,
        state: &mut S,
        team: &Team<E>,
        body: &(impl Fn(&mut S, &mut Block) -> Result<(), E> + Sync),
    ) -> Result<(), ()> {
        let mut lists = self.lists[w].lock().unwrap_or_else(PoisonError::into_inner);
        let lists = &mut *lists;
        for t in 0..self.steps {
            if let Some(ex) = &self.exchange {
                wire::gather(self, ex, lists, t, w, team)?;
            }
            // One worker per rank waits for no one here.
            let waits: &[Waits] = match self.at.workers {
                1 => &[],
                _ => {
                    let class = (t > 0).then(|| self.classes.pair(t - 1)).flatten();
                    lists.waits.select(class, |l| self.waits_of(l, t, w))
                }
            };
            for (i, a) in self.arrays.iter().enumerate() {
                let waits = waits.get(i);
                for &v in waits.map(|x| &x.on[..]).unwrap_or_default() {
                    team.wait_until(|| a.done[v].load(Ordering::Acquire) >= t)?;
                }
                let (remote, at) = lists.inputs.current().of(i);
                let mine = self.mine(i, w);
                let mut block = Block {
                    array: i,
                    step: t,
                    items: intersect(self.pattern.live(i, t), mine.clone()),
                    now: &a.rows[(t % 2) as usize],
                    before: Before {
                        row: &a.rows[((t + 1) % 2) as usize],
                        remote,
                        at,
                        arrived: &lists.arrived,
                        bytes: a.bytes,
                        start: mine.start,
                        len: mine.len(),
                        owner: &a.cut.owner,
                        place: self.at,
                        sources: waits.map(|x| &x.sources[..]).unwrap_or_default(),
                    },
                };
                if let Err(e) = body(state, &mut block) {
                    team.stop(Some(Stopped::Failed(e)));
                    return Err(());
                }
                a.done[w].store(t + 1, Ordering::Release);
            }
            if let Some(ex) = &self.exchange {
                wire::scatter(self, ex, lists, t, w);
            }
        }
        Ok(())
    }

    /// Per array, the other local workers that local worker `w` waits for before step `t`:
    /// the owners of what its items read (its sources), and the readers (at `t - 1`) of what
    /// it overwrites.
    fn waits_of(&self, l: &mut Vec<Waits>, t: i64, w: usize) {
        l.resize_with(self.arrays.len(), Waits::default);
        for (i, (a, x)) in self.arrays.iter().zip(l.iter_mut()).enumerate() {
            let local = |q: usize| self.at.local(a.cut.owner[q] as usize).filter(|&o| o != w);
            x.sources.clear();
            x.on.clear();
            for p in self.mine(i, w) {
                x.sources
                    .extend(self.pattern.reads(i, t, p).filter_map(local));
                x.on.extend(self.pattern.readers(i, t - 1, p).filter_map(local));
            }
            x.sources.sort_unstable();
            x.sources.dedup();
            x.on.extend_from_slice(&x.sources);
            x.on.sort_unstable();
            x.on.dedup();
        }
    }
}

/// The other local workers one worker waits for before a step of one array: `on`, all of
/// them, and `sources`, the owners of what its items read (whose items it may read).
#[derive(Default)]
struct Waits {
    on: Vec<usize>,
    sources: Vec<usize>,
}

fn intersect(a: Range<usize>, b: Range<usize>) -> Range<usize> {
    a.start.max(b.start)..a.end.min(b.end).max(a.start.max(b.start))
}

#[cfg(test)]
pub(crate) mod tests;
