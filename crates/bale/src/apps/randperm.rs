//! Random permutation by dart throwing (Bale's `randperm`): the values `0..n × PEs` start
//! `n` per PE; each PE throws each of its values at a random slot of a target array twice
//! that size (`2n` slots per PE). The owner of the slot keeps the dart if the slot is empty
//! and sends it back otherwise; bounced darts are thrown again, round after round, until all
//! have landed. The permutation is the targets, emptied of their holes, in PE order. Which
//! darts bounce depends on arrival order, so the check is Bale's: every value appears
//! exactly once.

use super::{on_my_pes, on_pes, table_bytes, Outcome, Pes};
use crate::rng::Stream;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Instant;
use tactor::actor::{Handler, Outbox, Spec};
use tactor::Runtime;

/// Size per PE, and the seed.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Values each PE starts with.
    pub per_pe: u64,
    /// Seed of the random streams.
    pub seed: u64,
}

/// An empty slot of a target array.
const EMPTY: i64 = -1;

/// Target slots per value: Bale's `lambda` of 2 (few bounces, half the slots empty).
const SLOTS_PER_VALUE: u64 = 2;

/// A dart `[slot on the owner, value]` (mailbox 0), or one sent back `[value, 0]` (mailbox
/// 1): plain words, so that darts cross ranks as they are.
type Msg = [u64; 2];

/// A PE's target slots, the darts that came back to it this round, and its random stream.
struct Pe {
    target: Vec<i64>,
    bounced: Vec<u64>,
    stream: Stream,
}

impl Handler<Msg> for Pe {
    #[inline]
    fn process(&mut self, mailbox: usize, m: Msg, from: usize, out: &mut Outbox<'_, Msg>) {
        if mailbox == 0 {
            let slot = &mut self.target[m[0] as usize];
            if *slot == EMPTY {
                *slot = m[1] as i64;
            } else {
                out.send(1, [m[1], 0], from);
            }
        } else {
            self.bounced.push(m[0]);
        }
    }
}

fn validate(p: &Params, pes: usize) -> Result<(), String> {
    let slots = p.per_pe.checked_mul(SLOTS_PER_VALUE);
    if p.per_pe == 0 || slots.is_none_or(|s| s > u64::from(u32::MAX)) {
        return Err(format!(
            "-n {}: 1 to {} values per PE",
            p.per_pe,
            u64::from(u32::MAX) / SLOTS_PER_VALUE
        ));
    }
    if p.per_pe
        .checked_mul(pes as u64)
        .is_none_or(|n| n > i64::MAX as u64)
    {
        return Err(format!("-n {} × {pes} PEs: too many values", p.per_pe));
    }
    // Targets, the values and their copies in flight.
    table_bytes(
        p.per_pe * (SLOTS_PER_VALUE + 2),
        pes,
        "targets and values of",
    )
    .map(|_| ())
}

/// The values PE `pe` starts with.
fn values(p: &Params, pe: usize) -> impl Iterator<Item = u64> {
    let first = pe as u64 * p.per_pe;
    first..first + p.per_pe
}

/// Where a dart lands: (owner, slot on the owner).
#[inline]
fn aim(s: &mut Stream, p: &Params, pes: usize) -> (usize, u32) {
    let slots = p.per_pe * SLOTS_PER_VALUE;
    let g = s.below(slots * pes as u64);
    ((g / slots) as usize, (g % slots) as u32)
}

/// The permutation: every PE's targets without their holes, in PE order.
fn collect(targets: impl IntoIterator<Item = Vec<i64>>) -> Vec<u64> {
    targets
        .into_iter()
        .flatten()
        .filter(|&v| v != EMPTY)
        .map(|v| v as u64)
        .collect()
}

/// Whether `perm` holds each of `0..perm.len()` exactly once; names the first fault.
pub fn check(perm: &[u64], total: u64) -> Result<(), String> {
    if perm.len() as u64 != total {
        return Err(format!(
            "randperm: {} values landed, expected {total}",
            perm.len()
        ));
    }
    let mut seen = vec![false; perm.len()];
    for (i, &v) in perm.iter().enumerate() {
        match seen.get_mut(v as usize) {
            None => return Err(format!("randperm: position {i} holds {v}, out of range")),
            Some(s) if *s => return Err(format!("randperm: {v} appears twice")),
            Some(s) => *s = true,
        }
    }
    Ok(())
}

fn outcome(p: &Params, model: &'static str, pes: usize, seconds: f64) -> Outcome {
    Outcome::new(
        "randperm",
        model,
        pes,
        seconds,
        p.per_pe * pes as u64,
        "values",
    )
}

/// Random permutation on a selector, collectively over `pes`: darts in mailbox 0, bounced
/// darts in mailbox 1 (fed by mailbox 0, so it closes by itself), one selector run per round
/// of throws until no PE has a dart left. Every rank checks the whole permutation.
pub fn selector(pes: &Pes, p: &Params) -> Result<Outcome, String> {
    let n = pes.count();
    validate(p, n)?;
    let spec = Spec::new(2).fed_by(1, &[0]);
    let states: Vec<Pe> = pes
        .mine()
        .map(|pe| Pe {
            target: vec![EMPTY; (p.per_pe * SLOTS_PER_VALUE) as usize],
            bounced: values(p, pe).collect(),
            stream: Stream::new(p.seed, pe),
        })
        .collect();
    let run = || {
        let mut states = states;
        // Over ranks this is also the barrier between rounds: no rank throws the next
        // round's darts before every rank's selector ended.
        while pes.any(states.iter().any(|s| !s.bounced.is_empty())) {
            states = pes.select(&spec, states, |pe| {
                // Darts bounced during this round are thrown in the next one.
                let darts = std::mem::take(&mut pe.state().bounced);
                let mut s = pe.state().stream.clone();
                for value in darts {
                    let (owner, index) = aim(&mut s, p, n);
                    pe.send(0, [u64::from(index), value], owner);
                }
                pe.state().stream = s;
            });
        }
        states
    };
    let check_all = |states: Vec<Pe>| {
        let mine = collect(states.into_iter().map(|s| s.target));
        check(&pes.gather(&mine).concat(), p.per_pe * n as u64)
    };
    let seconds = pes.timed(run, check_all)?;
    Ok(outcome(p, pes.model(), n, seconds))
}

/// Random permutation in the exstack style, collectively over `pes`: each phase throws a
/// buffer of darts per owner, and the owners send the bounced ones back in a second
/// exchange, to be thrown again; phases go on while any PE has darts left or bounced some.
pub fn exstack(pes: &Pes, p: &Params) -> Result<Outcome, String> {
    let n = pes.count();
    validate(p, n)?;
    let mine = pes.mine();
    let darts = crate::baseline::Exstack::<Msg>::new(pes);
    let bounces = crate::baseline::Exstack::<u64>::new(pes);
    let cap = darts.capacity();
    let targets: Vec<std::sync::Mutex<Vec<i64>>> = mine
        .clone()
        .map(|_| std::sync::Mutex::new(vec![EMPTY; (p.per_pe * SLOTS_PER_VALUE) as usize]))
        .collect();
    let run = || {
        on_my_pes(pes, |me| {
            let mut target = targets[me - mine.start]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let mut s = Stream::new(p.seed, me);
            let mut left: Vec<u64> = values(p, me).collect();
            let (mut out, mut inbox) = (vec![Vec::with_capacity(cap); n], Vec::new());
            let (mut back, mut returned) = (vec![Vec::new(); n], Vec::new());
            loop {
                while let Some(value) = left.pop() {
                    let (owner, index) = aim(&mut s, p, n);
                    out[owner].push([u64::from(index), value]);
                    if out[owner].len() == cap {
                        break;
                    }
                }
                let more = darts.exchange(me, &mut out, &mut inbox, !left.is_empty());
                let mut bounced = false;
                for [index, value] in inbox.drain(..) {
                    let slot = &mut target[index as usize];
                    if *slot == EMPTY {
                        *slot = value as i64;
                    } else {
                        // The thrower's PE: values start `per_pe` to a PE.
                        back[(value / p.per_pe) as usize].push(value);
                        bounced = true;
                    }
                }
                let again = bounces.exchange(me, &mut back, &mut returned, bounced);
                left.append(&mut returned);
                if !more && !again {
                    break;
                }
            }
        });
        targets
            .into_iter()
            .map(|t| t.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect::<Vec<Vec<i64>>>()
    };
    let check_all = |mine: Vec<Vec<i64>>| {
        let mine = collect(mine);
        check(&pes.gather(&mine).concat(), p.per_pe * n as u64)
    };
    let seconds = pes.timed(run, check_all)?;
    Ok(outcome(p, "exstack", n, seconds))
}

/// Random permutation in the AGP model: one compare-and-swap on the owner's slot per dart,
/// thrown again at once if the slot was taken.
pub fn agp(rt: &Runtime, p: &Params) -> Result<Outcome, String> {
    let pes = rt.workers();
    validate(p, pes)?;
    let targets: Vec<Vec<AtomicI64>> = (0..pes)
        .map(|_| {
            (0..p.per_pe * SLOTS_PER_VALUE)
                .map(|_| AtomicI64::new(EMPTY))
                .collect()
        })
        .collect();
    let start = Instant::now();
    on_pes(rt, |me| {
        let mut s = Stream::new(p.seed, me);
        for value in values(p, me) {
            loop {
                let (owner, index) = aim(&mut s, p, pes);
                let slot = &targets[owner][index as usize];
                let won = slot.compare_exchange(
                    EMPTY,
                    value as i64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
                if won.is_ok() {
                    break;
                }
            }
        }
    });
    let perm = collect(
        targets
            .into_iter()
            .map(|t| t.into_iter().map(AtomicI64::into_inner).collect()),
    );
    let o = outcome(p, "agp", pes, start.elapsed().as_secs_f64());
    check(&perm, p.per_pe * pes as u64)?;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_names_a_missing_a_repeated_and_an_out_of_range_value() {
        assert!(check(&[2, 0, 1], 3).is_ok());
        assert!(check(&[2, 0], 3).unwrap_err().contains("2 values landed"));
        assert!(check(&[2, 0, 0], 3)
            .unwrap_err()
            .contains("0 appears twice"));
        assert!(check(&[2, 0, 7], 3).unwrap_err().contains("holds 7"));
    }

    #[test]
    fn darts_aim_inside_the_targets() {
        let p = Params { per_pe: 5, seed: 3 };
        let mut s = Stream::new(3, 0);
        for _ in 0..1000 {
            let (owner, index) = aim(&mut s, &p, 3);
            assert!(owner < 3 && u64::from(index) < 10);
        }
    }
}
