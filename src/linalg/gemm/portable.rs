//! The portable micro-kernel (4 × 16), plain Rust auto-vectorised for the build target.

use super::body::{kernel_body, Portable8};
use super::contract::MicroKernel;

/// Portable micro-kernel (`PORTABLE_MR × 16`).
const PORTABLE_MR: usize = 4;

/// # Safety
/// The [`MicroKernel`] contract with `MR = 4`, `NR = 16`.
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_portable(
    k: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: *mut f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
    lo: f32,
    hi: f32,
) {
    // SAFETY: same contract, forwarded; Portable8 needs no target feature.
    unsafe {
        kernel_body::<Portable8, PORTABLE_MR, 2>(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi)
    }
}

/// The portable micro-kernel: plain Rust, auto-vectorised for the build target's baseline SIMD.
// SAFETY: `kernel_portable` implements the contract for a 4 × 16 tile (it instantiates the
// generic body with MR = 4, NR = 2·8) and needs no CPU feature beyond the build target's.
pub static PORTABLE: MicroKernel =
    unsafe { MicroKernel::new("portable", PORTABLE_MR, 16, kernel_portable) };
