//! Arrays stepped as compiled dataflow over every worker of a job ([`Dataflow`]): the same
//! [`Pattern`] as [`Neighbours`](super::Neighbours), run as tasks that each start once what
//! they read is ready, compiled once per shape of a chunk of steps into a subgraph of the job.

mod chunk;

use super::exchange::Exchange;
use super::pattern::Cut;
use super::{Job, Pattern, Received, Sharded, Stopped, FIRST_PORT};
use crate::slots::Slots;
use crate::subgraph::{SubgraphError, TaskId};
use crate::{Event, Handle};
use rustc_hash::FxHashMap as HashMap;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Tasks per chunk aimed at: a chunk's start and its hand-over to the next (which waits for
/// all of it) are small against running it, and the equal chunks in the middle share one
/// graph whose tables and closures stay in a core's cache from one to the next (at 4096 a
/// run of 1000 steps at width 8 was three graphs, each cold every time it ran).
const CHUNK_TASKS: i64 = 1024;

/// Least steps per chunk after the first.
const MIN_CHUNK: i64 = 32;

/// Arrays of fixed-size items stepped as a task graph over every worker of a job: the items
/// of each array are cut in one block per worker of the job (as
/// [`Neighbours`](super::Neighbours) cuts them), and at each step the `k`-th item of a
/// worker's block in every array is one task on that worker, which runs once the items it
/// reads are ready and what it overwrites was read.
/// Steps are cut in chunks of about 1024 tasks, each compiled once per distinct shape (the
/// arrays' [`Pattern::class`] over its steps) into a subgraph of the job
/// ([`ShardedBuilder`](super::ShardedBuilder)) and instantiated chunk after chunk: an item
/// that another rank reads travels in the one message per pair of ranks and level of the
/// instance, read where it landed. What Legion's tracing of an iterative program, or a
/// hand-written MPI program's persistent requests, give.
///
/// Items are kept in two generations (by the parity of the step); each item of this rank
/// also has a state of its own (`S`, made by `init`), which its steps use one after another.
/// The body gets a [`Point`]: the item's slot to write, its state, and the step before to
/// read ([`Reads::get`]).
///
/// ```
/// use tactor::job::{Dataflow, Exchange, Job, Pattern, FIRST_PORT};
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
///     fn class(&self, _: usize, step: i64) -> Option<u32> {
///         Some(u32::from(step > 0))
///     }
/// }
/// // Six cells of one byte, three steps: each cell becomes the sum of its neighbourhood.
/// let got = Job::run_in_process(2, 1, |rt, job| {
///     let ex = Exchange::open(job, FIRST_PORT).unwrap();
///     let cells = Dataflow::new(rt, Some(ex.clone()), Near(6), &[(6, 1)], 3, |_, _| (), |p| {
///         p.out[0] = match p.step {
///             0 => p.item as u8,
///             _ => Near(6).reads(0, p.step, p.item).map(|j| p.before.get(j)[0]).sum(),
///         };
///         Ok::<(), ()>(())
///     })
///     .unwrap();
///     ex.round(rt, || cells.run()).unwrap();
///     cells.last(0, 2)
/// });
/// let joined: Vec<_> = got.into_iter().flat_map(|r| r.unwrap()).collect();
/// assert_eq!(joined, [[4], [10], [18], [27], [30], [21]].map(|c| c.to_vec()));
/// ```
pub struct Dataflow<P, S, E, B> {
    data: Arc<Data<P, S, E, B>>,
    /// Per chunk: its first step and its compiled graph (equal chunks share one).
    chunks: Vec<(i64, Arc<Sharded<i64>>)>,
}

/// What every task reaches.
struct Data<P, S, E, B> {
    pattern: P,
    arrays: Vec<Array<S>>,
    steps: i64,
    /// Workers per rank.
    workers: usize,
    body: B,
    error: Mutex<Option<E>>,
    failed: AtomicBool,
    exchange: Arc<Exchange>,
}

/// One array: its two generations, the job-wide worker of each item and the first item of
/// each worker's block, and the states of this rank's items.
struct Array<S> {
    rows: [Slots; 2],
    bytes: usize,
    cut: Cut,
    states: Vec<State<S>>,
}

/// An item's state: `None` for another rank's item.
struct State<S>(UnsafeCell<Option<S>>);

// SAFETY: a state is reached only by the tasks of its item's steps, which the chunk's edges
// order one after another (`chunk::build`), and chunks run one after another on a rank.
unsafe impl<S: Send> Sync for State<S> {}

/// One item's step, as its body gets it.
pub struct Point<'a, S> {
    /// The array.
    pub array: usize,
    /// The step.
    pub step: i64,
    /// The item.
    pub item: usize,
    /// Its slot at this step, to write.
    pub out: &'a mut [u8],
    /// Its state.
    pub state: &'a mut S,
    /// The array at the step before.
    pub before: Reads<'a>,
}

/// The items of an array at the step before a [`Point`]'s that it reads: this rank's in place,
/// other ranks' where their message landed.
#[derive(Clone, Copy)]
pub struct Reads<'a> {
    row: &'a Slots,
    /// Per item read: the item, and if it came from another rank, the task whose message
    /// carried it and where in that task's items. Empty if every item read is this rank's.
    inputs: &'a [(usize, Option<(TaskId, usize)>)],
    /// The point's item, and the items near it that it reads (all of them if it has no
    /// inputs), as bits.
    item: usize,
    near: u64,
    got: &'a Received<'a>,
    bytes: usize,
}

impl<'a> Reads<'a> {
    /// Item `item` at the step before, one that the point reads (as the [`Pattern`] says).
    ///
    /// # Panics
    /// If the point does not read `item`.
    pub fn get(&self, item: usize) -> &'a [u8] {
        let input = self.inputs.iter().find(|x| x.0 == item);
        match input.map(|x| x.1) {
            Some(Some((from, at))) => {
                let items = self.got.from(from).expect("items from another rank");
                &items[at..at + self.bytes]
            }
            _ => {
                // A local input is read; otherwise the member's bits say (asked only then).
                let read = input.is_some()
                    || chunk::near_bit(self.item, item).is_some_and(|k| self.near >> k & 1 == 1);
                assert!(read, "item {item} is not one that this point reads");
                // SAFETY: the point reads the item (checked above), so the task of `item` at
                // the step before ran before this one (an edge of the chunk, or the chunk
                // before), and its slot is written again only after this task (the guards of
                // `chunk::build`, from the readers that `Pattern`'s contract makes the
                // inverse of the reads).
                unsafe { self.row.read(item) }
            }
        }
    }
}

impl<P, S, E, B> Dataflow<P, S, E, B>
where
    P: Pattern + Send + 'static,
    S: Send + 'static,
    E: Send + 'static,
    B: Fn(Point<'_, S>) -> Result<(), E> + Send + Sync + 'static,
{
    /// `arrays` (items, bytes per item) read as `pattern` says, stepped `steps` times by
    /// `body`, every byte zero at the start; `init(array, item)` makes the state of each item
    /// of this rank. With an `exchange`, over every worker of its job (each rank makes it the
    /// same, and its messages are the only ones on that exchange); without, over `handle`'s
    /// workers alone. Every distinct chunk is compiled here.
    ///
    /// # Errors
    /// If a chunk does not compile (more workers than the runtime has).
    pub fn new(
        handle: &Handle,
        exchange: Option<Arc<Exchange>>,
        pattern: P,
        arrays: &[(usize, usize)],
        steps: i64,
        init: impl Fn(usize, usize) -> S,
        body: B,
    ) -> Result<Self, SubgraphError> {
        let workers = handle.workers();
        let exchange = match exchange {
            Some(ex) => ex,
            None => {
                let job = Job::in_process(1, workers).remove(0);
                Exchange::open(&job, FIRST_PORT).expect("a new job's first port is free")
            }
        };
        let (rank, all) = (exchange.job().rank(), exchange.job().ranks() * workers);
        let arrays = (arrays.iter().enumerate())
            .map(|(a, &(n, bytes))| {
                let cut = Cut::new(n, all);
                let mine = cut.block(rank * workers..(rank + 1) * workers);
                Array {
                    rows: [0, 1].map(|_| Slots::new(n, bytes)),
                    bytes,
                    states: (0..n)
                        .map(|i| State(UnsafeCell::new(mine.contains(&i).then(|| init(a, i)))))
                        .collect(),
                    cut,
                }
            })
            .collect();
        let data = Arc::new(Data {
            pattern,
            arrays,
            steps,
            workers,
            body,
            error: Mutex::new(None),
            failed: AtomicBool::new(false),
            exchange,
        });
        // Chunks after the first have an even length: each starts on the same parity.
        let width: usize = data.arrays.iter().map(|a| a.cut.owner.len()).sum();
        let per_chunk = (CHUNK_TASKS / (width as i64).max(1)).max(MIN_CHUNK) / 2 * 2;
        let mut cuts = vec![(0, steps.min(1))];
        while let Some(&(t0, len)) = cuts.last().filter(|c| c.0 + c.1 < steps) {
            cuts.push((t0 + len, per_chunk.min(steps - t0 - len)));
        }
        // Equal chunks (the same classes, one step past their end included) share a graph;
        // a chunk with a step of no class has one of its own.
        let mut graphs: HashMap<Vec<u32>, Arc<Sharded<i64>>> = HashMap::default();
        let mut chunks = Vec::new();
        for (stream, &(t0, len)) in cuts.iter().enumerate() {
            let classes: Option<Vec<u32>> = (0..data.arrays.len())
                .flat_map(|a| (t0..=t0 + len).map(move |t| (a, t)))
                .map(|(a, t)| data.pattern.class(a, t))
                .chain([Some(len as u32), Some((t0 % 2) as u32)])
                .collect();
            if let Some(g) = classes.as_ref().and_then(|k| graphs.get(k)) {
                chunks.push((t0, g.clone()));
                continue;
            }
            let stream = u32::try_from(stream).expect("fewer than 2^32 chunks");
            let graph = Arc::new(chunk::build(&data, stream, t0, len).compile(handle)?);
            if let Some(k) = classes {
                graphs.insert(k, graph.clone());
            }
            chunks.push((t0, graph));
        }
        Ok(Dataflow { data, chunks })
    }

    /// Runs every step once, chunk after chunk (at most two in flight, so that the messages
    /// awaited and the memory stay bounded), and waits for the last. On ranks each rank calls
    /// it for every pass, inside an [`Exchange::round`] (which starts them together and makes
    /// the messages due).
    ///
    /// # Errors
    /// The first body that failed ([`Stopped::Failed`]: the tasks after it do not run, and
    /// on ranks nothing more is sent), or why the run stopped otherwise
    /// ([`Stopped::Aborted`]: another rank failed).
    pub fn run(&self) -> Result<(), Stopped<E>> {
        self.data.failed.store(false, Ordering::Relaxed);
        let mut last = Event::triggered();
        let mut flight = VecDeque::new();
        let mut done = Ok(());
        for (t0, graph) in &self.chunks {
            last = graph.instantiate(*t0, &[last]).completion;
            flight.push_back(last.clone());
            if flight.len() > 2 {
                done = done.and(flight.pop_front().expect("three in flight").wait());
            }
        }
        let done = done.and(last.wait());
        let first = self
            .data
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match first {
            Some(e) => Err(Stopped::Failed(e)),
            None => done.map_err(|e| Stopped::Aborted(e.to_string())),
        }
    }

    /// The pattern the arrays are read by.
    pub fn pattern(&self) -> &P {
        &self.data.pattern
    }

    /// The items of `array` that this rank wrote at `step` (its workers' blocks, live or
    /// not), once a run ended: `step` must be one of the last two.
    pub fn last(&self, array: usize, step: i64) -> Vec<Vec<u8>> {
        let a = &self.data.arrays[array];
        let (rank, w) = (self.data.exchange.job().rank(), self.data.workers);
        let mine = a.cut.block(rank * w..(rank + 1) * w);
        // SAFETY: `&self` outside a run: no task writes.
        mine.map(|i| unsafe { a.rows[(step % 2) as usize].read(i) }.to_vec())
            .collect()
    }

    /// Tasks of this rank per chunk compiled, summed (the vertices of its messages included).
    pub fn tasks(&self) -> usize {
        self.chunks.iter().map(|c| c.1.tasks()).sum()
    }
}

impl<P: Pattern, S, E, B> Data<P, S, E, B>
where
    B: Fn(Point<'_, S>) -> Result<(), E>,
{
    /// The items of `array` live at `t` (none outside the steps).
    fn live(&self, array: usize, t: i64) -> std::ops::Range<usize> {
        match (0..self.steps).contains(&t) {
            true => self.pattern.live(array, t),
            false => 0..0,
        }
    }

    fn rank_of(&self, worker: usize) -> usize {
        worker / self.workers
    }

    /// Runs the `members` of `table` (each an array's item at `t`).
    fn run(&self, t: i64, table: &chunk::Table, members: std::ops::Range<usize>, got: &Received) {
        for m in &table.members[members] {
            let (a, p, (from, to)) = (m.array, m.item, m.inputs);
            if self.failed.load(Ordering::Relaxed) {
                return;
            }
            let array = &self.arrays[a];
            // SAFETY: the chunk's edges order every other user of this slot and state before
            // or after this task (`chunk::build`), and chunks run one after another.
            let (out, state) = unsafe {
                (
                    array.rows[(t % 2) as usize].write(p),
                    &mut *array.states[p].0.get(),
                )
            };
            let point = Point {
                array: a,
                step: t,
                item: p,
                out,
                state: state.as_mut().expect("a state for each item of this rank"),
                before: Reads {
                    row: &array.rows[((t + 1) % 2) as usize],
                    inputs: &table.inputs[from as usize..to as usize],
                    item: p,
                    near: m.near,
                    got,
                    bytes: array.bytes,
                },
            };
            if let Err(e) = (self.body)(point) {
                let mut first = self.error.lock().unwrap_or_else(PoisonError::into_inner);
                first.get_or_insert(e);
                self.failed.store(true, Ordering::Relaxed);
                // Stop exchanging: this rank's messages stop, the waits of others end.
                self.exchange.abandon();
            }
        }
    }
}

#[cfg(test)]
mod tests;
