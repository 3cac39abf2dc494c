//! One chunk of a [`Dataflow`](super::Dataflow)'s steps as a subgraph of the job: its tasks,
//! the edges that order them (what a task reads, and who must have read what it overwrites),
//! and the tasks that write another rank's items into this rank's copy where the next chunk
//! reads them.

use super::{Data, Point};
use crate::job::{Pattern, Received, ShardedBuilder};
use crate::subgraph::{PreId, TaskId as Id};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The items a chunk's tasks run, in one table for them all, read in order as the tasks run
/// (an allocation or two per task cost a cache miss each): per member its array, item, range
/// of inputs and the items near it that it reads; per input the item `d` of `t - 1` it reads
/// and where it comes from — this rank's row (`None`), or the message from the task of
/// `(t - 1, d)` on another rank, at an offset in that task's items.
#[derive(Default)]
pub(super) struct Table {
    pub(super) members: Vec<Member>,
    pub(super) inputs: Vec<(usize, Option<(Id, usize)>)>,
}

/// One array's item at a step, as a task runs it.
pub(super) struct Member {
    pub(super) array: usize,
    pub(super) item: usize,
    /// Its inputs in the table: none if it reads only this rank's items, all near it.
    pub(super) inputs: (u32, u32),
    /// The items it reads within [`NEAR`] of it, as bits (see [`near_bit`]).
    pub(super) near: u64,
}

/// How far from an item the reads that its member keeps as bits may be.
const NEAR: usize = 32;

/// The bit of `near` that says whether `item` reads item `d`, if `d` is near enough.
pub(super) fn near_bit(item: usize, d: usize) -> Option<u32> {
    let k = d.wrapping_sub(item).wrapping_add(NEAR);
    (k < 2 * NEAR).then_some(k as u32)
}

/// The items a task runs, `(array, item)` in array order: what its messages are made of.
type Items = Arc<[(usize, usize)]>;

/// Steps `t0 .. t0 + len` of every array as one subgraph of the job, its messages on `stream`.
/// Its argument is the first step of the instance: the graph serves every chunk of the same
/// classes and parity, so its tasks know their step relative to it.
///
/// A task runs, on one worker at one step, the `k`-th item of that worker's block of every
/// array (with one array, one item): arrays run side by side, adding bytes to the messages,
/// not tasks. A task's items travel together, in array order, on each edge from it to another
/// rank.
pub(super) fn build<P, S, E, B>(
    data: &Arc<Data<P, S, E, B>>,
    stream: u32,
    t0: i64,
    len: i64,
) -> ShardedBuilder<i64>
where
    P: Pattern + Send + 'static,
    S: Send + 'static,
    E: Send + 'static,
    B: Fn(Point<'_, S>) -> Result<(), E> + Send + Sync + 'static,
{
    let mut b = ShardedBuilder::new(data.exchange.clone(), stream);
    let after = b.precondition();
    let bytes = |a: usize| data.arrays[a].bytes;
    let owner = |a: usize, p: usize| data.arrays[a].cut.owner[p] as usize;
    // Per (step, array, item): its task, and the offset of its item in the task's items.
    let mut ids: HashMap<(i64, usize, usize), (Id, usize)> = HashMap::default();
    // Per item: the last task of the chunk that ran it (its state's last user).
    let mut touched: HashMap<(usize, usize), Id> = HashMap::default();
    // Per task, by its number: its worker, step and items.
    let mut tasks: Vec<(usize, i64, Items)> = Vec::new();
    // The items of a task, packed in array order by its worker right after it ran.
    let packed = |items: &Items, dt: i64| {
        let (data, items) = (data.clone(), items.clone());
        move |&first: &i64, out: &mut [u8]| {
            for (a, p, span) in spans(&data.arrays, &items) {
                let row = &data.arrays[a].rows[((first + dt) % 2) as usize];
                // SAFETY: read on its writer's worker right after it, before the writer of
                // the slot's next value (ordered after this one).
                out[span].copy_from_slice(unsafe { row.read(p) });
            }
        }
    };
    let total = |items: &[(usize, usize)]| items.iter().map(|&(a, _)| bytes(a)).sum::<usize>();
    let (mut table, filled) = (Table::default(), Arc::new(OnceLock::<Table>::new()));
    for t in t0..t0 + len {
        // This step's tasks: per worker and index in its block, its arrays' items.
        let mut places: BTreeMap<(usize, usize), Vec<(usize, usize)>> = BTreeMap::new();
        for a in 0..data.arrays.len() {
            for p in data.live(a, t) {
                let w = owner(a, p);
                let k = p - data.arrays[a].cut.starts[w];
                places.entry((w, k)).or_default().push((a, p));
            }
        }
        for ((w, _), items) in places {
            let dt = t - t0;
            let mut preds: Vec<Id> = Vec::new();
            let mut local = false;
            let first_member = table.members.len();
            for &(a, p) in &items {
                let at = table.inputs.len() as u32;
                let (mut near, mut far) = (0u64, false);
                for d in data.pattern.reads(a, t, p) {
                    let from = ids.get(&(t - 1, a, d)).copied();
                    preds.extend(from.map(|f| f.0));
                    let remote = from.filter(|_| data.rank_of(owner(a, d)) != data.rank_of(w));
                    table.inputs.push((d, remote));
                    match near_bit(p, d) {
                        Some(k) => near |= 1 << k,
                        None => far = true,
                    }
                }
                // A member that reads only this rank's row, near it, keeps no inputs: its
                // reads go to the row without a lookup (the inputs are the chunk's largest
                // table, and a lookup in it was a cache miss a task), checked by its bits.
                if !far && table.inputs[at as usize..].iter().all(|x| x.1.is_none()) {
                    table.inputs.truncate(at as usize);
                }
                let inputs = (at, table.inputs.len() as u32);
                table.members.push(Member {
                    array: a,
                    item: p,
                    inputs,
                    near,
                });
            }
            let (data2, filled2) = (data.clone(), filled.clone());
            let mine = first_member..table.members.len();
            let id = b.task(w, move |&first, got: &Received| {
                let table = filled2.get().expect("filled once the chunk is built");
                data2.run(first + dt, table, mine.clone(), got)
            });
            preds.sort_unstable_by_key(|i| i.0);
            preds.dedup();
            for &from in &preds {
                let (fw, ft, fitems) = &tasks[from.0 as usize];
                // Within a rank nothing is packed: no closure to build.
                if data.rank_of(*fw) == data.rank_of(w) {
                    local = true;
                    b.edge(from, id);
                } else {
                    b.edge_carrying(from, id, total(fitems), packed(fitems, ft - t0));
                }
            }
            // After the last users of the slots it reuses (this rank's readers of the values
            // it overwrites, or without them their writers) and of its items' states.
            let mut guards: Vec<Id> = Vec::new();
            for &(a, p) in &items {
                // The slot's last value: an item need not be live at every step. Readers
                // of an older one are in an earlier chunk, which ran before this one.
                let last = (1..).map(|k| t - 2 * k).take_while(|&s| s + 1 >= t0);
                if let Some(s) = last.into_iter().find(|&s| data.live(a, s).contains(&p)) {
                    let readers: Vec<Id> = (data.pattern.readers(a, s + 1, p))
                        .filter(|&r| data.rank_of(owner(a, r)) == data.rank_of(w))
                        .filter_map(|r| ids.get(&(s + 1, a, r)).map(|x| x.0))
                        .collect();
                    match readers.is_empty() {
                        true => guards.extend(ids.get(&(s, a, p)).map(|x| x.0)),
                        false => guards.extend(readers),
                    }
                }
                guards.extend(touched.insert((a, p), id));
            }
            guards.sort_unstable_by_key(|i| i.0);
            guards.dedup();
            // (An edge also among `preds` is kept once when the chunk compiles.)
            for &from in &guards {
                b.edge(from, id);
            }
            wait_unless(&mut b, after, id, local || !guards.is_empty());
            let items: Items = items.into();
            for (a, p, span) in spans(&data.arrays, &items) {
                ids.insert((t, a, p), (id, span.start));
            }
            tasks.push((w, t, items));
        }
    }
    let _ = filled.set(table);
    // What another rank reads at the next chunk's first step: a task there writes the items
    // of the last step's task into that rank's copies of their slots, after its readers of
    // the old values here.
    let (last, next) = (t0 + len - 1, t0 + len);
    let ends = (tasks.iter().enumerate()).filter(|(_, (_, t, _))| *t == last);
    for (from, (w, _, items)) in ends.map(|(i, task)| (Id(i as u32), task.clone())) {
        let mut readers: Vec<usize> = (items.iter())
            .flat_map(|&(a, q)| data.pattern.readers(a, next, q).map(move |r| owner(a, r)))
            .filter(|_| next < data.steps)
            .filter(|&r| data.rank_of(r) != data.rank_of(w))
            .collect();
        readers.sort_unstable();
        readers.dedup_by_key(|r| data.rank_of(*r));
        for worker in readers {
            let (data2, dt, written) = (data.clone(), last - t0, items.clone());
            let mirror = b.task(worker, move |&first, got: &Received| {
                let value = got.from(from).expect("items from another rank");
                for (a, q, span) in spans(&data2.arrays, &written) {
                    let row = &data2.arrays[a].rows[((first + dt) % 2) as usize];
                    // SAFETY: ordered after this rank's readers of the slot's old value (in
                    // this chunk), and before the next chunk's (which waits for this one).
                    unsafe { row.write(q) }.copy_from_slice(&value[span]);
                }
            });
            b.edge_carrying(from, mirror, total(&items), packed(&items, last - t0));
            let r = data.rank_of(worker);
            let mut guards: Vec<Id> = (items.iter())
                .filter(|_| t0 > 0)
                .flat_map(|&(a, q)| data.pattern.readers(a, t0, q).map(move |p| (a, p)))
                .filter(|&(a, p)| data.rank_of(owner(a, p)) == r)
                .filter_map(|(a, p)| ids.get(&(t0, a, p)).map(|x| x.0))
                .collect();
            guards.sort_unstable_by_key(|i| i.0);
            guards.dedup();
            for &reader in &guards {
                b.edge(reader, mirror);
            }
            wait_unless(&mut b, after, mirror, !guards.is_empty());
        }
    }
    b
}

/// Each of `items` with where it lies in the task's items (array order).
fn spans<'a, S>(
    arrays: &'a [super::Array<S>],
    items: &'a [(usize, usize)],
) -> impl Iterator<Item = (usize, usize, std::ops::Range<usize>)> + 'a {
    items.iter().scan(0, |at, &(a, p)| {
        let n = arrays[a].bytes;
        *at += n;
        Some((a, p, *at - n..*at))
    })
}

/// Task `id` waits for the chunk before (`after`) unless it waits for a task of its own rank
/// in this chunk, which does (a precondition per task was an external message per task).
fn wait_unless(b: &mut ShardedBuilder<i64>, after: PreId, id: Id, local: bool) {
    if !local {
        b.wait_for(after, id);
    }
}
