//! A round of an exchange: a span of an SPMD program that every rank starts together and that
//! ends with every message of it taken ([`Exchange::round`]).

use super::Exchange;
use crate::Handle;

/// Why a round of an [`Exchange`] ended badly, the most telling cause first
/// ([`Exchange::round`]).
#[derive(Debug, PartialEq, Eq)]
pub enum RoundError<E> {
    /// The round could not start (the job's barrier failed with this cause), or a message
    /// broke the protocol: what read it on this rank may have failed because of it.
    Broken(String),
    /// Rank `rank` failed, and reports its own cause; `here` is this rank's failure in the
    /// round, if it failed too (most often because of the other rank's).
    Remote {
        /// The rank that failed first.
        rank: usize,
        /// What the round's body returned on this rank, if it failed.
        here: Option<E>,
    },
    /// The round's body failed on this rank, and no other rank is known to have failed.
    Failed(E),
    /// The body ended well, but this many messages arrived (or preconditions wait) that
    /// nothing took: the ranks disagree on what the round exchanges.
    Unused(usize),
}

impl Exchange {
    /// Runs `body` as one round of the job's SPMD program: it starts once every rank has
    /// (a barrier), with messages due ([`Exchange::expect`], and the parked workers of `rt`
    /// woken to poll for them), and it ends well only when every rank's did and every message
    /// sent in it was taken. A body that fails abandons the exchange
    /// ([`Exchange::abandon`]): nothing more is sent, and what waits on other ranks ends.
    ///
    /// ```
    /// use tactor::job::exchange::RoundError;
    /// use tactor::job::{Exchange, Job, FIRST_PORT};
    ///
    /// let got = Job::run_in_process(2, 1, |rt, job| {
    ///     let ex = Exchange::open(job, FIRST_PORT).unwrap();
    ///     let me = job.rank();
    ///     // Each rank sends the other one byte and takes the other's.
    ///     let first = ex.round(rt, || {
    ///         ex.send(0, 1 - me, (0, 0), 1, 1, [&[me as u8][..]].into_iter());
    ///         let mut got = 0;
    ///         ex.pull((0, 0, 1 - me), &mut |m| got = Exchange::payload(m)[0])?;
    ///         Ok::<u8, String>(got)
    ///     });
    ///     // Rank 1 fails the next round; rank 0 hears which rank did.
    ///     let second = ex.round(rt, || match me {
    ///         0 => ex.pull((0, 1, 1), &mut |_| {}),
    ///         _ => Err("no input here".to_string()),
    ///     });
    ///     if second.is_err() && me == 1 {
    ///         job.tell_failure("no input here");
    ///     }
    ///     (first, second)
    /// });
    /// let (first, second) = got[0].as_ref().unwrap();
    /// assert_eq!(first, &Ok(1));
    /// assert!(matches!(second, Err(RoundError::Remote { rank: 1, .. })));
    /// let (first, second) = got[1].as_ref().unwrap();
    /// assert_eq!(first, &Ok(0));
    /// assert_eq!(second, &Err(RoundError::Failed("no input here".to_string())));
    /// ```
    pub fn round<R, E>(
        &self,
        rt: &Handle,
        body: impl FnOnce() -> Result<R, E>,
    ) -> Result<R, RoundError<E>> {
        if let Err(e) = self.job.barrier() {
            return Err(match self.job.failed_rank() {
                Some(rank) => RoundError::Remote { rank, here: None },
                None => RoundError::Broken(e.to_string()),
            });
        }
        self.expect(true);
        rt.wake();
        let result = body();
        self.expect(false);
        if result.is_err() {
            self.abandon();
        }
        if let Some(why) = self.take_error() {
            return Err(RoundError::Broken(why));
        }
        match (result, self.job.failed_rank()) {
            (result, Some(rank)) => Err(RoundError::Remote {
                rank,
                here: result.err(),
            }),
            (Err(e), None) => Err(RoundError::Failed(e)),
            (Ok(r), None) => match self.pending() {
                0 => Ok(r),
                n => Err(RoundError::Unused(n)),
            },
        }
    }
}
