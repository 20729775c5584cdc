//! NXP i.MX UART (i.MX 8M Plus UART1..4).

use core::ptr::{read_volatile, write_volatile};

const UTXD: usize = 0x40;
const UCR1: usize = 0x80;
const UCR2: usize = 0x84;
const UTS: usize = 0xb4;
const UCR1_UARTEN: u32 = 1 << 0;
const UCR2_SRST: u32 = 1 << 0;
const UCR2_RXEN: u32 = 1 << 1;
const UCR2_TXEN: u32 = 1 << 2;
const UCR2_WS: u32 = 1 << 5;
const UCR2_IRTS: u32 = 1 << 14;
const UTS_TXFULL: u32 = 1 << 4;
const UTS_TXEMPTY: u32 = 1 << 6;

pub struct ImxUart {
    base: usize,
}

impl ImxUart {
    /// # Safety
    /// `base` must be the (Device-mapped) address of an i.MX UART that nothing else drives.
    pub const unsafe fn new(base: usize) -> Self {
        ImxUart { base }
    }

    fn read(&self, off: usize) -> u32 {
        // SAFETY: `new`'s contract: base + off is a UART register in Device memory.
        unsafe { read_volatile((self.base + off) as *const u32) }
    }

    fn write(&self, off: usize, v: u32) {
        // SAFETY: as in `read`.
        unsafe { write_volatile((self.base + off) as *mut u32, v) }
    }

    /// Enables the UART and its transmitter, keeping the baud rate the boot loader (U-Boot) set.
    pub fn init(&self) {
        self.write(UCR1, self.read(UCR1) | UCR1_UARTEN);
        self.write(
            UCR2,
            self.read(UCR2) | UCR2_SRST | UCR2_RXEN | UCR2_TXEN | UCR2_WS | UCR2_IRTS,
        );
    }
}

impl super::Uart for ImxUart {
    fn write_byte(&self, byte: u8) {
        while self.read(UTS) & UTS_TXFULL != 0 {}
        self.write(UTXD, u32::from(byte));
    }

    fn flush(&self) {
        while self.read(UTS) & UTS_TXEMPTY == 0 {}
    }
}
