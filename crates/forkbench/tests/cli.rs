//! The `forkbench` command: the peer protocol it speaks, a small comparison, and bad input.

use std::process::Command;

fn forkbench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_forkbench"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn run_speaks_the_protocol_with_the_right_values() {
    for (system, bench, size, spin, want) in [
        ("tactor", "fib", "15", "0", 610u64),
        ("rayon", "fib", "15", "0", 610),
        ("tactor", "loop", "3", "0", 1 + 1 + 3),
    ] {
        let out = forkbench(&["run", system, bench, "2", size, spin, "2"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for l in lines {
            let (t, v) = l.split_once(' ').unwrap();
            assert!(t.parse::<f64>().unwrap() >= 0.0);
            assert_eq!(v.parse::<u64>().unwrap(), want, "{system} {bench}");
        }
    }
}

#[test]
fn a_small_comparison_prints_a_table_and_writes_its_files() {
    let dir = std::env::temp_dir().join(format!("forkbench-test-{}", std::process::id()));
    let out = forkbench(&[
        "--workers",
        "1",
        "--reps",
        "2",
        "--inner",
        "1",
        "--fib",
        "12",
        "--tree",
        "4",
        "--loop-ms",
        "1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    for want in ["fib(12)", "tree(depth 4)", "loop100ns", "loop1us", "rayon"] {
        assert!(text.contains(want), "{want} missing from\n{text}");
    }
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4 * 2, "{csv}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bad_input_is_one_line_and_a_failure() {
    for args in [
        &["run", "tbb", "fib", "1", "10", "0", "1"][..],
        &["run", "tactor", "fib", "1", "99", "0", "1"],
        &["run", "tactor", "sort", "1", "10", "0", "1"],
        &["run", "tactor", "fib", "0", "10", "0", "1"],
        &["--workers", "0"],
        &["--workers", "100000"],
        &["--benches", "fib,nope"],
        &["--peer", "x"],
        &["--peer", "x=/no/such/program"],
        &["--peer", "rayon=/bin/true"],
        &["--fib", "51"],
    ] {
        let out = forkbench(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_peer_whose_answer_differs_is_reported() {
    // `echo` answers every run with its arguments: not a "SECONDS CHECK" line.
    let out = forkbench(&[
        "--workers",
        "1",
        "--reps",
        "1",
        "--inner",
        "1",
        "--benches",
        "fib",
        "--fib",
        "10",
        "--peer",
        "liar=echo 0.001",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("liar"), "{err}");
}
