//! What the apps' tests share: a command's report once it succeeded, a real `mpirun` of one
//! of the crate's commands, and how a job with a failing rank must end.

use std::process::Output;

/// The standard output of a command that must have succeeded (`what` names the run).
pub fn ok_text(out: &Output, what: &str) -> String {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[cfg(feature = "mpi")]
/// `mpirun -np NP [LAUNCHER...] [-x K=V...] EXE ARGS`: `exe` one of the crate's commands.
pub fn mpirun(exe: &str, np: usize, launcher: &[&str], env: &[(&str, &str)], args: &str) -> Output {
    tactor_comm::launcher::run_mpirun(|c| {
        c.args(launcher);
        for (k, v) in env {
            c.args(["-x", &format!("{k}={v}")]);
        }
        c.args(["-np", &np.to_string()])
            .arg(exe)
            .args(args.split_whitespace());
    })
    .expect("mpirun not found: install openmpi-bin (scripts/test.sh does)")
}

// Each test binary compiles this module; not every one fails a rank.
#[cfg(feature = "mpi")]
#[allow(dead_code)]
/// Asserts that a job in which rank `bad` failed (`what` names the run) ended non-zero with
/// one line of ours, from that rank, and no report.
pub fn failed_once(out: &Output, bad: usize, what: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: {err}");
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("error: ")).collect();
    assert_eq!(ours.len(), 1, "{what}: {err}");
    assert!(
        ours[0].contains(&format!("rank {bad}: injected fault")),
        "{what}: {err}"
    );
    assert!(out.stdout.is_empty(), "{what}: no report after a failure");
}
