//! CPU facts and controls at EL1: generic timer, FP/SVE/SME access and vector lengths, stack use.

use core::arch::asm;

pub use crate::console::Features;

macro_rules! read_sysreg {
    ($reg:literal) => {{
        let v: u64;
        // SAFETY: reading this ID/timer/control register at EL1 has no side effects.
        unsafe { asm!(concat!("mrs {}, ", $reg), out(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
}

/// The virtual counter. Under QEMU with `-icount shift=0,sleep=off` one tick is one instruction.
#[inline(always)]
pub fn cntvct() -> u64 {
    let v: u64;
    // SAFETY: CNTVCT_EL0 is readable at EL1 (the boot stub leaves CNTHCTL_EL2 permissive); the
    // ISB keeps the read from being speculated ahead of earlier instructions.
    unsafe { asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nostack, preserves_flags)) };
    v
}

pub fn cntfrq() -> u64 {
    read_sysreg!("cntfrq_el0")
}

pub fn micros() -> u64 {
    let f = cntfrq().max(1);
    (u128::from(cntvct()) * 1_000_000 / u128::from(f)) as u64
}

/// Requested vector length: (LEN + 1) × 128 = 512 bits for SVE and SME, the widest the engine's
/// SVE2 and SME GEMM kernels are built for. A core with shorter vectors clamps to its own maximum
/// (SVE) or the largest power of two it implements (SME); the run reports the result.
const VL_LEN: u64 = 3;

/// Enables FP/Neon, SVE and SME at EL1 (CPACR_EL1 FPEN/ZEN/SMEN) and sets the vector lengths
/// (ZCR_EL1.LEN, SMCR_EL1.LEN = [`VL_LEN`]).
pub fn enable_simd() -> Features {
    enable_simd_len(VL_LEN)
}

/// [`enable_simd`] with vector lengths of (`len` + 1) × 128 bits requested (`len` ≤ 15; the
/// core clamps as described at [`VL_LEN`]). May be called again to change the lengths.
pub fn enable_simd_len(len: u64) -> Features {
    let len = len.min(15);
    let pfr0 = read_sysreg!("id_aa64pfr0_el1");
    let pfr1 = read_sysreg!("id_aa64pfr1_el1");
    let has_sve = (pfr0 >> 32) & 0xf != 0;
    let has_sme = (pfr1 >> 24) & 0xf != 0;
    let mut cpacr = read_sysreg!("cpacr_el1") | (3 << 20);
    if has_sve {
        cpacr |= 3 << 16;
    }
    if has_sme {
        cpacr |= 3 << 24;
    }
    // SAFETY: CPACR_EL1 only controls trapping of FP/SVE/SME instructions at EL1/EL0; the bits
    // set are implemented (checked through the ID registers above).
    unsafe { asm!("msr cpacr_el1, {}", "isb", in(reg) cpacr, options(nostack)) };
    let mut sve_vl_bits = 0;
    if has_sve {
        let vl: u64;
        // SAFETY: SVE is implemented and no longer trapped; ZCR_EL1 (S3_0_C1_C2_0) sets the
        // vector length, RDVL reads it back. No Z/P register state is live here.
        unsafe {
            asm!(
                ".arch_extension sve",
                "msr S3_0_C1_C2_0, {len}",
                "isb",
                "rdvl {vl}, #1",
                len = in(reg) len,
                vl = out(reg) vl,
                options(nostack),
            )
        };
        sve_vl_bits = (vl * 8) as u32;
    }
    let mut sme_svl_bits = 0;
    if has_sme {
        let svl: u64;
        // SAFETY: SME is implemented and no longer trapped; SMCR_EL1 (S3_0_C1_C2_6) sets the
        // streaming vector length (FA64 on), RDSVL reads it back without entering streaming mode.
        unsafe {
            asm!(
                ".arch_extension sme",
                "msr S3_0_C1_C2_6, {len}",
                "isb",
                "rdsvl {svl}, #1",
                len = in(reg) (1u64 << 31) | len,
                svl = out(reg) svl,
                options(nostack),
            )
        };
        sme_svl_bits = (svl * 8) as u32;
    }
    Features {
        el: ((read_sysreg!("CurrentEL") >> 2) & 3) as u32,
        midr: read_sysreg!("midr_el1"),
        sve_vl_bits,
        sme_svl_bits,
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
