//! The other cores: started through the board's boot protocol (`boards.rs` [`Smp`]), each with
//! its own stack and kernel scratch from this image's static layout (the memory budget shows
//! them), its FP/SIMD, SVE and SME enabled at EL1 with core 0's vector lengths, and parked in
//! the engine's [`SpinTeam`] (`WFE` between jobs) for the rest of the run.
//!
//! [`CORES`] is fixed per image by `cargo xtask qemu|deploy --smp N` (generated config); with
//! one core nothing here reserves memory and the engine runs as before.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

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

#[repr(C, align(4096))]
struct Stacks(UnsafeCell<[Stack<SECONDARY_STACK_PAGES>; CORES - 1]>);

// SAFETY: reached only through `start`, which runs once (STARTED) and hands each core its own
// element.
unsafe impl Sync for Scratch {}
// SAFETY: as above.
unsafe impl Sync for Stacks {}

static SCRATCH: Scratch = Scratch(UnsafeCell::new([[0.0; GEMM_SCRATCH_F32]; SCRATCH_CORES]));
static STACKS: Stacks = Stacks(UnsafeCell::new([const { Stack::new() }; CORES - 1]));
static STARTED: AtomicBool = AtomicBool::new(false);

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
    for index in 1..CORES {
        let (mine, others) = rest.split_at_mut(1);
        rest = others;
        let mine: &'static mut [f32] = &mut mine[0];
        // In bounds: index - 1 < CORES - 1 elements; each core gets its own stack.
        let stack = STACKS
            .0
            .get()
            .cast::<Stack<SECONDARY_STACK_PAGES>>()
            .wrapping_add(index - 1);
        let entry = move || {
            crate::cpu::enable_simd();
            let scratch = mine;
            TEAM.serve(index, scratch)
        };
        let mpidr = index as u64;
        // SAFETY: `stack` is this core's own static stack, mapped Normal in the initial page
        // table that the started core also uses, and touched by nobody else.
        let started = unsafe {
            match BOARD.smp {
                Smp::Psci { smc: false } => {
                    aarch64_rt::start_core::<smccc::Hvc, _, SECONDARY_STACK_PAGES>(
                        mpidr, stack, entry,
                    )
                }
                Smp::Psci { smc: true } => {
                    aarch64_rt::start_core::<smccc::Smc, _, SECONDARY_STACK_PAGES>(
                        mpidr, stack, entry,
                    )
                }
                Smp::None => break,
            }
        };
        if let Err(e) = started {
            defmt::warn!(
                "core {=usize} did not start ({}): running on {=usize} core(s)",
                index,
                defmt::Debug2Format(&e),
                index
            );
            break;
        }
        // The core joins within a few thousand instructions; a core that never does is a
        // board fault, reported rather than waited for forever.
        let mut spins = 0u64;
        while TEAM.online() <= index {
            spins += 1;
            if spins > 100_000_000 {
                defmt::warn!("core {=usize} started but never joined", index);
                return Some((&TEAM, TEAM.online()));
            }
            core::hint::spin_loop();
        }
    }
    Some((&TEAM, TEAM.online()))
}

/// Marks around the measured forward (core 0), found by symbol in an execution trace
/// (`cargo xtask qemu --icount --smp N`); distinct bodies, so never folded into one address.
#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_mark_forward_begin() {
    core::hint::black_box(0x4245_4749_u32); // "BEGI"
}

#[no_mangle]
#[inline(never)]
pub extern "C" fn ptera_mark_forward_end() {
    core::hint::black_box(0x454e_4421_u32); // "END!"
}
