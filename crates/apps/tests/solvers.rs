//! PRK Stencil and conjugate gradients as user programs: on ranks of threads (an in-process
//! job) with 1–3 ranks and 1–3 workers each, untraced and traced, equal to their serial runs
//! (the stencil's output bit for bit, CG's solution within rounding); the command under a
//! real `mpirun` with 1, 2 and 3 ranks, over TCP without shared memory too; bad input ends
//! with one line.

mod common;

use std::process::{Command, Output};
use std::sync::Arc;
use tactor::job::Job;
use tactor::Runtime;
use tactor_apps::{cg, stencil};

/// Runs `f` on every rank of an in-process job of `ranks` ranks of `workers` workers each.
fn on_threads<R: Send>(
    ranks: usize,
    workers: usize,
    f: impl Fn(&Runtime, &Arc<Job>) -> R + Sync,
) -> Vec<R> {
    let runs = Job::run_in_process(ranks, workers, f);
    runs.into_iter().map(|r| r.unwrap()).collect()
}

const SHAPES: [(usize, usize, usize); 5] = [(1, 1, 1), (1, 3, 1), (2, 1, 2), (3, 1, 1), (2, 2, 1)];

#[test]
fn the_stencil_on_ranks_of_threads_is_the_serial_stencil() {
    let iterations = 6;
    // 23: tiles of unequal sizes, and (with 6 tiles, 2 x 3) some wholly inside the border.
    let n = 23;
    let (want, norm) = stencil::serial(n, iterations).unwrap();
    assert!((norm - stencil::reference_norm(iterations)).abs() < stencil::EPSILON);
    for (ranks, workers, per) in SHAPES {
        // Near-square, and every tile in one row (strips to the left and right only);
        // fragments of one sweep, of two, and of three (the parity changes between them).
        let all = Some(ranks * workers * per);
        for (traced, across, span) in [
            (false, None, 1),
            (true, None, 2),
            (true, all, 3),
            (true, None, 1),
        ] {
            let p = stencil::Params {
                n,
                iterations,
                tiles_per_worker: per,
                across,
                traced,
                span,
                gather: true,
            };
            for (rank, o) in on_threads(ranks, workers, |rt, job| stencil::run(rt, job, p))
                .into_iter()
                .enumerate()
            {
                let what = format!(
                    "rank {rank} of {ranks} x {workers} x {per}, traced {traced}, {across:?}"
                );
                let o = o.unwrap();
                assert_eq!(o.out.unwrap(), want, "{what}");
                assert!(
                    (o.norm - norm).abs() < 1e-12,
                    "{what}: {} vs {norm}",
                    o.norm
                );
                assert_eq!(o.tiles.0 * o.tiles.1, ranks * workers * per, "{what}");
            }
        }
    }
}

#[test]
fn cg_on_ranks_of_threads_is_the_serial_solve_within_rounding() {
    for (ranks, workers, per) in SHAPES {
        for traced in [false, true] {
            for (n, iterations, tolerance) in [(37, 9, 0.0), (12, 40, 1e-10)] {
                let p = cg::Params {
                    n,
                    iterations,
                    tolerance,
                    blocks_per_worker: per,
                    traced,
                    // Odd: fragments alternate between two traces.
                    span: 3,
                };
                let want = cg::serial(p);
                let runs = on_threads(ranks, workers, |rt, job| cg::run(rt, job, p).unwrap());
                for (rank, o) in runs.into_iter().enumerate() {
                    let what = format!(
                        "rank {rank} of {ranks} x {workers} x {per}, traced {traced}, n {n}"
                    );
                    assert_eq!(o.iterations, want.iterations, "{what}");
                    for (a, b) in o.x.iter().zip(&want.x) {
                        assert!((a - b).abs() < 1e-9, "{what}: {a} vs {b}");
                    }
                    assert!((o.residual - want.residual).abs() < 1e-9, "{what}");
                }
            }
        }
    }
    // Converged on a tolerance: exact in at most n iterations, the error is small.
    let p = cg::Params {
        n: 12,
        iterations: 40,
        tolerance: 1e-10,
        blocks_per_worker: 1,
        traced: false,
        span: 1,
    };
    let s = cg::serial(p);
    assert!(s.iterations <= 12 && s.error() < 1e-8, "{s:?}");
}

fn apps(args: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tactor-apps"))
        .args(args.split_whitespace())
        .output()
        .unwrap()
}

#[test]
fn the_command_validates_and_reports_in_one_process() {
    let text = common::ok_text(&apps("-w 2 --trace stencil -n 40 -i 5 -t 2"), "stencil");
    assert!(text.contains("solution validates"), "{text}");
    assert!(text.contains("2 x 2 tiles"), "{text}");
    let text = common::ok_text(
        &apps("-w 2 stencil -n 40 -i 5 -t 3 --across 6"),
        "stencil 6 x 1",
    );
    assert!(text.contains("6 x 1 tiles"), "{text}");
    assert!(text.contains("Rate (MFlops/s): "), "{text}");
    let text = common::ok_text(&apps("-w 2 cg -n 300 -k 20 --json"), "cg");
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["app"], "cg");
    assert_eq!(v["iterations"], 20);
    assert!(v["residual"].as_f64().unwrap() > 0.0);
    assert_eq!(v["checked_against_serial"], true);
    let text = common::ok_text(&apps("cg -n 50 -k 100 --tol 1e-9"), "cg to a tolerance");
    assert!(text.contains("within"), "{text}");
}

#[test]
fn bad_input_ends_with_one_line() {
    for (args, names) in [
        ("stencil -n 4", "smaller than the stencil"),
        ("-w 3 stencil -n 5 -t 2", "cannot be cut into 2 x 3 tiles"),
        (
            "-w 3 stencil -n 50 --across 2",
            "3 tiles cannot be laid 2 across",
        ),
        ("stencil -i 0", "--iterations"),
        ("stencil -n 9000000", "the problem"),
        ("cg -k 0", "--iterations"),
        ("-w 2 cg -n 3 -b 2", "3 cannot be cut into 4 blocks"),
        ("cg --tol 2", "2 is not a tolerance"),
        ("cg -n 0", "invalid value '0'"),
    ] {
        let out = apps(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args}");
        assert_eq!(err.lines().count(), 1, "{args}: {err}");
        assert!(err.contains(names), "{args}: {err}");
        assert!(out.stdout.is_empty(), "{args}");
    }
}

#[cfg(feature = "mpi")]
fn mpirun(np: usize, launcher: &[&str], env: &[(&str, &str)], args: &str) -> Output {
    common::mpirun(env!("CARGO_BIN_EXE_tactor-apps"), np, launcher, env, args)
}

#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_on_one_two_and_three_ranks() {
    for np in [1, 2, 3] {
        for (args, says) in [
            ("stencil -n 30 -i 4", "solution validates"),
            ("--trace -w 2 stencil -n 30 -i 4", "solution validates"),
            ("cg -n 100 -k 15", "of the serial solve"),
            ("--trace cg -n 100 -k 15 -b 2", "of the serial solve"),
        ] {
            let text = common::ok_text(&mpirun(np, &[], &[], args), &format!("-np {np} {args}"));
            assert!(text.contains(says), "-np {np} {args}: {text}");
            assert!(text.contains(&format!("{np} rank")), "{text}");
        }
    }
}

/// Ranks that cannot share memory, as on two hosts: no node-local rings, MPI over TCP only.
#[cfg(feature = "mpi")]
#[test]
fn over_tcp_without_shared_memory() {
    for args in ["--trace stencil -n 30 -i 4", "--trace cg -n 100 -k 15"] {
        let out = mpirun(
            3,
            &["--mca", "btl", "self,tcp"],
            &[("TACTOR_COMM_SHM", "0")],
            args,
        );
        let text = common::ok_text(&out, args);
        assert!(text.contains("3 ranks"), "{text}");
    }
}

/// Ranks started with different arguments are told apart at the join, named once.
#[cfg(feature = "mpi")]
#[test]
fn ranks_that_disagree_are_named_once() {
    let out = tactor_comm::launcher::run_mpirun(|c| {
        let exe = env!("CARGO_BIN_EXE_tactor-apps");
        c.args(["-np", "1", exe, "cg", "-n", "100"])
            .args([":", "-np", "1", exe, "cg", "-n", "101"]);
    })
    .expect("mpirun");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("error: ")).collect();
    assert_eq!(ours.len(), 1, "{err}");
}
