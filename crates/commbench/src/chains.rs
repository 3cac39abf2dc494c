//! The chains of seed 002 and the driver that runs them on any [`Endpoint`].

use crate::{parcelport::Parcelport, raw::Raw, tactor::Layer};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tactor_comm::{mpi::MpiTransport, Reduce, Transport};

/// One way of moving messages between the two ranks.
pub trait Endpoint {
    /// The implementation's name in the table.
    fn name(&self) -> &'static str;
    /// Sends `payload` to the other rank.
    fn send(&mut self, payload: &[u8]);
    /// Progresses, handing every message that arrived to `got`.
    fn poll(&mut self, got: &mut dyn FnMut(&[u8]));
    /// Completes this rank's sends still in flight.
    fn finish(&mut self);
    /// Prepares for `row` (before the barrier that starts it).
    fn start(&mut self, _row: &Row) {}
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    /// `latency` or `rate`.
    pub kind: &'static str,
    /// Chains in flight.
    pub chains: u64,
    /// Steps (hops between the ranks) of each chain.
    pub steps: u64,
    /// Payload bytes of every message.
    pub bytes: usize,
}

/// The rows: latency with 1 to 4096 chains in flight, and the flood, at 8 B and 16 KiB.
pub fn rows(messages: u64, flood: u64) -> Vec<Row> {
    let mut rows = Vec::new();
    for bytes in [8, 16 * 1024] {
        for chains in [1u64, 16, 256, 4096] {
            // An even number of steps, at least 2, about `messages` in all (fewer for the
            // large payload, whose rows would otherwise take long).
            let total = if bytes > 8 { messages / 4 } else { messages };
            let steps = ((total / chains).max(2) + 1) & !1;
            rows.push(Row {
                kind: "latency",
                chains,
                steps,
                bytes,
            });
        }
        rows.push(Row {
            kind: "rate",
            chains: if bytes > 8 { flood / 16 } else { flood },
            steps: 1,
            bytes,
        });
    }
    rows
}

/// The chain and step a payload carries in its first 8 bytes.
fn header(payload: &[u8]) -> (u32, u32) {
    let w = |i: usize| u32::from_le_bytes(payload[i..i + 4].try_into().expect("4 bytes"));
    (w(0), w(4))
}

fn payload(buf: &mut [u8], chain: u32, step: u32) {
    buf[..4].copy_from_slice(&chain.to_le_bytes());
    buf[4..8].copy_from_slice(&step.to_le_bytes());
}

/// Runs `row` on `ep` and returns this rank's elapsed time. Rank 0 starts every chain; a
/// message of step `s` travels from rank `s % 2` to the other; each rank runs until it has
/// received every message addressed to it. Every message's chain and step are checked.
fn run_row(ep: &mut dyn Endpoint, row: &Row, rank: usize) -> anyhow::Result<Duration> {
    let mine = |s: u64| (s % 2) as usize != rank;
    let expected = row.chains * (0..row.steps).filter(|&s| mine(s)).count() as u64;
    let mut buf = vec![0u8; row.bytes];
    let mut next: Vec<(u32, u32)> = Vec::new();
    let mut steps_seen = vec![0u32; row.chains as usize];
    let start = Instant::now();
    if rank == 0 {
        for c in 0..row.chains as u32 {
            payload(&mut buf, c, 0);
            ep.send(&buf);
        }
    }
    let mut received = 0u64;
    let mut bad = None;
    while received < expected {
        ep.poll(&mut |data| {
            let (c, s) = header(data);
            let seen = steps_seen.get_mut(c as usize);
            match seen {
                Some(seen) if data.len() == row.bytes && s >= *seen && mine(u64::from(s)) => {
                    *seen = s;
                    received += 1;
                    if u64::from(s) + 1 < row.steps {
                        next.push((c, s + 1));
                    }
                }
                _ => bad = Some((c, s, data.len())),
            }
        });
        if let Some((c, s, n)) = bad {
            anyhow::bail!(
                "{}: unexpected message (chain {c}, step {s}, {n} bytes)",
                ep.name()
            );
        }
        for (c, s) in next.drain(..) {
            payload(&mut buf, c, s);
            ep.send(&buf);
        }
    }
    let elapsed = start.elapsed();
    ep.finish();
    Ok(elapsed)
}

/// One measurement: a row, an implementation, a repetition.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    pub kind: &'static str,
    pub implementation: &'static str,
    pub chains: u64,
    pub steps: u64,
    pub bytes: usize,
    pub rep: u32,
    /// The slower rank's elapsed seconds.
    pub seconds: f64,
}

/// Every row on every implementation, `reps` times, alternated: repetition r of every
/// implementation runs before repetition r + 1 of any.
/// Each sample goes into `out` as soon as it is measured, so that a signal handler can
/// report what was measured before the run was stopped.
pub fn measure(
    net: &MpiTransport,
    rows: &[Row],
    reps: u32,
    out: &Mutex<Vec<Sample>>,
) -> anyhow::Result<()> {
    let rank = net.rank();
    let mut eps: Vec<Box<dyn Endpoint>> = vec![
        Box::new(Raw::new(rank)),
        Box::new(Parcelport::new(rank)),
        Box::new(Layer::new(net)),
    ];
    for rep in 0..reps {
        for row in rows {
            for ep in eps.iter_mut() {
                ep.start(row);
                net.barrier(&mut || true).ok();
                let local = run_row(ep.as_mut(), row, rank)?;
                let nanos = u64::try_from(local.as_nanos()).unwrap_or(u64::MAX);
                let slowest = net
                    .all_reduce(Reduce::Max, nanos, &mut || true)
                    .map_err(|_| anyhow::anyhow!("the other rank stopped"))?;
                out.lock().unwrap_or_else(|p| p.into_inner()).push(Sample {
                    kind: row.kind,
                    implementation: ep.name(),
                    chains: row.chains,
                    steps: row.steps,
                    bytes: row.bytes,
                    rep,
                    seconds: slowest as f64 * 1e-9,
                });
            }
        }
        if rank == 0 {
            tactor_cli::say!("commbench: repetition {} of {reps} done", rep + 1);
        }
    }
    Ok(())
}
