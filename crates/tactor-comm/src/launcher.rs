//! Whether this process was started by an MPI launcher, and as which rank; and how this
//! project's tools and tests start a job of their own ([`Mpirun`]).

/// The job size and this process's rank as an MPI launcher (Open MPI's `mpirun`, MPICH/Hydra's
/// `mpiexec`) announces them in the environment, or `None` when the process was
/// started on its own. Read before MPI is initialised, so that a program started on its own
/// never touches MPI.
///
/// ```
/// // A test process is not started by a launcher.
/// if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_none() && std::env::var_os("PMI_SIZE").is_none() {
///     assert_eq!(tactor_comm::launcher::job(), None);
/// }
/// ```
pub fn job() -> Option<(usize, usize)> {
    // Not SLURM's variables: a batch script sets them for a process that `srun` did not start.
    const SIZES: [(&str, &str); 2] = [
        ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
        ("PMI_SIZE", "PMI_RANK"),
    ];
    let read = |k: &str| std::env::var(k).ok()?.trim().parse::<usize>().ok();
    SIZES
        .iter()
        .find_map(|(size, rank)| Some((read(size)?, read(rank)?)))
        .filter(|&(size, rank)| size > 0 && rank < size)
}

/// Whether this process printed the line that says why its job failed ([`said_why`]).
static SAID_WHY: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records that this process printed the line saying why its job failed: it then need not
/// wait for another rank to say it before it ends (a launcher ends the whole job at the
/// first rank that exits, so a rank with nothing to say waits for the one that has).
///
/// ```
/// tactor_comm::launcher::said_why();
/// assert!(tactor_comm::launcher::has_said_why());
/// ```
pub fn said_why() {
    SAID_WHY.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether this process printed the line saying why its job failed ([`said_why`]).
///
/// ```
/// let _ = tactor_comm::launcher::has_said_why();
/// ```
pub fn has_said_why() -> bool {
    SAID_WHY.load(std::sync::atomic::Ordering::Relaxed)
}

/// Ranks of this job on this machine, as the launcher announces them (1 on its own).
///
/// ```
/// assert!(tactor_comm::launcher::local_ranks() >= 1);
/// ```
pub fn local_ranks() -> usize {
    launcher_count(&["OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"])
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// This process's place among the ranks of its job on this machine (0 on its own).
///
/// ```
/// assert!(tactor_comm::launcher::local_rank() < tactor_comm::launcher::local_ranks());
/// ```
pub fn local_rank() -> usize {
    launcher_count(&["OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"]).unwrap_or(0)
}

/// The first of these launcher variables (Open MPI's, then MPICH's) that holds a count.
fn launcher_count(vars: &[&str]) -> Option<usize> {
    vars.iter()
        .find_map(|k| std::env::var(k).ok()?.trim().parse::<usize>().ok())
}

/// Runs Open MPI's `mpirun` as a program or a test starts a job (see [`Mpirun`]); `args` adds
/// the rest (ranks, programs) before it runs. Waits for the job's end.
///
/// ```no_run
/// let out = tactor_comm::launcher::run_mpirun(|c| {
///     c.args(["-np", "2", "hostname"]);
/// })
/// .unwrap();
/// assert!(out.status.success());
/// ```
pub fn run_mpirun(
    args: impl FnOnce(&mut std::process::Command),
) -> std::io::Result<std::process::Output> {
    let mut m = Mpirun::new()?;
    args(&mut m);
    m.output()
}

/// An Open MPI `mpirun` command as a program or a test starts a job: allowed as root,
/// oversubscribed (more ranks than cores), in a session directory of its own, removed when
/// this is dropped — so keep it until the job it spawned has ended. Derefs to the
/// [`Command`](std::process::Command), to add ranks and programs, then `output` or `spawn`.
///
/// ```no_run
/// let mut m = tactor_comm::launcher::Mpirun::new().unwrap();
/// let mut job = m.args(["-np", "2", "sleep", "1"]).spawn().unwrap();
/// assert!(job.wait().unwrap().success());
/// drop(m); // the session directory goes once the job is over
/// ```
pub struct Mpirun {
    cmd: std::process::Command,
    session: std::path::PathBuf,
}

/// Open MPI's wait between SIGTERM and SIGKILL for the ranks of a job being ended, in seconds.
const SIGKILL_TIMEOUT: &str = "OMPI_MCA_odls_base_sigkill_timeout";

impl Mpirun {
    /// `mpirun --oversubscribe`, allowed as root, with a private session directory; a job
    /// that one rank failed ends at once.
    pub fn new() -> std::io::Result<Mpirun> {
        let mut cmd = std::process::Command::new("mpirun");
        let session = private_session(&mut cmd)?;
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .arg("--oversubscribe");
        // When a rank exits with an error, mpirun sends the others SIGTERM and, by default,
        // SIGKILL a second later. Tactor's ranks learn of a failure through the job and have
        // ended or printed their line by then, so that second is only a wait: every failing
        // test job paid it (38 s of the tests' wall time, session 39). A caller's own setting
        // wins.
        if std::env::var_os(SIGKILL_TIMEOUT).is_none() {
            cmd.env(SIGKILL_TIMEOUT, "0");
        }
        Ok(Mpirun { cmd, session })
    }
}

impl std::ops::Deref for Mpirun {
    type Target = std::process::Command;
    fn deref(&self) -> &std::process::Command {
        &self.cmd
    }
}

impl std::ops::DerefMut for Mpirun {
    fn deref_mut(&mut self) -> &mut std::process::Command {
        &mut self.cmd
    }
}

impl Drop for Mpirun {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.session);
    }
}

/// Makes `cmd` (an Open MPI `mpirun`) keep its session files in a directory of its own, so
/// that several `mpirun`s may run at once (tests run in parallel). Open MPI 4 keeps every job
/// of a user under one `/tmp/ompi.<host>.<uid>` and a job that ends removes it, while one that
/// starts may be creating its own files there: the starting job then fails in `orte_init`
/// ("A call to mkdir was unable to create the desired directory"). Returns the directory, to
/// remove once the job ended.
///
/// ```
/// let mut cmd = std::process::Command::new("mpirun");
/// let dir = tactor_comm::launcher::private_session(&mut cmd).unwrap();
/// assert!(dir.is_dir());
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn private_session(cmd: &mut std::process::Command) -> std::io::Result<std::path::PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tactor-mpirun-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    cmd.env("OMPI_MCA_orte_tmpdir_base", &dir);
    Ok(dir)
}
