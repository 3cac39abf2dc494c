//! Copies that break the protocol.

use super::{Replicated, PORT};
use crate::implicit::{read, write};
use crate::job::Job;

/// A message on the copies' port too short to hold a copy's key (a faulty or foreign sender)
/// fails the copies this rank awaits, naming the sender, instead of panicking on the thread
/// that progresses the network.
#[test]
fn a_copy_shorter_than_its_header_fails_the_awaited_copies_naming_its_sender() {
    let runs = Job::run_in_process(2, 1, |rt, job| {
        let mut p = Replicated::new(rt, job);
        let (x, y) = (p.region(1, 0u64), p.region(0, 0u64));
        if job.rank() == 1 {
            // On the channel the copy of `x` takes after it: it arrives first.
            job.send(0, 0, PORT, vec![1, 2, 3]);
        }
        p.launch(1, write(&x), |v| *v = 7);
        p.launch(0, (read(&x), write(&y)), |(x, y)| *y = *x);
        p.finish()
    });
    let mut runs = runs.into_iter();
    let (zero, one) = (runs.next().expect("rank 0"), runs.next().expect("rank 1"));
    let why = zero.unwrap().unwrap_err().to_string();
    assert!(why.contains("rank 1 sent a copy of 3 bytes"), "{why}");
    one.unwrap().unwrap();
}
