//! The other cores: started through the board's boot protocol (`boards.rs` [`Smp`]: PSCI
//! `CPU_ON`, or the Raspberry Pi spin table plus a release of the cores QEMU started in the
//! boot stub, see `boot.rs`), each with
//! its own stack and kernel scratch from this image's static layout (the memory budget shows
//! them), its FP/SIMD, SVE and SME enabled at EL1 with core 0's vector lengths, and parked in
//! the engine's [`SpinTeam`] (`WFE` between jobs) for the rest of the run.
//!
//! [`CORES`] is fixed per image by `cargo xtask qemu|deploy --smp N` (generated config); with
//! one core nothing here reserves memory and the engine runs as before.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use aarch64_rt::Stack;
use ptera::linalg::gemm::GEMM_SCRATCH_F32;
use ptera::parallel::spin::{SpinTeam, SPIN_MIN_WORK};

use crate::board::table::Smp;
use crate::board::BOARD;
pub use crate::model::CORES;

/// Pages (4 KiB) of each secondary core's stack: a job's frames (GEMM driver and micro-kernel,
/// an 8 KiB edge tile) stay far below.
pub const SECONDARY_STACK_PAGES: usize = 16;

static TEAM: SpinTeam = SpinTeam::new(SPIN_MIN_WORK);

/// Cores that get a scratch area: none on a one-core image (the team is not used there).
const SCRATCH_CORES: usize = if CORES > 1 { CORES } else { 0 };

#[repr(C, align(64))]
struct Scratch(UnsafeCell<[[f32; GEMM_SCRATCH_F32]; SCRATCH_CORES]>);

/// A core's stack with an unmapped page below it (`mmu`): an overflow faults there instead of
/// running into the neighbouring core's stack.
#[repr(C, align(4096))]
struct GuardedStack {
    guard: [u8; 4096],
    stack: Stack<SECONDARY_STACK_PAGES>,
}

#[repr(C, align(4096))]
struct Stacks(UnsafeCell<[GuardedStack; CORES - 1]>);

// SAFETY: reached only through `start`, which runs once (STARTED) and hands each core its own
// element.
unsafe impl Sync for Scratch {}
// SAFETY: as above.
unsafe impl Sync for Stacks {}

static SCRATCH: Scratch = Scratch(UnsafeCell::new([[0.0; GEMM_SCRATCH_F32]; SCRATCH_CORES]));
static STACKS: Stacks = Stacks(UnsafeCell::new(
    [const {
        GuardedStack {
            guard: [0; 4096],
            stack: Stack::new(),
        }
    }; CORES - 1],
));

/// Core `index`'s (1..CORES) guarded stack: its guard page and stack, as addresses.
fn stack_of(index: usize) -> (usize, *mut Stack<SECONDARY_STACK_PAGES>) {
    // In bounds for 1 <= index < CORES (callers); only addresses are formed here.
    let slot = STACKS
        .0
        .get()
        .cast::<GuardedStack>()
        .wrapping_add(index - 1);
    // SAFETY: `slot` points into STACKS (index - 1 < CORES - 1); taking a field's address
    // reads nothing.
    let stack = unsafe { &raw mut (*slot).stack };
    (slot as usize, stack)
}

/// Names of the other cores' stacks and guard pages, for fault reports (`mmu`).
const STACK_NAMES: [(&str, &str); 8] = [
    ("", ""),
    ("core 1's stack", "the guard page below core 1's stack"),
    ("core 2's stack", "the guard page below core 2's stack"),
    ("core 3's stack", "the guard page below core 3's stack"),
    ("core 4's stack", "the guard page below core 4's stack"),
    ("core 5's stack", "the guard page below core 5's stack"),
    ("core 6's stack", "the guard page below core 6's stack"),
    ("core 7's stack", "the guard page below core 7's stack"),
];

/// The other cores' stacks and their guard pages, for the page tables (`mmu`).
pub fn stack_regions() -> impl Iterator<Item = crate::mmu::Region> {
    use crate::mmu::{Region, Rights};
    (1..CORES).flat_map(|index| {
        let (guard, stack) = stack_of(index);
        let (name, guard_name) = STACK_NAMES
            .get(index)
            .copied()
            .unwrap_or(("a core's stack", "a stack's guard page"));
        let end = stack as usize + core::mem::size_of::<Stack<SECONDARY_STACK_PAGES>>();
        [
            Region {
                begin: guard,
                end: stack as usize,
                rights: Rights::Guard,
                what: guard_name,
            },
            Region {
                begin: stack as usize,
                end,
                rights: Rights::ReadWrite,
                what: name,
            },
        ]
    })
}
static STARTED: AtomicBool = AtomicBool::new(false);

/// Each released spin-table core's scratch (set by core 0 before the release).
static SECONDARY_SCRATCH: [AtomicPtr<f32>; crate::boot::MAX_SECONDARY] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; crate::boot::MAX_SECONDARY];

/// A released spin-table core (from the boot stub): FP/SVE/SME like core 0, then serve the team
/// with the scratch core 0 set aside for it.
pub fn secondary(index: usize) {
    let Some(slot) = SECONDARY_SCRATCH.get(index).filter(|_| index < CORES) else {
        return; // not a core of this image: park
    };
    crate::boot::enter_core(index);
    // Released together with the others, a core waits for core 0 to hand it its scratch
    // (in core order, each followed by an event).
    let scratch = loop {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            break p;
        }
        // SAFETY: WFE only waits for an event; it touches no memory.
        unsafe { core::arch::asm!("wfe", options(nomem, nostack, preserves_flags)) };
    };
    crate::cpu::enable_simd();
    // SAFETY: core 0 stored a pointer to this core's own GEMM_SCRATCH_F32 floats of SCRATCH
    // (handed out once, in `start`) before releasing it; no other core uses them.
    let scratch = unsafe { core::slice::from_raw_parts_mut(scratch, GEMM_SCRATCH_F32) };
    TEAM.serve(index, scratch)
}

/// Cleans the cache line of `addr` to memory, for a core that reads it with its MMU off.
fn clean_to_memory(addr: usize) {
    // SAFETY: DC CIVAC on a mapped address only writes back and invalidates its cache line.
    unsafe { core::arch::asm!("dc civac, {}", "dsb sy", in(reg) addr, options(nostack)) };
}

/// Logs that the board refused to start core `index`; the forward then runs on the cores
/// before it.
fn not_started(index: usize, e: &impl core::fmt::Debug) {
    defmt::warn!(
        "core {=usize} did not start ({}): running on {=usize} core(s)",
        index,
        defmt::Debug2Format(e),
        index
    );
}

/// Starts cores 1 .. [`CORES`] and waits until each has joined the team; returns the team and
/// the cores online (fewer than asked when the board refuses one: logged). `None` on a
/// one-core image.
pub fn start() -> Option<(&'static SpinTeam, usize)> {
    if CORES < 2 {
        return None;
    }
    assert!(
        !STARTED.swap(true, Ordering::Relaxed),
        "secondary cores started twice"
    );
    // SAFETY: STARTED makes this the only reference ever made to the scratch array.
    let scratch: &'static mut [[f32; GEMM_SCRATCH_F32]; SCRATCH_CORES] =
        unsafe { &mut *SCRATCH.0.get() };
    let (first, mut rest) = scratch.split_at_mut(1);
    TEAM.primary(&mut first[0]);
    // Empty on a one-core image (CORES = 1), which returned above.
    #[allow(clippy::reversed_empty_ranges)]
    for index in 1..CORES {
        let (mine, others) = rest.split_at_mut(1);
        rest = others;
        let mine: &'static mut [f32] = &mut mine[0];
        // Each core gets its own stack.
        let (_, stack) = stack_of(index);
        // Spin-table boards, and PSCI through SMC (a TF-A, which starts the core at the
        // highest non-secure level, EL2 where it exists): the core enters at `ptera_boot`,
        // which takes it down to EL1 like core 0, and then its stack from
        // `ptera_secondary_sp` (`boot.rs`).
        let via_boot_stub = match BOARD.smp {
            Smp::SpinTable { release } => Some(release.get(index - 1).copied()),
            Smp::Psci { smc: true } => Some(None),
            _ => None,
        };
        if let Some(spin_slot) = via_boot_stub {
            let Some(slot) = SECONDARY_SCRATCH.get(index) else {
                defmt::warn!("core {=usize}: the boot stub has no slot for it", index);
                break;
            };
            // Every secondary core's stack before the first release: QEMU's raspi machines
            // hold all of them in the boot stub, and the go flag releases them together.
            if index == 1 {
                for (i, sp) in crate::boot::ptera_secondary_sp
                    .iter()
                    .enumerate()
                    .take(CORES)
                    .skip(1)
                {
                    let end = stack_of(i).1.wrapping_add(1);
                    sp.store(end as u64, Ordering::Release);
                }
            }
            slot.store(mine.as_mut_ptr(), Ordering::Release);
            extern "C" {
                fn ptera_boot();
            }
            let entry = ptera_boot as *const () as u64;
            crate::boot::ptera_secondary_go.store(1, Ordering::Release);
            clean_to_memory((&raw const crate::boot::ptera_secondary_go) as usize);
            match spin_slot {
                Some(addr) => {
                    // SAFETY: the board's spin-table slot for this core (low RAM, mapped
                    // Normal by the board table), read by the boot firmware's waiting core
                    // with its MMU off.
                    unsafe { core::ptr::write_volatile(addr as *mut u64, entry) };
                    clean_to_memory(addr as usize);
                    // SAFETY: SEV wakes the waiting cores; it touches no memory.
                    unsafe { core::arch::asm!("sev", options(nomem, nostack, preserves_flags)) };
                }
                None => {
                    if let Err(e) = smccc::psci::cpu_on::<smccc::Smc>(index as u64, entry, 0) {
                        not_started(index, &e);
                        break;
                    }
                }
            }
            if !wait_joined(index) {
                return Some((&TEAM, TEAM.online()));
            }
            continue;
        }
        let entry = move || {
            crate::boot::enter_core(index);
            crate::cpu::enable_simd();
            let scratch = mine;
            TEAM.serve(index, scratch)
        };
        let mpidr = index as u64;
        let Smp::Psci { smc: false } = BOARD.smp else {
            break;
        };
        // SAFETY: `stack` is this core's own static stack, mapped Normal in the initial page
        // table that the started core also uses, and touched by nobody else.
        let started = unsafe {
            aarch64_rt::start_core::<smccc::Hvc, _, SECONDARY_STACK_PAGES>(mpidr, stack, entry)
        };
        if let Err(e) = started {
            not_started(index, &e);
            break;
        }
        if !wait_joined(index) {
            return Some((&TEAM, TEAM.online()));
        }
    }
    Some((&TEAM, TEAM.online()))
}

/// Waits until core `index` has joined. It does within a few thousand instructions; a core
/// that never does is a board fault, reported rather than waited for forever.
fn wait_joined(index: usize) -> bool {
    let mut spins = 0u64;
    while TEAM.online() <= index {
        spins += 1;
        if spins > 100_000_000 {
            defmt::warn!("core {=usize} started but never joined", index);
            return false;
        }
        core::hint::spin_loop();
    }
    true
}
