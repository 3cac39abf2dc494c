use super::*;
use crate::{Runtime, SubgraphBuilder};
use std::sync::atomic::AtomicUsize;

/// An exchange on each rank of an in-process job of two.
fn pair() -> (Vec<Arc<Job>>, Vec<Arc<Exchange>>) {
    let jobs = Job::in_process(2, 1);
    let ex = jobs
        .iter()
        .map(|j| Exchange::open(j, crate::job::FIRST_PORT).unwrap())
        .collect();
    (jobs, ex)
}

/// Progresses both ranks until `done` holds (or fails after a few seconds).
fn poll_until(ex: &[Arc<Exchange>], mut done: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        for e in ex {
            e.poll(0);
        }
        assert!(start.elapsed().as_secs() < 20, "nothing came");
    }
}

fn word(k: u32) -> [u8; 4] {
    k.to_le_bytes()
}

#[test]
fn a_message_meets_its_event_whichever_comes_first() {
    let (_jobs, ex) = pair();
    let early = ex[1].arrival((0, 2, 0));
    ex[0].send(0, 1, (0, 1), 1, 4, std::iter::once(&word(7)[..]));
    ex[0].send_buffer(0, 1, (0, 2), 2, &[1, 2, 3, 4, 5, 6]);
    poll_until(&ex, || early.has_triggered());
    // Arrived before anyone waited: filed, and its event triggers at once.
    poll_until(&ex, || ex[1].pending() == 2);
    let late = ex[1].arrival((0, 1, 0));
    assert!(late.has_triggered());
    let m = ex[1].receive((0, 1, 0), 1, 4).unwrap();
    assert_eq!(Exchange::payload(&m), word(7));
    let m = ex[1].receive((0, 2, 0), 2, 6).unwrap();
    assert_eq!(Exchange::payload(&m), [1, 2, 3, 4, 5, 6]);
    assert_eq!(ex[1].pending(), 0);
    assert!(ex[1].take_error().is_none());
}

#[test]
fn a_message_opens_an_inlet_and_lands_in_its_slot() {
    let (_jobs, ex) = pair();
    let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
    let mut b = SubgraphBuilder::<Inbox>::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let t = b.task(0, move |inbox: &Inbox| {
        let data = inbox[1].lock().unwrap().take();
        s.lock()
            .unwrap()
            .push(data.map(|m| Exchange::payload(&m).to_vec()));
    });
    for _ in 0..2 {
        let m = b.precondition();
        b.wait_for(m, t);
    }
    let graph = b.compile(&rt).unwrap();
    let inbox: Inbox = (0..2).map(|_| Mutex::new(None)).collect();
    // The first message is there before the inlets are registered, the second comes after.
    ex[0].send_buffer(0, 1, (3, 0), 1, &[9]);
    poll_until(&ex, || ex[1].pending() == 1);
    let (instance, inlets) = graph.instantiate_with_inlets(inbox.clone(), &[], 2);
    ex[1].inlets(&inbox, [(3, 0, 0), (3, 1, 0)].into_iter().zip(inlets));
    ex[0].send_buffer(0, 1, (3, 1), 1, &[8]);
    poll_until(&ex, || instance.completion.has_triggered());
    instance.completion.wait().unwrap();
    let got = seen.lock().unwrap().clone();
    assert_eq!(got, [Some(vec![8])]);
    let first = inbox[0].lock().unwrap().take().unwrap();
    assert_eq!(ex[1].check((3, 0, 0), Some(&first), 1, 1), Some(&[9u8][..]));
    assert_eq!(ex[1].pending(), 0);
}

#[test]
fn a_wrong_count_or_a_second_copy_is_this_ranks_error() {
    let (_jobs, ex) = pair();
    ex[0].send_buffer(0, 1, (0, 5), 2, &[1, 2]);
    poll_until(&ex, || ex[1].pending() == 1);
    assert!(ex[1].receive((0, 5, 0), 3, 3).is_none());
    let e = ex[1].take_error().unwrap();
    assert!(e.contains("expected 3 items of step 5 from rank 0"), "{e}");
    // The rank gave up: what it waits for now is poisoned, and it sends nothing more.
    assert!(ex[1].arrival((0, 6, 0)).wait().is_err());

    let (_jobs, ex) = pair();
    ex[0].send_buffer(0, 1, (1, 5), 1, &[1]);
    ex[0].send_buffer(0, 1, (1, 5), 1, &[1]);
    poll_until(&ex, || ex[1].abandoned.load(Ordering::Acquire));
    let e = ex[1].take_error().unwrap();
    assert!(e.contains("arrived twice from rank 0"), "{e}");
}

#[test]
fn a_failed_rank_poisons_what_waits_and_what_comes_later() {
    let (jobs, ex) = pair();
    let waiting = ex[1].arrival((0, 1, 0));
    ex[0].send_buffer(0, 1, (0, 0), 1, &[4]);
    poll_until(&ex, || ex[1].pending() == 2);
    jobs[0].tell_failure("broke");
    poll_until(&ex, || waiting.has_triggered());
    let why = waiting.wait().unwrap_err().to_string();
    assert!(why.contains("rank 0 failed"), "{why}");
    assert!(ex[1].arrival((0, 2, 0)).wait().is_err());
    assert!(ex[1].pull((0, 3, 0), &mut |_| ()).is_err());
    // What arrived before the failure is still there for the task it released.
    assert!(ex[1].receive((0, 0, 0), 1, 1).is_some());
}

/// Exchanges opened and dropped one after another on one job leave no failure hooks behind,
/// and the one open when a rank fails is still told.
#[test]
fn exchanges_dropped_leave_no_failure_hooks_and_the_open_one_is_told() {
    let jobs = Job::in_process(2, 1);
    for _ in 0..if cfg!(miri) { 8 } else { 50 } {
        let ex = Exchange::open(&jobs[1], crate::job::FIRST_PORT).unwrap();
        drop(ex);
        assert!(jobs[1].hooks_held() <= 1, "{} hooks", jobs[1].hooks_held());
    }
    let ex = Exchange::open(&jobs[1], crate::job::FIRST_PORT).unwrap();
    let waiting = ex.arrival((0, 1, 0));
    jobs[0].tell_failure("broke");
    let start = std::time::Instant::now();
    while !waiting.has_triggered() {
        ex.poll(0);
        assert!(start.elapsed().as_secs() < 20, "the failure never came");
    }
    assert!(waiting
        .wait()
        .unwrap_err()
        .to_string()
        .contains("rank 0 failed"));
}

/// Rank 0 sends many messages while on rank 1 one thread progresses the network, one waits
/// for half of the keys by event (registered in the opposite order) and one pulls the other
/// half (with `pull`, or driving a `pulling` by hand): every message reaches its waiter once with its own bytes, nothing is left over, and
/// no wake-up is lost (a lost one hangs the test).
#[test]
fn racing_messages_waiters_and_pullers_lose_nothing() {
    let n: u32 = if cfg!(miri) { 16 } else { 20_000 };
    let (_jobs, ex) = pair();
    let done = AtomicBool::new(false);
    let pulled = AtomicUsize::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..n {
                ex[0].send_buffer(0, 1, (0, i64::from(k)), 1, &word(k));
                ex[0].poll(0);
            }
            while !done.load(Ordering::Acquire) {
                ex[0].poll(0);
                std::thread::yield_now();
            }
        });
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                ex[1].poll(0);
                std::thread::yield_now();
            }
        });
        let puller = s.spawn(|| {
            for k in (1..n).step_by(2) {
                let mut got = None;
                let key = (0, i64::from(k), 0);
                let mut take = |m: &[u8]| got = Some(Exchange::payload(m).to_vec());
                if k % 4 == 1 {
                    ex[1].pull(key, &mut take).unwrap();
                } else {
                    // Driven by hand, as a thread outside the runtime waits.
                    let mut pulling = ex[1].pulling(key);
                    while !pulling.poll(&mut take).unwrap() {
                        std::thread::yield_now();
                    }
                }
                assert_eq!(got.unwrap(), word(k), "key {k}");
                pulled.fetch_add(1, Ordering::Relaxed);
            }
        });
        let events: Vec<(u32, Event)> = (0..n)
            .rev()
            .filter(|k| k % 2 == 0)
            .map(|k| (k, ex[1].arrival((0, i64::from(k), 0))))
            .collect();
        let start = std::time::Instant::now();
        for (k, e) in events {
            // A lost wake-up fails here instead of hanging.
            while !e.has_triggered() {
                assert!(start.elapsed().as_secs() < 60, "key {k} never came");
                std::thread::yield_now();
            }
            e.wait().unwrap();
            let m = ex[1].receive((0, i64::from(k), 0), 1, 4).unwrap();
            assert_eq!(Exchange::payload(&m), word(k), "key {k}");
        }
        puller.join().unwrap();
        done.store(true, Ordering::Release);
    });
    assert_eq!(pulled.load(Ordering::Relaxed), (n / 2) as usize);
    assert_eq!(ex[1].pending(), 0);
    assert!(ex[1].take_error().is_none());
}

#[test]
fn a_round_names_messages_left_unused_and_a_broken_protocol() {
    let got = Job::run_in_process(2, 1, |rt, job| {
        let ex = Exchange::open(job, crate::job::FIRST_PORT).unwrap();
        let me = job.rank();
        // Rank 1 sees rank 0's message arrive and leaves it there.
        let unused = ex.round(rt, || {
            match me {
                0 => ex.send_buffer(0, 1, (0, 0), 1, &[1]),
                _ => ex.arrival((0, 0, 0)).wait().map_err(|e| e.to_string())?,
            }
            Ok::<(), String>(())
        });
        // Rank 1 expects 3 items where rank 0 sent 2: the protocol broke on rank 1, which
        // the round names before the body's own failure.
        let broken = ex.round(rt, || {
            if me == 0 {
                ex.send_buffer(0, 1, (0, 5), 2, &[1, 2]);
                return Ok(());
            }
            ex.arrival((0, 5, 0)).wait().map_err(|e| e.to_string())?;
            match ex.receive((0, 5, 0), 3, 3) {
                Some(_) => Ok(()),
                None => Err("a bad message".to_string()),
            }
        });
        (unused, broken)
    });
    let (unused, broken) = got[0].as_ref().unwrap();
    assert_eq!((unused, broken), (&Ok(()), &Ok(())));
    let (unused, broken) = got[1].as_ref().unwrap();
    assert_eq!(unused, &Err(RoundError::Unused(1)));
    match broken {
        Err(RoundError::Broken(why)) => assert!(why.contains("expected 3 items"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_round_that_fails_here_abandons_the_exchange() {
    let (jobs, ex) = pair();
    let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
    std::thread::scope(|s| {
        // The other rank only joins the round's barrier.
        s.spawn(|| jobs[0].barrier().unwrap());
        let r = ex[1].round(&rt, || Err::<(), _>("bad input"));
        assert_eq!(r, Err(RoundError::Failed("bad input")));
    });
    // Abandoned: what waits for a message ends at once.
    assert!(ex[1].pull((0, 1, 0), &mut |_| {}).is_err());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a liveness check in real time, which Miri slows a thousandfold"
)]
fn a_task_waiting_for_a_late_message_keeps_a_worker_polling() {
    // Rank 1's only worker runs a task that pulls a message rank 0 sends late, outside any
    // round and with nothing expected: the task suspends on the message's event, and its
    // worker, with nothing else to do, must keep polling rather than park with the message
    // left unread in its channel.
    let (_jobs, ex) = pair();
    let rt = Runtime::builder()
        .workers(1)
        .pin(false)
        .poller(ex[1].clone())
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let ex1 = ex[1].clone();
    let _done = rt.launch(crate::Placement::Any, &[], move || {
        let mut got = Vec::new();
        let pulled = ex1.pull((0, 5, 0), &mut |m| got = Exchange::payload(m).to_vec());
        let _ = tx.send(pulled.map(|()| got));
    });
    // Long enough for the worker to give up spinning and park, were it to.
    std::thread::sleep(std::time::Duration::from_millis(200));
    ex[0].send_buffer(0, 1, (0, 5), 1, &word(9));
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the task got its message (a minute is far beyond what it needs)");
    assert_eq!(got.unwrap(), word(9));
    assert_eq!(ex[1].pending(), 0);
}
