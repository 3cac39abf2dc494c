//! Bale apps with PEs on several ranks under a real `mpirun`: every app's selector spans the
//! ranks and checks its answer; the baselines, which run in one process, and bad input are
//! refused with one line; a check failing on one rank fails the job, named by that rank.
#![cfg(feature = "mpi")]

use std::process::Output;

fn mpirun(np: usize, args: &str) -> Output {
    mpirun_with(np, &[], args)
}

/// `bale args` on `np` ranks, with `launcher` flags given to `mpirun` first.
fn mpirun_with(np: usize, launcher: &[&str], args: &str) -> Output {
    tactor_comm::launcher::run_mpirun(|c| {
        c.args(launcher)
            .args(["-np", &np.to_string()])
            .arg(env!("CARGO_BIN_EXE_bale"))
            .args(args.split_whitespace());
    })
    .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)")
}

/// Runs `args` on `np` ranks, which must succeed with one JSON line from rank 0.
fn report(np: usize, args: &str) -> serde_json::Value {
    let out = mpirun(np, &format!("{args} --json"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{np} ranks, {args}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "rank 0 reports once: {stdout}");
    serde_json::from_str(lines[0]).unwrap()
}

#[test]
fn a_histogram_spanning_ranks_counts_every_update() {
    for (np, pes, seed) in [(2, 1, 1), (2, 2, 2), (3, 1, 3)] {
        let v = report(
            np,
            &format!("histogram -n 20000 -T 100 --pes {pes} -s {seed}"),
        );
        assert_eq!(v["pes"], np * pes);
        assert_eq!(v["operations"], 20000 * np * pes);
    }
}

#[test]
fn index_gather_spanning_ranks_gets_every_value() {
    for (np, pes, seed) in [(2, 1, 4), (2, 2, 5), (3, 1, 6)] {
        let v = report(np, &format!("ig -n 20000 -T 1000 --pes {pes} -s {seed}"));
        assert_eq!(v["app"], "index-gather");
        assert_eq!(v["operations"], 20000 * np * pes);
    }
}

/// The matrix apps and randperm, each on 2 and 3 ranks with one or two PEs each, several
/// seeds and inputs: each checks its whole answer on every rank.
#[test]
fn every_app_runs_spanning_ranks_and_checks_its_answer() {
    let apps = [
        ("randperm -n 3000", "randperm", 3000),
        ("transpose -n 300 -z 6", "transpose", 0),
        ("permute -n 300 -z 6 --graph geometric", "permute", 0),
        ("toposort -n 300 -z 5", "toposort", 300),
        ("toposort -n 200 -z 4 --graph geometric", "toposort", 200),
        ("triangles -n 200 -z 12", "triangles", 0),
    ];
    for (np, pes, seed) in [(2, 1, 11), (2, 2, 12), (3, 1, 13)] {
        for (args, app, per_pe) in apps {
            let v = report(np, &format!("{args} --pes {pes} -s {seed}"));
            assert_eq!(v["app"], app, "{args}");
            assert_eq!(v["pes"], np * pes, "{args}");
            if per_pe > 0 {
                assert_eq!(v["operations"], per_pe * np * pes, "{args}");
            }
        }
    }
}

/// The baselines over the communication layer: exstack (one parcel per pair of PEs and
/// phase, several exchanges — ig's requests and replies — sharing the port) and AGP (the
/// selector versions with every message sent on its own).
#[test]
fn the_baselines_run_spanning_ranks() {
    let apps = [
        ("histogram -n 30000 -T 50", "histogram"),
        ("ig -n 30000 -T 700", "index-gather"),
        ("transpose -n 400 -z 6", "transpose"),
        ("permute -n 400 -z 6", "permute"),
        ("randperm -n 3000", "randperm"),
        ("triangles -n 150 -z 10", "triangles"),
        ("toposort -n 300 -z 6", "toposort"),
    ];
    for (np, pes, seed) in [(2, 1, 21), (2, 2, 22), (3, 1, 23)] {
        for (args, app) in apps {
            let v = report(np, &format!("{args} --model exstack --pes {pes} -s {seed}"));
            assert_eq!(
                (v["app"].as_str(), v["model"].as_str()),
                (Some(app), Some("exstack"))
            );
            assert_eq!(v["pes"], np * pes, "{args}");
        }
    }
}

#[test]
fn a_kronecker_graph_on_ranks_has_its_closed_form_count() {
    for np in [2, 3] {
        let v = report(np, "triangles -K 1:3x4x5 --pes 1");
        // (Π(3m+1) − 3Π(m+1) + 2)/6 for stars 3, 4, 5 with loops on the centres.
        assert_eq!(v["result"], (10 * 13 * 16 - 3 * 4 * 5 * 6 + 2) / 6);
    }
}

#[test]
fn on_ranks_the_baselines_and_bad_input_are_refused_once() {
    let dir = std::env::temp_dir().join(format!("bale-ranks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_mm = dir.join("not.mm");
    std::fs::write(&not_mm, "hello\n").unwrap();
    // A full 2 × 2 block: no row ever has one column left, so no toposort exists.
    let blocked = dir.join("blocked.mm");
    std::fs::write(
        &blocked,
        "%%MatrixMarket matrix coordinate pattern general\n3 3 5\n1 1\n1 2\n2 1\n2 2\n3 3\n",
    )
    .unwrap();
    let cases = [
        (
            "histogram -n 100 --pes 1 --model lambda".to_string(),
            "closures do not cross ranks",
        ),
        ("ig -n 100 -T 0 --pes 1".into(), "-T 0"),
        (format!("transpose -f {}", not_mm.display()), "not.mm"),
        (
            format!("toposort --pes 1 -f {}", blocked.display()),
            "not a permuted upper triangle",
        ),
        (
            format!("toposort --pes 1 --model exstack -f {}", blocked.display()),
            "not a permuted upper triangle",
        ),
        // clap's errors too: one line, from rank 0 alone.
        ("histogram --pes 0".into(), "--pes"),
        ("histogram --bogus".into(), "--bogus"),
        ("transpose -f x.mm -n 5".into(), "cannot be used with"),
    ];
    for (args, want) in cases {
        let out = mpirun(2, &args);
        assert!(!out.status.success(), "{args}");
        let err = String::from_utf8_lossy(&out.stderr);
        let ours: Vec<&str> = err.lines().filter(|l| l.contains(want)).collect();
        assert_eq!(ours.len(), 1, "{args}: one line, from one rank: {err}");
    }
    let _ = std::fs::remove_dir_all(dir);
    for (flag, once) in [("--version", "bale 0."), ("--help", "Usage:")] {
        let out = mpirun(2, flag);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{flag}: {text}");
        assert_eq!(text.matches(once).count(), 1, "{flag}: {text}");
    }
}

/// A wrong answer on one rank fails the job on every rank, named once by that rank.
#[test]
fn a_check_that_fails_on_one_rank_fails_the_job_named_by_that_rank() {
    for (np, bad) in [(2, 1), (3, 2), (3, 0)] {
        let fault = format!("BALE_FAULT={bad}");
        let out = mpirun_with(np, &["-x", &fault], "permute -n 200 --pes 1");
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        let ours: Vec<&str> = err.lines().filter(|l| l.contains("BALE_FAULT")).collect();
        assert_eq!(ours.len(), 1, "{err}");
        assert!(ours[0].contains(&format!("rank {bad}: ")), "{err}");
        assert!(out.stdout.is_empty(), "no report after a failed check");
    }
}

/// `bale` with each rank started apart (MPMD), in its own directory with its own arguments.
fn mpirun_apart(ranks: &[(&std::path::Path, &str)]) -> Output {
    tactor_comm::launcher::run_mpirun(|c| {
        for (i, (dir, args)) in ranks.iter().enumerate() {
            if i > 0 {
                c.arg(":");
            }
            c.args(["-np", "1", "-wdir"])
                .arg(dir)
                .arg(env!("CARGO_BIN_EXE_bale"))
                .args(args.split_whitespace());
        }
    })
    .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)")
}

/// A failure on one rank only — its input file missing on its host, its own arguments — ends
/// every rank with one line naming that rank (it used to hang in the app's barrier).
#[test]
fn a_failure_on_one_rank_ends_every_rank_named_once() {
    let here = std::env::temp_dir().join(format!("bale-apart-{}", std::process::id()));
    let empty = here.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(
        here.join("k4.mm"),
        "%%MatrixMarket matrix coordinate pattern general\n4 4 6\n2 1\n3 1\n3 2\n4 1\n4 2\n4 3\n",
    )
    .unwrap();
    let t = "triangles -f k4.mm --pes 1";
    let cases: [(&std::path::Path, &str, &str); 4] = [
        (&empty, t, "rank 1: k4.mm: No such file"),
        (
            &here,
            "transpose -f k4.mm --pes 1",
            "rank 1 runs with `transpose`",
        ),
        (
            &here,
            "triangles -f k4.mm --pes 2",
            "rank 1 runs with `--pes 2`",
        ),
        (
            &here,
            "triangles -f k4.mm --pes 1 --bogus",
            "rank 1: unexpected argument '--bogus'",
        ),
    ];
    for (dir, second, want) in cases {
        let out = mpirun_apart(&[(&here, t), (dir, second)]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{second}: {err}");
        assert_eq!(err.matches("error: ").count(), 1, "{second}: {err}");
        assert!(err.contains(want), "{second}: {err}");
        assert!(!err.contains("stopped by"), "{second}: {err}");
    }
    let _ = std::fs::remove_dir_all(here);
}
