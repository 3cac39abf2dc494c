//! [`Blocks`] for programs whose items are futures: each message sent by a task once its
//! items are ready, and each item received a future set when its message arrives.

use super::Blocks;
use crate::countdown::Outcome;
use crate::event::Notify;
use crate::job::Exchange;
use crate::{Event, Future, Placement, Promise, Scope};
use std::sync::Arc;

impl Blocks {
    /// After `step`: for each message of this rank's items that items of other ranks read at
    /// the next step (`readers(array, item)`: the items that read `item` then), a task of
    /// `scope` that waits for the items' futures (`item(array, item)`) and sends their
    /// values. One whose item failed fails (the scope reports it), sends nothing and
    /// abandons the exchange ([`Exchange::abandon`]): this rank's receives end poisoned
    /// rather than wait for ranks that wait for this message, and the rank should fail the
    /// job, which tells the receiving ranks.
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
    ///     let mut theirs = None;
    ///     rt.scope(|s| {
    ///         blocks.send_when_ready(s, 0, |_, i| [1 - i], |_, _| value.clone());
    ///         blocks.receive_later(s, 0, |_, i| [1 - i], |_, _, f| theirs = Some(f));
    ///     })
    ///     .unwrap();
    ///     theirs.unwrap().get().unwrap()[0]
    /// });
    /// assert_eq!((*got[0].as_ref().unwrap(), *got[1].as_ref().unwrap()), (11, 10));
    /// ```
    pub fn send_when_ready<I, T>(
        &self,
        scope: &Scope<'_>,
        step: i64,
        readers: impl FnMut(usize, usize) -> I,
        item: impl Fn(usize, usize) -> Future<T>,
    ) where
        I: IntoIterator<Item = usize>,
        T: AsRef<[u8]> + Send + Sync + 'static,
    {
        self.messages(step, true, readers, |(stream, step, dest), list| {
            let items = list.iter().map(|&(_, a, x)| item(a as usize, x));
            let (exchange, len) = (self.exchange.clone(), self.bytes(list));
            let abandon = Arc::new(AbandonOnFailure(exchange.clone()));
            let sent = scope.dataflow(Placement::Any, items, move |items| {
                let channel = crate::current_worker().unwrap_or(0);
                let bytes = items.iter().map(|v| v.as_ref());
                exchange.send(channel, dest, (stream, step), items.len(), len, bytes);
            });
            sent.event().state().subscribe(abandon);
        });
    }

    /// Before the step after `step`: gives `put(array, item, future)` a future for each item
    /// of `step` that this rank's items read from other ranks (`reads(array, item)`: the
    /// items that `item` reads), set by a task of `scope` that takes its message when it
    /// arrives, or failed if the message broke the protocol (the exchange keeps the error:
    /// [`Exchange::take_error`]) or its rank failed.
    pub fn receive_later<I>(
        &self,
        scope: &Scope<'_>,
        step: i64,
        reads: impl FnMut(usize, usize) -> I,
        mut put: impl FnMut(usize, usize, Future<Vec<u8>>),
    ) where
        I: IntoIterator<Item = usize>,
    {
        self.messages(step, false, reads, |key, list| {
            let arrival = self.exchange.arrival(key);
            let mut items = Items {
                promises: Vec::with_capacity(list.len()),
                arrival: arrival.clone(),
            };
            for &(_, a, y) in list {
                let (promise, future) = Promise::new();
                items.promises.push((promise, self.item_bytes[a as usize]));
                put(a as usize, y, future);
            }
            let (exchange, len) = (self.exchange.clone(), self.bytes(list));
            scope.launch(Placement::Any, &[arrival], move |_| {
                // Taken out: what is left of `items` drops with nothing to fail.
                let mut items = items;
                let promises = std::mem::take(&mut items.promises);
                let Some(m) = exchange.receive(key, promises.len(), len) else {
                    return promises
                        .into_iter()
                        .for_each(|(p, _)| p.fail("a bad message"));
                };
                let mut bytes = Exchange::payload(&m);
                for (promise, len) in promises {
                    let (this, rest) = bytes.split_at(len);
                    promise.set(this.to_vec());
                    bytes = rest;
                }
            });
        });
    }
}

/// The items a message will set, with its bytes per item. Dropped unset (the message never
/// came: its arrival failed, and the task that takes it did not run), each item fails with
/// the arrival's cause, not as a promise dropped.
struct Items {
    promises: Vec<(Promise<Vec<u8>>, usize)>,
    arrival: Event,
}

impl Drop for Items {
    fn drop(&mut self) {
        let why = match self.arrival.try_outcome() {
            Some(Err(failed)) => format!("its message did not come: {failed}"),
            _ => "its message did not come".to_string(),
        };
        for (promise, _) in self.promises.drain(..) {
            promise.fail(&why);
        }
    }
}

/// Abandons an exchange when the send it watches failed.
struct AbandonOnFailure(Arc<Exchange>);

impl Notify for AbandonOnFailure {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        if outcome.is_err() {
            self.0.abandon();
        }
    }
}
