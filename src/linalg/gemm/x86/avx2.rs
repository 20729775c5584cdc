//! The AVX2+FMA micro-kernel (6 × 16) on x86_64 hosts.

use super::super::body::{kernel_body, Lanes};
use super::super::contract::MicroKernel;
use core::arch::x86_64::*;

/// Eight f32 lanes in one AVX register.
#[derive(Clone, Copy)]
struct Avx8(__m256);

impl Lanes for Avx8 {
    const W: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: callers run with AVX enabled (Lanes contract).
        Avx8(unsafe { _mm256_setzero_ps() })
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        // SAFETY: AVX enabled (Lanes contract).
        Avx8(unsafe { _mm256_set1_ps(x) })
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: 8 readable floats at p (caller); loadu accepts any alignment.
        Avx8(unsafe { _mm256_loadu_ps(p) })
    }
    #[inline(always)]
    unsafe fn madd(acc: Self, a: Self, b: Self) -> Self {
        // SAFETY: FMA enabled (Lanes contract).
        Avx8(unsafe { _mm256_fmadd_ps(a.0, b.0, acc.0) })
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        // SAFETY: AVX enabled (Lanes contract).
        Avx8(unsafe { _mm256_mul_ps(a.0, b.0) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: 8 writable floats at p (caller); storeu accepts any alignment.
        unsafe { _mm256_storeu_ps(p, self.0) }
    }
}

const AVX2_MR: usize = 6;

/// # Safety
/// The [`MicroKernel`] contract with `MR = 6`, `NR = 16`, on a CPU with AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2(
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
    // SAFETY: contract forwarded; this function is only selected after run-time
    // detection of AVX2 + FMA (`select::avx2_fma`), so Avx8's features are present.
    unsafe { kernel_body::<Avx8, AVX2_MR, 2>(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi) }
}

/// Shim with the plain `MicroKernelFn` type (target-feature functions cannot coerce to a
/// safe-feature fn pointer type directly on every toolchain).
#[allow(clippy::too_many_arguments)]
unsafe fn kernel_avx2_ptr(
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
    // SAFETY: the caller upholds the contract, which for this kernel includes running on
    // a CPU with AVX2 and FMA (it is only handed out by `select::avx2_fma`).
    unsafe { kernel_avx2(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi) }
}

// SAFETY: `kernel_avx2_ptr` implements the contract for a 6 × 16 tile (generic body with
// MR = 6, NR = 2·8); this static is private and handed out only after run-time detection
// of AVX2 + FMA (`select::avx2_fma`).
pub(in crate::linalg::gemm) static AVX2_FMA: MicroKernel =
    unsafe { MicroKernel::new("avx2-fma", AVX2_MR, 16, kernel_avx2_ptr) };
