//! The one interface a network backend implements.

use crate::{CommError, Completion, CompletionQueue};

/// A reduction for [`Transport::all_reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// The largest value over ranks.
    Max,
    /// The sum over ranks (wrapping).
    Sum,
}

/// A collective was given up because the caller's idle function said stop (another rank
/// failed, for example).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the collective was abandoned")]
pub struct Stopped;

/// A network backend: ranks, channels, active-message sends, progress and completion queues,
/// and the few collectives a job needs around its timed work.
///
/// Every method may be called from any thread at any time, concurrently (the MPI backend
/// serialises its MPI calls under one try-lock). Nothing blocks on the network except the collectives, which
/// call the caller's `idle` function while they wait, so the caller keeps progressing its
/// channels (and can give up) during them.
pub trait Transport: Send + Sync {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// How many ranks the job has.
    fn ranks(&self) -> usize;
    /// How many channels this transport has.
    fn channels(&self) -> usize;

    /// Sends `data` to port `port` of rank `dest` on `channel`, returning at once. The buffer
    /// is owned by the layer until the send finished; with a `token`, a
    /// [`Completion::Sent`] then appears in this rank's completion queue of `channel`. The
    /// receiver gets a [`Completion::Received`] in its queue of the same channel. A rank may
    /// send to itself. Messages between two ranks on one channel that fit
    /// [`crate::INLINE_LIMIT`] arrive in the order they were sent; larger ones may overtake.
    ///
    /// Progress is explicit: a send that finds the network busy waits in its channel's queue
    /// until the next [`Transport::progress`] of that channel (by any thread), and a large
    /// payload moves only while its sender's and receiver's channels are progressed. A program
    /// therefore progresses the channels it uses whenever it waits, as every wait in Tactor
    /// does.
    fn send(
        &self,
        channel: usize,
        dest: usize,
        port: u16,
        data: Vec<u8>,
        token: Option<u64>,
    ) -> Result<(), CommError>;

    /// Sends a message of `len` bytes made of `parts` back to back, as [`Transport::send`]
    /// does with them gathered in one buffer (the default builds that buffer). A backend may
    /// copy the parts straight to where the message travels from, sparing the buffer.
    ///
    /// Panics when the parts do not add up to `len` bytes.
    ///
    /// ```
    /// use tactor_comm::{loopback::Loopback, Completion, Transport};
    ///
    /// let t = Loopback::world(1, 1).remove(0);
    /// let parts: [&[u8]; 2] = [b"head", b"tail"];
    /// t.send_parts(0, 0, 7, 8, &mut parts.into_iter(), None).unwrap();
    /// t.progress(0);
    /// match t.completions(0).pop() {
    ///     Some(Completion::Received(m)) => assert_eq!(m.data, b"headtail"),
    ///     other => panic!("{other:?}"),
    /// }
    /// ```
    fn send_parts(
        &self,
        channel: usize,
        dest: usize,
        port: u16,
        len: usize,
        parts: &mut dyn Iterator<Item = &[u8]>,
        token: Option<u64>,
    ) -> Result<(), CommError> {
        self.send(channel, dest, port, gather(len, parts), token)
    }

    /// Advances `channel`: completions that happened are pushed to its queue. Returns at once
    /// when another thread is progressing the channel (a try-lock; nobody ever waits for the
    /// network's lock). Returns whether anything completed.
    fn progress(&self, channel: usize) -> bool;

    /// [`Transport::progress`], offering each message read in place (on the node, where its
    /// sender wrote it) to `offer` first: its source, port and payload, with no copy and no
    /// queue. One that `offer` takes (`true`) never reaches the completion queue; one it
    /// declines is queued as `progress` queues it. A message taken here passes those of other
    /// ports already queued, so `offer` suits messages that need no order among themselves
    /// (keyed ones). The default offers nothing and progresses.
    ///
    /// ```
    /// use tactor_comm::{loopback::Loopback, Transport};
    ///
    /// let t = Loopback::world(1, 1).remove(0);
    /// t.send(0, 0, 7, b"hi".to_vec(), None).unwrap();
    /// t.progress_offering(0, &mut |_source, _port, _data| true);
    /// assert!(t.completions(0).pop().is_some(), "a loopback offers nothing in place");
    /// ```
    fn progress_offering(
        &self,
        channel: usize,
        _offer: &mut dyn FnMut(usize, u16, &[u8]) -> bool,
    ) -> bool {
        self.progress(channel)
    }

    /// Offers the oldest inline message from `source` on `channel` that has not been
    /// progressed into the completion queue yet to `want` (its port and payload, in place, no
    /// copy and no queue): `Some(true)` if `want` took it, `Some(false)` if it declined (the
    /// message stays for [`Transport::progress`]), `None` if there is none to offer here now
    /// (or the transport cannot offer messages in place). For a receiver that waits for one
    /// message it can name: messages are offered in order per source, but one taken here
    /// passes any from the same source already in the completion queue.
    fn take_inline(
        &self,
        _channel: usize,
        _source: usize,
        _want: &mut dyn FnMut(u16, &[u8]) -> bool,
    ) -> Option<bool> {
        None
    }

    /// The completion queue of `channel`.
    fn completions(&self, channel: usize) -> &CompletionQueue;

    /// Sends and transfers started on `channel` that have not finished (a snapshot).
    fn in_flight(&self, channel: usize) -> usize;

    /// A barrier over all ranks. While it waits it calls `idle`, and gives up with
    /// [`Stopped`] when `idle` returns `false`.
    fn barrier(&self, idle: &mut dyn FnMut() -> bool) -> Result<(), Stopped>;

    /// Combines one value from every rank; every rank gets the result. Waits like
    /// [`Transport::barrier`].
    fn all_reduce(
        &self,
        op: Reduce,
        value: u64,
        idle: &mut dyn FnMut() -> bool,
    ) -> Result<u64, Stopped>;

    /// Ends every rank of the job at once with exit status `code` (the last resort when a rank
    /// cannot tell the others in an orderly way).
    fn abort(&self, code: i32) -> !;

    /// Pops a completion of `channel`, progressing the channel first when its queue is empty.
    #[inline]
    fn poll(&self, channel: usize) -> Option<Completion> {
        let cq = self.completions(channel);
        if let Some(c) = cq.pop() {
            return Some(c);
        }
        self.progress(channel);
        cq.pop()
    }
}

/// The checks every backend's [`Transport::send`] makes.
/// `parts` back to back in one buffer of `len` bytes (with [`crate::buffer`]'s spare room).
///
/// Panics when they do not add up to `len`.
pub(crate) fn gather(len: usize, parts: &mut dyn Iterator<Item = &[u8]>) -> Vec<u8> {
    let mut data = crate::buffer(len);
    for p in parts {
        data.extend_from_slice(p);
    }
    assert_eq!(
        data.len(),
        len,
        "a message of {len} bytes was given parts that do not add up to it"
    );
    data
}

pub(crate) fn check_send(
    t: &(impl Transport + ?Sized),
    channel: usize,
    dest: usize,
    len: usize,
) -> Result<(), CommError> {
    if channel >= t.channels() {
        return Err(CommError::NoChannel {
            channel,
            channels: t.channels(),
        });
    }
    if dest >= t.ranks() {
        return Err(CommError::NoRank {
            rank: dest,
            ranks: t.ranks(),
        });
    }
    if len > i32::MAX as usize {
        return Err(CommError::TooLarge(len));
    }
    Ok(())
}
