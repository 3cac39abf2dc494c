//! A `Poller` is polled by idle workers while it expects work, and `Handle::wake` reaches
//! workers that parked before it did: a lost wake-up would hang here (caught by the watchdog).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use tactor::{Placement, Poller, Runtime, UserEvent};

/// Work posted from another thread: a counter of rings, and the event each ring triggers.
#[derive(Default)]
struct Bell {
    rings: AtomicU64,
    waiting: Mutex<Vec<UserEvent>>,
    polls: AtomicUsize,
}

impl Poller for Bell {
    fn poll(&self, _worker: usize) -> bool {
        self.polls.fetch_add(1, Ordering::Relaxed);
        if self.rings.load(Ordering::Acquire) == 0 {
            return false;
        }
        let Some(e) = self.waiting.lock().unwrap().pop() else {
            return false;
        };
        self.rings.fetch_sub(1, Ordering::AcqRel);
        e.trigger().unwrap();
        true
    }

    fn expecting(&self) -> bool {
        !self.waiting.lock().unwrap().is_empty()
    }
}

#[test]
fn parked_workers_wake_for_a_poller_and_every_ring_is_handled() {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let bell = Arc::new(Bell::default());
        let rt = Runtime::builder()
            .workers(2)
            .pin(false)
            .spin(Duration::from_micros(10))
            .poller(bell.clone())
            .build()
            .unwrap();
        for round in 0..200u64 {
            // Let the workers park, then expect a ring and say so.
            std::thread::sleep(Duration::from_micros(200));
            let rang = UserEvent::new();
            let hit = Arc::new(AtomicU64::new(0));
            let h = hit.clone();
            let done = rt.launch(Placement::Any, &[rang.event()], move || {
                h.store(round + 1, Ordering::Release);
            });
            bell.waiting.lock().unwrap().push(rang);
            rt.wake();
            let b = bell.clone();
            std::thread::spawn(move || {
                b.rings.fetch_add(1, Ordering::AcqRel);
            });
            done.wait().unwrap();
            assert_eq!(hit.load(Ordering::Acquire), round + 1);
        }
        assert!(bell.polls.load(Ordering::Relaxed) > 0);
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("a ring was never handled: a worker missed a wake-up");
}
