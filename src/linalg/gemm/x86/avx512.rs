//! The AVX-512F micro-kernel (12 × 32: 24 `zmm` accumulators, two B vectors and one A
//! broadcast live at a time, of 32 registers) on x86_64 hosts that have it.

use super::super::body::{kernel_body, Lanes};
use super::super::contract::MicroKernel;
use core::arch::x86_64::*;

/// Sixteen f32 lanes in one AVX-512 register.
#[derive(Clone, Copy)]
struct Avx16(__m512);

impl Lanes for Avx16 {
    const W: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: callers run with AVX-512F enabled (Lanes contract).
        Avx16(unsafe { _mm512_setzero_ps() })
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        // SAFETY: AVX-512F enabled (Lanes contract).
        Avx16(unsafe { _mm512_set1_ps(x) })
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: 16 readable floats at p (caller); loadu accepts any alignment.
        Avx16(unsafe { _mm512_loadu_ps(p) })
    }
    #[inline(always)]
    unsafe fn madd(acc: Self, a: Self, b: Self) -> Self {
        // SAFETY: AVX-512F (which has FMA on zmm) enabled (Lanes contract).
        Avx16(unsafe { _mm512_fmadd_ps(a.0, b.0, acc.0) })
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        // SAFETY: AVX-512F enabled (Lanes contract).
        Avx16(unsafe { _mm512_mul_ps(a.0, b.0) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: 16 writable floats at p (caller); storeu accepts any alignment.
        unsafe { _mm512_storeu_ps(p, self.0) }
    }
}

const AVX512_MR: usize = 12;

/// # Safety
/// The [`MicroKernel`] contract with `MR = 12`, `NR = 32`, on a CPU with AVX-512F.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512(
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
    // SAFETY: contract forwarded; this function is only selected after run-time detection
    // of AVX-512F with OS support for the ZMM state (`select::avx512`).
    unsafe { kernel_body::<Avx16, AVX512_MR, 2>(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi) }
}

/// Shim with the plain `MicroKernelFn` type.
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx512_ptr(
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
    // SAFETY: the caller upholds the contract, which for this kernel includes running on a
    // CPU with AVX-512F (it is only handed out by `select::avx512`).
    unsafe { kernel_avx512(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi) }
}

// SAFETY: `kernel_avx512_ptr` implements the contract for a 12 × 32 tile (generic body with
// MR = 12, NR = 2·16); this static is handed out only after run-time detection of AVX-512F
// (`select::avx512`).
pub(in crate::linalg::gemm) static AVX512: MicroKernel =
    unsafe { MicroKernel::new("avx512-12x32", AVX512_MR, 32, kernel_avx512_ptr) };
