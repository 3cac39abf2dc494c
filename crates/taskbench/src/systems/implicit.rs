//! `implicit`, `traced` and `auto`: the graph as one sequential program on Tactor's implicit
//! face, control replicated over the job ([`tactor::implicit::Replicated`]). Every rank issues
//! every launch; each runs on the rank its point is placed on (the block distribution), on
//! whichever of its workers is free, and the runtime copies an output to another rank when a
//! task there reads it. Each output is a region, in two rows by timestep parity, and each
//! point's scratch one more; the analysis orders every reuse. `implicit` analyses every
//! launch; `traced` puts each chunk of timesteps in a trace named by the chunk's shapes
//! (recorded once, replayed after); `auto` lets the runtime find the repeating fragments. No
//! edge and no message is written here.

use super::interface::{RunConfig, RunError, System};
use super::shared::{block_owners, footprint, run_inputs};
use super::timing::Pass;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use tactor::implicit::Region;
use tactor::implicit::{read, read_write, write, ConstRef, Inputs, Read, ReadList, ReadWrite};
use tactor::implicit::{Replicated as Program, Write};
use tactor::{job::Job, Event};
use taskbench_core::{app::App, kernel::new_scratch, plan::Plan, validate::TaskError};

/// The implicit program, analysed launch by launch, traced by hand or traced automatically.
pub struct Implicit(pub Style);

/// How the program is traced: not at all, a trace per chunk of timesteps, automatically.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Every launch analysed.
    Plain,
    /// Each chunk of timesteps a trace.
    Traced,
    /// Automatic tracing.
    Auto,
}

/// Timesteps between two waits of `implicit` and `auto` (a fence each).
const STEPS: i64 = 32;
/// About the tasks of a chunk of `traced` (a trace each, and a wait after it).
const TRACE_TASKS: i64 = 512;

impl System for Implicit {
    fn name(&self) -> &'static str {
        ["implicit", "traced", "auto"][self.0 as usize]
    }

    fn about(&self) -> &'static str {
        [
            "Tactor's implicit face, control-replicated: each point a task declaring what it \
             reads and writes; the runtime derives every edge and every copy between ranks",
            "the implicit program with each chunk of timesteps traced: analysed once, replayed",
            "the implicit program traced automatically: the runtime finds the repeated fragments",
        ][self.0 as usize]
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Every rank holds every output region (two rows), and up to three waits' worth of
        // timesteps (or traced chunks) are in flight.
        footprint::rows(app, 2, 1)
            .saturating_add(footprint::per_task(app, |_| 3 * 1024, 1024, 160))
            .saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        let (rt, remote) = cfg.tactor()?;
        let job = cfg.job_or_one();
        let mut prog = Program::new(&rt.handle(), &job);
        prog.auto_trace(self.0 == Style::Auto);
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        // Per graph, the rank of each point, and its regions: outputs in two rows, scratch.
        let owners: Vec<Vec<usize>> = (plans.iter())
            .map(|p| block_owners(job.ranks(), p.graph().max_width))
            .collect();
        let mut row = |g: usize, value: &[u8]| -> Vec<Region<Vec<u8>>> {
            let homes = owners[g].iter().map(|&r| r * cfg.workers);
            homes.map(|w| prog.region(w, value.to_vec())).collect()
        };
        let regions: Vec<[Vec<Region<Vec<u8>>>; 3]> = (plans.iter().enumerate())
            .map(|(g, p)| {
                let zeros = vec![0; p.graph().output_bytes_per_task];
                let scratch = new_scratch(p.graph().scratch_bytes_per_task);
                [row(g, &zeros), row(g, &zeros), row(g, &scratch)]
            })
            .collect();
        let steps = app.graphs.iter().map(|g| g.timesteps).max().unwrap_or(0);
        // Chunks of timesteps, a wait after each: in `traced` each a trace of about
        // TRACE_TASKS tasks, named by its timesteps' shapes and parity (which row they write).
        // The first timestep is a chunk of its own: it reads what every rank holds from the
        // start, where the others copy. In `traced` the next three are one more: until a row
        // has been written once after its readers on other ranks are known, its copies are
        // fetched, not sent as the row is written, and on ranks a trace keeps one recording
        // per such starting state (`Replicated::begin_trace`): a short one here, not a second
        // long one. The rest have an even length (the rows' parity).
        let width: i64 = plans.iter().map(|p| p.graph().max_width).sum();
        let (len, warm) = match self.0 {
            Style::Traced => ((TRACE_TASKS / width.max(1)).max(2) / 2 * 2, 4),
            _ => (STEPS, 1),
        };
        let mut starts = vec![0];
        starts.extend((1..warm.min(steps)).take(1));
        starts.extend((warm..steps).step_by(len as usize));
        let mut ids = HashMap::new();
        let chunks: Vec<(i64, i64, u64)> = (0..starts.len())
            .map(|k| {
                let (t0, n) = (starts[k], starts.get(k + 1).unwrap_or(&steps) - starts[k]);
                let shapes: Vec<_> = (t0..t0 + n)
                    .flat_map(|t| plans.iter().map(move |p| p.shape_id(t)))
                    .collect();
                let next = ids.len() as u64;
                (t0, n, *ids.entry((shapes, t0 == 0, t0 % 2)).or_insert(next))
            })
            .collect();
        let lists = |p: &Plan| (0..2 * p.shapes()).map(|_| OnceLock::new()).collect();
        let reads = plans.iter().map(lists).collect();
        let error = (Mutex::new(None), job.clone());
        let table = prog.constant(Table {
            plans,
            owners,
            regions,
            reads,
            error,
        });
        let (prog, style) = (Mutex::new(prog), self.0);
        super::timing::passes(&rt, remote.as_deref(), || {
            let mut prog = prog.lock().unwrap_or_else(|p| p.into_inner());
            let mut waits = VecDeque::<Event>::new();
            for &(t0, n, id) in &chunks {
                if style == Style::Traced {
                    prog.begin_trace(id).map_err(|e| failed(&table, e))?;
                }
                for t in t0..t0 + n {
                    for (g, plan) in table.plans.iter().enumerate() {
                        let (on, width) = (plan.offset(t), plan.width(t) as u32);
                        prog.index_launch(width, &table, (g, t, on), project, point);
                    }
                }
                // Issued at most two waits ahead: the tasks in flight, and their memory, stay
                // bounded however long the graph.
                waits.push_back(match style {
                    Style::Traced => prog.end_trace().map_err(|e| failed(&table, e))?,
                    _ => prog.fence(),
                });
                if waits.len() > 2 {
                    let oldest = waits.pop_front().expect("three waits");
                    oldest.wait().map_err(|e| failed(&table, e))?;
                }
            }
            prog.finish().map_err(|e| failed(&table, e))
        })
    }
}

/// What every point reads: the plans, the rank of each point, the regions, and the first
/// validation failure (reported after the pass) with the job it fails.
struct Table {
    plans: Vec<Plan>,
    owners: Vec<Vec<usize>>,
    regions: Vec<[Vec<Region<Vec<u8>>>; 3]>,
    /// Per graph, timestep shape and row: each point's reads, made at the shape's first use.
    reads: Vec<Vec<OnceLock<Vec<Reads>>>>,
    error: (Mutex<Option<TaskError>>, Arc<Job>),
}

/// A point of graph `g`'s timestep `t`, whose first point is `on`.
type At = (usize, i64, i64);

/// Point `i`: the rank it runs on, what it reads and what it writes.
fn project(c: ConstRef<Table>, (g, t, on): At, i: u32) -> (usize, Access) {
    let tb = c.get();
    let (plan, rows, p) = (&tb.plans[g], &tb.regions[g], (on + i64::from(i)) as usize);
    let row = (t % 2) as usize;
    let shape = plan.shape_id(t).expect("a timestep of the graph") as usize;
    let lists = tb.reads[g][2 * shape + row].get_or_init(|| {
        let reads = |p| plan.dep_indices(t, p).map(|d| read(&rows[1 - row][d]));
        (0..rows[0].len()).map(|p| reads(p).collect()).collect()
    });
    let (ins, out) = (c.reads(&lists[p]), write(&rows[row][p]));
    (tb.owners[g][p], (ins, out, read_write(&rows[2][p])))
}

type Access = (ReadList<Vec<u8>>, Write<Vec<u8>>, ReadWrite<Vec<u8>>);
type Reads = Vec<Read<Vec<u8>>>;
type Bytes<'a> = &'a mut Vec<u8>;

/// Point `i`'s task.
fn point(tb: &Table, (g, t, on): At, i: u32, (ins, out, s): (Inputs<Vec<u8>>, Bytes, Bytes)) {
    let ins = ins.iter().map(|v| &v[..]);
    if let Err(e) = run_inputs(&tb.plans[g], t, on + i64::from(i), out, s, ins) {
        // Its dependents, and the copies of its output, do not run: the other ranks stop
        // waiting for them when told.
        tb.error.1.tell_failure(&e.to_string());
        let first = &mut *tb.error.0.lock().unwrap_or_else(|p| p.into_inner());
        first.get_or_insert(e);
        tactor::fail("validation failed");
    }
}

/// Why a program whose task failed did: the first validation failure if there was one.
fn failed(table: &Table, e: impl ToString) -> RunError {
    let mut first = table.error.0.lock().unwrap_or_else(|p| p.into_inner());
    (first.take()).map_or_else(|| RunError::Runtime(e.to_string()), RunError::Validation)
}
