//! Neon 3×3 depthwise convolution in NCHW (ATen's layout, the portable kernel), stride 1 or 2
//! across, any stride down, dilation and padding: per output row, blocks of four neighbouring
//! outputs keep one accumulator vector across all nine taps (the nine weights in registers for
//! the whole plane) and are stored once, clamped. A tap's four input columns are one `ld1`
//! (stride 1) or the even half of one de-interleaving `ld2` (stride 2). Columns whose taps are
//! not all inside the row (the borders) and the last columns of a row that do not fill a block
//! are summed tap by tap. Per block: 9 loads, 9 FMLA and a store (the per-tap row passes of
//! the generic loop load and store the output once per tap).

use core::arch::aarch64::*;

use super::super::Conv2d;

/// Whether this path takes `p` (3×3, stride 1 or 2 across).
pub(super) fn accepts(p: &Conv2d) -> bool {
    p.kh == 3 && p.kw == 3 && (p.stride_w == 1 || p.stride_w == 2)
}

/// One output plane `op` (`OH × OW`) from input plane `xi` (`H × W`), weights `w9` (row-major
/// 3×3), bias `b`, clamp `range`. `p` passed [`accepts`]; the slices hold whole planes.
pub(super) fn plane(
    p: &Conv2d,
    xi: &[f32],
    w9: &[f32; 9],
    b: f32,
    op: &mut [f32],
    range: Option<(f32, f32)>,
) {
    // Interior columns: every tap inside the row.
    let (mut cl, mut ch) = (0, p.out_w);
    for kx in 0..3 {
        let (lo, hi) = p.valid_cols(kx);
        cl = cl.max(lo);
        ch = ch.min(hi);
    }
    let (lo, hi) = range.unwrap_or((f32::NEG_INFINITY, f32::INFINITY));
    let s = p.stride_w;
    for (oy, orow) in op.chunks_exact_mut(p.out_w).enumerate() {
        let rows: [Option<&[f32]>; 3] = core::array::from_fn(|ky| {
            p.in_row(oy, ky)
                .map(|iy| &xi[iy * p.in_w..(iy + 1) * p.in_w])
        });
        // Blocks of four interior outputs.
        let mut ox = cl;
        if cl < ch {
            while ox + 4 <= ch {
                // SAFETY: (whole block) Neon is in the AArch64 baseline. Output columns
                // ox .. ox + 4 are interior, so tap kx of column ox + j reads input column
                // (ox + j)·s + kx·dil − pad ≤ (ch − 1)·s + kx·dil − pad < in_w; the stride-2
                // `ld2` also reads the odd column after each even one, at most
                // (ox + 3)·2 + kx·dil − pad + 1, which is < in_w unless the block's last
                // column is the row's last input column: such blocks are left to the scalar
                // loop (checked below).
                unsafe {
                    let first = ox * s - p.pad_left;
                    if s == 2 && first + 2 * p.dil_w + 8 > p.in_w {
                        break;
                    }
                    let mut acc = vdupq_n_f32(b);
                    for (ky, row) in rows.iter().enumerate() {
                        let Some(row) = row else { continue };
                        for kx in 0..3 {
                            let at = row.as_ptr().add(first + kx * p.dil_w);
                            let v = if s == 1 {
                                vld1q_f32(at)
                            } else {
                                vld2q_f32(at).0
                            };
                            acc = vfmaq_n_f32(acc, v, w9[ky * 3 + kx]);
                        }
                    }
                    if range.is_some() {
                        acc = vminnmq_f32(vmaxnmq_f32(acc, vdupq_n_f32(lo)), vdupq_n_f32(hi));
                    }
                    vst1q_f32(orow.as_mut_ptr().add(ox), acc);
                }
                ox += 4;
            }
        }
        // Borders and the rest, tap by tap.
        for (j, o) in orow.iter_mut().enumerate() {
            if (cl..ox).contains(&j) {
                continue;
            }
            let mut acc = b;
            for (ky, row) in rows.iter().enumerate() {
                let Some(row) = row else { continue };
                for kx in 0..3 {
                    if let Some(ix) = p.in_col(j, kx) {
                        acc += w9[ky * 3 + kx] * row[ix];
                    }
                }
            }
            *o = if range.is_some() {
                acc.max(lo).min(hi)
            } else {
                acc
            };
        }
    }
}
