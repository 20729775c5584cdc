//! How the Neon integer tiles sum 4 products per 32-bit lane ([`Lanes`]): with FEAT_DotProd
//! one `SDOT` ([`Sdot`]); on cores without it (Cortex-A53, A57, A72, A73) in base Neon
//! ([`Mull`]: widening `SMULL`s, each product of two int8 values fitting an `i16` lane, and
//! pairwise `SADALP`s into `i32`). Both give the same integers, so a tile written over
//! [`Lanes`] gives the same bits with either.

use core::arch::aarch64::*;
use core::arch::asm;

/// `acc += Σ_{4 lanes} a · b` per 32-bit lane (one `SDOT`).
///
/// # Safety
/// The CPU must implement FEAT_DotProd.
#[inline(always)]
unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut r = acc;
    // SAFETY: register-only instruction; the caller guarantees FEAT_DotProd.
    unsafe {
        asm!(".arch_extension dotprod", "sdot {r:v}.4s, {a:v}.16b, {b:v}.16b",
            r = inout(vreg) r, a = in(vreg) a, b = in(vreg) b,
            options(pure, nomem, nostack, preserves_flags));
    }
    r
}

/// `acc += Σ_{t<4} w[4·lane + t] · a[4·L + t]` per lane (`SDOT` by element).
///
/// # Safety
/// The CPU must implement FEAT_DotProd.
#[inline(always)]
unsafe fn sdot_lane<const L: i32>(acc: int32x4_t, w: int8x16_t, a: int8x16_t) -> int32x4_t {
    let mut r = acc;
    // SAFETY: register-only instruction; the caller guarantees FEAT_DotProd.
    unsafe {
        asm!(".arch_extension dotprod", "sdot {r:v}.4s, {w:v}.16b, {a:v}.4b[{l}]",
            r = inout(vreg) r, w = in(vreg) w, a = in(vreg) a, l = const L,
            options(pure, nomem, nostack, preserves_flags));
    }
    r
}

/// How a `qc8w_p4x4` / `qb4w_p4x4` tile forms, per channel lane `j` of a 4-channel chunk `w`,
/// `Σ_{t<4} w[4·j + t] · a[4·L + t]` into its accumulator: one lane-indexed `SDOT`
/// ([`Sdot`], FEAT_DotProd), or, on cores without it (Cortex-A53, A57, A72, A73),
/// [`Mull`]: the 4 activations broadcast, two widening `SMULL`s and two pairwise `SADALP`s.
/// Both give the same `i32` sums.
pub trait Lanes {
    type Acc: Copy;
    /// Most 4-channel blocks one `qc8w_p4x4` tile holds in registers (its 4 rows' accumulators,
    /// the 4 rows' activations and one block's weights within the 32 vector registers).
    const BLOCKS: usize;
    fn zero() -> Self::Acc;
    /// # Safety
    /// The CPU has the instructions of the strategy.
    unsafe fn lane<const L: i32>(acc: Self::Acc, w: int8x16_t, a: int8x16_t) -> Self::Acc;
    /// The 4 channels' sums.
    fn sums(acc: Self::Acc) -> int32x4_t;
    /// The sums of 4 rows with 4 consecutive `qc8w_p4x4` blocks over the whole depth
    /// (`sums[b][i]`, channel `j` of block `b` in lane `j`), for tiles of [`Self::BLOCKS`] = 4.
    ///
    /// Default: [`sums_p4x4`].
    ///
    /// # Safety
    /// The CPU has the instructions of the strategy; `k % 16 == 0`; each `a[i]` valid for
    /// `k` reads, each `w[b]` for `4·k`.
    #[inline(always)]
    unsafe fn sums_4x16(a: [*const i8; 4], w: [*const u8; 4], k: usize) -> [[int32x4_t; 4]; 4]
    where
        Self: Sized,
    {
        // SAFETY: the caller's guarantees are the loop's.
        unsafe { sums_p4x4::<Self, 4>(a, w, k) }
    }
    /// `acc` plus the products `a[t] · w[t]` of two 16-byte vectors, in lanes whose total is
    /// what matters (the row-major tiles add every lane of an accumulator at the end).
    ///
    /// # Safety
    /// The CPU has the instructions of the strategy.
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, w: int8x16_t) -> int32x4_t;
}

/// [`Lanes`] by `SDOT` by element (FEAT_DotProd).
pub struct Sdot;

impl Lanes for Sdot {
    type Acc = int32x4_t;
    const BLOCKS: usize = 4;
    #[inline(always)]
    fn zero() -> int32x4_t {
        // SAFETY: Neon is part of the AArch64 baseline.
        unsafe { vdupq_n_s32(0) }
    }
    #[inline(always)]
    unsafe fn lane<const L: i32>(acc: int32x4_t, w: int8x16_t, a: int8x16_t) -> int32x4_t {
        // SAFETY: the caller guarantees FEAT_DotProd.
        unsafe { sdot_lane::<L>(acc, w, a) }
    }
    #[inline(always)]
    fn sums(acc: int32x4_t) -> int32x4_t {
        acc
    }
    #[inline(always)]
    unsafe fn sums_4x16(a: [*const i8; 4], w: [*const u8; 4], k: usize) -> [[int32x4_t; 4]; 4] {
        // SAFETY: the caller's guarantees are the kernel's.
        unsafe { super::sdot16::neon_sdot_4x16_qc8w_p4x4(a, w, k) }
    }
    #[inline(always)]
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, w: int8x16_t) -> int32x4_t {
        // SAFETY: the caller guarantees FEAT_DotProd.
        unsafe { sdot(acc, a, w) }
    }
}

/// [`Lanes`] in base Neon (Armv8.0): the chunk's products are at most `128 · 128` in
/// magnitude, so each fits an `i16` lane of `SMULL`; `SADALP` adds neighbouring products into
/// `i32` pairs, channels 0 and 1 in the first accumulator, 2 and 3 in the second, and `ADDP`
/// joins the pairs at the end.
pub struct Mull;

impl Lanes for Mull {
    type Acc = (int32x4_t, int32x4_t);
    const BLOCKS: usize = 2;
    #[inline(always)]
    fn zero() -> (int32x4_t, int32x4_t) {
        // SAFETY: Neon is part of the AArch64 baseline.
        unsafe { (vdupq_n_s32(0), vdupq_n_s32(0)) }
    }
    #[inline(always)]
    unsafe fn lane<const L: i32>(
        acc: (int32x4_t, int32x4_t),
        w: int8x16_t,
        a: int8x16_t,
    ) -> (int32x4_t, int32x4_t) {
        // SAFETY: base Neon only.
        unsafe {
            let d = vreinterpretq_s8_s32(vdupq_laneq_s32::<L>(vreinterpretq_s32_s8(a)));
            let lo = vmull_s8(vget_low_s8(w), vget_low_s8(d));
            let hi = vmull_high_s8(w, d);
            (vpadalq_s16(acc.0, lo), vpadalq_s16(acc.1, hi))
        }
    }
    #[inline(always)]
    fn sums(acc: (int32x4_t, int32x4_t)) -> int32x4_t {
        // SAFETY: base Neon only.
        unsafe { vpaddq_s32(acc.0, acc.1) }
    }
    #[inline(always)]
    unsafe fn dot(acc: int32x4_t, a: int8x16_t, w: int8x16_t) -> int32x4_t {
        // SAFETY: base Neon only; each product is at most 128 · 128 in magnitude.
        unsafe {
            let lo = vmull_s8(vget_low_s8(a), vget_low_s8(w));
            vpadalq_s16(vpadalq_s16(acc, lo), vmull_high_s8(a, w))
        }
    }
}

/// The sums of rows `ar` with `NB` blocks of a `qc8w_p4x4` filter over the whole depth
/// (`sums[b][i]`, channel `j` of block `b` in lane `j`): per 16 depth steps 4 activation
/// loads, 4 weight vectors per block, 16 lane products per block.
///
/// # Safety
/// The instructions of `D`; `k % 16 == 0`; each `ar[i]` valid for `k` reads, each `w[b]` for
/// `4·k`.
#[inline(always)]
pub(super) unsafe fn sums_p4x4<D: Lanes, const NB: usize>(
    ar: [*const i8; 4],
    w: [*const u8; NB],
    k: usize,
) -> [[int32x4_t; 4]; NB] {
    // SAFETY: reads at `t < k` of each row and `4·t + 64 ≤ 4·k` of each block.
    unsafe {
        let mut acc = [[D::zero(); 4]; NB];
        let mut t = 0;
        while t < k {
            let va = ar.map(|p| vld1q_s8(p.add(t)));
            for b in 0..NB {
                let wp = w[b].add(4 * t) as *const i8;
                let wv = [
                    vld1q_s8(wp),
                    vld1q_s8(wp.add(16)),
                    vld1q_s8(wp.add(32)),
                    vld1q_s8(wp.add(48)),
                ];
                for i in 0..4 {
                    let mut s = acc[b][i];
                    s = D::lane::<0>(s, wv[0], va[i]);
                    s = D::lane::<1>(s, wv[1], va[i]);
                    s = D::lane::<2>(s, wv[2], va[i]);
                    s = D::lane::<3>(s, wv[3], va[i]);
                    acc[b][i] = s;
                }
            }
            t += 16;
        }
        acc.map(|blk| blk.map(D::sums))
    }
}
