//! `commbench`'s command line: every bad value is one line and exit status 2, once per job;
//! help and version are printed once per job.

use std::process::{Command, Output};

fn commbench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_commbench"))
        .args(args)
        .env_remove("OMPI_COMM_WORLD_SIZE")
        .output()
        .unwrap()
}

/// `mpirun --oversubscribe -np 2 commbench ARGS`.
fn on_two_ranks(args: &[&str]) -> Output {
    tactor_comm::launcher::run_mpirun(|c| {
        c.args(["-np", "2", env!("CARGO_BIN_EXE_commbench")])
            .args(args);
    })
    .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)")
}

#[test]
fn bad_input_is_one_line_and_exit_status_2() {
    for (args, says) in [
        (&["--flood", "18446744073709551615"][..], "--flood"),
        (&["--flood", "99"], "--flood"),
        (&["--messages", "18446744073709551615"], "--messages"),
        (&["--messages", "x"], "--messages"),
        (&["--reps", "0"], "--reps"),
        (&["--reps", "4294967296"], "--reps"),
        (&["--bogus"], "--bogus"),
        (&["--out"], "--out"),
        (&[], "needs 2 ranks"),
    ] {
        let o = commbench(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(says),
            "{args:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn on_two_ranks_errors_help_and_version_are_said_once() {
    let o = on_two_ranks(&["--flood", "5"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert_eq!(err.matches("error: ").count(), 1, "{err}");
    for (flag, once) in [("--version", "commbench 0."), ("--help", "Usage:")] {
        let o = on_two_ranks(&[flag]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{flag}: {out}");
        assert_eq!(out.matches(once).count(), 1, "{flag}: {out}");
    }
}
