//! Reset path before aarch64-rt's `entry`, the exception handlers and the critical section.
//!
//! `ptera_boot` is the ELF entry and the first instruction of a flat image. QEMU's raspi machines
//! start all four cores there at EL3, the real Pi firmware and U-Boot start one core at EL2 (the
//! Pi's others wait in its spin table until `smp` points them here), QEMU `virt` starts at EL1.
//! The stub holds every core but core 0 until `smp` releases them (or forever on a one-core
//! image), then, on each core, from EL3 or EL2, configures
//! the higher levels so that nothing traps (AArch64 EL1, FP/SVE/SME not trapped, full vector
//! lengths allowed, EL1 may read the counters) and `eret`s to `entry` at EL1h with interrupts
//! masked. The firmware then always runs at EL1 and uses one set of registers (`el1` feature).

use aarch64_rt::{entry, exception_handlers, ExceptionHandlers, RegisterStateRef};

/// aarch64-rt's entry: MMU on with the initial table (`pagetable`), .bss zeroed, the boot stack
/// of [`crate::STACK_PAGES`] pages reserved and in use.
fn start(_x0: u64, _x1: u64, _x2: u64, _x3: u64) -> ! {
    crate::main()
}

use crate::STACK_PAGES;
entry!(start, STACK_PAGES);

core::arch::global_asm!(
    ".section .init.boot, \"ax\"",
    ".global ptera_boot",
    ".type ptera_boot, %function",
    "ptera_boot:",
    // Core 0 of cluster 0 continues (x20 = 0); every other core (x20 = 1) waits, with the MMU
    // off, until core 0 sets `ptera_secondary_go` (cleaned to memory) and then takes the same
    // way down to EL1, ending in `ptera_secondary_el1` instead of aarch64-rt's `entry`.
    "    mov x20, #0",
    "    mrs x9, mpidr_el1",
    "    and x9, x9, #0xffff",
    "    cbz x9, 1f",
    "    mov x20, #1",
    "    adrp x10, ptera_secondary_go",
    "    add x10, x10, :lo12:ptera_secondary_go",
    "0:  wfe",
    "    ldr x11, [x10]",
    "    cbz x11, 0b",
    "1:  mrs x9, CurrentEL",
    "    ubfx x9, x9, #2, #2",
    "    cmp x9, #3",
    "    b.eq 3f",
    "    cmp x9, #2",
    "    b.eq 2f",
    "    cbnz x20, ptera_secondary_el1",
    "    b entry",
    // ---- EL3 ----
    // SCR_EL3: NS, RES1[5:4], SMD (no SMC), HCE, RW (lower levels are AArch64).
    "3:  mov x10, #0x5b1",
    "    msr scr_el3, x10",
    // CPTR_EL3: TFP = 0; EZ (bit 8) / ESM (bit 12) set when SVE / SME exist.
    "    mov x10, #0",
    "    mrs x11, id_aa64pfr0_el1",
    "    ubfx x11, x11, #32, #4",
    "    cbz x11, 4f",
    "    orr x10, x10, #(1 << 8)",
    "4:  mrs x11, id_aa64pfr1_el1",
    "    ubfx x11, x11, #24, #4",
    "    cbz x11, 5f",
    "    orr x10, x10, #(1 << 12)",
    "5:  msr cptr_el3, x10",
    "    isb",
    // ZCR_EL3 / SMCR_EL3: allow the largest vector lengths below EL3.
    "    mov x11, #0xf",
    "    tbz x10, #8, 6f",
    "    msr S3_6_C1_C2_0, x11",
    "6:  orr x11, x11, #(1 << 31)",
    "    tbz x10, #12, 7f",
    "    msr S3_6_C1_C2_6, x11",
    "7:  mrs x11, id_aa64pfr0_el1",
    "    ubfx x11, x11, #8, #4",
    "    cbz x11, 8f",
    "    bl 9f",
    "8:  mov x10, #0x3c5",
    "    msr spsr_el3, x10",
    "    adr x10, entry",
    "    cbz x20, 14f",
    "    adr x10, ptera_secondary_el1",
    "14: msr elr_el3, x10",
    "    isb",
    "    eret",
    // ---- EL2 ----
    "2:  bl 9f",
    "    mov x10, #0x3c5",
    "    msr spsr_el2, x10",
    "    adr x10, entry",
    "    cbz x20, 15f",
    "    adr x10, ptera_secondary_el1",
    "15: msr elr_el2, x10",
    "    isb",
    "    eret",
    // ---- EL2 set-up for an EL1 guest (called from EL3 or EL2; uses x10, x11 only) ----
    // HCR_EL2.RW: EL1 is AArch64, no other traps or stage-2 translation.
    "9:  mov x10, #(1 << 31)",
    "    msr hcr_el2, x10",
    // EL1 may use the physical counter and timer; no virtual offset.
    "    mrs x10, cnthctl_el2",
    "    orr x10, x10, #3",
    "    msr cnthctl_el2, x10",
    "    msr cntvoff_el2, xzr",
    // CPTR_EL2 (E2H = 0): RES1 bits 13, 9, 7:0; TZ / TSM are RES1 when SVE / SME are absent.
    "    mov x10, #0x22ff",
    "    mrs x11, id_aa64pfr0_el1",
    "    ubfx x11, x11, #32, #4",
    "    cbnz x11, 10f",
    "    orr x10, x10, #(1 << 8)",
    "10: mrs x11, id_aa64pfr1_el1",
    "    ubfx x11, x11, #24, #4",
    "    cbnz x11, 11f",
    "    orr x10, x10, #(1 << 12)",
    "11: msr cptr_el2, x10",
    "    isb",
    "    mov x11, #0xf",
    "    tbnz x10, #8, 12f",
    "    msr S3_4_C1_C2_0, x11",
    "12: orr x11, x11, #(1 << 31)",
    "    tbnz x10, #12, 13f",
    "    msr S3_4_C1_C2_6, x11",
    // EL1 reads of MIDR/MPIDR return the virtualised copies: make them the real ones.
    "13: mrs x11, midr_el1",
    "    msr vpidr_el2, x11",
    "    mrs x11, mpidr_el1",
    "    msr vmpidr_el2, x11",
    // SCTLR_EL1: architectural RES1 bits, MMU and caches off until aarch64-rt enables them.
    "    movz x11, #0x0800",
    "    movk x11, #0x30d0, lsl #16",
    "    msr sctlr_el1, x11",
    "    ret",
    ".size ptera_boot, . - ptera_boot",
    "",
    // A released secondary core at EL1h, MMU off: the MMU on with the shared initial page
    // table (aarch64-rt's `enable_mmu`), FP not trapped, its own stack from
    // `ptera_secondary_sp[core]` (written by core 0 before the release; read with the MMU and
    // caches on, so coherent with core 0's writes), then `smp::ptera_secondary_main(core)`.
    ".global ptera_secondary_el1",
    ".type ptera_secondary_el1, %function",
    "ptera_secondary_el1:",
    "    bl enable_mmu",
    "    mrs x9, cpacr_el1",
    "    orr x9, x9, #(0x3 << 20)",
    "    msr cpacr_el1, x9",
    "    isb",
    "    mrs x19, mpidr_el1",
    "    and x19, x19, #0xff",
    "    adrp x10, ptera_secondary_sp",
    "    add x10, x10, :lo12:ptera_secondary_sp",
    "    cmp x19, #{max}",
    "    b.hs 1f",
    "    ldr x11, [x10, x19, lsl #3]",
    // A core this image does not use (no stack given) parks.
    "    cbz x11, 1f",
    "    mov sp, x11",
    "    mov x0, x19",
    "    b ptera_secondary_main",
    "1:  wfe",
    "    b 1b",
    ".size ptera_secondary_el1, . - ptera_secondary_el1",
    max = const MAX_SECONDARY,
);

/// Cores that get an exception stack (every core the image runs on).
#[cfg(not(feature = "gemm-bench"))]
const CORES: usize = crate::model::CORES;
#[cfg(feature = "gemm-bench")]
const CORES: usize = 1;

/// Bytes of each core's exception stack: the handler only formats one report line.
const EXCEPTION_STACK: usize = 8 * 1024;

#[repr(C, align(16))]
struct ExceptionStacks(core::cell::UnsafeCell<[[u8; EXCEPTION_STACK]; CORES]>);

// SAFETY: each core uses only its own element, and only as its SP_EL1 (see `enter_core`).
unsafe impl Sync for ExceptionStacks {}

#[link_section = ".stack.exception"]
static EXCEPTION_STACKS: ExceptionStacks =
    ExceptionStacks(core::cell::UnsafeCell::new([[0; EXCEPTION_STACK]; CORES]));

/// Puts this core (`core` < [`CORES`]) under the firmware's page tables (`mmu`) and moves its
/// code onto SP_EL0, so that an exception switches to SP_EL1 = the core's own exception stack:
/// a stack overflow into the guard page is then reported instead of faulting again on the
/// same stack. Call once per core, first thing, while the core still runs on SP_EL1.
pub fn enter_core(core: usize) {
    crate::mmu::install_on_this_core();
    if core >= CORES {
        return;
    }
    // In bounds (core < CORES); only an address is formed.
    let top = EXCEPTION_STACKS
        .0
        .get()
        .cast::<[u8; EXCEPTION_STACK]>()
        .wrapping_add(core + 1) as usize;
    // SAFETY: at EL1 with SPSel = 1 (aarch64-rt's entry, `start_core`, `ptera_secondary_el1`
    // all run on SP_EL1 and this runs once per core), SP_EL0 may be written. The current stack
    // pointer moves to SP_EL0 and stays the stack pointer (same value, SPSel = 0), so the
    // compiler's frames are untouched; SP_EL1 becomes the top of this core's own exception
    // stack, which nothing else uses.
    unsafe {
        core::arch::asm!(
            "mov {t}, sp",
            "msr sp_el0, {t}",
            "mov sp, {top}",
            "msr spsel, #0",
            t = out(reg) _,
            top = in(reg) top,
            options(nomem),
        );
    }
}

/// Exceptions at EL1 are bugs: report syndrome, address and the region it falls in (`mmu`),
/// then stop (non-zero exit on QEMU).
struct Exceptions;

/// The fault status code of an abort's syndrome, in words.
fn fault_kind(iss: u64) -> (&'static str, u64) {
    let fsc = iss & 0x3f;
    let kind = match fsc >> 2 {
        0b0001 => "translation fault (unmapped)",
        0b0010 => "access flag fault",
        0b0011 => "permission fault",
        0b0000 => "address size fault",
        _ => "fault",
    };
    (kind, fsc & 3)
}

fn fatal(kind: &str, regs: &RegisterStateRef) -> ! {
    let (esr, far, mpidr): (u64, u64, u64);
    // SAFETY: reading the EL1 syndrome, fault address and affinity registers has no side
    // effects.
    unsafe {
        core::arch::asm!(
            "mrs {}, esr_el1",
            "mrs {}, far_el1",
            "mrs {}, mpidr_el1",
            out(reg) esr,
            out(reg) far,
            out(reg) mpidr,
            options(nomem, nostack)
        );
    }
    let core = mpidr & 0xff;
    let ec = esr >> 26;
    let iss = esr & 0x1ff_ffff;
    let access = match ec {
        0x20 | 0x21 => Some("instruction fetch from"),
        0x24 | 0x25 if iss & (1 << 6) != 0 => Some("write to"),
        0x24 | 0x25 => Some("read of"),
        _ => None,
    };
    let Some(access) = access else {
        crate::console::text(format_args!(
            "{kind} exception at EL1 on core {core}: ESR {esr:#x} (EC {ec:#x}) ELR {:#x} \
             FAR {far:#x}",
            regs.elr
        ));
        crate::exit::exit(crate::console::Status::Exception as u32)
    };
    let (fault, level) = fault_kind(iss);
    let region = crate::mmu::describe(far as usize);
    let (what, rights) = match region {
        Some(r) => (r.what, r.rights.describe()),
        None => ("outside every region the firmware uses", "unmapped"),
    };
    let overflow = matches!(region, Some(r) if r.rights == crate::mmu::Rights::Guard);
    crate::console::text(format_args!(
        "{}{} at EL1 on core {core}: {access} {far:#x}, {fault} at level {level}: {what} \
         ({rights}); ESR {esr:#x} (EC {ec:#x}) ELR {:#x}",
        if overflow { "stack overflow: " } else { "" },
        if ec == 0x20 || ec == 0x21 {
            "instruction abort"
        } else {
            "data abort"
        },
        regs.elr
    ));
    crate::exit::exit(crate::console::Status::Exception as u32)
}

impl ExceptionHandlers for Exceptions {
    extern "C" fn sync_current(regs: RegisterStateRef) {
        fatal("synchronous", &regs)
    }
    extern "C" fn irq_current(regs: RegisterStateRef) {
        fatal("IRQ", &regs)
    }
    extern "C" fn fiq_current(regs: RegisterStateRef) {
        fatal("FIQ", &regs)
    }
    extern "C" fn serror_current(regs: RegisterStateRef) {
        fatal("SError", &regs)
    }
}

exception_handlers!(Exceptions);

/// Core 0 only, interrupts masked while held: save DAIF, mask IRQ and FIQ, restore on release.
/// The secondary cores (`smp`) run engine jobs only, which never allocate or log, so they never
/// enter a critical section.
struct DaifCriticalSection;
critical_section::set_impl!(DaifCriticalSection);

// SAFETY: only core 0 enters critical sections (see above); masking IRQ/FIQ excludes every other
// context there, and the saved DAIF value
// is restored exactly on release (nested sections restore in reverse order).
unsafe impl critical_section::Impl for DaifCriticalSection {
    unsafe fn acquire() -> u64 {
        let daif: u64;
        // SAFETY: reading DAIF and masking interrupts is always allowed at EL1. No `nomem`: the
        // asm must order memory accesses like a lock acquire.
        unsafe {
            core::arch::asm!("mrs {}, daif", "msr daifset, #3", out(reg) daif, options(nostack))
        };
        daif
    }

    unsafe fn release(daif: u64) {
        // SAFETY: restores the value saved by `acquire`.
        unsafe { core::arch::asm!("msr daif, {}", in(reg) daif, options(nostack)) };
    }
}

/// Non-zero once core 0 releases the secondary cores (`smp`). In `.data`, part of the loaded
/// image, so it reads 0 before core 0 runs even where RAM is not cleared; read by the waiting
/// cores with the MMU off, so core 0 cleans it to memory after writing.
#[no_mangle]
#[link_section = ".data.ptera_secondary_go"]
pub static ptera_secondary_go: core::sync::atomic::AtomicU64 =
    core::sync::atomic::AtomicU64::new(0);

/// Initial stack pointer of each core (index = MPIDR affinity 0), written by core 0 before the
/// release and read by `ptera_secondary_el1` with the MMU on.
#[no_mangle]
pub static ptera_secondary_sp: [core::sync::atomic::AtomicU64; MAX_SECONDARY] =
    [const { core::sync::atomic::AtomicU64::new(0) }; MAX_SECONDARY];

/// Cores (affinity 0 values) a spin-table board may release: the Pi boards have 4.
pub const MAX_SECONDARY: usize = 4;

/// Rust entry of a released secondary core (from `ptera_secondary_el1`, stack set, MMU on).
#[no_mangle]
extern "C" fn ptera_secondary_main(core: u64) -> ! {
    aarch64_rt::set_exception_vector();
    #[cfg(not(feature = "gemm-bench"))]
    crate::smp::secondary(core as usize);
    #[cfg(feature = "gemm-bench")]
    let _ = core;
    loop {
        // SAFETY: WFE only waits for an event; a core with nothing to do parks here.
        unsafe { core::arch::asm!("wfe", options(nomem, nostack, preserves_flags)) };
    }
}
