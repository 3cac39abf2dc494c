//! Whether this process was started by an MPI launcher, and as which rank.

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
