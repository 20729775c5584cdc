//! The store of a Neon tile row (the epilogue every Neon micro-kernel and row kernel ends
//! with): scale, add `beta·C` and the bias, clamp, store.

use core::arch::aarch64::*;

/// Epilogue for one row: `c = clamp(alpha·acc (+ beta·c) (+ bias))` on `4·NV` contiguous
/// columns (clamped only when `range` is given).
///
/// # Safety
/// `crow .. crow + 4·NV` valid for reads/writes; `bias` null or valid for `4·NV` reads.
#[inline(always)]
pub(super) unsafe fn store_row<const NV: usize>(
    acc: [float32x4_t; NV],
    crow: *mut f32,
    alpha: f32,
    beta: f32,
    bias: *const f32,
    range: Option<(float32x4_t, float32x4_t)>,
) {
    // SAFETY: (whole body) the caller guarantees 4·NV valid C elements and 4·NV bias reads;
    // Neon is part of the aarch64 baseline. The rows use unaligned vector accesses, which
    // AArch64 permits on normal memory.
    unsafe {
        let va = vdupq_n_f32(alpha);
        for (v, x) in acc.iter().enumerate() {
            let mut y = vmulq_f32(*x, va);
            if beta != 0.0 {
                y = vfmaq_n_f32(y, vld1q_f32(crow.add(4 * v)), beta);
            }
            if !bias.is_null() {
                y = vaddq_f32(y, vld1q_f32(bias.add(4 * v)));
            }
            if let Some((lo, hi)) = range {
                y = vminnmq_f32(vmaxnmq_f32(y, lo), hi);
            }
            vst1q_f32(crow.add(4 * v), y);
        }
    }
}

/// Epilogue for one row when the accumulators already hold the result (`alpha = 1`,
/// `beta = 0`, the bias added up front): `c = acc`, clamped into `[lo, hi]` when `CLAMP`.
///
/// # Safety
/// `crow .. crow + 4·NV` valid for writes.
#[inline(always)]
pub(super) unsafe fn store_row_plain<const NV: usize, const CLAMP: bool>(
    acc: [float32x4_t; NV],
    crow: *mut f32,
    lo: float32x4_t,
    hi: float32x4_t,
) {
    // SAFETY: (whole body) the caller guarantees 4·NV writable C elements; Neon is part of
    // the aarch64 baseline; unaligned stores are allowed on normal memory.
    unsafe {
        for (v, x) in acc.iter().enumerate() {
            let y = if CLAMP {
                vminnmq_f32(vmaxnmq_f32(*x, lo), hi)
            } else {
                *x
            };
            vst1q_f32(crow.add(4 * v), y);
        }
    }
}
