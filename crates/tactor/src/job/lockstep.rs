//! Arrays stepped in lock-step with their storage: the step being written and the one before,
//! with the items other ranks own brought in between steps ([`Lockstep`]).

use super::blocks::Blocks;
use super::exchange::Exchange;
use std::ops::Range;
use std::sync::Arc;

/// Arrays of fixed-size items that a program updates in lock-step, each item of a step
/// computed from items of the step before, kept as two generations (the step being written and
/// the one before). In one process every item is this rank's. On the ranks of a job (an
/// [`Exchange`]) each array is cut in one block per rank as by [`Blocks`]: a rank writes its
/// block only, and between two steps [`Lockstep::send`] and [`Lockstep::receive`] bring it the
/// items of other ranks that its items read, at their own index — so the program that reads
/// `before[i]` is the same in one process and on ranks. What Chapel's stencil distribution
/// (`updateFluff`) or PETSc's ghosted vectors give, for dependences that may change with the
/// step.
///
/// ```
/// use tactor::job::{Exchange, Job, Lockstep, Step, FIRST_PORT};
///
/// // A 1-D stencil over 6 cells, 3 steps: each cell becomes the sum of its neighbourhood.
/// let near = |i: usize| i.saturating_sub(1)..(i + 2).min(6);
/// let program = |exchange: Option<_>| {
///     let mut cells = Lockstep::new(exchange, 0, &[(6, 1)]);
///     let mut last = Vec::new();
///     for t in 0..3 {
///         cells.receive(t, |_, i| near(i)).unwrap();
///         let Step { mine, now, before } = cells.step(t).next().unwrap();
///         for (i, cell) in mine.zip(now.iter_mut()) {
///             cell[0] = if t == 0 { i as u8 } else { near(i).map(|j| before[j][0]).sum() };
///         }
///         last = now.iter().map(|cell| cell[0]).collect();
///         cells.send(t, |_, i| near(i));
///     }
///     last
/// };
/// let one = program(None);
/// let ranks = Job::run_in_process(2, 1, |_rt, job| {
///     program(Some(Exchange::open(job, FIRST_PORT).unwrap()))
/// });
/// let joined: Vec<u8> = ranks.into_iter().flat_map(|r| r.unwrap()).collect();
/// assert_eq!(joined, one);
/// assert_eq!(one, [4, 10, 18, 27, 30, 21]);
/// ```
pub struct Lockstep {
    /// Per array, the two generations (by the parity of the step) of every item: a rank keeps
    /// whole arrays so that an item another rank owns is read at its own index.
    rows: Vec<[Vec<Vec<u8>>; 2]>,
    mine: Vec<Range<usize>>,
    blocks: Option<Blocks>,
}

/// One array of a [`Lockstep`] at one step.
pub struct Step<'a> {
    /// The items this rank writes ([`Lockstep::mine`]).
    pub mine: Range<usize>,
    /// Those items at this step, to write, in order.
    pub now: &'a mut [Vec<u8>],
    /// Every item at the step before: this rank's, and those [`Lockstep::receive`] brought
    /// from other ranks.
    pub before: &'a [Vec<u8>],
}

impl Lockstep {
    /// `arrays` (items, bytes per item), every byte zero. With an `exchange`, cut over the
    /// ranks of its job, the items that cross ranks sent as `stream` of the exchange.
    pub fn new(exchange: Option<Arc<Exchange>>, stream: u32, arrays: &[(usize, usize)]) -> Self {
        let blocks = exchange.map(|ex| Blocks::new(ex, stream, arrays));
        Lockstep {
            rows: (arrays.iter())
                .map(|&(n, bytes)| [0, 1].map(|_| vec![vec![0; bytes]; n]))
                .collect(),
            mine: (0..arrays.len())
                .map(|a| blocks.as_ref().map_or(0..arrays[a].0, |b| b.mine(a)))
                .collect(),
            blocks,
        }
    }

    /// The items of `array` this rank writes.
    pub fn mine(&self, array: usize) -> Range<usize> {
        self.mine[array].clone()
    }

    /// On the ranks of a job, the exchange the items go through.
    pub fn exchange(&self) -> Option<&Arc<Exchange>> {
        self.blocks.as_ref().map(Blocks::exchange)
    }

    /// Step `step` of every array.
    pub fn step(&mut self, step: i64) -> impl ExactSizeIterator<Item = Step<'_>> {
        let now = step.rem_euclid(2) as usize;
        (self.rows.iter_mut().zip(&self.mine)).map(move |(rows, mine)| {
            let [even, odd] = rows;
            let (now, before) = if now == 0 { (even, odd) } else { (odd, even) };
            Step {
                mine: mine.clone(),
                now: &mut now[mine.clone()],
                before,
            }
        })
    }

    /// Before `step`: brings the items of the step before that this rank's items read from
    /// other ranks (`reads(array, item)`: the items that `item` reads at `step`), waiting for
    /// each message (a task waiting on a worker is suspended). Nothing to do at step 0 or in
    /// one process. `Err` with the cause once a rank failed, this one abandoned the exchange,
    /// or a message broke the protocol.
    pub fn receive<I>(
        &mut self,
        step: i64,
        reads: impl FnMut(usize, usize) -> I,
    ) -> Result<(), String>
    where
        I: IntoIterator<Item = usize>,
    {
        let Some(blocks) = self.blocks.as_ref().filter(|_| step > 0) else {
            return Ok(());
        };
        let before = (step - 1).rem_euclid(2) as usize;
        let rows = &mut self.rows;
        blocks.receive(step - 1, reads, |a, i, bytes| {
            rows[a][before][i].copy_from_slice(bytes)
        })
    }

    /// After `step`: sends the items of `step` this rank wrote that items of other ranks read
    /// at the next step (`readers(array, item)`: the items that read `item` then). Nothing to
    /// do in one process.
    pub fn send<I>(&self, step: i64, readers: impl FnMut(usize, usize) -> I)
    where
        I: IntoIterator<Item = usize>,
    {
        if let Some(blocks) = &self.blocks {
            let now = step.rem_euclid(2) as usize;
            blocks.send(step, readers, |a, i| &self.rows[a][now][i][..]);
        }
    }
}
