//! Row kernels of the Neon tiles (`RowKernels`): `R` rows (1 ≤ R < MR) of an `MR × 4·NV`
//! tile whose A panel is packed `MR` rows wide, for the M edge of a product (29 rows on an
//! 8-row tile: three tiles and one 5-row call, no padded rows computed, nothing copied).
//!
//! Depth loop: four steps per iteration (two when R·NV > 16 accumulators leave too few
//! registers). The A groups of two steps come from one post-indexed load (`ld1` of 2·MR
//! floats), each B row (NV vectors) from one `ld1` post-indexed by the row stride, both in
//! `asm!` so that no pointer arithmetic is left in the loop; R·NV `fmla v.4s, v.4s, v.s[lane]`
//! per step (intrinsics: R·NV ≤ 21 accumulators stay in registers). 4 rows of the 8 × 8
//! tile: 41 instructions per four steps (32 FMLA). On a packed 8-column B panel (`ldb` = 8)
//! the 8-column rows load two B rows per `ld1` and take eight steps per iteration.
//! Epilogue: that of the tile kernels (`neon_epilogue`).

use core::arch::aarch64::*;

use super::neon_epilogue::{load_row, start, store_row, store_row_plain};
use crate::linalg::gemm::contract::clamps;

/// `acc[v] += b[v] · x[lane]` for every vector of one row (`lane` < 4, a constant after
/// inlining).
#[inline(always)]
fn fma_row<const NV: usize>(
    acc: &mut [float32x4_t; NV],
    b: &[float32x4_t; NV],
    x: float32x4_t,
    lane: usize,
) {
    // SAFETY: Neon is part of the aarch64 baseline; register-only operations.
    unsafe {
        for v in 0..NV {
            acc[v] = match lane {
                0 => vfmaq_laneq_f32::<0>(acc[v], b[v], x),
                1 => vfmaq_laneq_f32::<1>(acc[v], b[v], x),
                2 => vfmaq_laneq_f32::<2>(acc[v], b[v], x),
                _ => vfmaq_laneq_f32::<3>(acc[v], b[v], x),
            };
        }
    }
}

/// One depth step: rows `i < R` take their A value from `lo` (rows 0–3) or `hi` (rows 4–7).
#[inline(always)]
fn step<const R: usize, const NV: usize>(
    acc: &mut [[float32x4_t; NV]; R],
    b: &[float32x4_t; NV],
    lo: float32x4_t,
    hi: float32x4_t,
) {
    for (i, row) in acc.iter_mut().enumerate() {
        fma_row(row, b, if i < 4 { lo } else { hi }, i % 4);
    }
}

/// One B row (NV vectors at `*bp`) by a post-indexed `ld1` into v16–v19, then `*bp` moves
/// `stride` bytes on: the load and the pointer step are one instruction.
///
/// # Safety
/// `*bp` points at 4·NV readable floats.
#[inline(always)]
unsafe fn b_row<const NV: usize>(bp: &mut *const f32, stride: usize) -> [float32x4_t; NV] {
    let (mut x0, mut x1, mut x2, mut x3): (float32x4_t, float32x4_t, float32x4_t, float32x4_t);
    // SAFETY: (every arm) reads the NV vectors the caller vouches for; no stack, flags kept.
    unsafe {
        x3 = vdupq_n_f32(0.0);
        x2 = x3;
        match NV {
            2 => core::arch::asm!(
                "ld1 {{v16.4s, v17.4s}}, [{p}], {s}",
                p = inout(reg) *bp, s = in(reg) stride,
                out("v16") x0, out("v17") x1,
                options(nostack, readonly, preserves_flags)
            ),
            3 => core::arch::asm!(
                "ld1 {{v16.4s, v17.4s, v18.4s}}, [{p}], {s}",
                p = inout(reg) *bp, s = in(reg) stride,
                out("v16") x0, out("v17") x1, out("v18") x2,
                options(nostack, readonly, preserves_flags)
            ),
            _ => core::arch::asm!(
                "ld1 {{v16.4s, v17.4s, v18.4s, v19.4s}}, [{p}], {s}",
                p = inout(reg) *bp, s = in(reg) stride,
                out("v16") x0, out("v17") x1, out("v18") x2, out("v19") x3,
                options(nostack, readonly, preserves_flags)
            ),
        }
    }
    let all = [x0, x1, x2, x3];
    core::array::from_fn(|v| all[v])
}

/// Two consecutive B rows of two vectors each (four vectors at `*bp`: a packed 8-column
/// panel, `ldb` = 8 floats) by one post-indexed `ld1` into v16–v19; `*bp` moves 64 bytes on.
///
/// # Safety
/// `*bp` points at 16 readable floats.
#[inline(always)]
unsafe fn b_rows2<const NV: usize>(bp: &mut *const f32) -> ([float32x4_t; NV], [float32x4_t; NV]) {
    let (x0, x1, x2, x3): (float32x4_t, float32x4_t, float32x4_t, float32x4_t);
    // SAFETY: reads the 16 floats the caller vouches for; no stack, flags kept.
    unsafe {
        core::arch::asm!(
            "ld1 {{v16.4s, v17.4s, v18.4s, v19.4s}}, [{p}], #64",
            p = inout(reg) *bp,
            out("v16") x0, out("v17") x1, out("v18") x2, out("v19") x3,
            options(nostack, readonly, preserves_flags)
        );
    }
    let (r0, r1) = ([x0, x1], [x2, x3]);
    (
        core::array::from_fn(|v| r0[v]),
        core::array::from_fn(|v| r1[v]),
    )
}

/// `R` rows of an `MRS × 4·NV` tile (MRS = 4 or 8): the [`MicroKernel`] contract of that
/// tile restricted to its first R rows (`RowKernels` contract).
///
/// # Safety
/// `a` holds k groups of MRS floats, `b` k rows of 4·NV floats `ldb` apart, C rows `i < R`
/// at `c + i·rsc` hold 4·NV elements, `bias` null or 4·NV floats.
///
/// [`MicroKernel`]: crate::linalg::gemm::contract::MicroKernel
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn rows<const R: usize, const NV: usize, const MRS: usize>(
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
    // SAFETY: (whole body) loads at `a + MRS·p` (MRS floats, p < k) and `b + ldb·p` (4·NV
    // floats) are inside the operands, rows i < R of C and 4·NV bias floats per the
    // contract; Neon is part of the aarch64 baseline.
    unsafe {
        let (mut acc, plain) = start::<R, NV>(c, rsc, alpha, beta, bias);
        let (mut ap, mut bp) = (a, b);
        let ldb_bytes = ldb * 4;
        let zero = vdupq_n_f32(0.0);
        // Two steps' A groups from one post-indexed load: [lo p, (hi p), lo p+1, (hi p+1)].
        // In `asm!` so that LLVM neither splits it into one load per lane group nor keeps a
        // separate pointer add; `ld1` needs consecutive registers, so the second pair of
        // steps of an iteration takes v4–v7.
        macro_rules! groups {
            ($r0:tt, $r1:tt, $r2:tt, $r3:tt) => {{
                let (l0, h0, l1, h1): (float32x4_t, float32x4_t, float32x4_t, float32x4_t);
                if MRS == 8 {
                    // SAFETY: two whole groups (2·MRS floats) of the panel at `ap`.
                    core::arch::asm!(
                        concat!("ld1 {{", $r0, ".4s, ", $r1, ".4s, ", $r2, ".4s, ", $r3, ".4s}}, [{p}], #64"),
                        p = inout(reg) ap,
                        out($r0) l0, out($r1) h0, out($r2) l1, out($r3) h1,
                        options(nostack, readonly, preserves_flags)
                    );
                } else {
                    // SAFETY: as above.
                    core::arch::asm!(
                        concat!("ld1 {{", $r0, ".4s, ", $r1, ".4s}}, [{p}], #32"),
                        p = inout(reg) ap,
                        out($r0) l0, out($r1) l1,
                        options(nostack, readonly, preserves_flags)
                    );
                    (h0, h1) = (zero, zero);
                }
                (l0, h0, l1, h1)
            }};
        }
        let mut left = k;
        if NV == 2 && ldb_bytes == 32 && R * NV <= 16 {
            // A packed 8-column B panel: two B rows per load, eight steps per iteration.
            macro_rules! four {
                () => {{
                    let (l0, h0, l1, h1) = groups!("v0", "v1", "v2", "v3");
                    let (l2, h2, l3, h3) = groups!("v4", "v5", "v6", "v7");
                    let (b0, b1) = b_rows2::<NV>(&mut bp);
                    step(&mut acc, &b0, l0, h0);
                    step(&mut acc, &b1, l1, h1);
                    let (b2, b3) = b_rows2::<NV>(&mut bp);
                    step(&mut acc, &b2, l2, h2);
                    step(&mut acc, &b3, l3, h3);
                }};
            }
            while left >= 8 {
                four!();
                four!();
                left -= 8;
            }
            if left >= 4 {
                four!();
                left -= 4;
            }
        }
        // Four steps per iteration while the accumulators leave room for four B rows.
        if R * NV <= 16 {
            while left >= 4 {
                let (l0, h0, l1, h1) = groups!("v0", "v1", "v2", "v3");
                let (l2, h2, l3, h3) = groups!("v4", "v5", "v6", "v7");
                step(&mut acc, &b_row::<NV>(&mut bp, ldb_bytes), l0, h0);
                step(&mut acc, &b_row::<NV>(&mut bp, ldb_bytes), l1, h1);
                step(&mut acc, &b_row::<NV>(&mut bp, ldb_bytes), l2, h2);
                step(&mut acc, &b_row::<NV>(&mut bp, ldb_bytes), l3, h3);
                left -= 4;
            }
        }
        while left >= 2 {
            let (l0, h0, l1, h1) = groups!("v0", "v1", "v2", "v3");
            step(&mut acc, &b_row::<NV>(&mut bp, ldb_bytes), l0, h0);
            step(&mut acc, &b_row::<NV>(&mut bp, ldb_bytes), l1, h1);
            left -= 2;
        }
        if left == 1 {
            let l0 = vld1q_f32(ap);
            let h0 = if MRS == 8 { vld1q_f32(ap.add(4)) } else { zero };
            step(&mut acc, &load_row::<NV>(bp), l0, h0);
        }
        let clamp = clamps(lo, hi);
        let (vlo, vhi) = (vdupq_n_f32(lo), vdupq_n_f32(hi));
        for (i, row) in acc.into_iter().enumerate() {
            let crow = c.offset(i as isize * rsc);
            if plain && clamp {
                store_row_plain::<NV, true>(row, crow, vlo, vhi);
            } else if plain {
                store_row_plain::<NV, false>(row, crow, vlo, vhi);
            } else {
                store_row(row, crow, alpha, beta, bias, clamp.then_some((vlo, vhi)));
            }
        }
    }
}

/// Declares `$name`: [`rows`] for R rows of an `MRS × 4·NV` tile, as a `MicroKernelFn`.
macro_rules! row_kernel {
    ($($name:ident = $r:literal of $mrs:literal x $nv:literal;)*) => {$(
        /// Row kernel (`RowKernels` contract): the first rows of an A panel packed
        #[doc = concat!(stringify!($mrs), " rows wide, ", stringify!($r), " × 4·", stringify!($nv), ".")]
        ///
        /// # Safety
        /// The `MicroKernel` contract of its tile, for its first rows only.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name(
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
            // SAFETY: forwarded contract.
            unsafe { rows::<$r, $nv, $mrs>(k, a, b, ldb, c, rsc, alpha, beta, bias, lo, hi) }
        }
    )*};
}

row_kernel! {
    rows1_of8_x12 = 1 of 8 x 3;
    rows2_of8_x12 = 2 of 8 x 3;
    rows3_of8_x12 = 3 of 8 x 3;
    rows4_of8_x12 = 4 of 8 x 3;
    rows5_of8_x12 = 5 of 8 x 3;
    rows6_of8_x12 = 6 of 8 x 3;
    rows7_of8_x12 = 7 of 8 x 3;
    rows1_of8_x8 = 1 of 8 x 2;
    rows2_of8_x8 = 2 of 8 x 2;
    rows3_of8_x8 = 3 of 8 x 2;
    rows4_of8_x8 = 4 of 8 x 2;
    rows5_of8_x8 = 5 of 8 x 2;
    rows6_of8_x8 = 6 of 8 x 2;
    rows7_of8_x8 = 7 of 8 x 2;
    rows1_of4_x16 = 1 of 4 x 4;
    rows2_of4_x16 = 2 of 4 x 4;
    rows3_of4_x16 = 3 of 4 x 4;
}
