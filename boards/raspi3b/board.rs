//! Raspberry Pi 3 Model B (BCM2837, 4 × Cortex-A53). kernel8.img loads at 0x8_0000; console on
//! UART0 = PL011 at physical 0x3F20_1000 (GPIO 14/15 with `dtoverlay=disable-bt`).
//! Memory map and boot notes: boards/raspi3b/README.md.
//!
//! RAM and peripherals share the first GiB, which a 1 GiB block cannot split into Normal and
//! Device halves. So VA 0 .. 1 GiB maps it as Normal memory (identity, code and data) and VA
//! 1 .. 2 GiB maps the same physical GiB again as Device memory: the UART is used through that
//! alias only (VA = PA + 0x4000_0000), RAM through the identity map only.

use aarch64_rt::{initial_pagetable, InitialPagetable};

use crate::drivers::pl011::Pl011;
use crate::mmu::{device, l1_index, normal};

pub const NAME: &str = "raspi3b";
/// config.txt `initramfs model.pte 0x30000000`.
pub const MODEL_LOAD_ADDR: usize = 0x3000_0000;
const DEVICE_ALIAS: usize = 0x4000_0000;
const UART0: usize = 0x3F20_1000 + DEVICE_ALIAS;

initial_pagetable!({
    let mut t = [0usize; 512];
    t[l1_index(0)] = normal(0); // RAM (identity)
    t[l1_index(DEVICE_ALIAS)] = device(0); // the same GiB as Device memory: peripherals at 0x3F00_0000 + 1 GiB
    InitialPagetable(t)
});

pub fn console() -> Pl011 {
    // SAFETY: the BCM2837 PL011 UART0 through the Device alias above; only the console drives it.
    unsafe { Pl011::new(UART0) }
}

pub fn init_console() {
    console().init(48_000_000, 115_200);
}
