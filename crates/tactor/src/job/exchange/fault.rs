//! Faults an [`Exchange`] injects into one of its sends: how tests make one rank of a job
//! misbehave on the wire, to check that every rank then ends with one line naming it.

use super::Exchange;
use std::time::Duration;

/// A fault to inject into one send of this rank's [`Exchange`] ([`Exchange::inject`]): the
/// first send of a message with items that the fault is due for. Each is injected once.
///
/// ```
/// use tactor::job::exchange::Fault;
/// use tactor::job::{Exchange, Job, FIRST_PORT};
///
/// // Rank 0 corrupts its first message: rank 1 receives a flipped byte.
/// let got = Job::run_in_process(2, 1, |_rt, job| {
///     let ex = Exchange::open(job, FIRST_PORT).unwrap();
///     if job.rank() == 0 {
///         ex.inject(Fault::Corrupt);
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
    /// One byte of the message's items is flipped: the receiver's own checks must catch it.
    Corrupt,
    /// The sending thread panics instead of sending.
    Panic,
    /// The message of `step` is held back for `pause` (the receiver must wait for it, not
    /// fail or give up).
    Slow {
        /// The step whose message is late.
        step: i64,
        /// How late.
        pause: Duration,
    },
}

impl Fault {
    /// Whether a message of `step` gets the fault.
    pub(super) fn due(self, step: i64) -> bool {
        match self {
            Fault::Slow { step: s, .. } => s == step,
            Fault::Corrupt | Fault::Panic => true,
        }
    }
}

impl Exchange {
    /// Makes this rank inject `fault` into one of its later sends (the first a fault set here
    /// takes: later calls are ignored). For tests of how a program on ranks ends.
    pub fn inject(&self, fault: Fault) {
        let _ = self.fault.set(fault);
    }

    /// [`Exchange::send`] with `fault` injected.
    pub(super) fn send_faulty<'a>(
        &self,
        fault: Fault,
        channel: usize,
        dest: usize,
        key: (u32, i64),
        count: usize,
        items: impl Iterator<Item = &'a [u8]>,
    ) {
        let mut buf: Vec<u8> = items.flatten().copied().collect();
        match fault {
            Fault::Panic => panic!("injected fault"),
            Fault::Slow { pause, .. } => std::thread::sleep(pause),
            Fault::Corrupt => {
                if let Some(b) = buf.first_mut() {
                    *b ^= 1;
                }
            }
        }
        self.send_buffer(channel, dest, key, count, &buf);
    }
}
