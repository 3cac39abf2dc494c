//! Selectors across ranks: PEs on other processes are reached through a [`Link`]: the job's
//! network ([`crate::job::Job`] is one), or any other (tests use memory). The actor layer
//! owns this trait so that a selector depends on no particular network.
//!
//! **PEs.** Every rank runs the same number of workers `W`; PE `rank × W + w` is worker `w`
//! of `rank`. A batch for a PE of another rank is encoded (messages must be plain bytes:
//! [`bytemuck::Pod`]) and sent as one network message from the sending worker; the receiving
//! rank's PEs poll the link whenever they look for messages and push arriving batches into
//! the destination PE's inbox, exactly where a batch from a local PE lands.
//!
//! **Termination over ranks** (the four-counter method, Mattern 1987). Each rank counts, per
//! mailbox, what its PEs sent (published before handing over, as in one process) and
//! processed, and how many of its PEs are done. Rank 0 runs waves for a mailbox (or a group
//! of mutually feeding mailboxes) once its own PEs are done with it: it asks every rank for
//! (ready, processed, sent) — ready when all of that rank's PEs are done, processed read
//! before sent — and sums the answers. When two consecutive waves were ready everywhere and
//! gave the same sums with sent = processed, the messages received by the second wave equal
//! those sent by the first: nothing was in flight and nothing could send again, so rank 0
//! tells every rank that the mailbox is over. A wave that disagrees is followed by another.

use super::termination::Termination;
use crate::sync::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// How the PEs of one selector on different ranks reach each other: the network as the actor
/// layer needs it. One [`Link`] serves one selector run at a time.
///
/// ```
/// use tactor::actor::Link;
/// /// One rank alone: nothing ever arrives.
/// struct Alone;
/// impl Link for Alone {
///     fn rank(&self) -> usize { 0 }
///     fn ranks(&self) -> usize { 1 }
///     fn send(&self, _worker: usize, _rank: usize, _bytes: Vec<u8>) { unreachable!() }
///     fn poll(&self, _worker: usize, _deliver: &mut dyn FnMut(usize, Vec<u8>)) -> bool { false }
///     fn abort(&self) -> ! { std::process::abort() }
/// }
/// assert_eq!(Alone.ranks(), 1);
/// ```
pub trait Link: Send + Sync {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// How many ranks run the selector.
    fn ranks(&self) -> usize;
    /// Sends `bytes` to `rank`, from worker `worker` (a link may map workers to channels).
    /// Messages from one worker to one rank arrive in the order sent.
    fn send(&self, worker: usize, rank: usize, bytes: Vec<u8>);
    /// Hands what arrived to `deliver(source rank, bytes)`, within a small budget; called by
    /// worker `worker` whenever its PE looks for messages. Returns whether anything arrived.
    fn poll(&self, worker: usize, deliver: &mut dyn FnMut(usize, Vec<u8>)) -> bool;
    /// Ends every rank of the job (a PE panicked: the others would wait forever).
    fn abort(&self) -> !;
    /// The longest message the link sends at once (eagerly); longer ones may cost it a
    /// rendezvous. Batches for other ranks are cut to fit it, header included.
    fn eager_bytes(&self) -> usize {
        usize::MAX
    }
}

/// Arrivals one poll of the job's link hands over at most, so that a PE gets back to its own
/// work.
const LINK_BUDGET: usize = 64;

/// The job's network as a selector's link: every selector message on the actors' port, from
/// worker `w` on channel `w` (modulo the channels), so that each PE polls its own channel.
impl Link for crate::job::Job {
    fn rank(&self) -> usize {
        crate::job::Job::rank(self)
    }

    fn ranks(&self) -> usize {
        crate::job::Job::ranks(self)
    }

    fn send(&self, worker: usize, rank: usize, bytes: Vec<u8>) {
        crate::job::Job::send(self, worker, rank, crate::job::PORT_ACTORS, bytes)
    }

    fn poll(&self, worker: usize, deliver: &mut dyn FnMut(usize, Vec<u8>)) -> bool {
        let mut any = false;
        // Messages another thread progressed in passing (a collective's wait) come first:
        // they are older than what is still on the wire.
        for m in self.take_parked(crate::job::PORT_ACTORS) {
            deliver(m.source, m.data);
            any = true;
        }
        let channel = worker % self.channels();
        self.progress_channel(channel, LINK_BUDGET, &mut |m| {
            if m.port != crate::job::PORT_ACTORS {
                return Some(m);
            }
            deliver(m.source, m.data);
            any = true;
            None
        });
        any
    }

    fn abort(&self) -> ! {
        crate::job::Job::abort(self)
    }

    fn eager_bytes(&self) -> usize {
        tactor_comm::INLINE_LIMIT
    }
}

/// Message kinds on the wire (first word of the 16-byte header).
const BATCH: u32 = 0;
const PROBE: u32 = 1;
const REPLY: u32 = 2;
const OVER: u32 = 3;

/// Header bytes: four little-endian words.
const HEADER: usize = 16;

fn header(words: [u32; 4], extra: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + extra);
    for w in words {
        b.extend_from_slice(&w.to_le_bytes());
    }
    b
}

fn word(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().expect("four bytes"))
}

fn long(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

/// Rank 0's wave for one unit (a mailbox, or a group by its first member).
#[derive(Default, Clone, Debug)]
struct Wave {
    running: bool,
    number: u32,
    answers: usize,
    ready: bool,
    sums: (u64, u64),
    last: Option<(u64, u64)>,
}

/// A selector's network side: the link, how its messages become bytes, and termination
/// over ranks.
pub(crate) struct Net<M> {
    pub(crate) link: Arc<dyn Link>,
    encode: fn(&[M], &mut Vec<u8>),
    decode: fn(&[u8]) -> Vec<M>,
    /// Per mailbox: terminated on every rank (told by rank 0).
    over: Vec<AtomicBool>,
    /// Rank 0: the waves, per unit.
    waves: Mutex<Vec<Wave>>,
}

/// What arrived: a batch for a local PE (by local index), or nothing for the caller.
pub(crate) enum Arrival<M> {
    Batch {
        local: usize,
        mailbox: u32,
        from: u32,
        msgs: Vec<M>,
    },
    Control,
}

impl<M: bytemuck::Pod> Net<M> {
    pub(crate) fn new(link: Arc<dyn Link>, mailboxes: usize) -> Net<M> {
        assert!(
            std::mem::size_of::<M>() > 0,
            "messages that cross ranks must have a size"
        );
        Net {
            link,
            encode: |msgs, out| out.extend_from_slice(bytemuck::cast_slice(msgs)),
            decode: |bytes| {
                // Copied into place: the network's buffer need not be aligned for `M`.
                let n = bytes.len() / std::mem::size_of::<M>();
                let mut msgs = vec![M::zeroed(); n];
                bytemuck::cast_slice_mut::<M, u8>(&mut msgs).copy_from_slice(
                    &bytes[..bytes.len() - bytes.len() % std::mem::size_of::<M>()],
                );
                msgs
            },
            over: (0..mailboxes).map(|_| AtomicBool::new(false)).collect(),
            waves: Mutex::new(vec![Wave::default(); mailboxes]),
        }
    }
}

impl<M> Net<M> {
    /// Whether `m` terminated on every rank.
    pub(crate) fn over(&self, m: usize) -> bool {
        self.over[m].load(Ordering::Acquire)
    }

    /// Sends a batch for PE `to` (global) on `rank`.
    /// The most messages of `size` bytes a batch for another rank holds, `wanted` at most.
    pub(crate) fn batch_cap(&self, size: usize, wanted: usize) -> usize {
        let room = self.link.eager_bytes().saturating_sub(HEADER);
        wanted.min(room / size.max(1)).max(1)
    }

    pub(crate) fn send_batch(
        &self,
        worker: usize,
        rank: usize,
        mailbox: usize,
        from: usize,
        to_local: usize,
        msgs: &[M],
    ) {
        let bytes = std::mem::size_of_val(msgs);
        let mut b = header([BATCH, mailbox as u32, from as u32, to_local as u32], bytes);
        (self.encode)(msgs, &mut b);
        self.link.send(worker, rank, b);
    }

    /// Decodes one network message; control messages are handled here.
    pub(crate) fn arrive(
        &self,
        worker: usize,
        source: usize,
        bytes: Vec<u8>,
        units: &[Vec<usize>],
        term: &Termination,
    ) -> Arrival<M> {
        match word(&bytes, 0) {
            BATCH => Arrival::Batch {
                local: word(&bytes, 3) as usize,
                mailbox: word(&bytes, 1),
                from: word(&bytes, 2),
                msgs: (self.decode)(&bytes[HEADER..]),
            },
            PROBE => {
                let (unit, number) = (word(&bytes, 1) as usize, word(&bytes, 2));
                let (ready, p, s) = local_counts(term, &units[unit]);
                let mut b = header([REPLY, unit as u32, number, u32::from(ready)], 16);
                b.extend_from_slice(&p.to_le_bytes());
                b.extend_from_slice(&s.to_le_bytes());
                self.link.send(worker, source, b);
                Arrival::Control
            }
            REPLY => {
                let (unit, number, ready) = (
                    word(&bytes, 1) as usize,
                    word(&bytes, 2),
                    word(&bytes, 3) != 0,
                );
                self.answer(
                    worker,
                    unit,
                    number,
                    ready,
                    long(&bytes, 16),
                    long(&bytes, 24),
                    units,
                );
                Arrival::Control
            }
            OVER => {
                for &m in &units[word(&bytes, 1) as usize] {
                    self.over[m].store(true, Ordering::Release);
                }
                Arrival::Control
            }
            other => panic!("a selector message of unknown kind {other} from rank {source}"),
        }
    }

    /// Rank 0: starts a wave for `unit` if none is running and it is not over. The caller
    /// checked that this rank's PEs are done with it (and, for a group, that the mailboxes
    /// feeding it from outside are over).
    pub(crate) fn start_wave(
        &self,
        worker: usize,
        unit: usize,
        units: &[Vec<usize>],
        term: &Termination,
    ) {
        let Ok(mut waves) = self.waves.try_lock() else {
            return;
        };
        let w = &mut waves[unit];
        if w.running || self.over(unit) {
            return;
        }
        w.running = true;
        w.number = w.number.wrapping_add(1);
        let (ready, p, s) = local_counts(term, &units[unit]);
        (w.answers, w.ready, w.sums) = (1, ready, (p, s));
        let number = w.number;
        let ranks = self.link.ranks();
        if ranks == 1 {
            return self.conclude(worker, unit, waves, units);
        }
        drop(waves);
        for r in 1..ranks {
            self.link
                .send(worker, r, header([PROBE, unit as u32, number, 0], 0));
        }
    }

    /// Rank 0: one rank's answer to wave `number` of `unit`.
    #[allow(clippy::too_many_arguments)]
    fn answer(
        &self,
        worker: usize,
        unit: usize,
        number: u32,
        ready: bool,
        processed: u64,
        sent: u64,
        units: &[Vec<usize>],
    ) {
        let mut waves = self.waves.lock().unwrap_or_else(|p| p.into_inner());
        let w = &mut waves[unit];
        if !w.running || w.number != number {
            return;
        }
        w.answers += 1;
        w.ready &= ready;
        w.sums.0 += processed;
        w.sums.1 += sent;
        if w.answers == self.link.ranks() {
            self.conclude(worker, unit, waves, units);
        }
    }

    /// Rank 0: every rank answered the running wave of `unit`: over, or another wave later.
    fn conclude(
        &self,
        worker: usize,
        unit: usize,
        mut waves: std::sync::MutexGuard<'_, Vec<Wave>>,
        units: &[Vec<usize>],
    ) {
        let w = &mut waves[unit];
        w.running = false;
        let sums = w.sums;
        let quiet = w.ready && sums.0 == sums.1;
        let again = w.last == Some(sums);
        w.last = if quiet { Some(sums) } else { None };
        if quiet && again {
            // Over before the waves are unlocked: a PE of this rank that locks them next
            // sees it and starts no wave after this one. Such a wave sent a second `OVER`
            // and probes that no wave of this selector awaited: arriving on a rank that had
            // gone on to the job's next selector, they ended it early or spoiled its waves
            // (`bale randperm` on 3 ranks hung).
            for &m in &units[unit] {
                self.over[m].store(true, Ordering::Release);
            }
            drop(waves);
            for r in 1..self.link.ranks() {
                self.link
                    .send(worker, r, header([OVER, unit as u32, 0, 0], 0));
            }
        }
    }
}

/// This rank's (ready, processed, sent) for the mailboxes of a unit: processed read first.
fn local_counts(term: &Termination, members: &[usize]) -> (bool, u64, u64) {
    let ready = members.iter().all(|&m| term.all_done(m));
    let processed = members.iter().map(|&m| term.processed_count(m)).sum();
    let sent = members.iter().map(|&m| term.sent_count(m)).sum();
    (ready, processed, sent)
}

// Safe code exploring many thousand states: not for loom's or Miri's interpreters.
#[cfg(all(test, not(loom), not(miri)))]
mod model;
