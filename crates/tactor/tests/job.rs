//! The job layer over in-process ranks (threads): collectives that keep their order and their
//! contents over many rounds, ports that lose no message whenever they open, and a failure
//! on one rank that ends every other rank's wait instead of hanging it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tactor::job::{Job, JobError, Reduce, FIRST_PORT};

/// Runs `body` on every rank of an in-process job of `ranks`, one thread each.
fn on_ranks<T: Send>(
    ranks: usize,
    channels: usize,
    body: impl Fn(&Arc<Job>) -> T + Sync,
) -> Vec<T> {
    let jobs = Job::in_process(ranks, channels);
    std::thread::scope(|s| {
        let runs: Vec<_> = jobs.iter().map(|j| s.spawn(|| body(j))).collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    })
}

#[test]
fn collectives_in_a_row_keep_their_order_and_contents() {
    let rounds = if cfg!(miri) { 2 } else { 300 };
    let results = on_ranks(3, 2, |job| {
        let me = job.rank();
        for round in 0..rounds as u64 {
            // Gathers of different sizes, a broadcast from a rank that changes, and the
            // network's own collectives, back to back: a rank that runs ahead must not mix
            // one round's messages into another's.
            let mine = vec![me as u8; (round as usize * 7 + me) % 50];
            let all = job.all_gather(mine).unwrap();
            for (r, part) in all.iter().enumerate() {
                assert_eq!(part, &vec![r as u8; (round as usize * 7 + r) % 50]);
            }
            let root = (round % 3) as usize;
            let got = job
                .broadcast(root, round.to_le_bytes().repeat(me + 1))
                .unwrap();
            assert_eq!(got, round.to_le_bytes().repeat(root + 1));
            assert_eq!(
                job.all_reduce(Reduce::Sum, round + me as u64).unwrap(),
                3 * round + 3
            );
            job.barrier().unwrap();
        }
        me
    });
    assert_eq!(results, [0, 1, 2]);
}

#[test]
fn a_port_gets_every_message_whenever_it_opens() {
    let per_rank = if cfg!(miri) { 20 } else { 2000 };
    let got = on_ranks(2, 2, |job| {
        let peer = 1 - job.rank();
        for i in 0..per_rank as u32 {
            job.send(i as usize, peer, FIRST_PORT, i.to_le_bytes().to_vec());
        }
        // Some of the peer's messages arrive before the port opens (parked), the rest after:
        // the handler gets them all, each once, in order per channel.
        job.progress(&mut Some).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let _open = job
            .open_port(
                FIRST_PORT,
                Arc::new(move |m| {
                    let v = u32::from_le_bytes(m.data[..4].try_into().unwrap());
                    s.lock().unwrap().push(v);
                }),
            )
            .unwrap();
        while seen.lock().unwrap().len() < per_rank {
            job.progress(&mut Some).unwrap();
        }
        // Nobody leaves before the other took everything (a finished rank's sends stay
        // deliverable, but its test thread would end).
        job.barrier().unwrap();
        let v = seen.lock().unwrap().clone();
        v
    });
    for seen in got {
        let mut sorted = seen.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..per_rank as u32).collect::<Vec<_>>());
        for ch in 0..2 {
            let mine: Vec<u32> = seen
                .iter()
                .copied()
                .filter(|v| *v as usize % 2 == ch)
                .collect();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "channel {ch} out of order"
            );
        }
    }
}

/// Many threads deliver while the port opens: a message that arrives in that window must
/// reach the handler (parked and handed over, or delivered), never be stranded.
#[test]
fn opening_a_port_while_messages_arrive_loses_none() {
    let rounds = if cfg!(miri) { 2 } else { 200 };
    for _ in 0..rounds {
        let job = Job::in_process(1, 4).pop().unwrap();
        let n = if cfg!(miri) { 24 } else { 64 };
        for i in 0..n {
            job.send(i, 0, FIRST_PORT, vec![i as u8]);
        }
        let count = Arc::new(AtomicUsize::new(0));
        let c = count.clone();
        std::thread::scope(|s| {
            for ch in 0..4 {
                let job = &job;
                s.spawn(move || {
                    job.progress_channel(ch, usize::MAX, &mut Some);
                });
            }
            let _open = job
                .open_port(
                    FIRST_PORT,
                    Arc::new(move |_| {
                        c.fetch_add(1, Ordering::Relaxed);
                    }),
                )
                .unwrap();
            // Keep the port open until the pollers are done (the scope joins them first
            // only if this thread waits here).
            while count.load(Ordering::Relaxed) + job.take_parked(FIRST_PORT).len() < n {
                job.progress(&mut Some).unwrap();
            }
        });
        assert_eq!(count.load(Ordering::Relaxed), n);
    }
}

#[test]
fn a_failed_rank_ends_the_others_waits() {
    for (ranks, victim) in [(2, 1), (3, 0), (3, 2)] {
        let (ended, passed) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let outcomes = on_ranks(ranks, 1, |job| {
            job.barrier().unwrap();
            if job.rank() == victim {
                // A rank out of the barrier does not mean every rank is: fail only once the
                // others are, or one still inside would see the failure there.
                while passed.load(Ordering::Acquire) < ranks - 1 {
                    std::thread::yield_now();
                }
                job.tell_failure("injected");
                return None;
            }
            passed.fetch_add(1, Ordering::Release);
            // The others wait in collectives the failed rank never joins: each must give up
            // naming it, not hang.
            let e = job.all_gather(vec![1]).unwrap_err();
            ended.fetch_add(1, Ordering::Relaxed);
            assert!(job.barrier().is_err());
            assert!(job.all_reduce(Reduce::Max, 1).is_err());
            Some(e)
        });
        assert_eq!(ended.load(Ordering::Relaxed), ranks - 1);
        for (r, o) in outcomes.into_iter().enumerate() {
            match o {
                None => assert_eq!(r, victim),
                Some(JobError::RankFailed { rank }) => {
                    assert_eq!(rank, victim);
                    assert!(!JobError::RankFailed { rank }.speaks(r));
                }
                Some(other) => panic!("rank {r}: {other}"),
            }
        }
    }
}

#[test]
fn messages_taken_in_passing_skip_the_ports() {
    let taken = on_ranks(2, 1, |job| {
        let peer = 1 - job.rank();
        job.send(0, peer, FIRST_PORT + 3, vec![7]);
        job.send(0, peer, FIRST_PORT + 4, vec![8]);
        let (mut mine, mut parked) = (Vec::new(), Vec::new());
        while mine.is_empty() || parked.is_empty() {
            job.progress(&mut |m| {
                if m.port == FIRST_PORT + 3 {
                    mine.push(m.data[0]);
                    None
                } else {
                    Some(m)
                }
            })
            .unwrap();
            parked.extend(
                job.take_parked(FIRST_PORT + 4)
                    .into_iter()
                    .map(|m| m.data[0]),
            );
        }
        job.barrier().unwrap();
        assert!(job.take_parked(FIRST_PORT + 3).is_empty());
        (mine, parked)
    });
    assert_eq!(taken, [(vec![7], vec![8]), (vec![7], vec![8])]);
}

#[test]
fn the_job_s_own_ports_are_refused() {
    let job = Job::builder().join().unwrap();
    for port in [0, 1, 2, FIRST_PORT - 1] {
        assert!(matches!(
            job.open_port(port, Arc::new(|_| {})),
            Err(JobError::PortTaken(p)) if p == port
        ));
    }
    let open = job.open_port(FIRST_PORT, Arc::new(|_| {})).unwrap();
    assert!(job.open_port(FIRST_PORT, Arc::new(|_| {})).is_err());
    drop(open);
    assert!(job.open_port(FIRST_PORT, Arc::new(|_| {})).is_ok());
}

#[test]
fn a_port_opened_after_the_workers_parked_wakes_them_to_poll() {
    // Rank 1's worker parks while no port is open (nothing to expect); then the port opens
    // and rank 0 sends to it. Only that worker progresses the network: unless opening the
    // port wakes it, the message is never delivered and the wait below runs out.
    let got = Job::run_in_process(2, 1, |_rt, job| {
        // Far past the workers' bounded spin before parking.
        std::thread::sleep(std::time::Duration::from_millis(50));
        if job.rank() == 0 {
            job.send(0, 1, FIRST_PORT, b"after the park".to_vec());
            return None;
        }
        let gate = tactor::UserEvent::new();
        let (arrived, got) = (gate.event(), Arc::new(Mutex::new(Vec::new())));
        let keep = got.clone();
        let gate = Mutex::new(Some(gate));
        let _port = job
            .open_port(
                FIRST_PORT,
                Arc::new(move |m| {
                    *keep.lock().unwrap() = m.data.clone();
                    if let Some(g) = gate.lock().unwrap().take() {
                        g.trigger().unwrap();
                    }
                }),
            )
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !arrived.has_triggered() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let data = got.lock().unwrap().clone();
        Some(data)
    });
    let rank1 = got[1].as_ref().unwrap().clone().unwrap();
    assert_eq!(rank1, b"after the park", "the parked worker never polled");
}
