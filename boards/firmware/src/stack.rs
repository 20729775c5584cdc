//! How deep the boot stack went: [`paint_stack`] fills its unused part with a pattern, and
//! [`stack_used`] finds the lowest word that lost it (the report's `stack_used`).

extern "C" {
    static boot_stack_begin: u8;
    static boot_stack_end: u8;
}

const PAINT: u32 = 0x5054_4552;
/// Bytes below the current stack pointer left untouched when painting.
const PAINT_GAP: usize = 1024;

/// Fills the unused part of the boot stack with a pattern; returns the painted range's start.
pub fn paint_stack() -> usize {
    let begin = (&raw const boot_stack_begin) as usize;
    let sp = crate::cpu::stack_pointer();
    let top = (sp - PAINT_GAP) & !3;
    let mut p = begin;
    while p < top {
        // SAFETY: [boot_stack_begin, sp - PAINT_GAP) is the part of the boot stack (a static
        // reserved by the architecture's `boot`, placed by the linker script) that no frame
        // uses yet; nothing else refers to it, and the stack grows down towards it only later.
        unsafe { core::ptr::write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
    begin
}

/// Deepest stack use since `paint_stack`: bytes from the stack top down to the lowest word that
/// no longer holds the pattern.
pub fn stack_used(begin: usize) -> usize {
    let end = (&raw const boot_stack_end) as usize;
    let mut p = begin;
    // SAFETY: reads words of the boot stack region, which is mapped and 4-byte aligned.
    while p < end && unsafe { core::ptr::read_volatile(p as *const u32) } == PAINT {
        p += 4;
    }
    end - p
}
