//! 16550-compatible UART (Allwinner H3 UART0), transmit side, as QEMU or U-Boot set it up.

use core::ptr::{read_volatile, write_volatile};

/// Transmit holding register (write).
const THR: usize = 0;
/// Line status register.
const LSR: usize = 5;
/// LSR: the transmit holding register can take a byte.
const LSR_THRE: u32 = 1 << 5;
/// LSR: holding register and shift register both empty.
const LSR_TEMT: u32 = 1 << 6;

pub struct Ns16550 {
    base: usize,
    shift: u32,
}

impl Ns16550 {
    /// # Safety
    /// `base` must be the (Device-mapped) address of a 16550-compatible UART whose register `i`
    /// sits at `base + (i << shift)` as a 32-bit word, and nothing else may drive it.
    pub const unsafe fn new(base: usize, shift: u32) -> Self {
        Ns16550 { base, shift }
    }

    fn reg(&self, i: usize) -> *mut u32 {
        (self.base + (i << self.shift)) as *mut u32
    }
}

impl super::Uart for Ns16550 {
    fn write_byte(&self, byte: u8) {
        // SAFETY: `new`'s contract: LSR and THR are registers of this UART in Device memory.
        unsafe {
            while read_volatile(self.reg(LSR)) & LSR_THRE == 0 {}
            write_volatile(self.reg(THR), u32::from(byte));
        }
    }

    fn flush(&self) {
        // SAFETY: as in `write_byte`.
        while unsafe { read_volatile(self.reg(LSR)) } & LSR_TEMT == 0 {}
    }
}
