//! Neon 3×3 depthwise convolution in NCHW (ATen's layout, the portable kernel), stride 1 or 2
//! across, any stride down, dilation and padding. Each input plane is first copied into a
//! zero-bordered plane in scratch (`super::padded_dims`), so that every output, borders included,
//! is one block computation: blocks of four neighbouring outputs keep one accumulator vector
//! across all nine taps (the nine weights in registers for the whole plane) and are stored
//! once, clamped. A tap's four input columns are one `ld1` (stride 1) or the even half of one
//! de-interleaving `ld2` (stride 2). Per block: 9 loads, 9 FMLA and a store (the per-tap row
//! passes of the generic loop load and store the output once per tap).

use core::arch::aarch64::*;

use super::super::Conv2d;

/// One output plane `op` (`OH × OW`) from input plane `xi` (`H × W`), weights `w9` (row-major
/// 3×3), bias `b`, clamp `range`; `pad` holds the `super::padded_dims` plane `(rows, cols)`.
#[allow(clippy::too_many_arguments)]
pub fn plane(
    p: &Conv2d,
    xi: &[f32],
    w9: &[f32; 9],
    b: f32,
    op: &mut [f32],
    range: Option<(f32, f32)>,
    (rows, cols): (usize, usize),
    pad: &mut [f32],
) {
    let pad = &mut pad[..rows * cols];
    pad.fill(0.0);
    for (iy, xr) in xi.chunks_exact(p.in_w).enumerate() {
        let at = (p.pad_top + iy) * cols + p.pad_left;
        pad[at..at + p.in_w].copy_from_slice(xr);
    }
    let (full, rest) = (p.out_w / 4, p.out_w % 4);
    let s = p.stride_w;
    for (oy, orow) in op.chunks_exact_mut(p.out_w).enumerate() {
        let r0 = oy * p.stride_h * cols;
        let r = [r0, r0 + p.dil_h * cols, r0 + 2 * p.dil_h * cols];
        // SAFETY: padded_dims makes every tap of every block of this row, whole blocks up to
        // ceil(OW / 4), read inside the plane (rows oy·sh + ky·dh < rows, columns below
        // cols); the first `full` blocks write outputs below 4·full ≤ OW, the last partial
        // one a four-float stack buffer.
        unsafe {
            let base = pad.as_ptr();
            let rp = [base.add(r[0]), base.add(r[1]), base.add(r[2])];
            let args = (rp, p.dil_w, orow.as_mut_ptr(), full, w9, b, range);
            if s == 1 {
                blocks::<1>(args);
            } else {
                blocks::<2>(args);
            }
            if rest > 0 {
                let mut tail = [0.0f32; 4];
                let off = 4 * full * s;
                let rp = [rp[0].add(off), rp[1].add(off), rp[2].add(off)];
                let args = (rp, p.dil_w, tail.as_mut_ptr(), 1, w9, b, range);
                if s == 1 {
                    blocks::<1>(args);
                } else {
                    blocks::<2>(args);
                }
                orow[4 * full..].copy_from_slice(&tail[..rest]);
            }
        }
    }
}

/// Arguments of [`blocks`]: the three input rows (at the first block's first column), the
/// dilation across, the first output, the number of blocks, weights, bias, clamp.
type Blocks<'a> = (
    [*const f32; 3],
    usize,
    *mut f32,
    usize,
    &'a [f32; 9],
    f32,
    Option<(f32, f32)>,
);

/// `nb` blocks of four outputs of one row at stride `S` across: per block nine loads (one
/// `ld1`, or the even half of one `ld2`), nine FMLA by a weight held in a register, one store.
///
/// # Safety
/// Every block's input columns (`4·S·block + kx·dil + 0 .. 4·S` from each row pointer) are
/// readable and the `4·nb` outputs writable.
#[inline(always)]
unsafe fn blocks<const S: usize>((rows, dil, out, nb, w, b, range): Blocks<'_>) {
    // SAFETY: (whole body) Neon is in the AArch64 baseline; the accesses are those the caller
    // vouches for.
    unsafe {
        let ld = |p: *const f32| {
            if S == 1 {
                vld1q_f32(p)
            } else {
                vld2q_f32(p).0
            }
        };
        let [w0, w1, w2, w3, w4, w5, w6, w7, w8] = *w;
        let (lo, hi) = range.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
        let (vb, vlo, vhi) = (vdupq_n_f32(b), vdupq_n_f32(lo), vdupq_n_f32(hi));
        let [mut p0, mut p1, mut p2] = rows;
        let mut o = out;
        for _ in 0..nb {
            let mut acc = vfmaq_n_f32(vb, ld(p0), w0);
            acc = vfmaq_n_f32(acc, ld(p0.add(dil)), w1);
            acc = vfmaq_n_f32(acc, ld(p0.add(2 * dil)), w2);
            acc = vfmaq_n_f32(acc, ld(p1), w3);
            acc = vfmaq_n_f32(acc, ld(p1.add(dil)), w4);
            acc = vfmaq_n_f32(acc, ld(p1.add(2 * dil)), w5);
            acc = vfmaq_n_f32(acc, ld(p2), w6);
            acc = vfmaq_n_f32(acc, ld(p2.add(dil)), w7);
            acc = vfmaq_n_f32(acc, ld(p2.add(2 * dil)), w8);
            if range.is_some() {
                acc = vminnmq_f32(vmaxnmq_f32(acc, vlo), vhi);
            }
            vst1q_f32(o, acc);
            (p0, p1, p2) = (p0.add(4 * S), p1.add(4 * S), p2.add(4 * S));
            o = o.add(4);
        }
    }
}
