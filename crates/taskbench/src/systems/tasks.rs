//! `tasks`: the graph written the way a Realm or StarPU user writes it, on Tactor's explicit
//! task API. Every point of every timestep is one launched task whose preconditions are the
//! completion events of the tasks it reads from, plus those that must finish before its output
//! buffer may be overwritten. Nothing else orders the tasks: no barriers, no per-timestep
//! synchronisation.
//!
//! Outputs live in two rows per graph (timestep parity), like `bsp`; buffer reuse is ordered
//! through the graph itself: the task writing slot `p` of a row waits for the tasks that read
//! the slot's previous contents (or, if none did, for the task that wrote them). Scratch
//! buffers are per slot too, so they are ordered by the same chain.
//!
//! Launching is done by a driver task that launches a few timesteps and then relaunches
//! itself behind them, so launching overlaps execution instead of preceding it. Tasks are
//! placed anywhere: the worker that makes a task ready queues it, and an idle worker steals it
//! (faster than pinning points by the block distribution: `docs/measurements.md`, "Placing
//! `tasks`' points").
//!
//! On several ranks each rank launches its own points (the block distribution over ranks),
//! and an edge between ranks is a task on each side ([`super::edges`]): after timestep `t`, a
//! send task waits for the producers of the outputs another rank reads and sends them in one
//! message (a message of one output is sent by its producer as it ends, with no send task:
//! on a stencil over two ranks that is every message); on that rank a receive task waits for
//! the message's event (and for the readers of the slots it fills) and copies the outputs
//! into the row, where the readers find them — unless one task reads the whole message:
//! that task then waits for the event itself and reads the outputs from the message.

use super::interface::{check_workers, RunConfig, RunError, System};
use super::on_tactor::{self, ErrorSlot, Graph};
use super::shared::footprint;
use super::team::Pass;
use smallvec::SmallVec;
use tactor::job::exchange::Key;
use tactor::job::Exchange;
use tactor::{Event, Placement, Scope};
use taskbench_core::app::App;
use taskbench_core::plan::Plan;

/// One launched task per point, ordered only by events.
pub struct Tasks;

/// Timesteps the driver launches before relaunching itself.
const CHUNK: i64 = 4;

/// What the tasks of one pass share.
struct Shared<'a> {
    graphs: &'a [Graph],
    error: ErrorSlot,
    remote: Option<&'a Exchange>,
}

/// The events the driver still needs, per graph.
struct Frontier {
    /// Completion events of the last timestep launched, by point.
    last: Vec<Option<Event>>,
    /// Per row and slot: the task that wrote the slot's contents, then the tasks that read
    /// them. The next writer of the slot waits for the readers (or the writer if none read).
    users: [Vec<Vec<Event>>; 2],
    /// Messages of the last timestep launched that one task of the next reads alone: that
    /// task takes them (no receive task, no copy into the row).
    inbound: Vec<Inbound>,
}

/// A message that its only reader takes: the reader, the message, and its points.
struct Inbound {
    reader: i64,
    key: Key,
    points: Vec<i64>,
}

/// A graph's frontier before its first timestep.
fn frontier(g: &Graph) -> Frontier {
    let w = g.plan.graph().max_width as usize;
    Frontier {
        last: vec![None; w],
        users: [vec![Vec::new(); w], vec![Vec::new(); w]],
        inbound: Vec::new(),
    }
}

impl<'a> Shared<'a> {
    /// The body of task `(t, p)` of graph `gi`.
    fn run_point(&self, gi: usize, t: i64, p: i64) {
        // SAFETY: this task's preconditions include every task that read or wrote slot `p` of
        // this row (and of this scratch row) before, and every later reader or writer of it
        // waits for this task's event; the inputs' next writers wait for it too.
        unsafe { self.graphs[gi].run_point(t, p, &self.error) }
    }

    /// Launches timestep `t` of graph `gi`.
    fn launch_timestep<'s>(
        &'s self,
        s: &Scope<'s>,
        gi: usize,
        t: i64,
        f: &mut Frontier,
        pre: &mut Vec<Event>,
        now: &mut Vec<(i64, Event)>,
    ) {
        let g = &self.graphs[gi];
        let plan = &g.plan;
        let row = (t % 2) as usize;
        now.clear();
        // (destination rank, point) of the outputs sent after this timestep.
        let mut sends = Vec::new();
        if self.remote.is_some() {
            g.cut.sends(plan, t, &mut sends);
        }
        for p in g.cut.local(plan, t) {
            pre.clear();
            pre.extend(plan.deps(t, p).iter().map(|&d| {
                f.last[d as usize]
                    .clone()
                    .expect("a dependency ran in the previous timestep")
            }));
            // The slot's readers imply its writer (they read what it wrote); without readers,
            // wait for the writer itself.
            guard(pre, &f.users[row][p as usize]);
            // A message of this output alone is sent by its producer as it ends: no send task.
            let alone: SmallVec<[usize; 2]> = sends
                .chunk_by(|a, b| a.0 == b.0)
                .filter(|group| group.len() == 1 && group[0].1 == p)
                .map(|group| group[0].0)
                .collect();
            let mut mine = Vec::new();
            let mut i = 0;
            while i < f.inbound.len() {
                match f.inbound[i].reader == p {
                    true => mine.push(f.inbound.swap_remove(i)),
                    false => i += 1,
                }
            }
            let e = s.launch(Placement::Any, pre, move |_| {
                match mine.is_empty() {
                    true => self.run_point(gi, t, p),
                    false => self.run_point_taking(gi, t, p, &mine),
                }
                for &dest in &alone {
                    self.send(gi, t, dest, &[p]);
                }
            });
            now.push((p, e));
        }
        debug_assert!(
            f.inbound.is_empty(),
            "every message taken went to its reader"
        );
        for slot in f.last.iter_mut() {
            *slot = None;
        }
        for (p, e) in now.drain(..) {
            let users = &mut f.users[row][p as usize];
            users.clear();
            users.push(e.clone());
            for &d in plan.deps(t, p) {
                f.users[1 - row][d as usize].push(e.clone());
            }
            f.last[p as usize] = Some(e);
        }
        if let Some(remote) = self.remote {
            self.launch_edges(s, remote, (gi, t), f, pre, &sends);
        }
    }

    /// Sends the outputs of `points` (computed at `t`, in graph `gi`) to rank `dest`.
    fn send(&self, gi: usize, t: i64, dest: usize, points: &[i64]) {
        let Some(remote) = self.remote else {
            return;
        };
        let g = &self.graphs[gi];
        let r = &g.rows[(t % 2) as usize];
        let bytes = g.plan.graph().output_bytes_per_task;
        // SAFETY: the producers of these slots ran (the caller is one, or waited for them),
        // and their next writers wait for the caller (it is one of their readers).
        let outputs = points.iter().map(|&q| unsafe { r.read(q as usize) });
        let channel = tactor::current_worker().unwrap_or(0);
        let size = (points.len(), points.len() * bytes);
        remote.send(channel, dest, (gi as u32, t), size.0, size.1, outputs);
    }

    /// Launches the sends (of messages of several outputs; see `launch_timestep`) and the
    /// receives of the outputs of timestep `t` of graph `gi` that cross ranks, `sends` being
    /// what is sent.
    fn launch_edges<'s>(
        &'s self,
        s: &Scope<'s>,
        remote: &'s Exchange,
        (gi, t): (usize, i64),
        f: &mut Frontier,
        pre: &mut Vec<Event>,
        sends: &[(usize, i64)],
    ) {
        let g = &self.graphs[gi];
        let row = (t % 2) as usize;
        let mut list = Vec::new();
        for group in sends.chunk_by(|a, b| a.0 == b.0) {
            if group.len() == 1 {
                continue;
            }
            let dest = group[0].0;
            let points: Vec<i64> = group.iter().map(|&(_, q)| q).collect();
            pre.clear();
            pre.extend(points.iter().map(|&q| {
                f.last[q as usize]
                    .clone()
                    .expect("a sent output was computed here")
            }));
            let e = s.launch(Placement::Any, pre, move |_| {
                self.send(gi, t, dest, &points)
            });
            for &(_, q) in group {
                f.users[row][q as usize].push(e.clone());
            }
        }
        g.cut.receives(&g.plan, t, &mut list);
        for group in list.chunk_by(|a, b| a.0 == b.0) {
            let src = group[0].0;
            let points: Vec<i64> = group.iter().map(|&(_, d)| d).collect();
            let key = (gi as u32, t, src);
            if let Some(reader) = sole_reader(g, t + 1, &points) {
                // Its reader waits for the arrival and reads the message itself; the slots
                // keep their old contents (and their users, whom later writers wait for).
                let arrival = remote.arrival(key);
                for &d in &points {
                    f.last[d as usize] = Some(arrival.clone());
                }
                f.inbound.push(Inbound {
                    reader,
                    key,
                    points,
                });
                continue;
            }
            pre.clear();
            pre.push(remote.arrival(key));
            for &d in &points {
                guard(pre, &f.users[row][d as usize]);
            }
            let e = s.launch(Placement::Any, pre, move |_| {
                self.receive(remote, gi, key, &points)
            });
            for &(_, d) in group {
                let users = &mut f.users[row][d as usize];
                users.clear();
                users.push(e.clone());
                f.last[d as usize] = Some(e.clone());
            }
        }
    }

    /// Runs task `(t, p)` of graph `gi` on the outputs of the messages `inbound` (which
    /// arrived: their events are its preconditions) and its other inputs from the row.
    fn run_point_taking(&self, gi: usize, t: i64, p: i64, inbound: &[Inbound]) {
        let Some(remote) = self.remote else {
            return;
        };
        let g = &self.graphs[gi];
        let bytes = g.plan.graph().output_bytes_per_task;
        let taken: SmallVec<[Vec<u8>; 2]> = inbound
            .iter()
            .map_while(|m| remote.receive(m.key, m.points.len(), m.points.len() * bytes))
            .collect();
        if taken.len() < inbound.len() {
            return; // A message broke the protocol: the pass ends with what was wrong.
        }
        let outside = |d: i64| {
            inbound.iter().zip(&taken).find_map(|(m, data)| {
                let k = m.points.binary_search(&d).ok()?;
                Some(&tactor::job::Exchange::payload(data)[k * bytes..(k + 1) * bytes])
            })
        };
        // SAFETY: as `run_point`; the inputs from other ranks are read from their messages.
        unsafe { g.run_point_with(t, p, &self.error, outside) }
    }

    /// Copies the outputs of message `key` into the slots of `points` (of its timestep's row).
    fn receive(&self, remote: &Exchange, gi: usize, key: (u32, i64, usize), points: &[i64]) {
        let g = &self.graphs[gi];
        let row = &g.rows[(key.1 % 2) as usize];
        let bytes = g.plan.graph().output_bytes_per_task;
        let Some(m) = remote.receive(key, points.len(), points.len() * bytes) else {
            return;
        };
        for (&d, o) in points
            .iter()
            .zip(tactor::job::Exchange::payload(&m).chunks_exact(bytes))
        {
            // SAFETY: this task is the slot's writer for this timestep: it waited for the
            // readers of the slot's previous contents, and the readers of what it writes wait
            // for it.
            unsafe { row.write(d as usize) }.copy_from_slice(o);
        }
    }
}

/// The one point of this rank at timestep `t` that reads any of `points` (outputs of
/// `t - 1`), if exactly one does.
fn sole_reader(g: &Graph, t: i64, points: &[i64]) -> Option<i64> {
    if t >= g.plan.graph().timesteps {
        return None;
    }
    let mut readers = g
        .cut
        .local(&g.plan, t)
        .filter(|&p| g.plan.deps(t, p).iter().any(|d| points.contains(d)));
    let first = readers.next()?;
    readers.next().is_none().then_some(first)
}

/// Adds to `pre` what must finish before a slot with these `users` may be written again
/// ([`on_tactor::slot_guards`]), each event once.
fn guard(pre: &mut Vec<Event>, users: &[Event]) {
    for e in on_tactor::slot_guards(users) {
        if !pre.iter().any(|x| x.ptr_eq(e)) {
            pre.push(e.clone());
        }
    }
}

/// Launches timesteps `from..from + CHUNK` of every graph, then relaunches itself for the next
/// chunk; its relaunch queues behind the tasks just launched, so launching and running overlap.
fn drive<'s>(
    sh: &'s Shared<'s>,
    s: &Scope<'s>,
    from: i64,
    steps: i64,
    mut frontiers: Vec<Frontier>,
) {
    let (mut pre, mut now) = (Vec::new(), Vec::new());
    let to = (from + CHUNK).min(steps);
    for t in from..to {
        for (gi, f) in frontiers.iter_mut().enumerate() {
            if t < sh.graphs[gi].plan.graph().timesteps {
                sh.launch_timestep(s, gi, t, f, &mut pre, &mut now);
            }
        }
    }
    if to < steps && !sh.error.failed() {
        s.launch(Placement::Any, &[], move |s| {
            drive(sh, s, to, steps, frontiers)
        });
    }
}

impl System for Tasks {
    fn name(&self) -> &'static str {
        "tasks"
    }

    fn about(&self) -> &'static str {
        "Tactor's explicit task API: one launched task per point, ordered only by events"
    }

    fn runs_on_ranks(&self) -> bool {
        true
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Two rows of outputs and scratch, the tasks of the timesteps in flight (the driver
        // launches CHUNK ahead), and the runtime.
        footprint::rows(app, 2, 2)
            .saturating_add(footprint::per_task(app, |_| CHUNK + 2, 512, 64))
            .saturating_add(tactor::Runtime::builder().workers(cfg.workers).footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let (rt, remote) = super::network::runtime(cfg)?;
        let (place, rank) = on_tactor::placement(cfg);
        let graphs: Vec<Graph> = app
            .graphs
            .iter()
            .cloned()
            .map(|g| Graph::new(Plan::new(g), place, rank))
            .collect();
        let steps = graphs
            .iter()
            .map(|g| g.plan.graph().timesteps)
            .max()
            .unwrap_or(0);
        let sh = Shared {
            graphs: &graphs,
            error: ErrorSlot::new(remote.clone()),
            remote: remote.as_deref(),
        };
        let sh = &sh;
        on_tactor::passes(&rt, &sh.error, remote.as_deref(), || {
            let frontiers = graphs.iter().map(frontier).collect();
            rt.scope(|s| {
                s.launch(Placement::Any, &[], move |s| {
                    drive(sh, s, 0, steps, frontiers)
                });
            })
            .map_err(|e| RunError::Runtime(e.to_string()))
        })
    }
}
