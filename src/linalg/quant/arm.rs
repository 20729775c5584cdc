//! Neon int8 dot-product tiles (FEAT_DotProd `SDOT`): 4 rows of quantized activations times
//! 4 weight rows, `i32` sums over a run of the depth.
//!
//! Layout contract: every row pointer addresses `len` int8 activations (natural order) or the
//! weight bytes of the same depth run (`len` bytes for int8 rows, `len / 2` for 4-bit rows,
//! low nibble first, stored `q + 8`). `len` is a multiple of 16 (int8) or 32 (4-bit). Rows may
//! repeat (a partial tile repeats its last row; the caller discards the copies).
//!
//! Per 16 depth steps the int8 tile does 8 loads and 16 `SDOT`s; per 32 steps the 4-bit tile
//! does 4 de-interleaving `LD2`s of activations (even depths, odd depths), 4 weight loads,
//! 12 bit operations to turn the nibbles into `16 · w` (`EOR 0x88` makes each nibble the
//! two's-complement of `q`, `SHL #4` / `AND 0xF0` put it in the high half of a byte) and
//! 32 `SDOT`s; its sums are `16 ×` the dot product, shifted back exactly.

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

/// Horizontal sums of the 16 accumulators.
#[inline(always)]
fn reduce(acc: [[int32x4_t; 4]; 4]) -> [[i32; 4]; 4] {
    let mut out = [[0i32; 4]; 4];
    for i in 0..4 {
        for j in 0..4 {
            // SAFETY: Neon is part of the AArch64 baseline.
            out[i][j] = unsafe { vaddvq_s32(acc[i][j]) };
        }
    }
    out
}

/// int8 × int8 tile: `out[i][j] = Σ_{t<len} a[i][t] · w[j][t]`.
///
/// # Safety
/// FEAT_DotProd; `len % 16 == 0`; each `a[i]` and `w[j]` valid for `len` byte reads.
#[target_feature(enable = "dotprod")]
pub unsafe fn dot_i8_4x4(a: &[*const i8; 4], w: &[*const i8; 4], len: usize) -> [[i32; 4]; 4] {
    // SAFETY: (whole body) loads stay within the `len` bytes the caller guarantees per row;
    // the caller guarantees FEAT_DotProd for `sdot`.
    unsafe {
        let z = vdupq_n_s32(0);
        let mut acc = [[z; 4]; 4];
        let mut t = 0;
        while t < len {
            let va = [
                vld1q_s8(a[0].add(t)),
                vld1q_s8(a[1].add(t)),
                vld1q_s8(a[2].add(t)),
                vld1q_s8(a[3].add(t)),
            ];
            let vw = [
                vld1q_s8(w[0].add(t)),
                vld1q_s8(w[1].add(t)),
                vld1q_s8(w[2].add(t)),
                vld1q_s8(w[3].add(t)),
            ];
            for i in 0..4 {
                for j in 0..4 {
                    acc[i][j] = sdot(acc[i][j], va[i], vw[j]);
                }
            }
            t += 16;
        }
        reduce(acc)
    }
}

/// int8 × 4-bit tile: `out[i][j] = Σ_{t<len} a[i][t] · (nibble(w[j], t) - 8)`.
///
/// # Safety
/// FEAT_DotProd; `len % 32 == 0`; each `a[i]` valid for `len` reads, each `w[j]` for `len / 2`.
#[target_feature(enable = "dotprod")]
pub unsafe fn dot_q4_4x4(a: &[*const i8; 4], w: &[*const u8; 4], len: usize) -> [[i32; 4]; 4] {
    // SAFETY: (whole body) loads stay within the rows' guaranteed extents; FEAT_DotProd is
    // guaranteed by the caller.
    unsafe {
        let z = vdupq_n_s32(0);
        let mut acc = [[z; 4]; 4];
        let flip = vdupq_n_u8(0x88);
        let hi_mask = vdupq_n_u8(0xF0);
        let mut t = 0;
        while t < len {
            let va = [
                vld2q_s8(a[0].add(t)),
                vld2q_s8(a[1].add(t)),
                vld2q_s8(a[2].add(t)),
                vld2q_s8(a[3].add(t)),
            ];
            for j in 0..4 {
                let b = veorq_u8(vld1q_u8(w[j].add(t / 2)), flip);
                let even = vreinterpretq_s8_u8(vshlq_n_u8::<4>(b));
                let odd = vreinterpretq_s8_u8(vandq_u8(b, hi_mask));
                for i in 0..4 {
                    acc[i][j] = sdot(acc[i][j], va[i].0, even);
                    acc[i][j] = sdot(acc[i][j], va[i].1, odd);
                }
            }
            t += 32;
        }
        let mut out = reduce(acc);
        for row in out.iter_mut() {
            for v in row.iter_mut() {
                *v >>= 4; // every product was 16 · a · w: exact
            }
        }
        out
    }
}
