//! Level-1 block descriptors (1 GiB, 4 KiB granule) for the boards' initial page tables, used
//! with aarch64-rt's default MAIR (attr 0 = Device-nGnRE, attr 1 = Normal write-back).

const BLOCK: usize = 0b01;
const ATTR_DEVICE: usize = 0 << 2;
const ATTR_NORMAL: usize = 1 << 2;
const INNER_SHAREABLE: usize = 3 << 8;
const ACCESSED: usize = 1 << 10;
const PXN: usize = 1 << 53;
const UXN: usize = 1 << 54;

/// Index of the level-1 entry covering `va`.
pub const fn l1_index(va: usize) -> usize {
    va >> 30
}

/// Cacheable RAM (code, data, model, arenas).
pub const fn normal(pa: usize) -> usize {
    pa | BLOCK | ATTR_NORMAL | INNER_SHAREABLE | ACCESSED
}

/// Device registers: never cached, never executed.
pub const fn device(pa: usize) -> usize {
    pa | BLOCK | ATTR_DEVICE | ACCESSED | PXN | UXN
}
