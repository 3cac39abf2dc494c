//! Every interleaving of a small selector spanning ranks, explored exhaustively against the
//! real termination code ([`Net`]'s waves and each rank's [`Termination`] counters).
//!
//! The world: `R` ranks with one PE each and one mailbox that feeds itself (a cycle, so
//! only the waves can end it). Each rank's program sends one token to the next rank and is
//! done; a handler sends a token with `ttl > 0` on with `ttl - 1`. A PE's steps are those of
//! the runtime, in its order: count a send (`sent`) before handing it over, count a batch
//! `processed` after its handler's sends were counted. The network delivers any message in
//! flight next, in any order (the link promises order per worker only, and the waves must
//! not need it). Rank 0 may start a wave whenever its PE is done, up to a bound.
//!
//! Checked in every reachable state: a rank that says the mailbox is over has no message
//! left anywhere (none in flight, queued, being handled or still to send). Checked at every
//! final state (nothing left to do within the bound of waves): a few more waves end the
//! mailbox on every rank. States are told apart by everything that decides what happens
//! next, so each is explored once.
//!
//! Removing the second wave (one quiet wave ends the mailbox) or the "ready everywhere"
//! condition makes the two-rank model fail. A directed test plays Mattern's counterexample
//! to one wave message by message.
//!
//! A rank's counts are read in one step when a probe arrives (processed before sent in the
//! code; here nothing runs between the two reads), which is the one way this model is
//! coarser than the runtime.

use super::*;
use rustc_hash::FxHashSet as HashSet;

/// A link that keeps what is sent; the model moves it into the network.
struct Wire {
    rank: usize,
    ranks: usize,
    sent: Mutex<Vec<(usize, Vec<u8>)>>,
}

impl Wire {
    fn new(rank: usize, ranks: usize) -> Wire {
        Wire {
            rank,
            ranks,
            sent: Mutex::new(Vec::new()),
        }
    }
}

impl Link for Wire {
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.ranks
    }
    fn send(&self, _worker: usize, rank: usize, bytes: Vec<u8>) {
        self.sent.lock().unwrap().push((rank, bytes));
    }
    fn poll(&self, _: usize, _: &mut dyn FnMut(usize, Vec<u8>)) -> bool {
        false
    }
    fn abort(&self) -> ! {
        panic!("abort")
    }
}

/// One rank's PE: tokens its program has yet to send (and whether the first is counted but
/// not handed over), whether it is done, tokens delivered, and the token it is handling
/// (its send counted or not; then handed over; then counted processed).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
struct Pe {
    to_send: u32,
    counted: bool,
    done: bool,
    inbox: Vec<u64>,
    working: Option<(Step, u64)>,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Step {
    /// The handler's send is counted; hand it over next.
    Counted,
    /// Nothing left to send; count the batch processed next.
    Handled,
}

#[derive(Clone, Copy, Debug)]
enum Action {
    CountSend(usize),
    HandOver(usize),
    Done(usize),
    Take(usize, usize),
    Forward(usize),
    Processed(usize),
    Deliver(usize),
    Wave,
}

struct World {
    ranks: usize,
    /// A program's token: handled `ttl + 1` times in all.
    ttl: u64,
    links: Vec<Arc<Wire>>,
    nets: Vec<Net<u64>>,
    terms: Vec<Termination>,
    pes: Vec<Pe>,
    /// Messages in flight: (from, to, bytes), kept sorted (delivery order is free).
    flight: Vec<(usize, usize, Vec<u8>)>,
    waves_left: u32,
}

fn units() -> Vec<Vec<usize>> {
    vec![vec![0]]
}

fn kind(bytes: &[u8]) -> u32 {
    word(bytes, 0)
}

impl World {
    fn new(ranks: usize, ttl: u64, waves: u32) -> World {
        let links: Vec<Arc<Wire>> = (0..ranks).map(|r| Arc::new(Wire::new(r, ranks))).collect();
        World {
            ranks,
            ttl,
            nets: links.iter().map(|l| Net::new(l.clone(), 1)).collect(),
            links,
            terms: (0..ranks).map(|_| Termination::new(1, 1)).collect(),
            pes: vec![
                Pe {
                    to_send: 1,
                    ..Pe::default()
                };
                ranks
            ],
            flight: Vec::new(),
            waves_left: waves,
        }
    }

    /// An independent copy: the counters, the waves and the "over" flags rebuilt from what
    /// they hold.
    fn fork(&self) -> World {
        let mut w = World::new(self.ranks, self.ttl, self.waves_left);
        w.pes = self.pes.clone();
        w.flight = self.flight.clone();
        for r in 0..self.ranks {
            let (from, to) = (&self.terms[r], &w.terms[r]);
            to.sent(0, from.sent_count(0) as usize);
            to.processed(0, from.processed_count(0) as usize);
            if from.all_done(0) {
                to.done(0);
            }
            *w.nets[r].waves.lock().unwrap() = self.nets[r].waves.lock().unwrap().clone();
            if self.nets[r].over(0) {
                w.nets[r].over[0].store(true, Ordering::Release);
            }
        }
        w
    }

    /// Everything that decides what can happen next.
    fn key(&self) -> String {
        let counts: Vec<_> = (0..self.ranks)
            .map(|r| {
                let t = &self.terms[r];
                (t.sent_count(0), t.processed_count(0), self.nets[r].over(0))
            })
            .collect();
        let waves = self.nets[0].waves.lock().unwrap();
        format!(
            "{:?}{counts:?}{:?}{:?}{}",
            self.pes, waves[0], self.flight, self.waves_left
        )
    }

    fn next(&self, r: usize) -> usize {
        (r + 1) % self.ranks
    }

    fn enabled(&self) -> Vec<Action> {
        let mut all = Vec::new();
        for (r, pe) in self.pes.iter().enumerate() {
            match (pe.to_send, pe.counted) {
                (_, true) => all.push(Action::HandOver(r)),
                (0, false) if !pe.done => all.push(Action::Done(r)),
                (0, false) => {}
                (_, false) => all.push(Action::CountSend(r)),
            }
            match pe.working {
                None => {
                    let mut seen = Vec::new();
                    for (i, &t) in pe.inbox.iter().enumerate() {
                        if !seen.contains(&t) {
                            seen.push(t);
                            all.push(Action::Take(r, i));
                        }
                    }
                }
                Some((Step::Counted, _)) => all.push(Action::Forward(r)),
                Some((Step::Handled, _)) => all.push(Action::Processed(r)),
            }
        }
        for i in 0..self.flight.len() {
            if i == 0 || self.flight[i] != self.flight[i - 1] {
                all.push(Action::Deliver(i));
            }
        }
        let running = self.nets[0].waves.lock().unwrap()[0].running;
        if self.waves_left > 0 && self.terms[0].all_done(0) && !self.nets[0].over(0) && !running {
            all.push(Action::Wave);
        }
        all
    }

    fn send_token(&self, r: usize, ttl: u64) {
        let to = self.next(r);
        self.nets[r].send_batch(0, to, 0, r, 0, &[ttl]);
    }

    fn apply(&mut self, a: Action) {
        let units = units();
        match a {
            Action::CountSend(r) => {
                self.terms[r].sent(0, 1);
                self.pes[r].counted = true;
            }
            Action::HandOver(r) => {
                self.send_token(r, self.ttl);
                let pe = &mut self.pes[r];
                pe.counted = false;
                pe.to_send -= 1;
            }
            Action::Done(r) => {
                self.terms[r].done(0);
                self.pes[r].done = true;
            }
            Action::Take(r, i) => {
                let ttl = self.pes[r].inbox.remove(i);
                let step = if ttl > 0 {
                    self.terms[r].sent(0, 1);
                    Step::Counted
                } else {
                    Step::Handled
                };
                self.pes[r].working = Some((step, ttl));
            }
            Action::Forward(r) => {
                let (_, ttl) = self.pes[r].working.expect("a token");
                self.send_token(r, ttl - 1);
                self.pes[r].working = Some((Step::Handled, ttl));
            }
            Action::Processed(r) => {
                self.terms[r].processed(0, 1);
                self.pes[r].working = None;
            }
            Action::Deliver(i) => {
                let (from, to, bytes) = self.flight.remove(i);
                match self.nets[to].arrive(0, from, bytes, &units, &self.terms[to]) {
                    Arrival::Batch { msgs, .. } => self.pes[to].inbox.extend(msgs),
                    Arrival::Control => {}
                }
                self.pes[to].inbox.sort_unstable();
            }
            Action::Wave => {
                self.waves_left -= 1;
                self.nets[0].start_wave(0, 0, &units, &self.terms[0]);
            }
        }
        for (r, link) in self.links.iter().enumerate() {
            for (to, bytes) in take(link) {
                self.flight.push((r, to, bytes));
            }
        }
        self.flight.sort_unstable();
    }

    /// Whether no token is left anywhere: none to send, queued, being handled or in flight.
    fn quiet(&self) -> bool {
        self.pes
            .iter()
            .all(|p| p.to_send == 0 && !p.counted && p.inbox.is_empty() && p.working.is_none())
            && self.flight.iter().all(|(_, _, b)| kind(b) != BATCH)
    }

    fn over_somewhere(&self) -> Option<usize> {
        (0..self.ranks).find(|&r| self.nets[r].over(0))
    }

    /// From a final state: waves (each delivered in full) until the mailbox is over
    /// everywhere; how many it took, or `None` after `most`.
    fn finish(&mut self, most: u32) -> Option<u32> {
        self.waves_left = most;
        for n in 1..=most {
            self.apply(Action::Wave);
            while !self.flight.is_empty() {
                self.apply(Action::Deliver(0));
            }
            if (0..self.ranks).all(|r| self.nets[r].over(0)) {
                return Some(n);
            }
        }
        None
    }
}

/// Explores every state reachable from `world`; returns how many there were. Panics with the
/// path that broke a property.
fn explore(world: World) -> usize {
    let mut seen = HashSet::default();
    let mut stack = vec![(world, Vec::<Action>::new())];
    while let Some((w, path)) = stack.pop() {
        if !seen.insert(w.key()) {
            continue;
        }
        if let Some(r) = w.over_somewhere() {
            assert!(w.quiet(), "rank {r} ended the mailbox early after {path:?}");
        }
        let actions = w.enabled();
        if actions.is_empty() {
            assert!(w.quiet(), "stuck with tokens left after {path:?}");
            let took = w.fork().finish(3);
            assert!(
                took.is_some(),
                "three more waves did not end it after {path:?}"
            );
        }
        for a in actions {
            let mut next = w.fork();
            next.apply(a);
            let mut p = path.clone();
            p.push(a);
            stack.push((next, p));
        }
    }
    seen.len()
}

#[test]
fn waves_over_two_ranks_never_end_a_mailbox_early_and_always_end_it() {
    for ttl in 0..=2 {
        for waves in 1..=3 {
            let states = explore(World::new(2, ttl, waves));
            // 405 states for the smallest, 67 687 for the largest.
            assert!(states > 400, "{states} states: the model explores little");
        }
    }
}

#[test]
fn waves_over_three_ranks_never_end_a_mailbox_early_and_always_end_it() {
    // Tokens that are not forwarded: 3 ranks with one hop each already take ~2 minutes.
    let states = explore(World::new(3, 0, 2));
    assert!(states > 10_000, "{states} states");
}

fn take(link: &Wire) -> Vec<(usize, Vec<u8>)> {
    std::mem::take(&mut *link.sent.lock().unwrap())
}

/// Mattern's counterexample to a single wave: rank 1's message `late` is in flight the
/// whole time, while rank 0 sends `early` after its own counts were read and rank 1
/// handles it before its counts are read. The first wave sums to sent = processed; only
/// a second wave with the same sums may end the mailbox.
#[test]
fn one_quiet_wave_is_not_enough_and_two_equal_ones_are() {
    let links = [Arc::new(Wire::new(0, 2)), Arc::new(Wire::new(1, 2))];
    let nets: Vec<Net<u64>> = links.iter().map(|l| Net::new(l.clone(), 1)).collect();
    let terms = [Termination::new(1, 1), Termination::new(1, 1)];
    let units = vec![vec![0usize]];
    for t in &terms {
        t.done(0);
    }
    // `late`, in flight until the end.
    terms[1].sent(0, 1);
    // A wave: rank 0 reads its counts and probes rank 1; `between` happens before rank 1
    // answers; rank 0 takes the answer. Returns whether the mailbox is over on rank 0.
    let wave = |between: &dyn Fn()| {
        nets[0].start_wave(0, 0, &units, &terms[0]);
        between();
        for (to, probe) in take(&links[0]) {
            assert_eq!(to, 1);
            nets[1].arrive(0, 0, probe, &units, &terms[1]);
        }
        for (to, reply) in take(&links[1]) {
            assert_eq!(to, 0);
            nets[0].arrive(0, 1, reply, &units, &terms[0]);
        }
        nets[0].over(0)
    };
    let early = || {
        terms[0].sent(0, 1);
        terms[1].processed(0, 1);
    };
    assert!(
        !wave(&early),
        "first wave: sums equal, `late` still in flight"
    );
    assert!(!wave(&|| {}), "second wave: sums differ");
    terms[0].processed(0, 1); // `late` handled
    assert!(!wave(&|| {}), "the first quiet wave of the final state");
    assert!(wave(&|| {}), "two equal quiet waves: over");
    let told: Vec<_> = take(&links[0]);
    assert_eq!(told.len(), 1, "rank 1 is told");
    nets[1].arrive(0, 0, told[0].1.clone(), &units, &terms[1]);
    assert!(nets[1].over(0));
}

/// Rank 0's PEs all start waves while one of them concludes the last: once the mailbox is
/// over there, no wave starts again, so rank 1 is told once and is sent no probe after it
/// (such a probe, or a second `OVER`, reached a rank that had gone on to the job's next
/// selector, ended that one early there, and hung the job).
#[test]
fn no_wave_starts_after_the_one_that_ended_the_mailbox() {
    let rounds = 3000;
    let units = vec![vec![0usize]];
    for round in 0..rounds {
        let link = Arc::new(Wire::new(0, 2));
        let net: Net<u64> = Net::new(link.clone(), 1);
        let (term, far) = (Termination::new(1, 1), Termination::new(1, 1));
        term.done(0);
        far.done(0);
        // The quiet answer rank 1 gives to probe `number`.
        let reply = |number: u32| {
            let mut b = header([REPLY, 0, number, 1], 16);
            b.extend_from_slice(&far.processed_count(0).to_le_bytes());
            b.extend_from_slice(&far.sent_count(0).to_le_bytes());
            b
        };
        std::thread::scope(|s| {
            // Another PE of rank 0, trying a wave in its loop until the mailbox is over.
            s.spawn(|| {
                while !net.over(0) {
                    net.start_wave(1, 0, &units, &term);
                    std::hint::spin_loop();
                }
            });
            // The PE that answers: each probe on the wire gets rank 1's reply.
            let mut answered = 0;
            while !net.over(0) {
                let probes: Vec<u32> = (link.sent.lock().unwrap().iter())
                    .filter(|(_, b)| kind(b) == PROBE)
                    .map(|(_, b)| word(b, 2))
                    .collect();
                for &n in probes.iter().skip(answered) {
                    net.arrive(0, 1, reply(n), &units, &term);
                }
                answered = probes.len();
                net.start_wave(0, 0, &units, &term);
            }
        });
        let sent = take(&link);
        let over = sent.iter().position(|(_, b)| kind(b) == OVER);
        let over = over.unwrap_or_else(|| panic!("round {round}: over without telling rank 1"));
        let after: Vec<u32> = sent[over + 1..].iter().map(|(_, b)| kind(b)).collect();
        assert!(
            after.is_empty(),
            "round {round}: sent after the mailbox's end (kinds {after:?})"
        );
    }
}
