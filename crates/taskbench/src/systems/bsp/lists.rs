//! What a worker of `bsp` receives from other ranks before a timestep, and sends after it,
//! depends only on every graph's shape at the timesteps involved. A graph of a few shapes
//! (most of them: every timestep of a stencil is alike) builds those lists once per class of
//! timesteps, not at every step: at fine grain the step's bookkeeping is on the critical path
//! between two ranks.

use std::collections::HashMap;
use taskbench_core::plan::Plan;

/// Timestep classes (or pairs of them) beyond this many are not kept: a graph whose shape
/// keeps changing builds its lists at every timestep, as before.
const MAX_CLASSES: usize = 64;

/// Graphs longer than this keep no classes: the table takes 8 bytes a timestep.
const MAX_STEPS: i64 = 1 << 22;

/// The class of every timestep, shared by a rank's workers.
pub struct Classes {
    /// Per timestep `t`: the class of `t` (gathers) and of the pair `(t, t + 1)` (scatters);
    /// `None` when there are too many to keep.
    of: Option<Vec<(u32, u32)>>,
    counts: (usize, usize),
}

impl Classes {
    /// The classes of `plans` run together for `steps` timesteps.
    pub fn new(plans: &[&Plan], steps: i64) -> Classes {
        if steps > MAX_STEPS {
            return Classes::none();
        }
        let mut ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut key = Vec::with_capacity(plans.len());
        let mut class = |t: i64| -> Option<u32> {
            key.clear();
            for p in plans {
                key.push(if t < p.graph().timesteps {
                    p.shape_id(t)?
                } else {
                    u32::MAX
                });
            }
            let next = ids.len() as u32;
            match ids.get(key.as_slice()) {
                Some(&c) => Some(c),
                // Too many to keep: stop looking at once.
                None if ids.len() == MAX_CLASSES => None,
                None => {
                    ids.insert(key.clone(), next);
                    Some(next)
                }
            }
        };
        let mut pairs: HashMap<(u32, u32), u32> = HashMap::new();
        let mut of = Vec::with_capacity(steps.max(0) as usize);
        let mut now = class(0);
        for t in 0..steps {
            let (Some(c), Some(n)) = (now, class(t + 1)) else {
                return Classes::none();
            };
            let next = pairs.len() as u32;
            let pair = *pairs.entry((c, n)).or_insert(next);
            if pairs.len() > MAX_CLASSES {
                return Classes::none();
            }
            of.push((c, pair));
            now = Some(n);
        }
        let counts = (ids.len(), pairs.len());
        Classes {
            of: Some(of),
            counts,
        }
    }

    fn none() -> Classes {
        Classes {
            of: None,
            counts: (0, 0),
        }
    }

    /// The class of timestep `t`, if classes are kept.
    pub fn gather(&self, t: i64) -> Option<usize> {
        let of = self.of.as_ref()?;
        Some(of[usize::try_from(t).ok()?].0 as usize)
    }

    /// The class of the pair `(t, t + 1)`, if classes are kept.
    pub fn scatter(&self, t: i64) -> Option<usize> {
        let of = self.of.as_ref()?;
        Some(of[usize::try_from(t).ok()?].1 as usize)
    }

    /// How many timestep classes and pairs there are (0 when not kept).
    pub fn counts(&self) -> (usize, usize) {
        self.counts
    }
}

/// A worker's lists of one kind, one per class, built the first time the class comes up.
pub struct Cached<T> {
    slots: Vec<Option<T>>,
    /// Built at every timestep when classes are not kept.
    scratch: T,
    current: Option<usize>,
}

impl<T: Default> Cached<T> {
    pub fn new(classes: usize) -> Cached<T> {
        Cached {
            slots: (0..classes).map(|_| None).collect(),
            scratch: T::default(),
            current: None,
        }
    }

    /// Makes the lists of class `class` current, building them with `build` (which gets
    /// emptied lists) if they are not kept yet; without a class, builds into the scratch.
    pub fn select(&mut self, class: Option<usize>, build: impl FnOnce(&mut T)) {
        self.current = class;
        match class {
            Some(c) => {
                if self.slots[c].is_none() {
                    let mut lists = T::default();
                    build(&mut lists);
                    self.slots[c] = Some(lists);
                }
            }
            None => build(&mut self.scratch),
        }
    }

    /// The lists selected last.
    pub fn current(&self) -> &T {
        match self.current {
            Some(c) => self.slots[c].as_ref().expect("built when selected"),
            None => &self.scratch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskbench_core::graph::{DependenceType, TaskGraph};

    fn plan(kind: DependenceType, width: i64, steps: i64) -> Plan {
        Plan::new(TaskGraph {
            dependence: kind,
            max_width: width,
            timesteps: steps,
            ..TaskGraph::default()
        })
    }

    #[test]
    fn a_stencil_has_a_first_and_a_steady_class_and_pairs_end_at_the_last_step() {
        let p = plan(DependenceType::Stencil1D, 4, 10);
        let c = Classes::new(&[&p], 10);
        assert_eq!(c.gather(0), Some(0));
        assert!((1..10).all(|t| c.gather(t) == Some(1)));
        // (0,1), (1,1) ... (1,1), (1, past the end).
        assert_eq!(c.scatter(0), Some(0));
        assert!((1..9).all(|t| c.scatter(t) == Some(1)));
        assert_eq!(c.scatter(9), Some(2));
        assert_eq!(c.counts(), (3, 3));
    }

    #[test]
    fn graphs_of_different_lengths_split_the_classes() {
        let (a, b) = (
            plan(DependenceType::Stencil1D, 4, 6),
            plan(DependenceType::Nearest, 4, 3),
        );
        let c = Classes::new(&[&a, &b], 6);
        assert_ne!(
            c.gather(2),
            c.gather(3),
            "the second graph ends after timestep 2"
        );
        assert_eq!(c.gather(4), c.gather(5));
    }

    #[test]
    fn a_cache_builds_each_class_once() {
        let mut k: Cached<Vec<i64>> = Cached::new(2);
        let mut builds = 0;
        for class in [0, 1, 0, 1, 1] {
            k.select(Some(class), |l| {
                builds += 1;
                l.push(class as i64);
            });
            assert_eq!(k.current(), &vec![class as i64]);
        }
        assert_eq!(builds, 2);
        for _ in 0..2 {
            k.select(None, |l| {
                builds += 1;
                l.clear();
                l.push(7);
            });
            assert_eq!(k.current(), &vec![7]);
        }
        assert_eq!(builds, 4);
    }
}
