//! What the PEs of a selector share (`World`), and how a handler sends: into its PE's
//! buffers, one per (mailbox, destination PE), each handed over as one batch when full
//! (`Outbox`, `flush`).

use super::*;

/// A batch of messages for one mailbox of one PE.
pub(super) struct Batch<M> {
    pub(super) mailbox: u32,
    pub(super) from: u32,
    pub(super) msgs: Vec<M>,
}

/// What the PEs of one selector share (on one rank).
pub(super) struct World<M> {
    pub(super) spec: Spec,
    /// Per mailbox, its group if it is on a cycle (`Spec::groups`).
    pub(super) groups: Vec<Option<Vec<usize>>>,
    /// Per mailbox, the mailboxes that terminate with it (its group, or itself).
    pub(super) units: Vec<Vec<usize>>,
    /// PEs on every rank.
    pub(super) pes: usize,
    /// This rank's PEs are `first..first + inboxes.len()`.
    pub(super) first: usize,
    pub(super) inboxes: Vec<Injector<Batch<M>>>,
    /// This rank's counts.
    pub(super) term: Termination,
    /// The other ranks, if the selector spans several.
    pub(super) net: Option<ranks::Net<M>>,
    /// A PE panicked: the others stop waiting for termination.
    pub(super) failed: AtomicBool,
    /// Per mailbox, the mailboxes its handlers may send to (`Spec::targets`), then the
    /// programs' (all).
    pub(super) targets: Vec<u64>,
}

/// A PE's outgoing buffers, one per (mailbox, destination), and per mailbox the messages
/// put in them that its termination counts do not show yet.
pub(super) struct Buffers<M> {
    pub(super) bufs: Vec<Vec<M>>,
    pub(super) cap: usize,
    pub(super) unpublished: Vec<u64>,
}

impl<M> Buffers<M> {
    /// Adds the sends to `mailbox` not yet counted to its termination counts: before any of
    /// them is handed over, and before the batch that caused them counts as processed.
    #[inline]
    pub(super) fn publish(&mut self, term: &Termination, mailbox: usize) {
        let n = std::mem::take(&mut self.unpublished[mailbox]);
        if n > 0 {
            term.sent(mailbox, n as usize);
        }
    }
}

/// How a handler sends: into its PE's buffers.
pub struct Outbox<'a, M> {
    pub(super) world: &'a World<M>,
    pub(super) bufs: &'a mut Buffers<M>,
    pub(super) me: usize,
    /// The mailbox whose handler is running (sends go only where it feeds).
    pub(super) from: Option<usize>,
    /// Bit `m`: this outbox may send to mailbox `m` (from `from`, once per batch).
    pub(super) targets: u64,
}

impl<M: Send> Outbox<'_, M> {
    /// Sends `msg` to mailbox `mailbox` of PE `pe`.
    ///
    /// # Panics
    /// If `pe` or `mailbox` is out of range, or (in a handler) `mailbox` is not fed by the
    /// handler's mailbox: its termination could not count the message.
    #[inline(always)]
    pub fn send(&mut self, mailbox: usize, msg: M, pe: usize) {
        let w = self.world;
        if pe >= w.pes || self.targets.checked_shr(mailbox as u32).unwrap_or(0) & 1 == 0 {
            self.refuse(mailbox, pe);
        }
        let i = mailbox * w.pes + pe;
        self.bufs.unpublished[mailbox] += 1;
        let buf = &mut self.bufs.bufs[i];
        buf.push(msg);
        if buf.len() >= self.bufs.cap {
            flush(w, self.bufs, self.me, mailbox, pe);
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn refuse(&self, mailbox: usize, pe: usize) -> ! {
        let w = self.world;
        assert!(
            pe < w.pes,
            "send to PE {pe}, but the selector has {}",
            w.pes
        );
        match self.from {
            Some(from) => panic!(
                "a handler of mailbox {from} sent to mailbox {mailbox}, which is not declared fed by it (Spec::fed_by)"
            ),
            None => panic!(
                "send to mailbox {mailbox}, but the selector has {}",
                w.spec.mailboxes()
            ),
        }
    }

    /// Number of PEs.
    pub fn pes(&self) -> usize {
        self.world.pes
    }

    /// This PE.
    pub fn pe(&self) -> usize {
        self.me
    }
}

/// Hands the buffer for (`mailbox`, `pe`) to `pe` as one batch, counted first: into its
/// inbox on this rank, through the network on another (the buffer is then kept for reuse).
/// Out of line, so that the message path of `Outbox::send` stays a few instructions where it
/// is inlined.
#[inline(never)]
pub(super) fn flush<M: Send>(
    w: &World<M>,
    bufs: &mut Buffers<M>,
    me: usize,
    mailbox: usize,
    pe: usize,
) {
    let i = mailbox * w.pes + pe;
    if bufs.bufs[i].is_empty() {
        return;
    }
    bufs.publish(&w.term, mailbox);
    match w.local_index(pe) {
        Some(local) => {
            let msgs = std::mem::replace(&mut bufs.bufs[i], Vec::with_capacity(bufs.cap));
            w.inboxes[local].push(Batch {
                mailbox: mailbox as u32,
                from: me as u32,
                msgs,
            });
        }
        None => {
            let net = w
                .net
                .as_ref()
                .expect("a PE of another rank means a network");
            let per_rank = w.inboxes.len();
            net.send_batch(
                me - w.first,
                pe / per_rank,
                mailbox,
                me,
                pe % per_rank,
                &bufs.bufs[i],
            );
            bufs.bufs[i].clear();
        }
    }
}
