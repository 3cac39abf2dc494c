//! Faults a rank injects into one of its sends: how tests make one rank of a job misbehave
//! on the wire, to check that every rank then ends with one line naming it. A fault is set
//! on the [`Job`] and taken by the first send, of any layer on the job, that it is due for:
//! an [`Exchange`](super::Exchange) message, a copy of a replicated program's region
//! ([`Replicated`](crate::implicit::Replicated)), or a value of an [`Spmd`](super::Spmd)
//! program.

use super::Job;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// A fault to inject into one send of this rank ([`Job::inject`]): the first send that the
/// fault is due for. Each is injected once.
///
/// ```
/// use tactor::job::{Exchange, Fault, Job, FIRST_PORT};
///
/// // Rank 0 corrupts its first message: rank 1 receives a flipped byte.
/// let got = Job::run_in_process(2, 1, |_rt, job| {
///     let ex = Exchange::open(job, FIRST_PORT).unwrap();
///     if job.rank() == 0 {
///         job.inject(Fault::Corrupt);
///         ex.send(0, 1, (0, 3), 1, 2, [&[1u8, 2][..]].into_iter());
///         return Vec::new();
///     }
///     let mut seen = Vec::new();
///     ex.pull((0, 3, 0), &mut |m| seen = Exchange::payload(m).to_vec()).unwrap();
///     seen
/// });
/// assert_eq!(got[1].as_ref().unwrap(), &[0, 2]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// One byte of the data sent is flipped: the receiver's own checks must catch it.
    Corrupt,
    /// The sending thread panics instead of sending.
    Panic,
    /// The send of `step` is held back for `pause` (the receiver must wait for it, not fail
    /// or give up).
    Slow {
        /// Which send is late: for an [`Exchange`](super::Exchange) the step of its message;
        /// for a replicated program or an [`Spmd`](super::Spmd) one, the ordinal of the
        /// copy among those this rank sends, in the order the program issued them (from 0).
        step: i64,
        /// How late.
        pause: Duration,
    },
}

impl Fault {
    /// Whether the send of `step` gets the fault.
    fn due(self, step: i64) -> bool {
        match self {
            Fault::Slow { step: s, .. } => s == step,
            Fault::Corrupt | Fault::Panic => true,
        }
    }

    /// Acts on `data`, the bytes about to be sent (after any header): pauses, panics or
    /// flips its first byte.
    pub(crate) fn act(self, data: &mut [u8]) {
        match self {
            Fault::Panic => panic!("injected fault"),
            Fault::Slow { pause, .. } => std::thread::sleep(pause),
            Fault::Corrupt => {
                if let Some(b) = data.first_mut() {
                    *b ^= 1;
                }
            }
        }
    }
}

/// The fault a job holds for its sends, and whether a send took it.
#[derive(Default)]
pub(super) struct Injected {
    fault: OnceLock<Fault>,
    taken: AtomicBool,
}

impl Job {
    /// Makes this rank inject `fault` into one of its later sends (the first fault set here
    /// holds: later calls are ignored). For tests of how a program on ranks ends.
    pub fn inject(&self, fault: Fault) {
        let _ = self.injected.fault.set(fault);
    }

    /// The fault the send of `step` must act on, once: `None` for every other send.
    pub(crate) fn fault_due(&self, step: i64) -> Option<Fault> {
        let fault = *self.injected.fault.get()?;
        (fault.due(step) && !self.injected.taken.swap(true, Ordering::Relaxed)).then_some(fault)
    }
}
