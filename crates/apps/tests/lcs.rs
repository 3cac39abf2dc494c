//! The longest common subsequence as a user program across ranks, on futures (`Spmd`) and as
//! one compiled subgraph (`ShardedBuilder`): the same code in one process, on ranks of
//! threads (an in-process job) and under a real `mpirun` with 1, 2 and 3 ranks — node-local
//! rings or TCP only — always equal to the serial dynamic program; a rank that fails ends
//! every rank with one line naming it.

mod common;

use std::process::Command;
use tactor::job::Job;
use tactor_apps::lcs::{self, Face, Params};

#[test]
fn ranks_of_threads_get_the_serial_answer() {
    let (length, tile) = if cfg!(miri) { (12, 4) } else { (300, 23) };
    let (a, b) = lcs::strings(length);
    let want = lcs::serial(&a, &b);
    let shapes = [(1, 3), (2, 1), (3, 2)];
    for ((ranks, workers), face) in shapes
        .into_iter()
        .flat_map(|s| [(s, Face::Futures), (s, Face::Compiled)])
    {
        let p = Params {
            length,
            tile,
            fail_here: false,
            face,
        };
        let runs = Job::run_in_process(ranks, workers, |rt, job| lcs::run(rt, job, p).unwrap());
        for (rank, o) in runs.into_iter().map(Result::unwrap).enumerate() {
            assert_eq!(
                o.lcs, want,
                "rank {rank} of {ranks} x {workers} workers, {face:?}"
            );
            assert_eq!(o.tiles, length.div_ceil(tile).pow(2));
        }
    }
}

#[test]
fn the_command_checks_itself_and_refuses_bad_sizes() {
    let out = Command::new(env!("CARGO_BIN_EXE_lcs"))
        .args(["-n", "400", "-t", "37", "-w", "2"])
        .output()
        .unwrap();
    let text = common::ok_text(&out, "-n 400 -t 37 -w 2");
    assert!(text.contains("1 ranks x 2 workers"), "{text}");
    assert!(text.contains("checked against the serial result"), "{text}");
    for bad in [
        ["-n", "0"],
        ["-t", "0"],
        ["-w", "many"],
        ["-t", "1"],
        ["--face", "actors"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_lcs"))
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{bad:?}: {err}");
    }
}

#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_on_one_two_and_three_ranks_shared_memory_or_tcp() {
    let runs = [
        (1, false, "futures"),
        (2, false, "futures"),
        (3, false, "futures"),
        (2, true, "futures"),
        (3, true, "futures"),
        (2, false, "compiled"),
        (3, true, "compiled"),
    ];
    for (np, tcp, face) in runs {
        let (launcher, env): (&[&str], &[(&str, &str)]) = match tcp {
            true => (&["--mca", "btl", "self,tcp"], &[("TACTOR_COMM_SHM", "0")]),
            false => (&[], &[]),
        };
        let out = common::mpirun(
            env!("CARGO_BIN_EXE_lcs"),
            np,
            launcher,
            env,
            &format!("-n 600 -t 50 -w 1 --face {face}"),
        );
        let what = format!("-np {np}, tcp {tcp}, {face}");
        let text = common::ok_text(&out, &what);
        assert_eq!(
            text.lines().count(),
            1,
            "{what}: rank 0 alone reports: {text}"
        );
        assert!(text.contains(&format!("{np} ranks")), "{what}: {text}");
        assert!(
            text.contains("checked against the serial result"),
            "{what}: {text}"
        );
    }
}

/// A rank that fails ends every rank, with one line from that rank.
#[cfg(feature = "mpi")]
#[test]
fn a_rank_that_fails_ends_every_rank_named_once() {
    for (np, bad, face) in [(2, 1, "futures"), (3, 0, "futures"), (3, 2, "compiled")] {
        let env = [("LCS_FAULT", bad.to_string())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let args = format!("-n 500 -t 20 --face {face}");
        let out = common::mpirun(env!("CARGO_BIN_EXE_lcs"), np, &[], &env, &args);
        common::failed_once(&out, bad, &format!("{np} ranks"));
    }
}
