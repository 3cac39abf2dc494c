//! An [`Exchange`] send that takes the fault its job injects ([`Job::inject`](crate::job::Job::inject)).

use super::Exchange;
use crate::job::Fault;

impl Exchange {
    /// [`Exchange::send`] with `fault` injected into its items.
    pub(super) fn send_faulty<'a>(
        &self,
        fault: Fault,
        channel: usize,
        dest: usize,
        key: (u32, i64),
        count: usize,
        items: impl Iterator<Item = &'a [u8]>,
    ) {
        let mut buf: Vec<u8> = items.flatten().copied().collect();
        fault.act(&mut buf);
        self.send_buffer(channel, dest, key, count, &buf);
    }
}
