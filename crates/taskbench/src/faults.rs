//! Faults to inject on one rank, for testing how a job ends.

/// A fault to inject, for testing how a job ends: `TASKBENCH_FAULT=RANK:corrupt` makes rank
/// RANK send one wrong output in the timed pass (the receiving rank's validation must catch
/// it), `TASKBENCH_FAULT=RANK:panic` makes it panic there, and `TASKBENCH_FAULT=RANK:slow`
/// makes it hold one message back for [`SLOW`] (the others must wait for it, not fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Flip a byte of one output sent to another rank.
    Corrupt,
    /// Panic in a worker.
    Panic,
    /// Pause before one send.
    Slow,
}

/// How long a `slow` rank holds its message back: far longer than a receiver polls before it
/// waits on an event instead.
pub const SLOW: std::time::Duration = std::time::Duration::from_millis(50);

/// The fault `TASKBENCH_FAULT` asks this rank to inject, if any.
pub fn injected_fault(rank: usize) -> Option<Fault> {
    let v = std::env::var("TASKBENCH_FAULT").ok()?;
    let (r, kind) = v.split_once(':')?;
    if r.trim().parse::<usize>().ok()? != rank {
        return None;
    }
    match kind.trim() {
        "corrupt" => Some(Fault::Corrupt),
        "panic" => Some(Fault::Panic),
        "slow" => Some(Fault::Slow),
        _ => None,
    }
}

/// The timestep whose message a `slow` rank holds back: the middle of a test's run, when the
/// receiver is sure to be waiting for it.
const SLOW_AT: i64 = 20;

/// `job` with the fault `TASKBENCH_FAULT` asks its rank to inject into its sends, if any.
pub fn inject(job: &tactor::job::Job) {
    use tactor::job::Fault as WireFault;
    if let Some(f) = injected_fault(job.rank()) {
        job.inject(match f {
            Fault::Corrupt => WireFault::Corrupt,
            Fault::Panic => WireFault::Panic,
            Fault::Slow => WireFault::Slow {
                step: SLOW_AT,
                pause: SLOW,
            },
        });
    }
}
