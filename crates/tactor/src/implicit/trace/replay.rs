//! Replaying a recorded trace: a vertex's runs (its launches, or points of one index
//! launch), how far the driver issues ahead, and an instance run with this replay's jobs.

use super::*;

/// What a vertex runs, in launch order: a launch of its own, or consecutive points of one
/// index launch, called together (one dispatch for the points of all graphs that Task
/// Bench's lock-step vertices hold).
pub(super) enum Run {
    One(u32),
    /// The shared entry, the points, and their launches.
    Points(u32, Box<[u32]>, Box<[u32]>),
}

impl Run {
    /// `members` (launches, in order) as runs: consecutive points of one shared entry
    /// together, given where each launch is in a replay's arena.
    pub(super) fn of(members: &[u32], places: Option<&[Place]>) -> Vec<Run> {
        let Some(places) = places else {
            return members.iter().map(|&k| Run::One(k)).collect();
        };
        let mut runs = Vec::new();
        // The open run: its entry, points and launches.
        let mut open: Option<(u32, Vec<u32>, Vec<u32>)> = None;
        let close = |open: &mut Option<(u32, Vec<u32>, Vec<u32>)>, runs: &mut Vec<Run>| {
            if let Some((e, points, launches)) = open.take() {
                runs.push(Run::Points(e, points.into(), launches.into()));
            }
        };
        for &k in members {
            let (entry, point) = places[k as usize];
            match &mut open {
                Some((e, points, launches)) if point != ONCE && *e == entry => {
                    points.push(point);
                    launches.push(k);
                }
                _ => {
                    close(&mut open, &mut runs);
                    if point == ONCE {
                        runs.push(Run::One(k));
                    } else {
                        open = Some((entry, vec![point], vec![k]));
                    }
                }
            }
        }
        close(&mut open, &mut runs);
        runs
    }
}

/// The cells a vertex's launches touch, asked for at the vertex's start: their lines were
/// last written by other workers, and taken one launch after another their misses do not
/// overlap (`compiled` asks for its vertices' inputs the same way). Addresses only: nothing
/// is read through them, so a cell written meanwhile is no concern of this hint's.
#[derive(Default)]
pub(super) struct Ahead {
    pub(super) reads: Box<[usize]>,
    pub(super) writes: Box<[usize]>,
}

impl Ahead {
    /// The cells `members` (launches of one vertex) read and write, once each; constants are
    /// never written, and reductions take their cell's lock first.
    pub(super) fn of(members: &[u32], sigs: &[Sig], cells: &[Arc<dyn Send + Sync>]) -> Ahead {
        let (mut reads, mut writes) = (Vec::new(), Vec::new());
        for &k in members {
            for d in &sigs[k as usize].accesses {
                let Some(cell) = cells.get(d.region.index as usize) else {
                    continue;
                };
                let at = Arc::as_ptr(cell).cast::<u8>() as usize;
                match d.mode {
                    AccessMode::Read => reads.push(at),
                    AccessMode::Write | AccessMode::ReadWrite => writes.push(at),
                    AccessMode::Reduce(_) | AccessMode::Constant => {}
                }
            }
        }
        for list in [&mut reads, &mut writes] {
            list.sort_unstable();
            list.dedup();
        }
        Ahead {
            reads: reads.into(),
            writes: writes.into(),
        }
    }

    /// Asks for every cell's first line.
    pub(super) fn ask(&self) {
        for &at in &self.reads {
            crate::hint::fetch_at(at);
        }
        for &at in &self.writes {
            crate::hint::claim_at(at);
        }
    }
}

/// Where each launch is in a replay's arena (`None` when every launch has an entry of its
/// own: no index launches), and each entry's worker (for its flag; the shared entry of an
/// index launch never sets one).
pub(super) fn places_of(sigs: &[Sig], workers: &[usize]) -> (Option<Vec<Place>>, Vec<usize>) {
    if sigs.iter().all(|s| s.index.is_none()) {
        return (None, workers.to_vec());
    }
    let mut entries: Vec<usize> = Vec::new();
    let places = sigs
        .iter()
        .zip(workers)
        .map(|(s, &w)| match s.index {
            None => {
                entries.push(w);
                (entries.len() as u32 - 1, ONCE)
            }
            Some(i) => {
                if i.point == 0 {
                    entries.push(0);
                }
                (entries.len() as u32 - 1, i.point)
            }
        })
        .collect();
    (Some(places), entries)
}

/// Runs one execution of `recorded` with `jobs` after the regions' current states and this
/// execution's `outside` conditions (the instance's inlets, in launch order), and sets the
/// states the fragment leaves.
pub(super) fn run(
    recorded: &Recorded,
    jobs: Arena,
    outside: Vec<Outside>,
    regions: &mut [Versions<Event>],
) -> Event {
    let entry = |s: Sym, regions: &[Versions<Event>]| -> Vec<Event> {
        match s {
            Sym::Version(r) => regions[r as usize].producers.clone(),
            Sym::All(r) => regions[r as usize].guards().to_vec(),
            Sym::Outside(_) => unreachable!("outside conditions are inlets, not entry states"),
            Sym::Task(_) => unreachable!("tasks are not entry states"),
        }
    };
    let inside = recorded.pres.len() - outside.len();
    let pres: Vec<Event> = (recorded.pres[..inside].iter())
        .map(|&s| merged(&entry(s, regions)))
        .collect();
    let (instance, inlets) = recorded
        .graph
        .instantiate_with_inlets(jobs, &pres, outside.len());
    for (inlet, o) in inlets.into_iter().zip(outside) {
        match o {
            Outside::Event(e) => inlet.open_on(&e),
            Outside::Inlet(a) => a.attach(inlet),
        }
    }
    let map = |list: &[Out], regions: &[Versions<Event>]| -> Vec<Event> {
        let mut out = Vec::new();
        for o in list {
            match *o {
                Out::Post(p) => out.push(instance.postconditions[p.0 as usize].clone()),
                Out::Entry(s) => out.extend(entry(s, regions)),
            }
        }
        out
    };
    let exits: Vec<(u32, Versions<Event>)> = recorded
        .exits
        .iter()
        .map(|(r, p, rd)| (*r, Versions::sealed(map(p, regions), map(rd, regions))))
        .collect();
    for (r, state) in exits {
        regions[r as usize] = state;
    }
    instance.completion
}
