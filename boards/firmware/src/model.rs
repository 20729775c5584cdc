//! The program, its inputs and the static memory, all sized by xtask at build time.
//!
//! `config.rs` (generated from `MethodMeta` by `cargo xtask`) gives the arena sizes, the metadata
//! bytes, the input tensors and where the program lives: linked into the `.flash` section of the
//! image, or at the board's load address where the boot loader put it.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// One bundled input tensor inside `inputs.bin`.
pub struct InputSpec {
    /// ExecuTorch ScalarType code.
    pub dtype: u8,
    pub dims: &'static [usize],
    pub offset: usize,
    pub len: usize,
}

// Every image gets every constant; features decide which are read (etdump, bundled).
#[allow(dead_code)]
mod generated {
    use super::InputSpec;
    include!(concat!(env!("PTERA_FW_GEN"), "/config.rs"));
}

#[cfg(target_arch = "aarch64")]
pub use generated::CORES;
use generated::{ARENA_SIZES, INPUTS_LEN, METADATA_BYTES, MODEL_LEN, MODEL_LINKED};
pub use generated::{ATOL, BUNDLED, INPUTS, METHOD, RTOL};
#[cfg(feature = "etdump")]
pub use generated::{ETDUMP_BYTES, ETDUMP_EVENTS};

const ALIGN: usize = 16;

const fn round_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

const fn pool_bytes() -> usize {
    let mut total = 0;
    let mut i = 0;
    while i < ARENA_SIZES.len() {
        total += round_up(ARENA_SIZES[i]);
        i += 1;
    }
    total
}

#[repr(C, align(16))]
struct Flash<const N: usize>([u8; N]);

const LINKED_LEN: usize = if MODEL_LINKED { MODEL_LEN } else { 0 };

#[link_section = ".flash.model"]
static MODEL: Flash<LINKED_LEN> =
    Flash(*include_bytes!(concat!(env!("PTERA_FW_GEN"), "/model.bin")));

#[link_section = ".flash.inputs"]
static INPUT_BYTES: Flash<INPUTS_LEN> = Flash(*include_bytes!(concat!(
    env!("PTERA_FW_GEN"),
    "/inputs.bin"
)));

/// Zero-initialised, 16-byte aligned static storage handed out once as `&'static mut`.
#[repr(C, align(16))]
struct Static<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: the storage is only reached through `take_memory`, which hands it out at most once.
unsafe impl<const N: usize> Sync for Static<N> {}

static ARENA_POOL: Static<{ pool_bytes() }> = Static(UnsafeCell::new([0; pool_bytes()]));
static METADATA: Static<{ round_up(METADATA_BYTES) }> =
    Static(UnsafeCell::new([0; round_up(METADATA_BYTES)]));
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The program bytes, read in place.
pub fn program_bytes() -> &'static [u8] {
    if MODEL_LINKED {
        &MODEL.0
    } else {
        // SAFETY: the boot loader (QEMU `-device loader`, Pi config.txt `initramfs`, U-Boot
        // `fatload`) placed MODEL_LEN bytes at the board's load address before starting the
        // image; the board's page table maps that RAM as Normal memory, the linker script keeps
        // the image below it, and nothing writes it.
        unsafe {
            core::slice::from_raw_parts(crate::board::MODEL_LOAD_ADDR as *const u8, MODEL_LEN)
        }
    }
}

pub fn input_bytes(input: &InputSpec) -> &'static [u8] {
    &INPUT_BYTES.0[input.offset..input.offset + input.len]
}

/// The planned arenas (memory ids 1..) and the metadata buffer. Panics if called twice. (A
/// BundledProgram's suites load one after the other into them: reborrow per method.)
pub fn take_memory() -> (heapless::Vec<&'static mut [u8], 16>, &'static mut [u8]) {
    assert!(
        !TAKEN.swap(true, Ordering::Relaxed),
        "static memory handed out twice"
    );
    // SAFETY: TAKEN guarantees this is the only reference ever made to the two statics.
    let (mut pool, metadata): (&'static mut [u8], &'static mut [u8]) =
        unsafe { (&mut *ARENA_POOL.0.get(), &mut *METADATA.0.get()) };
    let mut arenas = heapless::Vec::new();
    for &size in ARENA_SIZES.iter() {
        let (arena, rest) = pool.split_at_mut(round_up(size));
        let _ = arenas.push(&mut arena[..size]);
        pool = rest;
    }
    (arenas, &mut metadata[..METADATA_BYTES])
}

/// The arena pool and the metadata buffer, as address ranges with their names (the page tables
/// name them in fault reports).
pub fn memory_ranges() -> [(usize, usize, &'static str); 2] {
    let pool = ARENA_POOL.0.get() as usize;
    let metadata = METADATA.0.get() as usize;
    [
        (pool, pool + pool_bytes(), "the planned arenas (.bss)"),
        (
            metadata,
            metadata + round_up(METADATA_BYTES),
            "the method's metadata buffer (.bss)",
        ),
    ]
}

/// Where the boot loader placed the program, and its length, when it is not linked in.
pub fn loaded_program() -> Option<(usize, usize)> {
    (!MODEL_LINKED).then_some((crate::board::MODEL_LOAD_ADDR, MODEL_LEN))
}
