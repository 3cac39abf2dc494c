//! Sources of work that a worker must poll: work that arrives without a push to the worker's
//! queues (and so without a wake-up), such as compiled-subgraph messages through the rings
//! between workers; network progress and actor mailboxes are next. The worker loop knows
//! them only through [`Source`]; a new kind is a module implementing it and one line in
//! [`for_worker`].

use super::mailbox::{Mailbox, Rings};
use std::rc::Rc;
use std::sync::Arc;

/// One worker's end of a source of work. Owned by the worker's thread.
pub(crate) trait Source {
    /// Runs what is ready here, within a bounded budget so that the worker returns to its
    /// queues. Returns whether it ran anything.
    fn poll(&self) -> bool;
    /// Whether work is in flight that will arrive without a wake-up: the worker then keeps
    /// spinning instead of parking.
    fn busy(&self) -> bool;
    /// Whether something is there to do (checked after an idle worker announced that it is
    /// going to sleep).
    fn has_work(&self) -> bool;
    /// The runtime shut down: cancel what this worker holds.
    fn cancel(&self);
}

/// The sources of worker `w`, and its compiled-subgraph mailbox (which instance activations
/// reach directly).
pub(crate) fn for_worker(rings: &Arc<Rings>, w: usize) -> (Rc<Mailbox>, Vec<Rc<dyn Source>>) {
    let mailbox = Rc::new(Mailbox::new(rings.clone(), w));
    let sources: Vec<Rc<dyn Source>> = vec![mailbox.clone()];
    (mailbox, sources)
}
