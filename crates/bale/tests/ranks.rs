//! Bale apps with PEs on several ranks under a real `mpirun`: the histogram's selector spans
//! the ranks (each rank checks its own PEs' tables against every PE's update stream), and
//! what does not run on ranks yet is refused with one line.
#![cfg(feature = "mpi")]

use std::process::{Command, Output};

fn mpirun(np: usize, args: &str) -> Output {
    let mut c = Command::new("mpirun");
    let session = tactor_comm::launcher::private_session(&mut c).unwrap();
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .args(["--oversubscribe", "-np", &np.to_string()])
        .arg(env!("CARGO_BIN_EXE_bale"))
        .args(args.split_whitespace());
    let out = c
        .output()
        .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)");
    let _ = std::fs::remove_dir_all(session);
    out
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

#[test]
fn apps_that_do_not_run_on_ranks_yet_say_so() {
    for args in [
        "randperm -n 100 --pes 1",
        "ig -n 100 -T 10 --pes 1 --model agp",
    ] {
        let out = mpirun(2, args);
        assert!(!out.status.success(), "{args}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("on several ranks only histogram and ig"),
            "{args}: {err}"
        );
    }
}
