//! Selectors: exact delivery and termination under many interleavings (random PE counts,
//! sizes and forwarding chains, repeated), request/reply through a mailbox that closes by
//! itself, and the refusal of a send termination could not count.

use tactor::actor::{self, Handler, Outbox, Spec};
use tactor::Runtime;

/// splitmix64: a reproducible stream per test and PE.
fn mix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A message hops along mailboxes 0 → 1 → 2 while `hops` lasts, to a PE chosen by `seed`.
#[derive(Clone, Copy)]
struct Hop {
    hops: u32,
    seed: u64,
}

#[derive(Default)]
struct Tally {
    /// Messages handled per mailbox.
    handled: [u64; 3],
    /// Sum of the seeds of messages that stopped here.
    ended: u64,
}

impl Handler<Hop> for Tally {
    fn process(&mut self, mailbox: usize, mut m: Hop, _from: usize, out: &mut Outbox<'_, Hop>) {
        self.handled[mailbox] += 1;
        if m.hops > 0 && mailbox < 2 {
            m.hops -= 1;
            let pe = (mix(&mut m.seed) % out.pes() as u64) as usize;
            out.send(mailbox + 1, m, pe);
        } else {
            self.ended = self.ended.wrapping_add(m.seed);
        }
    }
}

/// Runs `f` on a thread and fails if it does not end within a minute: a termination that
/// came too early on one PE leaves the others waiting for messages nobody handles.
fn watchdog(f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(()) => t.join().unwrap(),
        Err(_) if t.is_finished() => t.join().unwrap(), // it panicked: report that
        Err(_) => panic!("the selector did not terminate within a minute"),
    }
}

#[test]
fn every_message_is_handled_exactly_once_before_termination() {
    watchdog(rounds);
}

fn rounds() {
    let mut rng = 7u64;
    for round in 0..60 {
        let pes = 1 + (mix(&mut rng) % 4) as usize;
        let per_pe = mix(&mut rng) % 3000;
        let rt = Runtime::builder().workers(pes).pin(false).build().unwrap();
        let spec = Spec::new(3).fed_by(1, &[0]).fed_by(2, &[1]);
        let states = (0..pes).map(|_| Tally::default()).collect();
        let out = actor::run(&rt, &spec, states, |pe| {
            // Staggered starts in odd rounds: a PE that finished early must still wait for
            // the late ones' messages.
            if round % 2 == 1 {
                std::thread::sleep(std::time::Duration::from_micros(300 * pe.pe() as u64));
            }
            let mut s = (round as u64) << 32 | pe.pe() as u64;
            for _ in 0..per_pe {
                let m = Hop {
                    hops: (mix(&mut s) % 3) as u32,
                    seed: mix(&mut s),
                };
                let dest = (mix(&mut s) % pe.pes() as u64) as usize;
                pe.send(0, m, dest);
            }
        });
        // The same streams, replayed serially.
        let mut want = ([0u64; 3], 0u64);
        for p in 0..pes {
            let mut s = (round as u64) << 32 | p as u64;
            for _ in 0..per_pe {
                let mut m = Hop {
                    hops: (mix(&mut s) % 3) as u32,
                    seed: mix(&mut s),
                };
                let _dest = mix(&mut s);
                let mut mailbox = 0;
                loop {
                    want.0[mailbox] += 1;
                    if m.hops > 0 && mailbox < 2 {
                        m.hops -= 1;
                        let _ = mix(&mut m.seed);
                        mailbox += 1;
                    } else {
                        want.1 = want.1.wrapping_add(m.seed);
                        break;
                    }
                }
            }
        }
        let mut got = ([0u64; 3], 0u64);
        for t in &out {
            for m in 0..3 {
                got.0[m] += t.handled[m];
            }
            got.1 = got.1.wrapping_add(t.ended);
        }
        assert_eq!(got, want, "round {round}: {pes} PEs, {per_pe} sends each");
    }
}

/// Ping-pong between two mailboxes that feed each other: each message bounces `hops` more
/// times, alternating mailboxes, to PEs chosen by its seed.
struct Bounces {
    handled: [u64; 2],
    ended: u64,
}

impl Handler<Hop> for Bounces {
    fn process(&mut self, mailbox: usize, mut m: Hop, _from: usize, out: &mut Outbox<'_, Hop>) {
        self.handled[mailbox] += 1;
        if m.hops > 0 {
            m.hops -= 1;
            let pe = (mix(&mut m.seed) % out.pes() as u64) as usize;
            out.send(1 - mailbox, m, pe);
        } else {
            self.ended = self.ended.wrapping_add(m.seed);
        }
    }
}

#[test]
fn mailboxes_that_feed_each_other_terminate_together_after_every_bounce() {
    watchdog(|| {
        let mut rng = 11u64;
        for round in 0..60 {
            let pes = 1 + (mix(&mut rng) % 4) as usize;
            let per_pe = mix(&mut rng) % 500;
            let max_hops = 1 + mix(&mut rng) % 40;
            let rt = Runtime::builder().workers(pes).pin(false).build().unwrap();
            let spec = Spec::new(2).fed_by(0, &[1]).fed_by(1, &[0]);
            let states = (0..pes)
                .map(|_| Bounces {
                    handled: [0; 2],
                    ended: 0,
                })
                .collect();
            let start = |p: usize| (round as u64) << 32 | p as u64;
            let out = actor::run(&rt, &spec, states, |pe| {
                if round % 2 == 1 {
                    std::thread::sleep(std::time::Duration::from_micros(300 * pe.pe() as u64));
                }
                let mut s = start(pe.pe());
                for _ in 0..per_pe {
                    let m = Hop {
                        hops: (mix(&mut s) % max_hops) as u32,
                        seed: mix(&mut s),
                    };
                    let dest = (mix(&mut s) % pe.pes() as u64) as usize;
                    pe.send(0, m, dest);
                }
            });
            let mut want = ([0u64; 2], 0u64);
            for p in 0..pes {
                let mut s = start(p);
                for _ in 0..per_pe {
                    let mut m = Hop {
                        hops: (mix(&mut s) % max_hops) as u32,
                        seed: mix(&mut s),
                    };
                    let _dest = mix(&mut s);
                    let mut mailbox = 0;
                    loop {
                        want.0[mailbox] += 1;
                        if m.hops == 0 {
                            want.1 = want.1.wrapping_add(m.seed);
                            break;
                        }
                        m.hops -= 1;
                        let _ = mix(&mut m.seed);
                        mailbox = 1 - mailbox;
                    }
                }
            }
            let mut got = ([0u64; 2], 0u64);
            for t in &out {
                got.0[0] += t.handled[0];
                got.0[1] += t.handled[1];
                got.1 = got.1.wrapping_add(t.ended);
            }
            assert_eq!(got, want, "round {round}: {pes} PEs, {per_pe} sends each");
        }
    });
}

/// Index-gather: requests to the owner of a table entry, replies to the requester.
enum Ig {
    Request { index: u32, slot: u32 },
    Reply { value: i64, slot: u32 },
}

struct IgPe {
    table: Vec<i64>,
    got: Vec<i64>,
}

impl Handler<Ig> for IgPe {
    fn process(&mut self, _mailbox: usize, m: Ig, from: usize, out: &mut Outbox<'_, Ig>) {
        match m {
            Ig::Request { index, slot } => {
                let value = self.table[index as usize];
                out.send(1, Ig::Reply { value, slot }, from);
            }
            Ig::Reply { value, slot } => self.got[slot as usize] = value,
        }
    }
}

#[test]
fn replies_close_by_themselves_and_each_one_arrives() {
    for pes in 1..=3 {
        let rt = Runtime::builder().workers(pes).pin(false).build().unwrap();
        let (per_pe, requests) = (100usize, 5000usize);
        let spec = Spec::new(2).fed_by(1, &[0]);
        let states = (0..pes)
            .map(|p| IgPe {
                table: (0..per_pe)
                    .map(|j| -((p * per_pe + j) as i64 + 1))
                    .collect(),
                got: vec![0; requests],
            })
            .collect();
        let index_of = |p: usize, i: usize| (p * 7919 + i * 104_729) % (pes * per_pe);
        let out = actor::run(&rt, &spec, states, |pe| {
            for i in 0..requests {
                let g = index_of(pe.pe(), i);
                let req = Ig::Request {
                    index: (g % per_pe) as u32,
                    slot: i as u32,
                };
                pe.send(0, req, g / per_pe);
            }
        });
        for (p, s) in out.iter().enumerate() {
            for (i, &v) in s.got.iter().enumerate() {
                assert_eq!(
                    v,
                    -(index_of(p, i) as i64 + 1),
                    "{pes} PEs: PE {p} slot {i}"
                );
            }
        }
    }
}

struct Rogue;

impl Handler<u8> for Rogue {
    fn process(&mut self, mailbox: usize, m: u8, _from: usize, out: &mut Outbox<'_, u8>) {
        // Mailbox 0 feeds nothing: termination could not count this message.
        out.send(mailbox, m, 0);
    }
}

#[test]
fn a_send_termination_cannot_count_is_refused() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        actor::run(&rt, &Spec::new(1), vec![Rogue, Rogue], |pe| {
            pe.send(0, 1, 1)
        })
    }));
    assert!(
        r.is_err(),
        "the rogue send must fail the selector, not hang it"
    );
}

#[test]
fn a_launched_selector_composes_with_tasks_and_reports_a_panicking_pe() {
    use tactor::actor::Lambdas;
    use tactor::{Placement, UserEvent};
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    // Starts only after its precondition; its completion releases a task.
    let go = UserEvent::new();
    let states = (0..2).map(|_| Lambdas(0u64)).collect();
    let sel = actor::launch(&rt, &Spec::new(1), states, &[go.event()], |pe| {
        for k in 0..1000u64 {
            pe.send(0, move |n: &mut u64| *n += k, (k % 2) as usize);
        }
    });
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = seen.clone();
    let after = rt.launch(
        Placement::Any,
        std::slice::from_ref(&sel.completion),
        move || s2.store(true, std::sync::atomic::Ordering::SeqCst),
    );
    assert!(!sel.completion.has_triggered());
    go.trigger().unwrap();
    after.wait().unwrap();
    assert!(seen.load(std::sync::atomic::Ordering::SeqCst));
    let out = sel.wait().unwrap();
    let evens: u64 = (0..1000u64).filter(|k| k % 2 == 0).sum();
    assert_eq!(out[0].0, 2 * evens);
    assert_eq!(out[1].0, 2 * ((0..1000u64).sum::<u64>() - evens));

    // A PE that panics poisons the completion; the other PE stops waiting.
    let states = (0..2).map(|_| Lambdas(0u64)).collect();
    let sel = actor::launch(&rt, &Spec::new(1), states, &[], |pe| {
        if pe.pe() == 1 {
            panic!("PE 1 gives up");
        }
        pe.send(0, |n: &mut u64| *n += 1, 1);
    });
    let err = sel.wait().err().expect("the selector failed");
    assert!(err.to_string().contains("PE 1 gives up"), "{err}");
}

/// Sees each message before (`ahead`) and when it is processed.
#[derive(Default)]
struct Looks {
    ahead: std::cell::Cell<Vec<(usize, u64)>>,
    processed: Vec<(usize, u64)>,
}

impl Handler<u64> for Looks {
    fn process(&mut self, mailbox: usize, m: u64, _: usize, _: &mut Outbox<'_, u64>) {
        self.processed.push((mailbox, m));
    }
    fn ahead(&self, mailbox: usize, m: &u64) {
        let mut seen = self.ahead.take();
        seen.push((mailbox, *m));
        self.ahead.set(seen);
    }
}

#[test]
fn a_handler_looks_ahead_only_at_messages_it_then_processes_in_their_mailbox() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    let n = if cfg!(miri) { 100 } else { 20_000 };
    let states = (0..2).map(|_| Looks::default()).collect();
    let out = actor::run(&rt, &Spec::new(2), states, |pe| {
        let me = pe.pe() as u64;
        for k in 0..n {
            // Tagged by sender, mailbox and number, so that each message is unique.
            let mailbox = (k % 2) as usize;
            pe.send(mailbox, me << 32 | k, (k % 2) as usize);
        }
    });
    for looks in out {
        let ahead = looks.ahead.take();
        assert!(!ahead.is_empty(), "full batches were looked ahead into");
        let processed: std::collections::HashSet<_> = looks.processed.iter().collect();
        assert!(ahead.iter().all(|a| processed.contains(a)));
        assert_eq!(
            ahead.len(),
            ahead.iter().collect::<std::collections::HashSet<_>>().len(),
            "each message is looked at once"
        );
    }
}

/// Replies into mailbox 1 from mailbox 0's handler.
struct Replier;

impl Handler<u64> for Replier {
    fn process(&mut self, mailbox: usize, m: u64, from: usize, out: &mut Outbox<'_, u64>) {
        if mailbox == 0 {
            out.send(1, m, from);
        }
    }
}

fn replies(spec: &Spec) -> std::thread::Result<Vec<Replier>> {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        actor::run(&rt, spec, vec![Replier, Replier], |pe| {
            pe.send(0, 7, 1 - pe.pe());
        })
    }))
}

#[test]
fn a_handler_sends_only_where_its_mailbox_feeds() {
    assert!(replies(&Spec::new(2).fed_by(1, &[0])).is_ok());
    // Mailbox 1 not declared fed by 0: its termination could not count the reply.
    assert!(replies(&Spec::new(2)).is_err());
    assert!(replies(&Spec::new(3).fed_by(2, &[0])).is_err());
}

#[test]
#[should_panic(expected = "at most 64 mailboxes")]
fn a_selector_has_at_most_64_mailboxes() {
    let _ = Spec::new(65);
}

/// The message of a caught panic.
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn a_send_out_of_range_fails_the_selector_with_its_documented_message() {
    let rt = Runtime::builder().workers(2).pin(false).build().unwrap();
    for (mailbox, pe, says) in [
        (5, 0, "send to mailbox 5, but the selector has 1"),
        (0, 9, "send to PE 9, but the selector has 2"),
    ] {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            actor::run(&rt, &Spec::new(1), vec![Rogue, Rogue], |p| {
                p.send(mailbox, 1, pe)
            })
        }));
        let Err(p) = r else {
            panic!("the bad send must fail the selector")
        };
        let text = panic_text(p);
        // The failure's message, not its Debug form.
        assert!(text.starts_with("a PE of the selector failed: "), "{text}");
        assert!(text.contains(says), "{text}");
        assert!(!text.contains("TaskFailed("), "{text}");
    }
}
