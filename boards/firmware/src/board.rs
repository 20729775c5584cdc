//! The board this image is built for: its entry of the board table (`boards/boards.rs`, chosen
//! at build time by `PTERA_BOARD`) and its console UART. The initial page table built from that
//! entry's memory map is the architecture's (`pagetable`).

use crate::drivers::imx_uart::ImxUart;
use crate::drivers::ns16550::Ns16550;
use crate::drivers::pl011::Pl011;
use crate::drivers::Uart as _;

#[path = "../../boards.rs"]
pub mod table;

use table::Uart;

/// This image's board (index written by build.rs from `PTERA_BOARD`).
pub const BOARD: &table::Board =
    &table::BOARDS[include!(concat!(env!("OUT_DIR"), "/board_index.rs"))];

pub const NAME: &str = BOARD.name;
/// Where a boot loader places a model that is not linked in.
#[cfg(not(feature = "gemm-bench"))]
pub const MODEL_LOAD_ADDR: usize = BOARD.model_addr as usize;
/// GEMM bench mode: RAM the firmware may use for its parameter block and matrices.
#[cfg(feature = "gemm-bench")]
pub const BENCH_RAM: (usize, usize) = match BOARD.bench_ram {
    Some((a, n)) => (a as usize, n as usize),
    None => panic!("this board has no bench region (boards/boards.rs)"),
};

/// The console UART of the board.
pub enum Console {
    Pl011(Pl011),
    Imx(ImxUart),
    Ns16550(Ns16550),
}

impl Console {
    pub fn write_byte(&self, byte: u8) {
        match self {
            Console::Pl011(u) => u.write_byte(byte),
            Console::Imx(u) => u.write_byte(byte),
            Console::Ns16550(u) => u.write_byte(byte),
        }
    }

    /// Waits until every byte written has left the transmitter.
    pub fn flush(&self) {
        match self {
            Console::Pl011(u) => u.flush(),
            Console::Imx(u) => u.flush(),
            Console::Ns16550(u) => u.flush(),
        }
    }
}

pub fn console() -> Console {
    match BOARD.console {
        // SAFETY: the board table's console UART, mapped as Device memory by the page table
        // above (its block covers the UART); only the console module drives it.
        Uart::Pl011 { base, .. } => Console::Pl011(unsafe { Pl011::new(base as usize) }),
        // SAFETY: as above.
        Uart::Imx { base } => Console::Imx(unsafe { ImxUart::new(base as usize) }),
        Uart::Ns16550 { base, reg_shift } => {
            // SAFETY: as above.
            Console::Ns16550(unsafe { Ns16550::new(base as usize, reg_shift) })
        }
    }
}

/// Sets the UART up where the board needs it (QEMU's PL011 needs nothing).
pub fn init_console() {
    match (console(), BOARD.console) {
        (Console::Pl011(u), Uart::Pl011 { clock_hz, .. }) if clock_hz != 0 => {
            u.init(clock_hz, BOARD.baud)
        }
        (Console::Imx(u), _) => u.init(),
        _ => {}
    }
}
