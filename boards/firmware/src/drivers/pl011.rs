//! Arm PrimeCell PL011 UART (QEMU `virt`, Raspberry Pi UART0).

use core::ptr::{read_volatile, write_volatile};

use super::Uart;

const DR: usize = 0x00;
const FR: usize = 0x18;
const IBRD: usize = 0x24;
const FBRD: usize = 0x28;
const LCRH: usize = 0x2c;
const CR: usize = 0x30;
const ICR: usize = 0x44;
const FR_BUSY: u32 = 1 << 3;
const FR_TXFF: u32 = 1 << 5;

pub struct Pl011 {
    base: usize,
}

impl Pl011 {
    /// # Safety
    /// `base` must be the (Device-mapped) address of a PL011 that nothing else drives.
    pub const unsafe fn new(base: usize) -> Self {
        Pl011 { base }
    }

    fn read(&self, off: usize) -> u32 {
        // SAFETY: `new`'s contract: base + off is a PL011 register in Device memory.
        unsafe { read_volatile((self.base + off) as *const u32) }
    }

    fn write(&self, off: usize, v: u32) {
        // SAFETY: as in `read`.
        unsafe { write_volatile((self.base + off) as *mut u32, v) }
    }

    /// 8N1 with FIFOs at `baud` from a `clock_hz` reference clock (real boards; QEMU ignores it).
    pub fn init(&self, clock_hz: u32, baud: u32) {
        self.flush();
        self.write(CR, 0);
        self.write(ICR, 0x7ff);
        // Divisor in 1/64ths: clock / (16 * baud), rounded.
        let div64 = (u64::from(clock_hz) * 4 + u64::from(baud) / 2) / u64::from(baud);
        self.write(IBRD, (div64 >> 6) as u32);
        self.write(FBRD, (div64 & 0x3f) as u32);
        self.write(LCRH, (3 << 5) | (1 << 4)); // WLEN = 8 bits, FEN
        self.write(CR, (1 << 9) | (1 << 8) | 1); // RXE, TXE, UARTEN
    }
}

impl super::Uart for Pl011 {
    fn write_byte(&self, byte: u8) {
        while self.read(FR) & FR_TXFF != 0 {}
        self.write(DR, u32::from(byte));
    }

    fn flush(&self) {
        while self.read(FR) & FR_BUSY != 0 {}
    }
}
