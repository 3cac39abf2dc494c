//! Arrays cut in one block per rank and stepped in lock-step: which items cross ranks between
//! two steps, and their messages ([`Blocks`]).

mod futures;

use super::exchange::{Exchange, Key};
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

/// (rank, array, item) of one item that crosses ranks.
pub type Crossing = (usize, u32, usize);

/// Arrays of fixed-size items, each cut in one contiguous block per rank of a job (of `n`
/// items, rank `r` of `R` owns `[r·n/R, (r+1)·n/R)`), that a program updates in lock-step:
/// at each step a rank computes its items from items of the step before, some of them other
/// ranks'. Between two steps [`Blocks::send`] and [`Blocks::receive`] move exactly the items
/// that cross ranks, one message per pair of ranks for all arrays together, over an
/// [`Exchange`]; both ends derive a message's list from the dependences the program gives
/// (who reads an item on one side, what an item reads on the other), so messages carry items
/// only. A fork-join or parallel-loop program on one process becomes an SPMD one this way:
/// its own items, one `receive` before each step and one `send` after it.
///
/// ```
/// use tactor::job::{Blocks, Exchange, Job, FIRST_PORT};
///
/// // A 1-D stencil over 6 cells on 2 ranks: cell i reads i - 1, i, i + 1.
/// let near = |i: usize| (i.saturating_sub(1)..(i + 2).min(6));
/// let got = Job::run_in_process(2, 1, |_rt, job| {
///     let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 0, &[(6, 1)]);
///     let mut cells: Vec<u8> = (0..6).map(|i| i as u8 * 10).collect();
///     blocks.send(0, |_, i| near(i), |_, i| std::slice::from_ref(&cells[i]));
///     let mut halo = Vec::new();
///     blocks
///         .receive(0, |_, i| near(i), |_, i, bytes| halo.push((i, bytes[0])))
///         .unwrap();
///     (blocks.mine(0), halo)
/// });
/// assert_eq!(got[0].as_ref().unwrap(), &(0..3, vec![(3, 30)]));
/// assert_eq!(got[1].as_ref().unwrap(), &(3..6, vec![(2, 20)]));
/// ```
pub struct Blocks {
    exchange: Arc<Exchange>,
    stream: u32,
    /// Bytes per item of each array.
    item_bytes: Vec<usize>,
    /// Per array, where each rank's block starts, and its end (one more than ranks): owners
    /// are found by a binary search, with no division per item and step.
    starts: Vec<Vec<usize>>,
    rank: usize,
    list: Mutex<Vec<Crossing>>,
}

impl Blocks {
    /// `arrays` (items, bytes per item) cut over the ranks of `exchange`'s job, whose messages
    /// go as `stream` of the exchange.
    pub fn new(exchange: Arc<Exchange>, stream: u32, arrays: &[(usize, usize)]) -> Blocks {
        let (rank, ranks) = (exchange.job().rank(), exchange.job().ranks());
        // 128 bits: the products overflow 64 only for absurd sizes, but never silently.
        let first = |n: usize, r: usize| (r as u128 * n as u128 / ranks as u128) as usize;
        Blocks {
            rank,
            exchange,
            stream,
            item_bytes: arrays.iter().map(|&(_, b)| b).collect(),
            starts: (arrays.iter())
                .map(|&(n, _)| (0..=ranks).map(|r| first(n, r)).collect())
                .collect(),
            list: Mutex::default(),
        }
    }

    /// The exchange the messages go through.
    pub fn exchange(&self) -> &Arc<Exchange> {
        &self.exchange
    }

    /// The items of `array` that this rank owns.
    pub fn mine(&self, array: usize) -> Range<usize> {
        let starts = &self.starts[array];
        starts[self.rank]..starts[self.rank + 1]
    }

    /// The rank that owns `item` of `array`.
    ///
    /// # Panics
    /// If `item` is not an item of `array`.
    pub fn owner(&self, array: usize, item: usize) -> usize {
        let starts = &self.starts[array];
        assert!(
            item < starts[starts.len() - 1],
            "no item {item} in array {array}"
        );
        // The last block that starts at or before `item` (blocks before it may be empty).
        starts.partition_point(|&s| s <= item) - 1
    }

    /// Calls `f` with the key and list of each message of `step`'s items that this rank
    /// sends (`sends`; `links(array, item)` lists the items of the next step that read one of
    /// its items) or receives (`links(array, item)` lists the items of `step` that one of its
    /// items reads at the next step): rank by rank, each list array by array, items
    /// ascending. Both ends list a message alike when their links agree.
    pub fn messages<I>(
        &self,
        step: i64,
        sends: bool,
        mut links: impl FnMut(usize, usize) -> I,
        mut f: impl FnMut(Key, &[Crossing]),
    ) where
        I: IntoIterator<Item = usize>,
    {
        let mut list = self.list.lock().unwrap_or_else(PoisonError::into_inner);
        list.clear();
        for a in 0..self.item_bytes.len() {
            for x in self.mine(a) {
                for y in links(a, x) {
                    let r = self.owner(a, y);
                    if r != self.rank {
                        list.push((r, a as u32, if sends { x } else { y }));
                    }
                }
            }
        }
        list.sort_unstable();
        list.dedup();
        for group in list.chunk_by(|a, b| a.0 == b.0) {
            f((self.stream, step, group[0].0), group);
        }
    }

    /// The bytes of the items of `list`.
    pub fn bytes(&self, list: &[Crossing]) -> usize {
        list.iter()
            .map(|&(_, a, _)| self.item_bytes[a as usize])
            .sum()
    }

    /// After `step`: sends every item of this rank that an item of another rank reads at the
    /// next step (`readers(array, item)`: the items that read it), whose bytes `item(array,
    /// item)` gives.
    pub fn send<'a, I>(
        &self,
        step: i64,
        readers: impl FnMut(usize, usize) -> I,
        item: impl Fn(usize, usize) -> &'a [u8],
    ) where
        I: IntoIterator<Item = usize>,
    {
        let channel = crate::current_worker().unwrap_or(0);
        self.messages(step, true, readers, |(stream, step, dest), list| {
            let items = list.iter().map(|&(_, a, x)| item(a as usize, x));
            (self.exchange).send(
                channel,
                dest,
                (stream, step),
                list.len(),
                self.bytes(list),
                items,
            );
        });
    }

    /// Before the step after `step`: takes every item of `step` that this rank's items read
    /// from other ranks (`reads(array, item)`: the items it reads), waiting for each message
    /// (a task waiting on a worker is suspended), and gives each to `put(array, item,
    /// bytes)`. `Err` with the cause once a rank failed, this one abandoned the exchange, or
    /// a message broke the protocol (then also this rank's error: [`Exchange::take_error`]).
    pub fn receive<I>(
        &self,
        step: i64,
        reads: impl FnMut(usize, usize) -> I,
        mut put: impl FnMut(usize, usize, &[u8]),
    ) -> Result<(), String>
    where
        I: IntoIterator<Item = usize>,
    {
        let mut result = Ok(());
        self.messages(step, false, reads, |key, list| {
            if result.is_err() {
                return;
            }
            let mut took = false;
            let ex = &self.exchange;
            let mut take = |m: &[u8]| {
                let Some(mut items) = ex.check(key, Some(m), list.len(), self.bytes(list)) else {
                    return;
                };
                for &(_, a, y) in list {
                    let (this, rest) = items.split_at(self.item_bytes[a as usize]);
                    put(a as usize, y, this);
                    items = rest;
                }
                took = true;
            };
            result = ex.pull(key, &mut take).and_then(|()| match took {
                true => Ok(()),
                false => Err(ex.take_error().unwrap_or_default()),
            });
        });
        result
    }
}
