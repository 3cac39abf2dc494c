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
//! send task waits for the producers of the outputs another rank reads, of every graph, and
//! sends them in one message (a message of one output is sent by its producer as it ends,
//! with no send task: on a stencil over two ranks that is every message); on that rank a
//! receive task waits for the message's event (and for the readers of the slots it fills)
//! and copies the outputs into the rows, where the readers find them — unless one task reads
//! the whole message: that task then waits for the event itself and reads the outputs from
//! the message.

use super::edges::{stream_of, Crossings, Cut, Lone, ALL_GRAPHS};
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
    /// On several ranks: each graph's cut and plan (as [`super::edges::crossing`]'s lists want them), and
    /// the outputs sent alone in their message, by their producer.
    edges: Option<(Vec<Cut>, Vec<Plan>, Lone)>,
}

/// What the driver carries from one relaunch to the next: each graph's frontier, and what
/// crosses ranks after each class of timestep.
struct Driver {
    frontiers: Vec<Frontier>,
    crossings: Crossings,
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
        let lone = self
            .edges
            .as_ref()
            .map_or(&[][..], |(_, _, lone)| lone.at(t));
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
            let alone: SmallVec<[usize; 2]> = (lone.iter())
                .filter(|&&(g, q, _)| g as usize == gi && q == p)
                .map(|&(_, _, dest)| dest)
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
                    self.send(t, dest, &[(gi as u32, p)]);
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
    }

    /// Sends rank `dest` the outputs of `items` (graph, point), computed at `t`: one message,
    /// on the stream [`super::edges::crossing`]'s lists give it at both ends.
    fn send(&self, t: i64, dest: usize, items: &[(u32, i64)]) {
        let Some(remote) = self.remote else {
            return;
        };
        let stream = match items {
            [(gi, _)] => *gi,
            _ => ALL_GRAPHS,
        };
        let row = (t % 2) as usize;
        // SAFETY: the producers of these slots ran (the caller is one, or waited for them),
        // and their next writers wait for the caller (it is one of their readers).
        let outputs = (items.iter())
            .map(|&(gi, q)| unsafe { self.graphs[gi as usize].rows[row].read(q as usize) });
        let len = items.iter().map(|&(gi, _)| self.bytes(gi)).sum();
        let channel = tactor::current_worker().unwrap_or(0);
        remote.send(channel, dest, (stream, t), items.len(), len, outputs);
    }

    fn bytes(&self, gi: u32) -> usize {
        self.graphs[gi as usize].plan.graph().output_bytes_per_task
    }

    /// Launches the sends (of messages of several outputs; see `launch_timestep`) and the
    /// receives of the outputs of timestep `t` that cross ranks: one message per pair of
    /// ranks for every graph ([`super::edges::crossing`]).
    fn launch_edges<'s>(
        &'s self,
        s: &Scope<'s>,
        remote: &'s Exchange,
        t: i64,
        d: &mut Driver,
        pre: &mut Vec<Event>,
    ) {
        let Some((cuts, plans, _)) = &self.edges else {
            return;
        };
        let row = (t % 2) as usize;
        let f = &mut d.frontiers;
        let [sends, receives] = d.crossings.at(cuts, plans, t);
        for group in sends.chunk_by(|a, b| a.0 == b.0).filter(|g| g.len() > 1) {
            let dest = group[0].0;
            let items: Vec<(u32, i64)> = group.iter().map(|&(_, gi, q)| (gi, q)).collect();
            pre.clear();
            pre.extend(items.iter().map(|&(gi, q)| {
                f[gi as usize].last[q as usize]
                    .clone()
                    .expect("a sent output was computed here")
            }));
            let e = s.launch(Placement::Any, pre, move |_| self.send(t, dest, &items));
            for &(_, gi, q) in group {
                f[gi as usize].users[row][q as usize].push(e.clone());
            }
        }
        for group in receives.chunk_by(|a, b| a.0 == b.0) {
            let key = (stream_of(group), t, group[0].0);
            let items: Vec<(u32, i64)> = group.iter().map(|&(_, gi, d)| (gi, d)).collect();
            let gi = items[0].0 as usize;
            if items.iter().all(|&(g, _)| g as usize == gi) {
                let points: Vec<i64> = items.iter().map(|&(_, d)| d).collect();
                if let Some(reader) = sole_reader(&self.graphs[gi], t + 1, &points) {
                    // Its reader waits for the arrival and reads the message itself; the
                    // slots keep their old contents (and their users, whom later writers
                    // wait for).
                    let arrival = remote.arrival(key);
                    for &d in &points {
                        f[gi].last[d as usize] = Some(arrival.clone());
                    }
                    f[gi].inbound.push(Inbound {
                        reader,
                        key,
                        points,
                    });
                    continue;
                }
            }
            pre.clear();
            pre.push(remote.arrival(key));
            for &(gi, d) in &items {
                guard(pre, &f[gi as usize].users[row][d as usize]);
            }
            let e = s.launch(Placement::Any, pre, move |_| {
                self.receive(remote, key, &items)
            });
            for (gi, d) in group.iter().map(|&(_, gi, d)| (gi as usize, d as usize)) {
                let users = &mut f[gi].users[row][d];
                users.clear();
                users.push(e.clone());
                f[gi].last[d] = Some(e.clone());
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

    /// Copies the outputs of message `key` into the slots of `items` (graph, point) of its
    /// timestep's rows.
    fn receive(&self, remote: &Exchange, key: Key, items: &[(u32, i64)]) {
        let row = (key.1 % 2) as usize;
        let len = items.iter().map(|&(gi, _)| self.bytes(gi)).sum();
        let Some(m) = remote.receive(key, items.len(), len) else {
            return;
        };
        let mut data = tactor::job::Exchange::payload(&m);
        for &(gi, d) in items {
            let (this, rest) = data.split_at(self.bytes(gi));
            // SAFETY: this task is the slot's writer for this timestep: it waited for the
            // readers of the slot's previous contents, and the readers of what it writes wait
            // for it.
            unsafe { self.graphs[gi as usize].rows[row].write(d as usize) }.copy_from_slice(this);
            data = rest;
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
fn drive<'s>(sh: &'s Shared<'s>, s: &Scope<'s>, from: i64, steps: i64, mut d: Driver) {
    let (mut pre, mut now) = (Vec::new(), Vec::new());
    let to = (from + CHUNK).min(steps);
    for t in from..to {
        for (gi, f) in d.frontiers.iter_mut().enumerate() {
            if t < sh.graphs[gi].plan.graph().timesteps {
                sh.launch_timestep(s, gi, t, f, &mut pre, &mut now);
            }
        }
        if let Some(remote) = sh.remote {
            sh.launch_edges(s, remote, t, &mut d, &mut pre);
        }
    }
    if to < steps && !sh.error.failed() {
        s.launch(Placement::Any, &[], move |s| drive(sh, s, to, steps, d));
    }
}

impl System for Tasks {
    fn name(&self) -> &'static str {
        "tasks"
    }

    fn about(&self) -> &'static str {
        "Tactor's explicit task API: one launched task per point, ordered only by events"
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Two rows of outputs and scratch, the tasks of the timesteps in flight (the driver
        // launches CHUNK ahead), and the runtime.
        footprint::rows(app, 2, 2)
            .saturating_add(footprint::per_task(app, |_| CHUNK + 2, 512, 64))
            .saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let (rt, remote) = cfg.tactor()?;
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
        let edges = remote.as_ref().map(|_| {
            let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
            let cuts: Vec<Cut> = plans.iter().map(|p| Cut::new(p, place, rank)).collect();
            let lone = Lone::new(&cuts, &plans);
            (cuts, plans, lone)
        });
        let sh = Shared {
            graphs: &graphs,
            error: ErrorSlot::new(remote.clone()),
            remote: remote.as_deref(),
            edges,
        };
        let sh = &sh;
        on_tactor::passes(&rt, &sh.error, remote.as_deref(), || {
            let d = Driver {
                frontiers: graphs.iter().map(frontier).collect(),
                crossings: Crossings::default(),
            };
            rt.scope(|s| {
                s.launch(Placement::Any, &[], move |s| drive(sh, s, 0, steps, d));
            })
            .map_err(|e| RunError::Runtime(e.to_string()))
        })
    }
}
