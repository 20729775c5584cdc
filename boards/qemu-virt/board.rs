//! QEMU `virt` (any AArch64 `-cpu`): RAM at 0x4000_0000, PL011 UART0 at 0x0900_0000, entered at
//! EL1 (EL2 with `virtualization=on`, EL3 with `secure=on`; the boot stub handles both).
//! Memory map and boot notes: boards/qemu-virt/README.md.

use aarch64_rt::{initial_pagetable, InitialPagetable};

use crate::drivers::pl011::Pl011;
use crate::mmu::{device, l1_index, normal};

pub const NAME: &str = "qemu-virt";
/// Where `-device loader,file=MODEL,addr=...` places a model that is not linked in.
pub const MODEL_LOAD_ADDR: usize = 0x7000_0000;
/// GEMM bench mode (feature `gemm-bench`): RAM the firmware may use for its parameter block and
/// matrices, (address, bytes). It is the model window above, unused when no model runs.
#[cfg(feature = "gemm-bench")]
pub const BENCH_RAM: (usize, usize) = (MODEL_LOAD_ADDR, 0x1000_0000);
const UART0: usize = 0x0900_0000;

initial_pagetable!({
    let mut t = [0usize; 512];
    t[0] = device(0); // flash, GIC, UART, RTC, virtio (0 .. 1 GiB)
    t[l1_index(0x4000_0000)] = normal(0x4000_0000); // RAM, first GiB (-m 1G)
    InitialPagetable(t)
});

pub fn console() -> Pl011 {
    // SAFETY: UART0 of the virt machine, mapped as Device memory by the table above; only the
    // console module drives it.
    unsafe { Pl011::new(UART0) }
}

/// QEMU's PL011 needs no set-up.
pub fn init_console() {}
