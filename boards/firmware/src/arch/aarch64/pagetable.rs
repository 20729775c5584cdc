//! AArch64 page tables: the initial table aarch64-rt enables before the Rust entry (1 GiB
//! blocks of the board table, everything RAM read-write-execute) and the fine tables that
//! [`protect`] builds from the shared map ([`crate::mmu::regions`]): 4 KiB granule, 39-bit
//! addresses, a level-1 table of 1 GiB entries, level-2 tables of 2 MiB blocks, level-3 tables
//! of 4 KiB pages where a boundary falls inside a 2 MiB block.
//!
//! Descriptors use aarch64-rt's default MAIR (attr 0 = Device-nGnRE, attr 1 = Normal
//! write-back) and are global (one address space).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};

use aarch64_rt::{initial_pagetable, InitialPagetable};

use crate::board::table::Mem;
use crate::board::BOARD;
use crate::mmu::{regions, rights_at, PoolExhausted, Rights, MAX_REGIONS, PAGE};

const BLOCK: usize = 0b01;
/// A table descriptor at levels 1 and 2, a page descriptor at level 3.
const TABLE_OR_PAGE: usize = 0b11;
const ATTR_DEVICE: usize = 0 << 2;
const ATTR_NORMAL: usize = 1 << 2;
/// AP[2]: read-only (EL1; EL0 has no access either way).
const READ_ONLY: usize = 1 << 7;
const INNER_SHAREABLE: usize = 3 << 8;
const ACCESSED: usize = 1 << 10;
const PXN: usize = 1 << 53;
const UXN: usize = 1 << 54;

const L2_BLOCK: usize = 2 << 20;
const GIB: usize = 1 << 30;
const ENTRIES: usize = 512;

/// Index of the level-1 entry covering `va`.
pub const fn l1_index(va: usize) -> usize {
    va >> 30
}

/// Initial table: cacheable RAM (code, data, model, arenas).
pub const fn normal(pa: usize) -> usize {
    pa | BLOCK | ATTR_NORMAL | INNER_SHAREABLE | ACCESSED
}

/// Device registers: never cached, never executed.
pub const fn device(pa: usize) -> usize {
    pa | BLOCK | ATTR_DEVICE | ACCESSED | PXN | UXN
}

initial_pagetable!({
    let mut t = [0usize; 512];
    let mut i = 0;
    while i < BOARD.blocks.len() {
        let b = &BOARD.blocks[i];
        t[l1_index(b.va as usize)] = match b.mem {
            Mem::Normal => normal(b.pa as usize),
            Mem::Device => device(b.pa as usize),
        };
        i += 1;
    }
    InitialPagetable(t)
});

/// A leaf descriptor (block at levels 1-2, page at level 3) for `pa` with `rights`.
const fn leaf(pa: usize, rights: Rights, page: bool) -> usize {
    let kind = if page { TABLE_OR_PAGE } else { BLOCK };
    let normal = pa | kind | ATTR_NORMAL | INNER_SHAREABLE | ACCESSED | UXN;
    match rights {
        Rights::Code => normal | READ_ONLY,
        Rights::ReadOnly => normal | READ_ONLY | PXN,
        Rights::ReadWrite => normal | PXN,
        Rights::Guard => 0,
    }
}

/// Tables (L1, L2s, L3s) that [`protect`] may use: one level-1 table, one level-2 table per GiB
/// of RAM in use, one level-3 table per 2 MiB block with a boundary inside (about a dozen
/// boundaries on any board: image start and end, code, flash, stacks and their guards).
const POOL_TABLES: usize = 24;

#[repr(C, align(4096))]
struct Table([usize; ENTRIES]);

struct Pool(UnsafeCell<[Table; POOL_TABLES]>);

// SAFETY: only `protect` writes the pool, once, on core 0 before any other core starts
// (FINE_TABLE publishes it); afterwards only the page-table walkers read it.
unsafe impl Sync for Pool {}

static POOL: Pool = Pool(UnsafeCell::new(
    [const { Table([0; ENTRIES]) }; POOL_TABLES],
));

/// Physical address of the level-1 table that [`protect`] built (0 until then).
static FINE_TABLE: AtomicUsize = AtomicUsize::new(0);

/// Builds the fine tables from [`regions`]; each core then installs them
/// ([`install_on_this_core`], through `boot::enter_core`). Call once, on core 0, before the
/// other cores start.
pub fn protect() -> Result<(), PoolExhausted> {
    let regions = regions();
    // SAFETY: called once on core 0 before any other core runs (see Pool); nothing else holds
    // a reference into the pool.
    let pool = unsafe { &mut *POOL.0.get() };
    let (l1, mut free) = pool.split_first_mut().ok_or(PoolExhausted)?;
    let mut take = || -> Result<&'static mut Table, PoolExhausted> {
        let (t, rest) = core::mem::take(&mut free)
            .split_first_mut()
            .ok_or(PoolExhausted)?;
        free = rest;
        Ok(t)
    };
    // Every address where rights may change: a 2 MiB block with one strictly inside needs pages.
    let mut bounds = heapless::Vec::<usize, { 2 * MAX_REGIONS }>::new();
    for r in &regions {
        let _ = bounds.push(r.begin);
        let _ = bounds.push(r.end);
    }
    let split = |base: usize, size: usize| bounds.iter().any(|&b| base < b && b < base + size);
    for block in BOARD.blocks {
        let (va, pa) = (block.va as usize, block.pa as usize);
        let Some(entry) = l1.0.get_mut(l1_index(va)) else {
            continue;
        };
        if block.mem == Mem::Device || va != pa {
            // Device registers (and aliases) as the board table has them, never executed.
            *entry = device(pa);
            continue;
        }
        if !regions.iter().any(|r| r.begin < va + GIB && va < r.end) {
            continue; // RAM the firmware does not use: unmapped
        }
        let l2: &'static mut Table = take()?;
        for (i, e2) in l2.0.iter_mut().enumerate() {
            let base = va + i * L2_BLOCK;
            if !split(base, L2_BLOCK) {
                *e2 = leaf(base, rights_at(&regions, base), false);
                continue;
            }
            let l3: &'static mut Table = take()?;
            for (j, e3) in l3.0.iter_mut().enumerate() {
                let page = base + j * PAGE;
                *e3 = leaf(page, rights_at(&regions, page), true);
            }
            *e2 = (&raw const *l3) as usize | TABLE_OR_PAGE;
        }
        *entry = (&raw const *l2) as usize | TABLE_OR_PAGE;
    }
    FINE_TABLE.store((&raw const *l1) as usize, Ordering::Release);
    Ok(())
}

/// Switches this core to the tables [`protect`] built (nothing before `protect` ran). Each core
/// runs it once; the code, stack and data in use are mapped alike in both tables.
pub fn install_on_this_core() {
    let table = FINE_TABLE.load(Ordering::Acquire);
    if table == 0 {
        return;
    }
    // SAFETY: `table` is a complete level-1 table (built before FINE_TABLE was published) that
    // maps this code, its stack and its data at the same addresses as the table in use. The
    // MMU is off while TTBR0 changes and the TLB is emptied, so no two translations of one
    // address ever meet in the TLB (break before make); the sequence itself touches no memory.
    unsafe {
        core::arch::asm!(
            "dsb ish",
            "mrs {t}, sctlr_el1",
            "bic {t}, {t}, #1",
            "msr sctlr_el1, {t}",
            "isb",
            "msr ttbr0_el1, {table}",
            "isb",
            "tlbi vmalle1",
            "dsb nsh",
            "isb",
            "orr {t}, {t}, #1",
            "msr sctlr_el1, {t}",
            "isb",
            t = out(reg) _,
            table = in(reg) table,
            options(nostack),
        );
    }
}
