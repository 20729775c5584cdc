//! The two ends of every Neon micro-kernel and row kernel: where the accumulators start
//! ([`start`]) and the store of a tile row (scale, add `beta·C` and the bias, clamp, store).

use core::arch::aarch64::*;

/// `NV` vectors at `p`: one row of C, the bias, or one row of B.
///
/// # Safety
/// `p .. p + 4·NV` readable.
#[inline(always)]
pub(super) unsafe fn load_row<const NV: usize>(p: *const f32) -> [float32x4_t; NV] {
    // SAFETY: per the caller; unaligned loads are allowed.
    core::array::from_fn(|v| unsafe { vld1q_f32(p.add(4 * v)) })
}

/// The accumulators of an `R × 4·NV` tile before its depth loop, and whether they end as the
/// result (`plain`: no scaling, no C read at the store). `plain` when `alpha = 1` and either
/// `beta = 0` (they start from the bias, or 0) or `beta = 1` without a bias (they start from
/// C itself: a product accumulated into C, e.g. over depth chunks); otherwise they start at 0
/// and the store applies `alpha`, `beta` and the bias.
///
/// # Safety
/// When `alpha = beta = 1` and `bias` is null, rows `i < R` at `c + i·rsc` hold 4·NV
/// readable floats; a non-null `bias` holds 4·NV floats.
#[inline(always)]
pub(super) unsafe fn start<const R: usize, const NV: usize>(
    c: *const f32,
    rsc: isize,
    alpha: f32,
    beta: f32,
    bias: *const f32,
) -> ([[float32x4_t; NV]; R], bool) {
    let from_c = alpha == 1.0 && beta == 1.0 && bias.is_null();
    let plain = (alpha == 1.0 && beta == 0.0) || from_c;
    // SAFETY: C rows only when `from_c`, the bias only when non-null (caller); Neon is part
    // of the aarch64 baseline.
    let acc = unsafe {
        if from_c {
            core::array::from_fn(|i| load_row::<NV>(c.offset(i as isize * rsc)))
        } else if plain && !bias.is_null() {
            [load_row::<NV>(bias); R]
        } else {
            [[vdupq_n_f32(0.0); NV]; R]
        }
    };
    (acc, plain)
}

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

/// Epilogue for one row of an N-edge tile (the accumulators already hold the result): its
/// first `NC` columns (`NC ≤ 4·NV`) stored, clamped into `[lo, hi]` when `CLAMP`; whole
/// vectors, then the last 1–3 columns as two lanes and/or one lane. `NC` is a constant so
/// that the row is straight-line code ([`store_tile_cols`] picks it once per tile).
///
/// # Safety
/// `crow .. crow + NC` valid for writes.
#[inline(always)]
unsafe fn store_row_cols<const NV: usize, const CLAMP: bool, const NC: usize>(
    acc: &[float32x4_t; NV],
    crow: *mut f32,
    lo: float32x4_t,
    hi: float32x4_t,
) {
    // SAFETY: (whole body) whole vectors only for columns 4v + 4 ≤ NC, the partial stores
    // only columns 4·(NC/4) .. NC; the caller guarantees NC writable floats; Neon is part of
    // the aarch64 baseline; unaligned stores are allowed on normal memory.
    unsafe {
        for (v, x) in acc.iter().enumerate() {
            if 4 * v >= NC {
                break;
            }
            let y = if CLAMP {
                vminnmq_f32(vmaxnmq_f32(*x, lo), hi)
            } else {
                *x
            };
            let p = crow.add(4 * v);
            match NC - 4 * v {
                1 => vst1q_lane_f32::<0>(p, y),
                2 => vst1_f32(p, vget_low_f32(y)),
                3 => {
                    vst1_f32(p, vget_low_f32(y));
                    vst1q_lane_f32::<2>(p.add(2), y);
                }
                _ => vst1q_f32(p, y),
            }
        }
    }
}

/// The epilogue of an `R × 4·NV` N-edge tile: rows `i < R` at `c + i·rsc`, each stored in
/// its first `nc` columns (1 ≤ `nc` ≤ 4·NV ≤ 16) by [`store_row_cols`], clamped when `CLAMP`.
///
/// # Safety
/// Rows `i < R` at `c + i·rsc` hold `nc` writable floats.
#[inline(always)]
pub(super) unsafe fn store_tile_cols<const R: usize, const NV: usize, const CLAMP: bool>(
    acc: &[[float32x4_t; NV]; R],
    c: *mut f32,
    rsc: isize,
    nc: usize,
    lo: float32x4_t,
    hi: float32x4_t,
) {
    macro_rules! rows {
        ($n:literal) => {
            for (i, row) in acc.iter().enumerate() {
                // SAFETY: row i < R holds nc = $n writable floats (caller).
                unsafe { store_row_cols::<NV, CLAMP, $n>(row, c.offset(i as isize * rsc), lo, hi) }
            }
        };
    }
    match nc {
        0 => {}
        1 => rows!(1),
        2 => rows!(2),
        3 => rows!(3),
        4 => rows!(4),
        5 => rows!(5),
        6 => rows!(6),
        7 => rows!(7),
        8 => rows!(8),
        9 => rows!(9),
        10 => rows!(10),
        11 => rows!(11),
        12 => rows!(12),
        13 => rows!(13),
        14 => rows!(14),
        15 => rows!(15),
        _ => rows!(16),
    }
}
