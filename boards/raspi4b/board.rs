//! Raspberry Pi 4 Model B (BCM2711, 4 × Cortex-A72). kernel8.img loads at 0x8_0000; console on
//! UART0 = PL011 at 0xFE20_1000 (GPIO 14/15 with `dtoverlay=disable-bt`, 48 MHz UART clock).
//! Memory map and boot notes: boards/raspi4b/README.md.

use aarch64_rt::{initial_pagetable, InitialPagetable};

use crate::drivers::pl011::Pl011;
use crate::mmu::{device, l1_index, normal};

pub const NAME: &str = "raspi4b";
/// config.txt `initramfs model.pte 0x30000000`.
pub const MODEL_LOAD_ADDR: usize = 0x3000_0000;
const UART0: usize = 0xFE20_1000;

initial_pagetable!({
    let mut t = [0usize; 512];
    t[0] = normal(0); // RAM 0 .. 1 GiB (GPU memory on top is never touched)
    t[1] = normal(0x4000_0000); // RAM 1 .. 2 GiB
    t[l1_index(0xC000_0000)] = device(0xC000_0000); // "low peripherals" 0xFC00_0000 .. 0xFF80_0000
    InitialPagetable(t)
});

pub fn console() -> Pl011 {
    // SAFETY: the BCM2711 PL011 UART0, mapped as Device memory above; only the console drives it.
    unsafe { Pl011::new(UART0) }
}

pub fn init_console() {
    console().init(48_000_000, 115_200);
}
