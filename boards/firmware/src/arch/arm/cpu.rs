//! CPU facts and controls at PL1 on ARMv7-A: the counter, FP/Neon, the stack pointer.
//!
//! The counter is the generic timer's virtual count (CNTVCT, frequency CNTFRQ) on cores that
//! have one (Cortex-A7, Cortex-A15: ID_PFR1.GenTimer); a Cortex-A9 has none, and the PMU's
//! cycle counter takes its place, at the frequency the board table gives
//! (`Board::counter_hz`).

use core::arch::asm;

pub use crate::console::Features;
use core::sync::atomic::{AtomicU32, Ordering};

/// Reads a CP15 register: `read_cp15!("op1, {}, CRn, CRm, op2")`.
macro_rules! read_cp15 {
    ($operands:literal) => {{
        let v: u32;
        // SAFETY: reading this identification/timer register at PL1 has no side effects.
        unsafe {
            asm!(
                concat!("mrc p15, ", $operands),
                out(reg) v,
                options(nomem, nostack, preserves_flags)
            )
        };
        v
    }};
}

/// Whether the core has the generic timer (ID_PFR1 bits 19:16).
fn has_generic_timer() -> bool {
    (read_cp15!("0, {}, c0, c1, 1") >> 16) & 0xf != 0
}

/// High words of the cycle counter, counted from PMOVSR's overflow flag (cores without the
/// generic timer).
static CYCLE_HIGH: AtomicU32 = AtomicU32::new(0);

/// Starts the PMU cycle counter (PMCR.E, every cycle, PMCNTENSET.C) where there is no generic
/// timer.
fn start_counter() {
    if has_generic_timer() {
        return;
    }
    // SAFETY: PMCR (E = 1, C = 1: reset the cycle count; D = 0: count every cycle), PMCNTENSET
    // (bit 31: the cycle counter) and PMOVSR (clear its overflow flag) only control the
    // performance monitors, which nothing else in the firmware uses.
    unsafe {
        asm!(
            "mcr p15, 0, {pmcr}, c9, c12, 0",
            "mcr p15, 0, {c}, c9, c12, 1",
            "mcr p15, 0, {c}, c9, c12, 3",
            "isb",
            pmcr = in(reg) 0b101u32,
            c = in(reg) 1u32 << 31,
            options(nomem, nostack, preserves_flags)
        )
    };
}

/// The counter: CNTVCT, or on a core without the generic timer (Cortex-A9) the PMU cycle
/// counter widened to 64 bits (an overflow between two reads more than 2^32 cycles apart,
/// over 4 s, would be lost). Under QEMU with `-icount shift=0,sleep=off` both advance with
/// executed instructions.
#[inline(always)]
pub fn cntvct() -> u64 {
    if has_generic_timer() {
        let (lo, hi): (u32, u32);
        // SAFETY: CNTVCT is readable at PL1 (the boot code leaves CNTHCTL permissive); the ISB
        // keeps the read from being speculated ahead of earlier instructions.
        unsafe {
            asm!("isb", "mrrc p15, 1, {}, {}, c14", out(reg) lo, out(reg) hi,
                options(nostack, preserves_flags))
        };
        return (u64::from(hi) << 32) | u64::from(lo);
    }
    let (lo, overflow): (u32, u32);
    // SAFETY: reads PMCCNTR and PMOVSR, which `start_counter` set up; the ISB keeps the read
    // from being speculated ahead of earlier instructions.
    unsafe {
        asm!("isb", "mrc p15, 0, {}, c9, c13, 0", "mrc p15, 0, {}, c9, c12, 3",
            out(reg) lo, out(reg) overflow, options(nostack, preserves_flags))
    };
    if overflow & (1 << 31) != 0 {
        // SAFETY: clears the cycle counter's overflow flag (write one to clear).
        unsafe {
            asm!("mcr p15, 0, {}, c9, c12, 3", in(reg) 1u32 << 31,
                options(nomem, nostack, preserves_flags))
        };
        CYCLE_HIGH.fetch_add(1, Ordering::Relaxed);
        // The count wrapped after `lo` was read if it is small now: read again.
        return cntvct();
    }
    (u64::from(CYCLE_HIGH.load(Ordering::Relaxed)) << 32) | u64::from(lo)
}

pub fn cntfrq() -> u64 {
    if has_generic_timer() {
        u64::from(read_cp15!("0, {}, c14, c0, 0"))
    } else {
        crate::board::BOARD.counter_hz
    }
}

pub fn micros() -> u64 {
    let f = cntfrq().max(1);
    (u128::from(cntvct()) * 1_000_000 / u128::from(f)) as u64
}

/// FP and Neon are on (cortex-a-rt's start-up code sets CPACR and FPEXC.EN); starts the counter
/// where it needs starting and reports the core.
pub fn enable_simd() -> Features {
    start_counter();
    Features {
        el: 1,
        midr: u64::from(read_cp15!("0, {}, c0, c0, 0")),
        sve_vl_bits: 0,
        sme_svl_bits: 0,
    }
}

/// The current stack pointer.
#[inline(always)]
pub fn stack_pointer() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer only.
    unsafe { asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags)) };
    sp
}
