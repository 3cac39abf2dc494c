//! Histogram: every PE adds 1 to `updates` random entries of a table distributed over the
//! PEs (`table` entries each). One message per update, to the entry's owner.

use super::{on_my_pes, on_pes, table_bytes, Outcome, Pes};
use crate::rng::Stream;
use std::time::Instant;
use tactor::actor::{self, Handler, Lambdas, Outbox, Spec};
use tactor::Runtime;

/// Sizes per PE, and the seed.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Updates each PE makes.
    pub updates: u64,
    /// Table entries each PE owns.
    pub table: u64,
    /// Seed of the random streams.
    pub seed: u64,
}

/// Global entry `g` lives on PE `g % pes` at `g / pes`.
#[inline]
fn place(g: u64, pes: usize) -> (usize, usize) {
    ((g % pes as u64) as usize, (g / pes as u64) as usize)
}

/// The updates PE `pe` makes, in order: (owner, index on the owner) of each. Every model and
/// the check draw from this one stream.
fn updates(p: &Params, pes: usize, pe: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut s = Stream::new(p.seed, pe);
    let total = p.table * pes as u64;
    (0..p.updates).map(move |_| place(s.below(total), pes))
}

/// A PE's part of the table; a message is a local index.
struct Counts(Vec<u64>);

impl Handler<u32> for Counts {
    #[inline]
    fn process(&mut self, _mailbox: usize, i: u32, _from: usize, _out: &mut Outbox<'_, u32>) {
        self.0[i as usize] += 1;
    }
}

fn check(p: &Params, pes: usize, tables: &[Vec<u64>]) -> Result<(), String> {
    check_from(p, pes, 0, tables)
}

/// Checks the tables of PEs `first..first + tables.len()` against every PE's updates.
fn check_from(p: &Params, pes: usize, first: usize, tables: &[Vec<u64>]) -> Result<(), String> {
    let mut want = vec![vec![0u64; p.table as usize]; tables.len()];
    for pe in 0..pes {
        for (o, i) in updates(p, pes, pe) {
            if let Some(l) = o.checked_sub(first).filter(|&l| l < tables.len()) {
                want[l][i] += 1;
            }
        }
    }
    for (l, (got, want)) in tables.iter().zip(&want).enumerate() {
        if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
            return Err(format!(
                "histogram: PE {} entry {i} counts {} updates, expected {}",
                first + l,
                got[i],
                want[i]
            ));
        }
    }
    Ok(())
}

fn outcome(p: &Params, model: &'static str, pes: usize, seconds: f64) -> Outcome {
    let ops = p.updates * pes as u64;
    Outcome::new("histogram", model, pes, seconds, ops, "updates")
}

fn validate(p: &Params, pes: usize) -> Result<(), String> {
    super::check_table(p.table)?;
    if p.updates.checked_mul(pes as u64).is_none() {
        return Err(format!(
            "-n {}: {} updates per PE on {pes} PEs overflow a 64-bit count",
            p.updates, p.updates
        ));
    }
    table_bytes(p.table, pes, "a table of").map(|_| ())
}

/// Histogram on a selector with a typed handler, collectively over `pes`: each rank checks
/// its own PEs' tables against every PE's update stream; the time is the slowest rank's.
pub fn selector(pes: &Pes, p: &Params) -> Result<Outcome, String> {
    let n = pes.count();
    validate(p, n)?;
    let mine = pes.mine();
    let states = mine
        .clone()
        .map(|_| Counts(vec![0; p.table as usize]))
        .collect();
    let run = || {
        pes.select(&Spec::new(1), states, |pe| {
            for (o, i) in updates(p, n, pe.pe()) {
                pe.send(0, i as u32, o);
            }
        })
    };
    let check = |out: Vec<Counts>| {
        let tables: Vec<Vec<u64>> = out.into_iter().map(|c| c.0).collect();
        check_from(p, n, mine.start, &tables)
    };
    let seconds = pes.timed(run, check)?;
    Ok(outcome(p, pes.model(), n, seconds))
}

/// Histogram with closures as messages (the seed's lambda style).
pub fn lambda(rt: &Runtime, p: &Params) -> Result<Outcome, String> {
    let pes = rt.workers();
    validate(p, pes)?;
    let states = (0..pes)
        .map(|_| Lambdas(vec![0u64; p.table as usize]))
        .collect();
    let start = Instant::now();
    let out = actor::run(rt, &Spec::new(1), states, |pe| {
        for (o, i) in updates(p, pes, pe.pe()) {
            // A u32 capture, as the typed message: the closure is the message, and its
            // size sets how many fit a buffer.
            let i = i as u32;
            pe.send(0, move |t: &mut Vec<u64>| t[i as usize] += 1, o);
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let tables: Vec<Vec<u64>> = out.into_iter().map(|c| c.0).collect();
    check(p, pes, &tables)?;
    Ok(outcome(p, "lambda", pes, seconds))
}

/// Histogram in the AGP model: one atomic add on the owner's table per update.
pub fn agp(rt: &Runtime, p: &Params) -> Result<Outcome, String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    let pes = rt.workers();
    validate(p, pes)?;
    let tables: Vec<Vec<AtomicU64>> = (0..pes)
        .map(|_| (0..p.table).map(|_| AtomicU64::new(0)).collect())
        .collect();
    let start = Instant::now();
    on_pes(rt, |me| {
        for (o, i) in updates(p, pes, me) {
            tables[o][i].fetch_add(1, Ordering::Relaxed);
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    let tables: Vec<Vec<u64>> = tables
        .into_iter()
        .map(|t| t.into_iter().map(AtomicU64::into_inner).collect())
        .collect();
    check(p, pes, &tables)?;
    Ok(outcome(p, "agp", pes, seconds))
}

/// Histogram in the exstack style: per-destination buffers exchanged in bulk-synchronous
/// phases, collectively over `pes`.
pub fn exstack(pes: &Pes, p: &Params) -> Result<Outcome, String> {
    let n = pes.count();
    validate(p, n)?;
    let ex = crate::baseline::Exstack::<u32>::new(pes);
    let cap = ex.capacity();
    let mine = pes.mine();
    let tables: Vec<std::sync::Mutex<Vec<u64>>> = mine
        .clone()
        .map(|_| std::sync::Mutex::new(vec![0; p.table as usize]))
        .collect();
    let run = || {
        on_my_pes(pes, |me| {
            let mut table = tables[me - mine.start]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let mut stream = updates(p, n, me).peekable();
            let (mut out, mut inbox) = (vec![Vec::with_capacity(cap); n], Vec::new());
            loop {
                for (o, i) in stream.by_ref() {
                    out[o].push(i as u32);
                    if out[o].len() == cap {
                        break;
                    }
                }
                let more = ex.exchange(me, &mut out, &mut inbox, stream.peek().is_some());
                for i in inbox.drain(..) {
                    table[i as usize] += 1;
                }
                if !more {
                    break;
                }
            }
        });
        tables
            .into_iter()
            .map(|t| t.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect::<Vec<Vec<u64>>>()
    };
    let seconds = pes.timed(run, |tables| check_from(p, n, mine.start, &tables))?;
    Ok(outcome(p, "exstack", n, seconds))
}
