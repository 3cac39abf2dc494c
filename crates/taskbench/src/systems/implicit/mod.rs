//! `implicit`, `traced` and `auto`: the graph written as a sequential program on Tactor's implicit
//! parallelism. Each timestep is one index launch (Legion's) whose points are the timestep's
//! points of every graph; each point declares what it touches — a read of each dependency's
//! output, a read-write of its own output slot — and the program's dependence analysis
//! derives every edge, the write-after-read ones of buffer reuse included. Nothing in this
//! module computes an edge.
//!
//! Data are regions: per graph, two rows (timestep parity) of one region per point, holding
//! the point's output and its scratch, as `tasks` keeps them in slots.
//!
//! The program is issued by a driver task that analyses a few timesteps, then relaunches
//! itself behind the fence of an earlier chunk, so launching overlaps execution and the
//! analysis never runs far ahead.
//!
//! `traced` is the same program with each chunk of timesteps (the chunks of `compiled`: all
//! graphs in lock-step, about 512 tasks, an even number of timesteps) in a trace whose id is
//! the chunk's sequence of timestep shapes: recorded and compiled at its first execution
//! (the warm-up pass), replayed as one compiled-subgraph instance after that. Its points are
//! placed by the block distribution (a compiled subgraph places every task); `implicit`
//! places them anywhere, like `tasks`.
//!
//! `auto` is `implicit`'s program, placed like `traced`, with no annotation at all: the
//! program's automatic tracing finds the repeating fragment (two timesteps, for the parity of
//! the rows) and traces runs of it.
//!
//! On several ranks every rank runs the same program over the same
//! regions — control replication — but launches only its own points (the block distribution
//! over ranks, as `tasks`). The regions of other ranks' points are this rank's replicas: after
//! timestep `t`, a launch reading the outputs another rank needs, of every graph, sends them
//! in one message ([`super::edges`]; a message of one output is sent by its point's task
//! instead), and on that rank a launch that waits for the message
//! ([`Program::launch_after`]) writes them into the replicas, where the readers find them. The
//! analysis orders those launches like any other: a replica is rewritten only after its
//! readers of the previous timestep ran. In `traced` the sends and receives are recorded with
//! the chunk: each rank's trace holds its own points and its edges, and every execution
//! hands the receives the arrival events of its own timesteps (external preconditions of the
//! instance, seed 000's Figure 9). In `auto` the fragments automatic tracing finds hold them
//! the same way; the driver then waits only behind fences made before every launch its open
//! fragment holds (see [`behind`]).

use super::edges::{stream_of, Crossings, Cut, Lone, ALL_GRAPHS};
use super::interface::{check_workers, RunConfig, RunError, System};
use super::on_tactor::{self, ErrorSlot};
use super::shared::{footprint, run_inputs};
use super::slots::LineBuf;
use super::team::Pass;
use smallvec::SmallVec;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};
use tactor::implicit::{
    constant, read, read_write, write, ConstRef, Constant, Inputs as Reads, Program, Read,
    ReadList, ReadWrite, Region, Write,
};
use tactor::job::Exchange;
use tactor::{Event, Handle, Placement, UserEvent};
use taskbench_core::app::App;
use taskbench_core::kernel::new_scratch;
use taskbench_core::plan::Plan;

/// The sequential program with its data declared, analysed launch by launch or traced.
pub struct Implicit {
    style: Style,
}

/// How the program is traced.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    /// Not: every launch analysed.
    Plain,
    /// Each chunk of timesteps in a trace of its own.
    Traced,
    /// No annotations; the program finds the repeated fragments itself.
    Auto,
}

impl Implicit {
    /// Every launch analysed.
    pub const PLAIN: Implicit = Implicit {
        style: Style::Plain,
    };
    /// The repeating timesteps traced.
    pub const TRACED: Implicit = Implicit {
        style: Style::Traced,
    };
    /// Automatic tracing.
    pub const AUTO: Implicit = Implicit { style: Style::Auto };
}

/// Timesteps the driver of `implicit` analyses before relaunching itself.
const CHUNK: i64 = 4;

/// Batches of `implicit` and `auto` between two fences (the driver relaunches itself behind
/// the fence before the last, so at most about 2 × FENCE_EVERY × CHUNK timesteps are in flight).
const FENCE_EVERY: i64 = 8;

/// The driver relaunches itself behind the fence this many batches (traced chunks) back: it
/// issues ahead of the execution by up to this many, so that a chunk is issued before the one
/// it follows ends even though the driver only gets the gaps between vertices on its worker.
const ISSUE_AHEAD: usize = 3;

/// Tasks per chunk of `traced` (cut as `compiled` cuts its chunks): its first chunk of each
/// shape is analysed and recorded, the rest replayed, so `compiled`'s longer chunks (4096
/// tasks) would leave a run of 1000 timesteps half recorded.
const TRACE_CHUNK_TASKS: i64 = 512;

/// Timesteps the driver of `traced` issues per driver task (at most a chunk).
const TRACED_SLICE: i64 = i64::MAX / 2;

mod driver;
mod program;
mod table;
use driver::*;
use program::*;
use table::*;

impl System for Implicit {
    fn name(&self) -> &'static str {
        match self.style {
            Style::Plain => "implicit",
            Style::Traced => "traced",
            Style::Auto => "auto",
        }
    }

    fn about(&self) -> &'static str {
        match self.style {
            Style::Plain => {
                "Tactor's implicit parallelism: each point a task declaring what it reads and \
                 writes; the runtime derives every edge"
            }
            Style::Traced => {
                "Tactor's implicit parallelism with each chunk of timesteps traced: analysed \
                 once, replayed as a compiled subgraph"
            }
            Style::Auto => {
                "Tactor's implicit parallelism with automatic tracing: the runtime finds the \
                 repeated fragments without annotations"
            }
        }
    }

    fn memory(&self, app: &App, cfg: &RunConfig) -> u128 {
        // Two rows of outputs and scratch, the tasks of the timesteps in flight (up to three
        // fences of the driver, or a whole traced chunk and its recording), and the runtime.
        let ahead = match self.style {
            Style::Plain => 3 * FENCE_EVERY * CHUNK + 2,
            Style::Traced | Style::Auto => 2048,
        };
        footprint::rows(app, 2, 2)
            .saturating_add(footprint::per_task(app, |_| ahead, 768, 96))
            .saturating_add(cfg.tactor_footprint())
    }

    fn run(&self, app: &App, cfg: &RunConfig) -> Result<Pass, RunError> {
        check_workers(cfg)?;
        let (rt, remote) = cfg.tactor()?;
        let plans: Vec<Plan> = app.graphs.iter().cloned().map(Plan::new).collect();
        let (place, rank) = on_tactor::placement(cfg);
        let ranks = remote.clone().map(|r| {
            let cuts: Vec<Cut> = plans.iter().map(|p| Cut::new(p, place, rank)).collect();
            (r, cuts)
        });
        let lone = ranks.as_ref().map(|(_, cuts)| Lone::new(cuts, &plans));
        let ctx = Ctx {
            ranks,
            lone,
            plans,
            error: ErrorSlot::new(remote.clone()),
            shared: cfg.workers > 1,
        };
        let first = State::new(ctx, &rt.handle(), self.style);
        let ctx = first.table.ctx.clone();
        let mut state = Some(first);
        let style = self.style;
        on_tactor::passes(&rt, &ctx.error, remote.as_deref(), || {
            let st = state
                .take()
                .expect("the program comes back after every pass");
            let (tx, rx) = handback();
            let h = rt.handle();
            let empty = st.steps == 0;
            if empty {
                tx.send((st, Event::triggered(), None));
            } else {
                let start = Fences::new();
                let at = Cursor { t: 0, chunk: 0 };
                rt.launch(driver_place(&h), &[], move || {
                    drive(h, st, at, style, start, tx)
                });
            }
            let (st, fence, trace_error) = rx
                .take()
                .ok_or_else(|| RunError::Runtime("the program's driver task failed".into()))?;
            state = Some(st);
            if let Some(e) = trace_error {
                return Err(RunError::Runtime(e));
            }
            fence.wait().map_err(|e| RunError::Runtime(e.to_string()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Point, INLINE};

    #[test]
    fn outputs_up_to_a_line_stay_inline_and_longer_ones_spill() {
        for len in [0, 1, 16, INLINE, INLINE + 1, 1024] {
            let mut p = Point::new(3, 7, len, 8);
            assert_eq!(p.spill.is_some(), len > INLINE);
            assert_eq!(p.output().len(), len);
            p.output_mut().fill(5);
            assert!(p.output().iter().all(|&b| b == 5));
            assert_eq!((p.graph, p.point), (3, 7));
        }
        // The output's line holds nothing the point's task reads first.
        assert_eq!(std::mem::offset_of!(Point, len), INLINE);
        assert_eq!(std::mem::align_of::<Point>(), 64);
    }
}
