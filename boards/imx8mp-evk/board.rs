//! NXP i.MX 8M Plus EVK (4 × Cortex-A53): DRAM at 0x4000_0000, console on UART2 at 0x3089_0000
//! (QEMU's second serial port). QEMU enters at EL3; U-Boot's `go` at EL2.
//! Memory map and boot notes: boards/imx8mp-evk/README.md.

use aarch64_rt::{initial_pagetable, InitialPagetable};

use crate::drivers::imx_uart::ImxUart;
use crate::mmu::{device, l1_index, normal};

pub const NAME: &str = "imx8mp-evk";
/// U-Boot `fatload mmc 1:1 0x80000000 model.pte`; QEMU `-device loader,addr=0x80000000`.
pub const MODEL_LOAD_ADDR: usize = 0x8000_0000;
const UART2: usize = 0x3089_0000;

initial_pagetable!({
    let mut t = [0usize; 512];
    t[0] = device(0); // on-chip peripherals, AIPS buses (0 .. 1 GiB)
    t[l1_index(0x4000_0000)] = normal(0x4000_0000); // DRAM 1 .. 2 GiB
    t[l1_index(0x8000_0000)] = normal(0x8000_0000); // DRAM 2 .. 3 GiB
    InitialPagetable(t)
});

pub fn console() -> ImxUart {
    // SAFETY: UART2 of the i.MX 8M Plus, mapped as Device memory above; only the console drives it.
    unsafe { ImxUart::new(UART2) }
}

pub fn init_console() {
    console().init();
}
