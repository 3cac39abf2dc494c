//! [`Blocks`] for programs whose items are futures: each message sent by a task once its
//! items are ready, and each item received a future set when its message arrives.

use super::Blocks;
use crate::job::Exchange;
use crate::{Future, Handle, Placement, Promise};

impl Blocks {
    /// After `step`: for each message of this rank's items that items of other ranks read at
    /// the next step (`readers(array, item)`: the items that read `item` then), a task that
    /// waits for the items' futures (`item(array, item)`) and sends their values. Returns the
    /// futures of those tasks; one whose item failed is poisoned and sends nothing, so its
    /// rank should fail the job (the receiving ranks wait for it otherwise).
    ///
    /// ```
    /// use tactor::job::{Blocks, Exchange, Job, FIRST_PORT};
    /// use tactor::Placement;
    ///
    /// // Two items on two ranks; each reads the other's.
    /// let got = Job::run_in_process(2, 1, |rt, job| {
    ///     let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 0, &[(2, 1)]);
    ///     let mine = blocks.mine(0).start;
    ///     let value = rt.spawn(Placement::Any, &[], move || vec![10 + mine as u8]);
    ///     let sent = blocks.send_when_ready(rt, 0, |_, i| [1 - i], |_, _| value.clone());
    ///     let mut theirs = None;
    ///     blocks.receive_later(rt, 0, |_, i| [1 - i], |_, _, f| theirs = Some(f));
    ///     sent.iter().for_each(|s| s.get().map(drop).unwrap());
    ///     theirs.unwrap().get().unwrap()[0]
    /// });
    /// assert_eq!((*got[0].as_ref().unwrap(), *got[1].as_ref().unwrap()), (11, 10));
    /// ```
    pub fn send_when_ready<I, T>(
        &self,
        handle: &Handle,
        step: i64,
        readers: impl FnMut(usize, usize) -> I,
        item: impl Fn(usize, usize) -> Future<T>,
    ) -> Vec<Future<()>>
    where
        I: IntoIterator<Item = usize>,
        T: AsRef<[u8]> + Send + Sync + 'static,
    {
        let mut sent = Vec::new();
        self.messages(step, true, readers, |(stream, step, dest), list| {
            let items = list.iter().map(|&(_, a, x)| item(a as usize, x));
            let (exchange, len) = (self.exchange.clone(), self.bytes(list));
            sent.push(handle.dataflow(Placement::Any, items, move |items| {
                let channel = crate::current_worker().unwrap_or(0);
                let bytes = items.iter().map(|v| v.as_ref());
                exchange.send(channel, dest, (stream, step), items.len(), len, bytes);
            }));
        });
        sent
    }

    /// Before the step after `step`: gives `put(array, item, future)` a future for each item
    /// of `step` that this rank's items read from other ranks (`reads(array, item)`: the
    /// items that `item` reads), set by a task that takes its message when it arrives, or
    /// failed if the message broke the protocol (the exchange keeps the error:
    /// [`Exchange::take_error`]) or its rank failed.
    pub fn receive_later<I>(
        &self,
        handle: &Handle,
        step: i64,
        reads: impl FnMut(usize, usize) -> I,
        mut put: impl FnMut(usize, usize, Future<Vec<u8>>),
    ) where
        I: IntoIterator<Item = usize>,
    {
        self.messages(step, false, reads, |key, list| {
            let mut promises = Vec::with_capacity(list.len());
            for &(_, a, y) in list {
                let (promise, future) = Promise::new();
                promises.push((promise, self.item_bytes[a as usize]));
                put(a as usize, y, future);
            }
            let (exchange, len) = (self.exchange.clone(), self.bytes(list));
            handle.launch(Placement::Any, &[exchange.arrival(key)], move || {
                let Some(m) = exchange.receive(key, promises.len(), len) else {
                    return promises
                        .into_iter()
                        .for_each(|(p, _)| p.fail("a bad message"));
                };
                let mut items = Exchange::payload(&m);
                for (promise, len) in promises {
                    let (this, rest) = items.split_at(len);
                    promise.set(this.to_vec());
                    items = rest;
                }
            });
        });
    }
}
