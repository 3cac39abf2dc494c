//! What a task declares it does to regions, and the references it gets for exactly that.
//!
//! A launch takes one [`Access`] value: a single access, a tuple of them, or a `Vec` of reads.
//! The task's closure receives the matching references — `&T` for a read, `&mut T` for a
//! write, a [`Reducer`] for a reduction — so a task cannot reach a region it did not declare,
//! nor write one it declared for reading: the types say so.

use super::region::{Cell, OpId, Reduction, Region, RegionKey};
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Mutex, PoisonError};

/// How a task uses a region.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
    ReadWrite,
    Reduce(OpId),
    Constant,
}

impl Mode {
    /// A small number per kind of access (the operator of a reduction aside).
    pub(crate) fn code(&self) -> u64 {
        match self {
            Mode::Read => 1,
            Mode::Write => 2,
            Mode::ReadWrite => 3,
            Mode::Reduce(_) => 4,
            Mode::Constant => 5,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Read => write!(f, "read"),
            Mode::Write => write!(f, "write"),
            Mode::ReadWrite => write!(f, "read-write"),
            Mode::Reduce(op) => write!(f, "reduce ({})", op.name),
            Mode::Constant => write!(f, "constant"),
        }
    }
}

/// One declared access: a region and how.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    pub(crate) region: RegionKey,
    pub(crate) mode: Mode,
}

mod sealed {
    pub trait Sealed {}
}

/// The accesses of one task: [`Read`], [`Write`], [`ReadWrite`], [`Reduce`], tuples of up to
/// eight of them, `()` for none, or a `Vec<Read<T>>` (a variable number of inputs).
/// Sealed: the references a task gets are safe only because the analysis saw the declaration.
pub trait Access: sealed::Sealed + Send + 'static {
    /// The references the task receives.
    type Ref<'a>;
    #[doc(hidden)]
    fn declare(&self, out: &mut Vec<Declared>);
    /// Whether the next entries of `recorded` are exactly what `declare` would push (a
    /// replay compares a launch with its recording without building its declaration).
    #[doc(hidden)]
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool;
    /// The task's references.
    ///
    /// # Safety
    /// The program's analysis ordered this task after every earlier conflicting access to
    /// these regions and before every later one, and the task is running now.
    #[doc(hidden)]
    unsafe fn get(&self) -> Self::Ref<'_>;
    /// Whether every list of reads this access points into ([`ReadList`]) is kept by
    /// `program`: checked before `declare` or `matches` reads them, since a list kept by a
    /// program that is gone no longer exists.
    #[doc(hidden)]
    fn kept_by(&self, program: u32) -> bool {
        let _ = program;
        true
    }
}

/// A region as an access holds it: no reference count, so that launching and finishing a
/// task touch no counter shared with other threads (measured: the counts of the regions a
/// task uses, incremented by the launching thread and decremented by the worker, were
/// cache-line transfers on every launch).
struct Target<T> {
    key: RegionKey,
    cell: NonNull<Cell<T>>,
}

// SAFETY: `cell` points into a region's storage, which the program that checks the key keeps
// alive until every task that may reach it has finished (`Program` holds an `Arc` of every
// cell and on drop waits for its tasks, or hands the cells to the runtime). The storage is
// reached only through `Access::get`, whose contract makes the access exclusive or shared as
// declared; `T: Send + Sync` covers both.
unsafe impl<T: Send + Sync> Send for Target<T> {}
// SAFETY: as for `Send`: a shared `&Target` gives the key and the address and nothing else
// (the storage is reached only through `Access::get`), so accesses can be kept in data that
// several threads read, such as a table of input lists that index-launch projections copy.
unsafe impl<T: Send + Sync> Sync for Target<T> {}

impl<T> Target<T> {
    fn of(r: &Region<T>) -> Target<T> {
        Target {
            key: r.key,
            cell: NonNull::from(&*r.cell),
        }
    }

    /// # Safety
    /// The cell is alive: see the `Send` argument above.
    unsafe fn cell(&self) -> &Cell<T> {
        // SAFETY: alive by this function's contract.
        unsafe { self.cell.as_ref() }
    }
}

/// Reads a region: the task gets `&T`. Made by [`read`]; `Copy`, so that a program may keep
/// lists of reads and launch copies of them (a copy declares the same read again).
pub struct Read<T>(Target<T>);

impl<T> Clone for Target<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Target<T> {}

impl<T> Clone for Read<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Read<T> {}
/// Overwrites a region: the task gets `&mut T` (its old contents, which it need not read).
/// Made by [`write()`].
pub struct Write<T>(Target<T>);
/// Reads and updates a region: the task gets `&mut T`. Made by [`read_write`].
pub struct ReadWrite<T>(Target<T>);
/// Folds values into a region with the reduction `R`: the task gets a [`Reducer`]. Made by
/// [`reduce`].
pub struct Reduce<R, T>(Target<T>, PhantomData<fn() -> R>);

/// Declares a read of `r`.
pub fn read<T>(r: &Region<T>) -> Read<T> {
    Read(Target::of(r))
}

/// Declares a write of `r`.
pub fn write<T>(r: &Region<T>) -> Write<T> {
    Write(Target::of(r))
}

/// Declares a read-write of `r`.
pub fn read_write<T>(r: &Region<T>) -> ReadWrite<T> {
    ReadWrite(Target::of(r))
}

/// Declares a reduction into `r` with `R`. Reductions with the same operator that follow
/// each other form a group whose tasks run in any order, one at a time.
pub fn reduce<R: Reduction<T>, T>(r: &Region<T>) -> Reduce<R, T> {
    Reduce(Target::of(r), PhantomData)
}

/// What a reducing task gets: it can only fold values in with the declared operator.
///
/// The tasks of one group run at the same time; only their [`Reducer::apply`] calls take
/// the group's lock, one at a time (a task that computes its value first, as a dot product
/// does, holds nobody up while it computes). It holds the region as a raw pointer, not a
/// `&mut T`: a reference inside a value passed to the task would stay protected until the
/// task returns, while another member of the group writes the region (Miri's tree borrows
/// saw it). The pointer is used only under the lock, in [`Reducer::apply`].
pub struct Reducer<'a, T, R> {
    data: *mut T,
    lock: &'a Mutex<()>,
    _op: PhantomData<fn() -> R>,
    _region: PhantomData<&'a mut T>,
}

impl<T, R: Reduction<T>> Reducer<'_, T, R> {
    /// Folds `value` into the region.
    pub fn apply(&mut self, value: R::Value) {
        // A reducer that panicked left a value the group's result is poisoned for anyway.
        let _exclusive = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: `data` points into the region's cell, alive for `'a`; only the tasks of
        // this group use the region now (the analysis ordered every other access before or
        // after them), and each of them reaches it only here, under the group's lock, held
        // until the reference ends with this call.
        R::apply(unsafe { &mut *self.data }, value);
    }
}

impl<T> sealed::Sealed for Read<T> {}
impl<T: Send + Sync + 'static> Access for Read<T> {
    type Ref<'a> = &'a T;
    fn declare(&self, out: &mut Vec<Declared>) {
        out.push(Declared {
            region: self.0.key,
            mode: Mode::Read,
        });
    }
    #[inline]
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        recorded.next().is_some_and(|d| {
            *d == Declared {
                region: self.0.key,
                mode: Mode::Read,
            }
        })
    }
    unsafe fn get(&self) -> &T {
        // SAFETY: by `get`'s contract the cell is alive and no writer of it runs now.
        unsafe { &*self.0.cell().value.get() }
    }
}

impl<T> sealed::Sealed for Write<T> {}
impl<T: Send + Sync + 'static> Access for Write<T> {
    type Ref<'a> = &'a mut T;
    fn declare(&self, out: &mut Vec<Declared>) {
        out.push(Declared {
            region: self.0.key,
            mode: Mode::Write,
        });
    }
    #[inline]
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        recorded.next().is_some_and(|d| {
            *d == Declared {
                region: self.0.key,
                mode: Mode::Write,
            }
        })
    }
    unsafe fn get(&self) -> &mut T {
        // SAFETY: by `get`'s contract the cell is alive and no other task uses it now, and
        // the program refuses a launch that declares it twice.
        unsafe { &mut *self.0.cell().value.get() }
    }
}

impl<T> sealed::Sealed for ReadWrite<T> {}
impl<T: Send + Sync + 'static> Access for ReadWrite<T> {
    type Ref<'a> = &'a mut T;
    fn declare(&self, out: &mut Vec<Declared>) {
        out.push(Declared {
            region: self.0.key,
            mode: Mode::ReadWrite,
        });
    }
    #[inline]
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        recorded.next().is_some_and(|d| {
            *d == Declared {
                region: self.0.key,
                mode: Mode::ReadWrite,
            }
        })
    }
    unsafe fn get(&self) -> &mut T {
        // SAFETY: as for `Write`.
        unsafe { &mut *self.0.cell().value.get() }
    }
}

impl<R, T> sealed::Sealed for Reduce<R, T> {}
impl<R: Reduction<T>, T: Send + Sync + 'static> Access for Reduce<R, T> {
    type Ref<'a> = Reducer<'a, T, R>;
    fn declare(&self, out: &mut Vec<Declared>) {
        out.push(Declared {
            region: self.0.key,
            mode: Mode::Reduce(OpId::reducing::<R, T>()),
        });
    }
    #[inline]
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        recorded.next().is_some_and(|d| {
            *d == Declared {
                region: self.0.key,
                mode: Mode::Reduce(OpId::reducing::<R, T>()),
            }
        })
    }
    unsafe fn get(&self) -> Reducer<'_, T, R> {
        // SAFETY: by `get`'s contract the cell is alive.
        let cell = unsafe { self.0.cell() };
        Reducer {
            // By `get`'s contract only the tasks of this reduction group may use the region
            // now, and they hold `reducing` while they use it (`apply`).
            data: cell.value.get(),
            lock: &cell.reducing,
            _op: PhantomData,
            _region: PhantomData,
        }
    }
}

/// The regions of a list of reads (`Vec<Read<T>>` or `SmallVec<[Read<T>; N]>`), read by one
/// task.
pub struct Inputs<'a, T>(&'a [Read<T>]);

impl<'a, T: Send + Sync + 'static> Inputs<'a, T> {
    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The `i`-th input.
    pub fn get(&self, i: usize) -> &'a T {
        // SAFETY: the task declared every region of the list for reading and runs now
        // (`Inputs` exists only inside the task).
        unsafe { self.0[i].get() }
    }
    /// The inputs in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &'a T> + '_ {
        (0..self.0.len()).map(|i| self.get(i))
    }
}

/// Declares every access of a list (of reads or of writes), in order.
fn declare_all<A: Access>(list: &[A], out: &mut Vec<Declared>) {
    for a in list {
        a.declare(out);
    }
}

/// Whether every access of a list matches the recording, in order.
fn match_all<A: Access>(list: &[A], recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
    list.iter().all(|a| a.matches(recorded))
}

impl<T> sealed::Sealed for Vec<Read<T>> {}
impl<T: Send + Sync + 'static> Access for Vec<Read<T>> {
    type Ref<'a> = Inputs<'a, T>;
    fn declare(&self, out: &mut Vec<Declared>) {
        declare_all(self, out);
    }
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        match_all(self, recorded)
    }
    unsafe fn get(&self) -> Inputs<'_, T> {
        Inputs(self)
    }
}

/// A list of reads that an index launch's projection hands its point without copying it: a
/// slice kept in the launch's program constant, made by [`ConstRef::reads`](super::ConstRef::reads).
/// The task gets the same [`Inputs`] as for a `Vec<Read<T>>`; the projection returns two
/// words instead of copying the list.
pub struct ReadList<T> {
    first: NonNull<Read<T>>,
    len: u32,
    /// The program whose constant holds the list.
    program: u32,
}

// SAFETY: a `ReadList` is made only from a slice borrowed from a constant of `program` (or a
// `'static` one): constants are never written and live until every task of their program has
// finished and the program is dropped, and every launch checks `kept_by` before it reads the
// slice, so the slice is read only while it is valid and unchanged. Its reads are
// `Send + Sync` for `T: Send + Sync`.
unsafe impl<T: Send + Sync> Send for ReadList<T> {}
// SAFETY: as for `Send`: only `&[Read<T>]` is ever given out.
unsafe impl<T: Send + Sync> Sync for ReadList<T> {}

impl<T> Clone for ReadList<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ReadList<T> {}

impl<T> ReadList<T> {
    /// # Safety
    /// `list` stays valid and unchanged while `program` exists (see the `Send` argument
    /// above).
    pub(crate) unsafe fn of(list: &[Read<T>], program: u32) -> ReadList<T> {
        ReadList {
            first: NonNull::from(list).cast(),
            len: u32::try_from(list.len()).expect("lists of fewer than 2^32 reads"),
            program,
        }
    }

    /// Called only after `kept_by` held for the program that launches it (see `Send`).
    fn slice(&self) -> &[Read<T>] {
        // SAFETY: `first` and `len` come from a slice that lives as long as its program,
        // which exists (checked by the launch, `kept_by`).
        unsafe { std::slice::from_raw_parts(self.first.as_ptr(), self.len as usize) }
    }
}

impl<T> sealed::Sealed for ReadList<T> {}
impl<T: Send + Sync + 'static> Access for ReadList<T> {
    type Ref<'a> = Inputs<'a, T>;
    fn declare(&self, out: &mut Vec<Declared>) {
        declare_all(self.slice(), out);
    }
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        match_all(self.slice(), recorded)
    }
    unsafe fn get(&self) -> Inputs<'_, T> {
        Inputs(self.slice())
    }
    fn kept_by(&self, program: u32) -> bool {
        self.program == program
    }
}

/// A list of reads kept inline up to `N` (no allocation per launch for the common case).
impl<T, const N: usize> sealed::Sealed for smallvec::SmallVec<[Read<T>; N]> {}
impl<T: Send + Sync + 'static, const N: usize> Access for smallvec::SmallVec<[Read<T>; N]> {
    type Ref<'a> = Inputs<'a, T>;
    fn declare(&self, out: &mut Vec<Declared>) {
        declare_all(self, out);
    }
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        match_all(self, recorded)
    }
    unsafe fn get(&self) -> Inputs<'_, T> {
        Inputs(self)
    }
}

/// The regions of a list of writes (`Vec<Write<T>>`), written by one task: each is a
/// distinct region (the program refuses a launch that names one twice), so each may be
/// borrowed mutably on its own.
pub struct Outputs<'a, T>(&'a [Write<T>]);

impl<T: Send + Sync + 'static> Outputs<'_, T> {
    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The `i`-th output, for writing.
    pub fn get_mut(&mut self, i: usize) -> &mut T {
        // SAFETY: the task declared every region of the list for writing and runs now; the
        // regions are distinct (`check_distinct`), and `&mut self` keeps this borrow the only
        // one taken through the list.
        unsafe { self.0[i].get() }
    }
}

impl<T> sealed::Sealed for Vec<Write<T>> {}
impl<T: Send + Sync + 'static> Access for Vec<Write<T>> {
    type Ref<'a> = Outputs<'a, T>;
    fn declare(&self, out: &mut Vec<Declared>) {
        declare_all(self, out);
    }
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        match_all(self, recorded)
    }
    unsafe fn get(&self) -> Outputs<'_, T> {
        Outputs(self)
    }
}

/// Reads data that never changes after it was made ([`Program::constant`](super::Program::constant)):
/// the task gets `&T`, and the analysis has nothing to order. Made by [`constant`].
pub struct Const<T>(Target<T>);

/// Declares a use of the constant `c`.
pub fn constant<T>(c: &super::region::Constant<T>) -> Const<T> {
    Const(Target::of(&c.0))
}

impl<T> sealed::Sealed for Const<T> {}
impl<T: Send + Sync + 'static> Access for Const<T> {
    type Ref<'a> = &'a T;
    fn declare(&self, out: &mut Vec<Declared>) {
        out.push(Declared {
            region: self.0.key,
            mode: Mode::Constant,
        });
    }
    #[inline]
    fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
        recorded.next().is_some_and(|d| {
            *d == Declared {
                region: self.0.key,
                mode: Mode::Constant,
            }
        })
    }
    unsafe fn get(&self) -> &T {
        // SAFETY: the cell is alive by `get`'s contract, and nothing ever writes a constant
        // (there is no access that would).
        unsafe { &*self.0.cell().value.get() }
    }
}

impl sealed::Sealed for () {}
impl Access for () {
    type Ref<'a> = ();
    fn declare(&self, _: &mut Vec<Declared>) {}
    fn matches(&self, _: &mut std::slice::Iter<'_, Declared>) -> bool {
        true
    }
    unsafe fn get(&self) {}
}

macro_rules! tuple_access {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: Access),+> sealed::Sealed for ($($name,)+) {}
        impl<$($name: Access),+> Access for ($($name,)+) {
            type Ref<'a> = ($($name::Ref<'a>,)+);
            fn declare(&self, out: &mut Vec<Declared>) {
                $(self.$idx.declare(out);)+
            }
            #[inline]
            fn matches(&self, recorded: &mut std::slice::Iter<'_, Declared>) -> bool {
                $(self.$idx.matches(recorded))&&+
            }
            unsafe fn get(&self) -> Self::Ref<'_> {
                // SAFETY: the tuple's accesses were declared together, under one contract.
                unsafe { ($(self.$idx.get(),)+) }
            }
            fn kept_by(&self, program: u32) -> bool {
                $(self.$idx.kept_by(program))&&+
            }
        }
    };
}

tuple_access!(A 0);
tuple_access!(A 0, B 1);
tuple_access!(A 0, B 1, C 2);
tuple_access!(A 0, B 1, C 2, D 3);
tuple_access!(A 0, B 1, C 2, D 3, E 4);
tuple_access!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_access!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_access!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// Refuses a launch that declares a region twice unless both are reads: `&mut T` beside
/// another reference to the same `T` would be undefined behaviour, two reducers would
/// deadlock on the group's lock.
pub(crate) fn check_distinct(declared: &[Declared]) -> Result<(), (u32, Mode, Mode)> {
    let shared = |m: Mode| matches!(m, Mode::Read | Mode::Constant);
    let clash =
        |a: &Declared, b: &Declared| a.region == b.region && !(shared(a.mode) && shared(b.mode));
    if declared.len() <= 16 {
        for (i, a) in declared.iter().enumerate() {
            if let Some(b) = declared[i + 1..].iter().find(|b| clash(a, b)) {
                return Err((a.region.index, a.mode, b.mode));
            }
        }
        return Ok(());
    }
    let mut sorted: Vec<Declared> = declared.to_vec();
    sorted.sort_by_key(|d| (d.region.program, d.region.index, !shared(d.mode)));
    match sorted.windows(2).find(|w| clash(&w[0], &w[1])) {
        Some(w) => Err((w[0].region.index, w[0].mode, w[1].mode)),
        None => Ok(()),
    }
}
