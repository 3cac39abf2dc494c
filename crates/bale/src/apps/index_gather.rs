//! Index-gather: every PE reads `requests` random entries of a table distributed over the
//! PEs (`table` entries each, entry `g` holding `-(g + 1)`): a request to the owner, whose
//! handler replies to the requester (a reply mailbox that closes by itself).

use super::{on_my_pes, on_pes, table_bytes, Outcome, Pes};
use crate::baseline::Exstack;
use crate::rng::Stream;
use std::sync::Mutex;
use std::time::Instant;
use tactor::actor::{Handler, Outbox, Spec};
use tactor::Runtime;

/// Sizes per PE, and the seed.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Reads each PE makes.
    pub requests: u64,
    /// Table entries each PE owns.
    pub table: u64,
    /// Seed of the random streams.
    pub seed: u64,
}

/// A request (mailbox 0: `[index on the owner, slot]`) or a reply (mailbox 1: `[value,
/// slot]`): plain words, so that messages cross ranks as they are.
type Msg = [u64; 2];

struct Pe {
    table: Vec<i64>,
    got: Vec<i64>,
}

impl Handler<Msg> for Pe {
    #[inline]
    fn process(&mut self, mailbox: usize, m: Msg, from: usize, out: &mut Outbox<'_, Msg>) {
        if mailbox == 0 {
            let value = self.table[m[0] as usize];
            out.send(1, [value as u64, m[1]], from);
        } else {
            self.got[m[1] as usize] = m[0] as i64;
        }
    }

    #[inline(always)]
    fn ahead(&self, mailbox: usize, m: &Msg) {
        // A request reads a random table entry; a reply writes its slot.
        if mailbox == 0 {
            if let Some(v) = self.table.get(m[0] as usize) {
                tactor::hint::fetch(v);
            }
        } else if let Some(v) = self.got.get(m[1] as usize) {
            tactor::hint::fetch(v);
        }
    }
}

fn validate(p: &Params, pes: usize) -> Result<(), String> {
    super::check_table(p.table)?;
    if p.requests > u64::from(u32::MAX) {
        return Err(format!(
            "-n {}: at most {} requests per PE",
            p.requests,
            u32::MAX
        ));
    }
    // Both are at most u32::MAX: the sum fits.
    table_bytes(p.table + 2 * p.requests, pes, "a table and targets of").map(|_| ())
}

/// `n` zeros in memory already written: the gathered values' array is set up before the
/// timed part, as Bale's target array is (`vec![0; n]` would map zero pages lazily and fault
/// them in while the replies land).
#[allow(clippy::slow_vector_initialization)] // the writing is the point
fn written(n: usize) -> Vec<i64> {
    let mut v = Vec::with_capacity(n);
    v.resize(n, 0);
    v
}

/// The value of global entry `g`.
fn value(g: u64) -> i64 {
    -(g as i64 + 1)
}

/// The initial table of PE `pe`: entry `j` is global entry `j * pes + pe`.
fn table(p: &Params, pes: usize, pe: usize) -> Vec<i64> {
    (0..p.table)
        .map(|j| value(j * pes as u64 + pe as u64))
        .collect()
}

/// The global table entries PE `pe` requests, in order. Every model and the check draw from
/// this one stream.
fn requests(p: &Params, pes: usize, pe: usize) -> impl Iterator<Item = u64> {
    let mut s = Stream::new(p.seed, pe);
    let total = p.table * pes as u64;
    (0..p.requests).map(move |_| s.below(total))
}

/// Global entry `g` lives on PE `g % pes` at `g / pes`.
fn place(g: u64, pes: usize) -> (usize, u32) {
    ((g % pes as u64) as usize, (g / pes as u64) as u32)
}

fn check(p: &Params, pes: usize, got: &[Vec<i64>]) -> Result<(), String> {
    check_from(p, pes, 0, got.iter().map(|g| &g[..]))
}

/// Checks what PEs `first..` gathered.
fn check_from<'a>(
    p: &Params,
    pes: usize,
    first: usize,
    got: impl Iterator<Item = &'a [i64]>,
) -> Result<(), String> {
    for (pe, got) in (first..).zip(got) {
        for ((slot, &v), g) in got.iter().enumerate().zip(requests(p, pes, pe)) {
            let want = value(g);
            if v != want {
                return Err(format!(
                    "index-gather: PE {pe} request {slot} got {v}, expected {want}"
                ));
            }
        }
    }
    Ok(())
}

fn outcome(p: &Params, model: &'static str, pes: usize, seconds: f64) -> Outcome {
    Outcome::new(
        "index-gather",
        model,
        pes,
        seconds,
        p.requests * pes as u64,
        "requests",
    )
}

/// Index-gather on a selector, collectively over `pes`: requests in mailbox 0, replies in
/// mailbox 1 (fed by 0, so it closes by itself); each rank checks what its PEs gathered.
pub fn selector(pes: &Pes, p: &Params) -> Result<Outcome, String> {
    let n = pes.count();
    validate(p, n)?;
    let mine = pes.mine();
    let states = mine
        .clone()
        .map(|pe| Pe {
            table: table(p, n, pe),
            got: written(p.requests as usize),
        })
        .collect();
    let spec = Spec::new(2).fed_by(1, &[0]);
    let run = || {
        pes.select(&spec, states, |pe| {
            for (slot, g) in requests(p, n, pe.pe()).enumerate() {
                let (owner, index) = place(g, n);
                pe.send(0, [u64::from(index), slot as u64], owner);
            }
        })
    };
    let check = |out: Vec<Pe>| check_from(p, n, mine.start, out.iter().map(|s| &s.got[..]));
    let seconds = pes.timed(run, check)?;
    Ok(outcome(p, pes.model(), n, seconds))
}

/// Each PE's targets, filled by `fill(pe, targets)` on the PEs.
fn gather_on_pes(
    rt: &Runtime,
    p: &Params,
    fill: impl Fn(usize, &mut [i64]) + Sync,
) -> Vec<Vec<i64>> {
    let got: Vec<Mutex<Vec<i64>>> = (0..rt.workers())
        .map(|_| Mutex::new(written(p.requests as usize)))
        .collect();
    on_pes(rt, |me| {
        let mut g = got[me].lock().unwrap_or_else(|e| e.into_inner());
        fill(me, &mut g);
    });
    got.into_iter()
        .map(|g| g.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

/// Index-gather in the AGP model: one read of the owner's table per request.
pub fn agp(rt: &Runtime, p: &Params) -> Result<Outcome, String> {
    let pes = rt.workers();
    validate(p, pes)?;
    let tables: Vec<Vec<i64>> = (0..pes).map(|pe| table(p, pes, pe)).collect();
    let start = Instant::now();
    let got = gather_on_pes(rt, p, |me, got| {
        for (slot, g) in got.iter_mut().zip(requests(p, pes, me)) {
            let (owner, index) = place(g, pes);
            *slot = tables[owner][index as usize];
        }
    });
    let o = outcome(p, "agp", pes, start.elapsed().as_secs_f64());
    check(p, pes, &got)?;
    Ok(o)
}

/// Index-gather in the exstack style, collectively over `pes`: each phase exchanges a buffer
/// of requests per destination, then the replies to them.
pub fn exstack(pes: &Pes, p: &Params) -> Result<Outcome, String> {
    let n = pes.count();
    validate(p, n)?;
    let mine = pes.mine();
    let tables: Vec<Vec<i64>> = mine.clone().map(|pe| table(p, n, pe)).collect();
    // Request: [index, slot, requester]; reply: [value, slot].
    let asks = Exstack::<[u32; 3]>::new(pes);
    let replies = Exstack::<[u64; 2]>::new(pes);
    // A phase's replies to a PE answer its requests of that phase: both fit a buffer.
    let cap = asks.capacity().min(replies.capacity());
    let got: Vec<Mutex<Vec<i64>>> = mine
        .clone()
        .map(|_| Mutex::new(written(p.requests as usize)))
        .collect();
    let run = || {
        on_my_pes(pes, |me| {
            let l = me - mine.start;
            let mut got = got[l].lock().unwrap_or_else(|e| e.into_inner());
            let mut stream = requests(p, n, me);
            let (mut out, mut inbox) = (vec![Vec::with_capacity(cap); n], Vec::new());
            let (mut back, mut answers) = (vec![Vec::with_capacity(cap); n], Vec::new());
            let mut slot = 0u64;
            loop {
                while slot < p.requests {
                    let g = stream.next().expect("one request per slot");
                    let (owner, index) = place(g, n);
                    out[owner].push([index, slot as u32, me as u32]);
                    slot += 1;
                    if out[owner].len() == cap {
                        break;
                    }
                }
                let more = asks.exchange(me, &mut out, &mut inbox, slot < p.requests);
                for [index, sl, from] in inbox.drain(..) {
                    let value = tables[l][index as usize];
                    back[from as usize].push([value as u64, u64::from(sl)]);
                }
                replies.exchange(me, &mut back, &mut answers, false);
                for [v, sl] in answers.drain(..) {
                    got[sl as usize] = v as i64;
                }
                if !more {
                    break;
                }
            }
        });
        got.into_iter()
            .map(|g| g.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect::<Vec<Vec<i64>>>()
    };
    let check = |got: Vec<Vec<i64>>| check_from(p, n, mine.start, got.iter().map(|g| &g[..]));
    let seconds = pes.timed(run, check)?;
    Ok(outcome(p, "exstack", n, seconds))
}
