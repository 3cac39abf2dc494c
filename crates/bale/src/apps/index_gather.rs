//! Index-gather: every PE reads `requests` random entries of a table distributed over the
//! PEs (`table` entries each, entry `g` holding `-(g + 1)`): a request to the owner, whose
//! handler replies to the requester (a reply mailbox that closes by itself).

use super::{table_bytes, Outcome};
use crate::rng::Stream;
use std::time::Instant;
use tactor::actor::{self, Handler, Outbox, Spec};
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

/// A request (mailbox 0) or a reply (mailbox 1).
#[derive(Clone, Copy)]
enum Msg {
    Request { index: u32, slot: u32 },
    Reply { value: i64, slot: u32 },
}

struct Pe {
    table: Vec<i64>,
    got: Vec<i64>,
}

impl Handler<Msg> for Pe {
    #[inline]
    fn process(&mut self, _mailbox: usize, m: Msg, from: usize, out: &mut Outbox<'_, Msg>) {
        match m {
            Msg::Request { index, slot } => {
                let value = self.table[index as usize];
                out.send(1, Msg::Reply { value, slot }, from);
            }
            Msg::Reply { value, slot } => self.got[slot as usize] = value,
        }
    }
}

/// Index-gather on a selector: requests in mailbox 0, replies in mailbox 1.
pub fn selector(rt: &Runtime, p: &Params) -> Result<Outcome, String> {
    let pes = rt.workers();
    if p.table == 0 || p.table > u64::from(u32::MAX) {
        return Err(format!(
            "-T {}: the table needs 1 to {} entries per PE",
            p.table,
            u32::MAX
        ));
    }
    if p.requests > u64::from(u32::MAX) {
        return Err(format!(
            "-n {}: at most {} requests per PE",
            p.requests,
            u32::MAX
        ));
    }
    table_bytes(p.table + 2 * p.requests, pes, "a table and targets of")?;
    let states = (0..pes)
        .map(|pe| Pe {
            table: (0..p.table)
                .map(|j| -((j * pes as u64 + pe as u64) as i64 + 1))
                .collect(),
            got: vec![0; p.requests as usize],
        })
        .collect();
    let spec = Spec::new(2).fed_by(1, &[0]);
    let start = Instant::now();
    let out = actor::run(rt, &spec, states, |pe| {
        let mut s = Stream::new(p.seed, pe.pe());
        let total = p.table * pes as u64;
        for slot in 0..p.requests {
            let g = s.below(total);
            let req = Msg::Request {
                index: (g / pes as u64) as u32,
                slot: slot as u32,
            };
            pe.send(0, req, (g % pes as u64) as usize);
        }
    });
    let seconds = start.elapsed().as_secs_f64();
    for (pe, st) in out.iter().enumerate() {
        let mut s = Stream::new(p.seed, pe);
        let total = p.table * pes as u64;
        for (slot, &v) in st.got.iter().enumerate() {
            let want = -(s.below(total) as i64 + 1);
            if v != want {
                return Err(format!(
                    "index-gather: PE {pe} request {slot} got {v}, expected {want}"
                ));
            }
        }
    }
    let ops = p.requests * pes as u64;
    Ok(Outcome::new(
        "index-gather",
        "selector",
        pes,
        seconds,
        ops,
        "requests",
    ))
}
