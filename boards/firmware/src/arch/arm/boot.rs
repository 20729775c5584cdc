//! Reset path of the 32-bit boards, the exception handlers and the critical section.
//!
//! cortex-a-rt provides the vector table (the first word of the image, `linker/sections-armv7.ld`),
//! the exception trampolines and `_default_start` (mode stacks from `_stack_top` down, FPU and
//! Neon access, `.bss` zeroed, `kmain` in System mode). The firmware supplies `_start`, which
//! runs first on reset and prepares what `_default_start` assumes:
//!
//! 0. Every core but core 0 (MPIDR affinity 0) parks in `WFE` for good.
//! 1. From Hyp mode (the Raspberry Pi firmware starts a Pi 2 there) it drops to Supervisor mode
//!    after letting PL1 use the FPU, Neon and the counters; interrupts stay masked.
//! 2. VBAR points at cortex-a-rt's vector table.
//! 3. With the MMU and data cache off, the data caches are cleaned and invalidated by set/way
//!    (what a boot loader left there reaches memory, nothing stale survives), the instruction
//!    cache, branch predictor and TLB are invalidated.
//! 4. The MMU goes on with the initial section table (`pagetable`: the board's memory map,
//!    RAM Normal write-back, peripherals Device), with data and instruction caches and branch
//!    prediction, and alignment checking off: from here on, like the AArch64 firmware, all Rust
//!    code runs on Normal memory where unaligned word accesses are allowed.
//!
//! The firmware always runs in System mode at PL1 and never takes interrupts; the other cores
//! of a multi-core SoC stay where the boot loader or QEMU holds them, or park here.

use core::arch::global_asm;

// Linked for its vector table, trampolines and `_default_start` (referenced by symbol only).
use cortex_a_rt as _;

global_asm!(
    ".section .init.start, \"ax\"",
    ".arm",
    ".arch armv7-a",
    ".arch_extension virt",
    ".arch_extension sec",
    ".global _start",
    ".type _start, %function",
    "_start:",
    // ---- Only core 0 goes on: QEMU's raspi2b starts all four cores here; the others park.
    "    mrc p15, 0, r0, c0, c0, 5",
    "    ands r0, r0, #0xff",
    "    beq 7f",
    "8:  wfe",
    "    b 8b",
    "7:",
    // ---- Hyp: hand PL1 the FPU/Neon (HCPTR TCP10/TCP11/TASE clear) and the physical and
    // virtual counters (CNTHCTL PL1PCTEN/PL1PCEN, CNTVOFF = 0), then ERET to SVC, A/I/F masked.
    "    mrs r0, cpsr",
    "    and r1, r0, #0x1f",
    "    cmp r1, #0x1a",
    "    bne 1f",
    "    mov r1, #0",
    "    mcr p15, 4, r1, c1, c1, 0",
    "    mrc p15, 4, r1, c1, c1, 2",
    "    bic r1, r1, #0xc00",
    "    bic r1, r1, #0x8000",
    "    mcr p15, 4, r1, c1, c1, 2",
    "    mrc p15, 0, r1, c0, c1, 1",
    "    tst r1, #0xf0000",
    "    beq 0f",
    "    mrc p15, 4, r1, c14, c1, 0",
    "    orr r1, r1, #3",
    "    mcr p15, 4, r1, c14, c1, 0",
    "    mov r1, #0",
    "    mcrr p15, 4, r1, r1, c14",
    "0:  mov r1, #0x1d3",
    "    msr spsr_hyp, r1",
    "    adr r1, 1f",
    "    msr elr_hyp, r1",
    "    eret",
    "1:  cpsid aif",
    // ---- Exceptions go to cortex-a-rt's vector table.
    "    ldr r0, =_vector_table",
    "    mcr p15, 0, r0, c12, c0, 0",
    // ---- MMU and data cache off while the caches and tables change.
    "    mrc p15, 0, r0, c1, c0, 0",
    "    bic r0, r0, #0x5",
    "    mcr p15, 0, r0, c1, c0, 0",
    "    isb",
    // ---- Clean and invalidate every data cache level up to the point of coherency, by set
    // and way (CLIDR, CCSIDR per level through CSSELR, DCCISW).
    "    mrc p15, 1, r0, c0, c0, 1",
    "    ands r3, r0, #0x07000000",
    "    mov r3, r3, lsr #23",
    "    beq 5f",
    "    mov r10, #0",
    "2:  add r2, r10, r10, lsr #1",
    "    mov r1, r0, lsr r2",
    "    and r1, r1, #7",
    "    cmp r1, #2",
    "    blt 4f",
    "    mcr p15, 2, r10, c0, c0, 0",
    "    isb",
    "    mrc p15, 1, r1, c0, c0, 0",
    "    and r2, r1, #7",
    "    add r2, r2, #4",
    "    ldr r4, =0x3ff",
    "    ands r4, r4, r1, lsr #3",
    "    clz r5, r4",
    "    ldr r7, =0x7fff",
    "    ands r7, r7, r1, lsr #13",
    "6:  mov r9, r4",
    "3:  orr r11, r10, r9, lsl r5",
    "    orr r11, r11, r7, lsl r2",
    "    mcr p15, 0, r11, c7, c14, 2",
    "    subs r9, r9, #1",
    "    bge 3b",
    "    subs r7, r7, #1",
    "    bge 6b",
    "4:  add r10, r10, #2",
    "    cmp r3, r10",
    "    bgt 2b",
    "5:  dsb",
    // ---- Instruction cache, branch predictor, TLB.
    "    mov r0, #0",
    "    mcr p15, 0, r0, c7, c5, 0",
    "    mcr p15, 0, r0, c7, c5, 6",
    "    mcr p15, 0, r0, c8, c7, 0",
    // ---- TTBCR = 0 (TTBR0 only, short descriptors), TTBR0 = the initial table (walks inner
    // and outer write-back write-allocate, non-shareable), domain 0 client.
    "    mcr p15, 0, r0, c2, c0, 2",
    "    ldr r0, =ptera_initial_l1",
    "    orr r0, r0, #0x48",
    "    mcr p15, 0, r0, c2, c0, 0",
    "    mov r0, #1",
    "    mcr p15, 0, r0, c3, c0, 0",
    "    dsb",
    "    isb",
    // ---- SCTLR: M, C, Z, I on; A (alignment checks), TRE, AFE off.
    "    mrc p15, 0, r0, c1, c0, 0",
    "    ldr r1, =0x1805",
    "    orr r0, r0, r1",
    "    bic r0, r0, #0x2",
    "    bic r0, r0, #0x30000000",
    "    mcr p15, 0, r0, c1, c0, 0",
    "    isb",
    "    b _default_start",
    ".ltorg",
    ".size _start, . - _start",
);

/// Core 0's System-mode stack, [`crate::STACK_PAGES`] pages: the linker script puts it between
/// its guard page and the exception modes' stacks, and cortex-a-rt's `_default_start` points
/// SP_sys at its top.
#[repr(C, align(4096))]
struct BootStack([u8; crate::STACK_PAGES * 4096]);

#[used]
#[link_section = ".stack.boot_stack"]
static BOOT_STACK: BootStack = BootStack([0; crate::STACK_PAGES * 4096]);

/// cortex-a-rt's entry, in System mode on the boot stack with `.bss` zeroed.
#[no_mangle]
extern "C" fn kmain() -> ! {
    crate::main()
}

/// Puts this core under the firmware's page tables (`mmu`). Exceptions already run on their
/// own mode stacks (cortex-a-rt), so a stack overflow into the guard page is reported from the
/// Abort mode's stack.
pub fn enter_core(_core: usize) {
    crate::mmu::install_on_this_core();
}

/// The short-descriptor fault status of DFSR/IFSR in words, with its table level.
fn fault_kind(fsr: u32) -> (&'static str, u32) {
    match (fsr & 0xf) | ((fsr >> 6) & 0x10) {
        0b00001 => ("alignment fault", 0),
        0b00101 => ("translation fault (unmapped)", 1),
        0b00111 => ("translation fault (unmapped)", 2),
        0b00011 => ("access flag fault", 1),
        0b00110 => ("access flag fault", 2),
        0b01001 => ("domain fault", 1),
        0b01011 => ("domain fault", 2),
        0b01101 => ("permission fault", 1),
        0b01111 => ("permission fault", 2),
        0b01000 => ("synchronous external abort", 0),
        _ => ("fault", 0),
    }
}

/// Reports an abort with the region its address falls in (`mmu::describe`) and stops.
fn abort(instruction: bool, fsr: u32, far: u32, pc: usize) -> ! {
    let (fault, level) = fault_kind(fsr);
    let access = if instruction {
        "instruction fetch from"
    } else if fsr & (1 << 11) != 0 {
        "write to"
    } else {
        "read of"
    };
    let region = crate::mmu::describe(far as usize);
    let (what, rights) = match region {
        Some(r) => (r.what, r.rights.describe()),
        None => ("outside every region the firmware uses", "unmapped"),
    };
    let overflow = matches!(region, Some(r) if r.rights == crate::mmu::Rights::Guard);
    crate::console::text(format_args!(
        "{}{} at PL1 on core 0: {access} {far:#x}, {fault} at level {level}: {what} ({rights}); \
         {} {fsr:#x} PC {pc:#x}",
        if overflow { "stack overflow: " } else { "" },
        if instruction {
            "prefetch abort"
        } else {
            "data abort"
        },
        if instruction { "IFSR" } else { "DFSR" },
    ));
    crate::exit::exit(crate::console::Status::Exception as u32)
}

/// cortex-a-rt's data abort handler (Abort mode, its own stack); `pc`: the faulting instruction.
#[no_mangle]
extern "C" fn _data_abort_handler(pc: usize) -> ! {
    let (fsr, far): (u32, u32);
    // SAFETY: reading DFSR and DFAR at PL1 has no side effects.
    unsafe {
        core::arch::asm!(
            "mrc p15, 0, {}, c5, c0, 0",
            "mrc p15, 0, {}, c6, c0, 0",
            out(reg) fsr,
            out(reg) far,
            options(nomem, nostack, preserves_flags)
        )
    };
    abort(false, fsr, far, pc)
}

/// cortex-a-rt's prefetch abort handler; `pc`: the instruction that could not be fetched.
#[no_mangle]
extern "C" fn _prefetch_abort_handler(pc: usize) -> ! {
    let (fsr, far): (u32, u32);
    // SAFETY: reading IFSR and IFAR at PL1 has no side effects.
    unsafe {
        core::arch::asm!(
            "mrc p15, 0, {}, c5, c0, 1",
            "mrc p15, 0, {}, c6, c0, 2",
            out(reg) fsr,
            out(reg) far,
            options(nomem, nostack, preserves_flags)
        )
    };
    abort(true, fsr, far, pc)
}

/// cortex-a-rt's undefined-instruction handler: an instruction this core does not have (a
/// kernel chosen for the wrong CPU) or a corrupted jump.
#[no_mangle]
extern "C" fn _undefined_handler(pc: usize) -> ! {
    crate::console::text(format_args!(
        "undefined instruction at PL1 on core 0: PC {pc:#x}"
    ));
    crate::exit::exit(crate::console::Status::Exception as u32)
}

/// One core, interrupts masked while held: save CPSR, mask IRQ and FIQ, restore the saved
/// mask bits on release.
struct CpsrCriticalSection;
critical_section::set_impl!(CpsrCriticalSection);

// SAFETY: the firmware runs on one core; masking IRQ/FIQ excludes every other context there,
// and the saved CPSR control bits are restored exactly on release (nested sections restore in
// reverse order).
unsafe impl critical_section::Impl for CpsrCriticalSection {
    unsafe fn acquire() -> u64 {
        let cpsr: u32;
        // SAFETY: reading CPSR and masking interrupts is always allowed at PL1. No `nomem`:
        // the asm must order memory accesses like a lock acquire.
        unsafe { core::arch::asm!("mrs {}, cpsr", "cpsid if", out(reg) cpsr, options(nostack)) };
        u64::from(cpsr)
    }

    unsafe fn release(cpsr: u64) {
        // SAFETY: restores the control byte (mode, I, F, T) saved by `acquire` in the same mode.
        unsafe { core::arch::asm!("msr cpsr_c, {}", in(reg) cpsr as u32, options(nostack)) };
    }
}
