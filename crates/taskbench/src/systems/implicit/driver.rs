//! The driver: the task that issues the program a few timesteps at a time, relaunching
//! itself behind an earlier fence, and hands the program back when the pass is issued.

use super::*;

/// What the driver hands back when the program has been issued: the program, its fence, and
/// the first error of the tracing.
pub(super) type Done = (State, Event, Option<String>);

/// The driver's end of the pass: where it leaves the program when the pass ends. Dropped
/// without sending (the driver task failed), it poisons the event the pass waits for.
pub(super) struct Handback {
    pub(super) slot: Arc<Mutex<Option<Done>>>,
    pub(super) ready: UserEvent,
}

/// The pass's end: waits for the program on a worker (suspended, not blocking the thread).
pub(super) struct Pickup {
    pub(super) slot: Arc<Mutex<Option<Done>>>,
    pub(super) ready: Event,
}

pub(super) fn handback() -> (Handback, Pickup) {
    let slot = Arc::new(Mutex::new(None));
    let ready = UserEvent::new();
    let pickup = Pickup {
        slot: slot.clone(),
        ready: ready.event(),
    };
    (Handback { slot, ready }, pickup)
}

impl Handback {
    pub(super) fn send(self, done: Done) {
        *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(done);
        let _ = self.ready.trigger();
    }
}

impl Pickup {
    /// The program, or `None` if the driver ended without handing it back.
    pub(super) fn take(self) -> Option<Done> {
        self.ready.wait().ok()?;
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Where the driver is: the next timestep, and for `traced` the chunk it is in.
#[derive(Clone, Copy)]
pub(super) struct Cursor {
    pub(super) t: i64,
    pub(super) chunk: usize,
}

/// The driver's fences, oldest first, each with the launches the program had taken when it
/// was made.
pub(super) type Fences = VecDeque<(Event, u64)>;

/// The fence the driver relaunches behind: the oldest once [`ISSUE_AHEAD`] are kept, so that it
/// issues at most that many batches (traced chunks) ahead of the execution; but only a fence
/// made before every launch the program still holds (`issued` of them are issued). On ranks,
/// held launches of `auto` (a fragment not yet complete) may be sends another rank needs to
/// reach its own fence: waiting behind a later fence while holding them could leave two ranks
/// each waiting for the other. The driver then issues on until the fragment completes.
pub(super) fn behind(fences: &mut Fences, issued: u64) -> Option<Event> {
    while fences.len() > ISSUE_AHEAD && fences[1].1 <= issued {
        fences.pop_front();
    }
    let (oldest, at) = fences.front()?;
    (fences.len() >= ISSUE_AHEAD && *at <= issued).then(|| oldest.clone())
}

/// Where the driver runs: always on one worker (the last). Placed anywhere, each relaunch
/// went to whichever worker took it, and the issuing moved between cores with the arena
/// lines it writes (measured: `docs/measurements.md`, "Where the driver runs").
pub(super) fn driver_place(handle: &Handle) -> Placement {
    Placement::Worker(handle.workers().saturating_sub(1))
}

/// Issues the program from `at` on. `implicit` and `auto` issue `CHUNK` timesteps per driver
/// task, and relaunch the driver behind the fence of the batch before last. `traced` issues
/// chunk after chunk in one task, relaxing (its worker runs its share of the instances in
/// flight meanwhile), and waits only when it is `ISSUE_AHEAD` chunks ahead of the execution.
pub(super) fn drive(
    handle: Handle,
    mut st: State,
    at: Cursor,
    style: Style,
    mut fences: Fences,
    done: Handback,
) {
    let traced = style == Style::Traced;
    let mut at = at;
    loop {
        let mut next = at;
        let result = (|| {
            let to = if traced {
                let (t0, len, id) = st.chunks[at.chunk];
                if at.t == t0 {
                    st.program.begin_trace(id)?;
                }
                (at.t + TRACED_SLICE).min(t0 + len)
            } else {
                (at.t + CHUNK).min(st.steps)
            };
            for t in at.t..to {
                st.timestep(t);
            }
            next.t = to;
            // A fence merges every region's state (a subscription per event): `implicit` and
            // `auto` take one every FENCE_EVERY batches. `traced` keeps the event of each
            // chunk's execution instead, which costs nothing (all it launches is in chunks).
            if traced {
                let (t0, len, _) = st.chunks[at.chunk];
                if to == t0 + len {
                    let executed = st.program.end_trace()?;
                    next.chunk += 1;
                    fences.push_back((executed, st.program.launched()));
                }
            } else if (to / CHUNK) % FENCE_EVERY == 0 {
                let fence = st.program.fence();
                fences.push_back((fence, st.program.launched()));
            }
            Ok::<(), tactor::implicit::TraceError>(())
        })();
        if let Err(e) = result {
            let fence = st.program.fence();
            done.send((st, fence, Some(e.to_string())));
            return;
        }
        if next.t >= st.steps || st.table.ctx.error.failed() {
            st.program.flush();
            let fence = st.program.fence();
            // Waiting here suspends this task, not the worker: the program goes back when the
            // pass has ended, so the thread that started it wakes once, as for the other
            // systems (a second wake-up, mid-pass, cost a tail of up to 0.3 ms at METG sizes).
            let _ = fence.wait();
            done.send((st, fence, None));
            return;
        }
        let older = behind(&mut fences, st.program.issued());
        // `traced` goes on in this task while it need not wait: everything it issues runs in
        // compiled instances, which start and run on this worker at its `relax` calls. A new
        // driver task per chunk cost a few microseconds of a worker that bounds the pass.
        // The others hand the worker back between batches: their analysed tasks run from
        // the worker's task queues, which only the end of this task lets it reach.
        if traced && older.as_ref().is_none_or(Event::has_triggered) {
            at = next;
            continue;
        }
        let h = handle.clone();
        handle.launch(driver_place(&handle), older.as_slice(), move || {
            drive(h, st, next, style, fences, done)
        });
        return;
    }
}
