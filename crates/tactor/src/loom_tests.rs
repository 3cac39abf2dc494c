//! loom model checks of the lock-free primitives: every interleaving (within loom's bounds) of
//! event trigger/subscribe/wait, merges, the readiness countdown and the sleep/wake protocol.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p tactor --no-default-features --lib --release loom`.
//!
//! What these cover: lost notifications and lost wake-ups (a model that loses one deadlocks
//! and loom reports it), double runs (a countdown that reaches zero twice), double triggers.
//! The tasks' work-stealing deque is crossbeam-deque's and is trusted; the hand-off around it
//! (push, then wake; announce, then re-check, then park) is modelled with a locked queue. The
//! fork-join jobs' split deque is ours, and is modelled: every job taken exactly once.

use crate::countdown::{Countdown, Outcome};
use crate::event::{Event, EventState, Held, Notify, WaitLink};
use crate::failure::Failure;
use crate::runtime::idle::Idle;
use crate::runtime::job::{self, Header, JobRef};
use crate::sync::{self, lock, AtomicUsize, Mutex, Ordering};
use loom::thread;
use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::Arc;

struct Counter(AtomicUsize, Mutex<Option<bool>>);

impl Notify for Counter {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        self.0.fetch_add(1, Ordering::SeqCst);
        *lock(&self.1) = Some(outcome.is_ok());
    }
}

fn counter() -> Arc<Counter> {
    Arc::new(Counter(AtomicUsize::new(0), Mutex::new(None)))
}

#[test]
fn loom_subscribe_racing_trigger_notifies_exactly_once() {
    loom::model(|| {
        let e = Arc::new(EventState::new());
        let (c1, c2) = (counter(), counter());
        let e2 = e.clone();
        let c1b = c1.clone();
        let t = thread::spawn(move || e2.subscribe(c1b));
        e.subscribe(c2.clone());
        e.trigger(Ok(())).unwrap();
        t.join().unwrap();
        assert_eq!(c1.0.load(Ordering::SeqCst), 1);
        assert_eq!(c2.0.load(Ordering::SeqCst), 1);
        assert_eq!(*lock(&c1.1), Some(true));
    });
}

/// Something told by pointer through links embedded in itself, as a task node is.
struct Linked {
    links: [WaitLink; 2],
    told: AtomicUsize,
}

/// # Safety
/// `this` is a live `Linked`.
unsafe fn tell_linked(this: NonNull<()>, _: &Outcome) {
    // SAFETY: the contract.
    let me = unsafe { this.cast::<Linked>().as_ref() };
    me.told.fetch_add(1, Ordering::SeqCst);
}

fn linked() -> Arc<Linked> {
    Arc::new(Linked {
        links: [WaitLink::new(), WaitLink::new()],
        told: AtomicUsize::new(0),
    })
}

/// `me` told by pointer; the test's own `Arc` keeps it alive throughout.
fn held(me: &Arc<Linked>) -> Held {
    // SAFETY: `me` outlives the model's threads, and telling it is an atomic increment.
    unsafe { Held::new(NonNull::from(&**me).cast(), tell_linked) }
}

#[test]
fn loom_embedded_links_racing_triggers_are_each_told_once() {
    loom::model(|| {
        let (a, b) = (Arc::new(EventState::new()), Arc::new(EventState::new()));
        let me = linked();
        let (a2, b2) = (a.clone(), b.clone());
        let ta = thread::spawn(move || a2.trigger(Ok(())).unwrap());
        let tb = thread::spawn(move || b2.trigger(Ok(())).unwrap());
        // SAFETY: each link is subscribed once, and lives in `me`, which the test keeps.
        unsafe {
            a.subscribe_in_held(&me.links[0], held(&me));
            b.subscribe_in_held(&me.links[1], held(&me));
        }
        ta.join().unwrap();
        tb.join().unwrap();
        assert_eq!(me.told.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn loom_an_event_dropped_untriggered_tells_no_one() {
    loom::model(|| {
        let e = Arc::new(EventState::new());
        let me = linked();
        // SAFETY: as above.
        unsafe { e.subscribe_in_held(&me.links[0], held(&me)) };
        let e2 = e.clone();
        let t = thread::spawn(move || drop(e2));
        drop(e);
        t.join().unwrap();
        assert_eq!(me.told.load(Ordering::SeqCst), 0);
    });
}

/// A task node's launch (`TaskNode::start`): one count of the node held for its launch token
/// and every precondition, taken by the last arrival, which runs it once.
struct Node {
    links: [WaitLink; 2],
    count: Countdown,
    ran: AtomicUsize,
}

/// # Safety
/// As for `task::arrive_held`: one of the arrivals the held count stands for.
unsafe fn node_arrive(this: NonNull<()>, outcome: &Outcome) {
    let node = this.cast::<Node>().as_ptr().cast_const();
    // SAFETY: alive until the last arrival; only the countdown is borrowed across it.
    if let Some(ready) = unsafe { &(*node).count }.arrive(outcome) {
        // SAFETY: the last arrival owns the held count.
        let node = unsafe { Arc::from_raw(node) };
        if ready.is_ok() {
            node.ran.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn loom_the_last_arrival_takes_the_held_count_and_runs_the_node_once() {
    loom::model(|| {
        let (a, b) = (Arc::new(EventState::new()), Arc::new(EventState::new()));
        let node = Arc::new(Node {
            links: [WaitLink::new(), WaitLink::new()],
            count: Countdown::new(3),
            ran: AtomicUsize::new(0),
        });
        let witness = node.clone();
        let (a2, b2) = (a.clone(), b.clone());
        let ta = thread::spawn(move || a2.trigger(Ok(())).unwrap());
        let tb = thread::spawn(move || b2.trigger(Ok(())).unwrap());
        let this = NonNull::new(Arc::into_raw(node).cast_mut())
            .unwrap()
            .cast::<()>();
        // SAFETY: the held count keeps the node until its last arrival, one of the three.
        unsafe {
            let target = Held::new(this, node_arrive);
            let links = &this.cast::<Node>().as_ref().links;
            a.subscribe_in_held(&links[0], target);
            b.subscribe_in_held(&links[1], target);
            node_arrive(this, &Ok(()));
        }
        ta.join().unwrap();
        tb.join().unwrap();
        assert_eq!(witness.ran.load(Ordering::SeqCst), 1);
        // The held count was taken and released: only the witness is left.
        assert_eq!(Arc::strong_count(&witness), 1);
    });
}

#[test]
fn loom_racing_triggers_one_wins_and_the_outcome_is_the_winners() {
    loom::model(|| {
        let e = Arc::new(EventState::new());
        let c = counter();
        e.subscribe(c.clone());
        let e2 = e.clone();
        let t = thread::spawn(move || e2.trigger(Err(Arc::new(Failure::Poisoned("x".into())))));
        let mine = e.trigger(Ok(()));
        let theirs = t.join().unwrap();
        assert!(
            mine.is_ok() != theirs.is_ok(),
            "exactly one trigger succeeds"
        );
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        let ok = e.outcome().unwrap().is_ok();
        assert_eq!(ok, mine.is_ok());
        assert_eq!(*lock(&c.1), Some(ok));
    });
}

#[test]
fn loom_blocking_wait_is_woken() {
    loom::model(|| {
        let e = Event::pending();
        let e2 = e.clone();
        let t = thread::spawn(move || e2.state().trigger(Ok(())).unwrap());
        e.block();
        assert!(e.has_triggered());
        t.join().unwrap();
    });
}

#[test]
fn loom_merge_of_concurrent_triggers_fires_once_with_the_failure() {
    loom::model(|| {
        let (a, b) = (Event::pending(), Event::pending());
        let m = Event::merge(&[a.clone(), b.clone()]);
        let c = counter();
        m.state().subscribe(c.clone());
        let t = thread::spawn(move || a.state().trigger(Ok(())).unwrap());
        b.state()
            .trigger(Err(Arc::new(Failure::UserEventDropped)))
            .unwrap();
        t.join().unwrap();
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert_eq!(*lock(&c.1), Some(false));
    });
}

#[test]
fn loom_countdown_reaches_zero_once() {
    loom::model(|| {
        let cd = Arc::new(Countdown::new(3));
        let hits = Arc::new(AtomicUsize::new(0));
        let spawn = |outcome: Outcome| {
            let (cd, hits) = (cd.clone(), hits.clone());
            thread::spawn(move || {
                if let Some(o) = cd.arrive(&outcome) {
                    assert!(o.is_err(), "the failure must reach the last arrival");
                    hits.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let t1 = spawn(Ok(()));
        let t2 = spawn(Err(Arc::new(Failure::UserEventDropped)));
        if let Some(o) = cd.arrive(&Ok(())) {
            assert!(o.is_err());
            hits.fetch_add(1, Ordering::SeqCst);
        }
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(
            hits.load(Ordering::SeqCst),
            1,
            "exactly one arrival schedules the task"
        );
    });
}

type Queue = Arc<Mutex<VecDeque<u32>>>;

/// A worker of the model: takes one job, sleeping through the real protocol while none is
/// there.
fn model_worker(idle: Arc<Idle>, q: Queue, w: usize) -> thread::JoinHandle<u32> {
    thread::spawn(move || {
        idle.register(w, sync::current());
        loop {
            if let Some(j) = lock(&q).pop_front() {
                return j;
            }
            idle.sleep(w, || !lock(&q).is_empty());
        }
    })
}

#[test]
fn loom_placed_push_wakes_its_sleeping_worker() {
    loom::model(|| {
        let idle = Arc::new(Idle::new(1));
        let q: Queue = Arc::new(Mutex::new(VecDeque::new()));
        let t = model_worker(idle.clone(), q.clone(), 0);
        lock(&q).push_back(7);
        idle.wake_worker(0);
        assert_eq!(t.join().unwrap(), 7);
    });
}

#[test]
fn loom_two_pushes_wake_two_sleepers() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(|| {
        let idle = Arc::new(Idle::new(2));
        let q: Queue = Arc::new(Mutex::new(VecDeque::new()));
        let t0 = model_worker(idle.clone(), q.clone(), 0);
        let t1 = model_worker(idle.clone(), q.clone(), 1);
        for j in [1, 2] {
            lock(&q).push_back(j);
            idle.wake_one();
        }
        let mut got = [t0.join().unwrap(), t1.join().unwrap()];
        got.sort_unstable();
        assert_eq!(got, [1, 2], "each job taken exactly once");
    });
}

#[test]
fn loom_ring_hands_each_message_over_once_in_order_with_its_data() {
    use crate::runtime::channel::{Channel, Msg, SendPos};
    loom::model(|| {
        // Three messages through a ring of two slots: the producer must wait for the consumer
        // (flow control), the third message reuses the first slot (lap parity), and what the
        // producer wrote before each send must be visible after the receive (Release/Acquire).
        let ch = Arc::new(Channel::new(2));
        let cells: Arc<Vec<loom::cell::UnsafeCell<u32>>> =
            Arc::new((0..3).map(|_| loom::cell::UnsafeCell::new(0)).collect());
        let (c2, d2) = (ch.clone(), cells.clone());
        let producer = thread::spawn(move || {
            let mut pos = SendPos::default();
            for v in 0..3u32 {
                // SAFETY: cell `v` is written only here, before message `v` is sent, and read
                // only after message `v` is received.
                d2[v as usize].with_mut(|p| unsafe { *p = v + 10 });
                while !c2.try_send(&mut pos, Msg { id: 1, vertex: v }) {
                    thread::yield_now();
                }
            }
        });
        let mut head = 0;
        for v in 0..3u32 {
            let m = loop {
                if let Some(m) = ch.try_recv(&mut head) {
                    break m;
                }
                thread::yield_now();
            };
            assert_eq!(m, Msg { id: 1, vertex: v });
            // SAFETY: see the producer.
            cells[v as usize].with(|p| assert_eq!(unsafe { *p }, v + 10));
        }
        assert_eq!(ch.try_recv(&mut head), None, "nothing beyond what was sent");
        producer.join().unwrap();
    });
}

/// Two PEs' inboxes of mailbox numbers, for the selector models.
type Inboxes = Arc<[Mutex<VecDeque<usize>>; 2]>;

fn inboxes() -> Inboxes {
    Arc::new([Mutex::new(VecDeque::new()), Mutex::new(VecDeque::new())])
}

/// The selector termination protocol on two PEs: PE 0 sends one request to PE 1 (mailbox 0),
/// whose handler buffers a reply to PE 0 (mailbox 1, fed by 0) and hands it over when mailbox
/// 0 has terminated. Neither PE may see a mailbox terminated before its messages were handled:
/// each must end having handled exactly what was sent to it.
#[test]
fn loom_selector_termination_is_never_early() {
    use crate::actor::termination::Termination;
    loom::model(|| {
        let term = Arc::new(Termination::new(2, 2));
        // Inboxes: (mailbox, message) per PE.
        let inbox = inboxes();
        let pe = |me: usize, term: Arc<Termination>, inbox: Inboxes| {
            move || {
                if me == 0 {
                    term.sent(0, 1);
                    lock(&inbox[1]).push_back(0);
                }
                term.done(0);
                let (mut handled, mut reply, mut done1) = ([0usize; 2], false, false);
                loop {
                    let m = lock(&inbox[me]).pop_front();
                    if let Some(mailbox) = m {
                        handled[mailbox] += 1;
                        if mailbox == 0 {
                            reply = true; // buffered, not yet handed over
                        }
                        term.processed(mailbox, 1);
                    }
                    if !done1 && term.terminated(0) {
                        if reply {
                            term.sent(1, 1);
                            lock(&inbox[0]).push_back(1);
                        }
                        term.done(1);
                        done1 = true;
                    }
                    if term.terminated(0) && term.terminated(1) {
                        return handled;
                    }
                    thread::yield_now();
                }
            }
        };
        let t = thread::spawn(pe(1, term.clone(), inbox.clone()));
        let h0 = pe(0, term, inbox)();
        let h1 = t.join().unwrap();
        assert_eq!(h0, [0, 1], "PE 0 handles the reply");
        assert_eq!(h1, [1, 0], "PE 1 handles the request");
    });
}

/// The termination of a group of mailboxes that feed each other, on two PEs: PE 0's program
/// sends one message to PE 1's mailbox 0, whose handler sends one to PE 0's mailbox 1 —
/// published before the batch counts as processed, handed over later. Both programs are
/// done with both mailboxes at once. Neither PE may see the group terminated before the
/// second message was handled.
#[test]
fn loom_a_cycle_of_mailboxes_never_terminates_early() {
    use crate::actor::termination::Termination;
    loom::model(|| {
        let term = Arc::new(Termination::new(2, 2));
        let inbox = inboxes();
        let pe = |me: usize, term: Arc<Termination>, inbox: Inboxes| {
            move || {
                if me == 0 {
                    term.sent(0, 1);
                    lock(&inbox[1]).push_back(0);
                }
                term.done(0);
                term.done(1);
                let (mut handled, mut buffered) = ([0usize; 2], false);
                loop {
                    let m = lock(&inbox[me]).pop_front();
                    if let Some(mailbox) = m {
                        handled[mailbox] += 1;
                        if mailbox == 0 {
                            // The handler's send: published with the batch, buffered.
                            term.sent(1, 1);
                            buffered = true;
                        }
                        term.processed(mailbox, 1);
                    } else if buffered {
                        lock(&inbox[0]).push_back(1);
                        buffered = false;
                    }
                    if term.group_terminated(&[0, 1]) {
                        return handled;
                    }
                    thread::yield_now();
                }
            }
        };
        let t = thread::spawn(pe(1, term.clone(), inbox.clone()));
        let h0 = pe(0, term, inbox)();
        let h1 = t.join().unwrap();
        assert_eq!(h0, [0, 1], "PE 0 handles the reply");
        assert_eq!(h1, [1, 0], "PE 1 handles the request");
    });
}

/// Jobs for the deque models (never run: only who took which is checked).
fn headers<const N: usize>() -> [Header; N] {
    unsafe fn nothing(_: *const Header) {}
    std::array::from_fn(|_| Header { execute: nothing })
}

/// Runs `owner` against one thief that steals `steals` times: every job pushed is taken once,
/// by the owner's pops or the thief, never twice and never lost. At most three preemptions
/// per execution, as for the wake-up models (CHESS's finding: bugs need few): unbounded, the
/// three-job model alone took 100 s of CI's loom phase.
fn deque_model(pushed: usize, steals: usize, owner: fn(&job::Owner, &[JobRef]) -> Vec<JobRef>) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(move || {
        let hs: &'static [Header] = Box::leak(Box::new(headers::<3>()));
        // SAFETY: the headers are leaked (alive for ever) and never run.
        let jobs: Vec<JobRef> = hs[..pushed]
            .iter()
            .map(|h| unsafe { JobRef::new(h.into()) })
            .collect();
        let public = job::Public::new();
        let thief_side = public.clone();
        let thief = thread::spawn(move || {
            (0..steals)
                .filter_map(|_| thief_side.steal())
                .map(|j| j.addr())
                .collect::<Vec<_>>()
        });
        let own = job::Owner::new(public);
        let mut taken: Vec<usize> = owner(&own, &jobs).into_iter().map(|j| j.addr()).collect();
        taken.extend(thief.join().unwrap());
        taken.sort_unstable();
        let mut want: Vec<usize> = jobs.iter().map(|j| j.addr()).collect();
        want.sort_unstable();
        assert_eq!(taken, want, "each job taken exactly once");
    });
}

#[test]
fn loom_owner_pop_racing_a_steal_for_the_last_public_job() {
    deque_model(1, 1, |own, jobs| {
        own.push(jobs[0]).unwrap();
        own.pop().into_iter().collect()
    });
}

#[test]
fn loom_private_and_public_jobs_each_taken_once() {
    deque_model(2, 2, |own, jobs| {
        own.push(jobs[0]).unwrap();
        own.push(jobs[1]).unwrap();
        let mut got: Vec<JobRef> = own.pop().into_iter().collect();
        got.extend(own.pop());
        got
    });
}

#[test]
fn loom_jobs_pushed_after_a_steal_are_made_public_and_taken_once() {
    deque_model(3, 2, |own, jobs| {
        own.push(jobs[0]).unwrap();
        let mut got: Vec<JobRef> = own.pop().into_iter().collect();
        own.push(jobs[1]).unwrap();
        own.push(jobs[2]).unwrap();
        got.extend(own.pop());
        got.extend(own.pop());
        got
    });
}

/// An idle worker closing its offer while a forker hands a job over: the job is taken exactly
/// once, by the worker as it closes (the hand-over won) or kept by the forker (the offer was
/// closed when it looked). Never both, never neither.
#[test]
fn loom_a_job_handed_to_a_closing_offer_is_taken_exactly_once() {
    use crate::runtime::offer::Offer;
    loom::model(|| {
        let hs: &'static [Header] = Box::leak(Box::new(headers::<1>()));
        // SAFETY: the header is leaked (alive for ever) and never run.
        let job = unsafe { JobRef::new((&hs[0]).into()) };
        let offer = Arc::new(Offer::new());
        // The worker (this thread) goes idle, then back to work, as the forker forks.
        offer.open();
        let theirs = offer.clone();
        let forker = thread::spawn(move || theirs.give(job));
        let seen = offer.has_job();
        let took = offer.close().map(|j| j.addr());
        let given = forker.join().unwrap();
        assert!(!seen || took.is_some(), "a job seen waiting is taken");
        assert_eq!(took, given.then(|| job.addr()), "given exactly when taken");
        assert!(offer.close().is_none(), "the offer ends closed and empty");
    });
}

/// A rank's sends in flight (`job::spmd::Inflight`): two leave on other threads while the
/// issuing thread asks for the event of their draining. In every interleaving the event
/// triggers once both left (the last one may leave while the event is being set up), and
/// not before.
#[test]
fn loom_drained_is_told_when_the_last_send_leaves_and_not_before() {
    use crate::job::spmd::Inflight;
    loom::model(|| {
        let inflight = Arc::new(Inflight::default());
        inflight.start();
        inflight.start();
        let left = Arc::new(crate::sync::AtomicUsize::new(0));
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let (i, l) = (inflight.clone(), left.clone());
                loom::thread::spawn(move || {
                    l.fetch_add(1, Ordering::SeqCst);
                    i.done();
                })
            })
            .collect();
        let drained = inflight.drained();
        if drained.has_triggered() {
            assert_eq!(left.load(Ordering::SeqCst), 2, "drained early");
        }
        senders.into_iter().for_each(|t| t.join().unwrap());
        assert!(drained.has_triggered(), "the last send's wake-up was lost");
    });
}
