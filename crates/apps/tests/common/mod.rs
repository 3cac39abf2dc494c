//! What the apps' tests share: a real `mpirun` of one of the crate's commands.
#![cfg(feature = "mpi")]

use std::process::Output;

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
