//! Inlets: preconditions of an instance opened directly (what a network layer does for the
//! messages an instance waits for), from any thread, from a task on the target's own worker,
//! and from a poller; poisoned, dropped, and on instances without tasks.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tactor::{Event, Failure, Inlet, Placement, Poller, Runtime, SubgraphBuilder};

mod common;
use common::{rt, wait_or_fail};

/// A task on worker `w` after an event precondition, and a task on worker `w` after an inlet
/// that checks that `opened` was set before it ran; both count their runs in `ran`, the second
/// in `behind` too.
fn gated(
    rt: &Runtime,
    w: usize,
    opened: &Arc<AtomicBool>,
    ran: &Arc<AtomicU32>,
    behind: &Arc<AtomicU32>,
) -> tactor::Subgraph<()> {
    let mut b = SubgraphBuilder::<()>::new();
    let event = b.precondition();
    let inlet = b.precondition();
    let r = ran.clone();
    let a = b.task(w, move |_| {
        r.fetch_add(1, SeqCst);
    });
    let (o, r, n) = (opened.clone(), ran.clone(), behind.clone());
    let c = b.task(w, move |_| {
        assert!(o.load(SeqCst), "ran before its inlet was opened");
        r.fetch_add(1, SeqCst);
        n.fetch_add(1, SeqCst);
    });
    b.wait_for(event, a);
    b.wait_for(inlet, c);
    b.compile(rt).unwrap()
}

#[test]
fn an_inlet_opened_from_another_thread_releases_its_task() {
    let rt = rt(2);
    let (opened, ran) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU32::new(0)),
    );
    let g = gated(&rt, 1, &opened, &ran, &Arc::default());
    let (inst, mut inlets) = g.instantiate_with_inlets((), &[Event::triggered()], 1);
    let inlet = inlets.pop().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(ran.load(SeqCst), 1, "only the task after the event ran");
    let o = opened.clone();
    std::thread::spawn(move || {
        o.store(true, SeqCst);
        inlet.open();
    });
    wait_or_fail(&inst.completion, "instance").unwrap();
    assert_eq!(ran.load(SeqCst), 2);
}

#[test]
fn poisoned_and_dropped_inlets_poison_the_instance() {
    let rt = rt(2);
    let (opened, ran) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU32::new(0)));
    let behind = Arc::new(AtomicU32::new(0));
    let g = gated(&rt, 0, &opened, &ran, &behind);
    let (inst, mut inlets) = g.instantiate_with_inlets((), &[Event::triggered()], 1);
    inlets.pop().unwrap().poison("rank 1 failed");
    let err = wait_or_fail(&inst.completion, "poisoned").unwrap_err();
    assert_eq!(*err.failure(), Failure::Poisoned("rank 1 failed".into()));
    // The other task may or may not have run before the poison reached the instance.
    assert_eq!(
        behind.load(SeqCst),
        0,
        "the task behind the poisoned inlet must not run"
    );

    let (inst, inlets) = g.instantiate_with_inlets((), &[Event::triggered()], 1);
    drop(inlets);
    let err = wait_or_fail(&inst.completion, "dropped").unwrap_err();
    assert!(err.to_string().contains("inlet was dropped"), "{err}");
}

#[test]
fn an_instance_without_tasks_ends_when_its_inlets_open() {
    let rt = rt(1);
    let mut b = SubgraphBuilder::<()>::new();
    b.precondition();
    b.precondition();
    let g = b.compile(&rt).unwrap();
    let (inst, mut inlets) = g.instantiate_with_inlets((), &[], 2);
    inlets.pop().unwrap().open();
    std::thread::sleep(Duration::from_millis(5));
    assert!(
        !inst.completion.has_triggered(),
        "one inlet is still closed"
    );
    inlets.pop().unwrap().open();
    wait_or_fail(&inst.completion, "empty instance").unwrap();
}

#[test]
#[should_panic(expected = "declares 2 preconditions but instantiate got 1 events and 0 inlets")]
fn a_wrong_count_of_inlets_is_refused() {
    let rt = rt(1);
    let mut b = SubgraphBuilder::<()>::new();
    b.precondition();
    b.precondition();
    let g = b.compile(&rt).unwrap();
    let _ = g.instantiate_with_inlets((), &[Event::triggered()], 0);
}

/// Opened by a task on the worker that runs the waiting vertex (the path that skips the
/// shared queue) and by a task on the other worker, over many instances in flight at once.
#[test]
fn inlets_opened_on_the_targets_own_worker_and_on_others_all_arrive() {
    let rt = rt(2);
    let n = if cfg!(miri) { 8 } else { 2000 };
    let (opened, ran) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU32::new(0)));
    let graphs = [
        gated(&rt, 0, &opened, &ran, &Arc::default()),
        gated(&rt, 1, &opened, &ran, &Arc::default()),
    ];
    let mut done = Vec::new();
    for k in 0..n {
        let (inst, mut inlets) =
            graphs[k % 2].instantiate_with_inlets((), &[Event::triggered()], 1);
        let inlet = inlets.pop().unwrap();
        // k % 4 < 2: opened on the vertex's own worker; otherwise on the other one.
        let at = if k % 4 < 2 { k % 2 } else { 1 - k % 2 };
        rt.launch(Placement::Worker(at), &[], move || inlet.open());
        done.push(inst.completion);
    }
    wait_or_fail(&Event::merge(&done), "instances").unwrap();
    assert_eq!(ran.load(SeqCst), 2 * n as u32);
}

/// A poller that opens queued inlets on whichever worker polls it, as a network layer does
/// when a message arrives.
struct Network {
    inlets: Mutex<VecDeque<Inlet>>,
    expecting: AtomicBool,
}

impl Poller for Network {
    fn poll(&self, _worker: usize) -> bool {
        let next = self.inlets.lock().unwrap().pop_front();
        next.map(Inlet::open).is_some()
    }

    fn expecting(&self) -> bool {
        self.expecting.load(SeqCst)
    }
}

#[test]
fn a_poller_opens_inlets_on_whichever_worker_polls() {
    let net = Arc::new(Network {
        inlets: Mutex::new(VecDeque::new()),
        expecting: AtomicBool::new(true),
    });
    let rt = Runtime::builder()
        .workers(2)
        .pin(false)
        .poller(net.clone())
        .build()
        .unwrap();
    let n = if cfg!(miri) { 8 } else { 2000 };
    let (opened, ran) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicU32::new(0)));
    let graphs = [
        gated(&rt, 0, &opened, &ran, &Arc::default()),
        gated(&rt, 1, &opened, &ran, &Arc::default()),
    ];
    // A chain: each instance waits for the previous one's completion and for its inlet.
    let mut last = Event::triggered();
    for k in 0..n {
        let (inst, inlets) = graphs[k % 2].instantiate_with_inlets((), &[last], 1);
        net.inlets.lock().unwrap().extend(inlets);
        last = inst.completion;
    }
    rt.wake();
    wait_or_fail(&last, "chain").unwrap();
    net.expecting.store(false, SeqCst);
    assert_eq!(ran.load(SeqCst), 2 * n as u32);
}
