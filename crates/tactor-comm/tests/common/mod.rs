//! A traffic pattern every transport must deliver exactly: several threads per rank send
//! messages of mixed sizes (inline and rendezvous) to every rank, itself included, on every
//! channel, while every thread also progresses and consumes completions.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tactor_comm::{Completion, Reduce, Transport, INLINE_LIMIT};

/// Sizes that cover empty, inline, the inline limit and both sides of it, and a large body
/// (Miri, which interprets every byte, gets small ones only).
pub const SIZES: [usize; 6] = if cfg!(miri) {
    [0, 1, 24, 25, 40, 100]
} else {
    [0, 1, 100, INLINE_LIMIT, INLINE_LIMIT + 1, 70_000]
};

fn payload(source: usize, thread: usize, seq: usize, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(24));
    v.extend_from_slice(&(source as u64).to_le_bytes());
    v.extend_from_slice(&(thread as u64).to_le_bytes());
    v.extend_from_slice(&(seq as u64).to_le_bytes());
    let mut x = (source * 131 + thread * 31 + seq) as u8;
    while v.len() < len {
        v.push(x);
        x = x.wrapping_mul(13).wrapping_add(7);
    }
    // Messages shorter than the 24-byte tag are recognised by their length alone.
    v.truncate(len.max(24));
    v
}

/// Runs the pattern on `t` with `threads` threads each sending `per_dest` messages to every
/// rank; checks that every message arrives exactly once with its contents intact, and that
/// every requested send completion is reported exactly once.
pub fn exchange(t: &dyn Transport, threads: usize, per_dest: usize) {
    let (ranks, channels, me) = (t.ranks(), t.channels(), t.rank());
    let expected = ranks * threads * per_dest;
    let received = Mutex::new(HashSet::new());
    let sent = Mutex::new(HashSet::new());
    let got = AtomicUsize::new(0);
    let acked = AtomicUsize::new(0);
    let consume = |c: Completion| match c {
        Completion::Received(m) => {
            assert_eq!(m.port, 9, "wrong port");
            let tag = |i: usize| u64::from_le_bytes(m.data[i * 8..i * 8 + 8].try_into().unwrap());
            let (source, thread, seq) = (tag(0) as usize, tag(1) as usize, tag(2) as usize);
            assert_eq!(source, m.source, "source mismatch");
            let len = SIZES[seq % SIZES.len()];
            assert_eq!(
                m.data,
                payload(source, thread, seq, len),
                "payload corrupted"
            );
            assert!(
                received.lock().unwrap().insert((source, thread, seq)),
                "message delivered twice"
            );
            got.fetch_add(1, Ordering::Relaxed);
        }
        Completion::Sent { token } => {
            assert!(sent.lock().unwrap().insert(token), "send completed twice");
            acked.fetch_add(1, Ordering::Relaxed);
        }
    };
    std::thread::scope(|s| {
        for thread in 0..threads {
            let consume = &consume;
            let (got, acked) = (&got, &acked);
            s.spawn(move || {
                for seq in 0..per_dest {
                    for dest in 0..ranks {
                        let len = SIZES[seq % SIZES.len()];
                        let token = ((thread * per_dest + seq) * ranks + dest) as u64;
                        // Every other send asks for its completion.
                        let token = (seq % 2 == 0).then_some(token);
                        let ch = (thread + seq) % channels;
                        t.send(ch, dest, 9, payload(me, thread, seq, len), token)
                            .unwrap();
                    }
                    // Interleave consuming with sending, as a worker would.
                    if let Some(c) = t.poll(seq % channels) {
                        consume(c);
                    }
                }
                let want_acks = threads * ranks * per_dest.div_ceil(2);
                while got.load(Ordering::Relaxed) < expected
                    || acked.load(Ordering::Relaxed) < want_acks
                {
                    for ch in 0..channels {
                        while let Some(c) = t.poll(ch) {
                            consume(c);
                        }
                    }
                    std::thread::yield_now();
                }
            });
        }
    });
    assert_eq!(got.load(Ordering::Relaxed), expected);
    for ch in 0..channels {
        assert!(t.completions(ch).is_empty(), "spurious completion");
    }
    // Nobody leaves before every rank received everything.
    t.barrier(&mut || true).unwrap();
    let total = t
        .all_reduce(Reduce::Sum, got.load(Ordering::Relaxed) as u64, &mut || {
            true
        })
        .unwrap();
    assert_eq!(total as usize, ranks * expected);
    let max = t.all_reduce(Reduce::Max, me as u64, &mut || true).unwrap();
    assert_eq!(max as usize, ranks - 1);
}

/// Rank 0 sends `count` inline messages of 4 to `4 + spread - 1` bytes, numbered, to rank 1
/// on channel 0 in one burst, every other one with [`Transport::send_parts`] (far
/// more than the receives a transport keeps posted) while rank 1 does not progress yet; then
/// rank 1 checks that they arrive complete and in the order they were sent, as
/// [`Transport::send`] promises for inline messages between two ranks on one channel.
pub fn ordered_burst(t: &dyn Transport, count: u32, spread: usize) {
    assert!(t.ranks() >= 2, "needs two ranks");
    match t.rank() {
        0 => {
            for seq in 0..count {
                let len = 4 + (seq as usize * 7919) % spread;
                if seq % 2 == 1 {
                    // Every other one as parts, which a transport may copy straight out: the
                    // two kinds of send must keep one order between them.
                    let rest = vec![seq as u8; len - 4];
                    let (a, b) = rest.split_at(rest.len() / 3);
                    let head = seq.to_le_bytes();
                    let mut parts = [&head[..], a, b].into_iter();
                    t.send_parts(0, 1, 5, len, &mut parts, None).unwrap();
                    continue;
                }
                let mut data = tactor_comm::buffer(len);
                data.extend_from_slice(&seq.to_le_bytes());
                data.resize(len, seq as u8);
                t.send(0, 1, 5, data, None).unwrap();
            }
        }
        1 => {
            // Not progressing at first, so that the burst outruns the posted receives.
            std::thread::sleep(std::time::Duration::from_millis(if cfg!(miri) {
                0
            } else {
                30
            }));
            let mut next = 0u32;
            while next < count {
                while let Some(c) = t.poll(0) {
                    let Completion::Received(m) = c else {
                        panic!("no send of rank 1 asked for a completion");
                    };
                    assert_eq!((m.source, m.port), (0, 5));
                    let seq = u32::from_le_bytes(m.data[..4].try_into().unwrap());
                    assert_eq!(seq, next, "message {seq} arrived where {next} was due");
                    let len = 4 + (seq as usize * 7919) % spread;
                    assert_eq!(m.data.len(), len, "message {seq} resized");
                    assert!(
                        m.data[4..].iter().all(|&b| b == seq as u8),
                        "message {seq} corrupted"
                    );
                    next += 1;
                }
            }
        }
        _ => {}
    }
    // Rank 0 leaves only once its sends are out (progressing them), then everyone together.
    while t.in_flight(0) > 0 {
        t.progress(0);
    }
    t.barrier(&mut || true).unwrap();
}

/// Rank 0 sends one payload above the inline limit on every channel to rank 1, which
/// progresses its channels strictly in turn, one progress call each, as a worker that polls
/// them all does: every payload must arrive (a transport that looks at some part of a channel
/// only every so many calls must count those calls per channel). Fails after 20 s rather than
/// hanging.
pub fn large_messages_on_channels_progressed_in_turn(t: &dyn Transport) {
    assert!(
        t.ranks() >= 2 && t.channels() >= 2,
        "needs two ranks and two channels"
    );
    let len = INLINE_LIMIT * 2 + 3;
    match t.rank() {
        0 => {
            for ch in 0..t.channels() {
                t.send(ch, 1, 4, vec![ch as u8; len], None).unwrap();
            }
            let start = std::time::Instant::now();
            while (0..t.channels()).any(|ch| t.in_flight(ch) > 0) {
                for ch in 0..t.channels() {
                    t.progress(ch);
                }
                assert!(
                    start.elapsed().as_secs() < 20,
                    "rank 0's sends never finished"
                );
            }
        }
        1 => {
            let mut arrived = vec![false; t.channels()];
            let start = std::time::Instant::now();
            while arrived.iter().any(|a| !a) {
                for (ch, seen) in arrived.iter_mut().enumerate() {
                    t.progress(ch);
                    while let Some(c) = t.completions(ch).pop() {
                        let Completion::Received(m) = c else { continue };
                        assert_eq!((m.source, m.data.len()), (0, len));
                        assert!(
                            m.data.iter().all(|&b| b == ch as u8),
                            "channel {ch} corrupted"
                        );
                        *seen = true;
                    }
                }
                assert!(
                    start.elapsed().as_secs() < 20,
                    "channels {:?} never delivered their message",
                    arrived
                        .iter()
                        .enumerate()
                        .filter(|a| !a.1)
                        .map(|a| a.0)
                        .collect::<Vec<_>>()
                );
            }
        }
        _ => {}
    }
    t.barrier(&mut || true).unwrap();
}

/// Rank 0 floods rank 1 with `count` messages of `len` bytes each, more than a node-local
/// ring holds when `len` is above the inline limit: whichever way each goes (a ring that has
/// room at once, else the MPI path), every one arrives exactly once and intact. Fails after
/// 20 s rather than hanging.
pub fn large_flood(t: &dyn Transport, count: usize, len: usize) {
    let body = |i: usize| -> Vec<u8> {
        let mut v = (i as u64).to_le_bytes().to_vec();
        v.extend((8..len).map(|k| (k as u8) ^ (i as u8).wrapping_mul(31)));
        v
    };
    let start = std::time::Instant::now();
    match t.rank() {
        0 => {
            for i in 0..count {
                t.send(0, 1, 5, body(i), None).unwrap();
                t.progress(0);
            }
            while t.in_flight(0) > 0 {
                t.progress(0);
                assert!(
                    start.elapsed().as_secs() < 20,
                    "rank 0's sends never finished"
                );
            }
        }
        1 => {
            let mut seen = vec![false; count];
            let mut left = count;
            while left > 0 {
                t.progress(0);
                while let Some(c) = t.completions(0).pop() {
                    let Completion::Received(m) = c else { continue };
                    let i = u64::from_le_bytes(m.data[..8].try_into().unwrap()) as usize;
                    assert_eq!(m.data, body(i), "message {i} corrupted");
                    assert!(!std::mem::replace(&mut seen[i], true), "message {i} twice");
                    left -= 1;
                }
                assert!(start.elapsed().as_secs() < 20, "{left} messages never came");
            }
        }
        _ => {}
    }
    t.barrier(&mut || true).unwrap();
}
