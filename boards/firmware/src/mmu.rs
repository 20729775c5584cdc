//! The memory map the page tables enforce, shared by both architectures.
//!
//! The boot code turns the MMU on with the board's initial table (blocks or sections of
//! `boards/boards.rs`: everything RAM is read-write-execute). Right after, core 0 calls
//! [`protect`], which builds finer tables (the architecture's `pagetable` module: AArch64
//! 4 KiB-granule tables, or AArch32 short-descriptor sections and small pages) that give each
//! part of RAM only the rights it needs:
//!
//! | what | rights |
//! |---|---|
//! | code (`.init`, `.text`) | read, execute |
//! | `.rodata`, the initial page table, `.flash` (the program and its inputs) | read |
//! | a program the boot loader placed outside the image | read |
//! | `.data`, `.bss` (statics, arenas, metadata, other cores' stacks), stacks | read, write |
//! | the GEMM bench region, the spin-table page of the Raspberry Pi boards | read, write |
//! | a guard page below every core's stack | none (unmapped) |
//! | any other RAM | none (unmapped) |
//!
//! Device memory stays as the board table has it (never executed). A fault in any of these is
//! reported by `boot::fatal` with [`describe`], which names the region of the faulting address.
//! Every other core installs the same tables when it starts ([`install_on_this_core`]).

pub use crate::pagetable::{install_on_this_core, protect};

pub const PAGE: usize = 4096;

/// Why the fine tables could not be built (the firmware then stops: running unprotected
/// would hide the faults the tables exist to catch).
#[derive(Debug)]
pub struct PoolExhausted;

/// What the code may do with a region of RAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rights {
    /// Read and execute (code).
    Code,
    /// Read only, never executed.
    ReadOnly,
    /// Read and write, never executed.
    ReadWrite,
    /// Unmapped on purpose: any access faults (stack guard pages).
    Guard,
}

impl Rights {
    /// The rights in words, for fault reports.
    pub fn describe(self) -> &'static str {
        match self {
            Rights::Code => "read and execute",
            Rights::ReadOnly => "read-only, not executable",
            Rights::ReadWrite => "read-write, not executable",
            Rights::Guard => "unmapped",
        }
    }
}

/// A range of addresses `[begin, end)` with its rights and a name for fault reports.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    pub begin: usize,
    pub end: usize,
    pub rights: Rights,
    pub what: &'static str,
}

impl Region {
    const fn new(begin: usize, end: usize, rights: Rights, what: &'static str) -> Self {
        Region {
            begin,
            end,
            rights,
            what,
        }
    }

    pub fn contains(&self, addr: usize) -> bool {
        self.begin <= addr && addr < self.end
    }
}

/// Every region of the map; at most this many.
pub const MAX_REGIONS: usize = 32;
pub type Regions = heapless::Vec<Region, MAX_REGIONS>;

extern "C" {
    static text_begin: u8;
    static rodata_begin: u8;
    static flash_begin: u8;
    static data_begin: u8;
    static bss_begin: u8;
    static boot_stack_guard: u8;
    static boot_stack_begin: u8;
    static boot_stack_end: u8;
    static image_end: u8;
}

fn addr(symbol: &u8) -> usize {
    symbol as *const u8 as usize
}

/// The map: sections of the image from the linker script's symbols (every boundary where the
/// rights change is page-aligned there), then the finer parts and the RAM outside the image
/// that the firmware uses. Where regions overlap, the later, smaller one names the address
/// ([`describe`]); rights come from [`rights_at`].
pub fn regions() -> Regions {
    // SAFETY: the linker script defines these symbols; only their addresses are taken.
    let (text, rodata, flash, data, bss, guard, stack, stack_end, end) = unsafe {
        (
            addr(&text_begin),
            addr(&rodata_begin),
            addr(&flash_begin),
            addr(&data_begin),
            addr(&bss_begin),
            addr(&boot_stack_guard),
            addr(&boot_stack_begin),
            addr(&boot_stack_end),
            addr(&image_end),
        )
    };
    let mut r = Regions::new();
    let mut push = |region: Region| {
        // MAX_REGIONS leaves room for every board and core count; a region that does not fit
        // stays unmapped, which a test run would show at once.
        let _ = r.push(region);
    };
    use Rights::*;
    push(Region::new(
        text,
        rodata,
        Code,
        "the firmware's code (.init, .text)",
    ));
    push(Region::new(
        rodata,
        flash,
        ReadOnly,
        "read-only data (.rodata)",
    ));
    push(Region::new(
        flash,
        data,
        ReadOnly,
        "the program and its inputs in flash (.flash)",
    ));
    push(Region::new(data, bss, ReadWrite, "statics (.data)"));
    push(Region::new(bss, guard, ReadWrite, "statics (.bss)"));
    push(Region::new(
        guard,
        stack,
        Guard,
        "the guard page below core 0's stack",
    ));
    push(Region::new(stack, stack_end, ReadWrite, "core 0's stack"));
    push(Region::new(
        stack_end,
        end,
        ReadWrite,
        "the exception stacks (.stack)",
    ));
    #[cfg(not(feature = "gemm-bench"))]
    {
        for (begin, end, what) in crate::model::memory_ranges() {
            push(Region::new(begin, end, ReadWrite, what));
        }
        if let Some((begin, len)) = crate::model::loaded_program() {
            push(Region::new(
                begin,
                begin + len.div_ceil(PAGE) * PAGE,
                ReadOnly,
                "the program placed by the boot loader",
            ));
        }
        for region in crate::smp::stack_regions() {
            push(region);
        }
    }
    #[cfg(feature = "gemm-bench")]
    {
        let (begin, len) = crate::board::BENCH_RAM;
        push(Region::new(
            begin,
            begin + len,
            ReadWrite,
            "the GEMM bench region",
        ));
    }
    if let crate::board::table::Smp::SpinTable { release } = crate::board::BOARD.smp {
        let page = release[0] as usize & !(PAGE - 1);
        push(Region::new(
            page,
            page + PAGE,
            ReadWrite,
            "the spin table of the boot firmware",
        ));
    }
    r
}

/// Rights of the page at `addr`: a guard wins over everything; else the rights of the first
/// region holding it; else unmapped.
pub fn rights_at(regions: &Regions, addr: usize) -> Rights {
    if regions
        .iter()
        .any(|r| r.rights == Rights::Guard && r.contains(addr))
    {
        return Rights::Guard;
    }
    regions
        .iter()
        .find(|r| r.contains(addr))
        .map_or(Rights::Guard, |r| r.rights)
}

/// Which region `addr` falls in, for a fault report: the smallest region holding it.
pub fn describe(addr: usize) -> Option<Region> {
    regions()
        .into_iter()
        .filter(|r| r.contains(addr))
        .min_by_key(|r| r.end - r.begin)
}
