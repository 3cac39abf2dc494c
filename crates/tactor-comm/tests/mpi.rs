//! The MPI transport on real ranks. Each test re-runs this test binary under `mpirun` (with
//! `--oversubscribe`, so it works on any core count) and checks that every rank passed; inside
//! `mpirun` the same test runs the traffic pattern.
#![cfg(feature = "mpi")]

mod common;

use tactor_comm::mpi::{node, MpiTransport};

/// Runs `test` on `ranks` ranks with the node-local path on.
fn under_mpirun(test: &str, ranks: usize, body: impl FnOnce()) {
    under_mpirun_with(test, ranks, "1", body)
}

/// Runs `test` on `ranks` ranks with `TACTOR_COMM_SHM` set to `shm` (`0`: every message takes
/// MPI's path).
fn under_mpirun_with(test: &str, ranks: usize, shm: &str, body: impl FnOnce()) {
    if tactor_comm::launcher::job().is_some() {
        // A rank whose check fails ends at once, without finalising MPI, so that `mpirun`
        // ends the others: they may be waiting for it (in a barrier, or for room in a ring)
        // and the test would hang instead of failing.
        let report = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            report(info);
            std::process::exit(101);
        }));
        body();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = tactor_comm::launcher::run_mpirun(|c| {
        c.env(node::ENV, shm)
            .args(["-np", &ranks.to_string()])
            .arg(exe)
            .args(["--exact", test, "--nocapture", "--test-threads", "1"]);
    })
    .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{test} on {ranks} ranks failed:\n{text}"
    );
    assert_eq!(
        text.matches("1 passed").count(),
        ranks,
        "not every rank ran the test:\n{text}"
    );
}

#[test]
fn two_ranks_two_channels() {
    under_mpirun("two_ranks_two_channels", 2, || {
        let net = MpiTransport::init(2).unwrap();
        common::exchange(&net, 3, 120);
    });
}

#[test]
fn three_ranks_one_channel() {
    under_mpirun("three_ranks_one_channel", 3, || {
        let net = MpiTransport::init(1).unwrap();
        common::exchange(&net, 2, 60);
    });
}

#[test]
fn inline_messages_keep_their_order_past_the_posted_receives() {
    under_mpirun(
        "inline_messages_keep_their_order_past_the_posted_receives",
        2,
        || {
            let net = MpiTransport::init(1).unwrap();
            common::ordered_burst(&net, 2000, 40);
        },
    );
}

#[test]
fn two_ranks_two_channels_through_mpi_alone() {
    under_mpirun_with("two_ranks_two_channels_through_mpi_alone", 2, "0", || {
        let net = MpiTransport::init(2).unwrap();
        common::exchange(&net, 3, 120);
    });
}

#[test]
fn three_ranks_one_channel_through_mpi_alone() {
    under_mpirun_with("three_ranks_one_channel_through_mpi_alone", 3, "0", || {
        let net = MpiTransport::init(1).unwrap();
        common::exchange(&net, 2, 60);
    });
}

#[test]
fn inline_messages_keep_their_order_through_mpi_alone() {
    under_mpirun_with(
        "inline_messages_keep_their_order_through_mpi_alone",
        2,
        "0",
        || {
            let net = MpiTransport::init(1).unwrap();
            common::ordered_burst(&net, 2000, 40);
        },
    );
}

/// Full-size inline messages: a burst many times what a node-local ring holds waits in order
/// behind the full ring, and none is lost or reordered as the receiver drains it.
#[test]
fn a_burst_larger_than_the_node_ring_keeps_its_order() {
    under_mpirun(
        "a_burst_larger_than_the_node_ring_keeps_its_order",
        2,
        || {
            let net = MpiTransport::init(1).unwrap();
            common::ordered_burst(&net, 300, tactor_comm::INLINE_LIMIT - 4);
        },
    );
}

/// Payloads above the inline limit take a node-local ring only when it has room at once:
/// a flood of them many times what the ring holds goes partly by MPI, and all arrive.
#[test]
fn a_flood_of_large_messages_arrives_whole_through_ring_and_mpi() {
    under_mpirun(
        "a_flood_of_large_messages_arrives_whole_through_ring_and_mpi",
        2,
        || {
            let net = MpiTransport::init(1).unwrap();
            common::large_flood(&net, 400, 16 * 1024);
            common::large_flood(&net, 50, 40 * 1024);
        },
    );
}

#[test]
fn a_bad_shared_memory_setting_is_refused_by_name() {
    under_mpirun_with(
        "a_bad_shared_memory_setting_is_refused_by_name",
        2,
        "maybe",
        || {
            let err = MpiTransport::init(1)
                .err()
                .expect("init must refuse")
                .to_string();
            assert!(
                err.contains("TACTOR_COMM_SHM") && err.contains("'maybe'"),
                "{err}"
            );
        },
    );
}

#[test]
fn large_messages_arrive_on_channels_progressed_in_turn() {
    under_mpirun(
        "large_messages_arrive_on_channels_progressed_in_turn",
        2,
        || {
            let net = MpiTransport::init(2).unwrap();
            common::large_messages_on_channels_progressed_in_turn(&net);
        },
    );
}

/// Each rank sends the other `count` numbered messages; the receiver takes a third in place
/// as it waits for them (`take_inline`), a third as its progress reads them
/// (`progress_offering`), and the rest through the completion queue (both decline them):
/// every message arrives exactly once, intact, whichever way it came. Returns how many each
/// in-place way took.
fn taken_in_place_or_queued(net: &MpiTransport, count: u64) -> (usize, usize) {
    use tactor_comm::{Completion, Transport};
    let other = 1 - net.rank();
    let payload = |i: u64| -> Vec<u8> { (0..40).map(|k| (i as u8).wrapping_mul(7) ^ k).collect() };
    for i in 0..count {
        let mut data = i.to_le_bytes().to_vec();
        data.extend(payload(i));
        net.send(0, other, 5, data, None).unwrap();
    }
    let seen = std::cell::RefCell::new(vec![false; count as usize]);
    let record = |data: &[u8]| {
        let i = u64::from_le_bytes(data[..8].try_into().unwrap());
        assert_eq!(data[8..], payload(i), "message {i} corrupted");
        let was = std::mem::replace(&mut seen.borrow_mut()[i as usize], true);
        assert!(!was, "message {i} twice");
    };
    let third = |data: &[u8]| u64::from_le_bytes(data[..8].try_into().unwrap()) % 3;
    let (mut got, mut waited, mut offered) = (0, 0, 0);
    while got < count {
        let mut want = |port: u16, data: &[u8]| {
            assert_eq!(port, 5);
            let take = third(data) == 1;
            if take {
                record(data);
            }
            take
        };
        if net.take_inline(0, other, &mut want) == Some(true) {
            got += 1;
            waited += 1;
            continue;
        }
        let mut offer = |source: usize, port: u16, data: &[u8]| {
            assert_eq!((source, port), (other, 5));
            let take = third(data) == 2;
            if take {
                record(data);
                offered += 1;
                got += 1;
            }
            take
        };
        net.progress_offering(0, &mut offer);
        while let Some(c) = net.completions(0).pop() {
            if let Completion::Received(m) = c {
                assert_eq!((m.source, m.port), (other, 5));
                record(&m.data);
                got += 1;
            }
        }
    }
    assert!(seen.borrow().iter().all(|&s| s));
    net.barrier(&mut || {
        net.progress(0);
        true
    })
    .unwrap();
    (waited, offered)
}

#[test]
fn messages_taken_in_place_arrive_exactly_once() {
    under_mpirun("messages_taken_in_place_arrive_exactly_once", 2, || {
        let net = MpiTransport::init(1).unwrap();
        let (waited, offered) = taken_in_place_or_queued(&net, 3000);
        // Through the rings many are read in place each way (a progress call may have moved
        // some of the first kind to the queue first).
        assert!(
            waited > 0,
            "no message was taken in place by a waiting receiver"
        );
        assert!(offered > 0, "no message was taken in place by progress");
    });
}

#[test]
fn without_the_node_path_nothing_is_offered_in_place() {
    under_mpirun_with(
        "without_the_node_path_nothing_is_offered_in_place",
        2,
        "0",
        || {
            let net = MpiTransport::init(1).unwrap();
            assert_eq!(taken_in_place_or_queued(&net, 500), (0, 0));
        },
    );
}
