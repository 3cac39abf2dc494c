//! What every command of this crate does around its run, the same on one process and on the
//! ranks of a job: join (the ranks agreeing on their arguments and worker count), refuse a
//! run that would not fit in memory, start the runtime, and end with one line per job.

use std::process::ExitCode;
use std::sync::Arc;
use tactor::job::Job;
use tactor::Runtime;

/// What every command does first: ends on SIGTERM or SIGINT with one line (from one rank of
/// a job), then parses its flags (a bad one: one line, exit 2; `--help` and `--version` from
/// rank 0 only).
pub fn parse<C: clap::Parser>(program: &str) -> Result<C, ExitCode> {
    let quiet = tactor_cli::args::other_rank();
    if let Err(e) = tactor_cli::signals::exit_on_termination(program, quiet) {
        tactor_cli::say!("error: could not handle termination signals: {e}");
        return Err(ExitCode::FAILURE);
    }
    Ok(tactor_cli::args::parse())
}

/// Joins the launcher's job (or makes a job of one) as `program` with `workers` workers a
/// rank, checks that a run needing `bytes` bytes of `what` fits, and starts the runtime; on a
/// failure, one line per job and the exit code to end with.
pub fn start(
    program: &str,
    workers: usize,
    bytes: u128,
    what: &str,
) -> Result<(Arc<Job>, Runtime), ExitCode> {
    let rank = tactor_comm::launcher::job().map_or(0, |(_, r)| r);
    let joined = tactor_cli::signals::silent_unless_ok(|| {
        Job::builder()
            .program(program)
            .config(std::env::args().skip(1))
            .channels(workers)
            .join()
    });
    let job = match joined {
        Ok(job) => job,
        Err(e) => {
            if e.speaks(rank) {
                tactor_cli::say!("error: {e}");
            } else {
                tactor_cli::signals::let_another_rank_speak();
            }
            return Err(ExitCode::from(2));
        }
    };
    if let Err(e) = tactor_cli::limits::check(bytes, what) {
        if job.rank() == 0 {
            tactor_cli::say!("error: {e}");
        }
        return Err(ExitCode::from(2));
    }
    match job.runtime(Runtime::builder().workers(workers)) {
        Ok(rt) => Ok((job, rt)),
        Err(e) => {
            job.fail(&format!("could not start {workers} workers: {e}"));
            Err(ExitCode::FAILURE)
        }
    }
}

/// Ends a run: rank 0 prints the report; an error fails the job (one line for the job, from
/// the rank that found it); after another rank's failure, which that rank said, quietly.
pub fn finish(job: &Job, result: Result<String, String>) -> ExitCode {
    match result {
        Ok(text) => {
            if job.rank() == 0 {
                tactor_cli::out!("{text}\n");
            }
            ExitCode::SUCCESS
        }
        Err(_) if job.failed_rank().is_some() => {
            tactor_cli::signals::silence();
            ExitCode::FAILURE
        }
        Err(e) => {
            job.fail(&e);
            ExitCode::FAILURE
        }
    }
}
