//! The selector's shared state at work: taking batches from an inbox, flushing, and
//! termination (`World`'s methods).

use super::*;

pub(super) fn pop<M>(q: &Injector<Batch<M>>) -> Option<Batch<M>> {
    loop {
        match q.steal() {
            Steal::Success(b) => return Some(b),
            Steal::Empty => return None,
            Steal::Retry => {}
        }
    }
}

impl<M: Send> World<M> {
    /// Whether mailbox `m` (alone, or with its group) has terminated.
    pub(super) fn terminated(&self, m: usize) -> bool {
        if let Some(net) = &self.net {
            return net.over(m);
        }
        match &self.groups[m] {
            Some(members) => {
                // The mailboxes feeding the group from outside first: their messages must all
                // have been published.
                let outside = members.iter().flat_map(|&g| {
                    self.spec.feeders[g]
                        .iter()
                        .flatten()
                        .filter(|f| !members.contains(f))
                });
                outside.into_iter().all(|&f| self.terminated(f))
                    && self.term.group_terminated(members)
            }
            None => self.term.terminated(m),
        }
    }

    /// A selector of `pes` PEs of which this rank runs `local` from `first` on.
    pub(super) fn new(
        spec: &Spec,
        pes: usize,
        first: usize,
        local: usize,
        net: Option<ranks::Net<M>>,
    ) -> World<M> {
        let groups = spec.groups();
        let units = groups
            .iter()
            .enumerate()
            .map(|(m, g)| g.clone().unwrap_or_else(|| vec![m]))
            .collect();
        World {
            spec: spec.clone(),
            groups,
            units,
            pes,
            first,
            inboxes: (0..local).map(|_| Injector::new()).collect(),
            term: Termination::new(spec.mailboxes(), local),
            net,
            failed: AtomicBool::new(false),
            targets: (0..spec.mailboxes())
                .map(Some)
                .chain([None])
                .map(|from| spec.targets(from))
                .collect(),
        }
    }

    /// The index among this rank's PEs of PE `pe`, if it is one of them.
    #[inline]
    pub(super) fn local_index(&self, pe: usize) -> Option<usize> {
        pe.checked_sub(self.first)
            .filter(|&l| l < self.inboxes.len())
    }

    /// Takes what the network brought (worker `worker` polls its part of the link): batches
    /// go to their PEs' inboxes, termination messages are answered.
    pub(super) fn receive(&self, worker: usize) {
        let Some(net) = &self.net else { return };
        net.link.poll(worker, &mut |source, bytes| {
            if let ranks::Arrival::Batch {
                local,
                mailbox,
                from,
                msgs,
            } = net.arrive(worker, source, bytes, &self.units, &self.term)
            {
                self.inboxes[local].push(Batch {
                    mailbox,
                    from,
                    msgs,
                });
            }
        });
    }

    /// On rank 0 of several: starts a termination wave for mailbox `m` (the first of its
    /// group) once this rank's PEs are done with it and, for a group, its outside feeders
    /// are over.
    pub(super) fn try_wave(&self, worker: usize, m: usize) {
        let Some(net) = &self.net else { return };
        let unit = &self.units[m];
        if net.link.rank() != 0 || unit[0] != m || net.over(m) {
            return;
        }
        if !unit.iter().all(|&u| self.term.all_done(u)) {
            return;
        }
        if self.groups[m].is_some() {
            let outside = unit.iter().flat_map(|&g| {
                self.spec.feeders[g]
                    .iter()
                    .flatten()
                    .filter(|f| !unit.contains(f))
            });
            if !outside.into_iter().all(|&f| net.over(f)) {
                return;
            }
        }
        net.start_wave(worker, m, &self.units, &self.term);
    }

    /// PE `me`'s whole life: its program, then messages until every mailbox terminated.
    /// Returns its final state; a panic marks the selector failed (the other PEs stop) and
    /// goes on unwinding.
    pub(super) fn pe<H: Handler<M>>(
        &self,
        me: usize,
        state: H,
        program: impl FnOnce(&mut Pe<'_, M, H>),
    ) -> H {
        let size = std::mem::size_of::<M>();
        let cap = (BUFFER_BYTES / size.max(1)).max(1);
        // One cap for every destination: a batch for another rank goes whole, eagerly.
        let cap = self.net.as_ref().map_or(cap, |n| n.batch_cap(size, cap));
        let cap = self.spec.batch.map_or(cap, |b| cap.min(b));
        let mut pe = Pe {
            world: self,
            bufs: Buffers {
                bufs: (0..self.spec.mailboxes() * self.pes)
                    .map(|_| Vec::with_capacity(cap))
                    .collect(),
                cap,
                unpublished: vec![0; self.spec.mailboxes()],
            },
            state,
            me,
            done: vec![false; self.spec.mailboxes()],
        };
        let ran = catch_unwind(AssertUnwindSafe(|| {
            program(&mut pe);
            pe.finish();
        }));
        if let Err(p) = ran {
            self.failed.store(true, Ordering::Relaxed);
            if let Some(net) = &self.net {
                // The other ranks would wait for this PE's messages forever.
                net.link.abort();
            }
            resume_unwind(p);
        }
        pe.state
    }
}
