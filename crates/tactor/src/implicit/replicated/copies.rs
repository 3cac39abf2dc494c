//! How a replicated program's copies travel: the typed launches that send, receive, reset
//! and fold a region's bytes, and the inbox where they arrive.

use super::super::region::{Partials, Region};
use super::super::trace::Attach;
use super::super::Program;
use crate::event::{EventState, HasState};
use crate::failure::Failure;
use crate::job::rendezvous::{Open, Rendezvous};
use crate::job::{Job, Wire};
use crate::subgraph::Inlet;
use crate::{Event, Placement};
use std::any::Any;
use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

/// Which copy a message carries: the region, the version of it, and the rank that sent it
/// (the partial results of a reduction are of one version, from several ranks).
pub(super) type Key = (u32, u64, u32);

/// Copies that arrived, or that a launch waits for (the job's [`Rendezvous`]): a waiting
/// launch's landing takes the bytes and opens what the launch waits on.
#[derive(Default)]
pub(super) struct Inbox(pub(super) Rendezvous<Key, Arc<Landing>>);

/// Where a copy this rank waits for lands: its bytes (or why they never come), and what the
/// launch that reads them waits on. In a trace's replay that is the instance's inlet, which
/// the bytes open directly, whichever of the two comes first waiting for the other;
/// elsewhere the landing's own event ([`Landing::arrival`], poisoned if the bytes never come,
/// or if the landing is dropped first, as a dropped `UserEvent` is).
pub(super) struct Landing {
    /// The event of the arrival: the landing is the event's own allocation.
    arrived: EventState,
    land: Mutex<Land>,
}

#[derive(Default)]
struct Land {
    /// The bytes, or why they never come; `None` until then, and once taken.
    got: Option<Result<Vec<u8>, String>>,
    /// What waits for them, until they come.
    inlet: Option<Inlet>,
    /// Whether something waits on the landing's event: only then is it triggered (an
    /// atomic operation on the delivering thread that a replay's inlet does without).
    evented: bool,
}

impl HasState for Landing {
    fn state(&self) -> &EventState {
        &self.arrived
    }
}

impl Drop for Landing {
    fn drop(&mut self) {
        let land = self.land.get_mut().unwrap_or_else(PoisonError::into_inner);
        if land.evented {
            let dropped = Err(Arc::new(Failure::UserEventDropped));
            let _ = self.arrived.trigger(dropped);
        }
    }
}

impl Landing {
    /// A landing nothing has come to yet.
    fn new() -> Arc<Landing> {
        Arc::new(Landing {
            arrived: EventState::new(),
            land: Mutex::default(),
        })
    }

    fn land(&self) -> std::sync::MutexGuard<'_, Land> {
        self.land.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The event of the bytes' arrival (poisoned if they never come).
    pub(super) fn arrival(self: &Arc<Self>) -> Event {
        let mut land = self.land();
        land.evented = true;
        let got = land.got.as_ref().map(outcome);
        drop(land);
        if let Some(got) = got {
            self.trigger(got);
        }
        Event(self.clone())
    }

    fn trigger(&self, got: Result<(), String>) {
        let done = got.map_err(|why| Arc::new(Failure::Poisoned(why)));
        let _ = self.arrived.trigger(done);
    }

    /// The message that landed, header and all (kept whole as it came off the network: no
    /// copy of its payload on the way). Called once, by the launch that it opened.
    pub(super) fn take(&self) -> Vec<u8> {
        match self.land().got.take() {
            Some(Ok(message)) => message,
            _ => unreachable!("a launch runs only once its copy has landed"),
        }
    }
}

/// What the launch waiting for `got` is told.
fn outcome(got: &Result<Vec<u8>, String>) -> Result<(), String> {
    got.as_ref().map(|_| ()).map_err(Clone::clone)
}

/// Opens `inlet` as `got` says.
fn open(inlet: Inlet, got: Result<(), String>) {
    match got {
        Ok(()) => inlet.open(),
        Err(why) => inlet.poison(&why),
    }
}

impl Open for Arc<Landing> {
    fn open(self, got: Result<Cow<'_, [u8]>, &str>) {
        let got = got.map(Cow::into_owned).map_err(str::to_string);
        let told = outcome(&got);
        let mut land = self.land();
        land.got = Some(got);
        let (inlet, evented) = (land.inlet.take(), land.evented);
        drop(land);
        if let Some(inlet) = inlet {
            open(inlet, told.clone());
        }
        if evented {
            self.trigger(told);
        }
    }
}

impl Attach for Landing {
    fn attach(&self, inlet: Inlet) {
        let mut land = self.land();
        match &land.got {
            None => land.inlet = Some(inlet),
            Some(got) => {
                let told = outcome(got);
                drop(land);
                open(inlet, told);
            }
        }
    }

    fn event(self: Arc<Self>) -> Event {
        self.arrival()
    }
}

impl Inbox {
    /// The landing of a copy this rank waits for.
    pub(super) fn expect(&self, key: Key) -> Arc<Landing> {
        let landing = Landing::new();
        self.0.expect(key, landing.clone());
        landing
    }
}

/// The typed launches of a region's copies.
pub(super) trait Copies: Send {
    /// Launches the task that sends the copy `to`.
    fn send(&self, p: &mut Program, at: Placement, job: &Arc<Job>, to: Dest);
    /// What the task that writes this region's next version runs as it ends: sends the
    /// version to `to` (see `Replicated::eager`).
    fn eager(&self, job: &Arc<Job>, to: Vec<Dest>) -> Box<dyn FnOnce() + Send>;
    /// Launches the task that writes the copy that lands in `landing` into the replica.
    fn receive(&self, p: &mut Program, at: Placement, landing: Arc<Landing>);
    /// Sets this rank's replica to the reduction's identity: its partial result starts there.
    fn reset(&self, p: &mut Program, at: Placement, partials: &dyn Any);
    /// Folds every rank's partial into this rank's replica once all arrived, in rank order:
    /// `parts[r]` is `None` for this rank's own partial (the replica's value).
    fn fold(
        &self,
        p: &mut Program,
        at: Placement,
        arrived: Event,
        parts: Vec<Option<Arc<Landing>>>,
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

    fn receive(&self, p: &mut Program, at: Placement, landing: Arc<Landing>) {
        let attach = landing.clone() as Arc<dyn Attach>;
        p.launch_attached(
            attach,
            at,
            super::super::write(&self.0),
            move |v: &mut T| v.decode(payload(&landing.take())),
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
        parts: Vec<Option<Arc<Landing>>>,
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
                        Some(landing) => {
                            let mut t = (ops.identity)();
                            t.decode(payload(&landing.take()));
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

#[cfg(test)]
mod tests {
    use super::{Inbox, Landing};
    use crate::implicit::trace::Attach;
    use crate::job::rendezvous::Open;
    use crate::subgraph::SubgraphBuilder;
    use crate::Runtime;
    use std::borrow::Cow;
    use std::sync::{Arc, Mutex};

    /// A copy and the inlet of the instance that reads it, landing from two threads in
    /// either order: the instance runs once, after the bytes are there, and reads them; a
    /// copy that never comes poisons it with why.
    #[test]
    fn a_copy_and_its_inlet_meet_whichever_comes_first() {
        let rounds = if cfg!(miri) { 6 } else { 2000 };
        let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
        let read = Arc::new(Mutex::new(Vec::new()));
        let mut b = SubgraphBuilder::<Arc<Landing>>::new();
        let r = read.clone();
        let t = b.task(0, move |l: &Arc<Landing>| r.lock().unwrap().push(l.take()));
        let copy = b.precondition();
        b.wait_for(copy, t);
        let graph = b.compile(&rt).unwrap();
        for k in 0..rounds {
            // An inbox per round: a poisoned one stays poisoned.
            let inbox = Inbox::default();
            let landing = inbox.expect((0, k, 1));
            let (instance, mut inlets) = graph.instantiate_with_inlets(landing.clone(), &[], 1);
            let inlet = inlets.pop().unwrap();
            let fails = k % 3 == 2;
            std::thread::scope(|s| {
                let i = &inbox;
                s.spawn(move || match fails {
                    false => i.0.arrive((0, k, 1), Cow::Owned(vec![k as u8])),
                    true => i.0.poison("rank 1 failed"),
                });
                s.spawn(|| landing.attach(inlet));
            });
            let done = instance.completion.wait();
            if fails {
                let why = done.unwrap_err().to_string();
                assert!(why.contains("rank 1 failed"), "round {k}: {why}");
            } else {
                done.unwrap();
                assert_eq!(read.lock().unwrap().pop(), Some(vec![k as u8]), "round {k}");
            }
        }
    }

    /// Where no replay takes the launch, the landing's own event stands for the inlet: it
    /// triggers once the bytes are there, whichever comes first, and is poisoned if they
    /// never come.
    #[test]
    fn a_landing_without_an_inlet_triggers_its_event_once_its_copy_is_there() {
        let rounds = if cfg!(miri) { 6 } else { 2000 };
        for k in 0..rounds {
            let landing = Landing::new();
            let arrived = std::thread::scope(|s| {
                let l = landing.clone();
                s.spawn(move || l.open(Ok(Cow::Borrowed(&[k as u8]))));
                s.spawn(|| landing.arrival()).join().unwrap()
            });
            arrived.wait().unwrap();
            assert_eq!(landing.take(), vec![k as u8]);
        }
        let poisoned = Landing::new();
        let e = poisoned.clone().event();
        poisoned.open(Err("rank 2 failed"));
        assert!(e.wait().unwrap_err().to_string().contains("rank 2 failed"));
    }
}
