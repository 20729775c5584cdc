//! The plain-Rust micro-kernel body, generic over a lane type (`Lanes`): instantiated by
//! the portable kernel (plain arrays) and the x86 AVX2 kernel (`__m256`).

use super::contract::MAX_NR;

/// A SIMD-vector-like accumulator lane group used by the generic micro-kernel body.
/// Implementations: [`Portable8`] (plain arrays that LLVM auto-vectorises for the target's
/// baseline SIMD) and, on x86_64, an AVX2/FMA `__m256` wrapper.
pub(in crate::linalg::gemm) trait Lanes: Copy {
    const W: usize;
    /// # Safety
    /// Caller must run on a CPU with the implementation's target features.
    unsafe fn zero() -> Self;
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn splat(x: f32) -> Self;
    /// # Safety
    /// `p` f32-aligned and valid for `W` reads; target features as [`Lanes::zero`].
    unsafe fn load(p: *const f32) -> Self;
    /// `acc + a * b` (fused where the target has FMA).
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn madd(acc: Self, a: Self, b: Self) -> Self;
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn mul(a: Self, b: Self) -> Self;
    /// # Safety
    /// `p` 16-byte aligned and valid for `W` writes; target features as [`Lanes::zero`].
    unsafe fn store(self, p: *mut f32);
}

/// Four f32 lanes, 16-byte aligned so that loads and stores are single vector accesses even
/// on strict-alignment targets.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Quad([f32; 4]);

/// Eight f32 lanes as plain arrays (portable; auto-vectorised to the target's baseline SIMD).
#[derive(Clone, Copy)]
#[repr(C)]
pub(in crate::linalg::gemm) struct Portable8([Quad; 2]);

impl Lanes for Portable8 {
    const W: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Portable8([Quad([0.0; 4]); 2])
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        Portable8([Quad([x; 4]); 2])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: the caller guarantees 8 readable floats at `p` (`Lanes::load` contract);
        // the read is unaligned (B may be read in place, only f32-aligned).
        unsafe { core::ptr::read_unaligned(p as *const Portable8) }
    }
    #[inline(always)]
    unsafe fn madd(acc: Self, a: Self, b: Self) -> Self {
        let mut r = acc;
        for h in 0..2 {
            for l in 0..4 {
                r.0[h].0[l] += a.0[h].0[l] * b.0[h].0[l];
            }
        }
        r
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        let mut r = a;
        for h in 0..2 {
            for l in 0..4 {
                r.0[h].0[l] *= b.0[h].0[l];
            }
        }
        r
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        // SAFETY: the caller guarantees 8 writable floats at `p`, 16-byte aligned.
        unsafe { core::ptr::write(p as *mut Portable8, self) }
    }
}

/// One tile row of results, aligned for [`Lanes::store`].
#[repr(C, align(64))]
struct AlignedRow([f32; MAX_NR]);

/// The generic micro-kernel body: an `MR × (NV·W)` accumulator tile of `V` lanes.
/// `#[inline(always)]` so that each instantiation is compiled with the target features of
/// the function it is inlined into.
///
/// # Safety
/// The [`MicroKernel`] contract with `MR` and `NR = NV * V::W`, and the CPU supports `V`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(in crate::linalg::gemm) unsafe fn kernel_body<V: Lanes, const MR: usize, const NV: usize>(
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
    // SAFETY: (whole body) per the contract, `a` holds k*MR floats and `b` k rows of NR
    // floats `ldb` apart, so every `a.add(p*MR + i)` / `b.add(p*ldb + v*W)..+W` read is in
    // bounds; C tile elements
    // (i, j) for i < MR, j < NR and bias[..NR] are valid per the contract; the CPU supports
    // V's target features (caller).
    unsafe {
        let mut acc = [[V::zero(); NV]; MR];
        let mut ap = a;
        let mut bp = b;
        for _ in 0..k {
            let mut bv = [V::zero(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = V::load(bp.add(v * V::W));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = V::splat(*ap.add(i));
                for v in 0..NV {
                    row[v] = V::madd(row[v], ai, bv[v]);
                }
            }
            ap = ap.add(MR);
            bp = bp.add(ldb);
        }
        let valpha = V::splat(alpha);
        const { assert!(NV * V::W <= MAX_NR) };
        let nr = NV * V::W;
        let mut buf = AlignedRow([0.0f32; MAX_NR]);
        let vals = &mut buf.0;
        for (i, row) in acc.iter().enumerate() {
            for (v, &x) in row.iter().enumerate() {
                V::mul(x, valpha).store(vals.as_mut_ptr().add(v * V::W));
            }
            let crow = c.offset(i as isize * rsc);
            // Contiguous row: loops the compiler vectorises.
            if beta != 0.0 {
                for (j, x) in vals[..nr].iter_mut().enumerate() {
                    *x += beta * *crow.add(j);
                }
            }
            if !bias.is_null() {
                for (j, x) in vals[..nr].iter_mut().enumerate() {
                    *x += *bias.add(j);
                }
            }
            if super::contract::clamps(lo, hi) {
                for x in vals[..nr].iter_mut() {
                    *x = super::contract::clamp(*x, lo, hi);
                }
            }
            core::ptr::copy_nonoverlapping(vals.as_ptr(), crow, nr);
        }
    }
}
