//! What a worker waits for, receives and sends at a step depends only on the arrays' shapes
//! at the steps involved. Most programs have a few shapes (every step of a stencil is
//! alike), so a worker works its lists out once per class of steps, not at every step: at
//! fine grain the step's bookkeeping is on the critical path between two ranks.

use rustc_hash::FxHashMap as HashMap;

/// Classes (or pairs of them) beyond this many are not kept: a program whose shape keeps
/// changing works its lists out at every step.
const MAX_CLASSES: usize = 64;

/// Programs longer than this keep no classes: the table takes 8 bytes a step.
const MAX_STEPS: i64 = 1 << 22;

/// The class of every step, shared by a rank's workers.
pub(super) struct Classes {
    /// Per step `t`: the class of `t` and of the pair `(t, t + 1)`; `None` when there are too
    /// many to keep.
    of: Option<Vec<(u32, u32)>>,
    counts: (usize, usize),
}

impl Classes {
    /// The classes of `steps` steps of `arrays` arrays, `class(array, step)` the pattern's.
    pub(super) fn new(
        arrays: usize,
        steps: i64,
        class: impl Fn(usize, i64) -> Option<u32>,
    ) -> Classes {
        let none = Classes {
            of: None,
            counts: (0, 0),
        };
        if arrays == 0 || steps > MAX_STEPS {
            return none;
        }
        let mut ids: HashMap<Vec<u32>, u32> = HashMap::default();
        let mut key = Vec::with_capacity(arrays);
        let mut of_step = |t: i64| -> Option<u32> {
            key.clear();
            for a in 0..arrays {
                key.push(class(a, t)?);
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
        let mut pairs: HashMap<(u32, u32), u32> = HashMap::default();
        let mut of = Vec::with_capacity(steps.max(0) as usize);
        let mut now = of_step(0);
        for t in 0..steps {
            let (Some(c), Some(n)) = (now, of_step(t + 1)) else {
                return none;
            };
            let next = pairs.len() as u32;
            let pair = *pairs.entry((c, n)).or_insert(next);
            if pairs.len() > MAX_CLASSES {
                return none;
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

    /// The class of step `t`, if classes are kept.
    pub(super) fn now(&self, t: i64) -> Option<usize> {
        let of = self.of.as_ref()?;
        Some(of[usize::try_from(t).ok()?].0 as usize)
    }

    /// The class of the pair `(t, t + 1)`, if classes are kept.
    pub(super) fn pair(&self, t: i64) -> Option<usize> {
        let of = self.of.as_ref()?;
        Some(of[usize::try_from(t).ok()?].1 as usize)
    }

    /// How many classes and pairs there are (0 when not kept).
    pub(super) fn counts(&self) -> (usize, usize) {
        self.counts
    }
}

/// A worker's lists of one kind, one per class, made the first time the class comes up.
pub(super) struct Cached<T> {
    slots: Vec<Option<T>>,
    /// Made at every step when classes are not kept.
    scratch: T,
    current: Option<usize>,
}

impl<T: Default> Cached<T> {
    pub(super) fn new(classes: usize) -> Cached<T> {
        Cached {
            slots: (0..classes).map(|_| None).collect(),
            scratch: T::default(),
            current: None,
        }
    }

    /// Makes the lists of class `class` current, making them with `make` (which gets emptied
    /// lists) if they are not kept yet; without a class, makes them in the scratch.
    pub(super) fn select(&mut self, class: Option<usize>, make: impl FnOnce(&mut T)) -> &T {
        self.current = class;
        match class {
            Some(c) => self.slots[c].get_or_insert_with(|| {
                let mut lists = T::default();
                make(&mut lists);
                lists
            }),
            None => {
                make(&mut self.scratch);
                &self.scratch
            }
        }
    }

    /// The lists selected last.
    pub(super) fn current(&self) -> &T {
        match self.current {
            Some(c) => self.slots[c].as_ref().expect("made when selected"),
            None => &self.scratch,
        }
    }
}

// Not under Miri: no unsafe code here for it to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn a_first_step_and_a_steady_one_make_two_classes_and_pairs_end_at_the_last_step() {
        // The first step reads nothing; the rest are alike; past the end is a class too.
        let c = Classes::new(1, 10, |_, t| Some(u32::from(t > 0) + u32::from(t >= 10)));
        assert_eq!(c.now(0), Some(0));
        assert!((1..10).all(|t| c.now(t) == Some(1)));
        assert_eq!(c.pair(0), Some(0));
        assert!((1..9).all(|t| c.pair(t) == Some(1)));
        assert_eq!(c.pair(9), Some(2));
        assert_eq!(c.counts(), (3, 3));
    }

    #[test]
    fn arrays_of_different_shapes_split_the_classes_and_unknown_shapes_keep_none() {
        let c = Classes::new(2, 6, |a, t| Some(u32::from(a == 1 && t >= 3)));
        assert_ne!(c.now(2), c.now(3), "the second array changes at step 3");
        assert_eq!(c.now(4), c.now(5));
        let c = Classes::new(2, 6, |a, t| (a == 0 || t < 4).then_some(0));
        assert_eq!((c.now(0), c.pair(0), c.counts()), (None, None, (0, 0)));
        let c = Classes::new(1, 200, |_, t| Some(t as u32));
        assert_eq!(c.now(0), None, "too many classes to keep");
    }

    #[test]
    fn a_cache_makes_each_class_once() {
        let mut k: Cached<Vec<i64>> = Cached::new(2);
        let mut makes = 0;
        for class in [0, 1, 0, 1, 1] {
            let got = k
                .select(Some(class), |l| {
                    makes += 1;
                    l.push(class as i64);
                })
                .clone();
            assert_eq!(got, vec![class as i64]);
            assert_eq!(k.current(), &vec![class as i64]);
        }
        assert_eq!(makes, 2);
        for _ in 0..2 {
            k.select(None, |l| {
                makes += 1;
                l.clear();
                l.push(7);
            });
            assert_eq!(k.current(), &vec![7]);
        }
        assert_eq!(makes, 4);
    }
}
