//! Every board the firmware runs on, stated once: memory map, console UART, boot protocol and
//! the QEMU machine that emulates it.
//!
//! Plain data with no dependencies, included with `#[path]` by the three readers:
//! - the firmware's build script, which writes the linker script's memory region from
//!   [`Board::image_origin`] / [`Board::image_len`] (with `linker/sections.ld`);
//! - the firmware, which builds its initial page table from [`Board::blocks`], drives
//!   [`Board::console`] and finds a loader-placed model at [`Board::model_addr`];
//! - `xtask` (`qemu`, `deploy`, `bench gemm`, `boards`), for the QEMU command line and the
//!   files a board's boot loader reads.
//!
//! The firmware is built for one board, named by the `PTERA_BOARD` environment variable
//! (`cargo xtask qemu|deploy --board NAME` sets it).

#![allow(dead_code)] // each reader uses its own part of the table

/// Memory type of a 1 GiB level-1 block in the initial page table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mem {
    /// Cacheable RAM (code, data, model, arenas).
    Normal,
    /// Device registers: never cached, never executed.
    Device,
}

/// One range of the identity-style initial page table: virtual `va .. va + len` maps physical
/// `pa ..`. AArch64 boards use 1 GiB blocks (`len` = 1 GiB, aligned); AArch32 boards 1 MiB
/// sections (`va`, `pa` and `len` multiples of 1 MiB).
#[derive(Clone, Copy, Debug)]
pub struct Block {
    pub va: u64,
    pub pa: u64,
    pub len: u64,
    pub mem: Mem,
    pub what: &'static str,
}

/// The instruction set the board's cores run the firmware in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// AArch64 (`aarch64-unknown-none`, aarch64-rt), under `qemu-system-aarch64`.
    Aarch64,
    /// 32-bit ARMv7-A with VFP and Neon (`armv7a-none-eabihf`, cortex-a-rt), under
    /// `qemu-system-arm`.
    Armv7,
}

/// The console UART (polled transmit, 8N1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uart {
    /// Arm PL011 at virtual address `base`; `clock_hz` is its reference clock (0: the boot
    /// loader or QEMU already set it up).
    Pl011 { base: u64, clock_hz: u32 },
    /// NXP i.MX UART at virtual address `base` (enabled by the firmware at start).
    Imx { base: u64 },
    /// 16550-compatible UART at virtual address `base`, register `i` at `base + (i << reg_shift)`
    /// (Allwinner H3 UART0: 32-bit registers 4 bytes apart, `reg_shift` = 2); QEMU and the boot
    /// loader (U-Boot) set it up.
    Ns16550 { base: u64, reg_shift: u32 },
}

/// How the image (and a model that is not linked in) reach memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boot {
    /// QEMU `-device loader` places the flat image and the model; entry at the image origin.
    QemuLoader,
    /// Raspberry Pi firmware: `kernel8.img` at `kernel_address`, the model by `initramfs`.
    RpiFirmware,
    /// U-Boot: `fatload` of image and model from the FAT partition `mmc` (U-Boot's
    /// `device:partition` of the SD card slot), then `go`.
    UBootFatload { mmc: &'static str },
}

/// Which CPU QEMU emulates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QemuCpu {
    /// Any `-cpu` the machine accepts; this one by default.
    Any { default: &'static str },
    /// The machine has a fixed core (takes no `-cpu`).
    Fixed { core: &'static str },
}

/// How the firmware starts the cores other than core 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Smp {
    /// PSCI `CPU_ON` through `HVC` (`smc: false`, QEMU virt: the core starts at EL1 in
    /// aarch64-rt's secondary entry) or `SMC` (TF-A: the core starts at EL2, in `ptera_boot`);
    /// core `i` has MPIDR affinity 0 = `i`.
    Psci { smc: bool },
    /// Spin table (Raspberry Pi): core `i` (1..) waits in the boot firmware until the address
    /// at `release[i - 1]` is non-zero, then jumps there; QEMU's raspi machines instead start
    /// every core at the image's entry. Both end in the firmware's boot stub, which holds the
    /// secondary cores until core 0 releases them.
    SpinTable { release: [u64; 3] },
    /// Not supported on this board yet: the firmware runs on core 0 only.
    None,
}

/// One board.
#[derive(Clone, Copy, Debug)]
pub struct Board {
    pub name: &'static str,
    pub arch: Arch,
    /// SoC and cores, for listings.
    pub summary: &'static str,
    pub qemu_machine: &'static str,
    pub qemu_cpu: QemuCpu,
    /// `-m` for QEMU, if the machine's default RAM is not what the map below assumes.
    pub qemu_ram: Option<&'static str>,
    /// Index of the console UART among QEMU's `-serial` ports.
    pub qemu_serial: usize,
    /// More QEMU arguments the machine needs to start the firmware as the board's boot chain
    /// does.
    pub qemu_extra: &'static [&'static str],
    /// Where the image is linked and how many bytes it may use (linker region `image`).
    pub image_origin: u64,
    pub image_len: u64,
    /// Where a boot loader places a model that is not linked in, and how much room it has.
    pub model_addr: u64,
    pub model_window: u64,
    /// RAM the GEMM bench firmware may use (address, bytes); only boards that run the bench.
    pub bench_ram: Option<(u64, u64)>,
    pub console: Uart,
    pub baud: u32,
    /// Frequency of the counter the firmware times with where the core has no generic timer
    /// (Cortex-A9: the PMU cycle counter, at the core clock); 0 where CNTFRQ gives it.
    pub counter_hz: u64,
    /// The initial page table's blocks or sections (everything else unmapped).
    pub blocks: &'static [Block],
    pub boot: Boot,
    /// Cores of the SoC (QEMU `-smp` for a machine that takes it) and how they start.
    pub cores: usize,
    pub smp: Smp,
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

/// QEMU `virt` with one 32-bit core `cpu`: the same map as the AArch64 `qemu-virt`.
const fn qemu_virt_armv7(name: &'static str, cpu: &'static str, summary: &'static str) -> Board {
    Board {
        name,
        arch: Arch::Armv7,
        summary,
        qemu_machine: "virt",
        qemu_cpu: QemuCpu::Any { default: cpu },
        qemu_ram: Some("1G"),
        qemu_serial: 0,
        qemu_extra: &[],
        // +2 MiB: QEMU puts its device tree at the base of RAM.
        image_origin: 0x4020_0000,
        image_len: 0x2FE0_0000,
        model_addr: 0x7000_0000,
        model_window: 0x1000_0000,
        // The model window, unused when the bench runs no model.
        bench_ram: Some((0x7000_0000, 0x1000_0000)),
        console: Uart::Pl011 {
            base: 0x0900_0000,
            clock_hz: 0,
        },
        baud: 115_200,
        counter_hz: 0,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: GIB,
                mem: Mem::Device,
                what: "flash, GIC, UART, RTC, virtio",
            },
            Block {
                va: GIB,
                pa: GIB,
                len: GIB,
                mem: Mem::Normal,
                what: "RAM, first GiB (-m 1G)",
            },
        ],
        boot: Boot::QemuLoader,
        cores: 1,
        smp: Smp::None,
    }
}

pub const BOARDS: &[Board] = &[
    Board {
        name: "qemu-virt",
        arch: Arch::Aarch64,
        summary: "QEMU virt, any AArch64 CPU (default max: SVE2, SME2)",
        qemu_machine: "virt",
        qemu_cpu: QemuCpu::Any { default: "max" },
        qemu_ram: Some("1G"),
        qemu_serial: 0,
        qemu_extra: &[],
        // +2 MiB: QEMU puts its 1 MiB DTB at the base of RAM.
        image_origin: 0x4020_0000,
        image_len: 0x2FE0_0000,
        model_addr: 0x7000_0000,
        model_window: 0x1000_0000,
        // The model window, unused when the bench runs no model.
        bench_ram: Some((0x7000_0000, 0x1000_0000)),
        console: Uart::Pl011 {
            base: 0x0900_0000,
            clock_hz: 0,
        },
        baud: 115_200,
        counter_hz: 0,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: GIB,
                mem: Mem::Device,
                what: "flash, GIC, UART, RTC, virtio",
            },
            Block {
                va: GIB,
                pa: GIB,
                len: GIB,
                mem: Mem::Normal,
                what: "RAM, first GiB (-m 1G)",
            },
        ],
        boot: Boot::QemuLoader,
        cores: 8,
        smp: Smp::Psci { smc: false },
    },
    Board {
        name: "raspi4b",
        arch: Arch::Aarch64,
        summary: "Raspberry Pi 4 Model B (BCM2711, 4 x Cortex-A72)",
        qemu_machine: "raspi4b",
        qemu_cpu: QemuCpu::Fixed { core: "cortex-a72" },
        qemu_ram: None,
        qemu_serial: 0,
        qemu_extra: &[],
        image_origin: 0x8_0000,
        image_len: 0x2FF8_0000,
        model_addr: 0x3000_0000,
        model_window: 0x0B40_0000,
        bench_ram: None,
        // UART0 on GPIO 14/15 with `dtoverlay=disable-bt`, 48 MHz UART clock.
        console: Uart::Pl011 {
            base: 0xFE20_1000,
            clock_hz: 48_000_000,
        },
        baud: 115_200,
        counter_hz: 0,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: GIB,
                mem: Mem::Normal,
                what: "RAM 0 .. 1 GiB (GPU memory on top is never touched)",
            },
            Block {
                va: GIB,
                pa: GIB,
                len: GIB,
                mem: Mem::Normal,
                what: "RAM 1 .. 2 GiB",
            },
            Block {
                va: 3 * GIB,
                pa: 3 * GIB,
                len: GIB,
                mem: Mem::Device,
                what: "low peripherals 0xFC00_0000 .. 0xFF80_0000",
            },
        ],
        boot: Boot::RpiFirmware,
        cores: 4,
        smp: Smp::SpinTable {
            release: [0xe0, 0xe8, 0xf0],
        },
    },
    Board {
        name: "raspi3b",
        arch: Arch::Aarch64,
        summary: "Raspberry Pi 3 Model B (BCM2837, 4 x Cortex-A53)",
        qemu_machine: "raspi3b",
        qemu_cpu: QemuCpu::Fixed { core: "cortex-a53" },
        qemu_ram: None,
        qemu_serial: 0,
        qemu_extra: &[],
        image_origin: 0x8_0000,
        image_len: 0x2FF8_0000,
        model_addr: 0x3000_0000,
        model_window: 0x0B40_0000,
        bench_ram: None,
        // RAM and peripherals share the first GiB, which one block cannot split into Normal and
        // Device halves: VA 0 .. 1 GiB maps it as Normal memory and VA 1 .. 2 GiB maps the same
        // physical GiB again as Device memory. The UART (PL011 UART0 at physical 0x3F20_1000) is
        // used through that alias only, RAM through the identity map only.
        console: Uart::Pl011 {
            base: 0x3F20_1000 + GIB,
            clock_hz: 48_000_000,
        },
        baud: 115_200,
        counter_hz: 0,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: GIB,
                mem: Mem::Normal,
                what: "RAM (identity)",
            },
            Block {
                va: GIB,
                pa: 0,
                len: GIB,
                mem: Mem::Device,
                what: "the first GiB again as Device memory (peripherals at 0x3F00_0000 + 1 GiB)",
            },
        ],
        boot: Boot::RpiFirmware,
        cores: 4,
        smp: Smp::SpinTable {
            release: [0xe0, 0xe8, 0xf0],
        },
    },
    Board {
        name: "imx8mp-evk",
        arch: Arch::Aarch64,
        summary: "NXP i.MX 8M Plus EVK (4 x Cortex-A53)",
        qemu_machine: "imx8mp-evk",
        qemu_cpu: QemuCpu::Fixed { core: "cortex-a53" },
        qemu_ram: Some("2G"),
        // UART2 is QEMU's second serial port.
        qemu_serial: 1,
        // The EVK's boot chain runs TF-A at EL3, which provides PSCI through SMC, and starts
        // U-Boot and then the image at EL2. QEMU's machine has no TF-A: without EL3 its own
        // PSCI answers the SMC conduit in its place, and the firmware starts at EL2 as on the
        // board.
        qemu_extra: &[
            "-global",
            "driver=cortex-a53-arm-cpu,property=has_el3,value=off",
        ],
        image_origin: 0x4048_0000,
        image_len: 0x3FB8_0000,
        model_addr: 0x8000_0000,
        model_window: 0x4000_0000,
        bench_ram: None,
        console: Uart::Imx { base: 0x3089_0000 },
        baud: 115_200,
        counter_hz: 0,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: GIB,
                mem: Mem::Device,
                what: "on-chip peripherals, AIPS buses",
            },
            Block {
                va: GIB,
                pa: GIB,
                len: GIB,
                mem: Mem::Normal,
                what: "DRAM 1 .. 2 GiB",
            },
            Block {
                va: 2 * GIB,
                pa: 2 * GIB,
                len: GIB,
                mem: Mem::Normal,
                what: "DRAM 2 .. 3 GiB",
            },
        ],
        boot: Boot::UBootFatload { mmc: "1:1" },
        cores: 4,
        smp: Smp::Psci { smc: true },
    },
    qemu_virt_armv7(
        "qemu-virt-a15",
        "cortex-a15",
        "QEMU virt with one Cortex-A15 (32-bit, Neon, VFPv4)",
    ),
    qemu_virt_armv7(
        "qemu-virt-a7",
        "cortex-a7",
        "QEMU virt with one Cortex-A7 (32-bit, Neon, VFPv4)",
    ),
    Board {
        name: "raspi2b",
        arch: Arch::Armv7,
        summary: "Raspberry Pi 2 Model B (BCM2836, 4 x Cortex-A7, 32-bit)",
        qemu_machine: "raspi2b",
        qemu_cpu: QemuCpu::Fixed { core: "cortex-a7" },
        qemu_ram: None,
        qemu_serial: 0,
        qemu_extra: &[],
        // kernel7.img's load address.
        image_origin: 0x8000,
        image_len: 0x2FFF_8000,
        model_addr: 0x3000_0000,
        model_window: 0x0B00_0000,
        bench_ram: None,
        // UART0 on GPIO 14/15, 48 MHz UART clock (config.txt `init_uart_clock`).
        console: Uart::Pl011 {
            base: 0x3F20_1000,
            clock_hz: 48_000_000,
        },
        baud: 115_200,
        counter_hz: 0,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: 0x3F00_0000,
                mem: Mem::Normal,
                what: "RAM (the GPU's share at the top is never touched)",
            },
            Block {
                va: 0x3F00_0000,
                pa: 0x3F00_0000,
                len: 17 * MIB,
                mem: Mem::Device,
                what: "peripherals and the ARM local peripherals",
            },
        ],
        boot: Boot::RpiFirmware,
        cores: 4,
        smp: Smp::None,
    },
    Board {
        name: "mcimx6ul-evk",
        arch: Arch::Armv7,
        summary: "NXP i.MX 6UltraLite EVK (1 x Cortex-A7, 512 MiB, 32-bit)",
        qemu_machine: "mcimx6ul-evk",
        qemu_cpu: QemuCpu::Fixed { core: "cortex-a7" },
        qemu_ram: Some("512M"),
        qemu_serial: 0,
        qemu_extra: &[],
        // U-Boot's `loadaddr`; U-Boot itself sits at the top of RAM.
        image_origin: 0x8080_0000,
        image_len: 0x0F80_0000,
        model_addr: 0x9000_0000,
        model_window: 0x0C00_0000,
        bench_ram: None,
        // UART1, the EVK's debug console.
        console: Uart::Imx { base: 0x0202_0000 },
        baud: 115_200,
        counter_hz: 0,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: GIB,
                mem: Mem::Device,
                what: "on-chip peripherals, AIPS buses",
            },
            Block {
                va: 0x8000_0000,
                pa: 0x8000_0000,
                len: 512 * MIB,
                mem: Mem::Normal,
                what: "DDR (512 MiB)",
            },
        ],
        boot: Boot::UBootFatload { mmc: "1:1" },
        cores: 1,
        smp: Smp::None,
    },
    Board {
        name: "orangepi-pc",
        arch: Arch::Armv7,
        summary: "Orange Pi PC (Allwinner H3, 4 x Cortex-A7, 1 GiB, 32-bit)",
        qemu_machine: "orangepi-pc",
        qemu_cpu: QemuCpu::Fixed { core: "cortex-a7" },
        qemu_ram: None,
        qemu_serial: 0,
        qemu_extra: &[],
        // U-Boot's `kernel_addr_r` on sunxi.
        image_origin: 0x4200_0000,
        image_len: 0x1E00_0000,
        model_addr: 0x6000_0000,
        model_window: 0x1800_0000,
        bench_ram: None,
        console: Uart::Ns16550 {
            base: 0x01C2_8000,
            reg_shift: 2,
        },
        baud: 115_200,
        counter_hz: 0,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: GIB,
                mem: Mem::Device,
                what: "on-chip peripherals",
            },
            Block {
                va: GIB,
                pa: GIB,
                len: GIB,
                mem: Mem::Normal,
                what: "DRAM (1 GiB)",
            },
        ],
        boot: Boot::UBootFatload { mmc: "0:1" },
        cores: 4,
        smp: Smp::None,
    },
    Board {
        name: "sabrelite",
        arch: Arch::Armv7,
        summary: "Boundary Devices SABRE Lite (NXP i.MX 6Quad, 4 x Cortex-A9, 1 GiB, 32-bit)",
        qemu_machine: "sabrelite",
        qemu_cpu: QemuCpu::Fixed { core: "cortex-a9" },
        qemu_ram: None,
        // UART2 (the board's console) is QEMU's second serial port.
        qemu_serial: 1,
        qemu_extra: &[],
        // U-Boot's `loadaddr`.
        image_origin: 0x1200_0000,
        image_len: 0x1E00_0000,
        model_addr: 0x3000_0000,
        model_window: 0x1000_0000,
        bench_ram: None,
        console: Uart::Imx { base: 0x021E_8000 },
        baud: 115_200,
        // QEMU's PMU counts 1 GHz of virtual time (one cycle per instruction under
        // `-icount shift=0`); the board's i.MX 6Quad clocks its cores at 792 MHz or 996 MHz,
        // so times printed for hardware are cycles at a nominal 1 GHz.
        counter_hz: 1_000_000_000,
        blocks: &[
            Block {
                va: 0,
                pa: 0,
                len: 256 * MIB,
                mem: Mem::Device,
                what: "on-chip peripherals, the Cortex-A9 private region (SCU, timers)",
            },
            Block {
                va: 0x1000_0000,
                pa: 0x1000_0000,
                len: GIB,
                mem: Mem::Normal,
                what: "DDR (1 GiB)",
            },
        ],
        boot: Boot::UBootFatload { mmc: "0:1" },
        cores: 4,
        smp: Smp::None,
    },
];

/// The board called `name`, if there is one.
pub fn by_name(name: &str) -> Option<&'static Board> {
    BOARDS.iter().find(|b| b.name == name)
}
