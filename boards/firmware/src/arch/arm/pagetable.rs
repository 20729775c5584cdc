//! ARMv7-A short-descriptor page tables (TTBR0 only, domain 0 client, no TEX remap).
//!
//! - The initial table `ptera_initial_l1` (16 KiB, built at compile time from the board
//!   table's sections: RAM Normal write-back read-write-execute, peripherals Device, never
//!   executed), which `boot.rs` enables before any Rust code runs.
//! - The fine tables that [`protect`] builds from the shared map ([`crate::mmu::regions`]):
//!   1 MiB sections, and a second-level table of 4 KiB small pages for every section with a
//!   boundary inside.
//!
//! Attributes: Normal memory is outer and inner write-back write-allocate (TEX = 001, C = B = 1),
//! non-shareable (one core); Device memory is Shareable Device (B = 1), never executed. Access
//! permissions are PL1 only (AP[1:0] = 01), read-only with AP[2] = 1.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::board::table::Mem;
use crate::board::BOARD;
use crate::mmu::{regions, rights_at, PoolExhausted, Rights, MAX_REGIONS, PAGE};

const MIB: usize = 1 << 20;
const L1_ENTRIES: usize = 4096;
const L2_ENTRIES: usize = 256;

const SECTION: u32 = 0b10;
const S_B: u32 = 1 << 2;
const S_C: u32 = 1 << 3;
const S_XN: u32 = 1 << 4;
const S_AP_PL1: u32 = 1 << 10;
const S_TEX_WA: u32 = 1 << 12;
const S_AP_RO: u32 = 1 << 15;

/// A first-level entry pointing to a second-level table (domain 0).
const PAGE_TABLE: u32 = 0b01;

const SMALL_PAGE: u32 = 0b10;
const P_XN: u32 = 1 << 0;
const P_B: u32 = 1 << 2;
const P_C: u32 = 1 << 3;
const P_AP_PL1: u32 = 1 << 4;
const P_TEX_WA: u32 = 1 << 6;
const P_AP_RO: u32 = 1 << 9;

/// Normal write-back write-allocate, read-write at PL1, executable: the initial table's RAM.
const fn normal_section(pa: u32) -> u32 {
    pa | SECTION | S_TEX_WA | S_C | S_B | S_AP_PL1
}

/// Shareable Device, read-write at PL1, never executed.
const fn device_section(pa: u32) -> u32 {
    pa | SECTION | S_B | S_XN | S_AP_PL1
}

/// A section of RAM with `rights` (0: a fault).
const fn section(pa: u32, rights: Rights) -> u32 {
    match rights {
        Rights::Code => normal_section(pa) | S_AP_RO,
        Rights::ReadOnly => normal_section(pa) | S_AP_RO | S_XN,
        Rights::ReadWrite => normal_section(pa) | S_XN,
        Rights::Guard => 0,
    }
}

/// A 4 KiB page of RAM with `rights` (0: a fault).
const fn page(pa: u32, rights: Rights) -> u32 {
    let normal = pa | SMALL_PAGE | P_TEX_WA | P_C | P_B | P_AP_PL1;
    match rights {
        Rights::Code => normal | P_AP_RO,
        Rights::ReadOnly => normal | P_AP_RO | P_XN,
        Rights::ReadWrite => normal | P_XN,
        Rights::Guard => 0,
    }
}

#[repr(C, align(16384))]
pub struct L1([u32; L1_ENTRIES]);

#[repr(C, align(1024))]
struct L2([u32; L2_ENTRIES]);

/// The board table's sections, identity-style (`va` maps `pa`), everything else unmapped.
const fn initial() -> L1 {
    let mut t = [0u32; L1_ENTRIES];
    let mut i = 0;
    while i < BOARD.blocks.len() {
        let b = &BOARD.blocks[i];
        assert!(
            b.va.is_multiple_of(MIB as u64)
                && b.pa.is_multiple_of(MIB as u64)
                && b.len.is_multiple_of(MIB as u64),
            "an AArch32 board's memory map is made of whole 1 MiB sections"
        );
        let mut s = 0;
        while s < (b.len / MIB as u64) as usize {
            let pa = b.pa as u32 + (s * MIB) as u32;
            t[(b.va as usize / MIB) + s] = match b.mem {
                Mem::Normal => normal_section(pa),
                Mem::Device => device_section(pa),
            };
            s += 1;
        }
        i += 1;
    }
    L1(t)
}

/// The table `boot.rs` enables before the Rust entry (by this name).
#[no_mangle]
#[used]
#[allow(non_upper_case_globals)] // named for the boot assembly
pub static ptera_initial_l1: L1 = initial();

/// Second-level tables that [`protect`] may use: one per 1 MiB section with a boundary inside
/// (about a dozen boundaries on any board: image start and end, code, flash, stacks, guards).
const POOL_L2: usize = 2 * MAX_REGIONS;

struct Pool(UnsafeCell<(L1, [L2; POOL_L2])>);

// SAFETY: only `protect` writes the pool, once, on core 0 (FINE_TABLE publishes it);
// afterwards only the table walker reads it.
unsafe impl Sync for Pool {}

static POOL: Pool = Pool(UnsafeCell::new((
    L1([0; L1_ENTRIES]),
    [const { L2([0; L2_ENTRIES]) }; POOL_L2],
)));

/// Address of the first-level table that [`protect`] built (0 until then).
static FINE_TABLE: AtomicUsize = AtomicUsize::new(0);

/// Builds the fine tables from [`regions`]; [`install_on_this_core`] (through
/// `boot::enter_core`) switches to them. Call once, on core 0.
pub fn protect() -> Result<(), PoolExhausted> {
    let regions = regions();
    // SAFETY: called once on core 0 (see Pool); nothing else holds a reference into the pool.
    let (l1, pool) = unsafe { &mut *POOL.0.get() };
    let mut free = pool.iter_mut();
    let mut bounds = heapless::Vec::<usize, { 2 * MAX_REGIONS }>::new();
    for r in &regions {
        let _ = bounds.push(r.begin);
        let _ = bounds.push(r.end);
    }
    let split = |base: usize| bounds.iter().any(|&b| base < b && b < base + MIB);
    for block in BOARD.blocks {
        let (va, pa, len) = (block.va as usize, block.pa as usize, block.len as usize);
        for s in 0..len / MIB {
            let (va, pa) = (va + s * MIB, pa + s * MIB);
            let Some(entry) = l1.0.get_mut(va / MIB) else {
                continue;
            };
            if block.mem == Mem::Device || va != pa {
                *entry = device_section(pa as u32);
            } else if !split(va) {
                *entry = section(pa as u32, rights_at(&regions, va));
            } else {
                let l2 = free.next().ok_or(PoolExhausted)?;
                for (j, e) in l2.0.iter_mut().enumerate() {
                    let p = va + j * PAGE;
                    *e = page(p as u32, rights_at(&regions, p));
                }
                *entry = (&raw const *l2) as u32 | PAGE_TABLE;
            }
        }
    }
    // The table walker of a Cortex-A9 does not look into the L1 data cache: the new tables go
    // to memory before anything walks them.
    clean_to_memory(
        (&raw const *l1) as usize,
        core::mem::size_of::<(L1, [L2; POOL_L2])>(),
    );
    FINE_TABLE.store((&raw const *l1) as usize, Ordering::Release);
    Ok(())
}

/// Cleans `[begin, begin + len)` from the data caches to the point of coherency (DCCMVAC by
/// 32-byte lines, the smallest line of the cores the boards have).
fn clean_to_memory(begin: usize, len: usize) {
    let mut line = begin & !31;
    while line < begin + len {
        // SAFETY: a cache clean by address has no architectural effect on memory contents.
        unsafe { core::arch::asm!("mcr p15, 0, {}, c7, c10, 1", in(reg) line, options(nostack)) };
        line += 32;
    }
    // SAFETY: a barrier only.
    unsafe { core::arch::asm!("dsb", options(nostack)) };
}

/// Switches this core to the tables [`protect`] built (nothing before `protect` ran). They map
/// the code, stacks and data in use at the same addresses with the same memory types as the
/// initial table, only with narrower rights, so the switch needs no break: TTBR0 changes, then
/// the TLB and branch predictor are emptied.
pub fn install_on_this_core() {
    let table = FINE_TABLE.load(Ordering::Acquire);
    if table == 0 {
        return;
    }
    // SAFETY: `table` is a complete first-level table in memory (cleaned before FINE_TABLE was
    // published) mapping this code, its stack and its data as described above; the sequence
    // touches no memory.
    unsafe {
        core::arch::asm!(
            "dsb",
            "mcr p15, 0, {table}, c2, c0, 0",
            "isb",
            "mcr p15, 0, {zero}, c8, c7, 0",
            "mcr p15, 0, {zero}, c7, c5, 6",
            "dsb",
            "isb",
            table = in(reg) table | 0x48,
            zero = in(reg) 0u32,
            options(nostack),
        );
    }
}
