//! Work sharing across the cores of one machine: the one primitive every parallel kernel uses.
//!
//! A [`Team`] is a set of cores that run one job at a time: [`Team::run`] calls the job once on
//! each of the first `n` cores (the caller is core 0) and returns when every call has
//! returned (fork, then join). Each core owns a kernel scratch area for the duration of its
//! call ([`Core::scratch`]), so a split product packs its panels without sharing memory.
//!
//! Kernels do not take a team argument: the caller of a whole forward installs one for the
//! duration of a closure with [`scoped`], and a kernel asks for it with [`with_team`]. Without
//! an installed team (or with a team of one core) everything runs on the calling core, exactly
//! as before. Kernels split only on boundaries that leave every output element's reduction
//! order unchanged, so a forward gives bit-identical outputs on any number of cores.
//!
//! Two teams ship with the library:
//! - [`spin::SpinTeam`]: `no_std`, static, no allocation; atomics plus `SEV`/`WFE` on AArch64.
//!   Bare-metal firmware starts the secondary cores (PSCI `CPU_ON`, spin tables) and parks
//!   each in [`spin::SpinTeam::serve`].
//! - `threads::ThreadTeam` (`std` feature): a pool of OS threads created once and reused for
//!   every job.
//!
//! This module sits at the bottom of the crate's layers: it imports nothing from it.

pub mod spin;
#[cfg(any(test, feature = "std"))]
pub mod threads;

#[cfg(test)]
mod tests;

/// Most cores a team may have.
pub const MAX_CORES: usize = 16;

/// One core's view of a job: which part it is, and its own scratch.
pub struct Core<'s> {
    /// 0 for the calling core, then 1.. in a fixed order.
    pub index: usize,
    /// Cores taking part in this job (the job's parts are `0..parts`).
    pub parts: usize,
    /// This core's kernel scratch, exclusive for the call ([`Team::scratch_f32`] floats).
    pub scratch: &'s mut [f32],
}

/// A job: called once per taking-part core, concurrently.
pub type Job<'a> = dyn for<'s> Fn(Core<'s>) + Sync + 'a;

/// A set of cores that runs jobs (see the module documentation).
pub trait Team: Sync {
    /// Cores available, the caller included (at least 1).
    fn cores(&self) -> usize;
    /// Multiply-adds (or equivalent element operations) per core below which splitting a job
    /// costs more than it saves on this team (fork, wake-up and join).
    fn min_work(&self) -> usize;
    /// Floats of each core's scratch.
    fn scratch_f32(&self) -> usize;
    /// Runs `job` on cores `0..parts` (`parts` clamped to `1..=cores()`), the caller as core
    /// 0, and returns when every call has returned. Jobs of one team never overlap: a second
    /// caller waits. A job must not call `run` again (kernels inside a job see no team:
    /// [`with_team`] checks [`Team::busy`]).
    fn run(&self, parts: usize, job: &Job<'_>);
    /// A job is running: kernels called from inside it must not split again.
    fn busy(&self) -> bool;
}

/// How many parts a job of `units` independent pieces and `work` multiply-adds should be cut
/// into on `team`: at most one per core and per unit, at least `min_work` per part.
pub fn parts_for(team: &dyn Team, units: usize, work: usize) -> usize {
    let by_work = work / team.min_work().max(1);
    team.cores().min(units).min(by_work).max(1)
}

/// The parts [`try_split`] would cut `units` pieces of `work_per_unit` each into on the
/// installed team right now: 1 without a team, inside a job, or for too little work.
pub fn parts(units: usize, work_per_unit: usize) -> usize {
    with_team(|team| {
        team.map_or(1, |t| {
            parts_for(t, units, units.saturating_mul(work_per_unit))
        })
    })
}

/// Units `lo..hi` of part `i` when `units` are cut into `parts` nearly equal parts.
pub fn part_range(units: usize, parts: usize, i: usize) -> (usize, usize) {
    let parts = parts.max(1);
    (units * i / parts, units * (i + 1) / parts)
}

/// Runs `f` with `team` installed for this thread (bare metal: for the machine), restoring the
/// previous team afterwards, also when `f` unwinds.
pub fn scoped<R>(team: &dyn Team, f: impl FnOnce() -> R) -> R {
    let slot: &dyn Team = team;
    let new = (&raw const slot).cast::<()>();
    let prev = current::swap(new);
    struct Restore(*const ());
    impl Drop for Restore {
        fn drop(&mut self) {
            current::swap(self.0);
        }
    }
    let _restore = Restore(prev);
    f()
}

/// Calls `f` with the installed team, if any and if it is not already running a job (a kernel
/// called from inside a job runs on its own core).
pub fn with_team<R>(f: impl FnOnce(Option<&dyn Team>) -> R) -> R {
    let p = current::get();
    if p.is_null() {
        return f(None);
    }
    // SAFETY: a non-null pointer was stored by `scoped`: it points to `slot`, a `&dyn Team`
    // living on `scoped`'s stack frame, which outlives the call of `f` there, and `scoped`
    // restores the previous pointer before that frame goes away. The reference handed to `f`
    // cannot escape `f` (its lifetime is the closure call's).
    let team: &dyn Team = unsafe { *p.cast::<&dyn Team>() };
    f(Some(team).filter(|t| t.cores() > 1 && !t.busy()))
}

/// Runs `f(lo, hi, scratch)` over consecutive ranges of units covering `0..units`: split
/// across the installed team when `units × work_per_unit` pays for it (each core one range,
/// with its own scratch), else once on this core with `(0, units, None)`. `f` must give the
/// same result for a range whichever way the units are grouped (elementwise work, rows,
/// batches): then the split never changes a bit.
pub fn for_units(
    units: usize,
    work_per_unit: usize,
    f: impl Fn(usize, usize, Option<&mut [f32]>) + Sync,
) {
    if !try_split(units, work_per_unit, |lo, hi, scratch| {
        f(lo, hi, Some(scratch))
    }) {
        f(0, units, None);
    }
}

/// The split half of [`for_units`]: `false`, calling nothing, when the work stays on this core
/// (no team, a busy team, or too little work); else `f` ran on every range and `true`.
pub fn try_split(
    units: usize,
    work_per_unit: usize,
    f: impl Fn(usize, usize, &mut [f32]) + Sync,
) -> bool {
    with_team(|team| {
        let Some(team) = team else { return false };
        let parts = parts_for(team, units, units.saturating_mul(work_per_unit));
        if parts < 2 {
            return false;
        }
        team.run(parts, &|core| {
            let (lo, hi) = part_range(units, core.parts, core.index);
            if lo < hi {
                f(lo, hi, core.scratch);
            }
        });
        true
    })
}

/// The first error of the parts of one split call (later ones are dropped).
pub struct FirstError<E> {
    set: core::sync::atomic::AtomicBool,
    value: core::cell::UnsafeCell<Option<E>>,
}

impl<E> Default for FirstError<E> {
    fn default() -> Self {
        FirstError {
            set: core::sync::atomic::AtomicBool::new(false),
            value: core::cell::UnsafeCell::new(None),
        }
    }
}

impl<E> FirstError<E> {
    /// Keeps `e` if no part stored an error before.
    pub fn put(&self, e: E) {
        if !self.set.swap(true, core::sync::atomic::Ordering::AcqRel) {
            // SAFETY: the swap above lets exactly one caller through, once; `take` reads only
            // after the split call joined every part.
            unsafe { *self.value.get() = Some(e) };
        }
    }

    /// The stored error, if any (after the split call returned).
    pub fn take(self) -> Option<E> {
        self.value.into_inner()
    }

    /// `Err` with the stored error, if any.
    pub fn result(self) -> Result<(), E> {
        self.take().map_or(Ok(()), Err)
    }
}

// SAFETY: the value is written by one part at most (see `put`) and read after the join.
unsafe impl<E: Send> Sync for FirstError<E> {}

/// [`for_units`] over an output slice cut into units of `unit` elements (the last unit may be
/// shorter): `f(first_unit, chunk, scratch)` gets the elements of its units, disjoint from
/// every other part's.
pub fn for_chunks<T: Send>(
    out: &mut [T],
    unit: usize,
    work_per_unit: usize,
    f: impl Fn(usize, &mut [T], Option<&mut [f32]>) + Sync,
) {
    let unit = unit.max(1);
    let len = out.len();
    let shared = SharedSlice::new(out);
    for_units(len.div_ceil(unit), work_per_unit, |lo, hi, scratch| {
        // SAFETY: `for_units` hands out disjoint unit ranges, so these elements belong to
        // this call alone.
        let chunk = unsafe { shared.range(lo * unit, (hi * unit).min(len)) };
        f(lo, chunk, scratch)
    });
}

/// A mutable slice whose disjoint ranges the parts of one split call write.
pub struct SharedSlice<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: core::marker::PhantomData<&'a mut [T]>,
}

impl<'a, T> SharedSlice<'a, T> {
    pub fn new(s: &'a mut [T]) -> SharedSlice<'a, T> {
        SharedSlice {
            ptr: s.as_mut_ptr(),
            len: s.len(),
            _borrow: core::marker::PhantomData,
        }
    }

    /// The first element's address, for kernels that write strided tiles through raw
    /// pointers (each part only the elements it owns).
    pub fn as_mut_ptr(&self) -> *mut T {
        self.ptr
    }

    /// Elements `lo..hi` (clamped to the slice).
    ///
    /// # Safety
    /// No other live reference (from another call of `range` or elsewhere) reaches any of
    /// these elements while the returned slice is used.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn range(&self, lo: usize, hi: usize) -> &mut [T] {
        let hi = hi.min(self.len);
        let lo = lo.min(hi);
        // SAFETY: lo ≤ hi ≤ len elements of the borrowed slice; exclusivity per the contract.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(lo), hi - lo) }
    }
}

// SAFETY: parts reach disjoint elements only (the `range` contract) while the borrow `'a`
// lasts; `T: Send` because elements are written from other cores.
unsafe impl<T: Send> Sync for SharedSlice<'_, T> {}

/// The installed-team pointer: per thread with `std`, one for the machine without (bare metal
/// installs it on core 0 only; secondary cores never read it).
#[cfg(any(test, feature = "std"))]
mod current {
    use core::cell::Cell;

    std::thread_local! {
        static CURRENT: Cell<*const ()> = const { Cell::new(core::ptr::null()) };
    }

    pub(super) fn swap(p: *const ()) -> *const () {
        CURRENT.with(|c| c.replace(p))
    }

    pub(super) fn get() -> *const () {
        CURRENT.with(|c| c.get())
    }
}

#[cfg(not(any(test, feature = "std")))]
mod current {
    use core::sync::atomic::{AtomicPtr, Ordering};

    static CURRENT: AtomicPtr<()> = AtomicPtr::new(core::ptr::null_mut());

    pub(super) fn swap(p: *const ()) -> *const () {
        CURRENT.swap(p.cast_mut(), Ordering::AcqRel)
    }

    pub(super) fn get() -> *const () {
        CURRENT.load(Ordering::Acquire)
    }
}
