//! The port table: a handler per open port, and the messages that arrived for a port before
//! anyone took them (a rank may send before the receiver opened the port).

use super::{Job, JobError, FIRST_PORT};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockWriteGuard};
use tactor_comm::Message;

/// What a port hands each message to.
pub type Handler = Arc<dyn Fn(Message) + Send + Sync>;

/// What a port whose messages are read in place hands each one to: its source and its bytes,
/// where the sender wrote them on the node (or in the network's buffer otherwise).
pub(crate) type InPlace = Arc<dyn Fn(usize, &[u8]) + Send + Sync>;

#[derive(Default)]
pub(super) struct Ports {
    /// By port number; grown as ports open.
    handlers: RwLock<Vec<Option<Handler>>>,
    open: AtomicUsize,
    /// Messages for ports without a handler, in arrival order.
    parked: Mutex<Vec<Message>>,
    /// `parked.len()`, read without the lock by those who look for their messages often.
    parked_count: AtomicUsize,
    /// By port number, the handlers that take messages in place (those ports have a
    /// `handlers` entry too, for messages that arrive in a buffer).
    in_place: RwLock<Vec<Option<InPlace>>>,
    in_place_open: AtomicUsize,
}

impl Ports {
    pub(super) fn any_open(&self) -> bool {
        self.open.load(Ordering::Acquire) > 0
    }

    pub(super) fn any_in_place(&self) -> bool {
        self.in_place_open.load(Ordering::Acquire) > 0
    }

    /// The handler that reads `port`'s messages in place, if one does.
    pub(super) fn in_place_handler(&self, port: u16) -> Option<InPlace> {
        let h = self.in_place.read().unwrap_or_else(PoisonError::into_inner);
        h.get(usize::from(port)).and_then(Clone::clone)
    }

    /// Hands a message read in place to its port's in-place handler, if it has one (called
    /// outside the table's lock: what a message sets off, a task's poison dropping its
    /// closure, may close a port). Whether one took it.
    pub(super) fn offer_in_place(&self, source: usize, port: u16, data: &[u8]) -> bool {
        let h = self.in_place_handler(port);
        h.map(|h| h(source, data)).is_some()
    }

    /// Hands `m` to its port's handler, or parks it.
    pub(super) fn deliver(&self, m: Message) {
        let h = self.handlers.read().unwrap_or_else(PoisonError::into_inner);
        match h.get(m.port as usize).and_then(Clone::clone) {
            Some(handler) => {
                drop(h);
                handler(m)
            }
            // Parked under the table's lock: a port that opens meanwhile takes it with the
            // others instead of missing it.
            None => self.park(m),
        }
    }

    fn park(&self, m: Message) {
        let mut p = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
        p.push(m);
        self.parked_count.store(p.len(), Ordering::Release);
    }

    /// The parked messages for `port`, oldest first.
    pub(super) fn take(&self, port: u16) -> Vec<Message> {
        if self.parked_count.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut p = self.parked.lock().unwrap_or_else(PoisonError::into_inner);
        let (mine, rest) = std::mem::take(&mut *p)
            .into_iter()
            .partition(|m| m.port == port);
        *p = rest;
        self.parked_count.store(p.len(), Ordering::Release);
        mine
    }
}

/// `table` write-locked, with room for `port`'s entry.
fn grown<T: Clone>(
    table: &RwLock<Vec<Option<T>>>,
    port: u16,
) -> RwLockWriteGuard<'_, Vec<Option<T>>> {
    let mut t = table.write().unwrap_or_else(PoisonError::into_inner);
    let at = usize::from(port);
    if t.len() <= at {
        t.resize(at + 1, None);
    }
    t
}

/// An open port of a [`Job`]: messages to it go to its handler until this is dropped.
pub struct OpenPort {
    job: Arc<Job>,
    port: u16,
}

impl std::fmt::Debug for OpenPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OpenPort({})", self.port)
    }
}

impl Drop for OpenPort {
    fn drop(&mut self) {
        let ports = &self.job.ports;
        let mut in_place = ports
            .in_place
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = in_place.get_mut(self.port as usize) {
            if h.take().is_some() {
                ports.in_place_open.fetch_sub(1, Ordering::AcqRel);
            }
        }
        drop(in_place);
        let mut h = ports
            .handlers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        h[self.port as usize] = None;
        ports.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Job {
    /// Opens `port`: from now on each message to it goes to `handler`, on whichever thread
    /// progresses the network (a worker polling the job, a collective waiting), beginning
    /// with those that arrived before. Handlers run briefly and must not open or close ports.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use tactor::job::{Job, FIRST_PORT};
    ///
    /// let job = Job::builder().join().unwrap();
    /// job.send(0, 0, FIRST_PORT, b"early".to_vec()); // to itself, before the port opens
    /// job.progress(&mut Some).unwrap();
    /// let got = Arc::new(Mutex::new(Vec::new()));
    /// let g = got.clone();
    /// let port = job
    ///     .open_port(FIRST_PORT, Arc::new(move |m| g.lock().unwrap().push(m.data)))
    ///     .unwrap();
    /// job.send(0, 0, FIRST_PORT, b"late".to_vec());
    /// job.progress(&mut Some).unwrap();
    /// assert_eq!(*got.lock().unwrap(), [b"early".to_vec(), b"late".to_vec()]);
    /// drop(port);
    /// ```
    pub fn open_port(self: &Arc<Self>, port: u16, handler: Handler) -> Result<OpenPort, JobError> {
        if port < FIRST_PORT {
            return Err(JobError::PortTaken(port));
        }
        self.open_reserved(port, handler)
    }

    /// [`Job::open_port`] for the runtime's own ports, below [`FIRST_PORT`].
    pub(crate) fn open_reserved(
        self: &Arc<Self>,
        port: u16,
        handler: Handler,
    ) -> Result<OpenPort, JobError> {
        let ports = &self.ports;
        let mut h = grown(&ports.handlers, port);
        let at = usize::from(port);
        if h[at].is_some() {
            return Err(JobError::PortTaken(port));
        }
        // Under the table's lock, so that nothing that arrives meanwhile overtakes them.
        for m in ports.take(port) {
            handler(m);
        }
        h[at] = Some(handler);
        ports.open.fetch_add(1, Ordering::AcqRel);
        drop(h);
        // The job now expects messages: its runtimes' parked workers must poll again.
        self.wake_pollers();
        Ok(OpenPort {
            job: self.clone(),
            port,
        })
    }

    /// [`Job::open_reserved`] for a port whose messages `handler` reads in place where they
    /// arrive on the node, with no buffer and no queue of their own: they must need no order
    /// among themselves (see [`tactor_comm::Transport::progress_offering`]). Those that come
    /// in a buffer (from another node, or before the port opened) go to `handler` too.
    pub(crate) fn open_reserved_in_place(
        self: &Arc<Self>,
        port: u16,
        handler: InPlace,
    ) -> Result<OpenPort, JobError> {
        let buffered = handler.clone();
        let open = self.open_reserved(port, Arc::new(move |m| buffered(m.source, &m.data)))?;
        grown(&self.ports.in_place, port)[usize::from(port)] = Some(handler);
        self.ports.in_place_open.fetch_add(1, Ordering::AcqRel);
        Ok(open)
    }

    /// The messages that arrived for `port` while no handler and no `take` of
    /// [`Job::progress`] took them, oldest first.
    pub fn take_parked(&self, port: u16) -> Vec<Message> {
        self.ports.take(port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port read in place still gets what arrived in a buffer: a message parked before it
    /// opened and one that comes after (a job of one has no node path: both are buffered),
    /// with their source; once it closes, nothing is offered in place any more.
    #[test]
    fn a_port_read_in_place_gets_buffered_messages_and_closes_whole() {
        let job = Job::builder().join().unwrap();
        const PORT: u16 = crate::job::PORT_FUTURES;
        job.send(0, 0, PORT, b"early".to_vec());
        job.progress(&mut Some).unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        let open = job
            .open_reserved_in_place(
                PORT,
                Arc::new(move |from, data: &[u8]| g.lock().unwrap().push((from, data.to_vec()))),
            )
            .unwrap();
        assert!(job.ports.any_in_place());
        job.send(0, 0, PORT, b"late".to_vec());
        job.progress(&mut Some).unwrap();
        let want = [(0, b"early".to_vec()), (0, b"late".to_vec())];
        assert_eq!(*got.lock().unwrap(), want);
        drop(open);
        assert!(!job.ports.any_in_place() && job.ports.in_place_handler(PORT).is_none());
        // Parked again, not lost, once the port is closed.
        job.send(0, 0, PORT, b"after".to_vec());
        job.progress(&mut Some).unwrap();
        assert_eq!(job.take_parked(PORT).len(), 1);
        assert_eq!(got.lock().unwrap().len(), 2);
    }
}
