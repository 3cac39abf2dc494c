//! The signals that end a command: SIGINT (Ctrl-C), SIGTERM (what a batch scheduler sends
//! at the time limit, and what `mpirun` forwards to its ranks) and SIGHUP (the terminal went
//! away). Without a handler the last two kill a process with nothing said; a command either
//! saves what it has first ([`on_termination`], a thread that may do anything) or, with
//! nothing to save, says one line and exits `128 + signal` ([`exit_on_termination`], done
//! inside the handler with no thread, so a process that must stay single-threaded for MPI
//! can use it).

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The signals that end a command.
pub const TERMINATING: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// `SIGTERM` for 15, and so on.
///
/// ```
/// assert_eq!(tactor_cli::signals::name(15), "SIGTERM");
/// ```
pub fn name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Calls `on_signal` with each terminating signal, on a thread of its own (so it may
/// allocate, lock and write files). The first signal should start an orderly stop, a second
/// one may end the process at once.
///
/// ```no_run
/// tactor_cli::signals::on_termination(|sig| {
///     eprintln!("stopping on {}", tactor_cli::signals::name(sig));
/// })
/// .unwrap();
/// ```
pub fn on_termination(mut on_signal: impl FnMut(i32) + Send + 'static) -> std::io::Result<()> {
    // Miri cannot install handlers, and no signal reaches a program it runs.
    if cfg!(miri) {
        return Ok(());
    }
    let mut signals = signal_hook::iterator::Signals::new(TERMINATING)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                on_signal(sig);
            }
        })?;
    Ok(())
}

/// Set once this process has nothing more to say: it is ending quietly because another rank
/// failed and reports it, and the launcher's signal that ends it is no news to the user.
static SILENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, a terminating signal ends the process without a line (see
/// [`exit_on_termination`]): the process is about to exit quietly because another rank
/// reports the job's failure, and the launcher may end it first.
///
/// ```
/// tactor_cli::signals::silence();
/// ```
pub fn silence() {
    SILENT.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// How long a rank that ends quietly waits for the one that reports why
/// ([`let_another_rank_speak`]).
pub const SPEAKER_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// For a rank of a failing job that has nothing to say (another rank reports the failure):
/// silences terminating signals and waits [`SPEAKER_GRACE`] before the caller exits, since a
/// launcher ends the whole job at the first rank that exits, and the speaker must get its
/// line out first. Returns at once for a process on its own, and for the rank that said it
/// ([`tactor_comm::launcher::said_why`]): its exit ends the job.
///
/// ```
/// tactor_cli::signals::let_another_rank_speak(); // on its own: no wait
/// ```
pub fn let_another_rank_speak() {
    if tactor_comm::launcher::job().is_some_and(|(n, _)| n > 1) {
        silence();
        if !tactor_comm::launcher::has_said_why() {
            std::thread::sleep(SPEAKER_GRACE);
        }
    }
}

/// Runs `join` (a rank joining its job) with terminating signals silenced, and speaks again
/// only if it worked: a join that fails ends every rank at once, and the launcher may stop
/// this rank while another prints why.
///
/// ```
/// let r: Result<u8, ()> = tactor_cli::signals::silent_unless_ok(|| Ok(1));
/// assert_eq!(r, Ok(1));
/// ```
pub fn silent_unless_ok<T, E>(join: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    let before = SILENT.swap(true, std::sync::atomic::Ordering::Relaxed);
    let r = join();
    if r.is_ok() {
        SILENT.store(before, std::sync::atomic::Ordering::Relaxed);
    }
    r
}

/// Makes each terminating signal end the process with `program: stopped by SIGTERM` on
/// stderr (unless `quiet`: another rank of the job says it) and exit status `128 + signal`,
/// as a shell reports a process the signal killed. No thread is started.
///
/// ```no_run
/// tactor_cli::signals::exit_on_termination("bale", false).unwrap();
/// ```
pub fn exit_on_termination(program: &str, quiet: bool) -> std::io::Result<()> {
    if cfg!(miri) {
        return Ok(());
    }
    for sig in TERMINATING {
        // Built before the signal comes: a handler may not allocate.
        let line: &'static [u8] = if quiet {
            b""
        } else {
            Box::leak(
                format!("{program}: stopped by {}\n", name(sig))
                    .into_bytes()
                    .into_boxed_slice(),
            )
        };
        let action = move || {
            // SAFETY: write(2) and _exit(2) are async-signal-safe; `line` is leaked, so it
            // lives for the rest of the process.
            // An atomic load is async-signal-safe too.
            unsafe {
                if !SILENT.load(std::sync::atomic::Ordering::Relaxed) {
                    libc::write(2, line.as_ptr().cast(), line.len());
                }
                libc::_exit(128 + sig);
            }
        };
        // SAFETY: the action calls only async-signal-safe functions (above) and touches no
        // lock or allocator.
        unsafe { signal_hook::low_level::register(sig, action) }?;
    }
    Ok(())
}
