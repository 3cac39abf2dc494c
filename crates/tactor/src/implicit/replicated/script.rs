//! Traces of a replicated program, sharded: a trace's recording keeps, beside this rank's own
//! trace, what its launches did on this rank (the copies it sent and received, the eager
//! sends of its tasks) and the record every rank keeps of the regions it touched, before and
//! after. A later execution that starts from the same record replays that script: it projects
//! only this rank's points (on the workers, as a one-process replay does) and issues only its
//! copies, where a full execution has every rank project and book every point of the job.
//!
//! Which copies a trace needs depends on where its regions' versions were when it started
//! (the first execution of a stencil's trace fetches copies; the next ones receive them
//! eagerly). So a trace id keeps one variant per starting record, each a trace of its own in
//! this rank's program, and the launches of each variant are the same at every execution. A
//! recording that reduces over ranks, starts on an open reduction group or makes regions
//! keeps its variant but is replayed with the bookkeeping done in full.
//!
//! A replay is checked as one process's is: every call against the script (its task, and its
//! rank or its projection and number of points), every launch of this rank against its trace,
//! and every point against its recording by the worker that runs it. A point that moved to
//! another rank fails on the rank that recorded it.

use super::copies::{dest, Key};
use super::{Declared, Replicated, Shard};
use crate::implicit::TraceError;
use crate::Placement;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::any::TypeId;
use std::sync::Arc;

/// What a task runs as it ends: its eager copies.
pub(in crate::implicit) type Sends = Box<dyn FnOnce() + Send>;

/// Variants kept per trace id; the oldest goes when one more is recorded.
const VARIANTS: usize = 8;

/// What this rank's record says of one region.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Snap {
    holds: Vec<bool>,
    home: (usize, Placement),
    followers: Vec<usize>,
    eager: Vec<usize>,
    /// An eager copy of the latest version is awaited here.
    coming: bool,
    /// A reduction group is open.
    group: bool,
    /// Not compared: a replay's keys are shifted by the versions' difference.
    version: u64,
}

impl Snap {
    pub(super) fn of(s: &Shard) -> Snap {
        Snap {
            holds: s.holds.clone(),
            home: s.home,
            followers: s.followers.clone(),
            eager: s.eager.clone(),
            coming: s.coming.is_some(),
            group: s.group.is_some(),
            version: s.version,
        }
    }

    fn same(&self, s: &Shard) -> bool {
        self.holds == s.holds
            && self.home == s.home
            && self.followers == s.followers
            && self.eager == s.eager
            && self.coming == s.coming.is_some()
            && self.group == s.group.is_some()
    }
}

/// One effect of the bookkeeping on this rank: what a script replays. Keys as recorded.
#[derive(Clone)]
pub(super) enum Op {
    /// Launches the task that sends the region's version `key` to a rank.
    Send {
        region: u32,
        at: Placement,
        to: (usize, Key),
    },
    /// Awaits copy `key` and launches the task that writes it into the replica.
    Receive {
        region: u32,
        at: Placement,
        key: Key,
    },
    /// Awaits copy `key`, sent eagerly by its writer, until a task here reads it.
    Expect { region: u32, key: Key },
    /// Launches the task that writes the awaited eager copy into the replica.
    ReceiveComing { region: u32, at: Placement },
    /// Forgets an awaited eager copy (a newer version replaces it).
    ClearComing { region: u32 },
    /// The call's point `point` (of this rank's, from 0) sends the region's new version to
    /// these ranks as it ends.
    Eager {
        point: u32,
        region: u32,
        to: Vec<(usize, Key)>,
    },
}

impl Op {
    fn region(&self) -> u32 {
        match self {
            Op::Send { region, .. }
            | Op::Receive { region, .. }
            | Op::Expect { region, .. }
            | Op::ReceiveComing { region, .. }
            | Op::ClearComing { region }
            | Op::Eager { region, .. } => *region,
        }
    }
}

/// What a call of the program is compared by.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::implicit) enum Sig {
    Launch {
        task: TypeId,
        rank: usize,
        at: Placement,
    },
    Index {
        task: TypeId,
        project: TypeId,
        points: u32,
    },
}

/// A call of the recorded trace: what it was, what it did here, and this rank's points of an
/// index launch (the first and how many).
struct Call {
    sig: Sig,
    name: &'static str,
    ops: Vec<Op>,
    local: Option<(u32, u32)>,
}

/// What a call of a replay is told to do.
pub(in crate::implicit) enum Step {
    /// The bookkeeping in full (recording, or a variant replayed so).
    Full,
    /// Nothing: the replay already failed.
    Skip,
    /// The script's call: this rank's points (the first and how many) and what each sends
    /// as it ends.
    Play(Option<(u32, u32)>, Vec<Option<Sends>>),
}

/// One recording of a trace id, from one starting record.
struct Variant {
    /// The trace of this rank's program that holds its launches.
    local: u64,
    /// The regions it touches, with their record at its start and at its end.
    regions: Vec<(u32, Snap, Snap)>,
    calls: Vec<Call>,
    /// Copies this rank takes part in per execution.
    copies: u64,
    /// Whether the script may stand for the bookkeeping.
    playable: bool,
}

impl Variant {
    fn fits(&self, shards: &[Option<Shard>]) -> bool {
        (self.regions.iter())
            .all(|(r, start, _)| shards[*r as usize].as_ref().is_some_and(|s| start.same(s)))
    }
}

/// A trace being recorded.
struct Recorder {
    start: Vec<(u32, Snap)>,
    seen: HashSet<u32>,
    calls: Vec<Call>,
    copies: u64,
    playable: bool,
}

enum Open {
    Recording {
        id: u64,
        local: u64,
        rec: Recorder,
    },
    Playing {
        id: u64,
        variant: Arc<Variant>,
        next: usize,
        error: Option<TraceError>,
    },
    Full {
        id: u64,
    },
}

/// A replicated program's traces.
#[derive(Default)]
pub(in crate::implicit) struct Traces {
    variants: HashMap<u64, Vec<Arc<Variant>>>,
    next_local: u64,
    open: Option<Open>,
    /// Executions replayed from their script.
    pub(super) replays: u64,
}

impl Traces {
    /// Records `op` in the call being recorded, if one is.
    pub(super) fn note(&mut self, op: &Op) {
        if let Some(Open::Recording { rec, .. }) = &mut self.open {
            if let Some(call) = rec.calls.last_mut() {
                call.ops.push(op.clone());
            }
        }
    }

    /// The recording being made, if one is, cannot stand for the bookkeeping.
    pub(in crate::implicit) fn unplayable(&mut self) {
        if let Some(Open::Recording { rec, .. }) = &mut self.open {
            rec.playable = false;
        }
    }

    pub(super) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Whether the open trace is being recorded.
    pub(super) fn is_recording(&self) -> bool {
        matches!(self.open, Some(Open::Recording { .. }))
    }
}

impl Replicated {
    /// Starts recording (or replaying) trace `id`: see [`Replicated::begin_trace`].
    pub(super) fn begin_script(&mut self, id: u64) -> Result<(), TraceError> {
        if let Some(open) = &self.traces.open {
            let open = match open {
                Open::Recording { id, .. } | Open::Playing { id, .. } | Open::Full { id } => *id,
            };
            return Err(TraceError::AlreadyOpen { open, id });
        }
        let found = (self.traces.variants.get(&id))
            .and_then(|vs| vs.iter().find(|v| v.fits(&self.shards)))
            .cloned();
        let (local, open) = match found {
            Some(v) if v.playable => {
                for (r, start, _) in &v.regions {
                    let shard = super::shard_in(&mut self.shards, *r);
                    shard.shift = shard.version.wrapping_sub(start.version);
                }
                let open = Open::Playing {
                    id,
                    variant: v.clone(),
                    next: 0,
                    error: None,
                };
                (v.local, open)
            }
            Some(v) => (v.local, Open::Full { id }),
            None => {
                let local = self.traces.next_local;
                self.traces.next_local += 1;
                let rec = Recorder {
                    start: Vec::new(),
                    seen: HashSet::default(),
                    calls: Vec::new(),
                    copies: self.copies,
                    playable: true,
                };
                (local, Open::Recording { id, local, rec })
            }
        };
        self.program
            .begin_trace_as(local, id)
            .map_err(|e| named(e, id))?;
        self.traces.open = Some(open);
        Ok(())
    }

    /// What the call `sig` (of task `name`) does. On a recording, opens its call: the
    /// caller then hands its accesses to [`touch`](Self::touch) before it books them.
    pub(in crate::implicit) fn step(&mut self, sig: Sig, name: &'static str) -> Step {
        match &mut self.traces.open {
            Some(Open::Recording { rec, .. }) => {
                rec.calls.push(Call {
                    sig,
                    name,
                    ops: Vec::new(),
                    local: None,
                });
                Step::Full
            }
            Some(Open::Playing {
                id,
                variant,
                next,
                error,
            }) => {
                if error.is_some() {
                    return Step::Skip;
                }
                if !variant.calls.get(*next).is_some_and(|c| c.sig == sig) {
                    *error = Some(TraceError::Mismatch {
                        id: *id,
                        launch: *next,
                        recorded: variant.calls.get(*next).map_or_else(
                            || "no call (the recording ends here)".to_string(),
                            |c| describe(c.sig, c.name),
                        ),
                        got: describe(sig, name),
                    });
                    return Step::Skip;
                }
                *next += 1;
                let variant = variant.clone();
                let k = *next - 1;
                self.play(&variant.calls[k])
            }
            _ => Step::Full,
        }
    }

    /// On a recording, takes the record of the regions in `declared` that the trace had not
    /// touched yet (as the trace found them).
    pub(in crate::implicit) fn touch(&mut self, declared: &[Declared]) {
        if let Some(Open::Recording { rec, .. }) = &mut self.traces.open {
            for d in declared {
                let r = d.region.index;
                if rec.seen.insert(r) {
                    let shard = (self.shards[r as usize].as_ref()).expect("a region");
                    // A write replaces an open group's partials: the bookkeeping of that is
                    // not an effect a script replays.
                    rec.playable &= shard.group.is_none();
                    rec.start.push((r, Snap::of(shard)));
                }
            }
        }
    }

    /// On a recording, this rank's points of the index launch just opened.
    pub(in crate::implicit) fn note_local(&mut self, local: Option<(u32, u32)>) {
        if let Some(Open::Recording { rec, .. }) = &mut self.traces.open {
            if let Some(call) = rec.calls.last_mut() {
                call.local = local;
            }
        }
    }

    /// Does what `call` did on this rank, its keys moved on to this execution's versions.
    fn play(&mut self, call: &Call) -> Step {
        let points = call.local.map_or(1, |l| l.1) as usize;
        let mut sends: Vec<Option<Sends>> = (0..points).map(|_| None).collect();
        for op in &call.ops {
            let shift = super::shard_in(&mut self.shards, op.region()).shift;
            if let Some(send) = self.act_shifted(op, shift) {
                let Op::Eager { point, .. } = op else {
                    unreachable!("only eager sends come back");
                };
                let slot = &mut sends[*point as usize];
                *slot = Some(chain(slot.take(), send));
            }
        }
        Step::Play(call.local, sends)
    }

    /// Ends the open trace: see [`Replicated::end_trace`].
    pub(super) fn end_script(&mut self) -> Result<crate::Event, TraceError> {
        let open = self.traces.open.take().ok_or(TraceError::NotOpen)?;
        match open {
            Open::Full { id } => self.program.end_trace().map_err(|e| named(e, id)),
            Open::Recording { id, local, rec } => {
                let done = self.program.end_trace().map_err(|e| named(e, id))?;
                let regions = (rec.start.into_iter())
                    .map(|(r, start)| {
                        let shard = self.shards[r as usize].as_ref().expect("a region");
                        (r, start, Snap::of(shard))
                    })
                    .collect();
                let variant = Variant {
                    local,
                    regions,
                    calls: rec.calls,
                    copies: self.copies - rec.copies,
                    playable: rec.playable,
                };
                let kept = self.traces.variants.entry(id).or_default();
                if kept.len() == VARIANTS {
                    let old = kept.remove(0);
                    self.program.traces.forget(old.local);
                }
                kept.push(Arc::new(variant));
                Ok(done)
            }
            Open::Playing {
                id,
                variant,
                next,
                error,
            } => {
                let error = error.or_else(|| {
                    (next < variant.calls.len()).then_some(TraceError::Shorter {
                        id,
                        recorded: variant.calls.len(),
                        got: next,
                    })
                });
                if let Some(e) = error {
                    // Every rank found the same: none runs the trace's tasks.
                    self.program.discard_trace();
                    self.abandon(&variant);
                    return Err(e);
                }
                match self.program.end_trace() {
                    Ok(done) => {
                        for (r, start, end) in &variant.regions {
                            let shard = super::shard_in(&mut self.shards, *r);
                            shard.holds.clone_from(&end.holds);
                            shard.home = end.home;
                            shard.followers.clone_from(&end.followers);
                            shard.eager.clone_from(&end.eager);
                            shard.version = (shard.version)
                                .wrapping_add(end.version.wrapping_sub(start.version));
                        }
                        self.copies += variant.copies;
                        self.traces.replays += 1;
                        Ok(done)
                    }
                    Err(e) => {
                        // Only this rank's launches differed: the others go on without it.
                        let e = named(e, id);
                        self.abandon(&variant);
                        self.job.tell_failure(&e.to_string());
                        Err(e)
                    }
                }
            }
        }
    }

    /// Leaves the record of a replay whose tasks do not run as it was before, except that
    /// copies in flight are forgotten and the versions move past every key the replay used
    /// (every rank does the same).
    fn abandon(&mut self, variant: &Variant) {
        for (r, start, end) in &variant.regions {
            let shard = super::shard_in(&mut self.shards, *r);
            shard.holds.clone_from(&start.holds);
            shard.home = start.home;
            shard.followers.clone_from(&start.followers);
            shard.eager.clear();
            shard.coming = None;
            let moved = end.version.wrapping_sub(start.version);
            shard.version = shard.version.wrapping_add(moved).wrapping_add(1);
        }
    }

    /// Does `op` on this rank (and records it in the call being recorded); an eager send
    /// comes back for its task to run as it ends.
    pub(super) fn act(&mut self, op: Op) -> Option<Sends> {
        self.traces.note(&op);
        self.act_shifted(&op, 0)
    }

    /// Does `op` with its keys' versions moved on by `shift`.
    fn act_shifted(&mut self, op: &Op, shift: u64) -> Option<Sends> {
        let key = |k: &Key| (k.0, k.1.wrapping_add(shift), k.2);
        let (job, program) = (&self.job, &mut self.program);
        let shard = super::shard_in(&mut self.shards, op.region());
        match op {
            Op::Send { at, to, .. } => {
                let to = dest(job, &mut self.sent, to.0, key(&to.1));
                shard.copies.send(program, *at, job, to);
            }
            Op::Receive { at, key: k, .. } => {
                let landing = self.inbox.expect(key(k));
                shard.copies.receive(program, *at, landing);
            }
            Op::Expect { key: k, .. } => shard.coming = Some(self.inbox.expect(key(k))),
            Op::ReceiveComing { at, .. } => {
                let landing = (shard.coming.take()).expect("an eager copy comes here");
                shard.copies.receive(program, *at, landing);
            }
            Op::ClearComing { .. } => shard.coming = None,
            Op::Eager { to, .. } => {
                let to = (to.iter())
                    .map(|(rank, k)| dest(job, &mut self.sent, *rank, key(k)))
                    .collect();
                return Some(shard.copies.eager(job, to));
            }
        }
        None
    }
}

/// `first`'s sends, then `next`: one task's sends as one.
pub(super) fn chain(first: Option<Sends>, next: Sends) -> Sends {
    match first {
        None => next,
        Some(first) => Box::new(move || {
            first();
            next();
        }),
    }
}

/// What a task runs as it ends, given its sends, if any.
pub(in crate::implicit) fn sending(sends: Option<Sends>) -> impl FnOnce() + Send {
    move || sends.into_iter().for_each(|send| send())
}

fn describe(sig: Sig, name: &str) -> String {
    match sig {
        Sig::Launch { rank, at, .. } => format!("a launch of `{name}` on rank {rank} at {at:?}"),
        Sig::Index { points, .. } => format!("an index launch of {points} points of `{name}`"),
    }
}

/// `e` naming the program's trace `id` (this rank's own trace has an id of its own).
fn named(e: TraceError, id: u64) -> TraceError {
    match e {
        TraceError::AlreadyOpen { .. } | TraceError::NotOpen => e,
        TraceError::Mismatch {
            launch,
            recorded,
            got,
            ..
        } => TraceError::Mismatch {
            id,
            launch,
            recorded,
            got,
        },
        TraceError::PointMismatch {
            launch,
            recorded,
            got,
            ..
        } => TraceError::PointMismatch {
            id,
            launch,
            recorded,
            got,
        },
        TraceError::Shorter { recorded, got, .. } => TraceError::Shorter { id, recorded, got },
        TraceError::Compile { error, .. } => TraceError::Compile { id, error },
    }
}
