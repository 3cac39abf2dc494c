//! The MPI transport on real ranks. Each test re-runs this test binary under `mpirun` (with
//! `--oversubscribe`, so it works on any core count) and checks that every rank passed; inside
//! `mpirun` the same test runs the traffic pattern.
#![cfg(feature = "mpi")]

mod common;

use std::process::Command;
use tactor_comm::mpi::MpiTransport;

fn under_mpirun(test: &str, ranks: usize, body: impl FnOnce()) {
    if tactor_comm::launcher::job().is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new("mpirun");
    let session = tactor_comm::launcher::private_session(&mut cmd).unwrap();
    let out = cmd
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        .arg(exe)
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .output()
        .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)");
    let _ = std::fs::remove_dir_all(session);
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
            common::ordered_burst(&net, 2000);
        },
    );
}
