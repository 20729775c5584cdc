//! [`SpinTeam`]: a static, allocation-free team for bare metal.
//!
//! Core 0 (the one that runs the engine) publishes a job by storing a pointer to it, the number
//! of taking-part cores and a new generation number (one atomic word, the ticket), then sends an event (`SEV`). Every other
//! core waits in [`SpinTeam::serve`] with `WFE` until the generation changes, runs its part if
//! its index is below the part count, counts itself done and sends an event; core 0 runs part 0
//! and then waits (`WFE`) until the done count reaches the part count. The generation number is
//! the barrier's sense: a core that saw generation `g` only ever waits for a different one.
//!
//! Memory ordering: the job pointer, part count and reset done count are stored before the
//! generation with release ordering, and read after an acquire load of it; each core's
//! writes (its output columns or rows) happen before its release increment of the done count,
//! which core 0 reads with acquire before it returns. On AArch64 the atomics need the memory
//! to be Normal, inner shareable and cacheable on every core (the firmware's page tables map
//! RAM so, and secondary cores start with the MMU on).
//!
//! Off AArch64 (host tests drive it with threads) `WFE`/`SEV` become spin-loop hints.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use super::{Core, Job, Team, MAX_CORES};

/// Default [`Team::min_work`] of a spin team, in multiply-adds (or element operations) per
/// part. A split job costs each core about 150 instructions (publishing the job, the wake-up,
/// the part's own setup, the join; measured under `qemu --icount --smp 4`: lowering this from
/// 4,096 to 512 added 26 split jobs and 15 K instructions over four cores to a GPT-2 forward),
/// so a part of 512 multiply-adds (about 130 Neon instructions) already shortens the critical
/// path. Counted in instructions; on hardware the latency of waking a core from `WFE` may
/// ask for a larger value.
pub const SPIN_MIN_WORK: usize = 512;

/// Low bits of the ticket that hold the part count.
const PARTS_BITS: u32 = 8;
const _: () = assert!(super::MAX_CORES < 1 << PARTS_BITS);

/// A team of up to [`MAX_CORES`] cores that share memory, for `no_std` (see the module docs).
/// Lives in a `static`; cores join with [`SpinTeam::primary`] (core 0) and
/// [`SpinTeam::serve`] (the others).
pub struct SpinTeam {
    /// Cores that joined (core 0 included), i.e. the team's size.
    online: AtomicUsize,
    /// The current job's generation (high bits) and part count (low [`PARTS_BITS`] bits),
    /// published together so that a core never pairs one job's count with another's number.
    ticket: AtomicUsize,
    done: AtomicUsize,
    /// Thin pointer to a `&Job` on core 0's stack while a job runs.
    job: AtomicPtr<()>,
    /// A job is being run (jobs never overlap; a job must not start another).
    busy: AtomicBool,
    /// Each core's scratch (pointer, floats), written once when it joins.
    scratch: [Slot; MAX_CORES],
    /// The smallest scratch of the cores that joined (lowered before each joins): what
    /// [`Team::scratch_f32`] reports, asked once per split product.
    scratch_min: AtomicUsize,
    min_work: usize,
}

struct Slot {
    ptr: UnsafeCell<*mut f32>,
    len: UnsafeCell<usize>,
}

// SAFETY: every slot is written only by the core that joins with its index, before that core
// publishes itself through `online` (release); it is read afterwards only by the same core
// (its own scratch), and the minimum length by core 0 after an acquire load of `online`.
// The other fields are atomics.
unsafe impl Sync for SpinTeam {}

impl SpinTeam {
    /// An empty team (no core has joined yet): a `const` for a `static`.
    pub const fn new(min_work: usize) -> SpinTeam {
        SpinTeam {
            online: AtomicUsize::new(0),
            ticket: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            job: AtomicPtr::new(core::ptr::null_mut()),
            busy: AtomicBool::new(false),
            scratch: [const {
                Slot {
                    ptr: UnsafeCell::new(core::ptr::null_mut()),
                    len: UnsafeCell::new(0),
                }
            }; MAX_CORES],
            scratch_min: AtomicUsize::new(usize::MAX),
            min_work,
        }
    }

    /// Core 0 joins with its scratch: the team then has one core. Call once, before starting
    /// the secondary cores.
    pub fn primary(&self, scratch: &'static mut [f32]) {
        self.join(0, scratch);
    }

    /// Cores that have joined so far.
    pub fn online(&self) -> usize {
        self.online.load(Ordering::Acquire)
    }

    fn join(&self, index: usize, scratch: &'static mut [f32]) {
        assert!(index < MAX_CORES, "spin team: core index out of range");
        let slot = &self.scratch[index];
        // SAFETY: only this core writes slot `index`, once, before it is published (below).
        unsafe {
            *slot.ptr.get() = scratch.as_mut_ptr();
            *slot.len.get() = scratch.len();
        }
        self.scratch_min.fetch_min(scratch.len(), Ordering::AcqRel);
        let got = self.online.fetch_add(1, Ordering::AcqRel);
        assert!(got == index, "spin team: cores must join in index order");
        events::send();
    }

    /// Secondary core `index` (1, 2, ... in order: core `i` joins after core `i - 1`) joins
    /// with its own scratch and serves jobs forever.
    pub fn serve(&self, index: usize, scratch: &'static mut [f32]) -> ! {
        while self.online.load(Ordering::Acquire) != index {
            events::wait();
        }
        let mut seen = self.ticket.load(Ordering::Acquire);
        self.join(index, scratch);
        loop {
            let t = loop {
                let t = self.ticket.load(Ordering::Acquire);
                if t != seen {
                    break t;
                }
                events::wait();
            };
            seen = t;
            let parts = t & ((1 << PARTS_BITS) - 1);
            if index < parts {
                self.run_part(index, parts);
                self.done.fetch_add(1, Ordering::Release);
                events::send();
            }
        }
    }

    fn run_part(&self, index: usize, parts: usize) {
        let slot = &self.scratch[index];
        // SAFETY: the job pointer was stored by `run` before the generation this core acquired;
        // it points to a `&Job` on core 0's stack that stays alive until every part has counted
        // itself done (core 0 waits for that before `run` returns). Slot `index` is this
        // core's own scratch, written when it joined and used by no other core.
        unsafe {
            let job: &Job<'_> = *self.job.load(Ordering::Relaxed).cast::<&Job<'_>>();
            let scratch = core::slice::from_raw_parts_mut(*slot.ptr.get(), *slot.len.get());
            job(Core {
                index,
                parts,
                scratch,
            });
        }
    }
}

impl Team for SpinTeam {
    fn cores(&self) -> usize {
        self.online.load(Ordering::Acquire).max(1)
    }

    fn min_work(&self) -> usize {
        self.min_work
    }

    fn scratch_f32(&self) -> usize {
        // A core lowers the minimum before it counts itself online: never more than any
        // online core has (at most a joining core's smaller scratch, which is safe).
        if self.online.load(Ordering::Acquire) == 0 {
            return 0;
        }
        self.scratch_min.load(Ordering::Acquire)
    }

    fn busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    fn run(&self, parts: usize, job: &Job<'_>) {
        let online = self.online.load(Ordering::Acquire);
        assert!(online > 0, "spin team: core 0 has not joined");
        assert!(
            !self.busy.swap(true, Ordering::Acquire),
            "spin team: a job started another job"
        );
        let parts = parts.clamp(1, online);
        let job_ref: &Job<'_> = job;
        if parts > 1 {
            ptera_team_fork();
            self.job.store(
                (&raw const job_ref).cast::<()>().cast_mut(),
                Ordering::Relaxed,
            );
            self.done.store(0, Ordering::Relaxed);
            let ticket = self.ticket.load(Ordering::Relaxed);
            let next = ((ticket >> PARTS_BITS).wrapping_add(1) << PARTS_BITS) | parts;
            self.ticket.store(next, Ordering::Release);
            events::send();
        }
        let slot = &self.scratch[0];
        // SAFETY: slot 0 was filled by `primary` (online > 0) and is used only here, by the
        // one `run` in flight (`busy`).
        let scratch = unsafe { core::slice::from_raw_parts_mut(*slot.ptr.get(), *slot.len.get()) };
        job_ref(Core {
            index: 0,
            parts,
            scratch,
        });
        if parts > 1 {
            while self.done.load(Ordering::Acquire) < parts - 1 {
                events::wait();
            }
            self.job.store(core::ptr::null_mut(), Ordering::Relaxed);
            ptera_team_join();
        }
        self.busy.store(false, Ordering::Release);
    }
}

/// Called by core 0 right before it publishes a split job, and right after the last part
/// joined (by this team and by `threads::ThreadTeam`): marks that an execution trace finds by
/// symbol to measure each parallel step (`cargo xtask qemu --icount --smp N`,
/// `cargo xtask trace-cores`). They do nothing; their bodies differ (a distinct
/// constant each) so that the linker never folds them into one address.
///
/// Unmangled everywhere but the crate's own unit-test build: that binary also links the
/// library itself (the `std` dev-dependency), and two unmangled definitions collide whenever
/// the linker pulls both in (which depends on how the codegen units are cut, e.g. it happens
/// without incremental compilation).
#[cfg_attr(not(test), no_mangle)]
#[inline(never)]
pub extern "C" fn ptera_team_fork() {
    core::hint::black_box(0x464f_524b_u32); // "FORK"
}

/// See [`ptera_team_fork`].
#[cfg_attr(not(test), no_mangle)]
#[inline(never)]
pub extern "C" fn ptera_team_join() {
    core::hint::black_box(0x4a4f_494e_u32); // "JOIN"
}

/// `WFE`/`SEV` on AArch64, spin-loop hints elsewhere.
mod events {
    #[inline]
    pub(super) fn wait() {
        #[cfg(target_arch = "aarch64")]
        // SAFETY: WFE only waits for an event or interrupt; it touches no memory.
        unsafe {
            core::arch::asm!("wfe", options(nomem, nostack, preserves_flags))
        };
        #[cfg(not(target_arch = "aarch64"))]
        core::hint::spin_loop();
    }

    #[inline]
    pub(super) fn send() {
        #[cfg(target_arch = "aarch64")]
        // SAFETY: DSB completes earlier stores (the atomics) before SEV signals every core.
        unsafe {
            core::arch::asm!("dsb ish", "sev", options(nostack, preserves_flags))
        };
        #[cfg(not(target_arch = "aarch64"))]
        core::hint::spin_loop();
    }
}
