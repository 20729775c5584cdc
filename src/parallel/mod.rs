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
    /// caller waits.
    fn run(&self, parts: usize, job: &Job<'_>);
}

/// How many parts a job of `units` independent pieces and `work` multiply-adds should be cut
/// into on `team`: at most one per core and per unit, at least `min_work` per part.
pub fn parts_for(team: &dyn Team, units: usize, work: usize) -> usize {
    let by_work = work / team.min_work().max(1);
    team.cores().min(units).min(by_work).max(1)
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

/// Calls `f` with the installed team, if any.
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
    f(Some(team))
}

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
