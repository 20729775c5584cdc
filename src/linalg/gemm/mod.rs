//! Cache-blocked single-precision GEMM: `C = alpha·A·B + beta·C (+ bias)`.
//!
//! A BLIS-style driver ([`sgemm`]) around an interchangeable register-tile
//! [`MicroKernel`]. The driver blocks the problem for the cache hierarchy and packs A
//! panels into caller-provided scratch memory; the micro-kernel sees a packed, zero-padded
//! A micro-panel, `k` rows of B (`ldb` apart) and one `MR × NR` tile of C.
//!
//! Two loop nests. When B has unit column stride (row-major weights: the common case) B is
//! **read in place** — weights are never copied — and A is packed once per depth block:
//!
//! ```text
//! for pc in 0..k step kc            // depth block (kernels that keep C in ZA ask for long kc)
//!   pack the column tail of B (n mod NR columns, zero-padded), if any
//!   for ic in 0..m step mc          // pack A[ic.., pc..] (mc × kc, MR-interleaved), once
//!     for jc in 0..n step NC        // B block read in place (stays in L2)
//!       for ir in 0..mc step MR     // one packed A micro-panel (stays in L1)
//!         for jr in jc.. step NR    // micro-kernel on one C tile, B rows b.rs apart
//! ```
//!
//! Any other B (transposed or general strides) is packed, BLIS order:
//!
//! ```text
//! for jc in 0..n step NC            // B panel columns
//!   for pc in 0..k step KC          // depth block: pack B[pc.., jc..] (KC × NC, NR-interleaved)
//!     for ic in 0..m step MC        // pack A[ic.., pc..] (MC × KC, MR-interleaved)
//!       for jr in 0..nc step NR     // one packed B micro-panel (stays in L1)
//!         for ir in 0..mc step MR   // one packed A micro-panel → micro-kernel on one C tile
//! ```
//!
//! The first depth block applies the caller's `beta`, later blocks accumulate (`beta = 1`),
//! and the last depth block adds the bias. Edge tiles (M or N tails) go straight into C
//! through a kernel's partial-tile entry where it has one, else are computed into a local tile
//! from zero-padded panels and only their valid part is merged into C; tiles of at most half
//! the kernel's rows go to its short-tile entry where it has one (SME2), which also lets a
//! split cut panels in half.
//!
//! Operands are strided views ([`MatRef`]), so transposed operands need no copy:
//! `linear` multiplies by `weight` viewed transposed, `bmm` walks batches by slicing.
//!
//! No allocation, no `std`: all temporary memory is the `scratch` slice the caller passes
//! (at most [`GEMM_SCRATCH_F32`] floats).
//!
//! Files: [`contract`] (the micro-kernel contract and blocking constants), [`matref`] (strided
//! operand views), [`driver`] (the two loop nests), [`tiles`] (the tile writer), [`pack_lhs_mr`] /
//! [`pack_rhs_nr`] (the panel packers, named after the layout they produce),
//! [`pack_rhs_nr_whole_k`] / [`pack_lhs_mr_whole_k`] (B and A packed ahead of time), [`gemv`] (the explicit `M = 1` path),
//! [`select`] (which kernel for this CPU and shape, every architecture), [`portable`] and
//! [`body`] (the plain-Rust kernel), [`arm`] and [`x86`] (hand-written kernels).

pub mod batch;
pub mod body;
mod checks;
pub mod contract;
pub mod driver;
pub mod gemv;
mod gemv_panels;
pub mod matref;
pub mod pack_lhs_mr;
pub mod pack_lhs_mr_whole_k;
pub mod pack_panel;
pub mod pack_rhs_nr;
pub mod pack_rhs_nr_whole_k;
pub mod portable;
pub mod select;
mod split;
pub mod tiles;

pub mod arm;
#[cfg(target_arch = "arm")]
pub mod arm32;
#[cfg(target_arch = "x86_64")]
pub mod x86;

pub use batch::{sgemm_batch, sgemm_batch_split};
pub use contract::{
    EdgeFn, ExpandFn, MicroKernel, MicroKernelFn, PackFn, PartFn, RowKernels, ShortFn, TileRunFn,
    WideA, GEMM_SCRATCH_F32, KC, MAX_MR, MAX_NR, MC, NC,
};
pub use driver::{
    sgemm, sgemm_clamped, sgemm_hinted, sgemm_packed_with, sgemm_prepacked,
    sgemm_prepacked_clamped, sgemm_prepacked_hinted, sgemm_prepacked_with, sgemm_scratch_len,
    sgemm_with, Epilogue,
};
pub use gemv::sgemv;
pub use matref::MatRef;
pub use pack_lhs_mr_whole_k::{pack_a_runs, pack_a_taps, PackedA};
pub use pack_rhs_nr_whole_k::{pack_b_ahead, PackedB};
pub use portable::PORTABLE;
pub use select::{
    kernel_for_prepacked, micro_kernel, micro_kernel_for, neon_tile_nr, prepack_nr, tile_nr, Isa,
};
pub use split::{split_hint, split_hint_prepacked, SplitHint};

#[cfg(test)]
mod parallel_tests;
#[cfg(test)]
mod tests;
