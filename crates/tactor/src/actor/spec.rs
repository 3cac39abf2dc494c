//! A selector's shape: its mailboxes, which feeds which (and so how each closes), the batch
//! size, and the buffer memory it may hold.

/// Bytes of messages a PE gathers for one destination before handing them over (Conveyors
/// uses about 10 kB per link).
pub const BUFFER_BYTES: usize = 8192;

/// Bytes of aggregation buffers a selector with `mailboxes` mailboxes over `pes` PEs may
/// hold in a process that runs `local` of them: every PE keeps a buffer of
/// [`BUFFER_BYTES`] for each mailbox and PE, and about as many are in flight. It grows with
/// the square of the PEs, so a program checks it before starting thousands of PEs.
///
/// ```
/// let b = tactor::actor::buffer_bytes(1, 4, 4);
/// assert_eq!(b, 2 * 4 * 4 * tactor::actor::BUFFER_BYTES as u128);
/// assert_eq!(tactor::actor::buffer_bytes(1, usize::MAX, usize::MAX), u128::MAX);
/// ```
pub fn buffer_bytes(mailboxes: usize, pes: usize, local: usize) -> u128 {
    [mailboxes, pes, local, BUFFER_BYTES, 2]
        .into_iter()
        .fold(1u128, |acc, x| acc.saturating_mul(x as u128))
}

/// A selector's mailboxes and how each closes.
///
/// ```
/// // Mailbox 0 closes when every PE's program returned; mailbox 1 (replies sent by mailbox
/// // 0's handlers) when mailbox 0 terminated.
/// let spec = tactor::actor::Spec::new(2).fed_by(1, &[0]);
/// assert_eq!(spec.mailboxes(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct Spec {
    pub(super) feeders: Vec<Option<Vec<usize>>>,
    /// The most messages a batch holds, if less than a buffer's worth.
    pub(super) batch: Option<usize>,
}

impl Spec {
    /// `mailboxes` mailboxes, each closed when every PE's program returned (or called
    /// [`Pe::done`](super::Pe::done) on it).
    ///
    /// # Panics
    /// If `mailboxes` is over 64 (a handler's allowed targets are one word).
    pub fn new(mailboxes: usize) -> Spec {
        assert!(
            mailboxes <= 64,
            "a selector has at most 64 mailboxes, not {mailboxes}"
        );
        Spec {
            feeders: vec![None; mailboxes],
            batch: None,
        }
    }

    /// Batches of at most `messages` messages (at least 1) instead of a buffer of
    /// [`BUFFER_BYTES`]: `batch(1)` sends every message on its own — no aggregation, the
    /// baseline that shows what aggregation buys.
    ///
    /// ```
    /// use tactor::actor::{self, Handler, Outbox, Spec};
    /// struct Sum(u64);
    /// impl Handler<u64> for Sum {
    ///     fn process(&mut self, _: usize, x: u64, _: usize, _: &mut Outbox<'_, u64>) { self.0 += x }
    /// }
    /// let rt = tactor::Runtime::builder().workers(2).pin(false).build().unwrap();
    /// let spec = Spec::new(1).batch(1);
    /// let out = actor::run(&rt, &spec, vec![Sum(0), Sum(0)], |pe| {
    ///     for x in 1..=4 { pe.send(0, x, 0) }
    /// });
    /// assert_eq!(out[0].0, 20);
    /// ```
    pub fn batch(mut self, messages: usize) -> Spec {
        self.batch = Some(messages.max(1));
        self
    }

    /// Mailbox `mailbox` receives from the handlers of `feeders` (and from the programs, until
    /// they are done with it), and closes by itself once they terminated. Mailboxes that feed
    /// each other, directly or through others, form a group that terminates as one.
    ///
    /// ```
    /// // Pivots (0) cause removals (1), which may cause pivots: a cycle.
    /// let spec = tactor::actor::Spec::new(2).fed_by(1, &[0]).fed_by(0, &[1]);
    /// assert_eq!(spec.mailboxes(), 2);
    /// ```
    ///
    /// # Panics
    /// If a mailbox index is out of range, or `mailbox` feeds itself.
    pub fn fed_by(mut self, mailbox: usize, feeders: &[usize]) -> Spec {
        let n = self.feeders.len();
        assert!(mailbox < n, "no mailbox {mailbox} in a selector of {n}");
        for &f in feeders {
            assert!(f < n, "no mailbox {f} in a selector of {n}");
            assert_ne!(f, mailbox, "mailbox {f} cannot feed itself");
        }
        self.feeders[mailbox] = Some(feeders.to_vec());
        self
    }

    /// Number of mailboxes.
    pub fn mailboxes(&self) -> usize {
        self.feeders.len()
    }

    /// Whether handlers of mailbox `from` may send to mailbox `to`.
    pub(super) fn feeds(&self, from: usize, to: usize) -> bool {
        self.feeders[to].as_ref().is_some_and(|f| f.contains(&from))
    }

    /// The mailboxes handlers of `from` may send to, as bits (all of them for a program).
    pub(super) fn targets(&self, from: Option<usize>) -> u64 {
        (0..self.mailboxes())
            .filter(|&to| from.is_none_or(|f| self.feeds(f, to)))
            .fold(0, |bits, to| bits | 1 << to)
    }

    /// Per mailbox, the group of mailboxes it feeds and is fed by (itself included), if it
    /// is on a cycle of `fed_by`.
    pub(super) fn groups(&self) -> Vec<Option<Vec<usize>>> {
        let n = self.mailboxes();
        // reach[a][b]: a message of `a` may cause one of `b` (transitive closure).
        let mut reach: Vec<Vec<bool>> = (0..n)
            .map(|a| (0..n).map(|b| self.feeds(a, b)).collect())
            .collect();
        for k in 0..n {
            let via = reach[k].clone();
            for row in reach.iter_mut().filter(|row| row[k]) {
                for (r, v) in row.iter_mut().zip(&via) {
                    *r |= v;
                }
            }
        }
        (0..n)
            .map(|m| reach[m][m].then(|| (0..n).filter(|&k| reach[m][k] && reach[k][m]).collect()))
            .collect()
    }
}
