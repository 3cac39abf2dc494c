//! Selectors across ranks, with ranks simulated in one process: each rank is a runtime of its
//! own on a thread of its own, and the link between them is a queue per rank that delivers
//! late and in bursts, so that messages and termination waves overtake each other. Every
//! test checks exact delivery: a termination detected early returns before some message was
//! handled, and the counts come out short.

use rand::{rngs::StdRng, Rng, SeedableRng};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tactor::actor::{self, Handler, Link, Outbox, Spec};
use tactor::Runtime;

/// What waits for one rank: (source rank, bytes) in arrival order.
type Queue = Mutex<VecDeque<(usize, Vec<u8>)>>;

/// Queues between simulated ranks.
struct Memory {
    queues: Vec<Queue>,
    /// Messages sent longer than the sender's eager size (checked after each run).
    oversized: AtomicUsize,
}

/// One rank's end of [`Memory`].
struct End {
    rank: usize,
    net: Arc<Memory>,
    rng: Mutex<StdRng>,
    /// The link's eager size, small so that batches are cut to it: every message sent must
    /// fit.
    eager: usize,
}

impl Link for End {
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.net.queues.len()
    }
    fn send(&self, _worker: usize, rank: usize, bytes: Vec<u8>) {
        if bytes.len() > self.eager {
            self.net.oversized.fetch_add(1, Ordering::Relaxed);
        }
        self.net.queues[rank]
            .lock()
            .unwrap()
            .push_back((self.rank, bytes));
    }
    fn poll(&self, _worker: usize, deliver: &mut dyn FnMut(usize, Vec<u8>)) -> bool {
        // Deliver late and in bursts of random length.
        let burst = {
            let mut rng = self.rng.lock().unwrap();
            if rng.gen_bool(0.5) {
                return false;
            }
            rng.gen_range(1..4)
        };
        let mut any = false;
        for _ in 0..burst {
            let next = self.net.queues[self.rank].lock().unwrap().pop_front();
            let Some((source, bytes)) = next else { break };
            deliver(source, bytes);
            any = true;
        }
        any
    }
    fn abort(&self) -> ! {
        panic!("a PE panicked")
    }
    fn eager_bytes(&self) -> usize {
        self.eager
    }
}

/// Runs `body(rank, link)` on `ranks` simulated ranks at once and returns their results.
fn on_ranks<T: Send>(
    ranks: usize,
    seed: u64,
    body: impl Fn(usize, Arc<dyn Link>) -> T + Sync,
) -> Vec<T> {
    let net = Arc::new(Memory {
        queues: (0..ranks).map(|_| Mutex::new(VecDeque::new())).collect(),
        oversized: AtomicUsize::new(0),
    });
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..ranks)
            .map(|r| {
                let link: Arc<dyn Link> = Arc::new(End {
                    rank: r,
                    net: net.clone(),
                    rng: Mutex::new(StdRng::seed_from_u64(seed * 31 + r as u64)),
                    // The 16-byte header and 8 to 48 words: a termination message (32 bytes)
                    // and one batch of a few messages fit.
                    eager: 16 + 4 * (8 + (seed as usize * 7 + r) % 41),
                });
                let body = &body;
                s.spawn(move || {
                    // Ranks start apart, as processes do.
                    pause((seed as usize + r) % 3 * 4);
                    body(r, link)
                })
            })
            .collect();
        let out = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let oversized = net.oversized.load(Ordering::Relaxed);
        assert_eq!(oversized, 0, "messages longer than the link's eager size");
        out
    })
}

/// Sleeps `ms` milliseconds (less under Miri).
fn pause(ms: usize) {
    let ms = if cfg!(miri) { ms.min(1) } else { ms };
    std::thread::sleep(std::time::Duration::from_millis(ms as u64));
}

/// A PE stops sending for a while halfway, now and then: its messages so far are in flight
/// while the others may already be done.
fn stall(pe: usize, k: usize, n: usize) {
    if k == n / 2 && pe % 3 == 1 {
        pause(3);
    }
}

fn runtime(workers: usize) -> Runtime {
    Runtime::builder()
        .workers(workers)
        .pin(false)
        .build()
        .unwrap()
}

struct Counts(Vec<u64>);

impl Handler<u32> for Counts {
    fn process(&mut self, _: usize, i: u32, _: usize, _: &mut Outbox<'_, u32>) {
        self.0[i as usize] += 1;
    }
}

#[test]
fn a_histogram_over_ranks_counts_every_update_once() {
    let (updates, table) = if cfg!(miri) { (50, 4) } else { (3000, 16) };
    for (ranks, workers, seed) in [(2, 2, 1u64), (3, 1, 2), (3, 2, 3), (1, 2, 4)] {
        let pes = ranks * workers;
        let draws = |pe: usize| {
            let mut rng = StdRng::seed_from_u64(seed * 1000 + pe as u64);
            (0..updates)
                .map(|_| rng.gen_range(0..pes * table))
                .collect::<Vec<_>>()
        };
        let out = on_ranks(ranks, seed, |_, link| {
            let rt = runtime(workers);
            let states = (0..workers).map(|_| Counts(vec![0; table])).collect();
            actor::run_on(&rt, link, &Spec::new(1), states, |pe| {
                for (k, g) in draws(pe.pe()).into_iter().enumerate() {
                    stall(pe.pe(), k, updates);
                    pe.send(0, (g / pes) as u32, g % pes);
                }
            })
        });
        let mut want = vec![vec![0u64; table]; pes];
        for pe in 0..pes {
            for g in draws(pe) {
                want[g % pes][g / pes] += 1;
            }
        }
        let got: Vec<Vec<u64>> = out.into_iter().flatten().map(|c| c.0).collect();
        assert_eq!(got, want, "{ranks} ranks × {workers} workers");
    }
}

/// Requests (mailbox 0) ask a PE for a value; replies (mailbox 1, fed by 0) carry it back.
/// A message is `[kind-specific word, index]`.
struct Gather {
    table: Vec<u64>,
    got: Vec<u64>,
}

impl Handler<[u64; 2]> for Gather {
    fn process(
        &mut self,
        mailbox: usize,
        m: [u64; 2],
        from: usize,
        out: &mut Outbox<'_, [u64; 2]>,
    ) {
        match mailbox {
            0 => out.send(1, [self.table[m[1] as usize], m[0]], from),
            _ => self.got[m[1] as usize] = m[0],
        }
    }
}

#[test]
fn replies_to_requests_across_ranks_all_arrive_before_the_reply_box_closes() {
    let (asks, table) = if cfg!(miri) { (30, 4) } else { (2000, 32) };
    for (ranks, workers, seed) in [(2, 2, 5u64), (3, 1, 6)] {
        let pes = ranks * workers;
        let value = |pe: usize, i: usize| (pe * 1_000_000 + i) as u64 + 7;
        let out = on_ranks(ranks, seed, |rank, link| {
            let rt = runtime(workers);
            let states = (0..workers)
                .map(|w| Gather {
                    table: (0..table).map(|i| value(rank * workers + w, i)).collect(),
                    got: vec![0; asks],
                })
                .collect();
            actor::run_on(&rt, link, &Spec::new(2).fed_by(1, &[0]), states, |pe| {
                let mut rng = StdRng::seed_from_u64(seed * 77 + pe.pe() as u64);
                for k in 0..asks {
                    stall(pe.pe(), k, asks);
                    let g = rng.gen_range(0..pes * table);
                    pe.send(0, [k as u64, (g / pes) as u64], g % pes);
                }
            })
        });
        for (pe, g) in out.into_iter().flatten().enumerate() {
            let mut rng = StdRng::seed_from_u64(seed * 77 + pe as u64);
            for k in 0..asks {
                let g2 = rng.gen_range(0..pes * table);
                assert_eq!(g.got[k], value(g2 % pes, g2 / pes), "PE {pe} request {k}");
            }
        }
    }
}

/// Tokens hop between two mailboxes that feed each other, to random PEs, until their hop
/// count runs out; every token must end somewhere.
struct Hops {
    ended: u64,
    rng: StdRng,
}

impl Handler<[u64; 2]> for Hops {
    fn process(&mut self, mailbox: usize, m: [u64; 2], _: usize, out: &mut Outbox<'_, [u64; 2]>) {
        if m[0] == 0 {
            self.ended += 1;
        } else {
            let pe = self.rng.gen_range(0..out.pes());
            out.send(1 - mailbox, [m[0] - 1, m[1]], pe);
        }
    }
}

#[test]
fn tokens_bouncing_between_mailboxes_that_feed_each_other_all_end_before_termination() {
    let tokens = if cfg!(miri) { 10 } else { 300 };
    let seeds = if cfg!(miri) { 1 } else { 12 };
    let cases = (0..seeds).flat_map(|k| [(2, 2, 8 + 3 * k), (3, 2, 9 + 3 * k), (3, 1, 10 + 3 * k)]);
    for (ranks, workers, seed) in cases {
        let out = on_ranks(ranks, seed, |rank, link| {
            let rt = runtime(workers);
            let states = (0..workers)
                .map(|w| Hops {
                    ended: 0,
                    rng: StdRng::seed_from_u64(seed * 5 + (rank * workers + w) as u64),
                })
                .collect();
            let spec = Spec::new(2).fed_by(1, &[0]).fed_by(0, &[1]);
            actor::run_on(&rt, link, &spec, states, |pe| {
                let mut rng = StdRng::seed_from_u64(seed + pe.pe() as u64);
                for k in 0..tokens {
                    stall(pe.pe(), k as usize, tokens as usize);
                    let to = rng.gen_range(0..pe.pes());
                    pe.send(0, [rng.gen_range(0..12), k], to);
                }
            })
        });
        let ended: u64 = out.into_iter().flatten().map(|h| h.ended).sum();
        let pes = (ranks * workers) as u64;
        assert_eq!(ended, tokens * pes, "{ranks} ranks × {workers} workers");
    }
}

#[test]
fn a_pe_that_sends_late_is_waited_for_even_when_everyone_else_is_quiet() {
    // Only one PE sends, and only after a while; its neighbour on the same rank is already
    // answering termination waves. Until the late PE is done, nobody has seen a message,
    // which must not read as the end.
    let (ranks, workers, updates, table) = (3, 2, if cfg!(miri) { 20 } else { 500 }, 8);
    let pes = ranks * workers;
    let late = pes - 1;
    let out = on_ranks(ranks, 0, |_, link| {
        let rt = runtime(workers);
        let states = (0..workers).map(|_| Counts(vec![0; table])).collect();
        actor::run_on(&rt, link, &Spec::new(1), states, |pe| {
            if pe.pe() == late {
                pause(30);
                for k in 0..updates {
                    pe.send(0, (k % table) as u32, k % pes);
                }
            }
        })
    });
    let total: u64 = out.into_iter().flatten().flat_map(|c| c.0).sum();
    assert_eq!(total, updates as u64);
}
