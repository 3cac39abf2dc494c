//! [`Blocks`] for programs whose items are futures: each message sent as soon as its items
//! are ready, and each item received a future set as its message arrives — by the thread that
//! made the last item ready, and the one that delivered the message, with no task in between
//! (on a rank of one worker that also runs the program's launches, each task a step costs is
//! on the step's critical path).

use super::Blocks;
use crate::countdown::Outcome;
use crate::event::Notify;
use crate::job::exchange::{Exchange, Key};
use crate::scope::Part;
use crate::{Future, Promise, Scope};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

impl Blocks {
    /// After `step`: for each message of this rank's items that items of other ranks read at
    /// the next step (`readers(array, item)`: the items that read `item` then), sends the
    /// values of the items' futures (`item(array, item)`) as soon as the last is ready, from
    /// the thread that made it ready; `scope` waits for the send. One whose item failed is
    /// not sent: `scope` reports the failure, and the exchange is abandoned
    /// ([`Exchange::abandon`]): this rank's receives end poisoned rather than wait for ranks
    /// that wait for this message, and the rank should fail the job, which tells the
    /// receiving ranks.
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
            let items: Vec<Future<T>> = list.iter().map(|&(_, a, x)| item(a as usize, x)).collect();
            let sending = Arc::new(Sending {
                left: AtomicUsize::new(items.len()),
                failed: AtomicBool::new(false),
                exchange: self.exchange.clone(),
                key: (stream, step, dest),
                len: self.bytes(list),
                part: scope.part(),
                items,
            });
            for f in &sending.items {
                f.event().state().subscribe(sending.clone());
            }
        });
    }

    /// Before the step after `step`: gives `put(array, item, future)` a future for each item
    /// of `step` that this rank's items read from other ranks (`reads(array, item)`: the
    /// items that `item` reads), set where the message is delivered, as it arrives (no task
    /// in between), or failed if the message broke the protocol (the exchange keeps the
    /// error: [`Exchange::take_error`]) or its rank failed. `scope` waits for the message.
    /// The values are the items' bytes as a `Vec<u8>`; [`receive_later_as`](Self::receive_later_as)
    /// makes them any type made from bytes.
    pub fn receive_later<I>(
        &self,
        scope: &Scope<'_>,
        step: i64,
        reads: impl FnMut(usize, usize) -> I,
        put: impl FnMut(usize, usize, Future<Vec<u8>>),
    ) where
        I: IntoIterator<Item = usize>,
    {
        self.receive_later_as(scope, step, reads, put)
    }

    /// [`receive_later`](Self::receive_later) with each future's value made from its item's
    /// bytes by `T::from`: a type that keeps small items inline, such as `SmallVec<[u8; N]>`,
    /// saves an allocation per item.
    ///
    /// ```
    /// use smallvec::SmallVec;
    /// use tactor::job::{Blocks, Exchange, Job, FIRST_PORT};
    /// use tactor::Placement;
    ///
    /// let got = Job::run_in_process(2, 1, |rt, job| {
    ///     let blocks = Blocks::new(Exchange::open(job, FIRST_PORT).unwrap(), 0, &[(2, 1)]);
    ///     let mine = blocks.mine(0).start;
    ///     let value = rt.spawn(Placement::Any, &[], move || vec![10 + mine as u8]);
    ///     let mut theirs: Option<tactor::Future<SmallVec<[u8; 4]>>> = None;
    ///     rt.scope(|s| {
    ///         blocks.send_when_ready(s, 0, |_, i| [1 - i], |_, _| value.clone());
    ///         blocks.receive_later_as(s, 0, |_, i| [1 - i], |_, _, f| theirs = Some(f));
    ///     })
    ///     .unwrap();
    ///     theirs.unwrap().get().unwrap()[0]
    /// });
    /// assert_eq!((*got[0].as_ref().unwrap(), *got[1].as_ref().unwrap()), (11, 10));
    /// ```
    pub fn receive_later_as<I, T>(
        &self,
        scope: &Scope<'_>,
        step: i64,
        reads: impl FnMut(usize, usize) -> I,
        mut put: impl FnMut(usize, usize, Future<T>),
    ) where
        I: IntoIterator<Item = usize>,
        T: for<'b> From<&'b [u8]> + Send + Sync + 'static,
    {
        self.messages(step, false, reads, |key, list| {
            let mut promises = Vec::with_capacity(list.len());
            for &(_, a, y) in list {
                let (promise, future) = Promise::new();
                promises.push((promise, self.item_bytes[a as usize]));
                put(a as usize, y, future);
            }
            let (exchange, len, part) = (self.exchange.clone(), self.bytes(list), scope.part());
            self.exchange.on_arrival(key, move |m| {
                let _part = part;
                let checked = m.and_then(|m| {
                    let count = promises.len();
                    exchange
                        .check(key, Some(m), count, len)
                        .ok_or("a bad message")?;
                    Ok(m)
                });
                let m = match checked {
                    Ok(m) => m,
                    Err(why) => {
                        let why = format!("its message did not come: {why}");
                        return promises.into_iter().for_each(|(p, _)| p.fail(&why));
                    }
                };
                let mut bytes = Exchange::payload(m);
                for (promise, len) in promises {
                    let (this, rest) = bytes.split_at(len);
                    promise.set(T::from(this));
                    bytes = rest;
                }
            });
        });
    }
}

/// A message of items that leaves as the last of them is ready, from the thread that made it
/// ready (no task in between). One whose item failed sends nothing: it abandons the exchange
/// and tells the scope.
struct Sending<T> {
    items: Vec<Future<T>>,
    left: AtomicUsize,
    failed: AtomicBool,
    exchange: Arc<Exchange>,
    key: Key,
    len: usize,
    part: Part,
}

impl<T: AsRef<[u8]> + Send + Sync + 'static> Notify for Sending<T> {
    fn notify(self: Arc<Self>, outcome: &Outcome) {
        if let Err(failure) = outcome {
            if !self.failed.swap(true, Ordering::AcqRel) {
                self.part.fail(failure);
                self.exchange.abandon();
            }
        }
        // AcqRel: the last one sees every item's value (each set before its event).
        if self.left.fetch_sub(1, Ordering::AcqRel) != 1 || self.failed.load(Ordering::Acquire) {
            return;
        }
        let (stream, step, dest) = self.key;
        let channel = crate::current_worker().unwrap_or(0);
        let values = (self.items.iter()).map(|f| f.try_get().and_then(Result::ok));
        let bytes = values.map(|v| v.expect("every item is ready").as_ref());
        let count = self.items.len();
        (self.exchange).send(channel, dest, (stream, step), count, self.len, bytes);
    }
}
