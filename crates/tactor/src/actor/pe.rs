//! One PE's side of a selector (`Pe`): the program's sends, and the loop that handles its
//! inbox until its mailboxes terminate.

use super::world::pop;
use super::*;

/// One PE's side of a selector, given to the PE's program.
pub struct Pe<'a, M, H> {
    pub(super) world: &'a World<M>,
    pub(super) bufs: Buffers<M>,
    pub(super) state: H,
    pub(super) me: usize,
    pub(super) done: Vec<bool>,
}

impl<M: Send, H: Handler<M>> Pe<'_, M, H> {
    /// This PE.
    pub fn pe(&self) -> usize {
        self.me
    }

    /// Number of PEs.
    pub fn pes(&self) -> usize {
        self.world.pes
    }

    /// This PE's state.
    pub fn state(&mut self) -> &mut H {
        &mut self.state
    }

    /// Sends `msg` to mailbox `mailbox` of PE `pe`; a full buffer is handed over, and the
    /// messages that arrived meanwhile are handled (so that no PE's inbox grows without
    /// bound while everyone sends).
    ///
    /// # Panics
    /// If `pe` or `mailbox` is out of range, or this PE already called [`Pe::done`] on it.
    #[inline]
    pub fn send(&mut self, mailbox: usize, msg: M, pe: usize) {
        // `done` has one flag per mailbox: its look-up is the range check.
        match self.done.get(mailbox) {
            Some(false) => {}
            Some(true) => panic!("PE {} sent to mailbox {mailbox} after done", self.me),
            None => panic!(
                "send to mailbox {mailbox}, but the selector has {}",
                self.world.spec.mailboxes()
            ),
        }
        let mut out = Outbox {
            world: self.world,
            bufs: &mut self.bufs,
            me: self.me,
            from: None,
            targets: self.world.targets[self.world.spec.mailboxes()],
        };
        out.send(mailbox, msg, pe);
        if self.bufs.bufs[mailbox * self.world.pes + pe].is_empty() {
            // The buffer was just handed over: a good moment to handle what arrived.
            self.yield_now();
        }
    }

    /// Handles the messages that arrived for this PE (the seed's `yield`): user code that
    /// sends in a long loop interleaves with message processing through it.
    pub fn yield_now(&mut self) -> bool {
        let mut any = false;
        self.world.receive(self.me - self.world.first);
        while let Some(b) = pop(&self.world.inboxes[self.me - self.world.first]) {
            self.handle(b);
            any = true;
        }
        any
    }

    pub(super) fn handle(&mut self, b: Batch<M>) {
        let mailbox = b.mailbox as usize;
        let n = b.msgs.len();
        let mut out = Outbox {
            world: self.world,
            bufs: &mut self.bufs,
            me: self.me,
            from: Some(mailbox),
            targets: self.world.targets[mailbox],
        };
        let mut msgs = b.msgs.into_iter();
        while let Some(m) = msgs.next() {
            if let Some(next) = msgs.as_slice().get(AHEAD - 1) {
                self.state.ahead(mailbox, next);
            }
            self.state.process(mailbox, m, b.from as usize, &mut out);
        }
        for to in 0..self.world.spec.mailboxes() {
            self.bufs.publish(&self.world.term, to);
        }
        self.world.term.processed(mailbox, n);
    }

    /// This PE sends no more to `mailbox`: its buffers for it are handed over.
    pub fn done(&mut self, mailbox: usize) {
        if self.done[mailbox] {
            return;
        }
        for pe in 0..self.world.pes {
            flush(self.world, &mut self.bufs, self.me, mailbox, pe);
        }
        self.bufs.publish(&self.world.term, mailbox);
        self.done[mailbox] = true;
        self.world.term.done(mailbox);
    }

    pub(super) fn flush_all(&mut self) {
        for m in 0..self.world.spec.mailboxes() {
            for pe in 0..self.world.pes {
                flush(self.world, &mut self.bufs, self.me, m, pe);
            }
        }
    }

    /// After the program returned: handles messages until every mailbox terminated, closing
    /// the program's mailboxes (and every mailbox of a group) at once and each other fed
    /// mailbox when its feeders terminated.
    pub(super) fn finish(&mut self) {
        let spec = &self.world.spec;
        for m in 0..spec.mailboxes() {
            if spec.feeders[m].is_none() || self.world.groups[m].is_some() {
                self.done(m);
            }
        }
        let mut idle = 0u32;
        loop {
            if self.yield_now() {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                // Out of incoming work for a while: hand over what was gathered. (At once
                // would send a batch per message handled while the others still send.)
                if idle % IDLE_FLUSH == 0 {
                    self.flush_all();
                }
            }
            let mut all = true;
            for m in 0..spec.mailboxes() {
                if !self.done[m] {
                    let feeders = spec.feeders[m]
                        .as_ref()
                        .expect("program mailboxes are done");
                    if feeders.iter().all(|&f| self.world.terminated(f)) {
                        self.done(m);
                    }
                }
                all &= self.world.terminated(m);
                self.world.try_wave(self.me - self.world.first, m);
            }
            if all || self.world.failed.load(Ordering::Relaxed) {
                return;
            }
            if idle > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}
