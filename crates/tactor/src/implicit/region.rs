//! Regions: data that tasks share, owned by the runtime, reachable only through declared
//! accesses.

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::Mutex;

/// Which region of which program: a program checks that it analyses only its own regions.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegionKey {
    pub(crate) program: u32,
    pub(crate) index: u32,
}

/// The storage behind a region. Tasks reach `value` only through the accesses they declared,
/// which the program's dependence analysis orders (see `Access::get`). `value` comes first,
/// so that a traced vertex's prefetch of a cell's first line fetches the start of its value.
#[repr(C)]
pub(crate) struct Cell<T> {
    pub(crate) value: UnsafeCell<T>,
    /// Held by a reducing task while it applies a value: the tasks of one group run at once
    /// and in no order; their applications are made exclusive.
    pub(crate) reducing: Mutex<()>,
}

// SAFETY: `value` is shared across threads only as the analysis allows: several `&T` at
// once (readers, hence `T: Sync`) or one `&mut T` (a writer, or a reducer while it holds
// `reducing`, hence `T: Send`), never both.
unsafe impl<T: Send + Sync> Sync for Cell<T> {}

/// A piece of data that tasks of one [`Program`](super::Program) share: created with
/// [`Program::region`](super::Program::region), accessed by tasks that declare it
/// ([`read`](super::read), [`write`](super::write), [`read_write`](super::read_write),
/// [`reduce`](super::reduce)), and read back by the program with
/// [`Program::with`](super::Program::with). Cloning a region clones the handle, not the data.
///
/// ```
/// use tactor::implicit::{read, write, Program};
/// use tactor::{Placement, Runtime};
///
/// let rt = Runtime::new(2).unwrap();
/// let mut p = Program::new(&rt);
/// let a = p.region(vec![1, 2, 3]);
/// let b = p.region(0);
/// p.launch(Placement::Any, (read(&a), write(&b)), |(a, b)| *b = a.iter().sum());
/// assert_eq!(p.with(&b, |b| *b).unwrap(), 6);
/// ```
pub struct Region<T> {
    pub(crate) key: RegionKey,
    pub(crate) cell: Arc<Cell<T>>,
}

impl<T> Clone for Region<T> {
    fn clone(&self) -> Self {
        Region {
            key: self.key,
            cell: self.cell.clone(),
        }
    }
}

impl<T> std::fmt::Debug for Region<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Region({})", self.key.index)
    }
}

impl<T> Region<T> {
    /// The region's number in its program (creation order), as errors name it.
    pub fn index(&self) -> u32 {
        self.key.index
    }
}

/// Data that never changes once made, which tasks read through [`constant`](super::constant)
/// accesses at no analysis cost: what a whole program's tasks share (parameters, a plan).
///
/// ```
/// use tactor::implicit::{constant, write, Program};
/// use tactor::{Placement, Runtime};
///
/// let rt = Runtime::new(2).unwrap();
/// let mut p = Program::new(&rt);
/// let scale = p.constant(3u64);
/// let out = p.region(0u64);
/// p.launch(Placement::Any, (constant(&scale), write(&out)), |(s, o)| *o = 14 * *s);
/// assert_eq!(p.with(&out, |o| *o).unwrap(), 42);
/// ```
pub struct Constant<T>(pub(crate) Region<T>);

impl<T> Clone for Constant<T> {
    fn clone(&self) -> Self {
        Constant(self.0.clone())
    }
}

impl<T> std::ops::Deref for Constant<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: nothing writes a constant: no access gives mutable use of it.
        unsafe { &*self.0.cell.value.get() }
    }
}

/// An associative (and commutative) update that tasks of one reduction group apply to a
/// region in any order: `apply(apply(d, a), b)` must equal `apply(apply(d, b), a)`.
///
/// ```
/// use tactor::implicit::{reduce, Program, Reduction};
/// use tactor::{Placement, Runtime};
///
/// struct Max;
/// impl Reduction<u64> for Max {
///     type Value = u64;
///     fn apply(data: &mut u64, value: u64) {
///         *data = (*data).max(value);
///     }
/// }
/// let rt = Runtime::new(2).unwrap();
/// let mut p = Program::new(&rt);
/// let m = p.region(0u64);
/// for i in 0..10u64 {
///     p.launch(Placement::Any, reduce::<Max, _>(&m), move |mut m| m.apply(i * 7 % 10));
/// }
/// assert_eq!(p.with(&m, |m| *m).unwrap(), 9);
/// ```
pub trait Reduction<T>: 'static {
    /// What one update contributes.
    type Value;
    /// Folds `value` into `data`.
    fn apply(data: &mut T, value: Self::Value);
    /// How partial results combine, for reductions whose tasks run on several ranks of a job
    /// ([`Replicated`](super::Replicated)); `None` (the default): this reduction stays on one
    /// rank.
    fn partials() -> Option<Partials<T>> {
        None
    }
}

/// How partial results of a reduction combine. Across the ranks of a job, each rank whose
/// tasks reduce into a region folds them into a partial result started from `identity`
/// (the rank that held the region's value folds into that value), and the partials are then
/// folded together with `fold`, in rank order on every rank, so every rank gets the same
/// bits.
///
/// ```
/// use tactor::implicit::{Partials, Reduction};
///
/// struct Max;
/// impl Reduction<f64> for Max {
///     type Value = f64;
///     fn apply(data: &mut f64, value: f64) {
///         *data = data.max(value);
///     }
///     fn partials() -> Option<Partials<f64>> {
///         Some(Partials { identity: || f64::NEG_INFINITY, fold: |a, b| *a = a.max(b) })
///     }
/// }
/// let p = Max::partials().unwrap();
/// let mut m = (p.identity)();
/// (p.fold)(&mut m, 2.5);
/// assert_eq!(m, 2.5);
/// ```
pub struct Partials<T> {
    /// The value that folds to no change.
    pub identity: fn() -> T,
    /// Folds the second partial result into the first.
    pub fold: fn(&mut T, T),
}

impl<T> Clone for Partials<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Partials<T> {}

/// Addition, for every `T: AddAssign`.
///
/// ```
/// use tactor::implicit::{reduce, Program, Sum};
/// use tactor::{Placement, Runtime};
///
/// let rt = Runtime::new(2).unwrap();
/// let mut p = Program::new(&rt);
/// let total = p.region(0u64);
/// for i in 1..=100u64 {
///     p.launch(Placement::Any, reduce::<Sum, _>(&total), move |mut t| t.apply(i));
/// }
/// assert_eq!(p.with(&total, |t| *t).unwrap(), 5050);
/// ```
pub struct Sum;

impl<T: std::ops::AddAssign + Default> Reduction<T> for Sum {
    type Value = T;
    fn apply(data: &mut T, value: T) {
        *data += value;
    }
    fn partials() -> Option<Partials<T>> {
        Some(Partials {
            identity: T::default,
            fold: |a, b| *a += b,
        })
    }
}

/// A reduction operator as the analysis compares them: two reductions join one group only
/// with the same operator.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct OpId {
    pub(crate) id: TypeId,
    pub(crate) name: &'static str,
    /// The operator's [`Partials`] for the region's type, boxed (`None`: it has none).
    pub(crate) partials: fn() -> Option<Box<dyn Any + Send>>,
}

impl PartialEq for OpId {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for OpId {}

impl OpId {
    /// An operator known only by its type (no partials).
    #[cfg(test)]
    pub(crate) fn of<R: 'static>() -> OpId {
        OpId {
            id: TypeId::of::<R>(),
            name: std::any::type_name::<R>(),
            partials: || None,
        }
    }

    /// The operator `R` reducing a region of `T`.
    pub(crate) fn reducing<R: Reduction<T>, T: 'static>() -> OpId {
        fn boxed<R: Reduction<T>, T: 'static>() -> Option<Box<dyn Any + Send>> {
            R::partials().map(|p| Box::new(p) as Box<dyn Any + Send>)
        }
        OpId {
            id: TypeId::of::<R>(),
            name: std::any::type_name::<R>(),
            partials: boxed::<R, T>,
        }
    }
}
