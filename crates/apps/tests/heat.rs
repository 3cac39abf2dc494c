//! The heat equation as a user program: the same code in one process, on ranks of threads
//! (an in-process job) and under a real `mpirun` with 1, 2 and 3 ranks — node-local rings or
//! TCP only — always equal to its serial result; a rank that fails ends every rank with one
//! line naming it.

mod common;

use std::process::{Command, Output};
use tactor::job::Job;
use tactor_apps::heat::{self, Params};

fn params(cells: usize, steps: usize, traced: bool) -> Params {
    Params {
        cells,
        steps,
        traced,
        fail_here: false,
    }
}

/// Runs the heat equation on `ranks` in-process ranks of `workers` workers each.
fn on_threads(ranks: usize, workers: usize, p: Params) -> Vec<heat::Outcome> {
    let runs = Job::run_in_process(ranks, workers, |rt, job| heat::run(rt, job, p).unwrap());
    runs.into_iter().map(|r| r.unwrap()).collect()
}

#[test]
fn ranks_of_threads_get_the_serial_result() {
    let steps = if cfg!(miri) { 4 } else { 40 };
    for (ranks, workers) in [(1, 1), (1, 3), (2, 1), (3, 2)] {
        for traced in [false, true] {
            let runs = on_threads(ranks, workers, params(5, steps, traced));
            let want = heat::serial(5 * ranks * workers, steps);
            for (rank, o) in runs.iter().enumerate() {
                let what = format!("rank {rank} of {ranks} x {workers} workers, traced {traced}");
                assert_eq!(o.rod, want, "{what}");
                // Traced: one fragment recorded, replayed for every later pair of steps.
                assert_eq!(o.traces, usize::from(traced), "{what}");
                // Each step from the second on, a rank sends its edge to each neighbouring
                // rank and receives theirs; at the end every rank sends its blocks to every
                // other rank and receives theirs (the rod read back everywhere). The last
                // edges travel too, unread: a rank that read its neighbour's edges is sent
                // each new one as it is written (the runtime's eager copies).
                let neighbours = usize::from(rank > 0) + usize::from(rank + 1 < ranks);
                let expect = 2 * neighbours * steps + 2 * workers * (ranks - 1);
                assert_eq!(o.copies as usize, expect, "{what}");
            }
        }
    }
}

#[test]
fn odd_steps_and_one_cell_blocks_too() {
    for steps in [0, 1, 3, 7] {
        for o in on_threads(2, 2, params(1, steps, true)) {
            assert_eq!(o.rod, heat::serial(4, steps), "{steps} steps");
        }
    }
}

#[cfg(feature = "mpi")]
fn mpirun(np: usize, launcher: &[&str], env: &[(&str, &str)], args: &str) -> Output {
    common::mpirun(env!("CARGO_BIN_EXE_heat"), np, launcher, env, args)
}

#[test]
fn the_command_checks_itself_in_one_process() {
    let out = Command::new(env!("CARGO_BIN_EXE_heat"))
        .args(["-n", "50", "-s", "30", "-w", "2", "--trace"])
        .output()
        .unwrap();
    let text = common::ok_text(&out, "-n 50 -s 30 -w 2 --trace");
    assert!(
        text.contains("heat: 100 cells, 30 steps, 1 ranks x 2 workers, traced"),
        "{text}"
    );
    let bad = Command::new(env!("CARGO_BIN_EXE_heat"))
        .args(["-n", "0"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_on_one_two_and_three_ranks() {
    for np in [1, 2, 3] {
        for args in ["-n 40 -s 25", "-n 40 -s 25 --trace -w 2"] {
            let out = mpirun(np, &[], &[], args);
            let text = common::ok_text(&out, &format!("-np {np} {args}"));
            assert_eq!(text.lines().count(), 1, "rank 0 alone reports: {text}");
            assert!(text.contains(&format!("{np} ranks")), "{text}");
            assert!(text.contains("checked against the serial result"), "{text}");
        }
    }
}

/// Ranks that cannot share memory, as on two hosts: no node-local rings, MPI over TCP only.
#[cfg(feature = "mpi")]
#[test]
fn over_tcp_without_shared_memory() {
    for np in [2, 3] {
        let out = mpirun(
            np,
            &["--mca", "btl", "self,tcp"],
            &[("TACTOR_COMM_SHM", "0")],
            "-n 30 -s 20 --trace",
        );
        let text = common::ok_text(&out, &format!("-np {np}"));
        assert!(text.contains("checked against the serial result"), "{text}");
    }
}

/// A rank that fails half-way ends every rank, with one line from that rank.
#[cfg(feature = "mpi")]
#[test]
fn a_rank_that_fails_ends_every_rank_named_once() {
    for (np, bad) in [(2, 1), (3, 0), (3, 2)] {
        for args in ["-n 20 -s 40", "-n 20 -s 40 --trace"] {
            let out = mpirun(np, &[], &[("HEAT_FAULT", &bad.to_string())], args);
            common::failed_once(&out, bad, &format!("{np} ranks, {args}"));
        }
    }
}
