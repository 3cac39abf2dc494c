//! Stress tests of the completion queues and the progress path on the in-process transport:
//! a lost, duplicated or corrupted message, a lost send completion, or a collective that
//! returns early fails them.

mod common;

use tactor_comm::loopback::Loopback;
use tactor_comm::{CommError, Stopped, Transport};

fn run_world(ranks: usize, channels: usize, threads: usize, per_dest: usize) {
    let world = Loopback::world(ranks, channels);
    std::thread::scope(|s| {
        for r in &world {
            s.spawn(move || common::exchange(r, threads, per_dest));
        }
    });
}

#[test]
fn one_rank_talks_to_itself() {
    run_world(1, 1, 2, if cfg!(miri) { 10 } else { 200 });
}

#[test]
fn three_ranks_four_threads_two_channels() {
    if cfg!(miri) {
        run_world(3, 2, 2, 2);
    } else {
        run_world(3, 2, 4, 300);
    }
}

#[test]
fn many_rounds_of_small_worlds() {
    for round in 0..if cfg!(miri) { 1 } else { 40 } {
        run_world(
            2 + round % 2,
            1 + round % 3,
            if cfg!(miri) { 2 } else { 3 },
            if cfg!(miri) { 2 } else { 12 },
        );
    }
}

#[test]
fn inline_messages_keep_their_order() {
    let world = Loopback::world(2, 1);
    std::thread::scope(|s| {
        for r in &world {
            s.spawn(move || common::ordered_burst(r, if cfg!(miri) { 30 } else { 2000 }, 40));
        }
    });
}

#[test]
fn large_messages_arrive_on_channels_progressed_in_turn() {
    let world = Loopback::world(2, 2);
    std::thread::scope(|s| {
        for r in &world {
            s.spawn(move || common::large_messages_on_channels_progressed_in_turn(r));
        }
    });
}

#[test]
fn a_flood_of_large_messages_arrives_whole() {
    let world = Loopback::world(2, 1);
    // Miri interprets every byte: a short flood of small "large" messages there.
    let (count, len) = if cfg!(miri) {
        (6, 100)
    } else {
        (200, 16 * 1024)
    };
    std::thread::scope(|s| {
        for r in &world {
            s.spawn(move || common::large_flood(r, count, len));
        }
    });
}

#[test]
fn bad_sends_are_refused() {
    let w = Loopback::world(2, 2);
    assert!(matches!(
        w[0].send(2, 1, 0, vec![], None),
        Err(CommError::NoChannel { channel: 2, .. })
    ));
    assert!(matches!(
        w[0].send(0, 5, 0, vec![], None),
        Err(CommError::NoRank { rank: 5, .. })
    ));
}

#[test]
fn a_collective_gives_up_when_told() {
    let w = Loopback::world(2, 1);
    let mut polls = 0;
    // Rank 1 never arrives; the idle function stops the wait.
    let r = w[0].barrier(&mut || {
        polls += 1;
        polls < 100
    });
    assert_eq!(r, Err(Stopped));
}
