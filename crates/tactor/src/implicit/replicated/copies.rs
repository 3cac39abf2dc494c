//! How a replicated program's copies travel: the typed launches that send, receive, reset
//! and fold a region's bytes, and the inbox where they arrive.

use super::super::region::{Partials, Region};
use super::super::Program;
use crate::event::{EventState, HasState};
use crate::failure::Failure;
use crate::job::rendezvous::{Open, Rendezvous};
use crate::job::{Job, Wire};
use crate::{Event, Placement};
use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};

/// Which copy a message carries: the region, the version of it, and the rank that sent it
/// (the partial results of a reduction are of one version, from several ranks).
pub(super) type Key = (u32, u64, u32);

/// Copies that arrived, or that a launch waits for (the job's [`Rendezvous`]): a waiting
/// launch's slot takes the bytes and triggers its event.
#[derive(Default)]
pub(super) struct Inbox(pub(super) Rendezvous<Key, Arc<Slot>>);

/// Where a copy this rank waits for lands: its bytes, and the event of their arrival
/// (poisoned if they never come; a slot dropped before either poisons it too, as a dropped
/// `UserEvent` does).
pub(super) struct Slot {
    /// The event of the arrival: the slot is the event's own allocation.
    arrived: EventState,
    data: Mutex<Option<Vec<u8>>>,
}

impl HasState for Slot {
    fn state(&self) -> &EventState {
        &self.arrived
    }
}

impl Open for Arc<Slot> {
    fn open(self, got: Result<Vec<u8>, &str>) {
        let done = match got {
            Ok(data) => {
                *self.data.lock().unwrap_or_else(PoisonError::into_inner) = Some(data);
                Ok(())
            }
            Err(why) => Err(Arc::new(Failure::Poisoned(why.to_string()))),
        };
        let _ = self.arrived.trigger(done);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let dropped = Err(Arc::new(Failure::UserEventDropped));
        let _ = self.arrived.trigger(dropped);
    }
}

impl Inbox {
    /// The slot of a copy this rank waits for, and the event of its arrival (poisoned if a
    /// rank failed before it came).
    pub(super) fn expect(&self, key: Key) -> (Arc<Slot>, Event) {
        let slot = Arc::new(Slot {
            arrived: EventState::new(),
            data: Mutex::new(None),
        });
        let arrived = Event(slot.clone());
        self.0.expect(key, slot.clone());
        (slot, arrived)
    }
}

/// The typed launches of a region's copies.
pub(super) trait Copies: Send {
    /// Launches the task that sends the copy `to`.
    fn send(&self, p: &mut Program, at: Placement, job: &Arc<Job>, to: Dest);
    /// What the task that writes this region's next version runs as it ends: sends the
    /// version to `to` (see `Replicated::eager`).
    fn eager(&self, job: &Arc<Job>, to: Vec<Dest>) -> Box<dyn FnOnce() + Send>;
    fn receive(&self, p: &mut Program, at: Placement, arrived: Event, slot: Arc<Slot>);
    /// Sets this rank's replica to the reduction's identity: its partial result starts there.
    fn reset(&self, p: &mut Program, at: Placement, partials: &dyn Any);
    /// Folds every rank's partial into this rank's replica once all arrived, in rank order:
    /// `parts[r]` is `None` for this rank's own partial (the replica's value).
    fn fold(
        &self,
        p: &mut Program,
        at: Placement,
        arrived: Event,
        parts: Vec<Option<Arc<Slot>>>,
        partials: &dyn Any,
    );
}

/// Sends `v` as the copy `to` names.
fn send_copy<T: Wire>(job: &Job, v: &T, to: Dest) {
    let Dest { rank, key, fault } = to;
    let mut bytes = crate::job::buffer(HEADER);
    bytes.extend_from_slice(&key.0.to_le_bytes());
    bytes.extend_from_slice(&key.1.to_le_bytes());
    bytes.extend_from_slice(&key.2.to_le_bytes());
    v.encode(&mut bytes);
    if let Some(fault) = fault {
        fault.act(&mut bytes[HEADER..]);
    }
    // The channel of the worker it runs on: its own, uncontended.
    let channel = crate::current_worker().unwrap_or(0);
    job.send(channel, rank, PORT, bytes);
}

/// The reduction's `Partials` for `T`, from a group's box.
pub(super) fn partials_of<T: 'static>(partials: &dyn Any) -> Partials<T> {
    *partials
        .downcast_ref::<Partials<T>>()
        .expect("a reduction's partials are of its region's type")
}

/// The message that arrived in `slot`, header and all (kept whole as it came off the
/// network: no copy of its payload on the way).
pub(super) fn message_in(slot: &Slot) -> Vec<u8> {
    slot.data
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
        .expect("a copy that arrived has its bytes")
}

/// A copy message's payload: the region's bytes after the header.
fn payload(message: &[u8]) -> &[u8] {
    &message[HEADER..]
}

pub(super) struct Typed<T>(pub(super) Region<T>);

impl<T: Wire> Copies for Typed<T> {
    fn send(&self, p: &mut Program, at: Placement, job: &Arc<Job>, to: Dest) {
        let job = job.clone();
        p.launch(at, super::super::read(&self.0), move |v: &T| {
            send_copy(&job, v, to)
        });
    }

    fn eager(&self, job: &Arc<Job>, to: Vec<Dest>) -> Box<dyn FnOnce() + Send> {
        let (region, job) = (self.0.clone(), job.clone());
        Box::new(move || {
            // SAFETY: this runs at the end of the task that writes the region's new version
            // (`Replicated::launch_at`), which the analysis gave the region alone until the
            // task ends: nothing else reads or writes it meanwhile.
            let v = unsafe { &*region.cell.value.get() };
            for to in to {
                send_copy(&job, v, to);
            }
        })
    }

    fn receive(&self, p: &mut Program, at: Placement, arrived: Event, slot: Arc<Slot>) {
        p.launch_after(
            &arrived,
            at,
            super::super::write(&self.0),
            move |v: &mut T| v.decode(payload(&message_in(&slot))),
        );
    }

    fn reset(&self, p: &mut Program, at: Placement, partials: &dyn Any) {
        let ops = partials_of::<T>(partials);
        p.launch(at, super::super::write(&self.0), move |v: &mut T| {
            *v = (ops.identity)()
        });
    }

    fn fold(
        &self,
        p: &mut Program,
        at: Placement,
        arrived: Event,
        parts: Vec<Option<Arc<Slot>>>,
        partials: &dyn Any,
    ) {
        let ops = partials_of::<T>(partials);
        p.launch_after(
            &arrived,
            at,
            super::super::read_write(&self.0),
            move |v: &mut T| {
                let mut own = Some(std::mem::replace(v, (ops.identity)()));
                for part in &parts {
                    let partial = match part {
                        None => own.take().expect("one partial of this rank's own"),
                        Some(slot) => {
                            let mut t = (ops.identity)();
                            t.decode(payload(&message_in(slot)));
                            t
                        }
                    };
                    (ops.fold)(v, partial);
                }
            },
        );
    }
}

/// Where a copy goes: the rank, the key it arrives under, and the fault a test injects into
/// it ([`Job::inject`]), if it is the send that fault is due for.
#[derive(Clone, Copy)]
pub(super) struct Dest {
    pub(super) rank: usize,
    pub(super) key: Key,
    pub(super) fault: Option<crate::job::Fault>,
}

/// Where the next copy `job`'s rank sends (the `sent`th) goes, with the fault it carries.
pub(super) fn dest(job: &Job, sent: &mut i64, rank: usize, key: Key) -> Dest {
    let fault = job.fault_due(*sent);
    *sent += 1;
    Dest { rank, key, fault }
}

/// A copy's header: the region (4 bytes), the version (8) and the sender (4).
pub(super) const HEADER: usize = 16;

/// The port of replicated programs' copies (one such program at a time per process).
pub(super) const PORT: u16 = crate::job::PORT_IMPLICIT;
